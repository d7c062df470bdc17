"""The offline answerer: question -> intent and targets -> tool calls -> templated answer.

Deterministic: no model. A GPU the profile does not have is answered first (overview only);
otherwise the intent's answer in ``answers/`` makes its tool calls and writes the text.
Errors a user can cause (no GPU activity, a window outside the profile, a step that does not
exist) become a one-line answer, never a traceback. Every answer goes through the grounding check.
"""
from __future__ import annotations

import re

from dashcam.errors import BadParameter, DashcamError, NoGpuActivity
from dashcam.text.format import duration

from . import answers
from .answers.overview import no_gpu_activity
from .models import Answer, Targets

_NUMBER = re.compile(r"\d+(?:\.\d+)?")


def answer_offline(question: str, profile, targets: Targets | None = None, intent: str | None = None,
                   history: list | None = None) -> Answer:
    """Answer ``question`` about an opened Profile with the deterministic templates (mode "offline").

    The intent is the classifier's (intents.py) unless given; a question asking several things gets one
    answer per part, in order. A question it cannot place gets, after the follow-up rules
    (``_intent_from_context``), the health summary and a line on what else it answers (answers.unknown)."""
    from .intents import classify_question

    if targets is None:
        from .targets import parse_targets

        targets = parse_targets(question, profile)
    found = None if intent else classify_question(question, targets)
    intents = [intent] if intent else list(found.intents)
    intents = [i if i in answers.TEMPLATES else "unknown" for i in intents]
    if intents[0] == "unknown":
        intents = [_intent_from_context(targets, history)]
    if intent is None:  # a named entity of the profile gets its own analysis (entities.py)
        from .entities import entity_intent

        intents = list(dict.fromkeys(entity_intent(i, targets, profile, question) for i in intents))
        from .activities import activity_intent  # "how much time does the optimizer take?" (activities.py)

        intents = list(dict.fromkeys(activity_intent(i, targets, question) for i in intents))
    ctx = answers.Ctx(profile, targets, question)
    asked = list(zip(intents, [question] * len(intents), [targets] * len(intents)))
    if found is not None and len(found.parts) == len(intents) > 1:  # several things: each its own targets
        from .targets import part_targets

        asked = list(zip(intents, found.parts, part_targets(targets, found.parts, profile)))
    texts = []
    for i, part, t in asked:
        part_ctx = answers.Ctx(profile, t, part, runs=ctx.runs) if len(asked) > 1 else ctx
        texts.append(_answer_text(part_ctx, i))
        for n in part_ctx.notes:
            ctx.note(n)
    text = "\n\n".join(texts)
    grounded, ungrounded = _ground(text, ctx.evidence, targets)
    return Answer(question=question, answer=text, mode="offline", intent=intents[0],
                  intent_score=found.score if found else None, runner_up=found.runner_up if found else None,
                  runner_up_score=found.runner_up_score if found else None, intents=list(dict.fromkeys(intents)),
                  gpus=answer_gpus(text, targets, profile), targets=targets, tool_calls=ctx.tool_calls,
                  evidence=ctx.evidence, grounded=grounded, ungrounded_numbers=ungrounded, notes=ctx.notes)


def answer_gpus(text: str, targets: Targets, profile) -> list[int]:
    """The GPUs an answer talks about, the main one first: those the question named, else the profile's
    GPUs in the order the answer first names them ("GPU 1 was idle ...; for comparison, GPU 0 ..." -> [1, 0])."""
    if targets.gpus:
        return list(dict.fromkeys(targets.gpus))
    from dashcam.evidence.grounding import numbers_in

    have = set(getattr(profile, "devices", []) or [])
    said = [int(v) for _, v, unit in numbers_in(text) if unit == "#gpu" and float(v).is_integer()]
    return list(dict.fromkeys(g for g in said if g in have))


def _answer_text(ctx: answers.Ctx, intent: str) -> str:
    missing = [g for g in dict.fromkeys(ctx.targets.gpus) if g not in ctx.profile.devices]
    try:
        if missing:
            return answers.missing_gpu(ctx, missing)
        return answers.TEMPLATES[intent](ctx)
    except NoGpuActivity:  # the capture holds no GPU work: which kind of capture it is, and what to do
        return no_gpu_activity(ctx)
    except answers.StepNotFound:
        return _no_such_step(ctx)
    except BadParameter as e:
        if ctx.targets.window_args():
            again = _session_times(ctx, intent)
            if again is not None:
                return again
            ctx.note(str(e))
            return _bad_window(ctx)
        ctx.note(str(e))
        return "The tools could not answer this question on this profile: " + _without_numbers(str(e)) + "."
    except DashcamError as e:
        ctx.note(f"{type(e).__name__}: {e}")
        return "The tools could not answer this question on this profile: " + _without_numbers(str(e)) + "."


# Timestamps under this are relative to the session's start (nsys' timeline shows them so); above it they are UTC
# epoch ns (an export made with --ts-normalize=true): see fleet/identity.py's clock.
SESSION_RELATIVE_MAX_NS = 10**15


def _session_times(ctx: answers.Ctx, intent: str) -> str | None:
    """A window outside the GPU window's span, read as times from the start of the capture (as nsys' timeline
    shows them: "idle between 8.2 s and 9.0 s" of a capture whose GPU work starts at 5.84 s): the answer for that
    part of the GPU window, with a note saying how the times were read; None when that reading selects nothing
    either."""
    full = getattr(ctx.profile, "full_window", None)
    t = ctx.targets
    if not full or full[0] >= SESSION_RELATIVE_MAX_NS:
        return None
    w0, length = full[0] / 1e6, (full[1] - full[0]) / 1e6
    s = None if t.start_ms is None else t.start_ms - w0
    e = None if t.end_ms is None else t.end_ms - w0
    if (e is not None and e <= 0) or (s is not None and s >= length) or (s is None and e is None):
        return None
    s = None if s is None else round(max(s, 0.0), 3)  # to the microsecond: the reproduce commands stay readable
    e = None if e is None else round(min(e, length), 3)
    shifted = answers.Ctx(ctx.profile, t.model_copy(update={"start_ms": s, "end_ms": e}), ctx.question,
                          runs=ctx.runs)
    try:
        text = answers.TEMPLATES[intent](shifted)
    except DashcamError:
        return None
    for n in shifted.notes:
        ctx.note(n)
    where = f"{s if s is not None else 0:.3f} to {e if e is not None else length:.3f} ms"
    ctx.note(f"The times asked lie outside the {length:.3f} ms GPU window, so they are read from the start of the "
             f"capture, as nsys' timeline shows them: that is {where} of the GPU window, which starts {w0:.3f} ms "
             "into the capture.")
    return text


def _no_such_step(ctx: answers.Ctx) -> str:
    r = next((e.result for e in ctx.evidence if e.tool == "iterations"), None)  # the evidence JSON
    if not r or not r["step_count"]:
        return ("This profile has no steps to pick from: it has no NVTX step ranges and no kernel that repeats "
                "like a step.")
    return (f"There is no step {ctx.targets.step}: the profile has {r['step_count']} steps, numbered from "
            f"{r['steps'][0]['index']}.")


def _bad_window(ctx: answers.Ctx) -> str:
    """The asked window selects nothing: say how long the profile is (overview of the whole profile)."""
    try:
        r = ctx.call("overview")
    except DashcamError:
        return "The requested window selects nothing in this profile."
    return (f"Nothing falls in the requested window: the profile's GPU activity lasts {duration(r.window_ns)}, "
            "and times are counted in ms from its start.")


def _without_numbers(s: str) -> str:
    return _NUMBER.sub("…", s).rstrip(".")


def _intent_from_context(targets: Targets, history: list | None) -> str:
    """For a question with no intent words but a target: the last turn's topic (a follow-up such as
    "and GPU 3?"), else what the target points at (a kernel, an NVTX range, a step, a window or GPU)."""
    named = bool(targets.gpus or targets.window_args() or targets.step is not None or targets.kernel
                 or targets.nvtx or targets.all_gpus)
    previous = _previous_intent(history or []) if named else None
    if previous:
        return previous
    if targets.kernel:
        return "top_kernels"
    if targets.nvtx:
        return "nvtx"
    if targets.api:
        return "api"
    if targets.step is not None:
        return "iterations"
    if targets.window_args() or targets.gpus:
        return "overview"
    return "unknown"


def _previous_intent(history: list) -> str | None:
    """The intent of the last answered turn; history items are Answers or dicts."""
    for turn in reversed(history):
        intent = turn.get("intent") if isinstance(turn, dict) else getattr(turn, "intent", None)
        if intent and intent != "unknown":
            return intent
    return None


def _ground(text: str, evidence: list, targets: Targets) -> tuple[bool, list[str]]:
    """grounding.check, vouching only for the ids the question itself named (a missing GPU, a step, a stream)."""
    from dashcam.evidence.grounding import check

    asked = [*targets.gpus, *targets.streams, *([targets.step] if targets.step is not None else [])]
    return check(text, evidence, extra_values=asked)
