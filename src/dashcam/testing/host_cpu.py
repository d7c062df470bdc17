"""Planted programs whose captures hold the CPU side too: OS runtime calls, context switches, CPU samples and
call stacks at known times inside known gaps (the cpu tool, gpu_gaps' cpu_work split, the calling functions).
Every figure below is known by construction; tests/test_cpu.py and evals/cases/cpu.yaml assert them.

- ``host_waits``: one GPU, one thread (``trainer``, pid 100), window [10 us, 5.2 ms), two gaps:
  gap 1 [1.01, 3.01) ms: kernel B's launch call at [2.9, 2.905) ms, so its CPU side is 1.89 ms; a
  cudaMemcpyAsync [1.1, 1.15) ms; cpu_work 1.84 ms = read 300 us (called from ``load_batch()``) + poll 100 us
  (waits) + write 50 us, ioctl 10 us outside the copy call, fopen 30 us and the open nested in it 20 us (other
  OS calls) + descheduled [2.0, 2.3) ms + running 1.03 ms (3 samples in ``compute_step(int)``, 1 in
  ``load_batch()``); gap 2 [4.01, 5.1) ms: CPU side 990 us = read 800 us + running 190 us. Kernel B's launch
  has a CUDA backtrace from ``launch_step(int)``; CPU samples inside cudaMemcpyAsync and inside kernel C's launch
  name ``copy_batch(void*)`` and ``run_layer(int)`` (above the kernel's own host stub).
- ``dataloader_wait``: a PyTorch program (``pt_main_thread``) whose main thread waits on its data loader: 8
  steps of 10 ms from 1 ms, each ``poll`` [s, s+6) ms and ``read`` [s+6, s+6.5) ms, then three 1 ms kernels
  launched at s+6.6, 6.7, 6.8 ms (5 us calls) and run from s+6.7 ms back to back; switched off its CPU
  [s+0.5, s+5.5) ms (inside the poll). Window 73 ms; 7 gaps of 7 ms (49 ms idle, 67.1 %), each with cpu_work
  6.9 ms = poll 6 ms + read 0.5 ms (os_wait) + running 0.4 ms: cpu_work 48.3 ms (98.6 % of idle), poll 42 ms,
  read 3.5 ms, running 2.8 ms. Two worker processes (``pt_data_worker``) decode in ``decode_jpeg``.
- ``host_compute``: a C++ solver whose launching thread computes between kernels: 12 steps of 5 ms from 1 ms,
  each a 2 ms kernel at s+3 ms launched at s+2.9 ms; 12 samples every 250 us from s in
  ``assemble_matrix(Mesh const&)`` (144). Window [4, 61) ms, 57 ms; 11 gaps of 3 ms (33 ms idle, 57.9 %), each
  with cpu_work 2.9 ms (31.9 ms, 96.7 % of idle), all running; sampling period 250 us. No OS runtime trace.
- ``os_calls``: a C++ program (``simulate``, pid 700) with a ``CUPTI worker thread`` (tid 701) waiting in
  ``sem_wait`` [0, 20) ms; its main thread opens 3 files (``fopen`` 1 ms each at 1, 3, 5 ms) before 4 kernels
  [10, 14) ms, each launched 0.1 ms before with an ``ioctl`` of 0.05 ms, and writes its output (``pwrite64``
  [15, 20) ms) at teardown. OS runtime: 9 calls to 4 functions, 28.2 ms; sem_wait 20 ms (70.9 %) all on the
  support thread; the program's own threads 8.2 ms (pwrite64 5 ms, all after the window [10, 14) ms; fopen 3 ms,
  all before it; ioctl 0.2 ms), of which 0.15 ms (the last 3 ioctls; the first ends at 9.95 ms) falls in it.
"""
from __future__ import annotations

from pathlib import Path

from dashcam.testing.builder import ExportBuilder

MS, US = 1_000_000, 1_000
APP, LIBC = "/app/train", "/lib64/libc.so.6"
CUDART, CUDA = "/usr/lib/libcudart.so.12", "/usr/lib/libcuda.so.1"
COMPUTE = [("compute_step(int)", APP), ("main", APP)]
LOAD = [("load_batch()", APP), ("main", APP)]


def host_waits_builder(schema: str = "2024", samples: bool = True) -> ExportBuilder:
    """The ``host_waits`` program (module docstring), in either schema flavour, with or without its samples."""
    b = ExportBuilder(schema)
    b.gpu(0)
    b.thread(100, 100, "trainer")
    b.launch(0, 1_000, 6_000, 10_000, 1_010_000, name="kernel_a")
    b.api("cudaMemcpyAsync", 1_100_000, 1_150_000)
    corr_b = b.launch(0, 2_900_000, 2_905_000, 3_010_000, 4_010_000, name="kernel_b")
    b.launch(0, 5_000_000, 5_005_000, 5_100_000, 5_200_000, name="gemm_kernel")
    b.backtrace(corr_b, [("0x7f001", CUDA, True), ("cudaLaunchKernel", CUDART), ("launch_step(int)", APP),
                         ("main", APP)])
    b.osrt("ioctl", 1_120_000, 1_160_000)
    b.osrt("read", 1_200_000, 1_500_000, stack=[("read", LIBC), *LOAD])
    b.osrt("poll", 1_600_000, 1_700_000)
    b.osrt("write", 1_750_000, 1_800_000)
    b.osrt("fopen", 1_850_000, 1_900_000)
    b.osrt("open", 1_860_000, 1_880_000, nesting=1)
    b.osrt("read", 4_100_000, 4_900_000)
    b.sched(0, True)
    b.sched(2_000_000, False)
    b.sched(2_300_000, True)
    if not samples:
        return b
    b.sample(1_120_000, [("ioctl", LIBC), ("0x7f002", CUDA, True), ("cudaMemcpyAsync", CUDART),
                         ("copy_batch(void*)", APP), ("main", APP)])
    b.sample(1_300_000, [("read", LIBC), *LOAD])
    for t in (2_400_000, 2_500_000, 2_600_000):
        b.sample(t, COMPUTE)
    b.sample(2_700_000, LOAD)
    b.sample(5_002_000, [("cuLaunchKernel", CUDA), ("cudaLaunchKernel", CUDART), ("gemm_kernel(float*)", APP),
                         ("run_layer(int)", APP), ("main", APP)])
    return b


def host_waits(path: str | Path) -> Path:
    """One thread's gaps with OS waits (read from load_batch, poll), other OS calls, a descheduled stretch,
    sampled computing (compute_step) and the calling functions of its CUDA calls from a CUDA backtrace and
    samples: the figures are in the module docstring."""
    return host_waits_builder().write(path)


def dataloader_wait(path: str | Path) -> Path:
    """PyTorch's main thread waits on its data loader: poll 6 ms and read 0.5 ms before each step's launches,
    7 gaps of 7 ms with cpu_work 48.3 ms (98.6 % of the 49 ms idle), 42 ms of it in poll; the workers decode
    (module docstring)."""
    b = ExportBuilder()
    b.gpu(0, "NVIDIA A100-SXM4-80GB", sm_count=108)
    b.process(300, "python3")
    b.thread(300, 300, "pt_main_thread")
    b.command("python3", "train.py")
    kernels = ["void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float> >(int)",
               "ampere_sgemm_128x64_nn", "void at::native::reduce_kernel<512, 1>(int)"]
    b.sched(0, True, pid=300)
    for i in range(8):
        s = 1 * MS + i * 10 * MS
        b.osrt("poll", s, s + 6 * MS, pid=300)
        b.osrt("read", s + 6 * MS, s + 6 * MS + 500 * US, pid=300)
        b.sched(s + 500 * US, False, pid=300)
        b.sched(s + 5_500 * US, True, pid=300)
        for k, name in enumerate(kernels):
            call = s + 6_600 * US + k * 100 * US
            start = s + 6_700 * US + k * MS
            b.launch(0, call, call + 5 * US, start, start + MS, name=name, pid=300)
    for w in (301, 302):  # the data loader's worker processes, decoding
        b.process(w, "python3")
        b.thread(w, w, "pt_data_worker")
        for j in range(80):
            b.sample(1 * MS + j * MS, [("decode_jpeg", "/usr/lib/libjpeg.so.8"), ("_worker_loop", "python3")], pid=w)
    return b.write(path)


def host_compute(path: str | Path) -> Path:
    """A C++ solver computes in assemble_matrix between its kernels: 11 gaps of 3 ms, cpu_work 31.9 ms (96.7 %
    of the 33 ms idle), all running, 132 samples in the gaps every 250 us; no OS runtime trace (module
    docstring)."""
    b = ExportBuilder()
    b.gpu(0, "NVIDIA H100 80GB HBM3", sm_count=132)
    b.process(500, "solver")
    b.thread(500, 500, "solver")
    b.sched(0, True, pid=500)
    for i in range(12):
        s = 1 * MS + i * 5 * MS
        b.launch(0, s + 2_900 * US, s + 2_905 * US, s + 3 * MS, s + 5 * MS,
                 name="void cg_solve_kernel<double>(double const*, double*, int)", pid=500)
        for j in range(12):
            b.sample(s + j * 250 * US, [("assemble_matrix(Mesh const&)", "/opt/solver/bin/solver"),
                                        ("main", "/opt/solver/bin/solver")], pid=500)
    return b.write(path)


def os_calls(path: str | Path) -> Path:
    """OS runtime calls mostly outside the GPU's work and mostly on a support thread: sem_wait 20 ms on the
    `CUPTI worker thread`; the program's own fopen 3 ms before the window [10, 14) ms, pwrite64 5 ms after it,
    ioctl 0.2 ms around its launches (module docstring)."""
    b = ExportBuilder()
    b.gpu(0, "NVIDIA A100-SXM4-80GB", sm_count=108)
    b.process(700, "simulate")
    b.thread(700, 700, "simulate")
    b.thread(700, 701, "CUPTI worker thread")
    b.osrt("sem_wait", 0, 20 * MS, pid=700, tid=701)
    for t in (1, 3, 5):
        b.osrt("fopen", t * MS, (t + 1) * MS, pid=700)
    for i in range(4):
        s = 10 * MS + i * MS
        b.osrt("ioctl", s - 100 * US, s - 50 * US, pid=700)
        b.launch(0, s - 100 * US, s - 40 * US, s, s + MS, name="void advance_kernel<double>(double*, int)", pid=700)
    b.osrt("pwrite64", 15 * MS, 20 * MS, pid=700)
    return b.write(path)


HOST_SCENARIOS = {"host_waits": host_waits, "dataloader_wait": dataloader_wait, "host_compute": host_compute,
                  "os_calls": os_calls}
