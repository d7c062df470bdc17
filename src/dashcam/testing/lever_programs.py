"""Planted programs for the impact model and the remedies already applied (findings/impact.py, practices.py,
remedies.py): each is a capture whose right first remedy, and what it saves, is known by construction; its
docstring states the facts, the lead and the advice that would be wrong for it. Registered in scenarios.SCENARIOS.

All times are ns; GPU activity starts at T0 = 1 ms unless said otherwise.
"""
from __future__ import annotations

from pathlib import Path

from dashcam.testing.builder import ExportBuilder

US = 1_000
MS = 1_000_000
T0 = 1 * MS
A100 = "NVIDIA A100-SXM4-80GB"  # 108 SMs, PCIe 4.0 x16: pinned copies reach 25 GB/s
H100 = "NVIDIA H100 80GB HBM3"  # 132 SMs


def one_launch_long_kernel(path: str | Path) -> Path:
    """A program that launches one `<<<1, 256>>>` kernel for 1.06 s after a 300 ms first launch (module loading).

    Process `./histo_once` (pid 6000), H100 (132 SMs). A pinned HtoD copy [1, 11] ms (`cudaMemcpy`), the first
    (and only) `cudaLaunchKernel` [11, 311] ms (lazy module loading), `histogram_kernel` grid 1x1x1, block
    256x1x1 [311, 1371] ms, then a 1 ms DtoH copy [1371, 1372] ms. Window [1, 1372] ms = 1371 ms; start-up (the
    first launch) 300 ms = 21.882 % (a start-up finding, one-off); the kernel leaves 131 of 132 SMs empty: a full
    grid saves up to 1060 ms x 131/132 = 1051.969697 ms = 76.73 %. The lead is under-parallelized, with that saving;
    "profile the steady state" / `CUDA_MODULE_LOADING=EAGER` never lead (the program launches once).
    """
    b = ExportBuilder("2024")
    b.gpu(0, H100, 132)
    pid = 6000
    b.process(pid, "./histo_once")
    b.copy_call(0, T0 - 10 * US, T0 + 10 * MS + 5 * US, T0, T0 + 10 * MS, 250_000_000, "HtoD", pinned=True, pid=pid,
                api_name="cudaMemcpy")
    b.launch(0, T0 + 10 * MS, T0 + 310 * MS, T0 + 310 * MS, T0 + 1370 * MS,
             name="histogram_kernel(const unsigned char *, unsigned int *, int)", pid=pid, grid=(1, 1, 1),
             block=(256, 1, 1))
    b.copy_call(0, T0 + 1370 * MS, T0 + 1371 * MS + 5 * US, T0 + 1370 * MS, T0 + 1371 * MS, 1024, "DtoH",
                pinned=True, pid=pid, api_name="cudaMemcpy")
    return b.write(path)


def _host_gap(b: ExportBuilder, s: int, pid: int) -> None:
    """kernel_lever's 2 ms gap after the step's 8 ms of kernels from ``s``: `cudaStreamSynchronize` until 0.7 ms
    after the kernels end, host code 0.7 ms, then `cudaEventRecord` + `cudaEventQuery` 0.59 ms."""
    c = b.api("cudaStreamSynchronize", s + 6 * MS, s + 8700 * US, pid=pid)
    b.sync_event(0, s + 6 * MS, s + 8700 * US, corr=c, pid=pid)
    b.api("cudaEventRecord", s + 9400 * US, s + 9700 * US, pid=pid)
    b.api("cudaEventQuery", s + 9700 * US, s + 9990 * US, pid=pid)


def kernel_lever(path: str | Path) -> Path:
    """80 % kernel-busy, the rest spread over three small causes: the kernels are the lever.

    Process `./heat3d --steps 20` (pid 6100), A100 (108 SMs). 20 steps of 10 ms from T0: `stencil_kernel` 6 ms
    (grid 4096) and `reduce_kernel` 2 ms (grid 2048), back to back, launched 5 us before they start; then a
    2 ms gap on the launching thread: `cudaStreamSynchronize` 0.7 ms (until 0.7 ms after the reduce ends), host
    code 0.7 ms, `cudaEventRecord`+`cudaEventQuery` 0.59 ms, the next launch call. Window [1, 199] ms = 198 ms
    (the last step ends at 199); kernels 160 ms = 80.808 %; idle 38 ms in 19 gaps: sync_wait 13.3 ms (6.7 %),
    cpu_work, cuda_api each under 10 % of the window. Lead: kernel-bound, `stencil_kernel` 75 % of kernel time
    (20 launches), the Nsight Compute command for it; not an idle remedy.
    """
    b = ExportBuilder("2024")
    b.gpu(0, A100, 108)
    pid = 6100
    b.process(pid, "./heat3d")
    b.command("./heat3d", "--steps", "20")
    for i in range(20):
        s = T0 + i * 10 * MS
        b.launch(0, s - 5 * US, s - 2 * US, s, s + 6 * MS, name="stencil_kernel(float *, const float *, int)",
                 pid=pid, grid=(4096, 1, 1))
        b.launch(0, s + 6 * MS - 5 * US, s + 6 * MS - 2 * US, s + 6 * MS, s + 8 * MS,
                 name="reduce_kernel(const float *, float *, int)", pid=pid, grid=(2048, 1, 1))
        if i < 19:
            _host_gap(b, s, pid)
    return b.write(path)


CLOVER = ("void clover::par_ranged2d_kernel<{f}(int, int, int, int, clover::Buffer2D<double> &)::"
          "[lambda(int, int) (instance {i})]>(clover::Range2d, T1)")


def kernel_lever_family(path: str | Path) -> Path:
    """kernel_lever's timeline with CloverLeaf's wrapper template: the top kernel is one instantiation, the lever a
    family of four.

    Process `./clover --steps 20` (pid 6200), A100 (108 SMs). 20 steps of 10 ms from T0: the wrapper
    ``clover::par_ranged2d_kernel`` (the export's shortName for all) runs `PdV_kernel`'s lambda 2.4 ms, then
    `advec_mom_kernel`'s four lambdas (instances 1-4) 1.4 ms each, back to back, each launched 5 us before it
    starts; then kernel_lever's 2 ms gap (sync 0.7 ms, host code, event calls). Kernels 160 ms of the 198 ms window
    = 80.808 %. top_kernels: `par_ranged2d_kernel<PdV_kernel>` 30 % (48 ms, 20 launches), each
    `par_ranged2d_kernel<advec_mom_kernel>` instantiation 17.5 %; its family 70 % (112 ms, 80 launches, 4
    instantiations), over twice the top kernel's share. Lead: kernel-bound on that family, with the Nsight
    Compute command that selects it on the demangled name.
    """
    b = ExportBuilder("2024")
    b.gpu(0, A100, 108)
    pid = 6200
    b.process(pid, "./clover")
    b.command("./clover", "--steps", "20")
    parts = [("PdV_kernel", 1, 2400 * US)] + [("advec_mom_kernel", i, 1400 * US) for i in range(1, 5)]
    for step in range(20):
        t = s = T0 + step * 10 * MS
        for fn, inst, dur in parts:
            corr = b.api("cudaLaunchKernel", t - 5 * US, t - 2 * US, pid=pid)
            b.kernel(0, t, t + dur, name=CLOVER.format(f=fn, i=inst), pid=pid, corr=corr, grid=(4096, 1, 1),
                     short="par_ranged2d_kernel")
            t += dur
        if step < 19:
            _host_gap(b, s, pid)
    return b.write(path)


def _lbm_sliver(b: ExportBuilder) -> ExportBuilder:
    """gpu_minor_run's GPU work and exit: 40 launches one every 25 us from 1500 ms, a synchronize, `cudaFree`
    [2000, 2001] ms."""
    t = 1500 * MS
    for _ in range(40):
        b.launch(0, t, t + 20 * US, t + 25 * US, t + 40 * US, name="collide_stream_kernel", grid=(512, 1, 1))
        t += 25 * US
    b.api("cudaDeviceSynchronize", t, t + 10 * US)
    b.api("cudaFree", 2000 * MS, 2001 * MS)
    return b


def gpu_minor_run(path: str | Path) -> Path:
    """A whole-process capture whose GPU work is a sliver of the run: the run's time is on the host.

    Process `./lbm` (pid 100), A100 (108 SMs). `cudaFree` [0, 300] ms (the CUDA context), then host work until 40
    launches of `collide_stream_kernel` (grid 512) one every 25 us from 1500 ms: each call 20 us, its kernel
    [t + 25, t + 40] us; `cudaDeviceSynchronize` after them and a last `cudaFree` [2000, 2001] ms. GPU window
    [1500.025, 1501.015] ms = 0.99 ms; the capture spans the process from `cudaFree` to its exit: 2001 ms, of
    which the window is 0.049 %. Inside the window the GPU is kernel-busy 60.6 % and its best fix, launch
    overhead, saves 0.195 ms (0.01 % of the run). Lead: the GPU is a small part of the run (gpu_minor).
    """
    b = ExportBuilder("2024")
    b.gpu(0, A100, 108)
    b.process(100, "./lbm")
    b.command("./lbm")
    b.api("cudaFree", 0, 300 * MS)
    return _lbm_sliver(b).write(path)


def file_bound_run(path: str | Path) -> Path:
    """gpu_minor_run whose host time the capture records in OS runtime calls: the lead names the program's own.

    As gpu_minor_run (process span 2001 ms, GPU window 0.99 ms), with OS runtime calls: the main thread (tid 100,
    `lbm`) opens 10 input files, `fopen` 40 ms each from 400 ms (400 ms, 20.0 % of the run), then `read`s 6 times
    for 20 ms from 800 ms (120 ms, 6.0 %: a wait, but on the thread that drives the GPU), and its context
    creation's `ioctl`s (100 ms inside `cudaFree` [0, 300] ms: CUDA's, not the program's own); a `CUPTI worker
    thread` (tid 150) waits in `sem_wait` [0, 2001] ms and a helper thread (tid 101, no CUDA calls) in `poll`
    [0, 1500] ms: neither is the run's cost. Lead: gpu_minor, starting with `fopen`.
    """
    b = ExportBuilder("2024")
    b.gpu(0, A100, 108)
    b.process(100, "./lbm")
    b.command("./lbm")
    b.thread(100, 100, "lbm")
    b.thread(100, 101, "lbm-io")
    b.thread(100, 150, "CUPTI worker thread")
    b.api("cudaFree", 0, 300 * MS)
    for i in range(10):
        b.osrt("ioctl", i * 30 * MS, i * 30 * MS + 10 * MS)
        b.osrt("fopen", 400 * MS + i * 40 * MS, 440 * MS + i * 40 * MS)
    for i in range(6):
        b.osrt("read", 800 * MS + i * 20 * MS, 820 * MS + i * 20 * MS)
    b.osrt("sem_wait", 0, 2001 * MS, tid=150)
    b.osrt("poll", 0, 1500 * MS, tid=101)
    return _lbm_sliver(b).write(path)


def compile_bound_benchmark(path: str | Path) -> Path:
    """A PyTorch benchmark run once under pytest, whole process, whose time is compiling its fusions: start-up.

    Process `python3` (pid 900, thread `pt_main_thread`) running `pytest bench_fusion.py`, H100 (132 SMs). Its
    first CUDA call `cudaGetDeviceProperties` [0, 2] ms starts CUDA; then 3 rounds from 10 ms, 330 ms apart: an NVTX
    range `FusionKernelRuntime::compileFusionParallel` of 250 ms (nvFuser compiling), 60 ms of Python, then 6
    kernels `nvfuser_reduction_f<r>_c1_r0_g<i>` of 0.5 ms launched back to back (each call 10 us before its
    kernel, 10 us long); a last `cudaFree` [1010, 1011] ms. GPU window [320, 983] ms = 663 ms (18 kernels); JIT
    500 ms inside it (the first round's compile ends before the first kernel): 75.4 % with the first launches.
    Lead: start-up; remedy: compiling is paid once per process and shape: warm up, capture what follows.
    """
    b = ExportBuilder("2024")
    b.gpu(0, "NVIDIA H100 80GB HBM3", 132)
    b.process(900, "python3")
    b.command("python3", "-m", "pytest", "bench_fusion.py")
    b.thread(900, 900, "pt_main_thread")
    b.api("cudaGetDeviceProperties_v2", 0, 2 * MS, pid=900)
    for r in range(3):
        t = 10 * MS + r * 330 * MS
        b.nvtx("FusionKernelRuntime::compileFusionParallel", t, t + 250 * MS, pid=900)
        k = t + 310 * MS
        for i in range(6):
            b.launch(0, k - 20 * US, k - 10 * US, k, k + 500 * US, name=f"nvfuser_reduction_f{r}_c1_r0_g{i}",
                     pid=900, grid=(264, 1, 1))
            k += 500 * US
    b.api("cudaFree", 1010 * MS, 1011 * MS, pid=900)
    return b.write(path)


def python_setup_run(path: str | Path) -> Path:
    """A PyTorch script run once, whole process, whose GPU waits on one-off Python between a handful of kernels.

    Process `python3` (pid 910, thread `pt_main_thread`) running `python3 prepare.py`, A100 (108 SMs): first CUDA
    call `cudaFree` [0, 1] ms, then 12 different kernels (`prep_kernel_<i>`, 1 ms each) 300 ms apart from 100 ms,
    each launched 10 us before it by a 5 us call, and a last `cudaFree` [3500, 3501] ms. GPU window [100, 3401] ms;
    11 gaps of 299 ms of Python (no CUDA call, no NVTX), no repeating step: the host work is set-up paid once
    per process, not a step loop's ("move work out of the step loop", "DataLoader" do not apply).
    """
    b = ExportBuilder("2024")
    b.gpu(0, A100, 108)
    b.process(910, "python3")
    b.command("python3", "prepare.py")
    b.thread(910, 910, "pt_main_thread")
    b.api("cudaFree", 0, 1 * MS, pid=910)
    for i in range(12):
        k = 100 * MS + i * 300 * MS
        b.launch(0, k - 10 * US, k - 5 * US, k, k + MS, name=f"prep_kernel_{i}", pid=910, grid=(216, 1, 1))
    b.api("cudaFree", 3500 * MS, 3501 * MS, pid=910)
    return b.write(path)


def context_bound_run(path: str | Path) -> Path:
    """A short Python script whose run is mostly CUDA creating its context: the remedy is CUDA's start-up.

    Process `python` (pid 300) running `python cupy_demo.py`, A100 (108 SMs). Its first CUDA call, `cudaMalloc`
    [0, 360] ms, creates the context; from 400 ms, 20 launches of `cupy_add` one every 100 us (each call 10 us, its
    kernel [t + 15, t + 25] us); a last `cudaFree` [479, 480] ms. Process span 480 ms, of which the context creation
    is 75.0 % and the GPU window [400.015, 401.925] ms = 1.91 ms is 0.4 %. Lead: the GPU is a small part of the run,
    and CUDA's start-up is most of it: persistence mode, fewer visible GPUs, more work per process.
    """
    b = ExportBuilder("2024")
    b.gpu(0, A100, 108)
    b.process(300, "python")
    b.command("python", "cupy_demo.py")
    b.api("cudaMalloc", 0, 360 * MS, pid=300)
    t = 400 * MS
    for _ in range(20):
        b.launch(0, t, t + 10 * US, t + 15 * US, t + 25 * US, name="cupy_add", pid=300, grid=(512, 1, 1))
        t += 100 * US
    b.api("cudaFree", 479 * MS, 480 * MS, pid=300)
    return b.write(path)


def copies_at_link_peak(path: str | Path) -> Path:
    """Synchronous copies already pinned (446 of 450) and at the link's peak: no pinned-memory advice.

    Process `./pipeline` (pid 6200), A100 on PCIe 4.0 x16 (pinned copies reach 25 GB/s). 450 steps of 2 ms from T0:
    a synchronous `cudaMemcpy` HtoD of 24 MB taking 1 ms (24 GB/s = 96 % of the link; copies 0-3 pageable, the
    other 446 pinned), then a 1 ms `transform_kernel` (grid 2048) launched as the copy call returns. Window
    [1, 901] ms = 900 ms; copies 450 ms, kernels 450 ms. GPU idle 450 ms, all inside `cudaMemcpy` (cuda_api).
    Right: the copies are already pinned and run at 24 GB/s, 96 % of PCIe 4.0 x16; overlap them with the kernels
    (double buffering) and, beyond that, move less data. Wrong: "copy from pinned memory" / `cudaMallocHost`.
    """
    b = ExportBuilder("2024")
    b.gpu(0, A100, 108)
    pid = 6200
    b.process(pid, "./pipeline")
    for i in range(450):
        s = T0 + i * 2 * MS
        b.copy_call(0, s - 5 * US, s + 1 * MS + 3 * US, s, s + 1 * MS, 24_000_000, "HtoD", pinned=i >= 4, pid=pid,
                    api_name="cudaMemcpy")
        b.launch(0, s + 1 * MS + 3 * US, s + 1 * MS + 6 * US, s + 1 * MS + 10 * US, s + 2 * MS,
                 name="transform_kernel(const float *, float *, int)", pid=pid, grid=(2048, 1, 1))
    return b.write(path)


def async_copies_hidden(path: str | Path) -> Path:
    """600 asynchronous pinned copies on 4 streams with every kernel hidden under them: no stream advice.

    Process `./stream_pipe` (pid 6300), A100 (PCIe 4.0 x16). 150 steps of 2 ms from T0: four `cudaMemcpyAsync`
    HtoD of 12 MB from pinned memory, one on each of streams 11-14, all running [s, s + 2 ms] (the four share the
    link: 48 MB in 2 ms = 24 GB/s, 96 % of it), and a 0.5 ms `consume_kernel` on stream 15 inside them. Window
    [1, 301] ms = 300 ms; copies 300 ms = 100 %, kernels 75 ms, all under copies: transfer-bound. Right: the copies
    are already asynchronous on 4 streams, pinned, at the link's peak, and every kernel already runs under them:
    only moving less data helps. Wrong: `cudaMemcpyAsync` / "a separate stream" / pinned memory as advice.
    """
    b = ExportBuilder("2024")
    b.gpu(0, A100, 108)
    pid = 6300
    b.process(pid, "./stream_pipe")
    for i in range(150):
        s = T0 + i * 2 * MS
        for j in range(4):
            b.copy_call(0, s - 20 * US + j * US, s - 19 * US + j * US, s, s + 2 * MS, 12_000_000, "HtoD",
                        pinned=True, stream=11 + j, pid=pid)
        b.launch(0, s - 10 * US, s - 8 * US, s + 1 * MS, s + 1500 * US, name="consume_kernel(const float *, int)",
                 stream=15, pid=pid, grid=(2048, 1, 1))
    return b.write(path)


def acc_data_region(path: str | Path) -> Path:
    """OpenACC time-step loop inside a data region: 3 host copies for 50 kernels; the copies are the first load
    and the result, pageable.

    Process `./swe_acc` (pid 6400), A100 (PCIe 4.0 x16), the OPENACC launch table has rows. Two pageable HtoD
    copies of 200 MB, 20 ms each (`cuMemcpyHtoDAsync_v2` + `cuStreamSynchronize`), from T0; then 50 steps of 1.2
    ms: `step_123_gpu` 1 ms (grid 2048) and a 0.2 ms gap (host code); then one pageable DtoH copy of 200 MB, 20 ms.
    Window [1, 121] ms = 120 ms; copies 60 ms = 50 %, kernels 50 ms = 41.667 %: transfer-bound. Pinned copies of
    200 MB take 8.002 ms over PCIe 4.0 x16 (2 us + 200 MB at 25 GB/s): pinning saves 3 x 11.998 = 35.994 ms.
    Right: the arrays already stay on the GPU (3 host copies for 50 kernels); allocate them pinned (`-gpu=pinned`).
    Wrong: "keep the arrays resident with a data region" (it exists) and overlapping (the load precedes the loop).
    """
    b = ExportBuilder("2024")
    b.gpu(0, A100, 108)
    pid = 6400
    b.process(pid, "./swe_acc")
    b.table("CUPTI_ACTIVITY_KIND_OPENACC_LAUNCH", 50)
    t = T0
    for _ in range(2):
        c = b.api("cuMemcpyHtoDAsync_v2", t - 10 * US, t, pid=pid, driver=True)
        b.memcpy(0, t, t + 20 * MS, 200_000_000, "HtoD", pinned=False, pid=pid, corr=c)
        b.api("cuStreamSynchronize", t, t + 20 * MS + 5 * US, pid=pid, driver=True)
        t += 20 * MS
    for _ in range(50):
        b.launch(0, t + 190 * US, t + 195 * US, t + 200 * US, t + 1200 * US, name="step_123_gpu", pid=pid,
                 api_name="cuLaunchKernel", grid=(2048, 1, 1))
        t += 1200 * US
    c = b.api("cuMemcpyDtoHAsync_v2", t - 5 * US, t, pid=pid, driver=True)
    b.memcpy(0, t, t + 20 * MS, 200_000_000, "DtoH", pinned=False, pid=pid, corr=c)
    b.api("cuStreamSynchronize", t, t + 20 * MS + 5 * US, pid=pid, driver=True)
    return b.write(path)


def prefetched_managed(path: str | Path) -> Path:
    """Managed memory that the program already prefetches (180 `cudaMemPrefetchAsync` calls), yet pages still
    migrate on demand before each kernel.

    Process `./um_prefetch` (pid 6500), A100. 10 steps of 10 ms from T0: 18 `cudaMemPrefetchAsync` calls of 20 us
    (on the host, from s), six 1 ms batches of on-demand HtoD migrations (64 MiB each), then a 3 ms `axpy_kernel`
    launched at s + 10 us. Window [1, 100] ms = 99 ms (the first step's 18 calls fall before it: 162 in it); idle 69
    ms, migrations in it 60 ms. Right: it says the program already prefetches (162 calls in the window) and what to
    change (prefetch to the device, on the kernel's stream,
    preferred location, device memory). Wrong: plain "prefetch managed memory before use".
    """
    b = ExportBuilder("2024")
    b.gpu(0, A100, 108)
    pid = 6500
    b.process(pid, "./um_prefetch")
    for i in range(10):
        s = T0 + i * 10 * MS
        for j in range(18):
            b.api("cudaMemPrefetchAsync", s - 900 * US + j * 40 * US, s - 880 * US + j * 40 * US, pid=pid)
        for j in range(6):
            b.memcpy(0, s + j * MS, s + (j + 1) * MS, 64 << 20, "UM_HtoD", pid=pid)
        k = s + 6 * MS
        b.launch(0, s + 10 * US, s + 20 * US, k, k + 3 * MS, name="axpy_kernel(int, float, const float *, float *)",
                 pid=pid, grid=(4096, 1, 1))
    return b.write(path)


def flag_readback_loop(path: str | Path) -> Path:
    """An iterative solver that reads its convergence flag back every iteration: CUDA graphs cannot capture it.

    Process `./cg_solver` (pid 6600), H100. 200 iterations of 60 us from T0: three 4 us kernels (`spmv_kernel`,
    `dot_kernel`, `axpy_kernel`, grid 1024) launched by 8 us calls, then a synchronous `cudaMemcpy` DtoH of 4 bytes
    (the flag; the copy 2 us, the call 22 us). Readbacks: 200, one per 3 kernels (600 kernels). Right: test the flag
    every few iterations (or on the device) so launches run ahead. Wrong: "CUDA graph" / `cudaStreamBeginCapture`.
    """
    b = ExportBuilder("2024")
    b.gpu(0, H100, 132)
    pid = 6600
    b.process(pid, "./cg_solver")
    for i in range(200):
        s = T0 + i * 60 * US
        for j, kname in enumerate(("spmv_kernel(const double *, double *)", "dot_kernel(const double *, double *)",
                                   "axpy_kernel(double, const double *, double *)")):
            a = s + j * 10 * US
            b.launch(0, a, a + 8 * US, a + 8 * US, a + 12 * US, name=kname, pid=pid, grid=(1024, 1, 1))
        r = s + 30 * US
        b.copy_call(0, r, r + 22 * US, r + 18 * US, r + 20 * US, 4, "DtoH", pinned=False, pid=pid,
                    api_name="cudaMemcpy")
    return b.write(path)


LEVERS = {
    "one_launch_long_kernel": one_launch_long_kernel,
    "kernel_lever": kernel_lever,
    "kernel_lever_family": kernel_lever_family,
    "gpu_minor_run": gpu_minor_run,
    "context_bound_run": context_bound_run,
    "file_bound_run": file_bound_run,
    "compile_bound_benchmark": compile_bound_benchmark,
    "python_setup_run": python_setup_run,
    "copies_at_link_peak": copies_at_link_peak,
    "async_copies_hidden": async_copies_hidden,
    "acc_data_region": acc_data_region,
    "prefetched_managed": prefetched_managed,
    "flag_readback_loop": flag_readback_loop,
}
