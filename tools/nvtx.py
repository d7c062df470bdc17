"""nvtx: NVTX ranges grouped by label, by total time, with the GPU time of the kernels they launched.

Label grouping: PyTorch's NVTX labels carry per-call suffixes (``aten::mm, seq = 12, op_id = 990346,
sizes = [[2, 3]]``). A label's *group* is the label cut at the first ``, seq = ``, ``, op_id = ``,
``, sizes = `` or ``, input_op_ids = `` (``SUFFIX_RE``); other labels are their own group.

Kernel attribution: a kernel belongs to a range when the API call that launched it (same pid and
correlationId) started on the range's thread (same pid and tid) with ``range.start <= call.start <
range.end``. A kernel counts once for every group that has an enclosing range, and once only per
group even when ranges of that group nest.
"""
from __future__ import annotations

import numpy as np
from pydantic import BaseModel, Field

from .base import Tool, ToolParams, ToolResult, WindowInfo

# Everything from the first PyTorch per-call suffix to the end of the label (RE2, in DuckDB).
SUFFIX_RE = r"(?s), (seq|op_id|sizes|input_op_ids) = .*$"
NO_LABEL = "<no label>"
MARK_TYPES = (34, 65)  # NvtxMark, NvtxtMark
THREAD_KEY = "(pid * 16777216 + tid)"  # = globalTid without the 1<<48 base


def group_sql(col: str = "label") -> str:
    """SQL expression: the label group of ``col`` (see SUFFIX_RE)."""
    return f"regexp_replace(coalesce({col}, '{NO_LABEL}'), '{SUFFIX_RE}', '')"


class Params(ToolParams):
    label: str | None = Field(
        None, description="Only label groups containing this text (case-insensitive), e.g. 'forward' or 'aten::'.")


class NvtxGroup(BaseModel):
    label: str = Field(description="Label group: the NVTX label without PyTorch suffixes (', seq = N', "
                                   "', op_id = N', ', sizes = [...]', ', input_op_ids = [...]').")
    labels_merged: int = Field(description="Distinct raw labels in this group.")
    count: int = Field(description="Ranges of this group overlapping the window.")
    total_ns: int = Field(description="Sum of the range durations clipped to the window. Nested ranges each count, "
                                      "so this can exceed the window.")
    avg_ns: float = Field(description="total_ns / count.")
    max_ns: int = Field(description="Longest range, clipped to the window.")
    kernel_count: int = Field(description="Kernels (overlapping the window) launched from inside a range of this "
                                          "group on the same thread; each kernel once per group.")
    gpu_ns: int = Field(description="Summed durations (clipped to the window) of those kernels. A sum over "
                                    "kernels, not a union: concurrent kernels each count.")


class Result(ToolResult):
    range_count: int = Field(description="NVTX ranges overlapping the window (all labels).")
    mark_count: int = Field(description="NVTX marks (instant events) inside the window.")
    label_count: int = Field(description="Distinct raw labels of those ranges.")
    group_count: int = Field(description="Distinct label groups of those ranges.")
    label_filter: str | None = None
    matched_groups: int = Field(description="Label groups matching label_filter (all groups without a filter).")
    groups: list[NvtxGroup] = Field(description="Top label groups by total_ns, descending.")


def _group_stats(profile, w, label: str | None) -> tuple[dict, list[tuple]]:
    """Window counts and per-group (label, total, count, max, labels_merged, raw_labels), by total desc."""
    clipped = f'least("end", {w.end_ns}) - greatest(start, {w.start_ns})'
    in_range = f'is_range AND "end" > {w.start_ns}'
    is_mark = f'"end" IS NULL AND coalesce(event_type, 34) IN {MARK_TYPES} AND start >= {w.start_ns}'
    rows = profile.rows(f"""
        WITH per_label AS (
            SELECT label, count(*) FILTER (WHERE {in_range}) AS n,
                   sum({clipped}) FILTER (WHERE {in_range}) AS total,
                   max({clipped}) FILTER (WHERE {in_range}) AS mx,
                   count(*) FILTER (WHERE {is_mark}) AS marks
            FROM nvtx WHERE start < {w.end_ns} GROUP BY label)
        SELECT {group_sql()} AS grp, sum(total)::BIGINT, sum(n)::BIGINT, max(mx), count(*) FILTER (WHERE n > 0),
               list(label) FILTER (WHERE n > 0), sum(marks)::BIGINT
        FROM per_label GROUP BY grp""")
    totals = {"range_count": sum(int(r[2]) for r in rows), "mark_count": sum(int(r[6]) for r in rows),
              "label_count": sum(int(r[4]) for r in rows), "group_count": sum(1 for r in rows if r[2] > 0)}
    groups = [r[:6] for r in rows if r[2] > 0 and (label is None or label.lower() in r[0].lower())]
    groups.sort(key=lambda r: (-int(r[1]), r[0]))
    return totals, groups


def _attribute(starts, ends, grp, thr, l_thr, l_time, l_dur, n_groups: int, n_threads: int):
    """Per group: launches (and summed kernel time) inside the union of the group's ranges per thread.

    Ranges and launches are sorted by (thread, ...); on each thread the ranges of one group are
    merged into disjoint spans (so nesting within a group counts a launch once) and the launches
    inside each span are counted with searchsorted over prefix sums of kernel time.
    """
    counts = np.zeros(n_groups, dtype=np.float64)
    gpu = np.zeros(n_groups, dtype=np.float64)
    lo = np.lexsort((l_time, l_thr)) if len(l_time) else np.zeros(0, np.int64)
    l_thr, l_time, l_dur = l_thr[lo], l_time[lo], l_dur[lo]
    # ranges: by start (nearly sorted already: cheap), then stably by (thread, group)
    o = np.argsort(starts, kind="stable")
    key = (thr[o].astype(np.int64) * n_groups + grp[o])
    o = o[np.argsort(key.astype(np.uint16) if (n_threads + 1) * n_groups < 65536 else key, kind="stable")]
    starts, ends, grp, thr = starts[o], ends[o], grp[o], thr[o]
    r_cut = np.searchsorted(thr, np.arange(n_threads + 1))
    l_cut = np.searchsorted(l_thr, np.arange(n_threads + 1))
    for t in range(n_threads):
        r0, r1, a, b = r_cut[t], r_cut[t + 1], l_cut[t], l_cut[t + 1]
        if r0 == r1 or a == b:
            continue
        times = l_time[a:b]
        cum = np.concatenate(([0], np.cumsum(l_dur[a:b], dtype=np.int64)))
        base, span = times[0] - 1, int(times[-1] - times[0]) + 3
        g = grp[r0:r1].astype(np.int64)
        # clipping to the launch-time span keeps containment; the group offset keeps groups apart
        s = np.clip(starts[r0:r1] - base, 0, span - 1) + g * span
        e = np.clip(ends[r0:r1] - base, 0, span - 1) + g * span
        run_max = np.maximum.accumulate(e)
        first = np.flatnonzero(np.concatenate(([True], s[1:] > run_max[:-1])))
        span_g = g[first]
        lo_i = np.searchsorted(times, s[first] - span_g * span + base, side="left")
        hi_i = np.searchsorted(times, np.maximum.reduceat(e, first) - span_g * span + base, side="left")
        counts += np.bincount(span_g, weights=hi_i - lo_i, minlength=n_groups)
        gpu += np.bincount(span_g, weights=cum[hi_i] - cum[lo_i], minlength=n_groups)
    return np.rint(counts).astype(np.int64), np.rint(gpu).astype(np.int64)


def _kernels_by_group(profile, w, devices: list[int], top: list[tuple]):
    """(kernel_count, gpu_ns) per top group."""
    n = len(top)
    none = np.zeros(n, np.int64), np.zeros(n, np.int64)
    if n == 0:
        return none
    k = profile.con.execute(f"""
        SELECT pid * 16777216 + api_tid AS th, api_start,
               least("end", {w.end_ns}) - greatest(start, {w.start_ns}) AS d
        FROM launches WHERE "end" > {w.start_ns} AND start < {w.end_ns} AND api_start IS NOT NULL
          AND api_tid IS NOT NULL AND pid IS NOT NULL
          AND device_id IN ({", ".join(str(d) for d in devices)})""").fetchnumpy()
    l_th = np.asarray(k["th"], np.int64)
    if len(l_th) == 0:
        return none
    threads = np.array(sorted(int(r[0]) for r in profile.rows(
        "SELECT DISTINCT pid * 16777216 + api_tid FROM launches WHERE api_tid IS NOT NULL AND pid IS NOT NULL")),
        dtype=np.int64)
    labels = [raw for r in top for raw in r[5]]
    idx = [i for i, r in enumerate(top) for _ in r[5]]
    r = profile.con.execute(f"""
        SELECT n.start, n."end", m.gi, {THREAD_KEY} AS th
        FROM nvtx n JOIN (SELECT unnest($1::VARCHAR[]) AS label, unnest($2::SMALLINT[]) AS gi) m
          ON m.label IS NOT DISTINCT FROM n.label
        WHERE n.is_range AND n."end" > {w.start_ns} AND n.start < {w.end_ns} AND n.pid IS NOT NULL
          AND n.tid IS NOT NULL""", [labels, idx]).fetchnumpy()
    r_th = np.asarray(r["th"], np.int64)
    code = np.minimum(np.searchsorted(threads, r_th), len(threads) - 1)
    code = np.where(threads[code] == r_th, code, len(threads))  # ranges on threads without launches: skipped
    return _attribute(np.asarray(r["start"], np.int64), np.asarray(r["end"], np.int64),
                      np.asarray(r["gi"], np.int64), code, np.searchsorted(threads, l_th),
                      np.asarray(k["api_start"], np.int64), np.asarray(k["d"], np.int64), n, len(threads))


def run(profile, params: Params) -> Result:
    w = profile.window(params.start_ms, params.end_ms)
    devices = profile.check_gpu(params.gpu)
    totals, groups = _group_stats(profile, w, params.label)
    top = groups[: params.limit]
    kc, gpu = _kernels_by_group(profile, w, devices, top)
    out = [NvtxGroup(label=g, labels_merged=int(merged), count=int(n), total_ns=int(tot),
                     avg_ns=round(int(tot) / int(n), 1), max_ns=int(mx), kernel_count=int(kc[i]),
                     gpu_ns=int(gpu[i]))
           for i, (g, tot, n, mx, merged, _raw) in enumerate(top)]
    notes = []
    if not profile.has_table("nvtx"):
        notes.append("No NVTX events in this profile: the program has no NVTX annotations, or nsys ran without "
                     "-t nvtx.")
    elif totals["range_count"] == 0:
        notes.append("No NVTX ranges overlap this window.")
    if out and not profile.has_table("runtime"):
        notes.append("No CUDA API rows: kernels cannot be attributed to ranges (kernel_count and gpu_ns are 0).")
    if params.label is not None and not groups and totals["range_count"]:
        notes.append(f"No label group contains {params.label!r}.")
    if len(groups) > len(top):
        notes.append(f"Showing the top {len(top)} of {len(groups)} label groups by total time (raise limit for "
                     "more); kernels are attributed for the groups shown.")
    return Result(tool="nvtx", window=WindowInfo.of(w), label_filter=params.label,
                  matched_groups=len(groups), groups=out, notes=notes, **totals)


TOOL = Tool(
    name="nvtx",
    summary=("Where the annotated (NVTX) code regions spend their time: range label groups (PyTorch op_id/seq "
             "suffixes stripped) by total time, with count, avg/max, and the kernels launched from inside them "
             "(kernel_count, gpu_ns)."),
    params=Params, result=Result, run=run,
)
