"""range_detail: one NVTX range's analysis — its instances and their durations, what the GPU did while it was open,
and the kernels and copies launched inside it.

The range is every NVTX range (not marks) whose label contains ``label`` (case-insensitive), overlapping the
window; when some label is ``label`` itself, only those (``compute``, not ``faster compute`` too: the others are
``other_labels``). Definitions (docs/definitions.md, "range detail"):

- an instance's duration is clipped to the window; median and spread (shortest, longest) are over instances;
- a capture without GPU activity (``dashcam record`` of a CPU program) is read over its host span
  (profile/host_window.py, as in ``nvtx``): the instances and their durations, no GPU busy, nothing launched;
- while open: the union of the instances (on the profile clock) against the union of all GPU work of the selected
  GPUs (kernels, copies, memsets, graph executions): the GPU busy % of the time the range was open;
- launched inside: kernels and copies whose API call (same pid and correlationId) started on the range's thread
  inside one of its instances (nvtx's attribution rule); their summed durations, each once;
- on its thread inside it: the CUDA API calls that started inside an instance (by function, their time clipped to
  the instance: what the host spent the range on), and the NVTX ranges nested in an instance (by label group),
  over whole instances (a range the window cuts still holds what it holds).
"""
from __future__ import annotations

from collections import Counter

import numpy as np
from pydantic import BaseModel, Field

from dashcam.errors import BadParameter
from dashcam.measure.intervals import merge
from dashcam.profile.host_window import host_window

from .base import Tool, ToolParams, ToolResult, WindowInfo


class Params(ToolParams):
    label: str | None = Field(None, description="Case-insensitive substring of the NVTX range's label; default: the "
                                                "label with the most range time.")


class Launched(BaseModel):
    name: str = Field(description="Kernel short name, or the copy kind (HtoD, DtoH, ...).")
    count: int
    total_ns: int
    bytes: int = 0


class Result(ToolResult):
    label_filter: str
    labels: list[str] = Field(default_factory=list, description="The matching labels, most instances first.")
    instances: int = Field(description="Matching ranges overlapping the window.")
    total_ns: int = 0
    median_ns: float | None = None
    mean_ns: float | None = None
    min_ns: int | None = None
    max_ns: int | None = None
    open_ns: int = Field(0, description="Union of the instances inside the window.")
    gpu_busy_ns: int = Field(0, description="GPU work (union, selected GPUs) while the range was open.")
    gpu_busy_pct: float | None = Field(None, description="gpu_busy_ns as % of open_ns; None without GPU activity.")
    kernel_count: int = 0
    kernel_ns: int = Field(0, description="Summed durations of the kernels launched inside it.")
    copy_count: int = 0
    copy_bytes: int = 0
    copy_ns: int = 0
    kernels: list[Launched] = Field(default_factory=list, description="Launched kernels by name, most time first.")
    copies: list[Launched] = Field(default_factory=list, description="Launched copies by kind, most time first.")
    other_labels: list[str] = Field(default_factory=list, description="Labels that contain the asked text but are "
                                                                      "not it, left out because one label is it.")
    api_calls: list[Launched] = Field(default_factory=list, description="CUDA API calls its thread made inside it, by "
                                      "function, their time inside it, most time first (at most 5).")
    api_ns: int = Field(0, description="Those calls' time inside it, summed.")
    inner_ranges: list[Launched] = Field(default_factory=list, description="NVTX ranges nested in its instances on "
                                         "its thread, by label group, most time first (at most 5).")


def run(profile, params: Params) -> Result:
    w, window_note = host_window(profile, params.start_ms, params.end_ms)
    if params.label is None:  # the label with the most range time
        clip = f'least("end", {w.end_ns}) - greatest(start, {w.start_ns})'
        top = profile.rows(f"""SELECT label FROM nvtx WHERE is_range AND "end" > {w.start_ns} AND start < {w.end_ns}
                               AND label IS NOT NULL GROUP BY 1 ORDER BY sum({clip}) DESC, 1 LIMIT 1""")
        params = params.model_copy(update={"label": top[0][0] if top else ""})
    if not params.label.strip() and profile.has_table("nvtx"):
        raise BadParameter("label must name an NVTX range (a part of its label)")
    devices = profile.check_gpu(params.gpu)
    devs = ", ".join(str(d) for d in devices)
    ranges = profile.rows(
        f"""SELECT pid, tid, start, "end", label FROM nvtx
            WHERE is_range AND "end" > {w.start_ns} AND start < {w.end_ns} AND "end" >= start
              AND strpos(lower(label), lower($1)) > 0 ORDER BY start""", [params.label])
    base = {"tool": "range_detail", "window": WindowInfo.of(w), "label_filter": params.label,
            "notes": [window_note] if window_note else []}
    if not ranges:
        base["notes"].append(f"No NVTX range label contains {params.label!r} in this window." if params.label else
                             "No NVTX ranges in this window.")
        return Result(**base, instances=0)
    other: list[str] = []
    if any(r[4].lower() == params.label.lower() for r in ranges):  # the label itself, not those containing it
        other = sorted({r[4] for r in ranges if r[4].lower() != params.label.lower()})[:5]
        ranges = [r for r in ranges if r[4].lower() == params.label.lower()]
    s = np.array([max(r[2], w.start_ns) for r in ranges], np.int64)
    e = np.array([min(r[3], w.end_ns) for r in ranges], np.int64)
    d = e - s
    opened = merge(s, e)
    ops = profile.rows(f"""SELECT start, "end" FROM gpu_ops WHERE "end" > {int(opened.starts[0])}
                           AND start < {int(opened.ends[-1])} AND device_id IN ({devs})""") if devices else []
    busy = merge(np.array([o[0] for o in ops], np.int64), np.array([o[1] for o in ops], np.int64))
    busy_ns = int(busy.overlap(opened.starts, opened.ends).sum()) if len(busy) else 0
    labels = Counter(r[4] for r in ranges)
    out = {"labels": [k for k, _ in sorted(labels.items(), key=lambda kv: (-kv[1], kv[0]))][:5],
           "instances": len(ranges), "total_ns": int(d.sum()), "median_ns": round(float(np.median(d)), 1),
           "mean_ns": round(float(d.mean()), 1), "min_ns": int(d.min()), "max_ns": int(d.max()),
           "open_ns": opened.total, "gpu_busy_ns": busy_ns,
           "gpu_busy_pct": round(100.0 * busy_ns / opened.total, 3) if opened.total and devices else None}
    if devices:  # without GPU activity nothing was launched
        out.update(_launched(profile, ranges, w, devs))
    out.update(_inside(profile, ranges), other_labels=other)
    return Result(**base, **out)


def _inside(profile, ranges: list[tuple]) -> dict:
    """On each instance's thread: the CUDA API calls that started inside it (time clipped to it) and the NVTX
    ranges nested in it, by name."""
    from dashcam.measure.names import nvtx_group_label

    by_thread: dict[tuple, list] = {}
    for p, t, a, b, _ in ranges:
        by_thread.setdefault((p, t), []).append((a, b))
    pids = ", ".join(str(p) for p in sorted({k[0] for k in by_thread if k[0] is not None})) or "NULL"
    lo, hi = min(r[2] for r in ranges), max(r[3] for r in ranges)

    def tally(rows, nested: bool) -> list[Launched]:
        by: dict[str, list] = {}
        for p, t, name, a, b in rows:
            for x, y in by_thread.get((p, t), []):
                if x <= a < y and (not nested or (b <= y and (a, b) != (x, y))):
                    v = by.setdefault(nvtx_group_label(name) if nested else name, [0, 0])
                    v[0] += 1
                    v[1] += int(min(b, y) - a)
                    break
        return [Launched(name=k, count=v[0], total_ns=v[1])
                for k, v in sorted(by.items(), key=lambda kv: (-kv[1][1], kv[0]))]

    calls = tally(profile.rows(f"""SELECT pid, tid, name, start, "end" FROM api WHERE pid IN ({pids})
                                   AND start >= {lo} AND start < {hi}""") if profile.has_table("runtime") else [],
                  nested=False)
    inner = tally(profile.rows(f"""SELECT pid, tid, label, start, "end" FROM nvtx WHERE is_range AND pid IN ({pids})
                                   AND start >= {lo} AND start < {hi} AND "end" <= {hi} AND label IS NOT NULL"""),
                  nested=True)
    return {"api_calls": calls[:5], "api_ns": sum(c.total_ns for c in calls), "inner_ranges": inner[:5]}


def _launched(profile, ranges: list[tuple], w, devs: str) -> dict:
    """Kernels and copies whose launch call started on a range's thread inside one of its instances."""
    by_thread: dict[tuple, list] = {}
    for p, t, a, b, _ in ranges:
        by_thread.setdefault((p, t), []).append((a, b))
    pids = ", ".join(str(p) for p in sorted({k[0] for k in by_thread}))
    lo, hi = min(r[2] for r in ranges), max(r[3] for r in ranges)
    calls = profile.rows(f"""SELECT pid, tid, correlation_id, start FROM api
                             WHERE pid IN ({pids}) AND start >= {lo} AND start < {hi}""")
    keys = {(int(p), int(c)) for p, t, c, st in calls
            if any(a <= st < b for a, b in by_thread.get((p, t), []))}
    clip = f'least("end", {w.end_ns}) - greatest(start, {w.start_ns})'
    inside = f'"end" > {w.start_ns} AND start < {w.end_ns} AND device_id IN ({devs}) AND pid IN ({pids})'
    kern: dict[str, list] = {}
    for pid, corr, short, dur in profile.rows(
            f"SELECT pid, correlation_id, short_name, {clip} FROM kernels WHERE {inside}"):
        if (int(pid), int(corr)) in keys:
            k = kern.setdefault(short, [0, 0])
            k[0] += 1
            k[1] += int(dur)
    cop: dict[str, list] = {}
    for pid, corr, kind, nbytes, dur in profile.rows(
            f"SELECT pid, correlation_id, kind, bytes, {clip} FROM memcpy WHERE {inside} AND NOT migration"):
        if (int(pid), int(corr)) in keys:
            c = cop.setdefault(str(kind), [0, 0, 0])
            c[0] += 1
            c[1] += int(dur)
            c[2] += int(nbytes)
    # most time first, ties by name (not by the order the rows came in)
    kernels = [Launched(name=k, count=v[0], total_ns=v[1])
               for k, v in sorted(kern.items(), key=lambda kv: (-kv[1][1], kv[0]))]
    copies = [Launched(name=k, count=v[0], total_ns=v[1], bytes=v[2])
              for k, v in sorted(cop.items(), key=lambda kv: (-kv[1][1], kv[0]))]
    return {"kernel_count": sum(k.count for k in kernels), "kernel_ns": sum(k.total_ns for k in kernels),
            "copy_count": sum(c.count for c in copies), "copy_ns": sum(c.total_ns for c in copies),
            "copy_bytes": sum(c.bytes for c in copies), "kernels": kernels[:5], "copies": copies[:5]}


TOOL = Tool(
    name="range_detail",
    summary=("One NVTX range's analysis (label substring): instances, duration per instance (median, mean, shortest, "
             "longest), GPU busy % while it was open, the kernels and copies launched inside it."),
    params=Params, result=Result, run=run,
)
