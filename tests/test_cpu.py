"""What the CPU was doing in the gaps: the cpu tool, gpu_gaps' cpu_work split and the calling functions of CUDA
calls, on planted exports (events to the nanosecond, samples to the sample) and on the shared real exports
(invariants), and the old schemas without these tables (unchanged)."""
from __future__ import annotations

import json
import sqlite3

import pytest

from dashcam.profile.cpu_source import caller
from dashcam.testing import activity_programs, features, fillers_programs, host_cpu, scenarios
from dashcam.testing.builder import ExportBuilder
from dashcam.testing.programming_models_programs import CPU_SAMPLED
from dashcam.tools import get_tool

from .conftest import SHARED_GPU, run_cli

APP, LIBC, CUDART = host_cpu.APP, host_cpu.LIBC, host_cpu.CUDART
CUDA = host_cpu.CUDA


def planted(schema: str = "2024", samples: bool = True) -> ExportBuilder:
    """The host_waits scenario (dashcam.testing.host_cpu states its figures)."""
    return host_cpu.host_waits_builder(schema, samples)


GAP1 = {"os_wait": 400_000, "os_call": 110_000, "descheduled": 300_000, "running": 1_030_000, "unknown": 0}
GAP2 = {"os_wait": 800_000, "os_call": 0, "descheduled": 0, "running": 190_000, "unknown": 0}


@pytest.mark.parametrize("schema", ["2024", "2022"])
def test_gap_split_to_the_nanosecond(build, schema):
    r = get_tool("gpu_gaps")(build(planted(schema)))
    dev = r.devices[0]
    g1, g2 = sorted(dev.largest_gaps, key=lambda g: g.start_ns)
    assert (g1.start_ns, g1.end_ns, g1.causes["cpu_work"]) == (1_010_000, 3_010_000, 1_840_000)
    assert g1.cpu_work_states == GAP1 and sum(GAP1.values()) == g1.causes["cpu_work"]
    assert g2.cpu_work_states == GAP2 and sum(GAP2.values()) == g2.causes["cpu_work"] == 990_000
    assert (g1.cpu_work_cause.state, g1.cpu_work_cause.name, g1.cpu_work_cause.samples) == (
        "running", "compute_step(int)", 3)
    assert g1.cpu_work_cause.ns == 1_030_000
    assert (g2.cpu_work_cause.state, g2.cpu_work_cause.name, g2.cpu_work_cause.ns) == ("os_wait", "read", 800_000)
    assert dev.cpu_work_states == {k: GAP1[k] + GAP2[k] for k in GAP1}
    assert dev.cpu_work_os_calls == {"read": 1_100_000, "poll": 100_000, "write": 50_000, "fopen": 30_000,
                                     "open": 20_000, "ioctl": 10_000}
    assert [(f.function, f.self_samples, f.total_samples) for f in dev.cpu_work_functions] == [
        ("compute_step(int)", 3, 3), ("load_batch()", 1, 1), ("main", 0, 4)]
    assert dev.cpu_work_samples == 4
    assert g1.callers == {"cudaLaunchKernel": "launch_step(int)", "cudaMemcpyAsync": "copy_batch(void*)"}
    assert g2.callers == {"cudaLaunchKernel": "run_layer(int)"}


def test_sampling_period_is_the_median_interval(build):
    # intervals 180, 1100, 100, 100, 100, 2302 us: the median of six is (100 + 180) / 2
    r = get_tool("cpu")(build(planted()))
    assert r.sampling_period_ns == 140_000.0 and r.period_intervals == 6


def test_cpu_tool_window_gaps_and_one_gap(build):
    p = build(planted())
    window = get_tool("cpu")(p)
    (t,) = window.threads
    assert (t.pid, t.tid, t.thread_name) == (100, 100, "trainer")
    assert t.examined_ns == 5_200_000 - 10_000 and t.cuda_ns == 60_000
    assert sum(t.states.values()) == t.examined_ns - t.cuda_ns
    assert t.states["os_wait"] == 1_200_000 and t.states["descheduled"] == 300_000
    calls = {c.name: (c.wait, c.calls, c.ns) for c in t.os_calls}
    assert calls["read"] == (True, 2, 1_100_000) and calls["ioctl"] == (False, 1, 10_000)
    callers = {c.name: c.caller for c in t.os_calls}
    assert callers["read"] == "load_batch()" and callers["poll"] is None  # from the read's backtrace; poll has none
    assert (t.samples, t.host_samples, t.cuda_samples) == (7, 4, 2)
    top = t.functions[0]
    assert (top.function, top.self_samples, top.self_ns) == ("compute_step(int)", 3, 420_000)
    assert [(m.module, m.self_samples, m.total_samples) for m in t.modules] == [(APP, 4, 4)]

    gaps = get_tool("cpu")(p, {"gaps": True})
    (g,) = gaps.threads
    assert g.examined_ns == 1_890_000 + 990_000 and g.cuda_ns == 50_000
    assert g.states == {k: GAP1[k] + GAP2[k] for k in GAP1}

    one = get_tool("cpu")(p, {"gap_at_ms": 4.5})  # ms from the window start (10 us): inside gap 2
    assert one.scope == "gap" and one.gap.start_ms == 4.0 and one.gap.cpu_side_ns == 990_000
    assert one.threads[0].states == GAP2
    assert (one.threads[0].top_cause.state, one.threads[0].top_cause.name) == ("os_wait", "read")


def test_a_bare_address_ranks_after_a_named_function_at_equal_counts(build):
    """Two host-code samples each in an unresolved frame and in a named function (as on the cloverleaf export):
    the named one is the top function, the address after it."""
    b = ExportBuilder()
    b.gpu(0)
    b.thread(100, 100, "solver")
    b.launch(0, 1_000, 6_000, 10_000, 1_010_000)
    b.launch(0, 2_900_000, 2_905_000, 3_010_000, 4_010_000)
    for t in (1_100_000, 1_300_000):
        b.sample(t, [("0x7f72be8a3249", LIBC, True), ("main", APP)])
    for t in (1_500_000, 1_700_000):
        b.sample(t, [("fill_buffer(double*)", APP), ("main", APP)])
    (t,) = get_tool("cpu")(build(b), {"gaps": True}).threads
    assert [(f.function, f.self_samples) for f in t.functions[:3]] == [
        ("fill_buffer(double*)", 2), ("0x7f72be8a3249", 2), ("main", 0)]
    assert (t.top_cause.state, t.top_cause.name, t.top_cause.samples) == ("unknown", "fill_buffer(double*)", 2)


def test_missing_kinds_are_said_with_options(build):
    r = get_tool("cpu")(build(planted(samples=False)))
    assert r.recorded["cpu_sampling"] == "absent"
    assert any("`nsys profile --sample=process-tree` records them" in n for n in r.notes)
    assert r.threads[0].functions == [] and r.threads[0].samples == 0


def test_old_schema_without_cpu_tables_is_unchanged(build):
    """No OS runtime, scheduling or sampling tables: gpu_gaps' JSON has none of the new keys and the cpu tool
    says what to record."""
    b = ExportBuilder("2021")
    b.launch(0, 1_000, 6_000, 10_000, 1_010_000)
    b.launch(0, 2_000_000, 2_005_000, 2_100_000, 2_200_000)
    p = build(b)
    data = json.loads(get_tool("gpu_gaps")(p).model_dump_json())
    dev = data["devices"][0]
    for key in ("cpu_work_states", "cpu_work_os_calls", "cpu_work_functions", "cpu_work_samples",
                "sampling_period_ns"):
        assert key not in dev
    for gap in dev["largest_gaps"]:
        assert not {"cpu_work_states", "cpu_work_cause", "callers"} & set(gap)
    r = get_tool("cpu")(p)
    assert r.threads[0].states["unknown"] == r.threads[0].examined_ns - r.threads[0].cuda_ns
    assert "--trace=osrt --cpuctxsw=process-tree --sample=process-tree" in r.notes[0]


@pytest.mark.parametrize("name", sorted(set(scenarios.SCENARIOS) - set(host_cpu.HOST_SCENARIOS) - CPU_SAMPLED
                                        - fillers_programs.WITH_HOST_DATA - activity_programs.WITH_HOST_DATA))
def test_scenarios_gpu_gaps_json_has_no_cpu_keys(tmp_path, name):
    """The scenarios hold no CPU-side tables: gpu_gaps' JSON is what it was (no new key, no changed number; the
    numbers themselves are asserted by the gpu_gaps tests). Those outside testing/features.py hold no graph or
    metric tables: launch_latency's and small_kernels' JSON have no key of issue 18's either."""
    from dashcam.profile import Profile

    p = Profile.open(scenarios.build(name, tmp_path / f"{name}.sqlite"), progress=False)
    if not p.devices:
        pytest.skip("no GPU activity")
    text = get_tool("gpu_gaps")(p).model_dump_json()
    for key in ("cpu_work_states", "cpu_work_cause", "callers", "cpu_work_os_calls", "cpu_work_functions",
                "sampling_period_ns"):
        assert f'"{key}"' not in text
    if name in features.FEATURES:
        return
    # Nor do they hold CUDA graphs or GPU metrics (issue 18): launch_latency and small_kernels add no key either.
    launch = get_tool("launch_latency")(p).model_dump_json()
    assert '"graph_kernels"' not in launch and '"callers"' not in launch
    assert '"sm_active_pct"' not in get_tool("small_kernels")(p).model_dump_json()


@pytest.mark.parametrize("schema", ["2024", "2022"])
def test_launch_and_sync_callers(build, schema):
    b = planted(schema)
    corr = b.api("cudaStreamSynchronize", 4_200_000, 4_300_000)
    b.backtrace(corr, [("cudaStreamSynchronize", CUDART), ("wait_for_step()", APP), ("main", APP)])
    p = build(b)
    ll = get_tool("launch_latency")(p, {"kernel": "kernel_b"})
    assert ll.callers == {"launch_step(int)": 1}
    assert get_tool("launch_latency")(p, {"kernel": "gemm"}).callers == {"run_layer(int)": 1}
    sync = get_tool("sync")(p)
    assert sync.calls[0].callers == {"wait_for_step()": 1}
    # without stacks the fields are absent from the JSON
    plain = ExportBuilder(schema)
    plain.launch(0, 1_000, 6_000, 10_000, 1_010_000, name="kernel_b")
    plain.api("cudaStreamSynchronize", 2_000_000, 2_100_000)
    q = build(plain)
    assert '"callers"' not in get_tool("launch_latency")(q, {"kernel": "kernel_b"}).model_dump_json()
    assert '"callers"' not in get_tool("sync")(q).model_dump_json()


def test_caller_rule():
    st = [("ioctl", LIBC, False), ("0x1", CUDA, True), ("__cudart516", APP, False),
          ("cudaDeviceSynchronize", APP, False), ("void solver::step<2>(double*)", APP, False), ("main", APP, False)]
    assert caller(st) == "void solver::step<2>(double*)"
    assert caller([("compute", APP, False), ("main", APP, False)]) is None  # no CUDA frame
    launch = [("cudaLaunchKernel", CUDART, False), ("cudaError cudaLaunchKernel<char>(char const*)", APP, False),
              ("saxpy(double*, int)", APP, False), ("saxpy(double*, int)", APP, False), ("main", APP, False)]
    assert caller(launch, {"saxpy"}) == "main" and caller(launch) == "saxpy(double*, int)"


def test_cli_cpu_tool_json_and_table(tmp_path):
    path = planted().write(tmp_path / "p.sqlite")
    r = run_cli("tool", "run", "cpu", path, "--json", "--arg", "gaps=true", cache=tmp_path / "c")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["threads"][0]["states"]["os_wait"] == 1_200_000
    text = run_cli("tool", "run", "cpu", path, cache=tmp_path / "c").stdout
    assert "read" in text and "compute_step" in text and "sampling period" in text


# -- the shared real exports -----------------------------------------------------------------------------------

def _strings(path) -> set[str]:
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return {r[0] for r in con.execute("SELECT value FROM StringIds")}
    finally:
        con.close()


@pytest.mark.skipif(not SHARED_GPU, reason="../shared/profiles not present")
@pytest.mark.parametrize("path", SHARED_GPU, ids=lambda p: p.name)
def test_shared_splits_add_up_and_names_exist(path, opened):
    p = opened(path)
    r = get_tool("gpu_gaps")(p)
    strings = _strings(path)
    for dev in r.devices:
        if dev.cpu_work_states is not None:
            assert sum(dev.cpu_work_states.values()) == dev.cpu_work_examined_ns
            assert set(dev.cpu_work_os_calls) <= strings
            assert {f.function for f in dev.cpu_work_functions} <= strings
        for g in dev.largest_gaps:
            if g.cpu_work_states is not None:
                assert sum(g.cpu_work_states.values()) == g.causes["cpu_work"]
                assert min(g.cpu_work_states.values()) >= 0
            if g.cpu_work_cause is not None and g.cpu_work_cause.name:
                assert g.cpu_work_cause.name in strings
            for api, fn in (g.callers or {}).items():
                assert fn in strings and api in g.cuda_api_calls | {g.launch_call.name: 0}
    cpu = get_tool("cpu")(p)
    for t in cpu.threads:
        assert sum(t.states.values()) == t.examined_ns - t.cuda_ns
        assert {c.name for c in t.os_calls} <= strings and {f.function for f in t.functions} <= strings


def test_shared_named_causes(opened):
    """The two exports with CPU data: the largest gaps' cpu_work is split and named."""
    from .conftest import shared_or_skip

    clover = get_tool("gpu_gaps")(opened(shared_or_skip("hpcgroup__pipit__perlmutter-cloverleaf-cuda.sqlite")))
    dev = clover.devices[0]
    assert dev.cpu_work_states["os_call"] == sum(dev.cpu_work_os_calls.values()) > 0
    assert max(dev.cpu_work_os_calls, key=dev.cpu_work_os_calls.get) == "write"
    saxpy = get_tool("gpu_gaps")(opened(shared_or_skip("hpcgroup__pipit__saxpy-mpi-cuda_nsys_perlmutter0.sqlite")))
    top = saxpy.devices[0].largest_gaps[0]
    assert (top.cpu_work_cause.state, top.cpu_work_cause.name) == ("running", "main")
    assert top.callers["cudaLaunchKernel"] == "main"  # from the CUDA backtrace (2.x numbering), past the stub


@pytest.mark.parametrize(("name", "gaps", "at_least"), [
    ("hpcgroup__pipit__perlmutter-cloverleaf-cuda.sqlite", 10, 95.0),  # 96.7 %: write calls, std::__fill_a1
    ("hpcgroup__pipit__saxpy-mpi-cuda_nsys_perlmutter0.sqlite", 6, 99.9),  # 99.98 %: computing in main
])
def test_shared_largest_gaps_cpu_work_is_explained(opened, name, gaps, at_least):
    """Issue 17's bar on the two exports with CPU data: of the cpu_work in gpu_gaps' largest gaps, the share with a
    named cause — OS calls by name, descheduled time, and the running time of a gap whose cause names its most
    sampled function — and every gap with 1 ms of cpu_work or more has a named cause."""
    from .conftest import shared_or_skip

    dev = get_tool("gpu_gaps")(opened(shared_or_skip(name))).devices[0]
    assert len(dev.largest_gaps) == gaps
    total = named = 0
    for g in dev.largest_gaps:
        cw, st, cause = g.causes["cpu_work"], g.cpu_work_states, g.cpu_work_cause
        if not cw:
            continue
        total += cw
        named += st["os_wait"] + st["os_call"] + st["descheduled"]
        named += st["running"] if cause.state == "running" and cause.name else 0
        if cw >= 1_000_000:
            assert cause.name is not None or cause.state == "descheduled", g.start_ms
    assert 100.0 * named / total >= at_least


# -- OS runtime calls by function (the os_runtime tool; host_cpu.os_calls states the figures) ---------------------

def test_os_runtime_counts_like_osrt_sum_and_tells_the_tools_threads_apart(tmp_path):
    from dashcam.profile import Profile

    p = Profile.open(host_cpu.os_calls(tmp_path / "os.sqlite"), progress=False)
    r = get_tool("os_runtime")(p)
    assert (r.recorded, r.calls, r.function_count, r.total_ns, r.program_ns) == (True, 9, 4, 28_200_000, 8_200_000)
    assert (r.window_ns, r.program_window_ns) == (4_150_000, 150_000)  # sem_wait's 4 ms of the window + 3 ioctls
    by = {f.name: f for f in r.functions}
    assert [f.name for f in r.functions] == ["sem_wait", "pwrite64", "fopen", "ioctl"]
    sem = by["sem_wait"]
    assert (sem.wait, sem.support_ns, sem.program_ns, sem.pct_of_osrt) == (True, 20_000_000, 0, 70.922)
    top = sem.top_thread
    assert (top.tid, top.thread_name, top.support) == (701, "CUPTI worker thread", True)
    assert (by["pwrite64"].after_ns, by["pwrite64"].before_ns, by["fopen"].before_ns) == (5_000_000, 0, 3_000_000)
    io = by["ioctl"]
    assert (io.calls, io.total_ns, io.median_ns, io.min_ns, io.max_ns, io.window_calls, io.window_ns) == (
        4, 200_000, 50_000.0, 50_000, 50_000, 3, 150_000)
    assert [f.name for f in get_tool("os_runtime")(p, {"name": "f*"}).functions] == ["fopen"]
    assert get_tool("os_runtime")(p, {"name": "nosuch"}).notes[-1] == "No OS runtime function matches name='nosuch'."


def test_os_runtime_without_the_trace_says_how_to_record_it(build):
    b = ExportBuilder().gpu(0)
    b.launch(0, 0, 10, 20, 1_000)
    r = get_tool("os_runtime")(build(b))
    assert (r.recorded, r.functions) == (False, [])
    assert "`nsys profile --trace=osrt`" in r.notes[-1]


@pytest.mark.parametrize("question", ["Which OS runtime calls take the most time?", "what are the top syscalls?",
                                      "哪些系统调用最耗时？"])
def test_the_os_calls_answer_names_the_programs_own_cost_not_the_tools_waiting(tmp_path, question):
    from dashcam.agent.planner import answer_offline
    from dashcam.profile import Profile

    p = Profile.open(host_cpu.os_calls(tmp_path / "os.sqlite"), progress=False)
    a = answer_offline(question, p).answer
    assert "`sem_wait` 20 ms (1 call; thread 701 `CUPTI worker thread`)" in a
    assert "mostly on threads CUDA, CUPTI or nsys start in the process" in a
    assert ("The program's own threads spend the most in `pwrite64` (5 ms, 1 call, after the GPU's last work: the "
            "program writing its output at teardown, not a GPU problem) and `fopen` (3 ms, 3 calls, before the GPU's "
            "first work).") in a
    assert "only 0.15 ms falls in the 4 ms window" in a


def test_an_os_call_question_about_a_gpus_wait_stays_on_the_launching_thread(tmp_path):
    from dashcam.agent.planner import answer_offline
    from dashcam.profile import Profile

    p = Profile.open(host_cpu.host_waits(tmp_path / "hw.sqlite"), progress=False)
    a = answer_offline("which system calls is the CPU in while GPU 0 waits?", p).answer
    assert "osrt_sum" not in a and "blocked in OS waits" in a


def test_a_gpu_that_hardly_waits_has_no_data_loader_problem(tmp_path):
    """healthy (testing/scenarios.py): kernel-idle 1 ms of a 50 ms window, 2.0 %: under the loss floor, no remedy."""
    from dashcam.agent.planner import answer_offline
    from dashcam.profile import Profile

    p = Profile.open(scenarios.build("healthy", tmp_path / "h.sqlite"), progress=False)
    a = answer_offline("is the data loader the bottleneck?", p)
    assert a.answer == ("No: GPU 0 is kernel-busy 98.0 % of the window; its kernel-idle time (1 ms, 2.0 %) is too "
                        "little for any input pipeline to hold it back.")
    assert a.grounded, a.ungrounded_numbers


def test_cli_os_runtime_table_with_and_without_the_trace(tmp_path):
    path = host_cpu.os_calls(tmp_path / "os.sqlite")
    text = run_cli("tool", "run", "os_runtime", path, "--format", "csv", cache=tmp_path / "c").stdout
    assert "sem_wait,1,20,70.9" in text and "701 CUPTI worker thread (support)" in text
    bare = ExportBuilder().gpu(0)
    bare.launch(0, 0, 10, 20, 1_000)
    r = run_cli("tool", "run", "os_runtime", bare.write(tmp_path / "bare.sqlite"), cache=tmp_path / "c")
    assert r.returncode == 0 and r.stdout.startswith("os_runtime  the capture traced no OS runtime calls")
    assert "`nsys profile --trace=osrt`" in r.stdout
