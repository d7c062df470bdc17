"""dashcam: ask an NVIDIA Nsight Systems profile what went wrong.

The public API, for scripts and notebooks::

    import dashcam
    p = dashcam.Profile.open("run.sqlite")
    dashcam.get_tool("gpu_gaps")(p, {"gpu": 1})      # one tool: its typed result model
    dashcam.summarize(p).paragraph                    # the health summary
    dashcam.compare(before, after).verdict            # the diff of two profiles

The layers, bottom to top (each imports only the ones below it; the import-linter contracts in pyproject.toml check it):
``errors``, ``measure`` and ``text`` (primitives) -> ``profile`` (the loader) -> ``tools`` -> the
reports and the agent -> ``cli``. Names here are imported on first use, so ``import dashcam`` stays cheap.
"""
from __future__ import annotations

__version__ = "0.1.0"

_API = {
    "Profile": "dashcam.profile",
    "get_tool": "dashcam.tools",
    "available_tools": "dashcam.tools",
    "TOOL_NAMES": "dashcam.tools",
    "summarize": "dashcam.reports.summary",
    "compare": "dashcam.reports.diff",
}

__all__ = ["__version__", *_API]


def __getattr__(name: str):
    if name in _API:
        import importlib

        return getattr(importlib.import_module(_API[name]), name)
    raise AttributeError(f"module 'dashcam' has no attribute {name!r}")
