"""The outcome of each case (status, checks, as designed, its JSON) and the summary numbers per intent."""
from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from ..models import Answer
from .cases import SETS, Case
from .checks import Check


@dataclass
class CaseResult:
    case: Case
    status: str  # passed | failed | skipped | error
    checks: list[Check] = field(default_factory=list)
    latency_s: float | None = None
    answer: Answer | None = None
    detail: str = ""  # why skipped, or the error
    ungrounded: list[str] = field(default_factory=list)
    unflagged: list[str] = field(default_factory=list)
    script: list | None = None  # --record: the replies recorded

    @property
    def failed_kinds(self) -> list[str]:
        return sorted({c.kind for c in self.checks if not c.ok})

    @property
    def routed(self) -> bool:
        """The question took its route: the right intent and targets (routing) and the expected tools
        (trajectory)."""
        return self.status in ("passed", "failed") and all(
            c.ok for c in self.checks if c.kind in ("routing", "trajectory"))

    @property
    def as_designed(self) -> bool | None:
        ef = self.case.expect_fail
        if self.status == "skipped":
            return None
        if not ef:
            return self.status == "passed"
        if ef is True:
            return self.status != "passed"
        return self.status == "failed" and self.failed_kinds == sorted(set(ef))

    def to_json(self) -> dict:
        c, a = self.case, self.answer
        return {
            "id": c.id, "file": str(c.file), "intent": c.intent, "tags": c.tags,
            "profile": c.profile.model_dump(exclude_none=True), "question": c.question,
            "follow_ups": c.follow_ups, "status": self.status,
            "set": c.set, "passed": self.status == "passed", "routed": self.routed,
            "expect_fail": c.expect_fail, "as_designed": self.as_designed,
            "latency_s": None if self.latency_s is None else round(self.latency_s, 3),
            "checks": [{"kind": k.kind, "name": k.name, "ok": k.ok, "detail": k.detail} for k in self.checks],
            "detail": self.detail or None,
            "answer": a.answer if a else None, "answer_mode": a.mode if a else None,
            "answer_intent": a.intent if a else None,
            "tool_calls": [t.model_dump() for t in a.tool_calls] if a else [],
            "notes": a.notes if a else [], "grounded": a.grounded if a else None,
            "ungrounded_numbers": self.ungrounded, "unflagged_numbers": self.unflagged,
        }


def _pct(n: int, d: int) -> float | None:
    """n/d in %, one decimal; never rounded up to 100 when one case is missing (1999/2000 -> 99.9)."""
    if not d:
        return None
    return min(round(100 * n / d, 1), 99.9) if n < d else 100.0


def _group(results: list[CaseResult]) -> dict:
    ran = [r for r in results if r.status != "skipped"]
    lat = [r.latency_s for r in ran if r.latency_s is not None]
    designed = [r for r in ran if r.as_designed]
    routed = sum(r.routed for r in ran)
    return {"cases": len(ran), "passed": sum(r.status == "passed" for r in ran),
            "pct": _pct(sum(r.status == "passed" for r in ran), len(ran)),
            "routed": routed, "routed_pct": _pct(routed, len(ran)),
            "as_designed": len(designed), "as_designed_pct": _pct(len(designed), len(ran)),
            "skipped": len(results) - len(ran),
            "mean_latency_s": round(statistics.fmean(lat), 3) if lat else None}


def _set_group(results: list[CaseResult]) -> dict:
    intents = sorted({r.case.intent for r in results})
    return {**_group(results), "by_intent": {i: _group([r for r in results if r.case.intent == i]) for i in intents}}


def summarize(results: list[CaseResult]) -> dict:
    """Per intent, overall, per set (cases.Case.set) and, over the curated cases, per kind of profile."""
    intents = sorted({r.case.intent for r in results})
    curated = [r for r in results if r.case.set == "curated"]
    return {
        "by_intent": {i: _group([r for r in results if r.case.intent == i]) for i in intents},
        "overall": _group(results),
        "by_set": {s: _set_group([r for r in results if r.case.set == s]) for s in SETS
                   if any(r.case.set == s for r in results)},
        "planted": _group([r for r in curated if r.case.profile.kind == "planted"]),
        "shared": _group([r for r in curated if r.case.profile.kind == "shared"]),
        "ungrounded_numbers": sum(len(r.ungrounded) for r in results),
        "unflagged_ungrounded": sum(len(r.unflagged) for r in results),
    }
