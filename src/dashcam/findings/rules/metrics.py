"""gpu_underused: the timeline says busy, the GPU metrics say the SMs are mostly empty ("util 100 %, SMs 15 %
active"). Per GPU with GPU metrics (gpu_metrics) whose kernels cover at least HEALTHY_MIN_KERNEL_BUSY_PCT of
the window:

- cause ``sm``: the SMs are active less than SM_ACTIVE_LOW_PCT of the time kernels run (the primary sm_active
  metric inside kernels);
- cause ``tensor``: otherwise, when matrix multiplies (the GEMM family, top_kernels) hold at least
  GEMM_HEAVY_PCT of the kernel time and the tensor cores are active less than TENSOR_ACTIVE_LOW_PCT of it.

Medium severity: the GPU does work all the time, but a fraction of what it could. No saving (what the kernels
could reach is not in the profile). The remedy: for ``tensor``, run the GEMMs on tensor cores
(advice.kernels for GEMM); for ``sm``, advice.sm_underused (small grids: more blocks; else the top kernel's
occupancy and memory traffic in Nsight Compute).
"""
from __future__ import annotations

from dashcam.findings import advice
from dashcam.findings.rules import Item
from dashcam.findings.thresholds import (
    GEMM_HEAVY_PCT,
    HEALTHY_MIN_KERNEL_BUSY_PCT,
    SM_ACTIVE_LOW_PCT,
    TENSOR_ACTIVE_LOW_PCT,
)
from dashcam.text.format import name, percent


def _gemm_pct(f) -> float:
    if f.top is None:
        return 0.0
    return sum(x.pct for x in f.top.families if x.family == "GEMM")


def find(f) -> list[Item]:
    r = f.metrics
    if r is None:
        return []
    out = []
    for d in r.devices:
        o = f.device("overview", d.device_id)
        if o is None or not o.kernel_count or o.kernel_busy_pct < HEALTHY_MIN_KERNEL_BUSY_PCT:
            continue
        top = d.top_kernels[0] if d.top_kernels else None
        figures = {"gpu": d.device_id, "kernel_busy_pct": o.kernel_busy_pct,
                   "sm_active_in_kernels_pct": d.sm_active_in_kernels_pct,
                   "tensor_active_in_kernels_pct": d.tensor_active_in_kernels_pct,
                   "top_kernel": top.name if top else None}
        sm = d.sm_active_in_kernels_pct
        gemm = _gemm_pct(f)
        if sm is not None and sm < SM_ACTIVE_LOW_PCT:
            sentence = (f"Busy but not busy: GPU {d.device_id}'s kernels cover {percent(o.kernel_busy_pct)} of the "
                        f"window, yet its SMs are active only {percent(sm)} of the time they run"
                        + (f" ({name(top.name)} leads the kernel time)" if top else "") + ".")
            out.append(Item("gpu_underused", d.device_id, "medium", None, figures,
                            [f.ev("gpu_metrics", limit=3), f.ev("overview")],
                            f"GPU {d.device_id}: kernels {percent(o.kernel_busy_pct)} of the window, SMs active "
                            f"{percent(sm)}", sentence, advice.sm_underused(f, d.device_id), cause="sm"))
        elif (d.tensor_active_in_kernels_pct is not None and gemm >= GEMM_HEAVY_PCT
              and d.tensor_active_in_kernels_pct < TENSOR_ACTIVE_LOW_PCT):
            figures["gemm_pct"] = round(gemm, 3)
            sentence = (f"Tensor cores idle: matrix multiplies hold {percent(gemm)} of GPU {d.device_id}'s kernel "
                        f"time and its kernels cover {percent(o.kernel_busy_pct)} of the window, yet the tensor "
                        f"cores are active only {percent(d.tensor_active_in_kernels_pct)} of the time they run.")
            out.append(Item("gpu_underused", d.device_id, "medium", None, figures,
                            [f.ev("gpu_metrics", limit=3), f.ev("top_kernels", limit=5), f.ev("overview")],
                            f"GPU {d.device_id}: tensor cores active {percent(d.tensor_active_in_kernels_pct)} in "
                            "GEMM-heavy work", sentence, advice.kernels(f, "GEMM"), cause="tensor"))
    return out
