"""What CUDA API calls cost the host: per function its calls and time, the kernels a launch function launched.

The api tool once (with ``name`` when the question names a function, ``per_thread`` when it asks about
threads), per asked GPU (the processes that drove it); when no function has the name asked the tool
reports its variants (``variants_of``: cudaMemcpyAsync for cudaMemcpy), and the answer says that it
speaks of them. The answer names the functions with the most time first; for a named function its
calls, total, mean, median and longest call, how often a thread was inside it, and calls outside the
window.
"""
from __future__ import annotations

import re

from dashcam.errors import DashcamError
from dashcam.text.format import count, duration, name, percent, sentences, trim

from .context import Ctx, window_words

SHOWN = 3  # functions named in a general answer
SLOW_CALL_NS = 1_000_000  # a CUDA API call of a millisecond or more is slow (a launch takes microseconds)
# A question asking why a call takes long ("why is the first cudaMalloc 364 ms?", "is cudaLaunchKernel slow?")
WHY_SLOW = re.compile(r"\bwhy\b|\bslow|\bso long\b|\btakes? (?:so )?long\b|\bhuge\b|\bexpensive\b|\bcostly\b|"
                      r"\bwhat (?:is|are|does|do)\b.*\bdoing\b", re.IGNORECASE)
NOTABLE_CALL_NS = 10_000_000  # a call this long is explained whatever the question's words
THREAD_WORDS = re.compile(r"\bthreads?\b", re.IGNORECASE)
RATE_WORDS = re.compile(r"\bper\s+(?:second|sec|s)\b|/\s*s(?:ec)?\b|\brate\b", re.IGNORECASE)


def _outside(f, whole: bool) -> str:
    where = "the window of GPU activity (before its first or after its last kernel or copy)" if whole else "the window"
    return f"{count(f.outside_calls, 'call')} ({duration(f.outside_ns)}) outside {where}"


def _function(f, whole: bool, rate: bool) -> list[str]:
    """Sentences on one function (an ApiFunction row)."""
    if not f.calls:
        return [f"{name(f.name)}: no call overlaps the window; it has {_outside(f, whole)}."]
    threads = "one thread" if f.threads == 1 else f"{f.threads} threads"
    head = (f"{name(f.name)}: {count(f.calls, 'call')} from {threads}, {duration(f.total_ns)} in all (mean "
            f"{duration(f.mean_ns)}, median {duration(f.median_ns)}, longest {duration(f.max_ns)})")
    if rate:
        head += f", {trim(f.calls_per_s)} calls per second"
    out = [head + f"; a thread was inside it {percent(f.pct_of_window)} of the window."]
    if f.launched_kernels:
        kernels = ", ".join(f"{name(k.kernel)} {k.count}" for k in f.launched)
        more = "" if sum(k.count for k in f.launched) >= f.launched_kernels else " among others"
        out.append(f"It launched {count(f.launched_kernels, 'kernel')} in the window: {kernels}{more}.")
    if f.outside_calls:
        out.append(f"It has another {_outside(f, whole)}.")
    return out


def api(ctx: Ctx) -> str:
    per_thread = bool(THREAD_WORDS.search(ctx.question))
    rate = bool(RATE_WORDS.search(ctx.question))
    out = []
    for g in ctx.gpus:
        asked = ctx.targets.api
        r = ctx.call("api", gpu=g, name=asked, per_thread=per_thread or None, **ctx.win)
        where = window_words(r, ctx.whole_profile) + (f" (the processes of GPU {g})" if g is not None else "")
        if r.variants_of and r.functions:
            out.append(f"There is no call of {name(r.variants_of)} itself in {where}; its variants: "
                       + ", ".join(name(f.name) for f in r.functions[:SHOWN]) + ".")
        if not r.functions:
            what = f"no call of {name(asked)}" if asked else "no CUDA API call"
            out.append(f"There is {what} in {where}.")
            continue
        if ctx.targets.api and (len(r.functions) == 1 or not r.api_calls):
            for f in r.functions[:SHOWN]:
                out += _function(f, ctx.whole_profile, rate)
            if len(r.functions) == 1 and len(ctx.gpus) == 1:  # one function named: where called, what it waits for
                from .entity import api_analysis

                out.append(api_analysis(ctx, r.functions[0].name))
            if len(r.functions) == 1:
                out.append(_why_slow(ctx, r.functions[0]))
            continue
        top = r.functions[0]
        out.append(f"Host threads made {count(r.api_calls, 'CUDA API call')} in {count(r.function_count, 'function')} "
                   f"in {where}; the costliest is " + " ".join(_function(top, ctx.whole_profile, rate)))
        rest = r.functions[1:SHOWN]
        if rest:
            out.append("Next: " + "; ".join(f"{name(f.name)} {count(f.calls, 'call')}, {duration(f.total_ns)} "
                                            f"(longest {duration(f.max_ns)})" for f in rest) + ".")
        if per_thread and r.threads:
            t = r.threads[0]
            tn = f" ({name(t.thread_name)})" if t.thread_name else ""
            out.append(f"The thread with the most API time is {t.tid}{tn} of process {t.pid}: {duration(t.busy_ns)} "
                       f"({percent(t.pct_of_window)} of the window), mostly in {name(t.top_function)}.")
    return sentences(*out)


def _why_slow(ctx: Ctx, f) -> str | None:
    """For a question asking why a function's calls take long: what the call does that takes time and what makes
    it cheaper (findings/advice/calls.py); the process's first CUDA call, when it created the context, as that
    (the workload tool's capture span); calls all under SLOW_CALL_NS are said not to be slow."""
    from dashcam.findings.advice.calls import call_cost, context_words

    asked = bool(WHY_SLOW.search(ctx.question))  # a Chinese question is its English words already (Ctx)
    notable = f.max_ns >= NOTABLE_CALL_NS or f.outside_ns >= NOTABLE_CALL_NS
    if not asked and not notable:
        return None
    try:
        span = ctx.call("workload").span
    except DashcamError:
        span = None
    longest = span is not None and span.init_call == f.name and span.init_ns > f.max_ns  # before the GPU work
    if longest and span.creates_context:
        why, remedy = context_words()
        return (f"Its longest call, {duration(span.init_ns)} before the first GPU work, is slow because {why}. "
                f"To shorten it: {remedy}.")
    slow_outside = f.outside_calls and f.outside_ns >= SLOW_CALL_NS * f.outside_calls  # a mean of 1 ms or more
    if not longest and not slow_outside and f.max_ns < SLOW_CALL_NS:
        return f"No call of {name(f.name)} is slow here: the longest takes {duration(f.max_ns)}." if asked else None
    cost = call_cost(f.name)
    if cost is None:
        return None
    why, remedy = cost
    head = (f"Its longest call takes {duration(span.init_ns)}, before the first GPU work; " if longest else
            "" if f.max_ns >= SLOW_CALL_NS else f"Its calls outside the window take {duration(f.outside_ns)}; ")
    return f"{head}{name(f.name)} can be slow because {why}. To shorten it: {remedy}."
