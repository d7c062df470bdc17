"""Remedies for the device side: queued copies, dependencies and launch-to-start latency, unknown gaps,
migrations, the tail, transfers and communication."""
from __future__ import annotations

from dashcam.findings import practices, remedies
from dashcam.findings.advice.wording import RESIDENT, by_family
from dashcam.findings.thresholds import (
    LATENCY_CONSTANT_MAX_SPREAD_PCT,
    LATENCY_CONSTANT_MIN_GAPS,
    LATENCY_LARGE_MIN_US,
)
from dashcam.text.format import name


def queued_copies(f, gpu: int) -> str:
    """Kernels queued behind copies on the device (the memcpy cause): the copy remedy that saves the most."""
    return remedies.copies(f, gpu)[0]


def dependency_part(dev) -> str:
    """The part of a GPU's `dependency` time that leads (gpu_gaps' dependency_split; profile/gap_dependency.py):
    launch_latency, wait or turnaround; ``wait`` without a split."""
    split = dev.dependency_split
    if split is None:
        return "wait"
    parts = {"launch_latency": split.launch_latency_ns, "wait": split.wait_ns, "turnaround": split.turnaround_ns}
    return max(parts, key=lambda p: parts[p])  # ties: the first (latency before wait before turnaround)


# The remedy for launch-to-start latency: have the next kernel queued before the one ahead of it ends.
QUEUE_AHEAD = ("Queue work ahead: launch asynchronously and do not synchronize before each launch, so the next "
               "kernel is already queued when the one before ends and its launch-to-start latency overlaps that "
               "kernel.")
# What to look at when the kernels wait for something this process's trace does not hold.
OUTSIDE_PROCESS = ("Check for other processes on the GPU (`nvidia-smi`), MPS or time-slicing, and profile every "
                   "process on it (GPU context switches: `--gpuctxsw=true`).")


def steady_delay(p10: float | None, p50: float | None, p90: float | None, n: int) -> bool:
    """A launch-to-start latency that is large (median ``p50`` >= LATENCY_LARGE_MIN_US) and constant (``p10``-``p90``
    spread within LATENCY_CONSTANT_MAX_SPREAD_PCT of the median, over LATENCY_CONSTANT_MIN_GAPS or more of ``n``):
    something outside the trace holds the kernels."""
    return (p50 is not None and p10 is not None and p90 is not None and p50 >= LATENCY_LARGE_MIN_US * 1000
            and n >= LATENCY_CONSTANT_MIN_GAPS and 100.0 * (p90 - p10) <= LATENCY_CONSTANT_MAX_SPREAD_PCT * p50)


def constant_latency(split) -> bool:
    """steady_delay over a GPU's dependency gaps (gpu_gaps' dependency_split)."""
    return steady_delay(split.latency_p10_ns, split.latency_p50_ns, split.latency_p90_ns, split.latency_gaps)


def wait_call(split) -> tuple[str, int] | None:
    """The stream-wait call behind the most waits, and how many such calls there are, or None."""
    if split is None or not split.wait_calls:
        return None
    top = next(iter(split.wait_calls))
    return top, sum(split.wait_calls.values())


def dependency(f, dev) -> str:
    """The GPU waited on the device: advice for the part of that time that leads (dependency_part)."""
    part, split = dependency_part(dev), dev.dependency_split
    if part == "turnaround":
        return ("Nothing waits here: the gaps are the GPU's own turnaround between back-to-back kernels; only fewer, "
                "longer kernels (merged work, CUDA graphs) remove it.")
    if part == "launch_latency":
        ahead = QUEUE_AHEAD
        if not constant_latency(split):
            return ahead
        return ("Look outside this process: the kernels start the same long delay after each launch with the "
                f"GPU empty, which this capture cannot explain — {OUTSIDE_PROCESS[0].lower()}{OUTSIDE_PROCESS[1:]} "
                + ahead)
    call = wait_call(split)
    other = " and the other GPUs this one waits on" if f.multi_gpu else ""
    if call is not None:
        return (f"Check the {call[1]} stream waits (`{call[0]}`){other}: each makes the next kernel wait on the "
                "device for another stream's work; record the events as early as the data is ready and wait only "
                "where it is needed.")
    if f.multi_gpu:
        return ("Look at what these kernels wait for on the other GPUs this one waits on (peer copies, collectives, "
                "events across devices): overlap that work with this GPU's own, or balance the stages so neither "
                "waits.")
    return ("Shorten the chain of dependencies these kernels wait for on the device (the edges between graph "
            "nodes): the kernels were queued and waited.")


def unknown(f) -> str:
    if f.runs.profile.has_table("runtime"):
        return ("Trace every thread that launches work: these kernels have no launch call in the capture (another "
                "process or thread, or CUDA graphs traced as a whole: `--cuda-graph-trace=node`).")
    return "Capture with CUDA API tracing (`nsys profile -t cuda,nvtx`) so the gaps can be attributed."


def migrations(f) -> str:
    done = practices.prefetch(f)
    if done:  # prefetching is in place, yet pages still migrate on demand
        return (f"{done[0].upper() + done[1:]}, yet pages still migrate on demand: prefetch to the GPU that runs the "
                "kernel, on its stream and before it (`cudaMemPrefetchAsync(ptr, bytes, device, stream)`), pin the "
                "arrays there (`cudaMemAdvise` with `cudaMemAdviseSetPreferredLocation`), or move the hot arrays to "
                "device memory (`cudaMalloc`) with explicit copies.")
    if f.family == "openacc":
        return ("Move the hot arrays out of managed memory: explicit data regions (`!$acc data copyin(...)`) instead "
                "of `-gpu=managed`, or prefetch them before the compute regions.")
    if f.family == "openmp_offload":
        return ("Move the hot arrays out of managed memory: explicit data regions (`#pragma omp target data "
                "map(to: ...)`) instead of `-gpu=managed`, or prefetch them before the target regions.")
    if f.family == "stdpar":
        return ("Stop the page migrations: " + RESIDENT["stdpar"] + ".")
    return ("Stop page faults in the kernels: prefetch managed memory before use (`cudaMemPrefetchAsync`), set its "
            "preferred location (`cudaMemAdvise`), or switch the hot arrays to device memory and explicit copies.")


def tail(f, lead: str | None, call: str | None = None) -> str:
    """The GPU's tail (after its last kernel): advice by what fills most of it (idle.tail_fillers: ``lead`` the
    kind, ``call`` the OS call of an ``output`` or ``os_call`` lead)."""
    if lead == "migrations":
        return migrations(f)
    if lead == "copies":
        return ("Overlap the final copies with the last kernels: copy results back in chunks on another stream as "
                "they are ready.")
    if lead == "other_gpus":
        return ("Balance the work across GPUs (data shards, pipeline stages) so this GPU does not finish early and "
                "wait for the others.")
    if lead == "output":
        return (f"Not a GPU problem: the program writes its output ({name(call)}) after its last kernel, and the GPU "
                "has little to gain. To shorten the run, write on another thread (or asynchronously) while the GPU "
                "still computes, write less, or leave the teardown out of the capture.")
    if lead == "os_call":
        return (f"The program is inside {name(call)} calls after its last kernel: that host work, not the GPU, ends "
                "the captured window; move it off the critical path or out of the capture.")
    if lead == "host":
        return ("Host code ends the captured window after the last kernel: move that work off the critical path "
                "(overlap it with GPU work), or leave it out of the capture.")
    return "Look at what the program does after its last kernel (host code, I/O): it ends the captured window."


def transfers(f, gpu: int | None = None) -> str:
    """Copies keep the GPU busier than its kernels: the copy remedy that saves the most."""
    return remedies.copies(f, gpu)[0]


def communication(f) -> str:
    return by_family(f.family, {
        "pytorch": "Overlap communication with compute: DDP gradient bucketing (`bucket_cap_mb`), FSDP prefetching "
                   "or asynchronous collectives, with NCCL kernels on their own stream.",
        "default": "Run the collectives asynchronously on their own stream and overlap them with independent compute "
                   "(e.g. all-reduce each layer's gradients during the backward pass).",
    })
