"""The steps of a run (NVTX step ranges or a repeating kernel): times, the slowest, what happened in one."""
from __future__ import annotations

import re

from dashcam.findings import advice
from dashcam.measure.labels import kernel_family
from dashcam.measure.names import short_kernel_name
from dashcam.text.format import count, duration, name, percent, sentences, trim

from .context import Ctx, devices_of, window_words
from .idle import idle_sentences, idlest

MOSTLY_BUSY_PCT = 70.0  # a GPU kernel-busy this much of a step spends it in kernels (a wording choice)
OUTLIER_RATIO = 1.2
# "what limits my frame rate / step time": the question is about the typical step and what fills it
_LIMITS = re.compile(r"\blimit(?:s|ing|ed)?\b|\bbound\b|\bfills?\b|\bbottleneck|\bhold(?:s|ing)? (?:back|up)\b|"
                     r"\bwhat (?:takes|eats|goes)\b", re.IGNORECASE)
_WHY = re.compile(r"\bwhy\b|\bwhat (?:makes|made|causes|caused)\b|\bcause[sd]?\b|\breasons?\b|\bexplain",
                  re.IGNORECASE)


def typical_step(ctx: Ctx, r) -> list[str]:
    """What fills the step nearest the median (the one a frame rate or step time is made of): its kernel-busy
    share and what the GPU waited on while idle in it."""
    s = min(r.steps, key=lambda x: (abs(x.duration_ns - r.median_ns), x.index))
    from .context import step_window

    win = step_window(ctx, s.index)
    out = [f"A typical step, step {s.index} ({duration(s.duration_ns)}), is kernel-busy {percent(s.gpu_busy_pct)} "
           f"on GPU {s.gpu_busy_device}: what limits it is"]
    gaps = devices_of([ctx.call("gpu_gaps", gpu=g, **win) for g in ctx.gpus])
    res = ctx.call("gpu_gaps", gpu=ctx.gpus[0], **win)
    if s.gpu_busy_pct >= MOSTLY_BUSY_PCT:
        out[0] += " the kernels themselves (ask which kernels take the time)."
        return out
    out[0] += " the GPU's kernel-idle time in it."
    return out + idle_sentences(ctx, idlest(gaps), res, False)


ORDINAL_WORDS = ("first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth")


def _steps_source(r) -> str:
    if r.method == "nvtx":
        return f"NVTX ranges {name(r.label)}"
    return f"launches of {name(short_kernel_name(r.kernel_name))} on GPU {r.device_id}"


def iterations(ctx: Ctx) -> str:
    step = ctx.targets.step
    if step is not None and not ctx.targets.window_args():
        win = ctx.win  # raises StepNotFound when there is no such step
        r = ctx.call("iterations", limit=min(1000, max(10, step + 1)))
        s = next(x for x in r.steps if x.index == step)
        nth = f"the {ORDINAL_WORDS[step]} " if step < len(ORDINAL_WORDS) else ""  # index 0 is the first
        out = [f"Step {step} ({nth}of {r.step_count}, from {_steps_source(r)}) took {duration(s.duration_ns)}; the "
               f"median step takes {duration(r.median_ns)}, and GPU {s.gpu_busy_device} was kernel-busy "
               f"{percent(s.gpu_busy_pct)} of it."]
        if SLOWER.search(ctx.question or "") and r.median_ns and s.duration_ns < OUTLIER_RATIO * r.median_ns:
            # "why is step 3 slower?" of a step that is not: say so before what its time holds
            slow_ = r.slowest
            out.append(f"So step {step} is no slower than a typical step" + (
                f"; the slowest is step {slow_.index} ({duration(slow_.duration_ns)})."
                if slow_ and slow_.index != step and slow_.ratio_to_median >= OUTLIER_RATIO else "."))
        gaps = devices_of([ctx.call("gpu_gaps", gpu=g, **win) for g in ctx.gpus])
        res = ctx.call("gpu_gaps", gpu=ctx.gpus[0], **win)
        out += idle_sentences(ctx, idlest(gaps), res, False)
        return sentences(*out)
    r = ctx.call("iterations", gpu=ctx.gpus[0], label=ctx.targets.nvtx, **ctx.targets.window_args())
    if r.step_count == 0:
        ctx.note("no steps found (no NVTX step ranges, no repeating kernel pattern)")
        return ("No repeating steps were found: the profile has no NVTX step ranges and no kernel that repeats "
                "like a step.")
    out = [f"The run has {r.step_count} steps, from {_steps_source(r)}: median {duration(r.median_ns)}, mean "
           f"{duration(r.mean_ns)}, p90 {duration(r.p90_ns)}."]
    slow_, fast = r.slowest, r.fastest
    limits = bool(_LIMITS.search(ctx.question or "")) and bool(r.steps)
    if r.stdev_ns == 0:
        out.append(f"All steps take the same time (standard deviation {duration(r.stdev_ns)}); GPU kernel-busy in "
                   f"step {slow_.index} is {percent(slow_.gpu_busy_pct)}.")
    else:
        out.append(f"The slowest is step {slow_.index} at {duration(slow_.duration_ns)} "
                   f"({trim(slow_.ratio_to_median)} times the median), with the GPU kernel-busy "
                   f"{percent(slow_.gpu_busy_pct)} of it; the fastest, step {fast.index}, took "
                   f"{duration(fast.duration_ns)}.")
        if limits:
            pass
        elif asks_why(ctx.question):
            out += slowest_step_why(ctx, r, slow_)
        elif slow_.ratio_to_median >= OUTLIER_RATIO:
            out.append(f"Step {slow_.index} is an outlier: ask why the GPU was idle in step {slow_.index} to "
                       "see what it waited on.")
    if limits:
        out += typical_step(ctx, r)
    return sentences(*out)


SLOWER = re.compile(r"\bslow(?:er|est)?\b|\blonger\b|\bsluggish\b", re.I)


def asks_why(question: str) -> bool:
    """The question asks for a cause ("... and why?", "what makes it slow", "the reason")."""
    return bool(_WHY.search(question or ""))


def _step_bounds(r, step) :
    """start_ms/end_ms of a step row of an iterations result (its own start_ms/end_ms when it has them)."""
    if getattr(step, "start_ms", None) is not None and getattr(step, "end_ms", None) is not None:
        return {"start_ms": step.start_ms, "end_ms": step.end_ms}
    w = r.window
    start = max(0.0, (step.start_ns - w.start_ns) / 1e6 + w.start_ms)
    return {"start_ms": round(start, 6), "end_ms": round(start + step.duration_ns / 1e6, 6)}


def slowest_step_why(ctx: Ctx, r, step) -> list[str]:
    """Why the slowest step is slow: gpu_gaps over its window (the idlest GPU's main cause and its largest
    gap with the NVTX range open in it); a GPU kernel-busy most of the step gets its top kernel instead."""
    win = _step_bounds(r, step)
    results = [ctx.call("gpu_gaps", gpu=g, **win) for g in ctx.gpus]
    dev = idlest(devices_of(results))
    gid, i = dev.device_id, step.index
    out = [] if step.ratio_to_median >= OUTLIER_RATIO else [
        f"Step {i} is close to the median, so no step stands out; here is where its time went."]
    if dev.kernel_busy_pct >= MOSTLY_BUSY_PCT or not dev.dominant_cause:
        top = ctx.call("top_kernels", gpu=gid, limit=5, **win)
        out += [f"In step {i} GPU {gid} was kernel-busy {percent(dev.kernel_busy_pct)} of "
               f"{window_words(results[0], False)}, so the step's time goes to its kernels."]
        if top.kernels:
            k = top.kernels[0]
            out.append(f"The top kernel in it is {name(k.name)}: {duration(k.total_ns)} over "
                       f"{count(k.count, 'launch', 'launches')}.")
            out.append(advice.kernels(ctx.facts, kernel_family(k.name, k.full_name), k.full_name))
        return out
    head = (f"Step {i} is slow because GPU {gid} waited: it was kernel-idle {duration(dev.kernel_idle_ns)} "
            f"({percent(dev.kernel_idle_pct)} of {window_words(results[0], False)})")
    return out + idle_sentences(ctx, dev, results[0], False, head=head)
