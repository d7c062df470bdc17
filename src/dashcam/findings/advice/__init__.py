"""What to try, in the program's own terms, and only when the evidence allows it.

Every remedy has a neutral CUDA wording (``cudaMallocHost``, ``cudaMemcpyAsync``, streams, CUDA
graphs) and, where the words differ, one per programming model the workload tool recognises
(PyTorch, JAX, CuPy, Julia, OpenACC, OpenMP offload, nvc++ stdpar, TensorRT): a framework idiom appears only
with evidence of that framework. OpenACC and OpenMP offload each have their own words (``!$acc data`` /
``gang vector`` / ``async`` against ``omp target data map(...)`` / ``teams distribute`` / ``nowait``), and
stdpar code, which cannot name streams or ``cudaMemcpyAsync``, gets its own (fuse the algorithms, keep the
data on the GPU with prefetch hints, no host access between algorithms). Lower-precision math is named only
where the GPU model has it (measure/gpu_models.py: FP8 from Ada/Hopper, bf16 and TF32 from Ampere).
Each remedy checks its preconditions against the tool results before it
is offered: no pinned-memory advice for copies already pinned, no "overlap the copies" when they
already overlap kernels, no lower-precision advice for GEMMs already in reduced precision, no
"balance the GPUs" on one GPU, no "enable API tracing" when the API was traced.

One module per side of the timeline: ``host`` (what the launching thread did, the CUDA calls it made), ``device``
(copies, dependencies, migrations, the tail, communication), ``kernels`` (their shape, their family, the Nsight
Compute command), ``capture`` (start-up, capture more), ``metrics`` (GPU metrics); ``wording`` holds what they
share. Callers use this package's names (``advice.kernels(f, family)``).
"""
from __future__ import annotations

from dashcam.findings.advice.capture import (
    context_start,
    more_capture,
    pre_window_call,
    pre_window_words,
    startup,
)
from dashcam.findings.advice.device import (
    OUTSIDE_PROCESS,
    QUEUE_AHEAD,
    communication,
    constant_latency,
    dependency,
    dependency_part,
    migrations,
    queued_copies,
    steady_delay,
    tail,
    transfers,
    unknown,
    wait_call,
)
from dashcam.findings.advice.host import (
    MPI,
    OVERLAP,
    allocations,
    cpu_work,
    cuda_api,
    descheduled,
    graphs_fit,
    host_cause,
    host_code,
    host_copies,
    host_remedy,
    host_words,
    in_graphs,
    is_output_io,
    launches,
    named_cpu_work,
    oversubscribed,
    paced_words,
    readbacks,
    sampled_function,
    sync_wait,
)
from dashcam.findings.advice.kernels import (
    family_row,
    gpu_model,
    kernels,
    ncu_command,
    precisions,
    small_kernels,
    spread_family,
    spread_family_in,
    under_parallelized,
)
from dashcam.findings.advice.metrics import (
    sm_underused,
)
from dashcam.findings.advice.wording import (
    DIRECTIVES,
    PYTHONIC,
    RESIDENT,
    by_family,
)

__all__ = [
    "context_start",
    "OUTSIDE_PROCESS", "QUEUE_AHEAD", "DIRECTIVES", "PYTHONIC", "RESIDENT", "by_family", "MPI", "OVERLAP",
    "allocations", "cpu_work", "cuda_api",
    "descheduled", "graphs_fit", "host_cause", "host_code", "host_copies", "host_remedy", "host_words",
    "in_graphs", "is_output_io", "launches", "named_cpu_work", "oversubscribed", "paced_words", "readbacks",
    "sampled_function", "sync_wait", "communication", "constant_latency", "dependency", "dependency_part",
    "steady_delay",
    "migrations", "queued_copies", "tail", "transfers", "unknown", "wait_call", "family_row", "gpu_model",
    "kernels", "ncu_command", "precisions", "small_kernels", "spread_family", "spread_family_in",
    "under_parallelized",
    "more_capture", "pre_window_call", "pre_window_words", "startup", "sm_underused",
]
