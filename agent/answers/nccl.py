"""NCCL communication per GPU and how much of it compute hides."""
from __future__ import annotations

from dashcam.findings import advice
from dashcam.text.format import count, duration, name, percent, sentences

from .context import Ctx, calls_per_gpu, devices_of


def nccl(ctx: Ctx) -> str:
    results = calls_per_gpu(ctx, "nccl")
    devs = devices_of(results)
    comm = [d for d in devs if d.comm_kernel_count]
    if not comm:
        return ("There are no NCCL kernels in this profile: no multi-GPU communication was recorded "
                "(or it does not use NCCL).")
    d = max(comm, key=lambda x: (x.exposed_comm_pct, -x.device_id))
    out = [f"GPU {d.device_id} spends {duration(d.comm_ns)} ({percent(d.comm_pct)} of the window) in "
           f"{count(d.comm_kernel_count, 'NCCL kernel')}, and {percent(d.overlap_pct)} of that overlaps compute."]
    if d.verdict == "not_overlapped":
        out.append(f"Communication is not overlapped: {duration(d.exposed_comm_ns)} "
                   f"({percent(d.exposed_comm_pct)} of the "
                   f"window) runs with no compute beside it.")
        out.append(advice.communication(ctx.facts))
    else:
        out.append(f"Exposed communication is small: {duration(d.exposed_comm_ns)} "
                   f"({percent(d.exposed_comm_pct)} of the "
                   f"window) runs with no compute beside it.")
    if d.top_kernels:
        k = d.top_kernels[0]
        out.append(f"The largest is {name(k.name)}: {count(k.count, 'launch', 'launches')}, "
                   f"{duration(k.total_ns)}.")
    return sentences(*out)
