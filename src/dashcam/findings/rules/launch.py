"""launch_bound: the CPU cannot issue kernels as fast as the GPU runs them (launch_latency's verdict:
enough launches, launch calls a real share of the window, kernels starting as soon as launched and
shorter than the launch calls, a GPU mostly idle). It explains the GPU's idle time: that GPU's idle
severity, at least medium; the saving is the GPU's idle time."""
from __future__ import annotations

from dashcam.findings import advice
from dashcam.findings.rules import Item, at_least, loss_severity
from dashcam.text.format import duration, percent


def find(f) -> list[Item]:
    out = []
    for d, x in f.rows("launch_latency").items():
        if not x.launch_bound:
            continue
        g = f.device("gpu_gaps", d)
        sev = at_least(loss_severity(g.idle_pct) if g else "medium", "medium")
        figures = {"gpu": d, "kernel_busy_pct": x.kernel_busy_pct, "median_kernel_ns": x.median_kernel_ns,
                   "api_p50_ns": x.api_p50_ns, "queue_p50_ns": x.queue_p50_ns, "launches_per_s": x.launches_per_s,
                   "launches": x.launches}
        sentence = (f"Launch-bound: GPU {d} runs kernels only {percent(x.kernel_busy_pct)} of the "
                    f"{duration(f.window_ns)} window; the median kernel ({duration(x.median_kernel_ns)}) is shorter "
                    f"than the median launch call ({duration(x.api_p50_ns)}), so the CPU cannot issue work fast "
                    "enough.")
        out.append(Item("launch_bound", d, sev, g.idle_ns if g else None, figures,
                        [f.ev("launch_latency"), f.ev("overview")],
                        f"GPU {d} launch-bound: median kernel {duration(x.median_kernel_ns)} < median launch call "
                        f"{duration(x.api_p50_ns)}", sentence, advice.launches(f),
                        extra={"impact": 100.0 - x.kernel_busy_pct}))
    return out
