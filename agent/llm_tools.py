"""The tools the model is offered for one question: the set the question needs, in a lean form.

A CPU server reads every prompt token before it answers, and the first request carries all the tools'
schemas, so they are kept small (docs/ask.md, "Local servers", has the measured token counts):

- **lean schemas**: no ``additionalProperties`` (the arguments are validated here anyway), no
  parameter a tool ignores (sql's gpu/start_ms/end_ms/limit), no ``start_ms``/``end_ms`` unless the
  question names a time window (small models fill in every parameter they are shown, with made-up
  times), and the parameters every tool shares described in a few words;
- **the set the question needs**: when the question's intent is a specific one (copies, NCCL, NVTX,
  ...), the tools that intent's answer calls (intent_table.py), its runner-up's, and the general ones
  (CORE); a general question (health, slowness, overview, comparing GPUs) gets every tool but sql,
  and a question no intent places gets every tool (sql is the last resort). The detail tools of one
  kernel, NVTX range or CUDA call are offered when the question names one. A call of a tool outside
  the set still runs: the set is what the model is shown, not what it may do.
"""
from __future__ import annotations

import copy

from dashcam.tools import tool_schemas

from .models import Targets

CORE = ("overview", "workload", "gpu_gaps", "top_kernels")  # offered for every question
GENERAL_INTENTS = {"healthy", "slow", "overview", "compare_gpus"}  # every tool but sql
LAST_RESORT = "sql"
WINDOW_PARAMS = ("start_ms", "end_ms")  # offered only when the question names a time window
DETAIL_TOOLS = {"kernel_detail": "kernel", "range_detail": "nvtx", "api_detail": "api"}  # tool -> target it needs
SHARED_PARAMS = {
    "gpu": "GPU id; all GPUs when omitted.",
    "start_ms": "Window start, ms from the first GPU activity.",
    "end_ms": "Window end, ms from the first GPU activity.",
    "limit": "Rows in ranked lists.",
}


def lean(schema: dict, window: bool = True) -> dict:
    """One tool's schema, lean (module docstring); ``window``: keep start_ms/end_ms."""
    out = copy.deepcopy(schema)
    params = out["function"]["parameters"]
    params.pop("additionalProperties", None)
    props = params.get("properties", {})
    for name in list(props):
        desc = props[name].get("description", "")
        if desc.startswith("Ignored by") or (not window and name in WINDOW_PARAMS):
            del props[name]
        elif name in SHARED_PARAMS:
            props[name]["description"] = SHARED_PARAMS[name]
    return out


def tool_names_for(question: str, targets: Targets) -> list[str] | None:
    """The tools to offer for ``question`` (in the registry's order), or None for every tool."""
    from .intent_table import INTENTS
    from .intents import classify_question

    found = classify_question(question, targets)
    intents = [i for i in [*(found.intents or []), found.intent, found.runner_up] if i]
    if not found.intent or found.intent == "unknown":
        return None
    if found.intent in GENERAL_INTENTS:
        return [t["function"]["name"] for t in tool_schemas() if t["function"]["name"] != LAST_RESORT]
    wanted = set(CORE)
    for name in intents:
        entry = INTENTS.get(name)
        if entry is not None:
            wanted.update(entry.tools)
    return [t["function"]["name"] for t in tool_schemas() if t["function"]["name"] in wanted]


def offered_tools(question: str, targets: Targets) -> list[dict]:
    """The lean schemas of the tools offered for ``question``."""
    names = tool_names_for(question, targets)
    window = bool(targets.window_args())
    out = []
    for t in tool_schemas():
        name = t["function"]["name"]
        if name in DETAIL_TOOLS:  # one kernel's, range's or CUDA call's detail: when the question names one
            if getattr(targets, DETAIL_TOOLS[name], None):
                out.append(lean(t, window))
        elif names is None or name in names:
            out.append(lean(t, window))
    return out
