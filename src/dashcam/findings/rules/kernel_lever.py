"""kernel_bound: the kernels are the lever.

Every GPU with kernels runs them at least KERNEL_LEVER_MIN_BUSY_PCT of the window (below HEALTHY_MIN_KERNEL_BUSY_PCT:
above it the run is "healthy", GPU-bound, with the same remedy) and no other finding saves
KERNEL_LEVER_MIN_OTHER_PCT of it (findings/impact.py): what idle time is left is spread over causes that each
cost little, so a faster run needs faster kernels. The finding names the top kernel (its share of kernel time, its
launches) and the remedy for its family, or the exact Nsight Compute command that shows what limits it
(advice.kernels). No saving is stated: what the kernels could reach is not in the profile. The engine decides when
it leads; this module only builds it.
"""
from __future__ import annotations

from dashcam.findings import advice
from dashcam.findings.models import Finding
from dashcam.findings.thresholds import (
    HEALTHY_MIN_KERNEL_BUSY_PCT,
    KERNEL_LEVER_MIN_BUSY_PCT,
    KERNEL_LEVER_MIN_OTHER_PCT,
)
from dashcam.text.format import count, duration, name, percent


def applies(f, ranked: list[Finding]) -> bool:
    """Every GPU with kernels between KERNEL_LEVER_MIN_BUSY_PCT and HEALTHY_MIN_KERNEL_BUSY_PCT kernel-busy (at
    least one below the healthy bar) and no ranked finding saving KERNEL_LEVER_MIN_OTHER_PCT of the window."""
    devs = [d for d in f.overview.devices if d.kernel_count]
    if not devs or f.top is None or not f.top.kernels:
        return False
    least = min(d.kernel_busy_pct for d in devs)
    if not KERNEL_LEVER_MIN_BUSY_PCT <= least < HEALTHY_MIN_KERNEL_BUSY_PCT:
        return False
    return all((x.saving_pct or 0.0) < KERNEL_LEVER_MIN_OTHER_PCT for x in ranked if x.severity != "info")


def finding(f, ranked: list[Finding]) -> Finding:
    devs = [d for d in f.overview.devices if d.kernel_count]
    least = min(devs, key=lambda d: (d.kernel_busy_pct, d.device_id))
    top = f.top.kernels[0]
    family = f.top.families[0].family if f.top.families else None
    best = max((x.saving_pct or 0.0 for x in ranked if x.severity != "info"), default=0.0)
    where = (f"GPU {least.device_id} is kernel-busy" if len(devs) == 1
             else f"every GPU is kernel-busy (the least, GPU {least.device_id})")
    sentence = (f"The kernels are the lever: {where} {percent(least.kernel_busy_pct)} of the "
                f"{duration(f.window_ns)} window and no other fix would save a tenth of it; the top kernel, "
                f"{name(top.name)}, takes {percent(top.pct)} of the kernel time "
                f"({count(top.count, 'launch', 'launches')})")
    fam = advice.spread_family(f)  # the time is spread over a family's instantiations: the family leads
    if fam is not None:
        sentence += (f"; its largest family, {name(fam.family)}, takes {percent(fam.pct)} over "
                     f"{count(fam.instantiations, 'instantiation', 'instantiations')}")
    sentence += "."
    title = (f"Kernel-bound: the {name(fam.family)} family leads the kernel time ({percent(fam.pct)})" if fam
             else f"Kernel-bound: {name(top.name)} leads the kernel time ({percent(top.pct)})")
    figures = {"gpu": least.device_id, "kernel_busy_pct": least.kernel_busy_pct, "top_kernel": top.name,
               "top_kernel_pct": top.pct, "top_kernel_ns": top.total_ns, "top_kernel_launches": top.count,
               "best_other_saving_pct": round(best, 3)}
    return Finding(kind="kernel_bound", severity="medium", gpus=[d.device_id for d in devs],
                   title=title,
                   figures=figures, evidence=[f.ev("overview"), f.ev("top_kernels", limit=5)], sentence=sentence,
                   advice=advice.kernels(f, family))
