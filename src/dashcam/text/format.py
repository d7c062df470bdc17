"""Numbers as people read them: durations, percentages, byte counts, names, lists of ids.

One module for every surface. Tables (``fmt_*``) show ns as ms/µs/ns with fixed decimals; prose
(``duration``, ``percent``, ``size``...) trims trailing zeros so the grounding check can read each
number back (agent answers, summaries, PR comments).
"""
from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from dashcam.text.shorten import shorten


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


# -- prose: answers, summaries, PR comments -------------------------------------------------------
# Every number a sentence shows comes from a tool result, only reformatted: ns as ms (s at 10 s and
# above, µs under 0.1 ms) with at most 3 decimals, percentages with 1 decimal, bytes as KB/MB/GB.

def trim(x: float, decimals: int = 3) -> str:
    """``x`` with at most ``decimals`` decimals, trailing zeros dropped ("2.5", "12", "0")."""
    s = f"{x:.{decimals}f}"
    if "." in s:
        s = s.rstrip("0").rstrip(".")
    return "0" if s in ("-0", "") else s


def duration(ns: float | None) -> str:
    """A duration in ns as ms (s at 10 s and above, µs below 0.1 ms), at most 3 decimals."""
    if ns is None:
        return "-"
    v = float(ns)
    if v == 0:
        return "0 ms"
    if abs(v) >= 10e9:
        return f"{trim(v / 1e9)} s"
    if abs(v) >= 1e5:
        return f"{trim(v / 1e6)} ms"
    return f"{trim(v / 1e3)} µs"


def at_ms(ms: float) -> str:
    """A time stamp already in ms from the start of GPU activity."""
    return f"{trim(ms)} ms"


def percent(v: float | None) -> str:
    """A percentage with one decimal: "59.2 %"."""
    return "-" if v is None else f"{v:.1f} %"


def size(nbytes: int) -> str:
    """Bytes as GB/MB/KB (1e3 base) with at most 2 decimals, or "N bytes"."""
    v = float(nbytes)
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if abs(v) >= scale:
            return f"{trim(v / scale, 2)} {unit}"
    return f"{int(v)} bytes"


def name(s: str | None, others=()) -> str:
    """Profile text in backticks (inert in markdown), cut to a readable length apart from ``others`` shown beside
    it (text/shorten.py)."""
    return f"`{shorten((s or '?').replace('`', chr(39)), others=others)}`"


def count(n: int, word: str, plural: str | None = None) -> str:
    """ "1 launch", "2 launches"."""
    return f"{n} {word if n == 1 else plural or word + 's'}"


def ids(values: list[int]) -> str:
    """GPU ids as "0", "0 and 1", "0, 1 and 2"."""
    v = [str(x) for x in values]
    return v[0] if len(v) == 1 else ", ".join(v[:-1]) + " and " + v[-1]


def gpus(values: list[int], all_gpus: list[int] | None = None) -> str:
    """ "GPU 1", "GPUs 0 and 1", or "all GPUs" when ``values`` is every GPU (and more than one)."""
    if len(values) == 1:
        return f"GPU {values[0]}"
    if all_gpus is not None and list(values) == list(all_gpus):
        return "all GPUs"
    return "GPUs " + ids(values)


def sentences(*parts: str | None) -> str:
    """Non-empty sentences joined by one space."""
    return " ".join(x.strip() for x in parts if x)


def first_sentence(text: str, limit: int = 200) -> str:
    """The first sentence of ``text`` (up to . ! or ? followed by a space or the end), at most ``limit`` chars."""
    import re

    text = " ".join((text or "").split())
    m = re.search(r"(?<=[.!?])\s", text)
    s = text[:m.start()] if m else text
    return s if len(s) <= limit else s[:limit - 1] + "…"


# -- fixed-width figures: the diff's tables, the SVG's tooltips -----------------------------------

def ms_fixed(ns: float | None, signed: bool = False) -> str:
    """ns as ms with 3 decimals ("-" when None; "+1.500 ms" when signed; |x| < 0.5 µs shows 0)."""
    if ns is None:
        return "-"
    v = ns / 1e6
    if abs(v) < 0.0005:
        v = 0.0
    return f"{v:+.3f} ms" if signed else f"{v:.3f} ms"


def pct_change(p: float | None, unit: str = "%") -> str:
    """A signed change with one decimal ("+12.5%", "n/a" when None)."""
    if p is None:
        return "n/a"
    if abs(p) < 0.05:
        p = 0.0
    return f"{p:+.1f}{unit}"


def bytes_signed(n: int, signed: bool = False) -> str:
    s = fmt_bytes(abs(n))
    return ("-" if n < 0 else "+") + s if signed else s


def duration_label(ns: int) -> str:
    """'400.0 µs', '8.020 ms', '1.500 s', '850 ns' (picture tooltips)."""
    ns = int(ns)
    if ns >= 1_000_000_000:
        return f"{ns / 1e9:.3f} s"
    if ns >= 1_000_000:
        return f"{ns / 1e6:.3f} ms"
    if ns >= 1_000:
        return f"{ns / 1e3:.1f} µs"
    return f"{ns} ns"
