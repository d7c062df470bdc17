"""NCCL communication per GPU and how much of it compute hides."""
from __future__ import annotations

from dashcam.findings import advice
from dashcam.text.format import count, duration, name, percent, sentences

from .context import Ctx, calls_per_gpu, devices_of


def nccl(ctx: Ctx) -> str:
    results = calls_per_gpu(ctx, "nccl")
    devs = devices_of(results)
    comm = [d for d in devs if d.comm_kernel_count]
    if not comm:  # looked for elsewhere before it is denied: NCCL's NVTX ranges and API, then MPI
        from .features import feature_text

        nccl = ctx.call("feature_time", feature="nccl", **ctx.win)
        mpi = ctx.call("feature_time", feature="mpi", **ctx.win)
        if nccl.found:
            return "There are no NCCL kernels on the GPUs, but " + feature_text(ctx, "nccl")
        if mpi.found:
            return ("There are no NCCL kernels in this profile; the communication it records is MPI. "
                    + feature_text(ctx, "mpi"))
        return ("There are no NCCL kernels in this profile and no MPI: no communication between GPUs or processes "
                "was recorded. " + feature_text(ctx, "nccl"))
    d = max(comm, key=lambda x: (x.exposed_comm_pct, -x.device_id))
    out = [f"GPU {d.device_id} spends {duration(d.comm_ns)} ({percent(d.comm_pct)} of the window) in "
           f"{count(d.comm_kernel_count, 'NCCL kernel')}, and {percent(d.overlap_pct)} of that overlaps compute."]
    exposed = f"{duration(d.exposed_comm_ns)} ({percent(d.exposed_comm_pct)} of the window)"
    if d.verdict == "not_overlapped":
        out.append(f"Communication is not overlapped: {exposed} runs with no compute beside it.")
        out.append(advice.communication(ctx.facts))
    elif d.verdict == "minor":
        out.append(f"Most of it runs with no compute beside it, but that costs little: {exposed}.")
    else:
        out.append(f"Compute hides most of it: {exposed} runs with no compute beside it.")
    if d.top_kernels:
        k = d.top_kernels[0]
        out.append(f"Its largest is {name(k.name)}: {count(k.count, 'launch', 'launches')}, "
                   f"{duration(k.total_ns)}.")
    others = [x for x in comm if x is not d]
    if others:
        out.append(("The other GPU: " if len(others) == 1 else "The other GPUs: ") + "; ".join(
            f"GPU {x.device_id}, {duration(x.comm_ns)} of NCCL ({percent(x.overlap_pct)} overlapped, "
            f"{percent(x.exposed_comm_pct)} of the window exposed)" for x in others[:6])
            + (f"; and {len(others) - 6} more" if len(others) > 6 else "") + ".")
    out.append(_imbalance(comm))
    return sentences(*out)


# NCCL time on one GPU this many times another's: the first to arrive at a collective waits in it for the last
NCCL_IMBALANCE = 1.5


def _imbalance(comm: list) -> str | None:
    """GPUs that ran the same number of NCCL kernels (the same collectives) whose NCCL time differs by
    NCCL_IMBALANCE or more, the longer one exposed (no compute beside it): a collective's kernel runs until every
    GPU has arrived, so the GPU with the most NCCL time waits in it for the one with the least (which arrives
    late)."""
    most = max(comm, key=lambda x: (x.comm_ns, -x.device_id))
    least = min(comm, key=lambda x: (x.comm_ns, x.device_id))
    if (most is least or not least.comm_ns or most.comm_kernel_count != least.comm_kernel_count
            or most.exposed_comm_ns < NCCL_IMBALANCE * least.comm_ns):
        return None
    return (f"GPU {most.device_id} spends {duration(most.comm_ns)} in NCCL against GPU {least.device_id}'s "
            f"{duration(least.comm_ns)}: a collective's kernels run until every GPU has arrived, so GPU "
            f"{most.device_id} waits in them for GPU {least.device_id}, which arrives late (see what GPU "
            f"{least.device_id} does before each collective: `dashcam ask \"why is GPU {least.device_id} idle?\"`).")
