"""Device memory, allocator churn and unified-memory faults (``ask "what is the peak memory?"``, "do UM page
faults stall my kernels?", "does the loop allocate every step?")."""
from __future__ import annotations

import re

from dashcam.findings import advice
from dashcam.findings.thresholds import LOW_LOSS_PCT
from dashcam.profile.coverage import coverage, lacking
from dashcam.text.format import at_ms, count, duration, name, percent, sentences, size

from .context import Ctx, calls_per_gpu

UM_WORDS = re.compile(r"unified|managed|page[\s-]*fault|\bfaults?\b|migrat|\bum\b|\buvm\b|prefetch", re.I)
CHURN_WORDS = re.compile(r"alloc|malloc|\bfree|churn|cudafree|per step|every step|each step|fragment", re.I)
OVER_TIME_WORDS = re.compile(r"over time|timeline|\bgrow|\bleak|increas|decreas|\brise|\brising|\bchange|"
                             r"\btrend|go(?:es)? up|climb", re.I)


def memory(ctx: Ctx) -> str:
    q = ctx.question
    results = calls_per_gpu(ctx, "memory")
    um_asked = bool(UM_WORDS.search(q))
    churn_asked = bool(CHURN_WORDS.search(q))
    out = []
    for r in results:
        if not um_asked:
            out += _usage(ctx, r, churn_asked, bool(OVER_TIME_WORDS.search(q)))
        if um_asked or r.unified.migrations or r.unified.gpu_faults:
            out += _unified(ctx, r, um_asked)
    return sentences(*out)


def _usage(ctx: Ctx, r, churn_asked: bool, over_time: bool = False) -> list[str]:
    out = []
    if not r.recorded:
        why = lacking(coverage(ctx.profile), ["gpu_memory_usage"], False, "device memory over time")
        out.append(why or "The capture recorded no allocations.")
    for d in r.devices:
        of = f" ({percent(d.peak_pct)} of its {size(d.total_memory_bytes)})" if d.peak_pct is not None else ""
        out.append(f"GPU {d.device_id} peaks at {size(d.peak_bytes)} of device memory in use{of}, first at "
                   f"{at_ms(d.peak_at_ms)}; {size(d.in_use_start_bytes)} at the window start and "
                   f"{size(d.in_use_end_bytes)} at its end ({count(d.allocations, 'allocation')} and "
                   f"{count(d.frees, 'free')} in the window).")
        if over_time:
            out.append(_over_time(d))
    if r.alloc_api:
        top = r.alloc_api[0]
        out.append(f"Allocation calls: {name(top.name)} {count(top.calls, 'call')}, {duration(top.total_ns)}"
                   + (f"; {name(r.alloc_api[1].name)} {count(r.alloc_api[1].calls, 'call')}, "
                      f"{duration(r.alloc_api[1].total_ns)}" if len(r.alloc_api) > 1 else "") + ".")
    steps = [s for s in r.steps if s.allocations or s.api_calls]
    if steps:
        s = max(steps, key=lambda x: (x.api_ns, -x.index))
        every = len(steps) == len(r.steps)
        what = (f"step {s.index} has {count(s.allocations, 'allocation')} ({size(s.allocated_bytes)}) and "
                f"{count(s.frees, 'free')}, with {duration(s.api_ns)} in allocation calls" if s.allocations or s.frees
                else f"step {s.index} makes {count(s.api_calls, 'allocation call')} ({duration(s.api_ns)}; the "
                "capture records no allocation events)")
        out.append(f"{'Every' if every else 'Some'} step allocates: {what}.")
        # a remedy only for what costs the step something (the findings' floor on a loss)
        minor = 100.0 * s.api_ns < LOW_LOSS_PCT * max(s.end_ns - s.start_ns, 1)
        if minor:
            out.append("That is too little of the step's time to matter.")
        elif churn_asked or every:
            out.append(advice.allocations(ctx.facts))
    elif churn_asked and r.steps:
        out.append("No step allocates or frees device memory.")
    return out


def _over_time(d) -> str:
    """How a GPU's memory in use moved over the window: its range, and where it ended against where it began."""
    if d.lowest_bytes == d.peak_bytes:
        return f"Over the window it stays at {size(d.peak_bytes)}."
    net = d.in_use_end_bytes - d.in_use_start_bytes
    end = ("back where it began" if net == 0 else
           f"{size(abs(net))} {'above' if net > 0 else 'below'} where it began")
    return (f"Over the window it moves between {size(d.lowest_bytes)} and {size(d.peak_bytes)} "
            f"({count(d.allocations, 'allocation')} and {count(d.frees, 'free')}) and ends {end}.")


def _unified(ctx: Ctx, r, asked: bool) -> list[str]:
    u = r.unified
    out = []
    if not u.migrations and not u.gpu_faults and not u.cpu_faults:
        why = lacking(coverage(ctx.profile), ["um_page_faults"], False, "unified-memory page faults")
        return [why or "No unified-memory page faults or migrations in the window."] if asked else []
    if u.gpu_faults or u.cpu_faults:
        out.append(f"Unified memory: {count(u.gpu_faults, 'GPU page fault')} ({count(u.gpu_fault_records, 'record')}) "
                   f"and {count(u.cpu_faults, 'CPU page fault')}.")
    for m in u.migrations:
        causes = ", ".join(f"{size(b)} for {c.replace('_', ' ')}" for c, b in m.cause_bytes.items())
        out.append(f"GPU {m.device_id}: {count(m.count, 'migration')} moved {size(m.bytes)} in "
                   f"{duration(m.union_ns)} ({causes}).")
    if u.kernels_waiting:
        k = u.kernels_waiting[0]
        during = (f"{duration(k.migration_overlap_ns)} of its {duration(k.kernel_ns)} overlap migrations "
                  f"({percent(k.overlap_pct)}), " if k.migration_overlap_ns else "")
        out.append(f"{name(k.name)} waited on them: {during}{duration(k.migration_wait_ns)} on migrations before its "
                   f"launches and faults in {k.faulting_launches} of its {count(k.launches, 'launch', 'launches')}.")
        out.append(advice.migrations(ctx.facts))
    return out
