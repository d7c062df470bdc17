"""Planted programs whose diagnosis must speak the program's own model and fit its GPU and capture: OpenMP
offload C code (no OpenACC words), nvc++ stdpar (no streams or cudaMemcpyAsync), a C++ gtest binary linking
libtorch (no Python words), GEMMs on an RTX 3080 (no FP8) and on an H100, an old-schema export that records
its SM count in TARGET_INFO_CUDA_GPU, and captures that span the whole process (no "capture more").
Registered in scenarios.SCENARIOS; each docstring states the facts by construction.

All times are ns; "X ms" is from the start of the profile clock unless said otherwise.
"""
from __future__ import annotations

from pathlib import Path

from dashcam.testing.builder import ExportBuilder

US = 1_000
MS = 1_000_000
A100 = "NVIDIA A100-SXM4-80GB"
H100 = "NVIDIA H100 80GB HBM3"
RTX3080 = "NVIDIA GeForce RTX 3080"
NVTX_DOMAIN_CREATE = 75
OMP_KERNEL = "nvkernel_main_F1L12_1"
STDPAR_KERNEL = ("void thrust::cuda_cub::core::_kernel_agent<thrust::cuda_cub::__parallel_for::ParallelForAgent<"
                 "thrust::cuda_cub::__transform::unary_transform_f<double *, double *>, long>, "
                 "thrust::cuda_cub::__transform::unary_transform_f<double *, double *>, long>"
                 "(thrust::cuda_cub::__transform::unary_transform_f<double *, double *>, long)")
STDPAR_REDUCE = ("void cub::CUB_200200_800_NS::DeviceReduceKernel<cub::CUB_200200_800_NS::DeviceReducePolicy<double, "
                 "int, std::plus<double>>::Policy600, double *, double *, int, std::plus<double>>(double *, "
                 "double *, int, cub::CUB_200200_800_NS::GridEvenShare<int>, std::plus<double>)")
TORCH_KERNEL = ("void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>, "
                "at::detail::Array<char *, 3>>(int, at::native::AddFunctor<float>, at::detail::Array<char *, 3>)")
SGEMM = "ampere_sgemm_128x64_nn"


def _program(pid: int, process: str, gpu: str, sms: int) -> ExportBuilder:
    """A 2024-schema export with GPU 0 (``gpu``, ``sms`` SMs) and the process ``pid`` named ``process``."""
    b = ExportBuilder("2024")
    b.gpu(0, gpu, sms)
    b.process(pid, process)
    return b


def _stdpar_program(pid: int, process: str) -> ExportBuilder:
    """An nvc++ -stdpar program on an H100: the NVTX domain `STDPAR` created at 0 on its main thread."""
    b = _program(pid, process, H100, 132)
    b.nvtx("STDPAR", 0, None, pid=pid, event_type=NVTX_DOMAIN_CREATE, domain=1)
    return b


def omp_offload_c(path: str | Path) -> Path:
    """OpenMP offload C (nvc -mp=gpu) Jacobi solver whose target regions launch too few teams.

    Process `./jacobi_omp` (pid 6000), A100 (108 SMs); NVHPC's runtime records the OpenACC table
    CUPTI_ACTIVITY_KIND_OPENACC_LAUNCH (20 rows) for OpenMP target regions too. 20 iterations of 5 ms from
    1 ms: `nvkernel_main_F1L12_1`, grid 16x1x1, block 128x1x1, 4 ms (launched by `cuLaunchKernel` 10 us
    before it), then 1 ms of host code with one CPU sample at +0.5 ms in it, its stack `__nvomp_target_wait`
    in NVHPC's OpenMP runtime `libnvomp.so`, called from `main`. Window [1, 100] ms = 99 ms; kernels 80 ms =
    80.808 %; 16 blocks on 108 SMs. The family is OpenMP offload (the kernel name and libnvomp.so, 2 sources
    against the OpenACC table's 1), not OpenACC: the words are `teams distribute`,
    `num_teams`, `nowait`, `target data`, never `gang`, `num_gangs`, `!$acc` or `async` queues.
    """
    pid = 6000
    b = _program(pid, "./jacobi_omp", A100, 108)
    b.table("CUPTI_ACTIVITY_KIND_OPENACC_LAUNCH", 20)
    for i in range(20):
        s = 1 * MS + i * 5 * MS
        b.launch(0, s - 10 * US, s - 5 * US, s, s + 4 * MS, name=OMP_KERNEL, pid=pid, api_name="cuLaunchKernel",
                 grid=(16, 1, 1), block=(128, 1, 1))
        b.sample(s + 4 * MS + 500 * US, [("__nvomp_target_wait", "/opt/nvidia/hpc_sdk/Linux_x86_64/24.5/compilers/"
                                                                   "lib/libnvomp.so"), ("main", "./jacobi_omp")],
                 pid=pid)
    return b.write(path)


def stdpar_cxx(path: str | Path) -> Path:
    """nvc++ -stdpar C++ code whose GPU waits on the host between its parallel algorithms.

    Process `./lulesh_stdpar` (pid 6100), H100 (132 SMs), NVTX domain `STDPAR` created at 0. 20 steps of 5 ms
    from 1 ms: a thrust `_kernel_agent` (std::transform) kernel of 1 ms and a cub `DeviceReduceKernel` of
    1 ms (grid 1024, each launched by `cudaLaunchKernel` 10 us before it), then the host computes for 3 ms
    (no CUDA call). Window [1, 98] ms = 97 ms; kernels 40 ms = 41.237 %; idle 57 ms in 19 gaps of 3 ms,
    `cpu_work`. The family is stdpar: the remedy keeps the work in parallel algorithms on the GPU, never
    streams, `cudaMemcpyAsync` or pinned buffers, which stdpar code cannot name.
    """
    pid = 6100
    b = _stdpar_program(pid, "./lulesh_stdpar")
    for i in range(20):
        s = 1 * MS + i * 5 * MS
        b.launch(0, s - 10 * US, s - 5 * US, s, s + 1 * MS, name=STDPAR_KERNEL, pid=pid, grid=(1024, 1, 1))
        b.launch(0, s + 1 * MS - 10 * US, s + 1 * MS - 5 * US, s + 1 * MS, s + 2 * MS, name=STDPAR_REDUCE, pid=pid,
                 grid=(1024, 1, 1))
    return b.write(path)


def stdpar_sync(path: str | Path) -> Path:
    """nvc++ -stdpar code whose host waits for each parallel algorithm to finish before the next.

    Process `./stencil_stdpar` (pid 6150), H100 (132 SMs), NVTX domain `STDPAR` created at 0. 20 steps of 5 ms
    from 1 ms: a thrust `_kernel_agent` kernel of 2 ms (grid 1024, `cudaLaunchKernel` 10 us before it, the
    call [s - 10, s - 5] us), then `cudaStreamSynchronize` from the kernel's end for 2.9 ms (the host reads the
    result), then the next launch. Window [1, 98] ms = 97 ms; kernels 40 ms = 41.237 %; idle 57 ms in 19 gaps
    of 3 ms, `sync_wait` 19 x 2.9 ms = 55.1 ms (96.667 %). The remedy is stdpar's (fewer, larger algorithms
    such as `std::transform_reduce`, no host reads in the loop), never CUDA events or streams.
    """
    pid = 6150
    b = _stdpar_program(pid, "./stencil_stdpar")
    for i in range(20):
        s = 1 * MS + i * 5 * MS
        b.launch(0, s - 10 * US, s - 5 * US, s, s + 2 * MS, name=STDPAR_KERNEL, pid=pid, grid=(1024, 1, 1))
        b.api("cudaStreamSynchronize", s + 2 * MS, s + 4900 * US, pid=pid)
    return b.write(path)


def libtorch_gtest(path: str | Path) -> Path:
    """A C++ gtest binary linking libtorch: PyTorch's kernels, no Python process.

    Process `./test_ops` (pid 6200), H100 (132 SMs), no command recorded. 20 tests of 5 ms from 1 ms: an
    `at::native::vectorized_elementwise_kernel` of 2 ms (grid 1024, `cudaLaunchKernel` 10 us before it),
    then 3 ms of host code (the test's checks, no CUDA call). Window [1, 98] ms = 97 ms; kernels 40 ms =
    41.237 %; idle 57 ms, `cpu_work`. The family is libtorch (C++): the idle time is host code, never
    "Python", `.item()`, py-spy or a DataLoader.
    """
    pid = 6200
    b = _program(pid, "./test_ops", H100, 132)
    for i in range(20):
        s = 1 * MS + i * 5 * MS
        b.launch(0, s - 10 * US, s - 5 * US, s, s + 2 * MS, name=TORCH_KERNEL, pid=pid, grid=(1024, 1, 1))
    return b.write(path)


def _gemm_bound(path: str | Path, gpu: str, sms: int) -> Path:
    pid = 6300
    b = _program(pid, "./gemm_bench", gpu, sms)
    for i in range(200):
        s = 1 * MS + i * 500 * US
        b.launch(0, s - 20 * US, s - 10 * US, s, s + 495 * US, name=SGEMM, pid=pid, grid=(512, 1, 1))
    return b.write(path)


def gemm_rtx3080(path: str | Path) -> Path:
    """A GPU-bound FP32 GEMM benchmark on an RTX 3080 (sm_86: tensor cores, bf16 and TF32, no FP8).

    Process `./gemm_bench` (pid 6300), `NVIDIA GeForce RTX 3080` (68 SMs). 200 `ampere_sgemm_128x64_nn` of
    495 us, one every 500 us from 1 ms (grid 512, each launched 20 us ahead). Window [1, 100.995] ms =
    99.995 ms; kernels 99 ms = 99.005 %: healthy (GPU-bound), GEMM 100 % of kernel time. The remedy names
    TF32 and bf16, never FP8 (the GPU has none)."""
    return _gemm_bound(path, RTX3080, 68)


def gemm_h100(path: str | Path) -> Path:
    """``gemm_rtx3080``'s run on an H100 (FP8 from sm_90).

    Process `./gemm_bench` (pid 6300), `NVIDIA H100 80GB HBM3` (132 SMs). The same 200 kernels and figures:
    window 99.995 ms, kernels 99.005 %, healthy, GEMM 100 %. The remedy names TF32, bf16 and FP8."""
    return _gemm_bound(path, H100, 132)


def old_schema_sm_count(path: str | Path) -> Path:
    """An old-schema ("2021") export whose SM count is only in TARGET_INFO_CUDA_GPU, with small grids.

    Process `./small_grid` (pid 6400); GPU 0 `GeForce RTX 3080` in TARGET_INFO_CUDA_GPU (numMultiprocessors
    68, compute 8.6; no TARGET_INFO_GPU). 200 `tiny_kernel(float *)` of 20 us, grid 8x1x1, one every 30 us
    from 1 ms (`cudaLaunchKernel` 8 us before each). Window [1, 6.99] ms = 5.99 ms; kernels 4 ms. The SM
    count, 68, is known: no "SM count unknown" note, and the kernel-grid findings compare 8 blocks with 68 SMs.
    """
    b = ExportBuilder("2021", cuda_gpu_info=True)
    b.gpu(0, "GeForce RTX 3080", 68)
    pid = 6400
    b.process(pid, "./small_grid")
    for i in range(200):
        s = 1 * MS + i * 30 * US
        b.launch(0, s - 8 * US, s - 2 * US, s, s + 20 * US, name="tiny_kernel(float *)", pid=pid, grid=(8, 1, 1))
    return b.write(path)


def _whole_run(b: ExportBuilder, pid: int, kernels: int, init: bool = True) -> None:
    """The CUDA calls of a whole run: (``init``) `cudaFree` (context creation) [0, 273] ms, `cudaMalloc` [273, 274] ms,
    ``kernels`` `vec_add(float const *, float const *, float *, int)` of 2 ms one every 3 ms from 300 ms
    (grid 4096, `cudaLaunchKernel` 10 us before each), `cudaDeviceSynchronize` to the last kernel's end, and
    `cudaFree` 1 ms after it (teardown)."""
    if init:
        b.api("cudaFree", 0, 273 * MS, pid=pid)
        b.api("cudaMalloc", 273 * MS, 274 * MS, pid=pid)
    end = 0
    for i in range(kernels):
        s = 300 * MS + i * 3 * MS
        end = s + 2 * MS
        b.launch(0, s - 10 * US, s - 5 * US, s, end, name="vec_add(float const *, float const *, float *, int)",
                 pid=pid, grid=(4096, 1, 1))
    corr = b.api("cudaDeviceSynchronize", end - 2 * MS + 10 * US, end + 5 * US, pid=pid)
    b.sync_event(0, end - 2 * MS + 10 * US, end + 5 * US, corr=corr, pid=pid, sync_type=4)
    b.api("cudaFree", end + 1 * MS, end + 1 * MS + 50 * US, pid=pid)


def whole_run_few_kernels(path: str | Path) -> Path:
    """A capture of a whole short run (launch to exit) with 3 kernels: too little GPU work, nothing more to capture.

    Process `./vec_add` (pid 6500), H100. `_whole_run` with 3 kernels: the first CUDA call is `cudaFree`
    [0, 273] ms (CUDA context creation), kernels [300, 302], [303, 305], [306, 308] ms, the last call
    `cudaFree` [309, 309.05] ms. GPU window [300, 308] ms = 8 ms; 3 kernels, 6 ms. The capture spans the whole
    process: never "capture more" or a longer `--duration`; the 273 ms `cudaFree` before the GPU window is
    named (a note, and the start-up story when there is one)."""
    pid = 6500
    b = _program(pid, "./vec_add", H100, 132)
    _whole_run(b, pid, 3)
    return b.write(path)


def window_few_kernels(path: str | Path) -> Path:
    """``whole_run_few_kernels`` without its first two calls (`cudaFree` 273 ms, `cudaMalloc`): the capture
    begins at the first launch call (a window of the run), so "capture more" is the right advice. GPU window
    [300, 308] ms; 3 kernels."""
    pid = 6500
    b = _program(pid, "./vec_add", H100, 132)
    _whole_run(b, pid, 3, init=False)
    return b.write(path)


def whole_run_cold_start(path: str | Path) -> Path:
    """A whole short run (launch to exit) that spends its GPU window loading modules: a cold start.

    Process `./vec_add` (pid 6600), H100. `_whole_run` with 5 kernels, each launch preceded by a
    `cuModuleLoadData` call of 800 us ending 20 us before its launch call: the first CUDA call is `cudaFree`
    [0, 273] ms, kernels of 2 ms every 3 ms from 300 ms, `cudaFree` teardown [315, 315.05] ms. GPU window
    [300, 314] ms = 14 ms; module loads in it: 4 of 800 us (the first, [299.17, 299.97] ms, is before it) =
    3.2 ms = 22.857 %, the start-up (each kernel's first launch is before the window). The start-up finding
    leads (5 kernels: a cold start)
    and names the 273 ms `cudaFree` before the window; the capture spans the whole process, so the remedy
    is to make start-up cheaper, never "capture a window of the loop"."""
    pid = 6600
    b = _program(pid, "./vec_add", H100, 132)
    for i in range(5):
        s = 300 * MS + i * 3 * MS
        b.api("cuModuleLoadData", s - 830 * US, s - 30 * US, pid=pid, driver=True)
    _whole_run(b, pid, 5)
    return b.write(path)


# The programs here with CPU-side tables (a CPU sample naming libnvomp.so): tests of captures without them skip these.
CPU_SAMPLED = {"omp_offload_c"}

PROGRAMMING_MODELS = {
    "omp_offload_c": omp_offload_c,
    "stdpar_cxx": stdpar_cxx,
    "stdpar_sync": stdpar_sync,
    "libtorch_gtest": libtorch_gtest,
    "gemm_rtx3080": gemm_rtx3080,
    "gemm_h100": gemm_h100,
    "old_schema_sm_count": old_schema_sm_count,
    "whole_run_few_kernels": whole_run_few_kernels,
    "window_few_kernels": window_few_kernels,
    "whole_run_cold_start": whole_run_cold_start,
}
