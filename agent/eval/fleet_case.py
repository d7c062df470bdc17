"""A case asked of a fleet (``profile: {fleet: NAME}``): the question and its follow-ups through ``ask_fleet``,
its answer as the Answer the checks score (intent ``fleet``; its evidence the fleet report's, and a drilled
report's tool results)."""
from __future__ import annotations

from dashcam.evidence.models import Evidence

from ..fleet import ask_fleet
from ..models import Answer
from .cases import Case

FLEET_INTENT = "fleet"  # the route a fleet case's answer is scored under


def ask_fleet_turns(case: Case, report, offline: bool, model: str | None) -> Answer:
    """The last of the case's turns on the analysed fleet ``report`` (fleet.report.FleetReport)."""
    a = None
    for line in [case.question, *case.follow_ups]:
        a = ask_fleet(line, report, model=model, offline=offline)
    evidence = [Evidence(tool="fleet", result={"evidence": report.evidence()})]
    drill = a.drill
    return Answer(question=a.question, answer=a.answer, mode="offline" if a.mode == "offline" else "llm",
                  model=drill.model if drill else None, intent=FLEET_INTENT,
                  evidence=evidence + (drill.evidence if drill else []),
                  tool_calls=drill.tool_calls if drill else [], grounded=a.grounded,
                  ungrounded_numbers=a.ungrounded_numbers, notes=drill.notes if drill else [])
