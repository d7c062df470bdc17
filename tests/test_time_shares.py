"""One vocabulary of time shares (definitions.md, "Time shares"): a planted GPU whose kernel-busy, copy-busy, busy,
idle and kernel-idle all differ, and every surface's figure checked against the share it names."""
from __future__ import annotations

import json

import pytest

from dashcam.agent.models import Targets
from dashcam.agent.planner import answer_offline
from dashcam.measure.definitions import SHARES, Shares
from dashcam.reports.summary import summarize, to_markdown
from dashcam.testing.builder import ExportBuilder
from dashcam.tools import get_tool

from .conftest import MS, US, run_cli

# GPU 0, window [1, 101] ms (100 ms): ten back-to-back kernels [1, 41] ms and one [81, 91] ms; a copy [31, 61] ms
# (10 ms under the kernels); a memset [96, 101] ms in the tail.
KERNEL_BUSY, COPY_BUSY, BUSY = 50 * MS, 35 * MS, 75 * MS  # 40 + 10; 30 + 5; [1, 61] + [81, 91] + [96, 101]
IDLE, KERNEL_IDLE = 25 * MS, 50 * MS


def planted() -> ExportBuilder:
    b = ExportBuilder()
    for i in range(10):  # queued ahead: each starts as the one before ends, no gap between them
        b.launch(0, i * 10 * US, i * 10 * US + 5 * US, (1 + 4 * i) * MS, (5 + 4 * i) * MS, name="first")
    b.memcpy(0, 31 * MS, 61 * MS, 1 << 28, "HtoD", stream=8)
    b.launch(0, 70 * MS, 70 * MS + 10 * US, 81 * MS, 91 * MS, name="second")
    b.memset(0, 96 * MS, 101 * MS, 1 << 20, stream=9)
    return b


@pytest.fixture
def profile(build):
    return build(planted())


def test_the_five_shares_are_defined_once():
    s = Shares(window_ns=100 * MS, kernel_busy_ns=KERNEL_BUSY, copy_busy_ns=COPY_BUSY, busy_ns=BUSY)
    assert list(SHARES) == ["kernel-busy", "copy-busy", "busy", "idle", "kernel-idle"]
    assert [s.pct(x) for x in SHARES] == [50.0, 35.0, 75.0, 25.0, 50.0]
    assert s.fields()["idle_ns"] == IDLE and s.fields()["kernel_idle_ns"] == KERNEL_IDLE


def test_overview_reports_each_share_by_its_name(profile):
    d = get_tool("overview")(profile).devices[0]
    assert (d.kernel_busy_ns, d.copy_busy_ns, d.busy_ns, d.idle_ns, d.kernel_idle_ns) == (
        KERNEL_BUSY, COPY_BUSY, BUSY, IDLE, KERNEL_IDLE)
    assert (d.kernel_busy_pct, d.copy_busy_pct, d.busy_pct, d.idle_pct, d.kernel_idle_pct) == (
        50.0, 35.0, 75.0, 25.0, 50.0)


def test_gpu_gaps_and_memcpy_name_their_shares(profile):
    g = get_tool("gpu_gaps")(profile).devices[0]
    assert (g.kernel_idle_ns, g.kernel_idle_pct, g.kernel_busy_pct) == (KERNEL_IDLE, 50.0, 50.0)
    assert sum(g.causes.values()) == KERNEL_IDLE
    assert (g.causes["transfer"], g.causes["unknown"]) == (5 * MS, 5 * MS)  # the memset fills half the tail
    m = get_tool("memcpy")(profile).devices[0]
    assert (m.copy_busy_ns, m.copy_busy_pct, m.kernel_busy_pct) == (COPY_BUSY, 35.0, 50.0)


def test_the_summary_says_kernel_idle(profile):
    s = summarize(profile)
    idle = next(f for f in s.findings if f.kind == "idle")
    assert idle.figures["kernel_idle_pct"] == 50.0 and idle.figures["kernel_idle_ns"] == KERNEL_IDLE
    assert idle.title.startswith("GPU 0 kernel-idle 50.0 % of the window")
    assert "GPU 0 is kernel-idle 50.0 % of the 100 ms window" in s.paragraph
    assert "of the kernel-idle time" in s.paragraph
    md = to_markdown(s)  # what the PR comment posts
    assert "GPU 0 kernel-idle 50.0 % of the window" in md and " idle 50.0 %" not in md.replace("kernel-idle", "")


def test_ask_names_the_share_of_each_figure(profile):
    a = answer_offline("Why is GPU 0 idle?", profile, targets=Targets(gpus=[0]), intent="idle")
    assert a.answer.startswith("GPU 0 was kernel-idle 50 ms (50.0 % of")
    b = answer_offline("How busy is the GPU?", profile, targets=Targets(), intent="overview")
    assert "kernel-busy 50.0 % of the window (busy 75.0 %, counting copies)" in b.answer


def test_gpu_gaps_table_and_overview_json_on_the_command_line(tmp_path):
    path = planted().write(tmp_path / "shares.sqlite")
    out = run_cli("tool", "run", "gpu_gaps", str(path), cache=tmp_path / "c").stdout
    assert "GPU 0: kernel-idle 50.000 ms (50.0 % of the window) in 2 gaps; kernel-busy 50.0 %" in " ".join(out.split())
    ov = json.loads(run_cli("tool", "run", "overview", str(path), "--json", cache=tmp_path / "c").stdout)
    d = ov["devices"][0]
    assert {k: d[k] for k in ("kernel_busy_pct", "copy_busy_pct", "busy_pct", "idle_pct", "kernel_idle_pct")} == {
        "kernel_busy_pct": 50.0, "copy_busy_pct": 35.0, "busy_pct": 75.0, "idle_pct": 25.0, "kernel_idle_pct": 50.0}
