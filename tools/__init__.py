"""The deterministic analysis tools, one module each. ``get_tool(name)`` imports on demand."""
from __future__ import annotations

import importlib

from .base import Tool, ToolParams, ToolResult

TOOL_NAMES = [
    "overview",
    "workload",
    "top_kernels",
    "gpu_gaps",
    "cpu",
    "launch_latency",
    "kernel_detail",
    "memcpy",
    "sync",
    "api",
    "api_detail",
    "os_runtime",
    "nvtx",
    "range_detail",
    "streams",
    "nccl",
    "feature_time",
    "iterations",
    "step_copies",
    "small_kernels",
    "cuda_graphs",
    "gpu_metrics",
    "memory",
    "sql",
]


def get_tool(name: str) -> Tool:
    if name not in TOOL_NAMES:
        raise KeyError(name)
    return importlib.import_module(f"dashcam.tools.{name}").TOOL


def available_tools() -> list[Tool]:
    """The tools whose modules exist, in registry order."""
    out = []
    for n in TOOL_NAMES:
        try:
            out.append(get_tool(n))
        except ModuleNotFoundError:
            continue
    return out


def tool_schemas() -> list[dict]:
    """The OpenAI function-tool descriptions of every tool (what the LLM sees)."""
    return [t.json_schema() for t in available_tools()]


__all__ = ["Tool", "ToolParams", "ToolResult", "TOOL_NAMES", "get_tool", "available_tools", "tool_schemas"]
