"""The gaps a window cuts: read from the gap table, clipped to the window, their causes recomputed on the
clipped bounds (gap_causes.py). gpu_gaps sums them with the gaps inside the window; cpu reads their CPU-side
parts. A gap keeps the kernel that closes it, so the recomputation gives what a full one would."""
from __future__ import annotations

import numpy as np

from dashcam.measure.definitions import Window
from dashcam.profile.gap_causes import (
    CAUSES,
    NONE,
    SYNC_NAMES,
    cut,
    gap_causes,
    memory_in,
    split_by_probe,
    split_points,
    sql_values,
    thread_unions,
)

# The gap table's columns a gap row carries besides its causes.
ROW = ["device_id", "start", "end", "key", "api_start", "api_end", "before_id", "after_id", "api_name_id",
       "node_wait"]


def calls_in(profile, probes: list[tuple[int, int, int, int]]) -> dict[int, dict[str, np.ndarray]]:
    """For probes (i, thread key, a, b): that thread's CUDA calls overlapping [a, b) (start, end, name)."""
    if not probes:
        return {}
    d = profile.con.execute(f"""
        SELECT v.i, c.start, c."end", coalesce(c.name_id, -1) AS name
        FROM api_calls c JOIN (VALUES {sql_values(probes)}) v(i, k, a, b)
          ON c.global_tid = v.k AND c.start < v.b AND c."end" > v.a""").fetchnumpy()
    return split_by_probe(d)


def named_calls(c: dict[str, np.ndarray], a: int, b: int) -> dict[int, int]:
    """API name id -> ns of the calls ``c`` inside [a, b), call by call (gap_causes.calls_by_gap)."""
    per: dict[int, int] = {}
    for nid, ns in zip(c["name"].tolist(), (np.minimum(c["end"], b) - np.maximum(c["start"], a)).tolist()):
        if ns > 0:
            per[nid] = per.get(nid, 0) + ns
    return per


def cut_gaps(profile, w: Window, devices: list[int]) -> list[dict]:
    """The stored gaps the window cuts, clipped to it, with their causes recomputed on the clipped bounds."""
    sync_ids = np.array([r[0] for r in profile.rows(SYNC_NAMES)], dtype=np.int64)
    rows = profile.dicts(f"""SELECT {", ".join(f'"{c}"' for c in ROW)} FROM gap_table WHERE {cut(w, devices)}""")
    if not rows:
        return []
    a = np.array([max(r["start"], w.start_ns) for r in rows], np.int64)
    b = np.array([min(r["end"], w.end_ns) for r in rows], np.int64)
    key = np.array([r["key"] for r in rows], np.int64)
    api_end = np.array([r["api_end"] for r in rows], np.int64)
    known = (key >= 0) & (api_end != NONE)
    split, pre_end = split_points(a, b, known, np.array([r["api_start"] for r in rows], np.int64), api_end,
                                  np.array([r["node_wait"] for r in rows], np.int64))
    calls = calls_in(profile, [(i, key[i], a[i], pre_end[i]) for i in range(len(rows))
                                if known[i] and pre_end[i] > a[i]])
    mem = memory_in(profile, [(i, rows[i]["device_id"], split[i], b[i]) for i in range(len(rows))
                               if split[i] < b[i]])
    api_ns, sync_ns = np.zeros(len(rows), np.int64), np.zeros(len(rows), np.int64)
    for i, c in calls.items():
        u_all, u_sync = thread_unions(c["start"], c["end"], np.isin(c["name"], sync_ids))
        api_ns[i] = u_all.overlap(a[i], pre_end[i])
        sync_ns[i] = u_sync.overlap(a[i], pre_end[i])
    memcpy = np.array([mem.get(i, 0) for i in range(len(rows))], np.int64)
    causes = gap_causes(a, b, known, split, pre_end, api_ns, sync_ns, memcpy)
    for i, r in enumerate(rows):
        r.update(start=int(a[i]), end=int(b[i]), causes={c: int(causes[c][i]) for c in CAUSES},
                 api_by_name=named_calls(calls[i], int(a[i]), int(pre_end[i])) if i in calls else {})
    return rows
