"""A tool call and its evidence: the call, and its result model as JSON data (what grounding reads)."""
from __future__ import annotations

import shlex

from pydantic import BaseModel, Field

# `dashcam tool run` flags of the parameters every tool shares; others go as `-a KEY=VALUE`.
# The evidence of what the findings engine computes from the tools' figures (findings/impact.py): the time each fix
# would save, with its assumption; reproduced by `dashcam summary --format json` (each finding's saving_ns).
IMPACT = "impact"
COMMON_FLAGS = {"gpu": "--gpu", "start_ms": "--start", "end_ms": "--end", "limit": "--limit"}


class ToolCall(BaseModel):
    name: str
    args: dict = Field(default_factory=dict)


class Evidence(BaseModel):
    """One tool run an answer rests on: the call and its result model as JSON data."""

    tool: str
    args: dict = Field(default_factory=dict)
    result: dict

    def command(self, profile: str) -> str:
        """The `dashcam tool run` command that reproduces this result (the findings engine's own figures, such as
        the time a fix would save: `dashcam summary --format json`)."""
        if self.tool == IMPACT:
            return f"dashcam summary {shlex.quote(profile)} --format json"
        parts = ["dashcam", "tool", "run", self.tool, shlex.quote(profile)]
        for k, v in self.args.items():
            if v is None:
                continue
            if k in COMMON_FLAGS:
                parts += [COMMON_FLAGS[k], str(v)]
            else:
                parts += ["-a", shlex.quote(f"{k}={v}")]
        return " ".join(parts)
