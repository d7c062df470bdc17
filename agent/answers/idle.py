"""Idle time of a GPU: how much, waiting for whom, the largest gap, what to try (``ask "why is GPU 1 idle?"``).

The cause rules, their wording and the remedies are the findings engine's (findings/rules/idle.py,
findings/causes.py, findings/advice/); this module writes them as an answer about one GPU.
"""
from __future__ import annotations

import re

from dashcam.findings import causes
from dashcam.findings.rules.capture import run_share, small_share
from dashcam.findings.rules.idle import (
    cause_advice,
    cause_detail,
    cause_outside_tail,
    led_by,
    migration_detail,
    tail_advice,
    tail_explains,
    tail_fill,
    words,
)
from dashcam.findings.rules.migrations import kernel_paid, paid_words
from dashcam.findings.thresholds import GPU_MINOR_RUN_PCT, LOW_LOSS_PCT
from dashcam.text.format import at_ms, duration, name, percent, sentences

from .context import Ctx, calls_per_gpu, devices_of, window_words


def advice_for(ctx: Ctx, dev) -> str:
    """What to try for a device's idle time (the engine's remedy for its main cause, or for its tail); idle time
    under the findings' loss floor (LOW_LOSS_PCT of the window) gets none: there is nothing worth fixing."""
    if dev.kernel_idle_pct < LOW_LOSS_PCT:
        return (f"Its {duration(dev.kernel_idle_ns)} of kernel-idle time is too little of the window to matter: GPU "
                f"{dev.device_id} is not idle in any way worth fixing (closing every gap could save at most that).")
    minor = _gpu_minor(ctx, dev)
    if minor:
        return minor
    if tail_explains(dev):
        return tail_advice(ctx.facts, dev)
    return cause_advice(ctx.facts, dev, dev.dominant_cause or "unknown")


def _gpu_minor(ctx: Ctx, dev) -> str | None:
    """A whole-process capture whose GPU window is a small part of the run (rules/capture.py run_share under
    GPU_MINOR_RUN_PCT, the summary's gpu_minor verdict): no remedy for the window's gaps, which could save at most
    their own time, a sliver of the run."""
    pct = run_share(ctx.facts)
    if pct is None or pct >= GPU_MINOR_RUN_PCT:
        return None
    span = ctx.facts.workload.span
    return (f"But the GPU's whole window is {small_share(pct)} of the {duration(span.host_ns)} the capture holds of "
            f"the process's run: closing every gap would save at most {duration(dev.kernel_idle_ns)}, so the GPU's "
            "idle time is not worth fixing; the run's time is on the host (`dashcam summary` says where it goes).")


def _tail_sentences(ctx: Ctx, dev, head: str) -> list[str]:
    """Idle time that is mostly the tail after the GPU's last kernel: what fills it, and the rest."""
    t = dev.tail
    out = [f"{head}.",
           f"{duration(t.duration_ns)} of it is the tail after its last kernel (from {at_ms(t.start_ms)}), filled by "
           f"{tail_fill(dev, ctx.facts.multi_gpu)}."]
    cause = cause_outside_tail(dev)
    if cause is None or cause == "unknown":
        return out
    out.append(f"The largest cause of the rest is `{cause}`: {duration(dev.causes[cause])} "
               f"({percent(dev.cause_pct[cause])} of kernel-idle: {words(dev, cause, ctx.facts.family)})"
               f"{led_by(dev.model_copy(update={'dominant_cause': cause}))}.")
    return out


def idle_sentences(ctx: Ctx, dev, result, whole: bool, advice: bool = True, head: str | None = None) -> list[str]:
    """Idle time of one device (a gpu_gaps row): the amount, the main cause, the largest gap, what to try.

    ``head`` replaces the opening "GPU 1 was idle 69.59 ms (59.2 % of the 117.59 ms window)"."""
    gid = dev.device_id
    head = head or (f"GPU {gid} was kernel-idle {duration(dev.kernel_idle_ns)} "
                    f"({percent(dev.kernel_idle_pct)} of {window_words(result, whole)})")
    if dev.kernel_idle_ns <= 0 or not dev.dominant_cause:
        return [f"GPU {gid} was never kernel-idle: its kernels cover all of {window_words(result, whole)}."]
    family = ctx.facts.family
    if tail_explains(dev):
        out = _tail_sentences(ctx, dev, head)
        return out + ([advice_for(ctx, dev)] if advice else [])
    cause = dev.dominant_cause
    share = dev.cause_pct[cause]
    detail = cause_detail(dev, cause, family)
    rest = sorted((c for c in dev.causes if c != cause and dev.causes[c] > 0), key=lambda c: -dev.causes[c])
    moved = ""
    if share < 50 and rest and rest[0] == "memcpy" and detail.endswith(migration_detail(dev)) and dev.migration_ns:
        # the migrations are what the second cause (memcpy) is made of: name them after it
        detail, moved = detail[: -len(migration_detail(dev))], migration_detail(dev)
    what = (f"`{cause}` {duration(dev.causes[cause])} ({percent(share)} of kernel-idle: {words(dev, cause, family)})"
            f"{led_by(dev)}{detail}")
    if share >= 50:
        first = f"{head}, mostly {causes.side(cause)}: {what}."
    else:
        then = (f", then `{rest[0]}` {duration(dev.causes[rest[0]])} ({percent(dev.cause_pct[rest[0]])}){moved}"
                if rest else "")
        first = f"{head}; the largest cause is {causes.side(cause)}: {what}{then}."
    out = [first]
    if dev.largest_gaps:
        g = dev.largest_gaps[0]
        where = f" inside {name(g.nvtx_range)}" if g.nvtx_range else ""
        ended = f"ended when {name(g.kernel_after)} started" if g.kernel_after else "ran to the end of the window"
        calls = g.cuda_api_calls or {}
        if g.kernel_after is None and g.launch_call is None and g.end_ns == result.window.end_ns:
            last = f" ({name(g.kernel_before)})" if g.kernel_before else ""
            detail = f"; it is the GPU's tail, after its last kernel{last}"
        elif calls:
            api_name = max(calls, key=lambda a: (calls[a], a))
            detail = f"; {duration(calls[api_name])} of it was in {name(api_name)}"
        else:
            detail = f"; mostly `{g.dominant_cause}`"
        which = "The largest gap" if len(dev.largest_gaps) > 1 or dev.gap_count > 1 else "The only gap"
        out.append(f"{which}, {duration(g.duration_ns)} at {at_ms(g.start_ms)}{where}, {ended}{detail}.")
    if advice:
        out.append(advice_for(ctx, dev))
    return out


def idle_cause(ctx: Ctx, dev, head: str, of: str) -> list[str]:
    """One sentence on a device's idle time and its main cause ("GPU 1 was idle 6 ms, mostly `cpu_work`
    (90.0 % of its idle: ...)"), or the tail sentences when the tail explains the idle time."""
    if tail_explains(dev):
        return _tail_sentences(ctx, dev, head)
    cause = dev.dominant_cause
    return [f"{head}, mostly `{cause}` ({percent(dev.cause_pct[cause])} of {of}: "
            f"{words(dev, cause, ctx.facts.family)}){led_by(dev)}."]


def idlest(devs: list):
    return max(devs, key=lambda d: (d.kernel_idle_ns, -d.device_id))


# "what happens before the first kernel?", "why does the first kernel start so late?": the head of the run
BEFORE_FIRST = re.compile(r"\bbefore\s+(?:the\s+|my\s+|its\s+|any\s+)?(?:first|1st)\s+(?:kernel|launch|gpu\s+work)"
                          r"|\bfirst\s+kernel\s+(?:start|begin|run|launch)(?:s|es|ed)?\s+(?:so\s+|this\s+|too\s+)?late"
                          r"|\bbefore\s+(?:the\s+)?gpu\s+(?:starts?|begins?|gets\s+busy|does\s+anything|(?:starts?\s+)?work)",
                          re.I)


def before_first(ctx: Ctx) -> str:
    """The time before the GPU's first kernel: host time the capture holds before the GPU window (and its longest
    CUDA call there), then the window's head up to the first kernel and the GPU's own copies in it."""
    span = ctx.call("workload").span
    out = []
    if span.before_gpu_ns and ctx.whole_profile:
        call = (f"; its longest CUDA call there, `{span.init_call}`, took {duration(span.init_ns)}"
                + (" creating the CUDA context" if span.creates_context else "") if span.init_call else "")
        out.append(f"The capture holds {duration(span.before_gpu_ns)} of host time before the first GPU work "
                   f"(outside the window the other figures measure){call}.")
    for g in ctx.gpus:
        for d in ctx.call("gpu_gaps", gpu=g, **ctx.win).devices:
            h = d.head
            if h is None:
                out.append(f"GPU {d.device_id}'s first kernel starts at the window's start.")
                continue
            own = (f"; its own copies and memsets fill {duration(h.memory_ns)} of that"
                   + (f" ({duration(h.migration_ns)} of them unified-memory migrations)" if h.migration_ns else "")
                   if h.memory_ns else "; the GPU ran nothing of its own in it")
            out.append(f"In the window, GPU {d.device_id}'s first kernel starts {duration(h.duration_ns)} after the "
                       f"window's start{own}.")
    return sentences(*out)


def utilization(ctx: Ctx) -> str:
    """ "What is the GPU utilization?": each asked GPU's kernel-busy share and, when copies add to it, its busy
    share (any activity), before why it idles (docs/definitions.md: kernel-busy, busy)."""
    results = calls_per_gpu(ctx, "overview")
    rows = devices_of(results)
    if not rows:
        return ""
    w = window_words(results[0], ctx.whole_profile)

    def share(d) -> str:
        extra = (f" (busy with any GPU work, copies included, {percent(d.busy_pct)})"
                 if d.busy_pct - d.kernel_busy_pct >= 0.1 else "")
        return f"{percent(d.kernel_busy_pct)}{extra}"

    if len(rows) == 1:
        return f"Utilization: GPU {rows[0].device_id} was kernel-busy {share(rows[0])} of {w}."
    return (f"Utilization, the kernel-busy share of {w}: "
            + "; ".join(f"GPU {d.device_id} {share(d)}" for d in rows[:8]) + ".")


UTILIZATION = re.compile(r"\butili[sz]ation\b|\butil\b|\busage\b|\bhow\s+busy\b|利用率|使用率", re.I)


def idle(ctx: Ctx) -> str:
    if BEFORE_FIRST.search(ctx.question or ""):
        return before_first(ctx)
    results = calls_per_gpu(ctx, "gpu_gaps")
    devs = devices_of(results)
    main = idlest(devs)
    out = idle_sentences(ctx, main, results[0], ctx.whole_profile)
    if UTILIZATION.search(ctx.question or ""):  # the share asked for first, then why the GPU idles
        out.insert(0, utilization(ctx))
    paid = kernel_paid(ctx.facts, main.device_id, main) if ctx.whole_profile else None
    if paid is not None:  # the migrations slow its kernels rather than leave it idle: said before the advice
        out.insert(len(out) - 1 if main.kernel_idle_ns > 0 else len(out),
                   f"Unified-memory migrations slow its kernels instead: {paid_words(paid[0])}.")
    others = [d for d in devs if d is not main]
    at_end = len(out) - 1 if main.kernel_idle_ns > 0 else len(out)  # before the advice
    if others and len(others) <= 3:
        out.insert(at_end, "For comparison, " + "; ".join(
            f"GPU {d.device_id} was kernel-idle {duration(d.kernel_idle_ns)} ({percent(d.kernel_idle_pct)})"
            for d in others) + ".")
    elif others:
        out.insert(at_end, f"It is the idlest of the {len(devs)} GPUs.")
    return sentences(*out)
