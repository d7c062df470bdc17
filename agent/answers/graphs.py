"""Are CUDA graphs used, how much runs inside them, what the capture hid, and would they help
(``ask "are CUDA graphs used?"``; "would CUDA graphs help?" through the launch answer, ``graphs_help``)."""
from __future__ import annotations

from dashcam.findings import advice
from dashcam.text.format import count, duration, percent, sentences

from .context import Ctx, calls_per_gpu


def _used(d) -> str:
    """One GPU's graph use in a sentence."""
    parts = []
    if d.graph_kernels:
        kpl = f", {d.kernels_per_graph_launch:g} kernels each" if d.kernels_per_graph_launch else ""
        graphs = f" of {count(d.graphs, 'graph')}" if d.graphs else ""
        launches = count(d.graph_launches, "graph launch", "graph launches")
        parts.append(f"{count(d.graph_kernels, 'kernel')} from {launches}{graphs}{kpl} hold "
                     f"{percent(d.graph_kernel_pct)} of its kernel time")
    if d.whole_graph_executions:
        parts.append(f"{count(d.whole_graph_executions, 'whole-graph execution')} cover "
                     f"{duration(d.whole_graph_ns)} ({percent(d.whole_graph_pct)} of the window)")
    return f"on GPU {d.device_id}, " + " and ".join(parts)


def graphs(ctx: Ctx) -> str:
    out = []
    for r in calls_per_gpu(ctx, "cuda_graphs"):
        used = [d for d in r.devices if d.graph_kernels or d.whole_graph_executions]
        if not r.used:
            one = r.devices[0] if len(r.devices) == 1 else None
            every = (f"; all {count(one.eager.launch_calls, 'launch call')} are eager"
                     if one is not None and one.eager.launch_calls else "; every launch is eager")
            out.append("No: no kernel was launched from a CUDA graph and there is no graph launch in the window"
                       + every + ".")
        elif not used:
            out.append(f"The program calls `cudaGraphLaunch` {count(r.graph_launch_calls, 'time')}, but no graph "
                       "kernel or whole-graph execution is in the window.")
        else:
            out.append("Yes: " + "; ".join(_used(d) for d in used) + ".")
            steps = r.steps
            if steps and any(s.graph_kernel_time_ns for s in steps):
                lo = min(steps, key=lambda s: (s.graph_kernel_pct, s.index))
                hi = max(steps, key=lambda s: (s.graph_kernel_pct, -s.index))
                if lo.graph_kernel_pct == hi.graph_kernel_pct:
                    out.append(f"Each of the {count(len(steps), 'step')} shown runs {percent(lo.graph_kernel_pct)} "
                               "of its kernel time in graphs.")
                else:
                    out.append(f"Per step, {percent(lo.graph_kernel_pct)} (step {lo.index}) to "
                               f"{percent(hi.graph_kernel_pct)} (step {hi.index}) of the kernel time runs in graphs.")
        if r.hidden:
            out.append(r.hidden)
        out.append(graphs_help(ctx, r))
    return sentences(*out)


def graphs_help(ctx: Ctx, r=None) -> str:
    """Would CUDA graphs help: launch_latency's verdict on the eager launches (cuda_graphs candidates), with the
    remedy the findings engine gives (advice.launches: it asks the same graphs rule)."""
    r = r or ctx.call("cuda_graphs", **ctx.win)
    with_calls = [d for d in r.devices if d.eager.launch_calls]
    if not with_calls:
        return ("Whether graphs would help cannot be told: no eager kernel has a launch call in the capture "
                "(CUDA API trace).")
    cand = [d for d in with_calls if d.candidate]
    if cand:
        d = cand[0]
        e = d.eager
        return (f"Graphs would help GPU {d.device_id}: its eager launches are launch-bound "
                f"({count(e.launch_calls, 'launch call')} take {percent(e.launch_call_pct)} of the window; the median "
                f"eager kernel, {duration(e.median_kernel_ns)}, is shorter than the median launch call, "
                f"{duration(e.api_p50_ns)}). {advice.launches(ctx.facts)}")
    d = with_calls[0]
    reason = d.eager.verdict_reason.split(": ", 1)[-1]
    return (f"Graphs would not cut much: the eager launches are not launch-bound on "
            f"{'any GPU' if len(with_calls) > 1 else f'GPU {d.device_id}'} ({reason}).")
