"""feature_time: how much time a feature of the program takes — MPI, NCCL, run-time compilation (JIT) — looked for by
name in every source the capture has: NVTX ranges, OS runtime calls, CUDA API calls and kernels.

The names that mean each feature are ``dashcam.measure.labels.FEATURES`` (one pattern per source, matched
case-insensitively with ``re.search``). Per source: the matching calls or ranges overlapping the window, their
summed durations clipped to the window, and the union of them (time at least one was running, over all threads
or GPUs); ``total_ns`` is the largest union of the sources (sources overlap: an MPI NVTX range wraps its OS
runtime calls, so they are not added). When nothing matches, ``looked_in`` says which sources the capture has and
``capture`` what would record the feature.
"""
from __future__ import annotations

import re
from typing import Literal

import numpy as np
from pydantic import BaseModel, Field

from dashcam.measure.intervals import merge
from dashcam.measure.labels import FEATURE_CAPTURE, FEATURES

from .base import Tool, ToolParams, ToolResult, WindowInfo


class Params(ToolParams):
    feature: Literal["mpi", "nccl", "jit"] = Field("mpi", description="mpi, nccl or jit (run-time compilation).")


class Named(BaseModel):
    name: str
    count: int
    total_ns: int
    mean_ns: float = Field(0.0, description="total_ns / count: one range's, call's or kernel's time.")


class Source(BaseModel):
    source: str = Field(description="nvtx, osrt, api or kernels.")
    recorded: bool = Field(description="Whether the capture has this source at all.")
    count: int = Field(0, description="Matching ranges, calls or kernels overlapping the window.")
    summed_ns: int = Field(0, description="Their durations clipped to the window, summed.")
    union_ns: int = Field(0, description="Time at least one of them was running (clipped to the window).")
    pct_of_window: float = Field(0.0, description="union_ns as % of the window.")
    names: list[Named] = Field(default_factory=list, description="By name, most time first (at most 5).")


class Result(ToolResult):
    feature: str
    found: bool = Field(description="Some source holds the feature.")
    total_ns: int = Field(description="The largest union_ns over the sources.")
    pct_of_window: float
    main_source: str | None = Field(None, description="The source of total_ns.")
    sources: list[Source]
    looked_in: list[str] = Field(description="The sources this capture records (where the names were looked for).")
    capture: str = Field(description="What capture option records the feature.")


def _rows(profile, sql: str) -> list[tuple]:
    try:
        return profile.rows(sql)
    except Exception:  # no such view or table in this capture
        return []


def _source(profile, w, source: str, pattern: str | None, devices: list[int]) -> Source:
    clip = f'least("end", {w.end_ns}) AS e, greatest(start, {w.start_ns}) AS s'
    inside = f'"end" > {w.start_ns} AND start < {w.end_ns} AND "end" >= start'
    if source == "nvtx":
        recorded = profile.has_table("nvtx")
        rows = _rows(profile, f"SELECT label, {clip} FROM nvtx WHERE is_range AND {inside}") if recorded else []
    elif source == "api":
        recorded = profile.has_table("runtime")
        rows = _rows(profile, f"SELECT name, {clip} FROM api WHERE {inside}") if recorded else []
    elif source == "kernels":
        recorded = profile.has_table("kernel")
        rows = _rows(profile, f"SELECT short_name, {clip} FROM kernels WHERE {inside} AND device_id IN "
                              f"({', '.join(str(d) for d in devices)})") if recorded else []
    else:
        from dashcam.profile.cpu_source import source as cpu_source

        src = cpu_source(profile)
        recorded = src.has("OSRT_API")
        rows = [(n, b, a) for n, a, b in src.osrt_matching(w.start_ns, w.end_ns, pattern)] \
            if recorded and pattern else []
    if pattern is None:
        return Source(source=source, recorded=recorded)
    rx = re.compile(pattern, re.IGNORECASE)
    hit = [r for r in rows if r[0] and rx.search(r[0])]
    if not hit:
        return Source(source=source, recorded=recorded)
    s = np.array([r[2] for r in hit], np.int64)
    e = np.array([r[1] for r in hit], np.int64)
    union = merge(s, e).total
    by: dict[str, list] = {}
    for n, a, b in hit:
        x = by.setdefault(n, [0, 0])
        x[0] += 1
        x[1] += int(a - b)
    names = [Named(name=k, count=v[0], total_ns=v[1], mean_ns=round(v[1] / v[0], 1) if v[0] else 0.0)
             for k, v in sorted(by.items(), key=lambda kv: (-kv[1][1], kv[0]))]
    return Source(source=source, recorded=recorded, count=len(hit), summed_ns=int((e - s).sum()), union_ns=union,
                  pct_of_window=round(100.0 * union / w.length_ns, 3) if w.length_ns else 0.0, names=names[:5])


def run(profile, params: Params) -> Result:
    w = profile.window(params.start_ms, params.end_ms)
    devices = profile.check_gpu(params.gpu)
    pats = FEATURES[params.feature]
    sources = [_source(profile, w, s, pats[s], devices) for s in ("nvtx", "osrt", "api", "kernels")]
    best = max(sources, key=lambda x: x.union_ns)
    found = best.union_ns > 0 or any(x.count for x in sources)
    return Result(tool="feature_time", window=WindowInfo.of(w), feature=params.feature, found=found,
                  total_ns=best.union_ns, pct_of_window=best.pct_of_window,
                  main_source=best.source if found else None, sources=sources,
                  looked_in=[x.source for x in sources if x.recorded and pats[x.source] is not None],
                  capture=FEATURE_CAPTURE[params.feature])


TOOL = Tool(
    name="feature_time",
    summary=("Time in MPI, NCCL or run-time compilation (JIT/NVRTC/module loading), found by name in NVTX ranges, OS "
             "runtime calls, CUDA API calls and kernels; when absent, where it was looked for and what would record "
             "it."),
    params=Params, result=Result, run=run,
)
