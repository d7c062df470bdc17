"""Info findings: not trouble, the context a reader needs — kernel-busy per GPU (gpu_busy), where the
kernel time goes (kernel_family, from top_kernels' families) and the steps (iterations)."""
from __future__ import annotations

from dashcam.findings.models import Finding
from dashcam.measure.labels import FAMILY_NAMES
from dashcam.text.format import duration, name, percent
from dashcam.text.format import gpus as gpu_words


def gpu_busy(f) -> Finding:
    devs = [d for d in f.overview.devices if d.kernel_count]
    least = min(devs, key=lambda d: (d.kernel_busy_pct, d.device_id))
    most = max(devs, key=lambda d: (d.kernel_busy_pct, -d.device_id))
    window = f.window_ns
    if len(devs) == 1:
        title = f"GPU {least.device_id} kernel-busy {percent(least.kernel_busy_pct)} of the {duration(window)} window"
    elif percent(least.kernel_busy_pct) == percent(most.kernel_busy_pct):  # a range that is no range: one figure
        title = (f"{gpu_words([d.device_id for d in devs])} each kernel-busy {percent(least.kernel_busy_pct)} of the "
                 f"{duration(window)} window")
    else:
        title = (f"Kernel-busy from {percent(least.kernel_busy_pct)} (GPU {least.device_id}) to "
                 f"{percent(most.kernel_busy_pct)} (GPU {most.device_id}) of the {duration(window)} window")
    return Finding(kind="gpu_busy", severity="info", gpus=[d.device_id for d in devs], title=title, figures={
        "window_ns": window, "gpu_count": f.overview.gpu_count,
        "least_busy_gpu": least.device_id, "least_kernel_busy_pct": least.kernel_busy_pct,
        "most_busy_gpu": most.device_id, "most_kernel_busy_pct": most.kernel_busy_pct}, evidence=[f.ev("overview")])


def kernel_family(f) -> Finding | None:
    if f.top is None or not f.top.families:
        return None
    row = f.top.families[0]
    label = row.family if row.family in FAMILY_NAMES else name(row.family)
    led = f", led by {name(row.top_kernel)}" if row.top_kernel != row.family else ""
    if row.instantiations > 1 and row.top_kernel_pct < row.pct:  # never hide what the largest one takes
        led += f", {row.instantiations} instantiations, the largest {percent(row.top_kernel_pct)}"
    return Finding(kind="kernel_family", severity="info", gpus=f.gpus,
                   title=f"Top kernel family: {label} ({percent(row.pct)} of kernel time){led}",
                   figures={"family": row.family, "pct": row.pct, "total_ns": row.total_ns,
                            "kernel_count": row.kernel_count, "top_kernel": row.top_kernel,
                            "top_kernel_pct": row.top_kernel_pct, "instantiations": row.instantiations},
                   evidence=[f.ev("top_kernels", limit=5)])


def iterations(f) -> Finding | None:
    r = f.iterations
    if r is None or not r.step_count:
        return None
    slow = r.slowest
    if r.method == "nvtx":
        how = "NVTX ranges"
    elif r.period_ns is not None:
        how = f"a kernel loop at a steady {duration(r.period_ns)} period"
    else:
        how = "a repeating kernel"
    return Finding(kind="iterations", severity="info", gpus=f.gpus,
                   title=(f"{r.step_count} steps (from {how}), median {duration(r.median_ns)}; slowest step "
                          f"{slow.index}, {duration(slow.duration_ns)}"),
                   figures={"method": r.method, "step_count": r.step_count, "median_ns": r.median_ns,
                            "slowest_step": slow.index, "slowest_ns": slow.duration_ns,
                            "ratio_to_median": slow.ratio_to_median,
                            **({"period_ns": r.period_ns} if r.period_ns is not None else {})},
                   evidence=[f.ev("iterations", limit=3)])
