"""``ToolRuns``: the one memo of tool runs on a profile.

Every surface that answers from tools (the findings engine, summary, diff, ask's templates, chat)
runs them through one ``ToolRuns``: ``get(tool, **args)`` validates the arguments with the tool's
``Params``, runs it once per distinct call and returns its typed result model; each distinct call
is recorded, in order, as a ``ToolCall`` and an ``Evidence`` (the result as JSON data, which the
grounding check and the ``--json`` outputs read). Arguments equal to None are dropped, so
``get("gpu_gaps", gpu=None)`` and ``get("gpu_gaps")`` are one call.
"""
from __future__ import annotations

import json

from dashcam.errors import BadParameter, DashcamError
from dashcam.evidence.models import Evidence, ToolCall
from dashcam.tools import TOOL_NAMES, ToolResult, get_tool


def run_tool(profile, name: str, args: dict | None = None) -> tuple[ToolResult, Evidence]:
    """Validate ``args`` with the tool's Params model and run it once: (typed result, evidence).

    The evidence keeps the arguments that differ from the defaults, so its command is the shortest
    that reproduces the result. Dashcam errors pass through.
    """
    if name not in TOOL_NAMES:
        raise BadParameter(f"unknown tool {name!r}; tools: {', '.join(TOOL_NAMES)}")
    tool = get_tool(name)
    params = tool.params.model_validate(args or {})
    result = tool.run(profile, params)
    used = params.model_dump(exclude_defaults=True)
    return result, Evidence(tool=name, args=used, result=result.model_dump(mode="json"))


class ToolRuns:
    """Tool runs on one profile, each distinct call once; the calls and evidence in call order."""

    def __init__(self, profile) -> None:
        self.profile = profile
        self.calls: list[ToolCall] = []
        self.evidence: list[Evidence] = []
        self.failures: list[str] = []  # "tool failed: why", from maybe()
        self._done: dict[str, tuple[ToolResult, Evidence]] = {}

    @staticmethod
    def key(tool: str, args: dict) -> str:
        return tool + ":" + json.dumps(args, sort_keys=True, default=str)

    def run(self, tool: str, **args) -> tuple[ToolResult, Evidence]:
        """(typed result, evidence) of ``tool`` with ``args`` (None values dropped), run once."""
        args = {k: v for k, v in args.items() if v is not None}
        key = self.key(tool, args)
        if key not in self._done:
            result, ev = run_tool(self.profile, tool, args)
            self._done[key] = (result, ev)
            self.calls.append(ToolCall(name=tool, args=args))
            self.evidence.append(ev)
        return self._done[key]

    def get(self, tool: str, **args) -> ToolResult:
        """The typed result of ``tool`` with ``args``, run once."""
        return self.run(tool, **args)[0]

    def maybe(self, tool: str, **args) -> ToolResult | None:
        """``get``, or None (and a line in ``failures``) when the tool cannot answer on this profile."""
        try:
            return self.get(tool, **args)
        except DashcamError as e:
            self.failures.append(f"{tool} failed: {e}")
            return None

    def evidence_of(self, tool: str, **args) -> Evidence:
        """The evidence of a call already made (or made now)."""
        return self.run(tool, **args)[1]

    def record(self, ev: Evidence) -> Evidence:
        """Keep evidence that is no tool's call (the findings engine's savings: evidence.models.IMPACT), once."""
        if not any(e.tool == ev.tool and e.result == ev.result for e in self.evidence):
            self.evidence.append(ev)
        return ev

    def notes(self) -> list[str]:
        """The tools' notes, each once, in call order."""
        out: list[str] = []
        for ev in self.evidence:
            for n in ev.result.get("notes") or []:
                if n not in out:
                    out.append(n)
        return out
