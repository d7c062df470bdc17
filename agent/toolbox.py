"""Run a tool by name for the agent: validate its arguments, run it, keep the evidence."""
from __future__ import annotations

from dashcam.tools import TOOL_NAMES, get_tool

from .models import Evidence


def run_tool(profile, name: str, args: dict | None = None) -> Evidence:
    """Validate ``args`` with the tool's Params model and run it; dashcam errors pass through."""
    return run_tool_result(profile, name, args)[1]


def run_tool_result(profile, name: str, args: dict | None = None):
    """``run_tool``, also returning the tool's result model (for rendering): (result, evidence)."""
    if name not in TOOL_NAMES:
        from dashcam.errors import BadParameter

        raise BadParameter(f"unknown tool {name!r}; tools: {', '.join(TOOL_NAMES)}")
    tool = get_tool(name)
    params = tool.params.model_validate(args or {})
    result = tool.run(profile, params)
    used = params.model_dump(exclude_defaults=True)
    return result, Evidence(tool=name, args=used, result=result.model_dump(mode="json"))


def tool_schemas() -> list[dict]:
    """The OpenAI function-tool descriptions of every tool."""
    from dashcam.tools import available_tools

    return [t.json_schema() for t in available_tools()]
