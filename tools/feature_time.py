"""feature_time: how much time a feature of the program takes — MPI, NCCL, run-time compilation (JIT), or any activity
the user names (the optimizer, the backward pass, GEMM kernels, file I/O, "halo exchange") — looked for by name in
every source the capture has: NVTX ranges, OS runtime calls, CUDA API calls and kernels.

The names that mean each feature are ``dashcam.measure.labels.FEATURES`` (one pattern per source, matched
case-insensitively with ``re.search``); an activity's are ``dashcam.measure.activities`` (its ACTIVITIES entry,
else its words literally; when the words together match nothing, each word of ACTIVITY_WORD_MIN letters or more
alone, leftmost first: ``matched`` says which). Per source: the matching calls or ranges overlapping the window, their
summed durations clipped to the window, and the union of them (time at least one was running, over all threads
or GPUs); ``total_ns`` is the largest union of the sources (sources overlap: an MPI NVTX range wraps its OS
runtime calls, so they are not added). Apart from those, the matching ranges and calls outside the window
(``outside_*``: the window is the GPU's, so MPI_Init before the first kernel and the output written after the last
are there). When nothing matches, ``looked_in`` says which sources the capture has and
``capture`` what would record the feature.
"""
from __future__ import annotations

import re
from typing import Literal

import numpy as np
from pydantic import BaseModel, Field

from dashcam.measure.activities import ACTIVITIES, FAMILY_OF, capture_advice, patterns
from dashcam.measure.intervals import merge
from dashcam.measure.labels import FEATURE_CAPTURE, FEATURE_WORDS, FEATURES, kernel_family
from dashcam.measure.names import nvtx_group_label

from .base import Tool, ToolParams, ToolResult, WindowInfo


class Params(ToolParams):
    feature: Literal["mpi", "nccl", "jit"] = Field("mpi", description="mpi, nccl or jit (run-time compilation).")
    activity: str | None = Field(None, description=(
        "Instead of a feature, any activity by name: the optimizer, the backward pass, the forward pass, data "
        "loading, checkpointing, file I/O, the loss, embeddings, GEMM/attention/convolution/normalization/softmax/"
        "reduction/elementwise kernels, or other words, looked for literally."))


ACTIVITY_WORD_MIN = 4  # a word of a literal activity looked for alone (shorter ones match too much)


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
    pct_of_kernel_time: float | None = Field(None, description="Kernels only: summed_ns as % of all kernel time in "
                                                                "the window on the same GPUs.")
    names: list[Named] = Field(default_factory=list, description="By name, most time first (at most 5).")
    outside_count: int = Field(0, description="Matching ranges or calls entirely outside the window (before its first "
                                              "or after its last GPU work: MPI_Init, output written at teardown).")
    outside_ns: int = Field(0, description="Their time outside the window, summed (with the parts of those that "
                                           "cross its edges).")
    outside_names: list[Named] = Field(default_factory=list, description="Outside the window, by name (at most 5).")


class Result(ToolResult):
    feature: str = Field(description="mpi, nccl, jit, or the activity asked for.")
    what: str = Field("", description="The feature or activity in words.")
    matched: str | None = Field(None, description="An activity's words that matched (all of them, or one word).")
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


def _source(profile, w, source: str, pattern: str | None, devices: list[int], family: str | None = None) -> Source:
    on = f"device_id IN ({', '.join(str(d) for d in devices)})"
    if source == "nvtx":
        recorded = profile.has_table("nvtx")
        sql = 'SELECT label, "end", start FROM nvtx WHERE is_range AND "end" >= start'
    elif source == "api":
        recorded = profile.has_table("runtime")
        sql = 'SELECT name, "end", start FROM api WHERE "end" >= start'
    elif source == "kernels":
        recorded = profile.has_table("kernel")
        # a kernel matches by its short or its full (demangled) name, and is named by its short one
        sql = f'SELECT short_name, "end", start, name FROM kernels WHERE "end" >= start AND {on}'
    else:
        from dashcam.profile.cpu_source import source as cpu_source

        src = cpu_source(profile)
        recorded = src.has("OSRT_API")
        sql = None
    if pattern is None:
        return Source(source=source, recorded=recorded)
    if sql is None:  # the whole capture's OS runtime calls
        rows = [(n, b, a) for n, a, b in src.osrt_matching(-(1 << 62), 1 << 62, pattern)] if recorded else []
    else:
        rows = _rows(profile, sql) if recorded else []
    rx = re.compile(pattern, re.IGNORECASE)
    hit = [r for r in rows if (r[0] and rx.search(r[0])) or (len(r) > 3 and r[3] and rx.search(r[3]))]
    if family is not None:  # a kernel family's kernels: those kernel_family puts in it (the first family matching)
        families: dict[tuple, str] = {}
        hit = [r for r in hit if families.setdefault((r[0], r[3]), kernel_family(r[0], r[3])) == family]
    if not hit:
        return Source(source=source, recorded=recorded)
    raw_s = np.array([r[2] for r in hit], np.int64)
    raw_e = np.array([r[1] for r in hit], np.int64)
    inside = (raw_e > w.start_ns) & (raw_s < w.end_ns)
    s = np.maximum(raw_s, w.start_ns)[inside]
    e = np.minimum(raw_e, w.end_ns)[inside]
    out = Source(source=source, recorded=recorded,
                 outside_ns=int((raw_e - raw_s).sum() - (e - s).sum()), outside_count=int((~inside).sum()),
                 outside_names=_by_name([r for r, i in zip(hit, inside) if not i], source))
    if not inside.any():
        return out
    out.count, out.summed_ns, out.union_ns = int(inside.sum()), int((e - s).sum()), merge(s, e).total
    out.pct_of_window = round(100.0 * out.union_ns / w.length_ns, 3) if w.length_ns else 0.0
    clipped = [(r[0], int(b), int(a)) for r, a, b in zip([r for r, i in zip(hit, inside) if i], s, e)]
    out.names = _by_name(clipped, source)
    if source == "kernels":
        clip = f'least("end", {w.end_ns}) - greatest(start, {w.start_ns})'
        total = _rows(profile, f'SELECT sum({clip}) FROM kernels WHERE "end" > {w.start_ns} AND start < {w.end_ns} '
                               f'AND "end" >= start AND {on}')
        out.pct_of_kernel_time = round(100.0 * out.summed_ns / total[0][0], 3) if total and total[0][0] else None
    return out


def _by_name(rows: list[tuple], source: str) -> list[Named]:
    """(name, end, start) rows by name, most time first (at most 5); NVTX labels by their group ("train_step 7" ->
    "train_step <n>")."""
    by: dict[str, list] = {}
    for r in rows:
        x = by.setdefault(nvtx_group_label(r[0]) if source == "nvtx" else r[0], [0, 0])
        x[0] += 1
        x[1] += int(r[1] - r[2])
    return [Named(name=k, count=v[0], total_ns=v[1], mean_ns=round(v[1] / v[0], 1) if v[0] else 0.0)
            for k, v in sorted(by.items(), key=lambda kv: (-kv[1][1], kv[0]))][:5]


def _look(profile, w, pats: dict, devices: list[int], family: str | None = None) -> list[Source]:
    return [_source(profile, w, s, pats[s], devices, family if s == "kernels" else None)
            for s in ("nvtx", "osrt", "api", "kernels")]


def run(profile, params: Params) -> Result:
    w = profile.window(params.start_ms, params.end_ms)
    devices = profile.check_gpu(params.gpu)
    activity = " ".join((params.activity or "").split())
    matched = None
    if activity:
        pats = patterns(activity)
        sources = _look(profile, w, pats, devices, FAMILY_OF.get(activity))
        matched = activity
        words = [x for x in activity.split() if len(x) >= ACTIVITY_WORD_MIN]
        if not any(x.count or x.outside_count for x in sources) and activity not in ACTIVITIES and len(words) > 1:
            for word in words:  # "halo exchange" as a whole names nothing: "halo" alone may
                alone = _look(profile, w, patterns(word), devices)
                if any(x.count or x.outside_count for x in alone):
                    pats, sources, matched = patterns(word), alone, word
                    break
        feature, what, capture = activity, activity, capture_advice(activity)
    else:
        pats = FEATURES[params.feature]
        sources = _look(profile, w, pats, devices)
        feature, what, capture = params.feature, FEATURE_WORDS[params.feature], FEATURE_CAPTURE[params.feature]
    best = max(sources, key=lambda x: (x.union_ns, x.outside_ns))
    found = best.union_ns > 0 or any(x.count or x.outside_count for x in sources)
    return Result(tool="feature_time", window=WindowInfo.of(w), feature=feature, what=what,
                  matched=matched if found else None, found=found,
                  total_ns=best.union_ns, pct_of_window=best.pct_of_window,
                  main_source=best.source if found else None, sources=sources,
                  looked_in=[x.source for x in sources if x.recorded and pats[x.source] is not None],
                  capture=capture)


TOOL = Tool(
    name="feature_time",
    summary=("Time in MPI, NCCL, run-time compilation (JIT/NVRTC/module loading) or any activity by name (the "
             "optimizer, the backward pass, GEMM kernels, file I/O, ...), found by name in NVTX ranges, OS runtime "
             "calls, CUDA API calls and kernels; when absent, where it was looked for and what would record it."),
    params=Params, result=Result, run=run,
)
