"""`dashcam summary`: one planted profile per verdict, exact verdicts and key numbers; the real profiles;
the CLI formats; the --llm rewrite against the scripted server."""
from __future__ import annotations

import json
import re
import shlex

import pytest

from dashcam.agent.llm import UNTRUSTED, LLMConfig
from dashcam.agent.rewrite import rewrite
from dashcam.evidence.grounding import check, numbers_in
from dashcam.findings import VERDICTS
from dashcam.findings.story import MAX_NUMBERS
from dashcam.findings.thresholds import HEALTHY_MIN_KERNEL_BUSY_PCT
from dashcam.measure.labels import KERNEL_FAMILIES, kernel_family
from dashcam.profile import Profile
from dashcam.reports.summary import MAX_WORDS, Summary, summarize, to_markdown, to_text
from dashcam.testing.builder import ExportBuilder
from dashcam.testing.scenarios import demo

from .conftest import MS, SHARED_GPU, US, run_cli
from .fake_openai import FakeOpenAI, cut, error, say

NCCL_KERNEL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL"


def key_numbers(paragraph: str) -> list[str]:
    """The numbers a reader sees (GPU ids and other ordinals left out)."""
    return [text for text, _, unit in numbers_in(paragraph) if not (unit or "").startswith("#")]


def check_contract(s: Summary) -> None:
    """What every summary with kernels must satisfy."""
    assert s.verdict in VERDICTS
    assert s.grounded and s.ungrounded_numbers == []
    assert check(s.paragraph, s.evidence) == (True, [])
    assert len(s.paragraph.split()) <= MAX_WORDS
    assert 2 <= len(key_numbers(s.paragraph)) <= MAX_NUMBERS, key_numbers(s.paragraph)
    assert re.search(r"First thing to try( \(saves up to [^)]+\))?:", s.paragraph)
    assert all(f.evidence for f in s.findings)


def steady(b: ExportBuilder, device: int, n: int, period: int, dur, names, pid: int = 100, start: int = 1 * MS,
           grid=lambda i: (256, 1, 1), stream: int = 7):
    """n kernels, kernel i at start + i*period lasting dur(i), each launched by a 5 us call ending 5 us before it."""
    for i in range(n):
        ks = start + i * period
        b.launch(device, ks - 10 * US, ks - 5 * US, ks, ks + dur(i), name=names(i), pid=pid, grid=grid(i),
                 stream=stream)


def fig(s: Summary, kind: str) -> dict:
    return next(f for f in s.findings if f.kind == kind).figures


# -- one planted profile per verdict ------------------------------------------------------------

def test_healthy_is_gpu_bound_and_names_the_top_family(build):
    """100 kernels every 1 ms: 950 us on GPU 0, 900 us on GPU 1; 3 in 5 are GEMMs.
    Window [1, 100.95] ms = 99.95 ms; GPU 1 busy 90 / 99.95 = 90.045 %; GEMM 111 of 185 ms = 60.0 %."""
    b = ExportBuilder()
    for d in (0, 1):
        b.gpu(d)
        steady(b, d, 100, 1 * MS, lambda i, d=d: (950 if d == 0 else 900) * US,
               lambda i: "ampere_sgemm_128x64_tn" if i % 5 < 3 else "vectorized_elementwise_kernel", pid=100 + d)
    s = summarize(build(b))
    check_contract(s)
    assert s.verdict == "healthy"
    assert [f.kind for f in s.findings][:2] == ["gpu_busy", "kernel_family"]
    assert all(f.severity == "info" for f in s.findings)
    busy = fig(s, "gpu_busy")
    assert (busy["least_busy_gpu"], busy["least_kernel_busy_pct"]) == (1, round(100 * 90 / 99.95, 3))
    assert (busy["most_busy_gpu"], busy["most_kernel_busy_pct"]) == (0, round(100 * 95 / 99.95, 3))
    assert busy["least_kernel_busy_pct"] >= HEALTHY_MIN_KERNEL_BUSY_PCT
    fam = fig(s, "kernel_family")
    assert (fam["family"], fam["pct"], fam["total_ns"], fam["kernel_count"]) == ("GEMM", 60.0, 111 * MS, 120)
    assert fam["top_kernel"] == "ampere_sgemm_128x64_tn"
    assert s.paragraph.startswith("Healthy and GPU-bound: every GPU is mostly kernel-busy; the least, GPU 1, is "
                                  "kernel-busy 90.0 % of the 99.95 ms window.")
    assert "GEMM kernels (60.0 % of it, led by `ampere_sgemm_128x64_tn`)" in s.paragraph
    assert "matrix multiplies" in s.paragraph
    assert "gpu_gaps" not in [e.tool for e in s.evidence]  # no idle time to explain: the costly tool is skipped


def sync_or_cpu(sync: bool, devices=(0,), busy_ms=(2,)) -> ExportBuilder:
    """10 steps of 10 ms from 1 ms: a kernel of busy_ms, then (sync) the thread blocks in
    cudaDeviceSynchronize until 9.99 ms - 90 us, then launches the next kernel (call [-10, -5] us)."""
    b = ExportBuilder()
    for d, k in zip(devices, busy_ms):
        b.gpu(d)
        pid = 100 + d
        for i in range(10):
            t = 1 * MS + i * 10 * MS
            b.launch(d, t - 10 * US, t - 5 * US, t, t + k * MS, name="my_step_kernel", pid=pid)
            if sync and i < 9:
                b.api("cudaDeviceSynchronize", t + k * MS, t + 9900 * US, pid=pid)
    return b


def test_idle_waiting_in_synchronize(build):
    """Window [1, 93] ms = 92 ms, kernel busy 20 ms; 9 gaps of 8 ms, each 7.9 ms in the sync call:
    idle 72 ms = 78.261 %, sync_wait 71.1 ms = 98.75 % of it."""
    s = summarize(build(sync_or_cpu(sync=True)))
    check_contract(s)
    assert s.verdict == "idle"
    top = s.findings[0]
    assert (top.kind, top.severity, top.gpus) == ("idle", "high", [0])
    f = top.figures
    assert (f["kernel_idle_pct"], f["kernel_idle_ns"], f["kernel_busy_pct"]) == (78.261, 72 * MS, 21.739)
    assert (f["dominant_cause"], f["cause_ns"], f["cause_pct"], f["led_by"]) == (
        "sync_wait", 71_100 * US, 98.75, "cudaDeviceSynchronize")
    assert s.paragraph.startswith("Mostly kernel-idle: GPU 0 is kernel-idle 78.3 % of the 92 ms window, waiting on "
                                  "the CPU, which is blocked in synchronize calls: `sync_wait` is 98.8 % of the "
                                  "kernel-idle time, led by `cudaDeviceSynchronize`.")
    # the workload is a plain Python process: the neutral CUDA remedy, no framework idiom
    assert s.paragraph.endswith("First thing to try (saves up to 71.1 ms): remove the `cudaDeviceSynchronize` calls "
                                "the loop does not need, or wait on a CUDA event only where the result is needed.")


def test_idle_on_the_cpu_groups_the_gpus(build):
    """Two GPUs, 2 ms and 4 ms kernels per 10 ms step, the thread in no CUDA call between launches.
    Window [1, 95] ms = 94 ms. GPU 0: idle 74 ms = 78.723 % (9 gaps x 7.99 ms cpu_work = 71.91 ms = 97.176 %,
    plus the 2 ms tail, unknown); GPU 1: idle 54 ms = 57.447 %. Both high and cpu_work: one finding."""
    s = summarize(build(sync_or_cpu(sync=False, devices=(0, 1), busy_ms=(2, 4))))
    check_contract(s)
    assert s.verdict == "idle"
    top = s.findings[0]
    assert (top.kind, top.severity, top.gpus) == ("idle", "high", [0, 1])
    f = top.figures
    assert (f["gpu"], f["kernel_idle_pct"], f["kernel_idle_ns"], f["dominant_cause"], f["cause_ns"],
            f["cause_pct"]) == (
        0, 78.723, 74 * MS, "cpu_work", 71_910 * US, 97.176)
    assert "led_by" not in f
    assert s.paragraph.startswith("Mostly kernel-idle: all GPUs are kernel-idle up to 78.7 % of the 94 ms window "
                                  "(GPU 0 the most), waiting on the CPU, which is busy in Python outside CUDA calls: "
                                  "`cpu_work` is 97.2 % of the kernel-idle time of GPU 0.")
    # Python without a framework: no DataLoader or torch idiom, nothing the capture does not show
    assert "dataloader" not in s.paragraph.lower() and "torch" not in s.paragraph
    assert "py-spy" in s.paragraph
    assert [x.kind for x in s.findings if x.severity != "info"] == ["idle"]


def test_demo_names_the_gpu_that_differs(build, tmp_path):
    """dashcam.testing.scenarios.demo: GPU 1 idle 59.18 % (cuda_api 69.133 %, the synchronous pageable cudaMemcpy),
    GPU 0 kernel-busy 81.64 % (idle 18.36 %, low, cpu_work)."""
    s = summarize(Profile.open(demo(tmp_path / "demo.sqlite"), progress=False))
    check_contract(s)
    assert s.verdict == "idle"
    assert [(f.kind, f.severity, f.gpus) for f in s.findings if f.severity != "info"] == [
        ("idle", "medium", [1]), ("idle", "low", [0])]  # severity by the saving: cuda_api 48.11 ms = 40.9 %
    f = s.findings[0].figures
    assert (f["kernel_idle_pct"], f["dominant_cause"], f["cause_pct"], f["led_by"]) == (59.18, "cuda_api", 69.133,
                                                                                 "cudaMemcpy")
    assert s.findings[1].figures["dominant_cause"] == "cpu_work"
    assert s.paragraph == (
        "Mostly kernel-idle: GPU 1 is kernel-idle 59.2 % of the 117.59 ms window, waiting on the CPU, which is inside "
        "other CUDA API calls: `cuda_api` is 69.1 % of the kernel-idle time, led by `cudaMemcpy`. GPU 0 differs: it is "
        "kernel-busy 81.6 % of the window. First thing to try (saves up to 48 ms): overlap the copies with compute: "
        "`cudaMemcpyAsync` on a second stream from pinned memory, in chunks (double buffering), so one chunk copies "
        "while the kernels work on the other.")
    assert s.workload == "python"  # `python train.py`: no framework evidence, so the remedy is in CUDA terms
    assert fig(s, "iterations")["step_count"] == 6


def test_transfer_bound(build):
    """10 steps of 10 ms from 1 ms: a pinned 6 ms HtoD copy, then a 2 ms kernel queued behind it.
    Window [1, 99] ms = 98 ms: copies busy 60 ms = 61.224 %, kernels 20 ms = 20.408 %, no overlap."""
    b = ExportBuilder()
    b.gpu(0)
    for i in range(10):
        t = 1 * MS + i * 10 * MS
        b.copy_call(0, t, t + 10 * US, t, t + 6 * MS, 1 << 30, "HtoD", pinned=True)
        b.launch(0, t + 20 * US, t + 25 * US, t + 6 * MS, t + 8 * MS, name="my_step_kernel")
    s = summarize(build(b))
    check_contract(s)
    assert s.verdict == "transfer_bound"
    top = s.findings[0]
    # severity by what the first remedy saves: overlapping hides at most the 20 ms of kernels (20.4 %)
    assert (top.kind, top.severity, top.gpus, top.saving_ns) == ("transfer_bound", "low", [0], 20 * MS)
    assert (top.figures["copy_busy_pct"], top.figures["kernel_busy_pct"],
            top.figures["copy_kernel_overlap_pct"], top.figures["copy_bytes"]) == (61.224, 20.408, 0.0, 10 << 30)
    # the idle finding it explains ranks second: the same copy remedy, the same saving
    assert (s.findings[1].kind, s.findings[1].severity, s.findings[1].figures["dominant_cause"],
            s.findings[1].saving_ns) == ("idle", "low", "memcpy", 20 * MS)
    assert s.paragraph.startswith("Transfer-bound: GPU 0 is copy-busy 61.2 % of the 98 ms window, "
                                  "more than kernel-busy (20.4 %); no copy overlaps a kernel.")
    # pinned asynchronous copies (1 GiB in 6 ms, past the link's peak): said as done, then overlap advice that
    # does not repeat cudaMemcpyAsync, and beyond that less data
    assert "First thing to try (saves up to 20 ms): all 10 host copies on GPU 0 are already pinned and run at " \
           "179 GB/s, as fast as pinned copies go over PCIe 5.0 x16; overlap the copies with compute: give them a " \
           "stream of their own" in s.paragraph
    assert s.paragraph.endswith("beyond that, only moving less data shortens the copies themselves: copy only what "
                                "the GPU needs, in a compact form (lower precision, packed data), or generate it on "
                                "the GPU.")
    assert not re.search(r"cudaMallocHost|cudaHostRegister|copy from pinned", s.paragraph)


def test_launch_bound(build):
    """100 launch calls of 20 us back to back, each kernel 5 us starting as its call returns: window
    [20, 2005] us = 1.985 ms, kernel busy 500 us = 25.189 %; median kernel 5 us < median call 20 us."""
    b = ExportBuilder()
    b.gpu(0)
    for i in range(100):
        b.launch(0, 20 * i * US, (20 * i + 20) * US, (20 * i + 20) * US, (20 * i + 25) * US, name="tiny_kernel")
    s = summarize(build(b))
    check_contract(s)
    assert s.verdict == "launch_bound"
    assert [(f.kind, f.severity) for f in s.findings if f.severity != "info"] == [
        ("launch_bound", "high"), ("idle", "high")]
    f = s.findings[0].figures
    assert (f["kernel_busy_pct"], f["median_kernel_ns"], f["api_p50_ns"], f["queue_p50_ns"]) == (
        25.189, 5 * US, 20 * US, 0)
    assert s.findings[1].figures["dominant_cause"] == "launch_overhead"
    assert s.paragraph.startswith("Launch-bound: GPU 0 is kernel-busy only 25.2 % of the 1.985 ms window; the median "
                                  "kernel (5 µs) is shorter than the median launch call (20 µs), so the CPU cannot "
                                  "issue work fast enough.")
    assert "CUDA graph" in s.paragraph and "torch" not in s.paragraph


def test_long_small_grid_kernels_are_under_parallelized(build):
    """The healthy timeline (950 us every 1 ms, busy 95.048 %), but 4 in 5 kernels have 64 blocks on a
    132-SM GPU: 76 of 95 ms = 80.0 % of kernel time in small grids that run 950 us each: under-parallelized
    (more blocks would shorten them), not "small kernels" to fuse. Saving: 76 ms x (1 - 64/132) = 39.152 ms,
    39.2 % of the 99.95 ms window: medium."""
    b = ExportBuilder()
    b.gpu(0, sm_count=132)
    steady(b, 0, 100, 1 * MS, lambda i: 950 * US,
           lambda i: "ampere_sgemm_128x64_tn" if i % 5 == 0 else "my_small_kernel",
           grid=lambda i: (256, 1, 1) if i % 5 == 0 else (64, 1, 1))
    s = summarize(build(b))
    check_contract(s)
    assert s.verdict == "under_parallelized"
    top = s.findings[0]
    assert (top.kind, top.severity, top.gpus, top.saving_ns) == ("under_parallelized", "medium", [0],
                                                                 int(76 * MS * (1 - 64 / 132)))
    f = top.figures
    assert (f["under_parallel_time_pct"], f["under_parallel_time_ns"], f["sm_count"], f["top_kernel"], f["avg_ns"],
            f["avg_blocks"]) == (80.0, 76 * MS, 132, "my_small_kernel", 950 * US, 64.0)
    assert s.paragraph.startswith("Under-parallelized kernels: 80.0 % of GPU 0's kernel time is in launches with "
                                  "fewer blocks than its 132 SMs that run long, led by `my_small_kernel` (64x1x1 "
                                  "blocks of 128x1x1 threads, 0.95 ms per launch).")
    assert "fuse" not in s.paragraph.lower()  # long launches: more blocks, not fusion
    assert "Launch enough blocks" not in s.paragraph and "launch enough blocks" in s.paragraph


def test_short_small_grid_kernels_are_small_kernels(build):
    """1000 kernels of 8 us every 10 us (busy 80 %), 4 in 5 with 64 blocks on 132 SMs: 80.0 % of kernel time
    in short small-grid launches: fuse them or use graphs (medium)."""
    b = ExportBuilder()
    b.gpu(0, sm_count=132)
    steady(b, 0, 1000, 10 * US, lambda i: 8 * US,
           lambda i: "ampere_sgemm_128x64_tn" if i % 5 == 0 else "my_small_kernel",
           grid=lambda i: (256, 1, 1) if i % 5 == 0 else (64, 1, 1), start=1 * MS)
    s = summarize(build(b))
    assert s.grounded
    small = next(f for f in s.findings if f.kind == "small_kernels")
    assert (small.severity, small.gpus, small.figures["small_time_pct"], small.figures["small_count"]) == (
        "medium", [0], 80.0, 800)
    assert small.sentence.startswith("Small kernels: GPU 0 (kernel-busy 80.0 % of the 9.998 ms window) spends 80.0 % "
                                     "of kernel time in grids with fewer blocks than its 132 SMs, led by "
                                     "`my_small_kernel` (8 µs per launch).")
    assert small.advice.startswith("Fuse the small kernels or capture them in a CUDA graph")
    assert not any(f.kind == "under_parallelized" for f in s.findings)


def test_nccl_not_overlapped(build):
    """10 steps of 10 ms from 1 ms: 7 ms of GEMM then 3 ms of NCCL all-reduce on another stream, nothing
    beside it. Window 100 ms, kernel busy 100 %; exposed communication 30 ms = 30.0 % (medium)."""
    b = ExportBuilder()
    b.gpu(0)
    for i in range(10):
        t = 1 * MS + i * 10 * MS
        b.launch(0, t - 10 * US, t - 5 * US, t, t + 7 * MS, name="ampere_sgemm_128x64_tn")
        b.launch(0, t - 8 * US, t - 3 * US, t + 7 * MS, t + 10 * MS, name=NCCL_KERNEL, stream=13)
    s = summarize(build(b))
    check_contract(s)
    assert s.verdict == "nccl_not_overlapped"
    top = s.findings[0]
    assert (top.kind, top.severity, top.gpus) == ("nccl_not_overlapped", "medium", [0])
    f = top.figures
    assert (f["exposed_comm_pct"], f["exposed_comm_ns"], f["comm_pct"], f["overlap_pct"]) == (30.0, 30 * MS, 30.0, 0.0)
    assert [x.kind for x in s.findings if x.severity != "info"] == ["nccl_not_overlapped"]
    assert s.paragraph.startswith("Communication not overlapped: GPU 0 spends 30.0 % of the 100 ms window in NCCL "
                                  "kernels with no compute beside them; none of it overlaps compute.")
    assert fig(s, "kernel_family")["family"] == "GEMM" and fig(s, "kernel_family")["pct"] == 70.0


def test_no_gpu_activity(build):
    b = ExportBuilder()
    b.gpu(0)
    b.api("cudaMalloc", 0, 1 * MS)
    s = summarize(build(b))
    assert (s.verdict, [f.kind for f in s.findings], s.grounded) == ("no_gpu_activity", ["no_cuda_work"], True)
    # CUDA was traced (one cudaMalloc), nothing launched: say so, not "turn tracing on"
    assert s.paragraph.startswith("No GPU activity: 1 CUDA API call traced, none of them a kernel launch, and no "
                                  "kernel, copy or memset was recorded on the GPU.")
    assert "-t cuda" not in s.paragraph
    assert "### dashcam summary: no GPU activity" in to_markdown(s)


def test_copies_but_no_kernels_is_no_kernels(build):
    b = ExportBuilder()
    b.gpu(0)
    b.copy_call(0, 0, 1 * MS, 10 * US, 900 * US, 1 << 20)
    s = summarize(build(b))
    assert s.verdict == "no_kernels" and s.grounded
    assert [f.kind for f in s.findings] == ["no_kernels"]
    assert s.paragraph.startswith("No kernel ran in this capture: the 0.89 ms of GPU activity are copies and "
                                  "memsets only.")
    assert any("No kernels" in n for n in s.notes)


def test_a_gpu_without_kernels_is_not_called_idle(build):
    b = sync_or_cpu(sync=False, devices=(0,), busy_ms=(9,))  # GPU 0 busy 90 of 100 ms
    b.memcpy(3, 2 * MS, 3 * MS, 1 << 20)
    s = summarize(build(b))
    assert s.verdict == "healthy"
    assert any("GPU 3 ran no kernels" in n for n in s.notes)


# -- families -----------------------------------------------------------------------------------

FAMILY_CASES = [  # (kernel name, duration us, expected family)
    (NCCL_KERNEL, 100, "NCCL"),
    ("flash_fwd_kernel", 200, "attention"),
    ("void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_64x64_32x6_nn_align4>(Params)", 300, "GEMM"),
    ("nvjet_tst_192x192_64x4_2x1_v_bz_coopB_bias_TNN", 400, "GEMM"),
    ("implicit_convolve_sgemm", 500, "convolution"),
    ("vectorized_layer_norm_kernel", 600, "normalization"),
    ("softmax_warp_forward", 700, "softmax"),
    ("void at::native::reduce_kernel<512, 1>(ReduceOp)", 800, "reduction"),
    ("vectorized_elementwise_kernel", 900, "elementwise"),
    ("CatArrayBatchedCopy", 1000, "copy"),
    ("saxpy", 1100, "saxpy"),
]


def test_kernel_family_rules():
    for name, _, family in FAMILY_CASES:
        assert kernel_family(name.split("(")[0].split("<")[0].split("::")[-1], name) == family, name
    assert kernel_family("Kernel", "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm>(Params)") == "GEMM"
    assert kernel_family("vectorized_elementwise_kernel", "void vectorized_elementwise_kernel<4, reduce_op>") == \
        "elementwise"  # the short name decides before the template arguments
    assert [f for f, _ in KERNEL_FAMILIES][:2] == ["NCCL", "attention"]


def test_top_kernels_families_follow_the_rules(build):
    from dashcam.tools import get_tool

    b = ExportBuilder()
    t = 0
    for name, dur, _ in FAMILY_CASES:
        b.kernel(0, t, t + dur * US, name=name)
        t += 2 * MS
    rows = get_tool("top_kernels")(build(b), {"limit": 20}).families
    total = sum(d for _, d, _ in FAMILY_CASES)
    expected = {}
    for _, dur, family in FAMILY_CASES:
        expected[family] = expected.get(family, 0) + dur
    assert {r.family: r.total_ns for r in rows} == {f: d * US for f, d in expected.items()}
    assert [r.family for r in rows][:2] == ["saxpy", "copy"]  # largest first
    assert rows[0].pct == round(100 * 1100 / total, 3)
    gemm = next(r for r in rows if r.family == "GEMM")
    assert (gemm.kernel_count, gemm.top_kernel) == (2, "nvjet_tst_192x192_64x4_2x1_v_bz_coopB_bias_TNN")


# -- real profiles --------------------------------------------------------------------------------

@pytest.mark.parametrize("path", SHARED_GPU, ids=[p.name for p in SHARED_GPU])
def test_shared_profiles(path):
    s = summarize(Profile.open(path, progress=False))
    assert s.verdict in VERDICTS
    assert s.grounded, s.ungrounded_numbers
    assert len(s.paragraph.split()) <= MAX_WORDS
    if s.verdict != "no_gpu_activity":
        check_contract(s)
        for f in s.findings:
            for k, v in f.figures.items():
                if k.endswith("_pct") or k == "pct":
                    assert 0 <= v <= 100, (f.kind, k, v)
    assert to_markdown(s).startswith("### dashcam summary: ")


def test_shared_profile_verdicts():
    """The verdicts the real files get (findings/engine.py states the rules), and the program each is."""
    from .conftest import SHARED

    expected = {"nsys-ai__healthy_1pct.sqlite": ("healthy", "pytorch"),
                # kernels run 88.1 % of the window on GPU 1 and no other fix saves 10 %: the kernels are the lever
                "nsys-ai__mfu_2gpu_before.sqlite": ("kernel_bound", "pytorch"),
                # 2 kernels; the first launch (lazy module loading) is 79 % of the window: a cold start
                "nsys-ai__mock.sqlite": ("startup", "pytorch"),
                # 18 kernels while nvFuser compiles (NVRTC, in NVTX): a cold start
                "NVIDIA__Fuser__report1_ee4fcf30.sqlite": ("startup", "pytorch"),
                # MPI+CUDA C: idle, a quarter of the host time in MPI_Send/MPI_Recv
                "hpcgroup__pipit__saxpy-mpi-cuda_nsys_perlmutter0.sqlite": ("idle", "cuda_cpp"),
                # 86 % kernel-busy; the largest other fix (cudaMemcpy's API time) saves 5.4 %: the kernels are the lever
                "hpcgroup__pipit__perlmutter-cloverleaf-cuda.sqlite": ("kernel_bound", "cuda_cpp"),
                # Julia, CPU sampling only
                "D-W-Chiang__JACC.jl__4e6_async_1_trace.sqlite": ("no_gpu_activity", "julia")}
    if not all((SHARED / n).exists() for n in expected):
        pytest.skip("../shared/profiles not present")
    got = {n: summarize(Profile.open(SHARED / n, progress=False)) for n in expected}
    assert {n: (s.verdict, s.workload) for n, s in got.items()} == expected
    mfu = got["nsys-ai__mfu_2gpu_before.sqlite"]
    assert (mfu.findings[0].kind, mfu.findings[0].gpus) == ("kernel_bound", [0, 1])
    assert [(f.kind, f.severity, f.gpus) for f in mfu.findings[1:2]] == [("idle", "low", [1])]
    assert fig(mfu, "kernel_family")["family"] == "attention"
    # its attention is FlashAttention already (`flash_fwd_kernel`): said as done, not advised
    assert mfu.findings[0].advice.startswith("Attention already runs in fused kernels")
    assert fig(got["nsys-ai__healthy_1pct.sqlite"], "kernel_family")["family"] == "GEMM"
    saxpy = got["hpcgroup__pipit__saxpy-mpi-cuda_nsys_perlmutter0.sqlite"]
    assert "MPI calls (`MPI_Send`, `MPI_Recv`)" in saxpy.paragraph and "MPI_Isend" in saxpy.paragraph
    assert [f.kind for f in saxpy.findings if f.severity != "info"] == ["idle", "under_parallelized"]
    assert fig(saxpy, "under_parallelized")["top_kernel"] == "saxpy"
    jacc = got["D-W-Chiang__JACC.jl__4e6_async_1_trace.sqlite"]
    # CUDA was traced and never called: its script failed on its first line, which the paragraph quotes
    assert jacc.findings[0].kind == "cuda_unused" and "-t cuda" not in jacc.paragraph and "setup.jl" in jacc.paragraph
    for s in got.values():  # no PyTorch idiom for code that is not PyTorch
        if s.workload != "pytorch":
            assert not re.search(r"pin_memory|non_blocking|torch|DataLoader|dataloader|\.item\(\)", s.paragraph)


# -- rendering and the CLI --------------------------------------------------------------------------

@pytest.fixture(scope="module")
def demo_path(tmp_path_factory):
    return demo(tmp_path_factory.mktemp("summary") / "demo.sqlite")


def test_markdown_layout(demo_path):
    s = summarize(Profile.open(demo_path, progress=False))
    md = to_markdown(s)
    lines = md.splitlines()
    assert lines[0] == "### dashcam summary: mostly kernel-idle (`demo.sqlite`)"
    assert lines[2] == s.paragraph
    assert lines[4] == "| severity | finding | GPUs | key figures |"
    assert lines[6] == ("| medium | GPU 1 kernel-idle 59.2 % of the window, mostly `cuda_api` | 1 | "
                        "kernel-busy 40.8 %, kernel-idle 69.59 ms (59.2 %), mostly cuda_api, cause 48.11 ms (69.1 %), "
                        "led by cudaMemcpy |")  # the figures in words (text/figures.py), not field names
    assert f"dashcam tool run gpu_gaps {demo_path}" in md
    assert f"dashcam tool run overview {demo_path}" in md
    assert md.count("dashcam tool run ") == len(s.commands()) == len([e for e in s.evidence if e.tool != "impact"])
    # every title in the table is grounded too
    assert check(" ".join(f.title for f in s.findings), s.evidence) == (True, [])


def test_markdown_escapes_pipes_in_profile_text(build):
    b = ExportBuilder()
    b.gpu(0)
    steady(b, 0, 20, 1 * MS, lambda i: 950 * US, lambda i: "evil|kernel", grid=lambda i: (8, 1, 1))
    s = summarize(build(b))
    assert s.verdict == "under_parallelized" and "`evil|kernel`" in s.paragraph
    table = [line for line in to_markdown(s).splitlines() if line.startswith("|")]
    assert len(table) == 2 + len(s.findings)
    assert all(line.replace("\\|", "").count("|") == 5 for line in table), table
    assert any("`evil\\|kernel`" in line for line in table)


def test_cli_formats(demo_path, tmp_path):
    p = run_cli("summary", str(demo_path), "--format", "json", cache=tmp_path / "c")
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert {"profile", "verdict", "paragraph", "findings", "notes", "grounded"} <= out.keys()
    assert out["verdict"] == "idle" and out["grounded"] is True and out["mode"] == "deterministic"
    f = out["findings"][0]
    assert (f["kind"], f["severity"], f["gpus"], f["figures"]["kernel_idle_pct"]) == ("idle", "medium", [1], 59.18)
    assert f["evidence"][0]["tool"] == "gpu_gaps" and "devices" in f["evidence"][0]["result"]

    p = run_cli("summary", str(demo_path), "--format", "markdown", cache=tmp_path / "c")
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("### dashcam summary: mostly kernel-idle (`demo.sqlite`)\n\nMostly kernel-idle: GPU 1")
    assert "| severity | finding | GPUs | key figures |" in p.stdout

    p = run_cli("summary", cwd=demo_path.parent, cache=tmp_path / "c")  # the only profile in the folder, text
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("dashcam summary: mostly kernel-idle  (demo.sqlite)\n\nMostly kernel-idle: GPU 1")
    assert "reproduce:\n  dashcam tool run gpu_gaps demo.sqlite" in p.stdout
    assert p.stdout.rstrip().endswith("[deterministic]")

    p = run_cli("summary", str(demo_path), "--format", "yaml", cache=tmp_path / "c")
    assert p.returncode == 11 and "--format must be text, markdown or json" in p.stderr


def test_cli_no_gpu_activity_and_bad_file(tmp_path):
    b = ExportBuilder()
    b.api("cudaMalloc", 0, 1 * MS)
    path = b.write(tmp_path / "empty.sqlite")
    p = run_cli("summary", str(path), "--format", "json", cache=tmp_path / "c")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["verdict"] == "no_gpu_activity"
    (tmp_path / "junk.sqlite").write_text("not sqlite")
    p = run_cli("summary", str(tmp_path / "junk.sqlite"), cache=tmp_path / "c")
    assert p.returncode == 5 and "Traceback" not in p.stderr


def test_the_family_command_reproduces_the_figures(demo_path, tmp_path):
    s = summarize(Profile.open(demo_path, progress=False))
    cmd = next(c for c in s.commands() if " top_kernels " in c)
    argv = shlex.split(cmd)
    assert argv[:4] == ["dashcam", "tool", "run", "top_kernels"] and "--limit" in argv
    p = run_cli(*argv[1:], "--json", cache=tmp_path / "c")
    assert p.returncode == 0, p.stderr
    top = json.loads(p.stdout)["families"][0]
    fam = fig(s, "kernel_family")
    assert set(fam) == {"family", "kernel_count", "total_ns", "pct", "top_kernel", "top_kernel_pct", "instantiations"}
    assert {k: top[k] for k in fam} == fam


def test_text_lists_findings_and_notes(build):
    s = summarize(build(sync_or_cpu(sync=True)))
    text = to_text(s)
    assert "findings:\n  1. [high] GPU 0 kernel-idle 78.3 % of the window, mostly `sync_wait`  (GPUs 0)" in text
    assert "SM count" not in text  # b.gpu(0) gives the SM count


# -- --llm ----------------------------------------------------------------------------------------

GROUNDED_REWRITE = ("GPU 1 sits idle for 59.2 % of the 117.59 ms window, mostly waiting on the CPU inside "
                    "`cudaMemcpy` (`cuda_api`, 69.1 % of its idle time), while GPU 0 keeps its kernels running "
                    "81.6 % of the window. Start by copying from pinned memory with `cudaMemcpyAsync`.")


@pytest.fixture(scope="module")
def demo_summary(demo_path, tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DASHCAM_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
        return summarize(Profile.open(demo_path, progress=False))


def cfg(fake) -> LLMConfig:
    return LLMConfig(model="fake-model", base_url=fake.base_url, api_key="test-key", max_retries=0)


def test_llm_grounded_rewrite_is_used(demo_summary):
    with FakeOpenAI([say(GROUNDED_REWRITE)]) as fake:
        s = rewrite(demo_summary, config=cfg(fake))
    assert (s.paragraph, s.mode, s.model, s.grounded) == (GROUNDED_REWRITE, "llm", "fake-model", True)
    assert s.verdict == demo_summary.verdict and s.findings == demo_summary.findings
    assert demo_summary.paragraph != GROUNDED_REWRITE and demo_summary.mode == "deterministic"  # not mutated
    assert len(fake.requests) == 1
    body = fake.requests[0]
    assert "tools" not in body and body["model"] == "fake-model"
    system, user = body["messages"]
    assert system["role"] == "system" and "every number exactly as written" in system["content"]
    data = json.loads(user["content"])
    assert data["note"] == UNTRUSTED
    assert data["data"]["paragraph"] == demo_summary.paragraph
    assert data["data"]["findings"][0]["figures"]["kernel_idle_pct"] == 59.18


def test_llm_ungrounded_rewrite_keeps_the_deterministic_paragraph(demo_summary):
    with FakeOpenAI([say("GPU 1 is idle 73 % of the 117.59 ms window; fix the 13.7 ms sync first.")]) as fake:
        s = rewrite(demo_summary, config=cfg(fake))
    assert (s.paragraph, s.mode, s.grounded) == (demo_summary.paragraph, "deterministic", True)
    assert any(n.startswith("--llm: rewrite not used") and "(73 %, 13.7 ms)" in n for n in s.notes), s.notes


def test_llm_failures_keep_the_deterministic_paragraph(demo_summary, monkeypatch):
    with FakeOpenAI([error(400)]) as fake:
        s = rewrite(demo_summary, config=cfg(fake))
    assert s.paragraph == demo_summary.paragraph and any("model call failed" in n for n in s.notes)
    for k in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(k, raising=False)
    s = rewrite(demo_summary)
    assert s.paragraph == demo_summary.paragraph and any("no model configured" in n for n in s.notes)
    words = " ".join(["word"] * (MAX_WORDS + 1)) + " 59.2 %"
    with FakeOpenAI([say(words)]) as fake:
        s = rewrite(demo_summary, config=cfg(fake))
    assert s.paragraph == demo_summary.paragraph and any("longer than" in n for n in s.notes)


def test_cli_llm_against_the_fake_server(demo_path, tmp_path):
    env = {"OPENAI_BASE_URL": None, "OPENAI_API_KEY": "test-key", "DASHCAM_MODEL": "fake-model"}
    with FakeOpenAI([say(GROUNDED_REWRITE), say("GPU 1 is idle 73 % of the time.")]) as fake:
        env["OPENAI_BASE_URL"] = fake.base_url
        used = run_cli("summary", str(demo_path), "--llm", "--format", "json", cache=tmp_path / "c", env=env)
        kept = run_cli("summary", str(demo_path), "--llm", "--format", "markdown", cache=tmp_path / "c", env=env)
    assert used.returncode == 0, used.stderr
    out = json.loads(used.stdout)
    assert (out["paragraph"], out["mode"], out["model"], out["grounded"]) == (GROUNDED_REWRITE, "llm", "fake-model",
                                                                               True)
    assert kept.returncode == 0, kept.stderr
    assert "\n\nMostly kernel-idle: GPU 1 is kernel-idle 59.2 %" in kept.stdout
    assert "> note: --llm: rewrite not used" in kept.stdout and "73 %" in kept.stdout


# -- documentation ------------------------------------------------------------------------------------



def test_llm_rewrite_that_breaks_a_code_span_or_changes_nothing_is_not_used(demo_summary):
    para = demo_summary.paragraph
    assert "`cudaMemcpy`" in para
    broken = para.replace("`cudaMemcpy`", '`cuda\\"Memcpy`', 1)  # every number kept, one span broken
    with FakeOpenAI([say(broken), say(para), say("<think>GPU 1 is 12.5 % something</think>" + para)]) as fake:
        spans = rewrite(demo_summary, config=cfg(fake))
        same = rewrite(demo_summary, config=cfg(fake))
        think = rewrite(demo_summary, config=cfg(fake))
    assert spans.paragraph == para and spans.mode == "deterministic" and spans.llm_reply == broken
    assert spans.notes[-1] == ('--llm: rewrite not used, it changed text in backticks (`cuda\\"Memcpy`); '
                               "the deterministic paragraph is shown")
    assert same.mode == "deterministic" and same.notes[-1] == (
        "--llm: the model returned the paragraph unchanged; the deterministic paragraph is shown")
    # the reasoning block is dropped before the checks: its 12.5 % is not flagged, the paragraph is the same
    assert think.notes[-1] == "--llm: the model returned the paragraph unchanged; the deterministic paragraph is shown"
    assert think.llm_reply.startswith("<think>")


def test_llm_rewrite_cut_off_at_the_output_limit_is_not_used(demo_summary):
    with FakeOpenAI([cut(say(GROUNDED_REWRITE))]) as fake:
        s = rewrite(demo_summary, config=cfg(fake))
    assert fake.requests[0]["max_tokens"] == 1500
    assert s.mode == "deterministic" and s.notes[-1] == (
        "--llm: rewrite not used, it was cut off at the output limit (1500 tokens); the deterministic paragraph "
        "is shown")
