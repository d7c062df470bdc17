"""Why one CUDA API call takes long, and what makes it cheaper: what the call does that can take milliseconds.

"Why is the first cudaMalloc 364 ms?", "cudaHostRegister 为什么这么慢?", "is cudaLaunchKernel slow here?": the
figures say how long; the reason is what the function does, said once here per kind of call (``CALL_COSTS``,
first match wins). The first CUDA call of a process that creates the context (profile/capture_span.py) is told
apart from the same function's later calls.
"""
from __future__ import annotations

import re

from dashcam.findings.advice.capture import CONTEXT_REMEDY

# (pattern on the function's name, what it does that takes time, what makes it cheaper)
CALL_COSTS: tuple[tuple[str, str, str], ...] = (
    (r"^cu(?:da)?(?:Mem)?HostRegister",
     "it page-locks (pins) host memory that already exists: the driver locks and maps every page of the buffer for "
     "the GPU, so its time grows with the buffer's size (hundreds of ms for gigabytes)",
     "register each buffer once, outside any loop, or allocate it pinned from the start (`cudaMallocHost`) and reuse "
     "it; register only what is copied"),
    (r"^cu(?:da)?(?:MallocHost|HostAlloc|MemHostAlloc|MemAllocHost)",
     "it allocates pinned host memory: the pages are locked and mapped for the GPU as they are allocated, so its "
     "time grows with the size",
     "allocate pinned buffers once and reuse them"),
    (r"^cu(?:da)?(?:Malloc(?:Managed|Pitch|3D)?|MemAlloc\w*)$",
     "it reserves and maps device memory; a large allocation, or one the driver must first free cached memory for, "
     "takes milliseconds",
     "allocate once and reuse, or use a stream-ordered pool (`cudaMallocAsync`; PyTorch's caching allocator does "
     "this)"),
    (r"^cu(?:da)?(?:Free|MemFree)(?:Host)?$",
     "it waits for the GPU to finish its queued work before releasing the memory (an implicit device "
     "synchronization), so its time is mostly that wait",
     "free once at the end, or use `cudaFreeAsync` on a stream"),
    (r"^cu(?:da)?(?:LaunchKernel|LaunchCooperativeKernel|LaunchKernelEx\w*)",
     "the first launch of each kernel loads its module onto the GPU (lazy loading, the default since CUDA 12.2): "
     "milliseconds once per kernel, then microseconds",
     "warm up (launch each kernel once) before the part you time, or `CUDA_MODULE_LOADING=EAGER` to move the loading "
     "to start-up"),
    (r"^cu(?:da)?Memcpy",
     "a copy call returns only when the copy is queued — from pageable host memory or as a synchronous copy, only "
     "when it is done and, before it, the GPU work queued ahead of it; so a long call for few bytes is waiting (for "
     "the GPU, or on a first call for CUDA's set-up), not moving data",
     "copy from pinned memory with `cudaMemcpyAsync` on a stream, so the call returns at once, and synchronize only "
     "where the data is needed"),
    (r"^cu(?:Module|Library)Load|^cuLink",
     "it loads GPU code; code built without this GPU's architecture is JIT-compiled from PTX first, which takes "
     "far longer",
     "build for the GPU's architecture (`-arch=sm_XX`), so nothing is compiled at run time"),
)


def call_cost(function: str) -> tuple[str, str] | None:
    """(what ``function`` does that takes time, what makes it cheaper), or None for a function not in CALL_COSTS."""
    for pattern, why, remedy in CALL_COSTS:
        if re.search(pattern, function or ""):
            return why, remedy
    return None


def context_words() -> tuple[str, str]:
    """The first CUDA call of a process that creates the context: what it does, what makes it cheaper."""
    return ("it is the process's first CUDA call that needs the GPU, in which the CUDA runtime creates its context "
            "(loading the driver, setting up the GPUs and the process's GPU address space): paid once per process, "
            "whatever the function", CONTEXT_REMEDY)
