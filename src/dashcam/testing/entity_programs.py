"""Planted programs whose questions name this program's own kernels, ranges and functions (issue 25).

``entities``: one program with every kind of entity an author asks about, each with its figures known by
construction; ``no_mpi`` (the same GPU work without any MPI or compile step) for questions about a feature the
capture does not hold. Times are ns.
"""
from __future__ import annotations

from pathlib import Path

from dashcam.testing.builder import ExportBuilder

US = 1_000
MS = 1_000_000
MIB = 1 << 20
A100 = "NVIDIA A100-SXM4-80GB"
PID = 8000

ADD = "add(int, float *, float *)"
MATMUL_F = "void matmul_kernel<float>(int, const float *, float *)"
MATMUL_H = "void matmul_kernel<__half>(int, const __half *, __half *)"
HISTOGRAM = "histogram_kernel(const unsigned char *, unsigned int *, int)"
STENCIL = "stencil_kernel(float *, const float *)"
INFERENCE_STARTS = (35, 42, 50, 58, 67)  # ms
INFERENCE_MS = (6, 7, 7, 8, 9)
MIGRATIONS = 16  # 4 MiB page-fault migrations serviced while `add` runs
FAULTS_EACH = 64


def _gpu_work(b: ExportBuilder, compile_and_mpi: bool) -> None:
    b.copy_call(0, 950 * US, 1200 * US, 1 * MS, 1100 * US, 1 * MIB, "HtoD", pid=PID, api_name="cudaMemcpy")
    if compile_and_mpi:  # a JIT step: an NVTX range around NVRTC, then the module load
        b.nvtx("compile kernels (NVRTC)", 2 * MS, 12 * MS, pid=PID)
        b.api("cuModuleLoadDataEx", 9 * MS, 11_500 * US, pid=PID, driver=True)
    # `add`: one launch of 20 ms in the NVTX range "solver", during which 16 unified-memory migrations of 4 MiB
    # (cause: page fault) are serviced with 64 GPU page faults each
    b.nvtx("solver", 11_900 * US, 32_100 * US, pid=PID)
    b.launch(0, 12 * MS, 12_010 * US, 12_020 * US, 32_020 * US, name=ADD, pid=PID, grid=(4096, 1, 1),
             block=(256, 1, 1))
    for i in range(MIGRATIONS):
        s = 12_500 * US + i * 1200 * US
        b.memcpy(0, s, s + 1 * MS, 4 * MIB, kind="UM_HtoD", pid=PID, cause=2)
        b.gpu_fault(0, s, s + 1 * MS, 0x7F00_0000_0000 + i * 4 * MIB, faults=FAULTS_EACH, pid=PID)
    # "inference": 5 NVTX ranges of 6, 7, 7, 8, 9 ms; each launches two 2 ms matmuls and copies 4 MiB back
    for n, (start, length) in enumerate(zip(INFERENCE_STARTS, INFERENCE_MS)):
        s = start * MS
        b.nvtx("inference", s, s + length * MS, pid=PID)
        b.launch(0, s + 100 * US, s + 110 * US, s + 200 * US, s + 2200 * US, name=MATMUL_F, pid=PID,
                 grid=(216, 1, 1), block=(256, 1, 1))
        b.launch(0, s + 300 * US, s + 310 * US, s + 2400 * US, s + 4400 * US, pid=PID,
                 name=MATMUL_H if n == len(INFERENCE_STARTS) - 1 else MATMUL_F, grid=(216, 1, 1), block=(256, 1, 1))
        b.copy_call(0, s + 4450 * US, s + 4800 * US, s + 4500 * US, s + 4700 * US, 4 * MIB, "DtoH", pid=PID,
                    api_name="cudaMemcpy")
    # `histogram_kernel`: 10 back-to-back launches of 1 ms, one block of 256 threads each; then the host waits
    for i in range(10):
        b.launch(0, 79_900 * US + i * 10 * US, 79_905 * US + i * 10 * US, (80 + i) * MS, (81 + i) * MS,
                 name=HISTOGRAM, pid=PID, grid=(1, 1, 1), block=(256, 1, 1))
    b.api("cudaDeviceSynchronize", 80_200 * US, 90_050 * US, pid=PID)
    # `stencil_kernel`: 5 launches; each starts 4 ms after its launch call returns, runs 0.5 ms
    for i in range(5):
        c = (92 + 5 * i) * MS
        b.launch(0, c, c + 10 * US, c + 10 * US + 4 * MS, c + 10 * US + 4500 * US, name=STENCIL, pid=PID,
                 grid=(1024, 1, 1), block=(128, 1, 1))
    if compile_and_mpi:  # MPI, traced by nsys as NVTX ranges: 4 x 3 ms MPI_Allreduce, 2 x 1 ms MPI_Barrier
        for i in range(4):
            b.nvtx("MPI_Allreduce", (117 + 4 * i) * MS, (120 + 4 * i) * MS, pid=PID)
        for i in range(2):
            b.nvtx("MPI_Barrier", (133 + 2 * i) * MS, (134 + 2 * i) * MS, pid=PID)
    b.copy_call(0, 136_400 * US, 137_100 * US, 136_500 * US, 137 * MS, 1 * MIB, "DtoH", pid=PID,
                api_name="cudaMemcpy")


def entities(path: str | Path) -> Path:
    """A CUDA C++ program `./solver` (pid 8000) on one A100 (108 SMs); the window is [1, 137] ms = 136 ms.

    Kernels, 52.5 ms of kernel time in all:

    - `add` (``add(int, float *, float *)``): 1 launch, 20 ms = 38.095 % of kernel time, 4096 blocks of 256
      threads, launched from the NVTX range "solver" 10 us before it starts; while it runs 16 unified-memory
      migrations of 4 MiB (64 MiB, 16 ms) caused by page faults are serviced, with 1,024 GPU page faults.
    - `matmul_kernel`: 10 launches of 2 ms = 20 ms (38.095 %), two instantiations: ``matmul_kernel<float>`` 9
      launches (18 ms), ``matmul_kernel<__half>`` 1 (2 ms); 216 blocks of 256 threads (2 per SM); launched from
      "inference".
    - `histogram_kernel`: 10 launches of 1 ms = 10 ms (19.048 %), one block of 256 threads: one SM of 108.
    - `stencil_kernel`: 5 launches of 0.5 ms = 2.5 ms (4.762 %); each starts exactly 4 ms after its launch call
      returns (launch-to-start latency 4 ms, every launch).

    NVTX: "compile kernels (NVRTC)" [2, 12] ms (10 ms; the driver's cuModuleLoadDataEx inside it, 2.5 ms);
    "solver" [11.9, 32.1] ms; "inference" 5 ranges of 6, 7, 7, 8 and 9 ms (37 ms; median 7 ms, mean 7.4 ms), each
    launching 2 matmuls (4 ms of GPU time, 20 ms in all) and one 4 MiB DtoH copy; MPI traced as NVTX ranges:
    "MPI_Allreduce" 4 x 3 ms and "MPI_Barrier" 2 x 1 ms, 14 ms of MPI in all. No NCCL kernels.
    API: cudaDeviceSynchronize, 1 call [80.2, 90.05] ms = 9.85 ms, waiting for the histogram launches.
    """
    b = ExportBuilder("2024")
    b.gpu(0, A100, 108)
    b.process(PID, "./solver")
    _gpu_work(b, compile_and_mpi=True)
    return b.write(path)


def no_mpi(path: str | Path) -> Path:
    """``entities`` without its compile step and MPI ranges, for questions about features it does not have.

    The same GPU work (the kernels, "solver" and "inference" ranges, copies and cudaDeviceSynchronize of
    ``entities``), and no MPI and no JIT anywhere in the capture (NVTX, OS runtime, CUDA API, kernels): an
    answer about MPI must say where it looked and what would record it. The window is [1, 137] ms as there.
    """
    b = ExportBuilder("2024")
    b.gpu(0, A100, 108)
    b.process(PID, "./solver")
    _gpu_work(b, compile_and_mpi=False)
    return b.write(path)


LOOP_STEPS = 10


def data_region(path: str | Path, per_iteration_copies: bool = False) -> Path:
    """An OpenMP-offload style loop `./jacobi` (pid 8100, one A100): 10 iterations of `jacobi_kernel`, 2 ms each at
    a 3 ms period from 2 ms. With a target data region (the default) the arrays are copied once: one 8 MiB HtoD
    copy [1, 1.5] ms before the loop and one 8 MiB DtoH [32, 32.5] ms after it. Without
    (``per_iteration_copies``): each iteration also copies 8 MiB in (0.5 ms, before its kernel) and 8 MiB out
    (0.4 ms, after it): 20 copies, 160 MiB inside the loop, 2 in each iteration."""
    b = ExportBuilder("2024")
    b.gpu(0, A100, 108)
    pid = 8100
    b.process(pid, "./jacobi")
    b.copy_call(0, 900 * US, 1600 * US, 1 * MS, 1500 * US, 8 * MIB, "HtoD", pid=pid, api_name="cudaMemcpy")
    for i in range(LOOP_STEPS):
        k = 2 * MS + i * 3 * MS
        if per_iteration_copies:
            b.copy_call(0, k - 600 * US, k - 50 * US, k - 550 * US, k - 50 * US, 8 * MIB, "HtoD", pid=pid,
                        api_name="cudaMemcpy")
        b.launch(0, k - 40 * US, k - 30 * US, k, k + 2 * MS, name="jacobi_kernel(double *, const double *, int)",
                 pid=pid, grid=(512, 1, 1), block=(256, 1, 1))
        if per_iteration_copies:
            b.copy_call(0, k + 2 * MS, k + 2500 * US, k + 2050 * US, k + 2450 * US, 8 * MIB, "DtoH", pid=pid,
                        api_name="cudaMemcpy")
    b.copy_call(0, 31_900 * US, 32_600 * US, 32 * MS, 32_500 * US, 8 * MIB, "DtoH", pid=pid, api_name="cudaMemcpy")
    return b.write(path)


def no_data_region(path: str | Path) -> Path:
    """``data_region`` without its target data region: 8 MiB in and out in every one of the 10 iterations.

    Steps run from one launch to the next ([2 + 3i, 5 + 3i] ms), so each holds its DtoH and the next iteration's
    HtoD: 10 steps copy, 19 copies inside the loop (10 DtoH, 9 HtoD; median 2 per step, 16 MiB), and 3 outside
    (the HtoD before the loop, the first iteration's HtoD, the DtoH after the loop).
    """
    return data_region(path, per_iteration_copies=True)


ENTITY_PROGRAMS = {"entities": entities, "no_mpi": no_mpi, "data_region": data_region, "no_data_region": no_data_region}
