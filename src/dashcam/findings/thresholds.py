"""Every threshold of the findings engine, each with its reason (docs/definitions.md lists them all,
with the tools' own: launch_latency, memcpy, nccl, small_kernels)."""
from __future__ import annotations

# A GPU whose kernels cover at least 90 % of the window leaves at most a tenth of it idle: little is left
# to win on the timeline, so a faster run must come from faster kernels (GPU-bound, "healthy").
HEALTHY_MIN_KERNEL_BUSY_PCT = 90.0
# Below the healthy bar a GPU idles more than this share of the window: an idle finding.
IDLE_MIN_PCT = 100.0 - HEALTHY_MIN_KERNEL_BUSY_PCT
# A quarter of the window lost caps the speed-up from removing it at 1 / (1 - 0.25) = 1.33x: worth
# fixing, not the whole story -> medium.
MEDIUM_LOSS_PCT = 25.0
# Half the window or more lost: the GPU waits more than it works; removing the cause at least doubles
# the speed -> high.
HIGH_LOSS_PCT = 50.0
# A finding that would save less than this share of the window is info only: it is listed, never leads.
LOW_LOSS_PCT = 5.0
# Fewer kernels than this in the window are a handful of events (a warm-up, one step, one long launch):
# not enough to call a run healthy or to blame generic host work; the capture is "too little GPU work"
# unless a specific cause (start-up, a named NVTX phase, an under-parallelized launch, copies) explains it.
MIN_KERNELS_FOR_VERDICT = 10
# A capture that spans the whole process shows the run's cost: when the GPU window is under a twentieth of it, the
# run's time is on the host (start-up, host code, I/O) and no fix inside the window can save more than that
# twentieth (a 1 ms GPU window in a 2 s run), so the verdict is about the run, not the window (rules/capture.py).
GPU_MINOR_RUN_PCT = 5.0
# ... and when the call that created the CUDA context holds half or more of that run, CUDA's own start-up is what the
# run costs (a CuPy script: 365 ms of 481 ms in its first `cudaMalloc`): the remedy is about that start-up, not about
# host code no trace shows.
CONTEXT_MAJOR_RUN_PCT = 50.0
# Fusing kernels or capturing them in a CUDA graph pays off over many launches: fewer short small-grid
# launches than this cost too little for a small-kernels finding.
SMALL_KERNELS_MIN_LAUNCHES = 100
# Start-up (JIT, module loads, first launches) is paid once: it leads the diagnosis only when it covers at least
# half the window, i.e. when the capture shows mostly the program starting; below that, the costs that recur in
# every step (which a longer run multiplies) rank first (findings/impact.py).
STARTUP_LEAD_PCT = 50.0
# The kernels are the lever when every GPU's kernels run at least three quarters of the window and no other fix
# saves a tenth of it: removing a cause worth under 10 % speeds the run up at most 1.11x, while kernels that run
# 75 % of the window win as much by being 13 % faster (rules/kernel_lever.py).
# A program that compiles at run time (JIT ranges in the capture) whose launches are at least half a kernel's first
# launch never reached its steady state in the capture: the host time between its launches is the compiler's, so
# the capture is start-up whatever share the JIT ranges hold.
COLD_FIRST_LAUNCH_PCT = 50.0
KERNEL_LEVER_MIN_BUSY_PCT = 75.0
KERNEL_LEVER_MIN_OTHER_PCT = 10.0
# Start-up work (JIT compiling, module loads, first launches) covering this share of the window is a
# finding of its own: the capture shows a cold start, not the steady state.
STARTUP_MIN_PCT = 20.0
# A CUDA call before the GPU window (CUDA initialization, context creation in the runtime's first call) this
# long is part of the start-up story though the window does not hold it: a warm driver creates a context in
# tens of ms, so a tenth of a second or more is start-up a user waits for (persistence mode, fewer visible GPUs
# and lazy module loading shorten it).
PRE_WINDOW_CALL_NOTABLE_MS = 100
# An NVTX kind (jit, mpi, data...) holding this share of a GPU's cpu_work names that cpu_work: the host
# was compiling, in MPI, loading data; the remedy for that kind comes first when it holds half of it.
NAMED_CPU_WORK_PCT = 20.0
# What the launching thread did (an OS call, descheduled time, computing in a sampled function) holding this
# share of a GPU's cpu_work names that cpu_work and picks its remedy: a quarter of the time is a real part of the
# wait, not one stray call.
NAMED_HOST_PCT = 25.0
# A cause named from CPU samples (the function host code ran most often in) needs at least this many samples in
# it: with fewer, one sample more or less moves the estimate by over 10 %, and 2 samples at a 1 ms period say
# little about 4 ms of computing; the time stays "running", unnamed.
MIN_NAMED_SAMPLES = 10
# Unified-memory migrations filling this share of a GPU's idle time make migrations the cause to fix.
MIGRATION_MIN_IDLE_PCT = 30.0
# Migrations running while a GPU's kernels run, over this share of its kernel busy time: a fifth of the kernels'
# time spent while pages move is a fault-bound share worth removing (prefetch, device memory), and more than a
# stray fault at a kernel's start.
MIGRATION_MIN_KERNEL_PCT = 20.0
# A tail (the gap after a GPU's last kernel, all of it `unknown`: no kernel ends it) holding at least this
# share of the GPU's `unknown` idle time is what that time is: the GPU had finished its work, it did not
# lose launch calls from the trace.
TAIL_MIN_UNKNOWN_PCT = 50.0
# What the program already does (findings/practices.py): a practice counts as applied when it covers at least this
# share of the copies (a few stragglers, such as one pageable buffer of 450, do not make pinning the remedy).
PINNED_DONE_PCT = 90.0
ASYNC_DONE_PCT = 90.0
# Without steps in the capture: at most a handful of host copies (a first load and a result for a few arrays) and at
# most one for every ten kernels: the arrays stay on the GPU across the loop (a data region exists).
RESIDENT_MAX_COPIES = 4
RESIDENT_MAX_COPIES_PER_KERNEL = 0.1
# ... or, where the capture shows a loop of steps, fewer than one host copy every four steps: a loop that copies its
# input every step streams data; one that copies once at the start and once at the end keeps it resident.
RESIDENT_MAX_COPIES_PER_STEP = 0.25
# The host reads a value back at least this often, with fewer kernels than GRAPH_MIN_KERNELS_PER_READBACK between two
# readbacks: a CUDA graph could hold only those few kernels, so graphs are no remedy for that loop.
READBACK_MIN_COUNT = 10
GRAPH_MIN_KERNELS_PER_READBACK = 20
# What fills a GPU's tail (its own copies, migrations, other GPUs' kernels, an OS call of its process, the
# launching thread's host code) is named only when it covers at least this share of the tail: a quarter is a real
# part of it (as NAMED_HOST_PCT for cpu_work), not a copy at its very end; the largest such filler leads.
TAIL_FILLER_MIN_PCT = 25.0

# Whole-graph executions (--cuda-graph-trace=graph) no recorded kernel covers, filling this share of a GPU's idle
# time: the idle figures mostly count graph execution the capture did not trace per kernel (capture finding).
WHOLE_GRAPH_MIN_IDLE_PCT = 30.0
# Kernels cover the timeline (kernel busy >= HEALTHY_MIN_KERNEL_BUSY_PCT) but the SMs are active less than half
# the time the kernels run (GPU metrics): the timeline's "busy" leaves most of the GPU empty.
SM_ACTIVE_LOW_PCT = 50.0
# GEMM-heavy work (matrix multiplies at least half of the kernel time) whose tensor cores are active less than
# this share of the time kernels run: the GEMMs do not run on tensor cores (FP32 without TF32) or starve them.
TENSOR_ACTIVE_LOW_PCT = 20.0
# ... when matrix multiplies (the GEMM kernel family) hold at least half of the kernel time.
GEMM_HEAVY_PCT = 50.0
# Launch-to-start latency (dependency time with the device empty and no wait in the capture,
# profile/gap_dependency.py): a launch on an empty GPU starts within tens of microseconds (a loaded driver: up
# to about 150 us); a median of a millisecond or more is not this process's launch latency ...
LATENCY_LARGE_MIN_US = 1000
# ... and when the 10th-90th percentile spread is within this share of the median it is the same delay every
# time (a time slice, another context's work), not jitter: what holds the kernels is outside the trace.
LATENCY_CONSTANT_MAX_SPREAD_PCT = 10.0
# ... over at least this many gaps: a delay seen once or twice is an event, not the same delay every time.
LATENCY_CONSTANT_MIN_GAPS = 5

THRESHOLDS = {name: value for name, value in dict(globals()).items() if name.isupper()}
