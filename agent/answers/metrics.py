"""Is the GPU really busy? What the sampled GPU metrics say beside the timeline (``ask "is the GPU really busy?"``)."""
from __future__ import annotations

import contextlib
import re

from dashcam.errors import DashcamError
from dashcam.findings import advice
from dashcam.findings.thresholds import HEALTHY_MIN_KERNEL_BUSY_PCT, SM_ACTIVE_LOW_PCT
from dashcam.profile.coverage import coverage, lacking
from dashcam.text.format import duration, name, percent, sentences

from .context import Ctx, calls_per_gpu

FLOPS_WORDS = re.compile(r"\bmfu\b|\bt?flop(?:s|/s)?\b|\bmodel\s+flops?\s+utili[sz]ation\b", re.I)


def flops(ctx: Ctx) -> str:
    """MFU and FLOP/s: what a trace cannot hold (operation counts) and what it gives toward them (the step time)."""
    out = ["A trace records no floating-point operation counts, so it cannot give MFU or achieved FLOP/s by itself: "
           "MFU is the model's FLOPs per step divided by the step time times the GPUs' peak FLOP/s (the first from "
           "the model's size and batch, the last from the GPU's specification)."]
    with contextlib.suppress(DashcamError):  # no GPU activity: no step time to offer
        r = ctx.call("iterations", **ctx.win)
        if r.step_count and r.median_ns:
            out.append(f"What this capture gives toward it: {r.step_count} steps, a median {duration(r.median_ns)} "
                       "each.")
    out.append("Nsight Compute counts one kernel's operations and its share of the GPU's peak (`ncu --section "
               "SpeedOfLight`).")
    return " ".join(out)


def metrics(ctx: Ctx) -> str:
    if FLOPS_WORDS.search(ctx.question or ""):
        return sentences(flops(ctx), _metrics(ctx))
    return _metrics(ctx)


def _metrics(ctx: Ctx) -> str:
    results = calls_per_gpu(ctx, "gpu_metrics")
    devs = [d for r in results for d in r.devices]
    if not devs:
        python = ctx.facts.family in ("pytorch", "jax", "tensorflow", "cupy", "numba", "python")
        why = lacking(coverage(ctx.profile), ["gpu_metrics"], python, "how busy the SMs are while kernels run")
        return why or "The capture has GPU metrics, but none of the asked GPUs in this window."
    out = []
    for d in devs:
        head = f"GPU {d.device_id}: kernel-busy {percent(d.kernel_busy_pct)} of the window"
        if d.gr_active_pct is not None:
            head += f" (the engine-busy metric a utilization sampler shows: {percent(d.gr_active_pct)})"
        if d.sm_active_in_kernels_pct is None:
            out.append(head + ", but the capture has no SM-activity metric for it.")
            continue
        verdict = ("so it is really busy" if d.sm_active_in_kernels_pct >= SM_ACTIVE_LOW_PCT
                   else "so the SMs sit mostly empty even while kernels run")
        out.append(f"{head}; while they run its SMs are active {percent(d.sm_active_in_kernels_pct)} of the time, "
                   f"{verdict}.")
        extra = []
        if d.tensor_active_in_kernels_pct is not None:
            extra.append(f"tensor cores active {percent(d.tensor_active_in_kernels_pct)}")
        if d.warp_occupancy_in_kernels_pct is not None:
            extra.append(f"warp occupancy {percent(d.warp_occupancy_in_kernels_pct)}")
        k = d.top_kernels[0] if d.top_kernels else None
        if k is not None and k.sm_active_pct is not None:
            dram = f", DRAM read {percent(k.dram_read_pct)}" if k.dram_read_pct is not None else ""
            extra.append(f"inside {name(k.name)} ({duration(k.kernel_time_ns)} of kernel time) the SMs are "
                         f"active {percent(k.sm_active_pct)}{dram}")
        if extra:
            out.append("While kernels run: " + "; ".join(extra) + ".")
        if d.sample_rate_hz:
            out.append(f"({len(d.metric_set)} metrics sampled every {duration(d.sample_interval_ns)}.)")
    low = [d for d in devs if d.sm_active_in_kernels_pct is not None and d.sm_active_in_kernels_pct < SM_ACTIVE_LOW_PCT
           and d.kernel_busy_pct >= HEALTHY_MIN_KERNEL_BUSY_PCT]
    if low:  # the findings engine's remedy for gpu_underused (rules/metrics.py)
        out.append(advice.sm_underused(ctx.facts, low[0].device_id))
    return sentences(*out)
