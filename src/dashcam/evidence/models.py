"""A tool call and its evidence: the call, and its result model as JSON data (what grounding reads)."""
from __future__ import annotations

import shlex

from pydantic import BaseModel, Field

# `dashcam tool run` flags of the parameters every tool shares; others go as `-a KEY=VALUE`.
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
        """The `dashcam tool run` command that reproduces this result."""
        parts = ["dashcam", "tool", "run", self.tool, shlex.quote(profile)]
        for k, v in self.args.items():
            if v is None:
                continue
            if k in COMMON_FLAGS:
                parts += [COMMON_FLAGS[k], str(v)]
            else:
                parts += ["-a", shlex.quote(f"{k}={v}")]
        return " ".join(parts)
