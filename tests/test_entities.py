"""Questions about this program's own kernels, NVTX ranges, functions and features (issue 25).

The profiles are dashcam.testing.entity_programs: ``entities`` (one A100, 108 SMs; `add` 1 launch of 20 ms with
16 page-fault migrations of 4 MiB and 1,024 GPU page faults during it; `matmul_kernel` 9 + 1 launches of two
instantiations; `histogram_kernel` 10 launches of one block; `stencil_kernel` starting 4 ms after each launch;
"inference" 5 ranges of 6, 7, 7, 8, 9 ms; MPI as NVTX ranges, 14 ms; an NVRTC compile range of 10 ms) and
``no_mpi`` (the same GPU work, no MPI and no compile step). Every figure is from the docstrings.
"""
from __future__ import annotations

import pytest

from dashcam.agent.ask import ask
from dashcam.agent.targets import parse_targets
from dashcam.profile import Profile
from dashcam.testing.builder import ExportBuilder
from dashcam.testing.entity_programs import entities, no_mpi
from dashcam.tools import get_tool

MS = 1_000_000
US = 1_000


def opened(tmp_path_factory, builds: dict) -> dict:
    """Each planted program built and opened once, with its own cache folder."""
    tmp = tmp_path_factory.mktemp("entities")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DASHCAM_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
        return {name: Profile.open(build(tmp / f"{name}.sqlite"), progress=False) for name, build in builds.items()}


@pytest.fixture(scope="module")
def profiles(tmp_path_factory):
    return opened(tmp_path_factory, {"entities": entities, "no_mpi": no_mpi})


@pytest.fixture(scope="module")
def p(profiles):
    return profiles["entities"]


def offline(question, profile):
    return ask(question, profile, offline=True)


# -- kernel_detail -------------------------------------------------------------------------------------

def test_kernel_detail_of_a_kernel_stalled_by_page_faults(p):
    r = get_tool("kernel_detail")(p, {"kernel": "add"})
    assert (r.launches, r.total_ns, r.share_pct, r.kernel_time_ns) == (1, 20 * MS, 38.095, 52_500_000)
    assert (r.blocks, r.threads_per_block, r.sm_count, r.sms_used) == (4096, 256, 108, 108)
    assert (r.migrations.count, r.migrations.bytes, r.migrations.overlap_ns) == (16, 64 << 20, 16 * MS)
    assert (r.page_fault_migrations, r.gpu_page_faults) == (16, 1024)
    assert (r.copies.count, r.other_kernels.count) == (0, 0)
    assert (r.latency_launches, r.latency_median_ns) == (1, 10 * US)
    assert [(x.nvtx_range, x.launches) for x in r.launched_from] == [("solver", 1)]


def test_kernel_detail_instantiations_grid_and_latency(p):
    m = get_tool("kernel_detail")(p, {"kernel": "matmul"})
    assert [(i.full_name.split("(")[0], i.launches, i.total_ns) for i in m.instantiations] == [
        ("void matmul_kernel<float>", 9, 18 * MS), ("void matmul_kernel<__half>", 1, 2 * MS)]
    assert (m.blocks, m.blocks_per_sm) == (216, 2.0)
    h = get_tool("kernel_detail")(p, {"kernel": "histogram_kernel"})
    assert (h.launches, h.blocks, h.sms_used, h.median_ns) == (10, 1, 1, 1 * MS)
    s = get_tool("kernel_detail")(p, {"kernel": "stencil"})
    assert (s.latency_launches, s.latency_min_ns, s.latency_max_ns) == (5, 4 * MS, 4 * MS)
    assert s.latency_gpu_busy_pct == 0.0  # nothing ran on the GPU while they waited
    assert get_tool("kernel_detail")(p, {"kernel": "no_such_kernel"}).launches == 0


# -- range_detail --------------------------------------------------------------------------------------

def test_range_detail_per_instance_and_what_ran_inside(p):
    r = get_tool("range_detail")(p, {"label": "inference"})
    assert (r.instances, r.total_ns, r.median_ns, r.min_ns, r.max_ns) == (5, 37 * MS, 7 * MS, 6 * MS, 9 * MS)
    assert (r.kernel_count, r.kernel_ns, r.copy_count, r.copy_bytes) == (10, 20 * MS, 5, 5 * (4 << 20))
    assert (r.gpu_busy_ns, r.open_ns) == (21 * MS, 37 * MS)  # 4 ms of matmuls and 0.2 ms of copy each
    assert [k.name for k in r.kernels] == ["matmul_kernel"]


# -- feature_time --------------------------------------------------------------------------------------

def test_feature_time_finds_mpi_and_jit_in_nvtx_and_api(p):
    mpi = get_tool("feature_time")(p, {"feature": "mpi"})
    assert (mpi.found, mpi.total_ns, mpi.main_source) == (True, 14 * MS, "nvtx")
    nvtx = next(s for s in mpi.sources if s.source == "nvtx")
    assert [(n.name, n.count, n.total_ns, n.mean_ns) for n in nvtx.names] == [
        ("MPI_Allreduce", 4, 12 * MS, 3 * MS), ("MPI_Barrier", 2, 2 * MS, 1 * MS)]
    said = offline("how much time do we lose to MPI?", p)  # "lose ... to" is time too
    assert "`MPI_Allreduce` 4 ranges, 12 ms (3 ms each)" in said.answer and said.grounded
    named = offline("why does this rank wait so long in MPI_Barrier?", p)  # the named range's analysis after
    assert named.intent == "time_in" and named.grounded
    assert "One `MPI_Barrier` takes a median 1 ms" in named.answer
    assert "`MPI_Barrier` returns only when the other ranks it waits for get there" in named.answer
    jit = get_tool("feature_time")(p, {"feature": "jit"})
    assert (jit.total_ns, jit.main_source) == (10 * MS, "nvtx")
    api = next(s for s in jit.sources if s.source == "api")
    assert [(n.name, n.total_ns) for n in api.names] == [("cuModuleLoadDataEx", 2_500_000)]


def test_feature_time_says_where_it_looked_when_absent(profiles):
    r = get_tool("feature_time")(profiles["no_mpi"], {"feature": "mpi"})
    assert (r.found, r.total_ns, r.looked_in) == (False, 0, ["nvtx"])
    assert "--trace=mpi" in r.capture


def test_feature_time_finds_mpi_in_os_runtime_calls(tmp_path, monkeypatch):
    """No NVTX at all: MPI_Recv / MPI_Send recorded as OS runtime calls (2 + 1 ms, overlapping 0.5 ms)."""
    monkeypatch.setenv("DASHCAM_CACHE_DIR", str(tmp_path / "cache"))
    b = ExportBuilder("2024")
    b.gpu(0, "NVIDIA A100-SXM4-80GB", 108)
    b.launch(0, 1 * MS, 1 * MS + 10 * US, 1 * MS + 20 * US, 10 * MS, pid=900)
    b.osrt("MPI_Recv", 2 * MS, 4 * MS, pid=900)
    b.osrt("MPI_Send", 3_500 * US, 4_500 * US, pid=900, tid=901)
    b.osrt("poll", 5 * MS, 6 * MS, pid=900)
    r = get_tool("feature_time")(Profile.open(b.write(tmp_path / "osrt.sqlite"), progress=False), {"feature": "mpi"})
    osrt = next(s for s in r.sources if s.source == "osrt")
    assert (osrt.recorded, osrt.count, osrt.summed_ns, osrt.union_ns) == (True, 2, 3 * MS, 2_500_000)
    assert (r.found, r.main_source, r.total_ns) == (True, "osrt", 2_500_000)


def test_compiles_on_parallel_threads_say_the_union_and_the_sum_apart(tmp_path, monkeypatch):
    """Two compile ranges on two threads at once, [1, 5] and [2, 6] ms: 5 ms of wall time, 8 ms summed."""
    from dashcam.agent.planner import answer_offline

    monkeypatch.setenv("DASHCAM_CACHE_DIR", str(tmp_path / "cache"))
    b = ExportBuilder("2024")
    b.gpu(0, "NVIDIA A100-SXM4-80GB", 108)
    b.launch(0, 0, 10 * US, 20 * US, 10 * MS, pid=900)
    b.nvtx("compileKernel", 1 * MS, 5 * MS, pid=900)
    b.nvtx("compileKernel", 2 * MS, 6 * MS, pid=900, tid=901)
    p = Profile.open(b.write(tmp_path / "jit.sqlite"), progress=False)
    nvtx = next(s for s in get_tool("feature_time")(p, {"feature": "jit"}).sources if s.source == "nvtx")
    assert (nvtx.count, nvtx.summed_ns, nvtx.union_ns) == (2, 8 * MS, 5 * MS)
    a = answer_offline("how much time is spent compiling kernels?", p)
    assert ("The 5 ms is the time at least one of them was running; summed over threads and nesting they add up "
            "to 8 ms, so each name's total can exceed it.") in a.answer
    assert a.grounded, a.ungrounded_numbers


# -- api_detail -----------------------------------------------------------------------------------------

def test_api_detail_says_what_a_sync_waits_for(p):
    """cudaDeviceSynchronize [80.2, 90.05] ms while the 10 histogram launches run [80, 90] ms: 9.8 ms of kernels."""
    r = get_tool("api_detail")(p, {"name": "cudadevicesynchronize"})
    assert (r.function, r.calls, r.total_ns, r.union_ns) == ("cudaDeviceSynchronize", 1, 9_850_000, 9_850_000)
    assert (r.gpu_busy_ns, r.gpu_busy_pct) == (9_800_000, 99.492)
    assert [(k.name, k.count, k.overlap_ns) for k in r.during] == [("histogram_kernel", 10, 9_800_000)]
    assert [(c.nvtx_range, c.calls) for c in r.called_from] == [(None, 1)]
    launches = get_tool("api_detail")(p, {"name": "cudaLaunchKernel"})
    assert ("inference", 10) in [(c.nvtx_range, c.calls) for c in launches.called_from]


# -- entities in questions -----------------------------------------------------------------------------

def test_a_kernel_named_in_code_is_a_kernel_even_when_the_profile_lacks_it(p):
    assert parse_targets("how does my Julia broadcast_kernel perform?", p).kernel == "broadcast_kernel"
    assert parse_targets("why does my add kernel take 20 ms?", p).kernel == "add"


def test_a_kernel_that_starts_before_its_launch_call_returns_has_no_delay(tmp_path, monkeypatch):
    """The launch call [0, 10] us, the kernel from 8 us: it started 2 us before the call returned."""
    monkeypatch.setenv("DASHCAM_CACHE_DIR", str(tmp_path / "cache"))
    b = ExportBuilder("2024")
    b.gpu(0, "NVIDIA A100-SXM4-80GB", 108)
    b.launch(0, 0, 10 * US, 8 * US, 5 * MS, name="voxelize_kernel", pid=900, grid=(4096, 1, 1))
    a = offline("is voxelize_kernel using the GPU well?", Profile.open(b.write(tmp_path / "v.sqlite"), progress=False))
    assert ("Launch to start: the kernel starts before its launch call returns (a median 2 µs before), so there is "
            "no launch-to-start delay.") in a.answer
    assert a.grounded, a.ungrounded_numbers


def test_the_programs_framework_is_no_kernel_filter(tmp_path, monkeypatch):
    """CuPy's kernels carry its name (`cupy_subtract`); "my CuPy program" still filters no kernels."""
    monkeypatch.setenv("DASHCAM_CACHE_DIR", str(tmp_path / "cache"))
    b = ExportBuilder("2024")
    b.gpu(0, "NVIDIA A100-SXM4-80GB", 108)
    b.launch(0, 0, 10 * US, 20 * US, 1 * MS, name="cupy_subtract__int64_int64_int64", pid=900)
    p = Profile.open(b.write(tmp_path / "cupy.sqlite"), progress=False)
    assert parse_targets("what takes the most time in my CuPy program?", p).kernel is None
    assert parse_targets("how long do the cupy kernels take?", p).kernel == "cupy"


def test_a_label_namespace_names_its_ranges_not_nccl(tmp_path, monkeypatch):
    """'time in FSDP?' with `FSDP::…` NVTX ranges: those ranges (every group, then the largest), not NCCL's kernels;
    'FSDP's communication' stays NCCL."""
    monkeypatch.setenv("DASHCAM_CACHE_DIR", str(tmp_path / "cache"))
    b = ExportBuilder("2024")
    b.gpu(0, "NVIDIA A100-SXM4-80GB", 108)
    b.process(100, "python")
    b.launch(0, 0, 10 * US, 20 * US, 100 * US, name="vectorized_elementwise_kernel")  # the window from 20 us
    for i in range(2):
        t = 1 * MS + i * 10 * MS
        b.nvtx("FSDP::pre_forward (blocks.0)", t, t + 1 * MS)
        b.nvtx("FSDP::post_forward (blocks.0)", t + 2 * MS, t + 2500 * US)
        b.launch(0, t + 3 * MS, t + 3010 * US, t + 3020 * US, t + 5 * MS, name="ncclDevKernel_AllGather_RING_LL")
    p = Profile.open(b.write(tmp_path / "fsdp.sqlite"), progress=False)
    a = ask("how much time is spent in FSDP?", p)
    assert a.intent == "nvtx"
    assert a.answer.startswith("NVTX ranges whose label contains `FSDP`: 4 ranges in 2 label groups, 3 ms in total "
                               "(summed: nested ranges each count); the largest group follows. NVTX range "
                               "`FSDP::pre_forward (blocks.0)`: 2 ranges, 2 ms in total")
    assert ask("how much time does FSDP communication take?", p).intent == "nccl"


@pytest.mark.parametrize("question, intent, facts", [
    ("why does my add kernel take 20 ms?", "top_kernels", ["16 unified-memory migrations", "1024 GPU page faults",
                                                           "`solver`"]),
    ("is my histogram kernel using the GPU well?", "top_kernels", ["1 block of 256 threads", "108 SMs",
                                                                  "occupies 1 of them"]),
    ("how does histogram_kernel compare to the GPU's peak?", "top_kernels", ["108 SMs"]),
    ("how does my Julia broadcast_kernel perform?", "top_kernels", ["No kernel name contains `broadcast_kernel`"]),
    ("how does my GPU compare to its peak?", "compare_gpus", ["Against what GPU 0 can do: it is kernel-busy 38.6 %",
                                                              "ncu --set full"]),
    ("how long does one inference take?", "nvtx", ["median 7 ms", "from 6 ms to 9 ms", "10 kernels"]),
    ("how long does one decode take?", "nvtx", ["No NVTX range label contains `decode`"]),
    ("how much time does MPI communication cost this rank?", "time_in", ["14 ms", "`MPI_Allreduce` 4 ranges"]),
    ("how much time is spent compiling kernels with NVRTC?", "time_in", ["10 ms", "`cuModuleLoadDataEx` 2.5 ms"]),
    ("is NCCL communication overlapped with compute?", "nccl", ["no NCCL kernels", "MPI takes 14 ms"]),
    ("what is cudaDeviceSynchronize waiting on?", "sync", ["it waits for `histogram_kernel` (10 kernels, 9.8 ms)"]),
    ("why does stencil_kernel start 4 ms after it is launched?", "launch",
     ["a median 4 ms", "every launch alike", "not queued behind other GPU work"]),
])
def test_entity_questions_get_the_entity_analysis(p, question, intent, facts):
    a = offline(question, p)
    assert a.intent == intent
    for f in facts:
        assert f in a.answer, (f, a.answer)
    assert a.grounded and not a.ungrounded_numbers


def test_an_absent_feature_is_denied_with_what_was_looked_for(profiles):
    a = offline("how much time is spent in MPI calls?", profiles["no_mpi"])
    assert a.intent == "time_in"
    assert "This capture holds no MPI: I looked for its names in the NVTX ranges" in a.answer
    assert "--trace=mpi" in a.answer and "idle" not in a.answer
    n = offline("is communication between processes exposed?", profiles["no_mpi"])
    assert "no NCCL kernels in this profile and no MPI" in n.answer


# -- copies per iteration, what limits a step ------------------------------------------------------------

@pytest.fixture(scope="module")
def loops(tmp_path_factory):
    from dashcam.testing.entity_programs import data_region, no_data_region

    return opened(tmp_path_factory, {"data_region": data_region, "no_data_region": no_data_region})


def test_step_copies_with_and_without_a_data_region(loops):
    """10 iterations of `jacobi_kernel` (steps from launch to launch); with the data region the two 8 MiB copies
    lie outside the loop; without it each step holds its DtoH and the next iteration's HtoD (the first HtoD
    precedes the first launch, the last DtoH starts as the last step ends): 19 inside, 3 outside."""
    tool = get_tool("step_copies")
    kept = tool(loops["data_region"], {})
    assert (kept.method, kept.steps, kept.copies_inside, kept.copies_outside) == ("kernel_pattern", 10, 0, 2)
    moved = tool(loops["no_data_region"], {})
    assert (moved.steps_with_copies, moved.copies_inside, moved.copies_outside) == (10, 19, 3)
    assert (moved.median_copies_per_step, moved.median_step_bytes) == (2.0, 16 * (1 << 20))
    assert [(d.kind, d.copies) for d in moved.inside] == [("DtoH", 10), ("HtoD", 9)]


def test_per_iteration_copy_questions(loops):
    q = "did my target data region remove the per-iteration copies?"
    kept = offline(q, loops["data_region"])
    assert kept.intent == "memcpy" and kept.answer.startswith("No copies inside the 10 iterations of `jacobi_kernel`")
    moved = offline(q, loops["no_data_region"])
    assert moved.answer.startswith("The copies are still per iteration: 10 of the 10 iterations")
    assert moved.grounded and kept.grounded


def test_without_a_loop_as_many_copies_as_kernels_say_the_data_moves(tmp_path, monkeypatch):
    """Three compute regions, each its own kernel between an HtoD and a DtoH copy: no loop, 6 copies for 3 kernels."""
    monkeypatch.setenv("DASHCAM_CACHE_DIR", str(tmp_path / "cache"))
    b = ExportBuilder("2024")
    b.gpu(0, "NVIDIA A100-SXM4-80GB", 108)
    for i, k in enumerate(("collide", "stream", "boundary")):
        t = i * 10 * MS
        b.memcpy(0, t, t + 1 * MS, 1 << 20, "HtoD", pid=900)
        b.launch(0, t + 1 * MS, t + 1 * MS + 10 * US, t + 2 * MS, t + 5 * MS, name=f"{k}_gpu", pid=900)
        b.memcpy(0, t + 5 * MS, t + 6 * MS, 1 << 20, "DtoH", pid=900)
    a = offline("did my data region keep the arrays on the GPU?", Profile.open(b.write(tmp_path / "r.sqlite"),
                                                                              progress=False))
    assert a.answer.startswith("No loop was found to count copies against (no NVTX step ranges, no repeating "
                               "kernel); the capture has 6 copies in all for 3 kernels: as many copies as kernels "
                               "or more, so the data moves with the compute regions"), a.answer
    assert a.grounded, a.ungrounded_numbers


def test_what_limits_the_frame_rate_is_what_fills_a_typical_step(tmp_path_factory):
    """demo: 6 steps of 20 ms; GPU 1 is kernel-busy 40 % of each, idle mostly in its 8 ms cudaMemcpy."""
    from dashcam.testing.scenarios import demo

    a = offline("what limits my frame rate? each frame takes 40 ms", opened(tmp_path_factory, {"demo": demo})["demo"])
    assert a.intent == "iterations"
    assert "A typical step, step 0 (20 ms), is kernel-busy 40.0 % on GPU 1" in a.answer
    assert "`cudaMemcpy`" in a.answer and a.grounded


def test_a_kernel_named_exactly_among_longer_names_gets_its_own_analysis(tmp_path, monkeypatch):
    """`add` (2 launches of 3 ms) beside `addmm_kernel` (1 of 5 ms): "my add kernel" analyses `add` alone."""
    monkeypatch.setenv("DASHCAM_CACHE_DIR", str(tmp_path / "cache"))
    b = ExportBuilder("2024")
    b.gpu(0, "NVIDIA A100-SXM4-80GB", 108)
    b.launch(0, 1 * MS, 1 * MS + 10 * US, 1 * MS + 20 * US, 4 * MS + 20 * US, name="add(float *)", pid=900)
    b.launch(0, 5 * MS, 5 * MS + 10 * US, 5 * MS + 20 * US, 8 * MS + 20 * US, name="add(float *)", pid=900)
    b.launch(0, 9 * MS, 9 * MS + 10 * US, 9 * MS + 20 * US, 14 * MS + 20 * US, name="addmm_kernel(float *)", pid=900)
    prof = Profile.open(b.write(tmp_path / "add.sqlite"), progress=False)
    assert get_tool("kernel_detail")(prof, {"kernel": "add", "exact": True}).launches == 2
    a = offline("why is my add kernel slow?", prof)
    assert a.intent == "top_kernels"
    assert "Per launch of `add`: mean 3 ms, median 3 ms, longest 3 ms." in a.answer and a.grounded


def test_a_misspelled_kernel_or_range_name_is_read_as_the_profiles(tmp_path):
    b = ExportBuilder()
    b.gpu(0)
    b.nvtx("inference", 0, 20 * MS)
    b.launch(0, 0, 5 * US, 10 * US, 10 * MS, name="histogram_kernel", grid=(1, 1, 1), block=(256, 1, 1))
    b.launch(0, 11 * MS, 11 * MS + 5 * US, 11 * MS + 10 * US, 12 * MS, name="reduce_sum")
    p = Profile.open(b.write(tmp_path / "typos.sqlite"), progress=False)
    got = {q: (t.kernel, t.nvtx) for q in ("is my histgram kernel using the GPU well?",
                                           "why is my histogrm_kernel slow?",
                                           "how long does one inferense take?",
                                           "why is my gemm kernel slow?")
           for t in [parse_targets(q, p)]}
    assert got == {"is my histgram kernel using the GPU well?": ("histogram", None),
                   "why is my histogrm_kernel slow?": ("histogram_kernel", None),
                   "how long does one inferense take?": (None, "inference"),
                   "why is my gemm kernel slow?": (None, None)}  # short words are never matched loosely


def test_a_named_stream_gets_its_own_figures(tmp_path):
    b = ExportBuilder()
    b.gpu(0)
    b.launch(0, 0, 5 * US, 10 * US, 4 * MS, name="gemm", stream=7)
    b.launch(0, 10 * US, 15 * US, 20 * US, 1 * MS, name="copy_kernel", stream=13)
    b.launch(0, 5 * MS, 5 * MS + 5 * US, 5 * MS + 10 * US, 10 * MS, name="gemm", stream=7)
    p = Profile.open(b.write(tmp_path / "streams.sqlite"), progress=False)
    a = ask("what does stream 13 do?", p, offline=True)
    assert a.intent == "streams" and a.targets.streams == [13] and a.grounded, a.answer
    assert a.answer.startswith("Stream 13 on GPU 0 ran 1 kernel, busy 9.8 % of the window (0.98 ms).")
    a = ask("is stream 21 busy?", p, offline=True)
    assert a.answer == "No stream 21 has work in the 9.99 ms window (streams: GPU 0: 7, 13)." and a.grounded
