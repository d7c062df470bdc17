"""nvtx: NVTX ranges grouped by label group, by total time, with the GPU time of the kernels they launched.

Label groups come from the core (``dashcam.measure.names.nvtx_group_labels``, computed once when the cache
is built): PyTorch per-call suffixes (``, seq = 12, op_id = 990346``, ``, sizes = [...]``) are
dropped and a trailing number becomes ``<n>``, so "train_step 7" and "train_step 8" are the group
"train_step <n>". Ranges are counted per ``group_id`` in ``nvtx_times`` (no label strings are
scanned); labels are looked up in ``nvtx_groups``.

Kernel attribution: a kernel belongs to a range when the API call that launched it (``launches``:
same pid and correlationId) started on the range's thread (same pid and tid) with
``range.start <= call.start < range.end``. A kernel counts once for every group that has an
enclosing range, and once only per group even when ranges of that group nest
(``dashcam.profile.nvtx_kernels``). For the whole profile the counts were computed with the cache, per
group and launching thread (``nvtx_kernels``); they answer ``--gpu`` too when the threads that
launch on that GPU launch on no other. A ``--start/--end`` window is computed for the query.
"""
from __future__ import annotations

import numpy as np
from pydantic import BaseModel, Field

from dashcam.measure.intervals import arrow_batches
from dashcam.profile.diagnostics import notes_for
from dashcam.profile.host_window import host_window
from dashcam.profile.nvtx_kernels import THREAD_KEY, attribute, settle, window_axis

from .base import Tool, ToolParams, ToolResult, WindowInfo

NO_LABEL = "<no label>"
MARK_TYPES = (34, 65)  # NvtxMark, NvtxtMark


class Params(ToolParams):
    label: str | None = Field(
        None, description="Only label groups containing this text (case-insensitive), e.g. 'forward' or 'aten::'.")


class NvtxGroup(BaseModel):
    label: str = Field(description="Label group: the NVTX label without PyTorch suffixes (', seq = N', "
                                   "', op_id = N', ', sizes = [...]', ...) and with a trailing number "
                                   "shown as '<n>' ('train_step 7' -> 'train_step <n>').")
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
    group_count: int = Field(description="Distinct label groups of those ranges.")
    label_filter: str | None = None
    matched_groups: int = Field(description="Label groups matching label_filter (all groups without a filter).")
    matched_ranges: int = Field(0, description="Ranges of those groups.")
    matched_ns: int = Field(0, description="Their summed time, clipped to the window (nested ranges each count).")
    groups: list[NvtxGroup] = Field(description="Top label groups by total_ns, descending.")


def _ranges_in(w) -> str:
    return f'is_range AND "end" > {w.start_ns} AND start < {w.end_ns} AND "end" >= start'


def _group_stats(profile, w, label: str | None, limit: int) -> tuple[dict, list[tuple]]:
    """Window totals, and the top ``limit`` matching groups as (label, group_id, count, total, max)."""
    clipped = f'least("end", {w.end_ns}) - greatest(start, {w.start_ns})'
    match = "true" if label is None else "strpos(lower(label), lower($1)) > 0"
    rows = profile.rows(f"""
        WITH per_group AS MATERIALIZED (
                 SELECT coalesce(group_id, -1) AS group_id, count(*) AS n, sum({clipped})::BIGINT AS total,
                        max({clipped}) AS mx
                 FROM nvtx_times WHERE {_ranges_in(w)} GROUP BY 1),
             matched AS MATERIALIZED (
                 SELECT p.*, coalesce(g.label, '{NO_LABEL}') AS label
                 FROM per_group p LEFT JOIN nvtx_groups g USING (group_id) WHERE {match})
        SELECT * FROM (SELECT label, group_id, n, total, mx FROM matched ORDER BY total DESC, label LIMIT {limit})
        UNION ALL
        SELECT NULL, NULL, (SELECT coalesce(sum(n), 0) FROM per_group), (SELECT count(*) FROM per_group),
               (SELECT count(*) FROM matched)
        UNION ALL
        SELECT NULL, -2, (SELECT coalesce(sum(n), 0) FROM matched), (SELECT coalesce(sum(total), 0) FROM matched),
               0""", [] if label is None else [label])
    (_, _, range_count, group_count, matched), = [r for r in rows if r[0] is None and r[1] is None]
    (_, _, matched_ranges, matched_ns, _), = [r for r in rows if r[0] is None and r[1] == -2]
    top = sorted((r for r in rows if r[0] is not None), key=lambda r: (-int(r[3]), r[0]))
    totals = {"range_count": int(range_count), "group_count": int(group_count),
              "mark_count": _mark_count(profile, w), "matched_groups": int(matched),
              "matched_ranges": int(matched_ranges), "matched_ns": int(matched_ns)}
    return totals, top


def _mark_count(profile, w) -> int:
    """Marks in the window; the event type (which needs the wider ``nvtx`` view) only when some row is not a range."""
    in_w = f'"end" IS NULL AND start >= {w.start_ns} AND start < {w.end_ns}'
    if not profile.one(f"SELECT count(*) FROM nvtx_times WHERE {in_w}")[0]:
        return 0
    return int(profile.one(f"SELECT count(*) FROM nvtx WHERE {in_w} AND coalesce(event_type, 34) IN {MARK_TYPES}")[0])


RANGE_BATCH = 262_144  # NVTX ranges attributed at a time (nvtx_kernels.settle joins the batches)


def _kernels_by_group(profile, w, devices: list[int], groups: list[tuple[int, int]]) -> tuple[np.ndarray, np.ndarray]:
    """(kernel_count, gpu_ns) per group of ``groups`` = [(group_id, range count), ...] (nvtx_kernels.attribute).

    The ranges of those groups stream in batches, so memory stays bounded on captures with millions
    of ranges; keys whose batches overlap in time are recomputed from all their ranges (settle).
    """
    n = len(groups)
    counts, gpu = np.zeros(n, np.int64), np.zeros(n, np.int64)
    if n == 0 or not devices:
        return counts, gpu
    axis = window_axis(profile.con, (w.start_ns, w.end_ns), devices)
    if axis is None:
        return counts, gpu

    def ranges(group_ids) -> str:
        return f"""SELECT start, "end", {THREAD_KEY.format(tid="tid")} AS th, coalesce(group_id, -1) AS g
                   FROM nvtx_times WHERE {_ranges_in(w)} AND pid IS NOT NULL AND tid IS NOT NULL
                     AND coalesce(group_id, -1) IN ({", ".join(str(int(g)) for g in group_ids)})"""

    def columns(batch) -> tuple[np.ndarray, ...]:
        return tuple(np.asarray(batch.column(c).to_numpy(), np.int64) for c in ("start", "end", "th", "g"))

    parts = [attribute(axis, *columns(b)) for b in arrow_batches(profile.con.sql(ranges([g for g, _ in groups])),
                                                                 RANGE_BATCH) if b.num_rows]

    def of_keys(pairs) -> str:
        """The ranges of these (group, thread) pairs."""
        values = ", ".join(f"({int(g)}, {int(th)})" for g, th in pairs)
        return f"SELECT * FROM ({ranges({g for g, _ in pairs})}) WHERE (g, th) IN (SELECT * FROM (VALUES {values}))"

    def ranges_of(pairs):
        """The ranges of the pairs, in pieces of whole keys of about RANGE_BATCH ranges."""
        listed = sorted(pairs)
        sizes = {(int(g), int(th)): int(n) for g, th, n in
                 profile.rows(f"SELECT g, th, count(*) FROM ({of_keys(listed)}) GROUP BY ALL")}
        piece, size = [], 0
        for pair in listed + [None]:
            if pair is None or (piece and size + sizes.get(pair, 0) > RANGE_BATCH):
                if piece:
                    yield columns(profile.con.sql(of_keys(piece)).to_arrow_table())
                piece, size = [], 0
            if pair is not None:
                piece.append(pair)
                size += sizes.get(pair, 0)

    return settle(parts, axis, ranges_of).by_group(np.array([g for g, _ in groups], np.int64))


def _stored_threads(profile, w, devices: list[int]) -> str | None:
    """SQL filter on ``nvtx_kernels.thread`` when the table computed with the cache answers the query, else None.

    It holds the whole window on every device, per (group, thread): it answers a whole-window query
    on some devices when each thread that launches on them launches on no other device.
    """
    if w != profile.window() or not profile.has_view("nvtx_kernels"):
        return None
    if devices == profile.devices:
        return "true"
    on = f'device_id IN ({", ".join(map(str, devices))})'
    mixed, = profile.one(f"""
        SELECT count(*) FROM (SELECT bool_or({on}) AS any_here, bool_and({on}) AS all_here FROM launches
                              WHERE api_tid IS NOT NULL AND pid IS NOT NULL GROUP BY {THREAD_KEY.format(tid="api_tid")})
        WHERE any_here AND NOT all_here""")
    return None if mixed else f"""thread IN (SELECT DISTINCT {THREAD_KEY.format(tid="api_tid")} FROM launches
                                         WHERE device_id IN ({", ".join(map(str, devices))}) AND api_tid IS NOT NULL)"""


def _stored_kernels(profile, group_ids: list[int], threads: str) -> tuple[np.ndarray, np.ndarray]:
    """(kernel_count, gpu_ns) per group from the table computed with the cache, over the threads selected."""
    if not group_ids:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    got = {int(g): (int(n), int(ns)) for g, n, ns in profile.rows(
        f"""SELECT group_id, sum(kernel_count), sum(gpu_ns) FROM nvtx_kernels
            WHERE group_id IN ({', '.join(map(str, group_ids))}) AND {threads} GROUP BY 1""")}
    return (np.array([got.get(g, (0, 0))[0] for g in group_ids], np.int64),
            np.array([got.get(g, (0, 0))[1] for g in group_ids], np.int64))


def run(profile, params: Params) -> Result:
    w, window_note = host_window(profile, params.start_ms, params.end_ms)
    devices = profile.check_gpu(params.gpu)
    totals, top = _group_stats(profile, w, params.label, params.limit)
    groups = [(int(r[1]), int(r[2])) for r in top]
    threads = _stored_threads(profile, w, devices) if devices else None
    if not devices:  # no GPU activity: no kernel was launched from any range
        kc, gpu = [0] * len(groups), [0] * len(groups)
    elif threads is not None:
        kc, gpu = _stored_kernels(profile, [g for g, _ in groups], threads)
    else:
        kc, gpu = _kernels_by_group(profile, w, devices, groups)
    out = [NvtxGroup(label=label, count=int(n), total_ns=int(tot), avg_ns=round(int(tot) / int(n), 1),
                     max_ns=int(mx), kernel_count=int(kc[i]), gpu_ns=int(gpu[i]))
           for i, (label, _gid, n, tot, mx) in enumerate(top)]
    notes = [window_note] if window_note else []
    if not profile.has_table("nvtx"):
        notes.append("No NVTX events in this profile: the program has no NVTX annotations, or nsys ran without "
                     "-t nvtx.")
    elif totals["range_count"] == 0:
        notes.append("No NVTX ranges overlap this window.")
    if out and devices and not profile.has_table("runtime"):
        notes.append("No CUDA API rows: kernels cannot be attributed to ranges (kernel_count and gpu_ns are 0).")
    notes += notes_for(profile, "nvtx")  # nsys' own word that ranges were lost
    if params.label is not None and not top and totals["range_count"]:
        notes.append(f"No label group contains {params.label!r}.")
    if totals["matched_groups"] > len(top):
        notes.append(f"Showing the top {len(top)} of {totals['matched_groups']} label groups by total time (raise "
                     "limit for more); kernels are attributed for the groups shown.")
    return Result(tool="nvtx", window=WindowInfo.of(w), label_filter=params.label, groups=out, notes=notes,
                  **totals)


TOOL = Tool(
    name="nvtx",
    summary=("Where the annotated (NVTX) code regions spend their time: range label groups (PyTorch op_id/seq "
             "suffixes stripped, trailing numbers as <n>) by total time, with count, avg/max, and the kernels "
             "launched from inside them (kernel_count, gpu_ns)."),
    params=Params, result=Result, run=run,
)
