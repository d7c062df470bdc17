"""launch_bound: the CPU cannot issue kernels as fast as the GPU runs them (launch_latency's verdict:
enough launches, launch calls a real share of the window, kernels starting as soon as launched and
shorter than the launch calls, a GPU mostly idle). It explains the GPU's idle time: that GPU's idle
severity, at least medium. The saving is what replaying the launches without the host (a CUDA graph) would win
(impact.ASSUMPTIONS): the GPU's gaps spent inside launch calls and in host work between them (gpu_gaps'
``launch_overhead`` and ``cpu_work``), less the start-up paid once (first launches, JIT: impact.one_off_ns) — not
the whole idle time, whose sync waits, copies and tail a graph does not remove."""
from __future__ import annotations

from dashcam.findings import advice
from dashcam.findings.impact import one_off_ns
from dashcam.findings.rules import Item, at_least, loss_severity
from dashcam.text.format import duration, percent

# The gap causes a graph replay removes: the launch calls and the host's work between them.
REPLAYED = ("launch_overhead", "cpu_work")


def find(f) -> list[Item]:
    out = []
    for d, x in f.rows("launch_latency").items():
        if not x.launch_bound:
            continue
        g = f.device("gpu_gaps", d)
        sev = at_least(loss_severity(g.kernel_idle_pct) if g else "medium", "medium")
        figures = {"gpu": d, "kernel_busy_pct": x.kernel_busy_pct, "median_kernel_ns": x.median_kernel_ns,
                   "api_p50_ns": x.api_p50_ns, "queue_p50_ns": x.queue_p50_ns, "launches_per_s": x.launches_per_s,
                   "launches": x.launches}
        sentence = (f"Launch-bound: GPU {d} is kernel-busy only {percent(x.kernel_busy_pct)} of the "
                    f"{duration(f.window_ns)} window; the median kernel ({duration(x.median_kernel_ns)}) is shorter "
                    f"than the median launch call ({duration(x.api_p50_ns)}), so the CPU cannot issue work fast "
                    "enough.")
        saving = sum(g.causes.get(c, 0) - one_off_ns(f, g, c) for c in REPLAYED) if g else None
        out.append(Item("launch_bound", d, sev, saving, figures,
                        [f.ev("launch_latency"), f.ev("overview")],
                        f"GPU {d} launch-bound: median kernel {duration(x.median_kernel_ns)} < median launch call "
                        f"{duration(x.api_p50_ns)}", sentence, advice.launches(f),
                        extra={"impact": 100.0 - x.kernel_busy_pct}))
    return out
