"""Is the GPU waiting on launches? Launch-call and queue times, launches/s, the verdict, who launched a kernel."""
from __future__ import annotations

import re

from dashcam.findings import advice
from dashcam.text.format import count, duration, name, percent, sentences, trim
from dashcam.tools.launch_latency import LAUNCH_BOUND_MIN_CALL_PCT, LAUNCH_BOUND_MIN_LAUNCHES

from .context import Ctx, calls_per_gpu, devices_of

GRAPHS = re.compile(r"\bgraphs?\b|cudagraph", re.IGNORECASE)
MOSTLY_BUSY_PCT = 70.0  # a GPU whose kernels cover this % of the window is mostly busy (a wording choice)


# "how many times is each kernel launched?", "how often is X launched?": the launches counted (top_kernels),
# not the cost of launching
COUNTS = re.compile(r"\bhow\s+(?:many\s+times|often)\b[^?.]*\blaunch(?:ed|es)?\b|\bnumber\s+of\s+(?:kernel\s+)?"
                    r"launches\b|\blaunch\s+counts?\b|\bhow\s+many\s+launches\b|启动了?多少次|启动次数", re.I)


def launch(ctx: Ctx) -> str:
    if COUNTS.search(ctx.question or "") and not re.search(r"\bper\s+(?:second|step|iteration)\b|/s\b",
                                                          ctx.question or "", re.I):
        from .kernels import top_kernels

        return top_kernels(ctx)
    results = calls_per_gpu(ctx, "launch_latency", kernel=ctx.targets.kernel)
    devs = devices_of(results)
    with_calls = [d for d in devs if d.launch_bound is not None]
    out = []
    if ctx.targets.kernel:  # a named kernel: its own launch-to-start latency first (answers/entity.py)
        from .entity import kernel_latency

        out.append(kernel_latency(ctx, ctx.targets.kernel))
    if not with_calls:
        ctx.note("No kernel has a launch call in the capture: the launch-bound verdict needs CUDA API rows.")
        out.append("No verdict: no kernel in the window has a launch call in the capture, so launch times "
                   "cannot be measured.")
    else:
        bound = [d for d in with_calls if d.launch_bound]
        d = (min(bound, key=lambda x: (x.kernel_busy_pct, x.device_id)) if bound
             else min(with_calls, key=lambda x: (x.kernel_busy_pct, x.device_id)))
        gid = d.device_id
        if d.launch_bound:
            out.append(f"GPU {gid} is launch-bound: it is kernel-busy only {percent(d.kernel_busy_pct)} of the window, "
                       f"start a median {duration(d.queue_p50_ns)} after their launch call returns, and the median "
                       f"kernel ({duration(d.median_kernel_ns)}) is shorter than the median launch call "
                       f"({duration(d.api_p50_ns)}).")
        else:
            reasons = []
            if d.launches < LAUNCH_BOUND_MIN_LAUNCHES:
                reasons.append(f"only {count(d.launches, 'kernel was', 'kernels were')} launched, too few to "
                               "call it")
            elif d.launch_call_ns and 2 * d.first_launch_ns >= d.launch_call_ns:
                reasons.append(f"most launch-call time ({duration(d.first_launch_ns)} of "
                               f"{duration(d.launch_call_ns)}) is each kernel's first launch: module loading at "
                               "start-up, not launch overhead")
            elif d.launch_call_pct < LAUNCH_BOUND_MIN_CALL_PCT:
                reasons.append(f"launch calls take only {percent(d.launch_call_pct)} of the window")
            if d.kernel_busy_pct >= MOSTLY_BUSY_PCT:
                reasons.append(f"it is kernel-busy {percent(d.kernel_busy_pct)} of the window")
            if d.queue_p50_ns is not None and d.queue_p50_ns >= 10_000:
                reasons.append(f"kernels start a median {duration(d.queue_p50_ns)} after their launch call returns "
                               "(the launches are ahead of the GPU, not behind it)")
            if d.median_kernel_ns is not None and d.api_p50_ns is not None \
                    and d.median_kernel_ns >= d.api_p50_ns:
                reasons.append(f"the median kernel ({duration(d.median_kernel_ns)}) outlasts the median launch call "
                               f"({duration(d.api_p50_ns)})")
            if len(with_calls) > 1 and not ctx.targets.gpus:
                why = f": on GPU {gid}, " + "; ".join(reasons) if reasons else ""
                out.append(f"No GPU is launch-bound{why}.")
            else:
                out.append(f"GPU {gid} is not launch-bound" + (": " + "; ".join(reasons) if reasons else "") + ".")
        gaps = ctx.call("gpu_gaps", gpu=gid, **ctx.win).devices[0]
        if gaps.kernel_idle_ns > 0:
            lo, cw = gaps.causes["launch_overhead"], gaps.causes["cpu_work"]
            out.append(f"Of GPU {gid}'s {duration(gaps.kernel_idle_ns)} kernel-idle time, `launch_overhead` is "
                       f"{duration(lo)} "
                       f"({percent(gaps.cause_pct['launch_overhead'])}) and `cpu_work` {duration(cw)} "
                       f"({percent(gaps.cause_pct['cpu_work'])}); it issues {trim(d.launches_per_s, 1)} launches/s.")
        if d.launch_bound:
            out.append(advice.launches(ctx.facts))
    if GRAPHS.search(ctx.question):  # "would CUDA graphs help?": cuda_graphs' verdict on the eager launches
        from .graphs import graphs_help

        text = graphs_help(ctx)
        out = [x for x in out if x not in text]  # its remedy, when it gives one, is the launch remedy
        out.append(text)
    for r in results:
        if r.kernel_filter is not None:
            if not r.kernel_matches:
                out.append(f"No kernel name contains {name(r.kernel_filter)} in the window.")
            elif r.launchers:
                x = r.launchers[0]
                rng = f" inside {name(x.nvtx_range)}" if x.nvtx_range else ""
                thread = f" ({name(x.thread_name)})" if x.thread_name else ""
                out.append(f"{name(r.kernel_filter)} matched {count(r.kernel_matches, 'kernel')}; most "
                           f"({x.launches}) were launched by thread {x.tid}{thread} of process {x.pid}{rng}.")
    return sentences(*out)
