"""Numbers as people read them: durations, percentages, byte counts, names, lists of ids.

One module for every surface. Tables (``fmt_*``) show ns as ms/µs/ns with fixed decimals; prose
(``duration``, ``percent``, ``size``...) trims trailing zeros so the grounding check can read each
number back (agent answers, summaries, PR comments).
"""
from __future__ import annotations

from typing import Any

from pydantic import BaseModel


def fmt_ns(v: float | int | None) -> str:
    if v is None:
        return "-"
    v = float(v)
    if abs(v) >= 10e9:
        return f"{v / 1e9:.2f} s"
    if abs(v) >= 1e6:
        return f"{v / 1e6:.3f} ms"
    if abs(v) >= 1e3:
        return f"{v / 1e3:.2f} µs"
    return f"{v:.0f} ns"


def fmt_bytes(v: float | int | None) -> str:
    if v is None:
        return "-"
    v = float(v)
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if abs(v) >= size:
            return f"{v / size:.2f} {unit}"
    return f"{v:.0f} B"


def fmt_value(key: str, v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, dict):
        return ", ".join(f"{k}={fmt_value(key, x)}" for k, x in v.items()) or "-"
    if isinstance(v, list):
        if v and all(not isinstance(x, (dict, BaseModel)) for x in v):
            return ", ".join(str(x) for x in v)
        return f"{len(v)} items"
    if isinstance(v, BaseModel):
        return ", ".join(f"{k}={fmt_value(k, x)}" for k, x in v.model_dump().items())
    if key.endswith(("start_ns", "end_ns")):
        return f"{int(v):,} ns"  # a timestamp on the profile clock, not a duration
    if key.endswith("_ns") or key in ("ns",):
        return fmt_ns(v)
    if key.endswith("_ms") or key == "ms":
        return f"{float(v):,.3f} ms"
    if key.endswith("_pct") or key == "pct" or key.startswith("pct_"):
        return f"{float(v):.1f}%"
    if key == "bytes" or key.endswith("_bytes"):
        return fmt_bytes(v)
    if isinstance(v, float):
        return f"{v:.4g}" if abs(v) < 1000 else f"{v:,.1f}"
    return str(v)
