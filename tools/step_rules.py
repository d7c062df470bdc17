"""What keeps an NVTX range group from being the run's steps (used by the iterations tool, its module docstring).

- Library-internal ranges: a library's own instrumentation times its internals, not the program's steps.
- Layers: labels that differ only by a trailing index inside one enclosing range instance (TensorRT's
  ``Identity_0`` .. ``Identity_15`` in one inference) are the layers of that range.
- No GPU work: a step launches or runs kernels.
- Different work under one generic name: three ``for_each`` calls with different kernels are not repetitions.
"""
from __future__ import annotations

import re

import numpy as np

# NVTX domains a library creates for its own ranges (nsys writes a domain's name as its creation event):
# collective libraries (NCCL, NVSHMEM, MPI under --trace=mpi), the math libraries (cuBLAS, cuBLASLt, cuDNN,
# cuFFT, cuSPARSE, cuSOLVER, cuRAND, cuTENSOR, CUTLASS), TensorRT and nvFuser's internals.
LIBRARY_DOMAINS = (r"^(?:NCCL|NVSHMEM|MPI|cuBLAS\w*|cuDNN|cuFFT|cuSPARSE|cuSOLVER|cuRAND|cuTENSOR|CUTLASS|"
                   r"TensorRT|TRT|nvFuser|Fuser|NVFUSER)$")
# Range labels of a library's internals, in the default domain too (first match wins; each with its source).
LIBRARY_LABELS: tuple[tuple[str, str], ...] = (
    # nvFuser's own names (the shared NVIDIA__Fuser report1: isResharding 2,896 ranges, getTerminatingOutputs
    # 5,522, IrContainer, FusionDefinition, GpuLower, segmenter ...); names a program could use too (a
    # "ForwardPass", a "Scheduler") are left out
    ("nvFuser", r"^(?:isResharding|getTerminatingOutputs|IrContainer (?:clear|copy)|Fusion (?:copy|clear)|"
                r"Operators\.|FusionDefinition|FusionCache|FusionExecutor|KernelExecutor|GpuLower|"
                r"SegmentCandidateFinder|~?Segmenter|PreSegmenter|python_frontend|reuseMemoryAllocations|"
                r"generateCudaKernel|TransformReplay|ExpressionEvaluator)\b"),
    # argument marshalling inside a library's launch path (one range per kernel argument or launch)
    ("launch internals", r"^(?:getKernelArgument|setKernelArgument|getKernelArguments)$"),
    # the math libraries' API ranges (cuBLAS/cuDNN NVTX instrumentation names its calls)
    ("math library call", r"^(?:cublas|cublasLt|cudnn|cufft|cusparse|cusolver|curand|cutensor|nvjpeg)[A-Z_]"),
    # TensorRT's runtime internals (its layers are told apart by step_rules.layers, not by name)
    ("TensorRT", r"^(?:TensorRT:|trt::|myelin|Reformatting CopyNode|ExecutionContext::|IExecutionContext)"),
)
LIBRARY_LABEL_RE = re.compile("|".join(f"(?:{p})" for _, p in LIBRARY_LABELS))
LAYER_SHARE = 0.5  # a trailing-index group is layers when this share of its consecutive pairs share an enclosing range
GPU_WORK_SHARE = 0.5  # a step candidate needs GPU work in this share of its ranges (and at least one)
SAME_WORK_SHARE = 0.5  # a candidate without a step word repeats when this share of its ranges launch the same kernels


def library_internal(label: str, domain: str | None) -> bool:
    """Whether a range is a library's own (its domain is a library's, or its label one of a library's internals)."""
    return bool(domain and re.match(LIBRARY_DOMAINS, domain)) or LIBRARY_LABEL_RE.match(label) is not None


def shares_parent(starts: np.ndarray, ends: np.ndarray, other_starts: np.ndarray, other_ends: np.ndarray) -> bool:
    """Whether ranges (one group on one thread, by start) sit in twos or more inside one enclosing range instance:
    at least LAYER_SHARE of their consecutive pairs are both inside one of the other ranges on the thread."""
    if len(starts) < 2 or len(other_starts) == 0:
        return False
    o = np.argsort(other_starts, kind="stable")
    reach = np.maximum.accumulate(other_ends[o])  # the latest end among other ranges starting at or before
    i = np.searchsorted(other_starts[o], starts[:-1], side="right") - 1
    covered = (i >= 0) & (reach[np.maximum(i, 0)] >= ends[1:])
    return bool(covered.mean() >= LAYER_SHARE)


def launches_per_range(starts: np.ndarray, ends: np.ndarray, api_starts: np.ndarray,
                       names: np.ndarray) -> list[frozenset]:
    """Per range (disjoint, by start): the kernel names (ids) launched from its thread inside it."""
    i = np.searchsorted(starts, api_starts, side="right") - 1
    inside = (i >= 0) & (api_starts < ends[np.maximum(i, 0)])
    i, names = i[inside], names[inside]
    out: list[set] = [set() for _ in range(len(starts))]
    if len(i):
        pairs = np.unique(np.stack([i, names]), axis=1)
        for a, n in pairs.T:
            out[int(a)].add(int(n))
    return [frozenset(s) for s in out]


def has_gpu_work(launched: list[frozenset], busy_ns: np.ndarray) -> bool:
    """GPU work (a kernel launched from the range's thread inside it, or kernel busy time in it) in at least
    GPU_WORK_SHARE of the ranges."""
    work = np.array([bool(x) for x in launched]) | (busy_ns > 0)
    return bool(work.any() and work.mean() >= GPU_WORK_SHARE)


def same_work(launched: list[frozenset]) -> bool:
    """Whether the ranges repeat the same GPU work: the most common set of launched kernel names (empty sets
    aside) is that of at least SAME_WORK_SHARE of the ranges."""
    sets = [x for x in launched if x]
    if not sets:
        return True  # no launches from the thread (kernels launched elsewhere): nothing tells them apart
    top = max(sets.count(x) for x in set(sets))
    return top >= SAME_WORK_SHARE * len(launched)
