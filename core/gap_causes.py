"""Gap causes: who each GPU was waiting for in each gap (the attribution gpu_gaps reports).

For a gap ``[a, b)`` (definitions.py) take the kernel that ends it (the first kernel on that
device starting at ``b``; among kernels starting together, the one whose launch call returned
first) and the API call that launched it (same pid and correlationId). Split the gap at the
moment that call returned, ``split = clamp(call.end, a, b)``, and let
``pre_end = clamp(call.start, a, split)``:

before ``split`` the GPU waited for the CPU; that time goes, by what the launching thread was doing, to
    ``launch_overhead``  inside the launch call itself ``[pre_end, split)``,
    ``sync_wait``        inside a *Synchronize call on that thread,
    ``cuda_api``         inside any other CUDA call on that thread,
    ``cpu_work``         in no CUDA call at all (Python, data loading, ...);
after ``split`` the kernel was queued and the GPU waited on the device:
    ``memcpy``           copies or memsets running on that device,
    ``dependency``       nothing on the device: an event, another stream or device, a host callback.
A gap whose closing kernel has no launch call in the capture, or that no kernel closes (after a
device's last kernel), is ``unknown``. The causes of a gap add up to its length exactly.

The causes of every gap of the whole-profile window are computed once, when the cache is built
(``build_gap_table`` -> ``gaps.parquet``). A gap keeps its closing kernel when a narrower window
cuts it, so a query over any window reads the gaps inside it from that table and recomputes only
the (at most two per device) gaps the window cuts, with ``gap_causes`` on their clipped bounds.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from .definitions import Window
from .intervals import EMPTY, MEMORY_OPS, Union, gaps, merge, unions_by_device

CAUSES = ["sync_wait", "cuda_api", "launch_overhead", "cpu_work", "memcpy", "dependency", "unknown"]
CPU_SIDE = {"sync_wait", "cuda_api", "launch_overhead", "cpu_work"}
NONE = np.iinfo(np.int64).max  # api_end of a kernel without a launch call
SYNC_NAMES = "SELECT id FROM api_names WHERE name LIKE '%Synchronize%'"

# Columns of gaps.parquet, one row per gap of the whole-profile window, by device and start.
# key: raw globalTid of the thread that launched the closing kernel (-1: none);
# before_id / after_id: short-name string ids of the kernels ending / starting the gap (-1: none).
TABLE_COLUMNS = ["device_id", "start", "end", "key", "api_start", "api_end", "before_id", "after_id",
                 "api_name_id", *CAUSES]


def split_points(a: np.ndarray, b: np.ndarray, known: np.ndarray, api_start: np.ndarray,
                 api_end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(split, pre_end)`` of gaps ``[a, b)`` (both ``a`` where the launch call is unknown)."""
    split = np.where(known, np.clip(api_end, a, b), a)
    pre_end = np.where(known, np.clip(api_start, a, split), a)
    return split, pre_end


def gap_causes(a, b, known, split, pre_end, api_ns, sync_ns, memcpy_ns) -> dict[str, np.ndarray]:
    """Cause name -> ns per gap. ``api_ns``/``sync_ns``: the launching thread's CUDA-call union
    (all calls / *Synchronize calls) inside ``[a, pre_end)``; ``memcpy_ns``: the device's copy and
    memset union inside ``[split, b)``."""
    return {
        "sync_wait": sync_ns,
        "cuda_api": api_ns - sync_ns,
        "launch_overhead": split - pre_end,
        "cpu_work": pre_end - a - api_ns,
        "memcpy": memcpy_ns,
        "dependency": np.where(known, b - split, 0) - memcpy_ns,
        "unknown": np.where(known, 0, b - a),
    }


def thread_unions(start: np.ndarray, end: np.ndarray, is_sync: np.ndarray) -> tuple[Union, Union]:
    """The union of a thread's CUDA calls, and of its *Synchronize calls."""
    return merge(start, end), merge(start[is_sync], end[is_sync])


def _numpy(con, sql: str) -> dict[str, np.ndarray]:
    return {k: np.asarray(v, dtype=np.int64) for k, v in con.execute(sql).fetchnumpy().items()}


def build_gap_table(con, out: Path) -> int:
    """Write ``gaps.parquet``: every gap of every device in the whole-profile window, with its causes.

    ``con`` has the model views and ``launches``. Returns the number of gaps.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    span = con.execute('SELECT min(start), max("end") FROM gpu_ops').fetchone()
    devices = [int(r[0]) for r in con.execute(
        "SELECT DISTINCT device_id FROM gpu_ops WHERE device_id IS NOT NULL ORDER BY 1").fetchall()]
    cols: dict[str, list[np.ndarray]] = {c: [] for c in TABLE_COLUMNS}
    if span[0] is None or not devices:
        pq.write_table(pa.table({c: pa.array([], pa.int64()) for c in TABLE_COLUMNS}), out / "gaps.parquet")
        return 0
    w = Window(int(span[0]), int(span[1]), int(span[0]))
    per_dev = {}
    for d in devices:
        k = _numpy(con, f"""SELECT start, "end", coalesce(short_name_id, -1) AS name,
                                   coalesce(api_global_tid, -1) AS key, coalesce(api_start, 0) AS api_start,
                                   coalesce(api_end, {NONE}) AS api_end, coalesce(api_name_id, -1) AS api_name
                            FROM launches WHERE device_id = {d}""")
        g = gaps(merge(k["start"], k["end"], w), w)
        n = len(g)
        row = {"key": np.full(n, -1, np.int64), "api_start": np.zeros(n, np.int64),
               "api_end": np.full(n, NONE, np.int64), "after_id": np.full(n, -1, np.int64),
               "api_name_id": np.full(n, -1, np.int64), "before_id": np.full(n, -1, np.int64)}
        if len(k["start"]) and n:
            # closing kernel: the first (in stored order) starting at the gap's end
            i = np.searchsorted(k["start"], g.ends, side="left")
            hit = i < len(k["start"])
            hit[hit] &= k["start"][i[hit]] == g.ends[hit]
            for c, src in (("key", "key"), ("api_start", "api_start"), ("api_end", "api_end"),
                           ("after_id", "name"), ("api_name_id", "api_name")):
                row[c][hit] = k[src][i[hit]]
            # kernel before: the last (in stored order) ending at the gap's start
            by_end = np.argsort(k["end"], kind="stable")
            j = np.searchsorted(k["end"], g.starts, side="right", sorter=by_end) - 1
            ok = j >= 0
            ok[ok] &= k["end"][by_end[j[ok]]] == g.starts[ok]
            row["before_id"][ok] = k["name"][by_end[j[ok]]]
        known = (row["key"] >= 0) & (row["api_end"] != NONE)
        split, pre_end = split_points(g.starts, g.ends, known, row["api_start"], row["api_end"])
        per_dev[d] = dict(row, start=g.starts, end=g.ends, known=known, split=split, pre_end=pre_end,
                          api_ns=np.zeros(n, np.int64), sync_ns=np.zeros(n, np.int64))
        del k

    # One launching thread at a time (its calls can number millions).
    sync_ids = np.array([r[0] for r in con.execute(SYNC_NAMES).fetchall()], dtype=np.int64)
    keys = np.unique(np.concatenate([x["key"][x["known"]] for x in per_dev.values()]))
    for key in keys:
        c = _numpy(con, f"""SELECT start, "end", coalesce(name_id, -1) AS name FROM api_calls
                            WHERE global_tid = {int(key)}""")
        u_all, u_sync = thread_unions(c["start"], c["end"], np.isin(c["name"], sync_ids))
        del c
        for x in per_dev.values():
            sel = x["known"] & (x["key"] == key) & (x["pre_end"] > x["start"])
            if sel.any():
                x["api_ns"][sel] = u_all.overlap(x["start"][sel], x["pre_end"][sel])
                x["sync_ns"][sel] = u_sync.overlap(x["start"][sel], x["pre_end"][sel])

    mem = unions_by_device(con, MEMORY_OPS, w, devices)
    for d, x in per_dev.items():
        queued = x["known"] & (x["split"] < x["end"])
        memcpy = np.zeros(len(x["start"]), np.int64)
        if queued.any():
            memcpy[queued] = mem.get(d, EMPTY).overlap(x["split"][queued], x["end"][queued])
        causes = gap_causes(x["start"], x["end"], x["known"], x["split"], x["pre_end"], x["api_ns"],
                            x["sync_ns"], memcpy)
        x["device_id"] = np.full(len(x["start"]), d, np.int64)
        for c in TABLE_COLUMNS:
            cols[c].append(causes[c] if c in causes else x[c])
    table = pa.table({c: pa.array(np.concatenate(v), pa.int64()) for c, v in cols.items()})
    pq.write_table(table, out / "gaps.parquet", compression="lz4", use_dictionary=False,
                   write_statistics=["device_id", "start", "end"], row_group_size=128 * 1024)
    return table.num_rows
