"""What the findings engine produces: findings (one kind of trouble on some GPUs, with its figures,
evidence, the time a fix would save and the first remedy) and the diagnosis of a profile."""
from __future__ import annotations

import json
from typing import Literal

from pydantic import BaseModel, Field

from dashcam.evidence import Evidence

Severity = Literal["high", "medium", "low", "info"]
SEVERITY_RANK = {"high": 0, "medium": 1, "low": 2, "info": 3}


class Finding(BaseModel):
    kind: str = Field(description="What was found (findings/rules/: one module per kind states its rule).")
    severity: Severity
    gpus: list[int] = Field(description="GPUs concerned; figures are those of the first in `figures['gpu']`.")
    title: str
    figures: dict[str, float | int | str] = Field(description="Key numbers, copied from the tool results.")
    evidence: list[Evidence] = Field(description="The tool runs the figures come from.")
    saving_ns: int | None = Field(None, description="At most how much of the captured run a fix would save on the "
                                                    "worst GPU (the time lost to this cause); null when not a time.")
    saving_pct: float | None = Field(None, description="saving_ns as % of the window.")
    cause: str | None = Field(None, description="For idle: the dominant gap cause.")
    sentence: str = Field("", description="The finding in one sentence, as the summary leads with it.")
    advice: str | None = Field(None, description="The first thing to try, in the workload's own terms.")


class Diagnosis(BaseModel):
    profile: str
    verdict: str = Field(description="The lead finding's kind, 'healthy', 'no_kernels' or 'no_gpu_activity'.")
    findings: list[Finding] = Field(description="Ranked: severity, then precedence, then time saved.")
    workload: str | None = Field(None, description="The program's family as the workload tool names it.")
    paragraph: str = Field("", description="What limits the run, its key numbers and the first thing to try "
                                           "(findings/story.py), at most 120 words.")
    notes: list[str] = Field(default_factory=list)

    @property
    def lead(self) -> Finding | None:
        """The finding the verdict names; for a capture without GPU work, the one finding saying which capture it
        is; None when healthy."""
        named = next((f for f in self.findings if f.kind == self.verdict), None)
        return named or (self.findings[0] if self.verdict == "no_gpu_activity" and self.findings else None)

    @property
    def evidence(self) -> list[Evidence]:
        """Every tool run behind the findings, once each, in order."""
        seen, out = set(), []
        for f in self.findings:
            for e in f.evidence:
                key = (e.tool, json.dumps(e.args, sort_keys=True))
                if key not in seen:
                    seen.add(key)
                    out.append(e)
        return out
