"""What every tool shares: the common parameters, the result base and the registry entry.

A tool is a module in ``dashcam.tools`` with ``Params`` (a pydantic model whose JSON
schema is what the LLM sees), ``Result`` (a pydantic model: the ``--json`` output) and
a pure function ``run(profile, params) -> Result``; it exports them as ``TOOL``.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field, model_serializer

from dashcam.measure.definitions import Window


class ToolParams(BaseModel):
    """Parameters every tool accepts."""

    model_config = ConfigDict(extra="forbid")

    gpu: int | None = Field(None, description="GPU (device id) to analyse; all GPUs when omitted.")
    start_ms: float | None = Field(None, ge=0, description="Window start, ms from the first GPU activity.")
    end_ms: float | None = Field(None, ge=0, description="Window end, ms from the first GPU activity.")
    limit: int = Field(10, ge=1, le=1000, description="Rows in ranked lists.")


class WindowInfo(BaseModel):
    start_ns: int = Field(description="Window start on the profile clock (ns).")
    end_ns: int = Field(description="Window end on the profile clock (ns).")
    length_ns: int
    start_ms: float = Field(description="Window start in ms from the start of the profile's GPU activity.")
    end_ms: float

    @classmethod
    def of(cls, w: Window) -> WindowInfo:
        return cls(start_ns=w.start_ns, end_ns=w.end_ns, length_ns=w.length_ns,
                   start_ms=round(w.start_ms, 6), end_ms=round(w.end_ms, 6))


class OmitNone(BaseModel):
    """A model whose fields named in ``OMIT_NONE`` are left out of its JSON while None: figures only some captures
    hold (CUDA graphs, GPU metrics), so the JSON of a capture without them stays as it was."""

    OMIT_NONE: ClassVar[frozenset[str]] = frozenset()

    @model_serializer(mode="wrap")
    def _omit_none(self, handler):
        data = handler(self)
        if isinstance(data, dict):
            for k in self.OMIT_NONE:
                if k in data and data[k] is None:
                    del data[k]
        return data


class ToolResult(BaseModel):
    tool: str
    window: WindowInfo | None = None
    notes: list[str] = Field(default_factory=list,
                             description="Caveats: what is missing from the profile, what was cut.")


def compact_schema(node):
    """Drop pydantic's titles and null defaults and turn ``anyOf [X, null]`` into X, to save model context."""
    if isinstance(node, list):
        return [compact_schema(x) for x in node]
    if not isinstance(node, dict):
        return node
    out = {}
    for k, v in node.items():
        if k == "title" and isinstance(v, str):
            continue
        if k == "default" and v is None:
            continue
        out[k] = compact_schema(v)
    any_of = out.get("anyOf")
    if isinstance(any_of, list) and len(any_of) == 2 and {"type": "null"} in any_of:
        other = next(x for x in any_of if x != {"type": "null"})
        del out["anyOf"]
        out = {**other, **out}
    return out


@dataclass(frozen=True)
class Tool:
    name: str
    summary: str
    params: type[ToolParams]
    result: type[ToolResult]
    run: Callable[..., ToolResult]

    def json_schema(self) -> dict:
        """The OpenAI function-tool description of this tool (compact: no titles, nullable as plain types)."""
        schema = compact_schema(self.params.model_json_schema())
        return {"type": "function", "function": {"name": self.name, "description": self.summary,
                                                  "parameters": schema}}

    def render(self, result: ToolResult, console) -> None:
        """The result as rich tables: the tool module's own ``render`` when it has one, else the generic layout."""
        import importlib

        from dashcam.text.tables import render

        mod = importlib.import_module(f"dashcam.tools.{self.name}")
        (getattr(mod, "render", None) or render)(result, console)

    def __call__(self, profile, params: ToolParams | dict | None = None) -> ToolResult:
        if params is None:
            params = self.params()
        elif isinstance(params, dict):
            params = self.params.model_validate(params)
        return self.run(profile, params)
