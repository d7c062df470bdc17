import sqlite3

import pytest

from dashcam.profile import Profile
from dashcam.testing.builder import ExportBuilder
from dashcam.testing.scenarios import build as build_scenario
from dashcam.tools import get_tool

from .conftest import MS, SHARED_GPU, US

STEP_MS = [10, 10, 25, 10, 10]  # step 2 is the slow one


def _train_steps(registered: bool = False) -> ExportBuilder:
    """5 back-to-back "train_step" ranges from 0 ms (10, 10, 25, 10, 10 ms), each with a nested "forward"
    (first 4 ms). A decoy on thread 101: "loader", 3 top-level back-to-back ranges over the same 65 ms (equal
    total, and first by name). Kernels: device 0 busy the first half of each step, device 1 the whole step,
    so the lowest busy % is device 0's 50 %.
    """
    b = ExportBuilder()
    for a, z in ((0, 20), (20, 40), (40, 65)):
        b.nvtx("loader", a * MS, z * MS, tid=101)
    t = 0
    for i, d in enumerate(STEP_MS):
        b.nvtx(f"train_step, seq = {i}", t, t + d * MS, registered=registered)
        b.nvtx("forward", t, t + 4 * MS)
        b.launch(0, t + 10 * US, t + 20 * US, t, t + d * MS // 2, name="half")
        b.launch(1, t + 30 * US, t + 40 * US, t, t + d * MS, name="full")
        t += d * MS
    return b


def test_nvtx_steps_with_one_slow_step(build):
    r = get_tool("iterations")(build(_train_steps()))
    assert (r.method, r.label, r.pid, r.tid) == ("nvtx", "train_step", 100, 100)
    assert r.step_count == 5
    assert [s.duration_ns for s in r.steps] == [d * MS for d in STEP_MS]
    assert [s.start_ns for s in r.steps] == [0, 10 * MS, 20 * MS, 45 * MS, 55 * MS]
    assert [(s.gpu_busy_pct, s.gpu_busy_device) for s in r.steps] == [(50.0, 0)] * 5
    assert (r.mean_ns, r.median_ns, r.stdev_ns, r.p90_ns) == (13 * MS, 10 * MS, 6 * MS, 19 * MS)
    assert (r.slowest.index, r.slowest.duration_ns, r.slowest.ratio_to_median) == (2, 25 * MS, 2.5)
    assert (r.fastest.index, r.fastest.duration_ns, r.fastest.ratio_to_median) == (0, 10 * MS, 1.0)
    assert r.busy_devices == [0, 1]


def test_registered_labels_and_gpu_param(build):
    r = get_tool("iterations")(build(_train_steps(registered=True)), {"gpu": 1})
    assert (r.method, r.label, r.step_count, r.busy_devices) == ("nvtx", "train_step", 5, [1])
    assert [(s.gpu_busy_pct, s.gpu_busy_device) for s in r.steps] == [(100.0, 1)] * 5


def test_forced_label_and_limit(build):
    r = get_tool("iterations")(build(_train_steps()), {"label": "FORWARD", "limit": 2})
    assert (r.method, r.label, r.step_count) == ("nvtx", "forward", 5)
    assert [s.duration_ns for s in r.steps] == [4 * MS, 4 * MS]  # first 2 of 5
    assert r.slowest.duration_ns == 4 * MS and any("first 2 of 5" in n for n in r.notes)
    missing = get_tool("iterations")(build(_train_steps()), {"label": "nope"})
    assert (missing.method, missing.step_count, missing.steps) == ("none", 0, [])
    assert any("nope" in n for n in missing.notes)


def test_top_level_dense_label_without_step_name(build):
    """No step-like name: the top-level, back-to-back "phase" (4 x 9 ms, 36 ms) wins over the nested "inner"
    and over "rare", top-level with more total time (3 x 15 ms) but scattered over 135 ms: not dense."""
    b = ExportBuilder()
    for i in range(4):
        b.nvtx("phase", i * 10 * MS, (i + 1) * 10 * MS - 1 * MS)  # 9 ms of every 10 ms
        b.nvtx("inner", i * 10 * MS, i * 10 * MS + 8 * MS)
        b.kernel(0, i * 10 * MS, i * 10 * MS + 3 * MS)
    for start in (40, 100, 160):
        b.nvtx("rare", start * MS, (start + 15) * MS)
    b.nvtx("run", 0, 180 * MS)  # one range around everything: not a step, and does not make "phase" nested
    b.kernel(0, 179 * MS, 180 * MS)
    r = get_tool("iterations")(build(b))
    assert (r.method, r.label, r.step_count) == ("nvtx", "phase", 4)
    assert [round(s.gpu_busy_pct, 3) for s in r.steps] == [33.333] * 4  # 3 ms of kernels in 9 ms


def test_nested_repeating_label_loses_to_the_one_around_it(build):
    """ "leaf" (8 x 5 ms back to back, 40 ms) has more total time than "outer" (3 x 10 ms) but its first six
    ranges lie inside "outer" ranges: "outer" is the top-level step."""
    b = ExportBuilder()
    for i in range(3):
        b.nvtx("outer", i * 10 * MS, (i + 1) * 10 * MS)
    for i in range(8):
        b.nvtx("leaf", i * 5 * MS, (i + 1) * 5 * MS)
    b.kernel(0, 0, 40 * MS)
    r = get_tool("iterations")(build(b))
    assert (r.method, r.label, [s.duration_ns for s in r.steps]) == ("nvtx", "outer", [10 * MS] * 3)


def test_numbered_step_labels_are_one_group(build):
    """ "step 0" .. "step 5" (one label each) are the group "step <n>": 6 back-to-back steps of 8 ms, step 3 takes
    20 ms. A kernel runs the first 4 ms of every step on device 0; one more just after the last step ends the
    window there."""
    b = ExportBuilder()
    t = 0
    durations = [8, 8, 8, 20, 8, 8]
    for i, d in enumerate(durations):
        b.nvtx(f"step {i}", t, t + d * MS)
        b.launch(0, t + 10 * US, t + 20 * US, t, t + 4 * MS, name="work")
        t += d * MS
    b.kernel(0, t, t + 10 * US, name="tail")
    r = get_tool("iterations")(build(b))
    assert (r.method, r.label, r.pid, r.tid, r.step_count) == ("nvtx", "step <n>", 100, 100, 6)
    assert [s.duration_ns for s in r.steps] == [d * MS for d in durations]
    assert [s.start_ns for s in r.steps] == [0, 8 * MS, 16 * MS, 24 * MS, 44 * MS, 52 * MS]
    assert [s.gpu_busy_pct for s in r.steps] == [50.0, 50.0, 50.0, 20.0, 50.0, 50.0]
    assert (r.slowest.index, r.slowest.duration_ns, r.slowest.ratio_to_median, r.slowest.gpu_busy_pct) == \
        (3, 20 * MS, 2.5, 20.0)
    assert (r.median_ns, r.mean_ns) == (8 * MS, 10 * MS)


def test_step_words_rank_and_operators_are_not_steps(build):
    """PyTorch-like: 6 "ProfilerStep#<n>" of 10 ms inside 3 "epoch <n>" ranges (2 steps each); in each step an
    "Optimizer.step#SGD.step" (2 ms, also a step word, but nested) and an "aten::batch_norm" (1 ms, an operator).
    The word "step" ranks before "epoch"; both step groups are nested in the epochs, so the larger total wins:
    ProfilerStep."""
    b = ExportBuilder()
    for e in range(3):
        b.nvtx(f"epoch {e}", e * 20 * MS, (e + 1) * 20 * MS)
    for i in range(6):
        t = i * 10 * MS
        b.nvtx(f"ProfilerStep#{i + 40}", t, t + 10 * MS)
        b.nvtx("aten::batch_norm", t + 1 * MS, t + 2 * MS)
        b.nvtx("Optimizer.step#SGD.step", t + 8 * MS, t + 10 * MS)
    b.kernel(0, 0, 60 * MS)
    r = get_tool("iterations")(build(b))
    assert (r.method, r.label, r.step_count) == ("nvtx", "ProfilerStep#<n>", 6)
    assert [s.duration_ns for s in r.steps] == [10 * MS] * 6


@pytest.mark.parametrize("op", ["aten::to", "aten::batch_norm"])
def test_operator_ranges_are_not_steps(build, op):
    """The operator (4 x 9 ms, top-level and back-to-back, as aten::to when it waits for the GPU) has more total
    time than "phase" (4 x 5 ms, dense too, a 1 ms kernel in each: a step holds GPU work): the operator is skipped,
    even with a step word (batch), and "phase" is the step. Without "phase" there is no NVTX step, and no kernel
    repeats: method none."""
    def profile(with_phase: bool) -> ExportBuilder:
        b = ExportBuilder()
        for i in range(4):
            b.nvtx(f"{op}, seq = {i}", i * 10 * MS, i * 10 * MS + 9 * MS)
            if with_phase:
                b.nvtx("phase", 100 * MS + i * 6 * MS, 100 * MS + i * 6 * MS + 5 * MS)
                b.kernel(0, 101 * MS + i * 6 * MS, 102 * MS + i * 6 * MS, name=f"p{i}")
        b.kernel(0, 0, 1 * MS, name="a")
        b.kernel(0, 130 * MS, 131 * MS, name="b")
        return b

    r = get_tool("iterations")(build(profile(True)))
    assert (r.method, r.label, [s.duration_ns for s in r.steps]) == ("nvtx", "phase", [5 * MS] * 4)
    none = get_tool("iterations")(build(profile(False)))
    assert (none.method, none.step_count) == ("none", 0)
    assert any("aten::to" in n for n in none.notes)
    forced = get_tool("iterations")(build(profile(False)), {"label": op})  # by request it is allowed
    assert (forced.method, forced.label, forced.step_count) == ("nvtx", op, 4)


@pytest.mark.parametrize("call", ["MPI_Sendrecv", "ncclAllReduce", "nvrtcCompileProgram"])
def test_library_calls_are_not_steps(build, call):
    """A library's own call traced as NVTX (MPI under --trace=mpi, NCCL, NVRTC): 4 x 9 ms, top-level and
    back-to-back, more time than "phase" (4 x 5 ms, a 1 ms kernel in each): skipped, and "phase" is the step.
    Without "phase" there is no step; by request (label=) the call's ranges are the steps."""
    def profile(with_phase: bool) -> ExportBuilder:
        b = ExportBuilder()
        for i in range(4):
            b.nvtx(f"{call}_step" if call.startswith("MPI") else call, i * 10 * MS, i * 10 * MS + 9 * MS)
            if with_phase:
                b.nvtx("phase", 100 * MS + i * 6 * MS, 100 * MS + i * 6 * MS + 5 * MS)
                b.kernel(0, 101 * MS + i * 6 * MS, 102 * MS + i * 6 * MS, name=f"p{i}")
        b.kernel(0, 0, 1 * MS, name="a")
        b.kernel(0, 130 * MS, 131 * MS, name="b")
        return b

    r = get_tool("iterations")(build(profile(True)))
    assert (r.method, r.label, [s.duration_ns for s in r.steps]) == ("nvtx", "phase", [5 * MS] * 4)
    assert (get_tool("iterations")(build(profile(False))).method) == "none"
    forced = get_tool("iterations")(build(profile(False)), {"label": call})
    assert (forced.method, forced.step_count, forced.steps[0].duration_ns) == ("nvtx", 4, 9 * MS)


def test_mpi_halo_has_no_mpi_steps(tmp_path):
    """The planted MPI halo exchange (one kernel per iteration, MPI_Sendrecv ranges between): not 19 steps of
    MPI_Sendrecv but the 20 iterations of jacobi_kernel, one launch every 5 ms (a steady period); with
    label=MPI_Sendrecv, 19 ranges of 2.5 ms."""
    p = Profile.open(build_scenario("mpi_halo", tmp_path / "halo.sqlite"), progress=False)
    r = get_tool("iterations")(p)
    assert (r.method, r.launches_per_step, r.step_count, r.period_ns, r.median_ns) == (
        "kernel_pattern", 1, 20, 5 * MS, 5 * MS)
    assert r.kernel_name.startswith("jacobi_kernel")
    forced = get_tool("iterations")(p, {"label": "MPI_Sendrecv"})
    assert (forced.step_count, forced.median_ns) == (19, 2500 * US)


def _kernel_steps(gaps_ms=(10, 10, 20, 10, 10)) -> ExportBuilder:
    """No NVTX. Each step on device 0: A 1 ms, B 1 ms, B 1 ms, C 2 ms back to back from the step start;
    steps start every 10 ms except step 2 (20 ms). Device 1 has fewer kernels."""
    b = ExportBuilder()
    t = 0
    for g in gaps_ms:
        for name, off, length in (("A", 0, 1), ("B", 1, 1), ("B", 2, 1), ("C", 3, 2)):
            b.kernel(0, t + off * MS, t + (off + length) * MS, name=f"void {name}(float*)")
        t += g * MS
    b.kernel(1, 0, 1 * MS, name="other")
    return b


def test_kernel_pattern_when_no_nvtx(build):
    r = get_tool("iterations")(build(_kernel_steps()), {"gpu": 0})
    assert (r.method, r.kernel_name, r.device_id) == ("kernel_pattern", "void A(float*)", 0)
    # 5 occurrences of A give 4 steps: [A_i, A_i+1)
    assert [s.duration_ns for s in r.steps] == [10 * MS, 10 * MS, 20 * MS, 10 * MS]
    assert [s.gpu_busy_pct for s in r.steps] == [50.0, 50.0, 25.0, 50.0]
    assert (r.slowest.index, r.slowest.ratio_to_median, r.median_ns) == (2, 2.0, 10 * MS)


def test_kernel_pattern_dataloader_stall(tmp_path):
    """dataloader_stall: every 20 ms an 8 ms copy, then 10 kernels alternating implicit_gemm_conv_kernel (1.2 ms)
    and bn_relu_kernel (0.8 ms) from c + 8.1 ms, c = T0 + i * 20 ms, T0 = 1 ms. Each name runs 5 times per step
    (gaps 2, 2, 2, 2, 12 ms): the first gemm of each group marks a step, 5 groups give 4 steps of exactly
    20 ms, 10 ms of kernels each (50 %)."""
    p = Profile.open(build_scenario("dataloader_stall", tmp_path / "dl.sqlite"), progress=False)
    r = get_tool("iterations")(p)
    assert (r.method, r.kernel_name, r.device_id, r.launches_per_step) == \
        ("kernel_pattern", "implicit_gemm_conv_kernel", 0, 5)
    assert r.step_count == 4
    assert [s.start_ns for s in r.steps] == [(1 + 8.1 + 20 * i) * MS for i in range(4)]
    assert [s.duration_ns for s in r.steps] == [20 * MS] * 4
    assert [s.gpu_busy_pct for s in r.steps] == [50.0] * 4
    assert (r.median_ns, r.mean_ns, r.stdev_ns, r.slowest.ratio_to_median) == (20 * MS, 20 * MS, 0.0, 1.0)
    assert any("5 times per step" in n for n in r.notes)
    # From 10 ms the first step's group is cut short (4 gemm launches): it is dropped, 4 groups give 3 steps.
    late = get_tool("iterations")(p, {"start_ms": 10})
    assert (late.launches_per_step, [s.start_ns for s in late.steps]) == \
        (5, [(1 + 8.1 + 20 * i) * MS for i in (1, 2, 3)])


def _bursty_steps(step_ms: list[int]) -> ExportBuilder:
    """No NVTX. Each step on device 0: A 1 ms at the start, then B 1 ms three times, from 2 ms every 2 ms; one
    more such block after the last step closes it."""
    b = ExportBuilder()
    t = 0
    for d in [*step_ms, 0]:
        b.kernel(0, t, t + 1 * MS, name="A")
        for j in range(3):
            b.kernel(0, t + (2 + 2 * j) * MS, t + (3 + 2 * j) * MS, name="B")
        t += d * MS
    return b


def test_kernel_pattern_slow_step_is_not_a_group(build):
    """8 steps of 10 ms, step 3 takes 35 ms: A's gaps (10 x 3, 35, 10 x 4) cut into unequal groups (4, 5): a
    slow step, so every A launch marks a step. B runs 3 times per step (gaps 2, 2, then 6 or 31 ms: equal
    groups of 3). Both have 9 markers; A's first marker is first."""
    durations = [10, 10, 10, 35, 10, 10, 10, 10]
    r = get_tool("iterations")(build(_bursty_steps(durations)))
    assert (r.method, r.kernel_name, r.launches_per_step, r.step_count) == ("kernel_pattern", "A", 1, 8)
    assert [s.duration_ns for s in r.steps] == [d * MS for d in durations]
    assert (r.slowest.index, r.slowest.ratio_to_median) == (3, 3.5)
    assert [s.gpu_busy_pct for s in r.steps] == [40.0, 40.0, 40.0, 11.429, 40.0, 40.0, 40.0, 40.0]  # 4 ms of kernels


def test_kernel_pattern_regular_slow_step_makes_the_period(build):
    """Documented limit: 9 steps of 10 ms where exactly every 3rd (steps 2, 5, 8) takes 30 ms. A's launches
    fall into equal groups of 3 (and the closing one), so the pattern repeats every 3 steps: 4 markers, 3 steps of
    50 ms. B (groups of 3 per step, 10 markers) gets one vote as A does; the tie goes to the longer steps."""
    r = get_tool("iterations")(build(_bursty_steps([10, 10, 30] * 3)))
    assert (r.method, r.kernel_name, r.launches_per_step) == ("kernel_pattern", "A", 3)
    assert [s.duration_ns for s in r.steps] == [50 * MS] * 3


def test_no_steps(build):
    b = ExportBuilder()
    b.kernel(0, 0, 1 * MS, name="x")
    b.kernel(0, 2 * MS, 3 * MS, name="y")
    r = get_tool("iterations")(build(b))
    assert (r.method, r.step_count, r.steps, r.slowest) == ("none", 0, [], None)
    assert r.notes


@pytest.mark.parametrize("path", SHARED_GPU, ids=[p.name for p in SHARED_GPU])
def test_real_exports_invariants(path):
    p = Profile.open(path, progress=False)
    r = get_tool("iterations")(p, {"limit": 1000})
    assert r.method in ("nvtx", "kernel_pattern", "none")
    assert r.step_count == len(r.steps)
    starts = [s.start_ns for s in r.steps]
    assert starts == sorted(starts)
    for s in r.steps:
        assert s.duration_ns == s.end_ns - s.start_ns > 0
        assert 0.0 <= s.gpu_busy_pct <= 100.0 and s.gpu_busy_device in r.busy_devices
    if r.method == "kernel_pattern":
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        occurrences = con.execute(
            "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.demangledName "
            "WHERE s.value = ? AND k.deviceId = ?", (r.kernel_name, r.device_id)).fetchone()[0]
        con.close()
        # k markers give k - 1 steps; the markers are groups of launches_per_step (the first and last may be short);
        # a steady loop (period_ns) is one step a repeat
        per = r.launches_per_step
        if r.period_ns is not None:
            assert occurrences == r.step_count * per
        else:
            assert r.step_count * per + 1 <= occurrences <= (r.step_count + 2) * per - 1
    if r.step_count:
        assert r.slowest.duration_ns == max(s.duration_ns for s in r.steps)
        assert r.fastest.duration_ns == min(s.duration_ns for s in r.steps)
