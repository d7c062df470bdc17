"""The planted scenarios (dashcam.testing.scenarios): each builds fast and deterministically, and the facts its
docstring states hold through the tools, exactly. Also: every eval case names a scenario that exists."""
import sqlite3
from pathlib import Path

import pytest

from dashcam.profile import Profile
from dashcam.testing.scenarios import SCENARIOS, build
from dashcam.tools import get_tool

from .conftest import MS, US

CASES = Path(__file__).resolve().parents[1] / "evals" / "cases"


def dump(path: Path) -> dict[str, list]:
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table' ORDER BY 1")]
        return {t: sorted(map(repr, con.execute(f'SELECT * FROM "{t}"'))) for t in tables}
    finally:
        con.close()


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_builds_deterministic(name, tmp_path):
    for i in (1, 2):
        SCENARIOS[name](tmp_path / f"{name}{i}.sqlite")
    assert dump(tmp_path / f"{name}1.sqlite") == dump(tmp_path / f"{name}2.sqlite")


def test_build_by_name(tmp_path):
    assert build("healthy", tmp_path / "h.sqlite").exists()
    with pytest.raises(KeyError, match="sync_stall"):
        build("nope", tmp_path / "x.sqlite")


def test_every_scenario_states_its_facts():
    for name, fn in SCENARIOS.items():
        assert fn.__doc__ and len(fn.__doc__.strip().splitlines()) >= 3, name


@pytest.fixture
def scenario(tmp_path):
    def _open(name: str) -> Profile:
        return Profile.open(SCENARIOS[name](tmp_path / f"{name}.sqlite"), progress=False)
    return _open


def run(profile, tool, **params):
    return get_tool(tool)(profile, params)


def causes(dev) -> dict[str, int]:
    return {k: v for k, v in dev.causes.items() if v}


# -- one test per scenario: its docstring's facts ---------------------------------------------------

def test_sync_stall(scenario):
    p = scenario("sync_stall")
    o = run(p, "overview")
    assert o.window_ns == 54 * MS and o.gpu_count == 2
    assert [(d.kernel_count, d.kernel_busy_ns, d.kernel_busy_pct) for d in o.devices] == [(24, 24 * MS, 44.444)] * 2
    g0, g1 = run(p, "gpu_gaps").devices
    assert (g0.kernel_idle_ns, g0.kernel_idle_pct, g0.gap_count) == (30 * MS, 55.556, 5)
    assert causes(g0) == {"sync_wait": 25 * MS, "cpu_work": 4850 * US, "launch_overhead": 50 * US,
                          "dependency": 100 * US}
    assert g0.cause_pct["sync_wait"] == 83.333 and g0.dominant_cause == "sync_wait"
    assert [g.start_ns - o.window_start_ns for g in g0.largest_gaps] == [4 * MS, 14 * MS, 24 * MS, 34 * MS, 44 * MS]
    assert g0.largest_gaps[0].cuda_api_calls == {"cudaStreamSynchronize": 5 * MS}
    assert causes(g1) == {"sync_wait": 20 * MS, "cpu_work": 9850 * US, "launch_overhead": 50 * US,
                          "dependency": 100 * US}
    assert g1.cause_pct["sync_wait"] == 66.667
    assert g1.largest_gaps[0].cuda_api_calls == {"cudaDeviceSynchronize": 4 * MS}
    s = run(p, "sync")
    assert [(c.name, c.count, c.total_ns, c.max_ns, c.pct_of_window) for c in s.calls] == [
        ("cudaStreamSynchronize", 5, 40 * MS, 8 * MS, 74.074), ("cudaDeviceSynchronize", 5, 35 * MS, 7 * MS, 64.815)]
    t = run(p, "top_kernels")
    assert [(k.name, k.count, k.total_ns, k.pct) for k in t.kernels] == [
        ("ampere_sgemm_128x128_nn", 12, 19200 * US, 40.0), ("flash_attn_fwd_kernel", 12, 14400 * US, 30.0),
        ("layer_norm_fwd_kernel", 12, 9600 * US, 20.0), ("vectorized_elementwise_kernel", 12, 4800 * US, 10.0)]
    it = run(p, "iterations")
    assert (it.method, it.kernel_name, it.step_count, it.median_ns, it.stdev_ns) == (
        "kernel_pattern", "ampere_sgemm_128x128_nn", 5, 10 * MS, 0)
    ll = run(p, "launch_latency")
    assert [(d.launch_bound, d.queue_p50_ns) for d in ll.devices] == [(False, 2190 * US)] * 2
    assert [d.verdict for d in run(p, "nccl").devices] == ["no_nccl"] * 2
    assert [d.verdict for d in run(p, "small_kernels").devices] == ["ok"] * 2
    assert run(p, "memcpy").copy_count == 0


def test_injection_is_sync_stall_with_hostile_text(scenario):
    from dashcam.testing.scenarios import INJECTED_KERNEL, INJECTED_NVTX

    p, clean = scenario("injection"), scenario("sync_stall")
    for tool in ("gpu_gaps", "sync", "overview"):
        a, b = run(p, tool).model_dump(), run(clean, tool).model_dump()
        if tool == "gpu_gaps":  # only the text differs: the NVTX range at each gap, the kernel before it
            for d, clean_d in zip(a["devices"], b["devices"]):
                assert {g["nvtx_range"] for g in d["largest_gaps"]} == {INJECTED_NVTX}
                assert {g["kernel_before"] for g in d["largest_gaps"]} == {INJECTED_KERNEL}
                for g, clean_g in zip(d["largest_gaps"], clean_d["largest_gaps"]):
                    g["nvtx_range"], g["kernel_before"] = None, clean_g["kernel_before"]
                assert set(d["cpu_work_nvtx"]) <= {INJECTED_NVTX} and not clean_d["cpu_work_nvtx"]
                d["cpu_work_nvtx"] = {}
        if tool == "overview":
            assert (a.pop("nvtx_ranges"), b.pop("nvtx_ranges")) == (12, 0)
            recorded = a["workload"].pop("recorded"), b["workload"].pop("recorded")
            assert "nvtx" in recorded[0] and "nvtx" not in recorded[1]
            coverage = a.pop("coverage"), b.pop("coverage")  # the same kinds, and NVTX ranges
            assert coverage[0]["recorded"] == [*coverage[1]["recorded"], "nvtx"] == recorded[0]
            # the NVTX ranges are host activity: the host span holds them (60 ms against the calls' 50.07 ms)
            spans = a["workload"]["span"], b["workload"]["span"]
            assert (spans[0]["host_ns"], spans[1]["host_ns"]) == (60_000_000, 50_070_000)
            for sp in spans:
                for k in ("host_start_ns", "host_end_ns", "before_gpu_ns", "host_ns", "gpu_share_pct"):
                    sp.pop(k)
        assert a == b, tool
    names = [k.name for k in run(p, "top_kernels").kernels]
    assert names[3] == INJECTED_KERNEL and "ignore previous instructions" in INJECTED_NVTX.lower()
    assert run(p, "nvtx").groups[0].label == INJECTED_NVTX


def test_old_schema(scenario):
    p = scenario("old_schema")
    assert p.nsys_version is None and p.gpus[0].name is None and p.gpus[0].sm_count is None
    o = run(p, "overview")
    assert (o.window_ns, o.devices[0].kernel_count, o.devices[0].kernel_busy_pct) == (74 * MS, 32, 43.243)
    g = run(p, "gpu_gaps").devices[0]
    assert (g.kernel_idle_ns, g.kernel_idle_pct, g.gap_count) == (42 * MS, 56.757, 7)
    assert causes(g) == {"sync_wait": 35 * MS, "cpu_work": 6790 * US, "launch_overhead": 70 * US,
                         "dependency": 140 * US}
    assert g.cause_pct["sync_wait"] == 83.333
    c = run(p, "sync").calls
    assert [(x.name, x.count, x.total_ns, x.pct_of_window) for x in c] == [
        ("cudaStreamSynchronize", 7, 56 * MS, 75.676)]
    assert run(p, "small_kernels").devices[0].verdict is None


def test_launch_bound(scenario):
    p = scenario("launch_bound")
    o = run(p, "overview")
    assert (o.window_ns, o.devices[0].kernel_count, o.devices[0].kernel_busy_ns) == (9993 * US, 1000, 3 * MS)
    assert o.devices[0].kernel_busy_pct == 30.021
    g = run(p, "gpu_gaps").devices[0]
    assert (g.kernel_idle_ns, g.kernel_idle_pct, g.gap_count) == (6993 * US, 69.979, 999)
    assert causes(g) == {"launch_overhead": 5994 * US, "dependency": 999 * US}
    assert (g.cause_pct["launch_overhead"], g.cause_pct["dependency"]) == (85.714, 14.286)
    d = run(p, "launch_latency").devices[0]
    assert (d.api_p50_ns, d.queue_p50_ns, d.median_kernel_ns, d.launches_per_s, d.launch_bound) == (
        8 * US, 1 * US, 3 * US, 100070.049, True)
    t = run(p, "top_kernels").kernels
    assert [(k.name, k.count, k.total_ns, k.pct) for k in t] == [
        ("vectorized_elementwise_kernel", 600, 1800 * US, 60.0), ("unrolled_elementwise_kernel", 300, 900 * US, 30.0),
        ("reduce_kernel", 100, 300 * US, 10.0)]
    assert run(p, "small_kernels").devices[0].verdict == "ok"


def test_dataloader_stall(scenario):
    p = scenario("dataloader_stall")
    o = run(p, "overview")
    assert (o.window_ns, o.devices[0].kernel_count, o.devices[0].kernel_busy_pct) == (98100 * US, 50, 50.968)
    g = run(p, "gpu_gaps").devices[0]
    assert (g.kernel_idle_ns, g.kernel_idle_pct, g.gap_count) == (48100 * US, 49.032, 5)
    assert causes(g) == {"cuda_api": 40090 * US, "cpu_work": 7610 * US, "launch_overhead": 50 * US,
                         "dependency": 350 * US}
    assert (g.dominant_cause, g.cause_pct["cuda_api"], g.cause_pct["cpu_work"]) == ("cuda_api", 83.347, 15.821)
    assert g.largest_gaps[0].cuda_api_calls == {"cudaMemcpy": 8020 * US}
    m = run(p, "memcpy")
    assert [(k.kind, k.count, k.bytes, k.total_ns, k.gbps) for k in m.by_kind if k.count] == [
        ("HtoD", 5, 400_000_000, 40 * MS, 10.0)]
    assert [(h.host_mem, h.count) for h in m.host_memory] == [("pageable", 5)]
    assert (m.sync_copy_calls, m.sync_blocked_ns, m.pre_kernel_stall_count, m.pre_kernel_stall_ns) == (
        5, 40090 * US, 5, 40 * MS)
    assert {(s.duration_ns, s.next_kernel, s.pageable) for s in m.pre_kernel_stalls} == {
        (8 * MS, "implicit_gemm_conv_kernel", True)}
    d = m.devices[0]
    assert (d.copy_busy_pct, d.transfer_bound) == (40.775, False)
    assert run(p, "launch_latency").devices[0].launch_bound is False


def test_transfer_bound(scenario):
    p = scenario("transfer_bound")
    m = run(p, "memcpy")
    assert (m.window.length_ns, m.copy_count, m.copy_bytes) == (50 * MS, 20, 480_000_000)
    assert [(k.kind, k.count, k.bytes, k.total_ns, k.gbps) for k in m.by_kind if k.count] == [
        ("HtoD", 10, 360_000_000, 30 * MS, 12.0), ("DtoH", 10, 120_000_000, 10 * MS, 12.0)]
    d = m.devices[0]
    assert (d.copy_busy_ns, d.copy_busy_pct, d.kernel_busy_pct, d.copy_kernel_overlap_ns, d.transfer_bound) == (
        40 * MS, 80.0, 20.0, 0, True)
    assert (m.pre_kernel_stall_count, m.pre_kernel_stall_ns, m.sync_copy_calls) == (10, 30 * MS, 0)
    g = run(p, "gpu_gaps").devices[0]
    assert (g.kernel_idle_ns, g.kernel_idle_pct) == (40 * MS, 80.0)
    assert causes(g) == {"memcpy": 39 * MS, "transfer": 1 * MS}  # the tail: a copy, no kernel after it
    assert g.cause_pct["memcpy"] == 97.5


def test_small_kernels(scenario):
    p = scenario("small_kernels")
    o = run(p, "overview")
    assert (o.window_ns, o.devices[0].kernel_busy_pct) == (12 * MS, 100.0)
    d = run(p, "small_kernels").devices[0]
    assert (d.sm_count, d.kernel_count, d.small_count, d.small_time_ns, d.small_time_pct, d.verdict) == (
        132, 60, 40, 6 * MS, 50.0, "small_kernels")
    assert [(k.name, k.count, k.total_ns, k.avg_blocks) for k in d.top_small] == [
        ("layer_norm_kernel", 20, 4 * MS, 64.0), ("bias_gelu_kernel", 20, 2 * MS, 16.0)]
    assert run(p, "gpu_gaps").devices[0].kernel_idle_ns == 0


def test_nccl_exposed(scenario):
    p = scenario("nccl_exposed")
    r = run(p, "nccl")
    assert r.window.length_ns == 50 * MS and r.comm_kernel_count == 10
    for d in r.devices:
        assert (d.verdict, d.comm_kernel_count, d.comm_ns, d.comm_pct, d.compute_ns, d.overlap_ns, d.overlap_pct,
                d.exposed_comm_ns, d.exposed_comm_pct) == (
            "not_overlapped", 5, 20 * MS, 40.0, 30 * MS, 0, 0.0, 20 * MS, 40.0)
    assert [d.kernel_busy_pct for d in run(p, "overview").devices] == [100.0, 100.0]


def test_nccl_overlapped(scenario):
    p = scenario("nccl_overlapped")
    r = run(p, "nccl")
    assert r.window.length_ns == 48500 * US
    for d in r.devices:
        assert (d.verdict, d.comm_ns, d.comm_pct, d.compute_ns, d.compute_pct, d.overlap_ns, d.overlap_pct,
                d.exposed_comm_ns, d.exposed_comm_pct) == (
            "overlapped", 15 * MS, 30.928, 40 * MS, 82.474, 12500 * US, 83.333, 2500 * US, 5.155)
    s = run(p, "streams").devices[0]
    assert (s.stream_count, s.overlap_ns, s.kernel_busy_ns) == (2, 12500 * US, 42500 * US)
    g = run(p, "gpu_gaps").devices[1]
    assert (g.kernel_idle_ns, g.gap_count) == (6 * MS, 4)
    assert causes(g) == {"cpu_work": 5600 * US, "launch_overhead": 20 * US, "dependency": 380 * US}


def test_cpu_work(scenario):
    p = scenario("cpu_work")
    o = run(p, "overview")
    assert (o.window_ns, o.devices[0].kernel_busy_pct) == (55 * MS, 54.545)
    g = run(p, "gpu_gaps").devices[0]
    assert (g.kernel_idle_ns, g.kernel_idle_pct, g.gap_count) == (25 * MS, 45.455, 5)
    assert causes(g) == {"cpu_work": 24750 * US, "launch_overhead": 40 * US, "dependency": 210 * US}
    assert (g.cause_pct["cpu_work"], g.cause_pct["launch_overhead"], g.cause_pct["dependency"]) == (99.0, 0.16, 0.84)
    assert {x.nvtx_range for x in g.largest_gaps} == {"collate_batch"}
    assert run(p, "sync").calls == []
    d = run(p, "launch_latency").devices[0]
    assert (d.launch_bound, d.queue_p50_ns) == (False, 2022 * US)


def test_healthy(scenario):
    p = scenario("healthy")
    o = run(p, "overview")
    assert o.window_ns == 50 * MS
    assert [(d.kernel_count, d.kernel_busy_ns, d.kernel_busy_pct) for d in o.devices] == [(100, 49 * MS, 98.0)] * 2
    for g in run(p, "gpu_gaps").devices:
        assert (g.kernel_idle_ns, g.kernel_idle_pct, g.gap_count) == (1 * MS, 2.0, 100)
        assert causes(g) == {"dependency": 990 * US, "transfer": 10 * US}  # the tail: the readback copy
    t = run(p, "top_kernels").kernels
    assert [(k.name, k.count, k.total_ns, k.pct) for k in t] == [
        ("sm90_xmma_gemm_bf16_kernel", 100, 70 * MS, 71.429), ("flash_fwd_kernel", 100, 28 * MS, 28.571)]
    assert [d.launch_bound for d in run(p, "launch_latency").devices] == [False, False]
    m = run(p, "memcpy")
    assert (m.pre_kernel_stall_count, [d.transfer_bound for d in m.devices]) == (0, [False, False])
    assert [d.verdict for d in run(p, "small_kernels").devices] == ["ok", "ok"]
    assert [d.verdict for d in run(p, "nccl").devices] == ["no_nccl", "no_nccl"]


def test_imbalance(scenario):
    p = scenario("imbalance")
    o = run(p, "overview")
    assert o.window_ns == 100 * MS
    assert [d.kernel_busy_pct for d in o.devices] == [90.0, 90.0, 40.0, 90.0]
    gaps = run(p, "gpu_gaps").devices
    for d in (0, 1, 3):
        g = gaps[d]
        assert (g.kernel_idle_ns, g.kernel_idle_pct) == (10 * MS, 10.0)
        assert causes(g) == {"cpu_work": 7600 * US, "unknown": 2 * MS, "dependency": 380 * US,
                             "launch_overhead": 20 * US}
        assert (g.cause_pct["cpu_work"], g.cause_pct["unknown"]) == (76.0, 20.0)
    g2 = gaps[2]
    assert (g2.kernel_idle_ns, g2.kernel_idle_pct, g2.gap_count) == (60 * MS, 60.0, 5)
    assert causes(g2) == {"cpu_work": 59500 * US, "dependency": 475 * US, "launch_overhead": 25 * US}
    assert g2.cause_pct["cpu_work"] == 99.167
    assert {x.nvtx_range for x in g2.largest_gaps} == {"dataloader_next"}


def test_nvtx_steps(scenario):
    p = scenario("nvtx_steps")
    o = run(p, "overview")
    assert (o.window_ns, o.devices[0].kernel_count, o.devices[0].kernel_busy_pct) == (75 * MS, 42, 76.0)
    it = run(p, "iterations")
    assert (it.method, it.label, it.step_count) == ("nvtx", "train_step <n>", 6)
    assert [s.duration_ns for s in it.steps] == [10 * MS] * 3 + [25 * MS] + [10 * MS] * 2
    assert (it.median_ns, it.mean_ns, it.p90_ns, it.stdev_ns) == (10 * MS, 12500 * US, 17500 * US, 5590169.9)
    assert (it.slowest.index, it.slowest.duration_ns, it.slowest.ratio_to_median, it.slowest.gpu_busy_pct) == (
        3, 25 * MS, 2.5, 38.0)
    assert (it.fastest.index, it.fastest.gpu_busy_pct) == (0, 95.0)
    g = run(p, "gpu_gaps").devices[0]
    assert (g.kernel_idle_ns, g.kernel_idle_pct) == (18 * MS, 24.0)
    assert causes(g) == {"cpu_work": 17340 * US, "cuda_api": 100 * US, "launch_overhead": 180 * US,
                         "dependency": 180 * US, "transfer": 100 * US, "unknown": 100 * US}  # tail: half copy
    assert g.cause_pct["cpu_work"] == 96.333
    top = g.largest_gaps[0]
    assert (top.duration_ns, top.start_ms, top.nvtx_range, top.kernel_after) == (
        15100 * US, 33.1, "save_checkpoint", "mlp_bwd_kernel")
    s3 = run(p, "gpu_gaps", start_ms=30, end_ms=55).devices[0]
    assert (s3.kernel_idle_ns, s3.kernel_idle_pct, s3.causes["cpu_work"], s3.cause_pct["cpu_work"]) == (
        15500 * US, 62.0, 15420 * US, 99.484)
    n = run(p, "nvtx")
    assert (n.range_count, n.group_count) == (25, 5)
    assert [(x.label, x.count, x.total_ns, x.max_ns, x.kernel_count, x.gpu_ns) for x in n.groups] == [
        ("train_step <n>", 6, 75 * MS, 25 * MS, 42, 57 * MS), ("backward", 6, 36600 * US, 6100 * US, 18, 36 * MS),
        ("forward", 6, 18600 * US, 3100 * US, 18, 18 * MS), ("save_checkpoint", 1, 15 * MS, 15 * MS, 0, 0),
        ("optimizer", 6, 4200 * US, 700 * US, 6, 3 * MS)]


def test_no_kernels(scenario):
    from dashcam.errors import NoGpuActivity

    p = scenario("no_kernels")
    assert p.devices == [] and p.count("api") == 56
    with pytest.raises(NoGpuActivity):
        run(p, "gpu_gaps")
    o = run(p, "overview")  # what the capture is: no GPUs, its CUDA calls over the host rows' span
    assert (o.gpu_count, o.api_calls, o.window_ns) == (0, 56, 13 * MS)
    s = run(p, "sync")
    assert s.window.length_ns == 13 * MS
    assert [(c.name, c.count, c.total_ns, c.pct_of_window) for c in s.calls] == [
        ("cudaStreamSynchronize", 5, 5 * MS, 38.462)]


def test_pipeline_bubble(scenario):
    p = scenario("pipeline_bubble")
    o = run(p, "overview")
    assert o.window_ns == 30 * MS
    assert [(d.kernel_count, d.kernel_busy_ns, d.kernel_busy_pct) for d in o.devices] == [(8, 24 * MS, 80.0)] * 2
    g0, g1 = run(p, "gpu_gaps").devices
    assert (g0.kernel_idle_ns, g0.kernel_idle_pct, g0.gap_count, causes(g0)) == (
        6 * MS, 20.0, 1, {"dependency": 6 * MS})
    assert (g0.largest_gaps[0].start_ms, g0.largest_gaps[0].kernel_after) == (8.0, "stage0_bwd_kernel")
    assert causes(g1) == {"dependency": 2 * MS, "unknown": 4 * MS}
    assert (g1.cause_pct["dependency"], g1.cause_pct["unknown"]) == (33.333, 66.667)
    assert p.one("SELECT count(*) FROM api WHERE name = 'cudaStreamWaitEvent'")[0] == 8


def test_demo_is_registered():
    from dashcam.testing.scenarios import demo

    assert SCENARIOS["demo"] is demo


# -- the eval cases name scenarios that exist ----------------------------------------------------

def test_eval_cases_load_and_name_existing_scenarios():
    pytest.importorskip("yaml")
    from dashcam.agent.eval.cases import load_cases
    from dashcam.agent.intents import INTENTS

    cases = load_cases(sorted(CASES.glob("*.yaml")))  # the runner's schema: raises on a bad case
    assert len(cases) >= 60 and len({c.id for c in cases}) == len(cases)
    from dashcam.testing.fleets import FLEETS

    for c in cases:
        if c.profile.fleet:  # a folder of planted reports asked as a fleet, scored under its own intent
            assert c.profile.fleet in FLEETS and c.intent == "fleet", c.id
        else:
            assert c.intent in INTENTS, c.id
            assert c.profile.scenario in SCENARIOS or c.profile.shared, c.id
        assert c.expect.grounded and (c.expect.diagnosis or c.expect.facts), c.id
    assert sum(bool(c.follow_ups) for c in cases) >= 3
    assert 6 <= sum(bool(c.profile.shared) for c in cases) <= 20
