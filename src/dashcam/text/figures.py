"""One line per tool result for the evidence table of an answer, in words a person reads: ``GPU 1: kernel-busy
40.8 %, idle 69.59 ms (59.2 %), 12 gaps, mostly cpu_work``, not the result model's field dump.

The line holds the result's first top-level figures (versions, ids and clock time stamps left out), then the
rows of its first list: for per-GPU rows those of the GPUs the answer talks about (main one first, at most
MAX_DEVICE_ROWS) as ``GPU N: ...``, else its first row, named by its name. Time shares are called by their
names in docs/definitions.md (kernel-busy, copy-busy, busy, idle, kernel-idle).
"""
from __future__ import annotations

from dashcam.text.format import duration, percent, size
from dashcam.text.shorten import shorten

MAX_DEVICE_ROWS = 2  # device rows shown per tool in the evidence table
MAX_FIGURES = 4  # figures per part (the top level, each row)
MAX_TOP = 3  # top-level figures before the rows

# A field's name in the line (after its unit suffix is dropped); any other: its words.
WORDS = {"kernel_busy": "kernel-busy", "copy_busy": "copy-busy", "busy": "busy", "idle": "idle",
         "kernel_idle": "kernel-idle", "dominant_cause": "mostly", "window": "window", "api_calls": "API calls",
         "nvtx_ranges": "NVTX ranges", "gpu": "GPU", "api": "API call", "nvtx": "NVTX range"}
# A tool's own field whose plain words would name the wrong time share (docs/definitions.md): iterations'
# gpu_busy_pct is kernel-busy (its kernels' union), range_detail's and api_detail's any GPU work (busy).
TOOL_WORDS = {"iterations": {"gpu_busy": "kernel-busy"}, "range_detail": {"gpu_busy": "busy"},
              "api_detail": {"gpu_busy": "busy"}}
PLURALS = {"copy": "copies", "GPU": "GPUs", "process": "processes"}
# Shown first in a row when present, in this order.
FIRST = ("kernel_busy", "copy_busy", "busy", "idle", "kernel_idle", "gap_count", "dominant_cause", "kernel_count")
NAME_KEYS = ("name", "label", "function", "kernel", "api", "family", "group", "range")
# Not figures: clock time stamps, ids, versions, names (a row's name heads it).
SKIP_SUFFIXES = ("start_ns", "end_ns", "_id", "_device", "_gpu", "_version", "_ms")
IDS = ("pid", "tid")  # a process or thread id names a thread: written as nsys does, no thousands separator


def _unit(key: str) -> tuple[str, str]:
    """(base, unit) of a field name: ("idle", "ns") for idle_ns; unit "" when it has none."""
    for unit in ("ns", "pct", "count", "bytes"):
        if key.endswith("_" + unit):
            return key[: -len(unit) - 1], unit
    if key.startswith("pct_"):
        return key[4:], "pct"
    if key in ("ns", "pct", "bytes", "count"):
        return key, key
    return key, ""


def _is_figure(key: str, v) -> bool:
    return not (v is None or v is False or isinstance(v, (dict, list)) or key in ("tool", "window", "notes")
                or key.endswith(SKIP_SUFFIXES) or key in NAME_KEYS or key.startswith("full_"))


def _word(base: str, words: dict | None = None) -> str:
    if words and base in words:
        return words[base]
    if base in WORDS:
        return WORDS[base]
    for key in ("kernel_busy", "copy_busy", "kernel_idle"):  # a share inside a longer name: least_kernel_busy
        base = base.replace(key, WORDS[key])
    return base.replace("_", " ")


def _plural(word: str) -> str:
    return PLURALS.get(word, word + "s")


def _value(unit: str, v) -> str:
    if isinstance(v, bool):
        return "yes" if v else "no"
    if unit == "ns":
        return duration(v)
    if unit == "pct":
        return percent(v)
    if unit == "bytes":
        return size(v)
    if isinstance(v, int):
        return f"{v:,}"
    if isinstance(v, float):
        return f"{v:,.4g}"
    return shorten(str(v), 40)


def figures(data: dict, limit: int = MAX_FIGURES, words: dict | None = None) -> list[str]:
    """The first ``limit`` figures of one result level or row in words (``words``: the tool's own, TOOL_WORDS); a
    share's time and percent as one figure ("idle 69.59 ms (59.2 %)")."""
    by_base: dict[str, dict[str, object]] = {}
    for k, v in data.items():
        if _is_figure(k, v):
            base, unit = _unit(k)
            by_base.setdefault(base if unit != "count" else k, {})[unit] = v
    order = sorted(by_base, key=lambda b: FIRST.index(b) if b in FIRST else len(FIRST))
    out = []
    for base in order[:limit]:
        units = by_base[base]
        if "count" in units:
            n = units["count"]
            word = _word(_unit(base)[0])
            out.append(f"count {n:,}" if base == "count" else f"{n:,} {word if n == 1 else _plural(word)}")
        elif "ns" in units and "pct" in units:
            out.append(f"{_word(base, words)} {duration(units['ns'])} ({percent(units['pct'])})")
        else:
            unit, v = next(iter(units.items()))
            shown = str(v) if base in IDS else _value(unit, v)
            out.append(shown if base == unit else f"{_word(base, words)} {shown}")
    return out


def _row_name(row: dict) -> str | None:
    if row.get("device_id") is not None:
        return f"GPU {row['device_id']}"
    for k in NAME_KEYS:
        if isinstance(row.get(k), str) and row[k]:
            return shorten(row[k], 60)
    return None


def _weight(row: dict) -> tuple:
    """A row's weight for the one row shown: its time, else its bytes, else its count (the first of equal rows)."""
    for k in ("total_ns", "bytes", "count"):
        if isinstance(row.get(k), (int, float)):
            return (row[k],)
    return (0,)


def evidence_row(result: dict, gpus: list[int] | None = None) -> str:
    """The evidence table's line for one tool result (see the module docstring)."""
    words = TOOL_WORDS.get(result.get("tool"))
    parts = ["; ".join(figures(result, MAX_TOP, words))] if figures(result, MAX_TOP, words) else []
    for v in result.values():
        if isinstance(v, list) and v and isinstance(v[0], dict):
            rows = [max(v, key=_weight)]  # the row with the most time (bytes, count): memcpy's kinds are in fixed order
            if gpus and "device_id" in v[0]:
                by_id = {r.get("device_id"): r for r in v}
                rows = [by_id[g] for g in gpus if g in by_id][:MAX_DEVICE_ROWS] or rows
            for row in rows:
                head = _row_name(row)
                parts.append((f"{head}: " if head else "") + ", ".join(figures(row, words=words)))
            break
    return "; ".join(p for p in parts if p) or "-"
