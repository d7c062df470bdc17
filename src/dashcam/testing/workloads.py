"""Planted programs of many kinds, for the diagnosis rules: each is a real-looking capture of one language
or framework with one trouble, and its docstring states the verdict, the named cause and the advice a
GPU engineer would give — and what advice would be wrong for it. Registered in scenarios.SCENARIOS.

All times are ns; GPU activity starts at T0 = 1 ms unless said otherwise, and "X ms" in a docstring is
X ms from the start of the window.
"""
from __future__ import annotations

from pathlib import Path

from dashcam.testing.builder import ExportBuilder

US = 1_000
MS = 1_000_000
T0 = 1 * MS
A100 = "NVIDIA A100-SXM4-80GB"
H100 = "NVIDIA H100 80GB HBM3"
NVTX_DOMAIN_CREATE = 75


def openacc_copies(path: str | Path) -> Path:
    """OpenACC (NVHPC) stencil that copies its arrays in and out of every time step (no data region).

    Process `./miniweather_acc` (pid 5000), A100 (108 SMs), the table CUPTI_ACTIVITY_KIND_OPENACC_LAUNCH
    holds rows. 10 steps of 10 ms: a 4 ms pageable HtoD copy (`cuMemcpyHtoDAsync_v2` call, then
    `cuStreamSynchronize` until the copy ends), kernels `compute_tendencies_x_123_gpu` 2 ms and
    `update_state_456_gpu` 1 ms (launched by `cuLaunchKernel` 10 us before they start), then a 2 ms
    pageable DtoH copy and its `cuStreamSynchronize`, then 1 ms of host code. Window [1, 100] ms = 99 ms
    (the last step's host code is outside it); kernels 30 ms = 30.303 %; copies 60 ms = 60.606 %:
    transfer-bound. The remedy is a data region (`!$acc data`), never `pin_memory` or a DataLoader.
    """
    b = ExportBuilder("2024")
    b.gpu(0, A100, 108)
    pid = 5000
    b.process(pid, "./miniweather_acc")
    b.table("CUPTI_ACTIVITY_KIND_OPENACC_LAUNCH", 20)
    for i in range(10):
        s = T0 + i * 10 * MS
        c = b.api("cuMemcpyHtoDAsync_v2", s - 10 * US, s, pid=pid, driver=True)
        b.memcpy(0, s, s + 4 * MS, 400_000_000, "HtoD", pinned=False, pid=pid, corr=c)
        b.api("cuStreamSynchronize", s, s + 4 * MS + 5 * US, pid=pid, driver=True)
        k = s + 4 * MS + 20 * US
        b.launch(0, k - 10 * US, k - 5 * US, k, k + 2 * MS, name="compute_tendencies_x_123_gpu", pid=pid,
                 api_name="cuLaunchKernel", grid=(1024, 1, 1))
        b.launch(0, k + 2 * MS - 10 * US, k + 2 * MS - 5 * US, k + 2 * MS, k + 3 * MS, name="update_state_456_gpu",
                 pid=pid, api_name="cuLaunchKernel", grid=(1024, 1, 1))
        d = k + 3 * MS
        c = b.api("cuMemcpyDtoHAsync_v2", d - 5 * US, d, pid=pid, driver=True)
        b.memcpy(0, d, d + 2 * MS - 20 * US, 200_000_000, "DtoH", pinned=False, pid=pid, corr=c)
        b.api("cuStreamSynchronize", d, d + 2 * MS, pid=pid, driver=True)
    return b.write(path)


def mpi_halo(path: str | Path) -> Path:
    """MPI+CUDA C Jacobi solver, one rank: the GPU waits while the rank exchanges halos with MPI.

    Process `./jacobi_mpi` (pid 5100, thread `MPI Rank 0`), H100 (132 SMs), launched by `mpirun -np 4`;
    NVTX domain `MPI` (nsys --trace=mpi). 20 iterations of 5 ms: a `jacobi_kernel` of 2 ms
    (`cudaLaunchKernel` 10 us before it), then the host blocks in `MPI_Sendrecv` (NVTX range) for 2.5 ms
    of the 3 ms gap and computes the residual on the host for the rest, 0.49 ms, then launches the next.
    Window [1, 98] ms = 97 ms; kernels 40 ms = 41.237 %; idle 57 ms in 19 gaps of 3 ms, all `cpu_work`
    but 10 us of launch each: cpu_work 56.81 ms = 99.667 %, of it MPI 47.5 ms (83.612 %): the remedy is
    overlapping communication (MPI_Isend/MPI_Irecv, CUDA-aware MPI), never a dataloader or `pin_memory`.
    Steps: the 20 iterations (one `jacobi_kernel` every 5 ms, a steady period), not the MPI_Sendrecv ranges.
    """
    b = ExportBuilder("2024")
    b.gpu(0, H100, 132)
    pid = 5100
    b.process(pid, "./jacobi_mpi")
    b.thread(pid, pid, "MPI Rank 0")
    b.command("mpirun", "-np", "4", "./jacobi_mpi")
    b.nvtx("MPI", 0, None, pid=pid, event_type=NVTX_DOMAIN_CREATE, domain=1)
    for i in range(20):
        s = T0 + i * 5 * MS
        b.launch(0, s - 10 * US, s - 5 * US, s, s + 2 * MS,
                 name="jacobi_kernel(float *, const float *, int, int)", pid=pid, grid=(4096, 1, 1))
        if i < 19:
            b.nvtx("MPI_Sendrecv", s + 2 * MS, s + 4500 * US, pid=pid, registered=True, domain=1)
    return b.write(path)


def one_block(path: str | Path) -> Path:
    """One `<<<1, 32>>>` launch that runs for 200 ms on a 132-SM GPU: under-parallelized, not "small".

    Process `./reduce_naive` (pid 5200), H100 (132 SMs). One `naive_sum_kernel(float*, float*, int)`, grid
    1x1x1, block 32x1x1, launched by `cudaLaunchKernel` [0.99, 1] ms, running [1, 201] ms; then a 1 ms
    DtoH copy of the result. Window 201 ms; one kernel. The verdict is under-parallelized (the grid, not
    fusion); with one kernel, nothing else is claimed.
    """
    b = ExportBuilder("2024")
    b.gpu(0, H100, 132)
    pid = 5200
    b.process(pid, "./reduce_naive")
    b.launch(0, T0 - 10 * US, T0 - 5 * US, T0, T0 + 200 * MS, name="naive_sum_kernel(float *, float *, int)", pid=pid,
             grid=(1, 1, 1), block=(32, 1, 1))
    c = b.api("cudaMemcpy", T0 + 200 * MS, T0 + 201 * MS + 10 * US, pid=pid)
    b.memcpy(0, T0 + 200 * MS, T0 + 201 * MS, 4, "DtoH", pinned=False, pid=pid, corr=c)
    return b.write(path)


def jit_cold_start(path: str | Path) -> Path:
    """A short capture of a Python program that JIT-compiles its kernels: 17 launches in 500 ms.

    Process `python bench.py` (pid 5300), H100. 17 kernels `fused_kernel_<i>` of 100 us, each after an
    NVTX range `nvrtc::compileProgram` of 25 ms on the launching thread (the JIT), its launch call 10 us
    before the kernel. Window [1, 500.5] ms; 17 kernels (1.7 ms); JIT 425 ms = 85.085 % of the window.
    The verdict is start-up (a cold start): never "launch-bound" (17 launches) or "fuse small kernels".
    """
    b = ExportBuilder("2024")
    b.gpu(0, H100, 132)
    pid = 5300
    b.process(pid, "python bench.py")
    t = T0
    for i in range(17):
        b.nvtx("nvrtc::compileProgram", t + 4 * MS, t + 29 * MS, pid=pid)
        k = t + 29 * MS + 20 * US
        b.launch(0, k - 10 * US, k - 5 * US, k, k + 100 * US, name=f"fused_kernel_{i}", pid=pid, grid=(512, 1, 1))
        t = k + 500 * US
    b.kernel(0, 500 * MS, 500 * MS + 500 * US, name="final_kernel", pid=pid, grid=(512, 1, 1))
    return b.write(path)


def unified_memory(path: str | Path) -> Path:
    """A C++ program on managed memory: every kernel waits on page migrations the driver does on demand.

    Process `./um_saxpy` (pid 5400), A100 (108 SMs). 10 steps of 10 ms from 1 ms: six 1 ms batches of
    unified-memory HtoD migrations (copyKind 11, 64 MiB each; no API call: the driver moves pages on the
    faults), then a 3 ms `saxpy_kernel` (its launch call at +10 us, so the kernel waits queued behind the
    migrations). Window [1, 100] ms = 99 ms; kernels 30 ms = 30.303 %; idle 69 ms; migrations inside the
    gaps 60 ms = 86.957 % of the idle time. The remedy is prefetching (`cudaMemPrefetchAsync`) or memory
    advice; never "capture with CUDA API tracing" (the API was traced) nor pinned host memory.
    """
    b = ExportBuilder("2024")
    b.gpu(0, A100, 108)
    pid = 5400
    b.process(pid, "./um_saxpy")
    for i in range(10):
        s = T0 + i * 10 * MS
        for j in range(6):  # 64 KiB pages in 1 ms batches
            b.memcpy(0, s + j * MS, s + (j + 1) * MS, 64 << 20, "UM_HtoD", pid=pid)
        k = s + 6 * MS
        b.launch(0, s + 10 * US, s + 20 * US, k, k + 3 * MS,
                 name="saxpy_kernel(int, float, const float *, float *)", pid=pid, grid=(4096, 1, 1))
    return b.write(path)


def pinned_async_copies(path: str | Path) -> Path:
    """Transfer-bound with copies already pinned and asynchronous, on the kernels' own stream.

    Process `./stream_copy` (pid 5500), H100. 10 steps of 10 ms: `cudaMemcpyAsync` of 1 GB from pinned
    memory (7 ms, stream 7), then a 2 ms kernel on stream 7 behind it. Window [1, 100] ms; copies 70 ms =
    70.707 %, kernels 20 ms: transfer-bound. No pinned-memory advice (pinned already), no "make the copies
    asynchronous" (they are): move less data and overlap the copies with compute.
    """
    b = ExportBuilder("2024")
    b.gpu(0, H100, 132)
    pid = 5500
    b.process(pid, "./stream_copy")
    for i in range(10):
        s = T0 + i * 10 * MS
        b.copy_call(0, s - 10 * US, s - 5 * US, s, s + 7 * MS, 1 << 30, "HtoD", pinned=True, pid=pid)
        b.launch(0, s - 4 * US, s - 2 * US, s + 7 * MS, s + 9 * MS,
                 name="stream_kernel(double *, const double *, unsigned long)", pid=pid, grid=(2048, 1, 1))
    return b.write(path)


def tail_copies(path: str | Path) -> Path:
    """One GPU whose last 30 ms copy the results back: the tail is its own copies, not "other GPUs".

    Process `./solver` (pid 5600), H100. 50 kernels of 1.2 ms back to back from 1 ms (launched 20 us ahead),
    then a 30 ms DtoH copy of the results (`cudaMemcpy`, pageable) from 61 ms to 91 ms. Window [1, 91] ms =
    90 ms; kernel busy 60 ms = 66.667 %; idle 30 ms = the tail, filled by the GPU's own copies: never
    "balance the work across GPUs" on a single-GPU run.
    """
    b = ExportBuilder("2024")
    b.gpu(0, H100, 132)
    pid = 5600
    b.process(pid, "./solver")
    for i in range(50):
        k = T0 + i * 1200 * US
        b.launch(0, k - 30 * US, k - 20 * US, k, k + 1200 * US, name="solver_step_kernel(double *, const double "
                                                                     "*, int)", pid=pid, grid=(2048, 1, 1))
    end = T0 + 60 * MS
    c = b.api("cudaMemcpy", end - 10 * US, end + 30 * MS + 10 * US, pid=pid)
    b.memcpy(0, end, end + 30 * MS, 3_000_000_000, "DtoH", pinned=False, pid=pid, corr=c)
    return b.write(path)


def one_kernel(path: str | Path) -> Path:
    """A window that is one 14 ms kernel: too little GPU work for a verdict, not "healthy".

    Process `./app` (pid 5700), H100. One `gemm_kernel` [1, 15] ms, grid 512 blocks, launched by a call
    [0.98, 0.99] ms. Window 14 ms, kernel busy 100 %."""
    b = ExportBuilder("2024")
    b.gpu(0, H100, 132)
    b.process(5700, "./app")
    b.launch(0, T0 - 20 * US, T0 - 10 * US, T0, T0 + 14 * MS, name="gemm_kernel(const float *, const float *, "
                                                                   "float *, int)", pid=5700, grid=(512, 1, 1))
    return b.write(path)


def torch_dataloader(path: str | Path) -> Path:
    """PyTorch training whose steps wait on the input pipeline, inside an NVTX `DataLoader` range.

    Process `python train.py` (pid 5800) with threads `pt_main_thread` and `pt_autograd_0`; NVTX ranges
    `aten::` ops; kernels `void at::native::vectorized_elementwise_kernel<...>`. 10 steps of 10 ms: 4 ms of
    kernels (launched 10 us ahead), then the main thread is inside `DataLoader.__next__` (NVTX) for 5.99 ms
    of the 6 ms gap. Window [1, 95] ms; idle 54 ms, cpu_work 53.91 ms of it inside the DataLoader range:
    the remedy is the PyTorch one (more DataLoader workers, pin_memory), with the evidence to give it.
    """
    b = ExportBuilder("2024")
    b.gpu(0, H100, 132)
    pid = 5800
    b.process(pid, "python train.py")
    b.thread(pid, pid, "pt_main_thread")
    b.thread(pid, pid + 1, "pt_autograd_0")
    name = "void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>>(int, T2, T3)"
    for i in range(10):
        s = T0 + i * 10 * MS
        b.nvtx("aten::add", s - 20 * US, s - 5 * US, pid=pid)
        b.launch(0, s - 10 * US, s - 5 * US, s, s + 4 * MS, name=name, pid=pid, grid=(4096, 1, 1))
        if i < 9:
            b.nvtx("DataLoader.__next__", s + 4 * MS + 5 * US, s + 10 * MS - 5 * US, pid=pid)
    return b.write(path)


def cpu_only(path: str | Path) -> Path:
    """A Julia run captured with CPU sampling only: no CUDA trace at all.

    Process `julia` (pid 5900), two A100 listed; COMPOSITE_EVENTS and SAMPLING_CALLCHAINS hold rows; no CUDA
    API, kernel, memcpy or memset rows. The message says the capture has no CUDA trace and how to record
    it (`-t cuda`)."""
    b = ExportBuilder("2024")
    b.gpu(0, A100, 108)
    b.gpu(1, A100, 108)
    b.process(5900, "julia")
    b.command("julia", "--project=.", "run.jl")
    b.table("COMPOSITE_EVENTS", 100)
    b.table("SAMPLING_CALLCHAINS", 400)
    return b.write(path, lazy=True)


WORKLOADS = {
    "openacc_copies": openacc_copies,
    "mpi_halo": mpi_halo,
    "one_block": one_block,
    "jit_cold_start": jit_cold_start,
    "unified_memory": unified_memory,
    "pinned_async_copies": pinned_async_copies,
    "tail_copies": tail_copies,
    "one_kernel": one_kernel,
    "torch_dataloader": torch_dataloader,
    "cpu_only": cpu_only,
}
