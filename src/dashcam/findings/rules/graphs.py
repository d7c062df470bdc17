"""whole_graph_trace: the capture traced CUDA graphs as whole graphs (``--cuda-graph-trace=graph``, nsys' default),
so a GPU that ran graphs looks idle: per GPU whose whole-graph executions no recorded kernel covers
(cuda_graphs ``whole_graph_outside_kernels_ns``) fill at least WHOLE_GRAPH_MIN_IDLE_PCT of its idle time, a
capture finding: that time is graph execution, not idle time, and its kernels are not in the profile. Severity
by that time's share of the window (at least low: it changes how every idle figure reads); no saving (no
speed-up is promised: what runs in the graphs is unknown). Its remedy is to capture per node.
"""
from __future__ import annotations

from dashcam.findings.rules import Item, at_least, loss_severity, share
from dashcam.findings.thresholds import WHOLE_GRAPH_MIN_IDLE_PCT
from dashcam.text.format import count, duration, percent
from dashcam.tools.cuda_graphs import NODE_TRACE


def find(f) -> list[Item]:
    r = f.graphs
    if r is None or r.trace_mode not in ("graph", "both"):
        return []
    out = []
    for d in r.devices:
        g = f.device("gpu_gaps", d.device_id)
        hidden = d.whole_graph_outside_kernels_ns
        if not hidden or g is None or 100.0 * hidden / max(g.kernel_idle_ns, 1) < WHOLE_GRAPH_MIN_IDLE_PCT:
            continue
        figures = {"gpu": d.device_id, "whole_graph_ns": d.whole_graph_ns, "hidden_ns": hidden,
                   "kernel_idle_ns": g.kernel_idle_ns, "graph_launches": d.graph_launches,
                   "whole_graph_pct": d.whole_graph_pct}
        sentence = (f"CUDA graphs traced as whole graphs: GPU {d.device_id} ran "
                    f"{count(d.graph_launches, 'graph launch', 'graph launches')} for {duration(hidden)} of its "
                    f"{duration(g.kernel_idle_ns)} \"kernel-idle\" time ({percent(share(hidden, f.window_ns))} of the "
                    "window), "
                    "but the capture recorded none of their kernels, so kernel busy, the gaps and the top kernels "
                    "leave that work out.")
        out.append(Item("whole_graph_trace", d.device_id,
                        at_least(loss_severity(share(hidden, f.window_ns)), "low"), None, figures,
                        [f.ev("cuda_graphs"), f.ev("gpu_gaps")],
                        f"GPU {d.device_id}: {duration(hidden)} of CUDA graph execution not traced per kernel",
                        sentence, f"Capture the graphs kernel by kernel: `{NODE_TRACE}`."))
    return out
