"""The checks of one answer against its case's expectations: each a pass/fail with a one-line detail.

Checks, each pass/fail; a case passes when all of its checks pass:
- routing: the answer's intent is one of the case's routes (expect.route, else its intent) and each
  target in expect.targets equals the parsed one (lists as sets); with the trajectory check it makes
  a case *routed* (results.py). In LLM modes (the model picks the tools) only the targets;
- diagnosis: one phrase appears (case-insensitive; ``_``, ``-`` and spaces are the same; from a word
  start, so "stall" finds "stalled"; "GPU 1" does not find "GPU 10");
- facts, one check each: ``gpu`` "GPU N" is mentioned; ``text`` a case-insensitive substring;
  ``percent`` a number written with % within ``tol`` points (default 0.5); ``ms`` a time in any unit
  (ns/µs/ms/s/min, converted to ms) within ``tol_pct`` % (default 1) or ``tol`` ms; ``number`` a
  number (not an id) equal to it, or within ``tol``. Numbers are read with dashcam.evidence.grounding.numbers_in;
- forbid: no phrase appears (same matching as diagnosis);
- grounded: the answer says it is grounded, lists no ungrounded number, and an independent
  grounding.check of its text against its evidence agrees (an *unflagged* number is one the agent
  missed: the worst outcome, it reaches the user as a fact);
- trajectory: every expected tool was called with at least the expected args (and no more than
  ``max_tool_calls`` runs);
- notes, latency (seconds for all turns of the case, the profile already open);
- LLM modes: llm (the model answered: no "LLM failed" fallback); replay: script (every scripted
  reply was used, no request went past the end — the loop asked exactly what the script expected).
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass

from dashcam.evidence.grounding import check as grounding_check
from dashcam.evidence.grounding import numbers_in

from ..models import Answer, ToolCall
from .cases import Case, Fact, ToolExpect

TIME_TO_MS = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3, "min": 6e4}
LLM_FAILED = "LLM failed"


@dataclass
class Check:
    kind: str
    name: str
    ok: bool
    detail: str = ""


def _norm(s: str) -> str:
    return re.sub(r"[\s_\-]+", " ", s.lower()).strip()


def has_phrase(text: str, phrase: str) -> bool:
    """``phrase`` in ``text``: case-insensitive, ``_``/``-``/spaces alike, starting at a word start
    ("stall" finds "stalled", not "install"); a phrase ending in a digit is not the start of a longer
    number ("GPU 1" does not find "GPU 10" or "GPU 1.5")."""
    p = _norm(phrase)
    if not p:
        return False
    rx = (r"(?<!\w)" if re.match(r"\w", p[0]) else "") + re.escape(p) + (r"(?!\.?\d)" if p[-1].isdigit() else "")
    return re.search(rx, _norm(text)) is not None


def check_routing(answer: Answer, routes: list[str] | None, targets: dict) -> Check:
    """``routes`` None: the targets only (LLM modes, where the model picks the tools)."""
    problems = []
    if routes is not None and answer.intent not in routes:
        problems.append(f"intent {answer.intent} (expected {' or '.join(routes)})")
    got = answer.targets.model_dump()
    for k, want in targets.items():
        have = got.get(k)
        same = (sorted(have or []) == sorted(want or [])) if isinstance(want, list) else have == want
        if not same:
            problems.append(f"{k} {have!r} (expected {want!r})")
    return Check("routing", "routing", not problems, "; ".join(problems) or f"intent {answer.intent}")


def check_diagnosis(text: str, phrases: list[str]) -> Check:
    hit = next((p for p in phrases if has_phrase(text, p)), None)
    return Check("diagnosis", "diagnosis", hit is not None,
                 f"said {hit!r}" if hit else "said none of: " + ", ".join(phrases))


def check_fact(text: str, fact: Fact) -> Check:
    name = f"fact {fact.label()}"
    nums = numbers_in(text)
    if fact.gpu is not None:
        hits = [w for w, v, u in nums if u == "#gpu" and v == fact.gpu]
        if not hits:  # an id the extraction skipped (e.g. in a quoted phrase)
            hits = re.findall(rf"(?i)\bGPU\s*#?\s*{fact.gpu}(?![\d.])", text)
        return Check("facts", name, bool(hits), "mentioned" if hits else "GPU ids said: "
                     + (", ".join(w for w, _, u in nums if u == "#gpu") or "none"))
    if fact.text is not None:
        ok = fact.text.lower() in text.lower()
        return Check("facts", name, ok, "found" if ok else "not in the answer")
    if fact.percent is not None:
        tol = 0.5 if fact.tol is None else fact.tol
        seen = [(w, v) for w, v, u in nums if u == "%"]
        kind = "percentages"
        hit = next((w for w, v in seen if abs(v - fact.percent) <= tol + 1e-9), None)
    elif fact.ms is not None:
        tol = fact.tol if fact.tol is not None else abs(fact.ms) * (1 if fact.tol_pct is None else fact.tol_pct) / 100
        seen = [(w, v * TIME_TO_MS[u]) for w, v, u in nums if u in TIME_TO_MS]
        kind = "times"
        hit = next((w for w, v in seen if abs(v - fact.ms) <= tol + 1e-12), None)
    else:
        tol = fact.tol or 0
        seen = [(w, v) for w, v, u in nums if not (u or "").startswith("#")]
        kind = "numbers"
        hit = next((w for w, v in seen if abs(v - fact.number) <= tol + 1e-9), None)
    if hit is not None:
        return Check("facts", name, True, f"said {hit!r}")
    return Check("facts", name, False, f"{kind} said: " + (", ".join(w for w, _ in seen) or "none"))


def check_forbid(text: str, phrases: list[str]) -> Check:
    said = [p for p in phrases if has_phrase(text, p)]
    return Check("forbid", "forbid", not said, "said " + ", ".join(map(repr, said)) if said else "none said")


def grounding_gaps(answer: Answer, extra_values=()) -> tuple[list[str], list[str]]:
    """(every ungrounded number, those the answer did not flag) — the re-check is grounding.check."""
    _, bad = grounding_check(answer.answer, answer.evidence, extra_values)
    flagged = list(answer.ungrounded_numbers)
    unflagged = [n for n in bad if n not in flagged]
    return flagged + unflagged, unflagged


def check_grounded(answer: Answer, extra_values=(), gaps: tuple[list[str], list[str]] | None = None) -> Check:
    """``gaps``: grounding_gaps of the answer when the caller has it already."""
    ungrounded, unflagged = gaps if gaps is not None else grounding_gaps(answer, extra_values)
    ok = answer.grounded and not ungrounded
    if ok:
        return Check("grounded", "grounded", True, "every number from a tool result")
    detail = "ungrounded: " + ", ".join(ungrounded)
    if unflagged:
        detail += " (not flagged by the agent: " + ", ".join(unflagged) + ")"
    elif not ungrounded:
        detail = "the answer says it is not grounded"
    return Check("grounded", "grounded", False, detail)


def _args_match(actual, expected) -> bool:
    if isinstance(expected, dict):
        return isinstance(actual, dict) and all(k in actual and _args_match(actual[k], v) for k, v in expected.items())
    if isinstance(expected, (int, float)) and not isinstance(expected, bool):
        return isinstance(actual, (int, float)) and not isinstance(actual, bool) and abs(actual - expected) < 1e-9
    return actual == expected


def _call_label(name: str, args: dict) -> str:
    return name + "(" + ", ".join(f"{k}={json.dumps(v)}" for k, v in args.items()) + ")"


def check_trajectory(tool_calls: list[ToolCall], expected: list[ToolExpect], max_calls: int | None = None) -> Check:
    missing = [e for e in expected if not any(c.name == e.name and _args_match(c.args, e.args) for c in tool_calls)]
    called = ", ".join(_call_label(c.name, c.args) for c in tool_calls) or "no tools"
    problems = []
    if missing:
        problems.append("missing " + ", ".join(_call_label(e.name, e.args) for e in missing))
    if max_calls is not None and len(tool_calls) > max_calls:
        problems.append(f"{len(tool_calls)} tool runs > {max_calls}")
    return Check("trajectory", "trajectory", not problems, "; ".join(problems + [f"called {called}"]))


def check_notes(notes: list[str], phrases: list[str]) -> Check:
    missing = [p for p in phrases if not any(p.lower() in n.lower() for n in notes)]
    return Check("notes", "notes", not missing,
                 ("missing " + ", ".join(map(repr, missing)) + "; notes: " + ("; ".join(notes) or "none"))
                 if missing else "present")


def check_latency(seconds: float, limit: float) -> Check:
    return Check("latency", "latency", seconds <= limit, f"{seconds:.2f} s (limit {limit:g} s)")


def check_llm(answer: Answer) -> Check:
    failed = [n for n in answer.notes if n.startswith(LLM_FAILED)]
    return Check("llm", "llm", not failed, failed[0] if failed else f"answered in {answer.mode} mode")


def check_script(unused: int, past_end: int) -> Check:
    problems = []
    if unused:
        problems.append(f"{unused} scripted replies unused")
    if past_end:
        problems.append(f"{past_end} requests past the end of the script")
    return Check("script", "script", not problems, "; ".join(problems) or "every reply used")


def score(case: Case, answer: Answer, latency_s: float, extra_values=(), latency_limit: float | None = None,
          llm: bool = False, gaps: tuple[list[str], list[str]] | None = None) -> list[Check]:
    """The checks of one case on its last answer (script checks are added by the replay runner)."""
    e, text = case.expect, answer.answer
    checks = [check_routing(answer, None if llm else case.routes, e.targets)] if not llm or e.targets else []
    if e.diagnosis:
        checks.append(check_diagnosis(text, e.diagnosis))
    checks += [check_fact(text, f) for f in e.facts]
    if e.forbid:
        checks.append(check_forbid(text, e.forbid))
    if e.grounded:
        checks.append(check_grounded(answer, extra_values, gaps))
    if e.tools or e.max_tool_calls is not None:
        checks.append(check_trajectory(answer.tool_calls, e.tools, e.max_tool_calls))
    if e.notes:
        checks.append(check_notes(answer.notes, e.notes))
    limit = e.max_latency_s or latency_limit
    if limit:
        checks.append(check_latency(latency_s, limit))
    if llm:
        checks.append(check_llm(answer))
    return checks
