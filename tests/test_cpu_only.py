"""A CPU-only capture (``nsys profile -t osrt,nvtx -s cpu``: no GPU rows): the tools that read host rows (nvtx,
range_detail, cpu, api, sync, overview, timeline) work over the host rows' span; nsys' own diagnostics are listed by
``info`` and noted by the tool whose figures they touch. Planted exports, every figure known by construction."""
from __future__ import annotations

import json

import pytest

from dashcam.profile.host_window import HOST_WINDOW_NOTE
from dashcam.reports.timeline import build_timeline
from dashcam.reports.timeline.caption import HOST_AXIS_LABEL, NOTHING_DRAWN
from dashcam.testing.builder import ExportBuilder
from dashcam.tools import get_tool

from .conftest import MS, SHARED_NO_GPU, run_cli

LOST_NVTX = "Not all NVTX events might have been collected."


def cpu_only() -> ExportBuilder:
    """pid 700: thread 700 runs three `step` ranges [10i, 10i + 8] ms and polls 3 ms; thread 701 (`loader`) three
    `load` ranges [10i, 10i + 2] ms and reads 1 ms. Context switches of thread 700 only: on its CPU [0, 20) and from
    25 ms. The host rows span [0, 28] ms. nsys warned that NVTX events were lost; no CUDA was traced."""
    b = ExportBuilder("2024")
    b.process(700, "python")
    b.thread(700, 700, "python")
    b.thread(700, 701, "loader")
    for i in range(3):
        b.nvtx("step", i * 10 * MS, i * 10 * MS + 8 * MS, pid=700)
        b.nvtx("load", i * 10 * MS, i * 10 * MS + 2 * MS, pid=700, tid=701)
    b.osrt("read", 1 * MS, 2 * MS, pid=700, tid=701)
    b.osrt("poll", 12 * MS, 15 * MS, pid=700)
    b.sched(0, True, pid=700)
    b.sched(20 * MS, False, pid=700)
    b.sched(25 * MS, True, pid=700)
    b.diagnostic(LOST_NVTX, t=5 * MS, pid=700)
    b.diagnostic("No CUDA events collected. Does the process use CUDA?", t=5 * MS, pid=700)
    b.diagnostic("Profiling has started.", severity=1)
    return b


@pytest.fixture
def profile(build):
    return build(cpu_only())


def test_nvtx_ranges_without_gpu_rows(profile):
    r = get_tool("nvtx")(profile)
    assert (r.window.start_ns, r.window.end_ns) == (0, 28 * MS)
    groups = {g.label: (g.count, g.total_ns, g.max_ns, g.kernel_count, g.gpu_ns) for g in r.groups}
    assert groups == {"step": (3, 24 * MS, 8 * MS, 0, 0), "load": (3, 6 * MS, 2 * MS, 0, 0)}
    assert r.notes[0] == HOST_WINDOW_NOTE
    assert f"nsys warned while capturing: {LOST_NVTX!r}" in r.notes
    assert not any("CUDA events" in n for n in r.notes)  # not about NVTX ranges: info lists it


def test_one_range_without_gpu_rows(profile):
    """range_detail reads the host span too: what `dashcam record` of a CPU program asks about a named range."""
    r = get_tool("range_detail")(profile, {"label": "step"})
    assert (r.window.start_ns, r.window.end_ns) == (0, 28 * MS) and r.notes[0] == HOST_WINDOW_NOTE
    assert (r.instances, r.total_ns, r.median_ns, r.min_ns, r.max_ns, r.open_ns) == (3, 24 * MS, 8 * MS, 8 * MS,
                                                                                      8 * MS, 24 * MS)
    assert (r.gpu_busy_ns, r.gpu_busy_pct, r.kernel_count, r.copy_count) == (0, None, 0, 0)
    load = get_tool("range_detail")(profile, {"label": "load", "start_ms": 5, "end_ms": 28})
    assert (load.instances, load.total_ns) == (2, 4 * MS)


def test_ask_about_a_named_range_answers_it(tmp_path):
    path = cpu_only().write(tmp_path / "cpu_only.sqlite")
    a = json.loads(run_cli("ask", "how long does each load take?", str(path), "--json", "--offline",
                           cache=tmp_path / "c").stdout)
    assert "One `load` takes a median 2 ms (mean 2 ms, every one alike, over 3 instances)." in a["answer"]
    assert "No GPU activity" not in a["answer"]

def test_cpu_states_over_the_host_span(profile):
    r = get_tool("cpu")(profile)
    t = {x.tid: x for x in r.threads}
    assert t[700].examined_ns == 28 * MS
    assert t[700].states == {"os_wait": 3 * MS, "os_call": 0, "descheduled": 5 * MS, "running": 20 * MS,
                             "unknown": 0}
    assert t[701].states["os_wait"] == 1 * MS and t[701].states["unknown"] == 27 * MS


def test_api_and_sync_say_no_cuda_was_traced_instead_of_refusing(profile):
    api, sync = get_tool("api")(profile), get_tool("sync")(profile)
    assert api.api_calls == 0 and api.functions == [] and api.window.length_ns == 28 * MS
    assert sync.sync_calls == 0 and HOST_WINDOW_NOTE in sync.notes


def test_overview_describes_a_capture_without_gpus(profile):
    r = get_tool("overview")(profile)
    assert (r.window_ns, r.gpu_count, r.devices, r.api_calls, r.nvtx_ranges) == (28 * MS, 0, [], 0, 6)
    assert r.notes[0] == HOST_WINDOW_NOTE and r.coverage.recorded == ["nvtx", "os_runtime", "context_switches"]


def test_timeline_draws_the_host_rows(profile):
    tl = build_timeline(profile)
    assert (tl.start_ns, tl.end_ns) == (0, 28 * MS)
    # times count from the host span's start: the axis does not say "first GPU activity"
    assert tl.axis == HOST_AXIS_LABEL and "no GPU activity" in tl.axis and tl.caption is None
    rows = {r.label: r for r in tl.rows}
    assert set(rows) == {"NVTX pid 700 tid 700", "NVTX pid 700 tid 701"}  # no empty CUDA-call rows
    assert sorted((e.start, e.end) for e in rows["NVTX pid 700 tid 701"].events) == [
        (0, 2 * MS), (10 * MS, 12 * MS), (20 * MS, 22 * MS)]


def test_cli_runs_the_host_tools_and_info_lists_the_diagnostics(tmp_path):
    path = cpu_only().write(tmp_path / "cpu_only.sqlite")
    for args in (["tool", "run", "nvtx"], ["tool", "run", "api"], ["tool", "run", "overview"], ["timeline"]):
        r = run_cli(*args, str(path), cache=tmp_path / "c")
        assert r.returncode == 0, (args, r.stderr)
    assert "step" in run_cli("tool", "run", "nvtx", str(path), cache=tmp_path / "c").stdout
    info = json.loads(run_cli("info", str(path), "--json", cache=tmp_path / "c").stdout)
    said = {(d["severity"], d["text"]) for d in info["diagnostics"]}
    assert said == {("warning", LOST_NVTX), ("warning", "No CUDA events collected. Does the process use CUDA?"),
                    ("info", "Profiling has started.")}
    text = run_cli("info", str(path), cache=tmp_path / "c").stdout
    assert "2 warnings or errors, 1 info messages" in text and LOST_NVTX in text
    # the gap tools still need GPU rows: one line, exit 8
    r = run_cli("tool", "run", "gpu_gaps", str(path), cache=tmp_path / "c")
    assert r.returncode == 8 and len(r.stderr.strip().splitlines()) == 1


def test_ask_about_the_cpu_leads_with_what_the_capture_records(tmp_path):
    path = cpu_only().write(tmp_path / "cpu_only.sqlite")
    a = json.loads(run_cli("ask", "what was the CPU doing?", str(path), "--json", "--offline",
                           cache=tmp_path / "c").stdout)
    # the thread whose time the capture records first; the time it does not record said last
    assert "of CPU data: Thread 700 (`python`) was computing 20 ms" in a["answer"]
    assert ("Thread 701 (`loader`) was blocked in OS waits 1 ms (mostly `read`) and in a state the capture does not "
            "record 27 ms.") in a["answer"]


@pytest.mark.skipif(not SHARED_NO_GPU, reason="no shared export without GPU activity here")
@pytest.mark.parametrize("path", SHARED_NO_GPU, ids=lambda p: p.name)
def test_real_cpu_only_export(path, tmp_path):
    """The shared CPU-only capture: nvtx, api and timeline run; nsys' warnings are in info."""
    for args in (["tool", "run", "nvtx"], ["tool", "run", "api"], ["tool", "run", "overview"], ["timeline"]):
        r = run_cli(*args, str(path), cache=tmp_path / "c")
        assert r.returncode == 0, (args, r.stderr)
    info = json.loads(run_cli("info", str(path), "--json", cache=tmp_path / "c").stdout)
    warnings = [d for d in info["diagnostics"] if d["severity"] == "warning"]
    nvtx = json.loads(run_cli("tool", "run", "nvtx", str(path), "--json", cache=tmp_path / "c").stdout)
    lost = [d["text"] for d in warnings if "not all nvtx" in d["text"].lower()]
    assert all(any(t in n for n in nvtx["notes"]) for t in lost)


def test_a_timeline_with_nothing_to_draw_says_so(build):
    b = ExportBuilder("2024")
    b.process(700, "julia")
    b.sched(0, True, pid=700)
    b.sched(20 * MS, False, pid=700)  # thread states only: no CUDA call, no NVTX range
    tl = build_timeline(build(b))
    assert tl.rows == [] and tl.caption == NOTHING_DRAWN and tl.axis == HOST_AXIS_LABEL
