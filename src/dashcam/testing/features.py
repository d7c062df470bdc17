"""Planted captures of what modern profiles hold: CUDA graphs, GPU metrics, memory usage and unified-memory faults.

Each takes the builder flavour (``schema``, builder.py: ``"2026"`` the 2026.4 / 3.28.1 layout, ``"2024"`` the
layout before graphId / rawTimestamp / streamId, ``"2022"`` the 2.9.1 layout of the real 2022.2.1 export where it
has the table) so a test can build the same program in two layouts; SCENARIOS registers the 2026 one. The
figures in the docstrings are the same in every layout unless a docstring says otherwise. Times are ns;
"X us" in a docstring is X microseconds from the step start.
"""
from __future__ import annotations

from pathlib import Path

from dashcam.testing.builder import ExportBuilder

US = 1_000
MS = 1_000_000
T0 = 1 * MS
H100 = "NVIDIA H100 80GB HBM3"
A100 = "NVIDIA A100-SXM4-80GB"
GIB = 1 << 30

DECODE_STEPS = 5
STEP = 4 * MS
EAGER = 100  # eager kernels per step
NODES = 50  # kernels per graph launch
GRAPH_ID = 3


def graph_decode(path: str | Path, schema: str = "2026", trace: str = "node") -> Path:
    """LLM decoding in PyTorch: an eager launch-bound prologue, then the step's body replayed from a CUDA graph.

    Process `python serve.py` (pid 7000), H100 (132 SMs); kernels `at::native::...` (PyTorch). 5 steps of 4 ms
    from T0 = 1 ms (NVTX `decode_step` ranges, 50 us before each step to 50 us before the next). Per step:

    - 100 eager `vectorized_elementwise_kernel` of 2 us at 10 us intervals (0..992 us), each launched by an 8 us
      `cudaLaunchKernel` ending 1 us before it (queue 1 us);
    - one `cudaGraphLaunch` [1000, 1100] us of graph 3 (instantiated once, before the window, 50 node creations):
      50 nodes `decode_gemm_<k % 5>` of 40 us at 42 us intervals from 1010 us (2 us device-side waits between
      nodes, the first two while the launch call still runs), ending at 3108 us.

    Window [1, 20.108] ms = 19.108 ms. Node tracing (``trace="node"``): 750 kernels, kernel time 11 ms (busy
    57.568 %), 250 graph kernels = 10 ms = 90.909 % of kernel time, in every step too (2 ms of 2.2 ms); 5 graph
    launches of 50 kernels, median call 100 us; 1 graph (2026 layout: KERNEL.graphId; unknown in the 2024
    layout). launch_latency: 750 launches, 505 launch calls, call p50 8 us, queue p50 1 us. The eager launches
    are launch-bound (500 calls; the first lies before the window: calls 3.992 ms = 20.892 % of it; busy
    57.568 %; queue 1 us; kernel 2 us < call 8 us): graphs would help them. Each step's 49 node gaps (98 us,
    the two inside the launch call included) are `dependency`, never launch overhead.

    Whole-graph tracing (``trace="graph"``, nsys' default): the 250 node kernels are not recorded, one
    CUPTI_ACTIVITY_KIND_GRAPH_TRACE row per launch [1010, 3108] us instead (5 x 2.098 = 10.49 ms = 54.898 % of the
    window, none of it under a recorded kernel); the window is the same (graph executions are GPU activity),
    kernel busy 1 ms = 5.233 %.
    """
    b = ExportBuilder(schema)
    b.gpu(0, H100, 132)
    pid = 7000
    b.process(pid, "python serve.py")
    b.capture_option("CUDA_GRAPH_TRACE_OPTIONS:MODE", "Node" if trace == "node" else "Graph")
    b.graph_created(200 * US, 500 * US, GRAPH_ID, nodes=NODES, pid=pid)
    for i in range(DECODE_STEPS):
        s = T0 + i * STEP
        b.nvtx("decode_step", s - 50 * US, s + STEP - 50 * US, pid=pid)
        for j in range(EAGER):
            k = s + j * 10 * US
            b.launch(0, k - 9 * US, k - 1 * US, k, k + 2 * US, pid=pid,
                     name="void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>(int)")
        nodes = [(s + 1010 * US + n * 42 * US, s + 1050 * US + n * 42 * US, f"decode_gemm_{n % 5}")
                 for n in range(NODES)]
        b.graph_launch(0, s + 1000 * US, s + 1100 * US, nodes, graph_id=GRAPH_ID, pid=pid, trace=trace,
                       grid=(264, 1, 1))
    return b.write(path)


def graph_decode_whole(path: str | Path, schema: str = "2026") -> Path:
    """``graph_decode`` captured with --cuda-graph-trace=graph, nsys' default (the full story in its docstring).

    The 250 graph node kernels are absent: 5 CUPTI_ACTIVITY_KIND_GRAPH_TRACE rows [1010, 3108] us of each step
    stand for them (10.49 ms = 54.898 % of the 19.108 ms window). Only the 500 eager kernels are recorded:
    kernel busy 1 ms = 5.233 %, and the capture-coverage kind ``cuda_graph_whole`` is recorded.
    """
    return graph_decode(path, schema, trace="graph")


METRICS_2026 = {"gr": "GR Active [Throughput %]", "sm": "SM Active [Throughput %]", "issue": "SM Issue [Throughput %]",
                "tensor": "Tensor Active [Throughput %]", "warps": "Compute Warps in Flight [Throughput %]",
                "warps_avg": "Compute Warps in Flight [Avg Warps per Cycle]",
                "dram": "DRAM Read Bandwidth [Throughput %]", "clock": "GPC Clock Frequency [MHz]",
                "other": "NVDEC Active [Throughput %]"}
METRICS_2024 = {"gr": "GR Active", "sm": "SMs Active", "issue": "SM Issue", "tensor": "Tensor Active",
                "warps": "Compute Warps in Flight", "warps_avg": None, "dram": "DRAM Read Bandwidth",
                "clock": "GPC Clock Frequency", "other": "NVDEC Active"}


def busy_not_busy(path: str | Path, schema: str = "2026") -> Path:
    """"util 100 %, SMs 15 % active": kernels fill the timeline, yet the SMs are mostly empty.

    A CUDA C++ program `./sparse_solver` (pid 7100), H100 (132 SMs). From T0 = 1 ms, 20 back-to-back launches of
    `spmv_csr_kernel` (1 ms each, 528 blocks; the launch calls run ahead of the GPU) and, between launches 10
    and 11, a 0.5 ms hole: kernels [1, 11] ms and [11.5, 21.5] ms. Window [1, 21.5] ms = 20.5 ms, kernel busy
    20 ms = 97.561 %.

    GPU metrics every 100 us from 0.1 ms to 21.6 ms (216 samples per metric, 205 of them cover the window;
    sampling 10 kHz, the capture option says 10000): while kernels run GR Active 100, SM Active 15, SM Issue 8,
    Tensor Active 0, Compute Warps in Flight 10 % (12.5 warps/cycle in the 2026 layout's [Avg Warps per
    Cycle] variant), DRAM Read Bandwidth 85, GPC Clock 1755 (MHz), NVDEC Active 0 (a metric no pattern
    knows); in the hole every metric is 0 but the clock. Over the window (a sample holds [t - 100 us, t)): SM
    active mean 15 x 20 / 20.5 = 14.634 %, 15 % while kernels run, 0 in the gap; GR Active mean 97.561 %. The
    finding: kernels cover 97.561 % of the window but SMs are active 15 % of it — "busy" is not busy.
    """
    names = METRICS_2026 if schema == "2026" else METRICS_2024
    b = ExportBuilder(schema)
    b.gpu(0, H100, 132)
    pid = 7100
    b.process(pid, "./sparse_solver")
    b.capture_option("GPU_METRICS_OPTIONS:SAMPLING_FREQUENCY", "10000")
    t = T0
    for i in range(20):
        if i == 10:
            t += 500 * US
        b.launch(0, T0 - 500 * US + i * 10 * US, T0 - 495 * US + i * 10 * US, t, t + 1 * MS, pid=pid,
                 name="void spmv_csr_kernel<float>(int, const int *, const int *, const float *, float *)",
                 grid=(528, 1, 1))
        t += 1 * MS
    busy = {"gr": 100.0, "sm": 15.0, "issue": 8.0, "tensor": 0.0, "warps": 10.0, "warps_avg": 12.5, "dram": 85.0,
            "clock": 1755.0, "other": 0.0}
    times = [n * 100 * US for n in range(1, 217)]

    def running(ts: int) -> bool:  # the sample's interval [ts - 100 us, ts) lies under kernels
        a = ts - 100 * US
        return T0 <= a and ts <= 21_500 * US and not (11 * MS <= a < 11_500 * US)

    for key, name in names.items():
        if name is None:
            continue
        b.gpu_metric(0, name, [(ts, busy[key] if running(ts) or key == "clock" else 0.0) for ts in times])
    return b.write(path)


def memory_churn(path: str | Path, schema: str = "2026") -> Path:
    """A PyTorch-like training loop that allocates and frees a 2 GiB buffer every step (allocator churn).

    Process `python train.py` (pid 7200), A100 80 GB (85899345920 bytes = 80 GiB). 20 GiB of weights allocated
    at 0.5 ms, then a 0.1 ms `warmup_kernel` [0.9, 1.0] ms. 5 steps of 4 ms from T0 = 1 ms (NVTX `step`):
    `cudaMalloc` [0.1, 0.4] ms (allocation of 2 GiB at 0.2 ms), a 2 ms `optimizer_step_kernel` [0.5, 2.5] ms,
    `cudaFree` [2.6, 2.8] ms (free at 2.7 ms; the 2022 layout's free events carry no byte count: the
    allocation's is used). Window [0.9, 19.5] ms = 18.6 ms (the warm-up kernel to the last step's kernel).
    In use at the window start 20 GiB; peak 22 GiB (27.5 % of the GPU) first at 1.2 ms (0.3 ms into the
    window); at the window end 22 GiB (the last free, at 19.7 ms, is after it). Inside the window: 5
    allocations (10 GiB) and 4 frees (8 GiB); `cudaMalloc` 5 calls 1.5 ms, `cudaFree` 4 calls 0.8 ms. Steps
    0-3: 1 allocation of 2 GiB, 1 free, 2 allocation calls of 0.5 ms; step 4 (clipped to the window at
    19.5 ms): 1 allocation, no free, 1 call of 0.3 ms.
    """
    b = ExportBuilder(schema)
    b.gpu(0, A100, 108)
    pid = 7200
    b.process(pid, "python train.py")
    b.alloc(0, 500 * US, 20 * GIB, 0x7F0000000000, pid=pid)
    b.launch(0, 800 * US, 810 * US, 900 * US, 1000 * US, pid=pid, name="warmup_kernel")
    for i in range(5):
        s = T0 + i * 4 * MS
        b.nvtx("step", s, s + 4 * MS, pid=pid)
        c = b.api("cudaMalloc", s + 100 * US, s + 400 * US, pid=pid)
        b.alloc(0, s + 200 * US, 2 * GIB, 0x7F1000000000 + i * 0x100000000, pid=pid, corr=c)
        b.launch(0, s + 450 * US, s + 460 * US, s + 500 * US, s + 2500 * US, pid=pid,
                 name="void optimizer_step_kernel<float>(float *, const float *, int)", grid=(1024, 1, 1))
        c = b.api("cudaFree", s + 2600 * US, s + 2800 * US, pid=pid)
        b.free(0, s + 2700 * US, 0 if schema == "2022" else 2 * GIB, 0x7F1000000000 + i * 0x100000000, pid=pid,
               corr=c)
    return b.write(path)


def managed_faults(path: str | Path, schema: str = "2026") -> Path:
    """A managed-memory C++ program whose kernels fault pages in: migrations and page faults behind each kernel.

    Process `./um_stencil` (pid 7300), A100 (108 SMs). 4 iterations of 5 ms from T0 = 1 ms: `cudaLaunchKernel`
    [0, 10] us, then the driver migrates 4 x 16 MiB HtoD (0.25 ms each, [20, 1020] us, cause page_fault), then
    `stencil_kernel` [1.1, 3.1] ms, during which the GPU faults on 2 pages (records [1.2, 1.3] and [2.0, 2.1] ms,
    8 faults each); after it the host reads the result: one CPU fault at 3.5 ms and a 4 MiB DtoH migration
    [3.5, 3.6] ms (cause page_fault); 1 MiB prefetched HtoD [4.5, 4.55] ms (cause prefetch). Window
    [1.02, 20.55] ms = 19.53 ms (the first migration to the last). Totals: 4 CPU faults, 8 GPU fault records
    with 64 faults, 24 migrations of 276 MiB (260 MiB HtoD, 16 MiB DtoH; 272 MiB for page faults, 4 MiB
    prefetched), 4.6 ms of them (all inside the GPU's gaps: 4.6 of its 11.53 ms idle), and `stencil_kernel`
    waits 1 ms on migrations in each of its 4 launches (its launch call ends at 10 us, it starts at 1.1 ms):
    4 ms, with faults in all 4 launches (64).
    """
    b = ExportBuilder(schema)
    b.gpu(0, A100, 108)
    pid = 7300
    b.process(pid, "./um_stencil")
    for i in range(4):
        s = T0 + i * 5 * MS
        for j in range(4):
            b.memcpy(0, s + 20 * US + j * 250 * US, s + 270 * US + j * 250 * US, 16 << 20, "UM_HtoD", pid=pid, cause=2)
        b.launch(0, s, s + 10 * US, s + 1100 * US, s + 3100 * US, pid=pid,
                 name="void stencil_kernel(float *, const float *, int)", grid=(2048, 1, 1))
        for a in (1200, 2000):
            b.gpu_fault(0, s + a * US, s + (a + 100) * US, 0x7E0000000000 + i * 0x10000 + a, faults=8, pid=pid)
        b.cpu_fault(s + 3500 * US, 0x7E0000000000 + i * 0x10000, pid=pid)
        b.memcpy(0, s + 3500 * US, s + 3600 * US, 4 << 20, "UM_DtoH", pid=pid, cause=2)
        b.memcpy(0, s + 4500 * US, s + 4550 * US, 1 << 20, "UM_HtoD", pid=pid, cause=1)
    return b.write(path)


FEATURES = {
    "graph_decode": graph_decode,
    "graph_decode_whole": graph_decode_whole,
    "busy_not_busy": busy_not_busy,
    "memory_churn": memory_churn,
    "managed_faults": managed_faults,
}
