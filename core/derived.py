"""Joins and unions computed once when the cache is built, so tool queries stay fast.

- ``launches``: every kernel with the API call that launched it (same pid and
  correlationId; the earliest call when a capture repeats a pair), sorted by device,
  start and launch-call end. Columns: device_id, stream_id, start, end, pid,
  correlation_id, api_tid, api_start, api_end, api_name_id (the api_* columns are NULL
  when the capture has no launch call for the kernel; names via the ``api_names`` table).
- ``thread_api_union``: per thread, the union of its CUDA API calls (``is_sync`` false)
  and, separately, of its *Synchronize calls (``is_sync`` true), sorted by pid, tid,
  is_sync, start. A driver call nested in a runtime call counts once.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from .intervals import merge

SYNC_PATTERN = "%Synchronize%"
NO_VALUE = np.iinfo(np.int64).min  # stands for NULL in the integer arrays below


def _write(table_cols: dict[str, np.ndarray], valid: dict[str, np.ndarray], path: Path) -> int:
    import pyarrow as pa
    import pyarrow.parquet as pq

    arrays = {k: pa.array(v, type=pa.bool_() if v.dtype == bool else pa.int64(),
                          mask=None if k not in valid else ~valid[k]) for k, v in table_cols.items()}
    pq.write_table(pa.table(arrays), path, compression="none")
    return len(next(iter(table_cols.values()))) if table_cols else 0


def _numpy(con, sql: str) -> dict[str, np.ndarray]:
    return {k: np.asarray(v, dtype=bool if v.dtype == bool else np.int64)
            for k, v in con.execute(sql).fetchnumpy().items()}


def build_launches(con, out: Path) -> int:
    n_kernels = int(con.execute("SELECT count(*) FROM kernel_times").fetchone()[0])
    # (pid, correlationId) is unique per launch call in every export seen, so the plain join
    # is enough; should a capture repeat a pair, the join would duplicate kernels: then dedupe.
    for calls in ("api_calls", "(SELECT pid, correlation_id, arg_min(tid, start) AS tid, min(start) AS start, "
                               "arg_min(\"end\", start) AS \"end\", arg_min(name_id, start) AS name_id "
                               "FROM api_calls GROUP BY pid, correlation_id)"):
        d = _numpy(con, f"""
            SELECT k.start, k."end", coalesce(c.tid, {NO_VALUE}) AS api_tid, coalesce(c.start, {NO_VALUE}) AS api_start,
                   coalesce(c."end", {NO_VALUE}) AS api_end, coalesce(c.name_id, {NO_VALUE}) AS api_name_id,
                   coalesce(k.device_id, {NO_VALUE}) AS _dev, coalesce(k.pid, {NO_VALUE}) AS _pid,
                   coalesce(k.correlation_id, {NO_VALUE}) AS _corr, coalesce(k.stream_id, {NO_VALUE}) AS _stream
            FROM kernel_times k LEFT JOIN {calls} c ON c.pid = k.pid AND c.correlation_id = k.correlation_id""")
        if len(d["start"]) == n_kernels:
            break
    no_call = d["api_end"] == NO_VALUE
    order = np.lexsort((np.where(no_call, np.iinfo(np.int64).max, d["api_end"]), d["start"], d["_dev"]))
    cols = {"device_id": d["_dev"], "stream_id": d["_stream"], "start": d["start"], "end": d["end"],
            "pid": d["_pid"], "correlation_id": d["_corr"], "api_tid": d["api_tid"], "api_start": d["api_start"],
            "api_end": d["api_end"], "api_name_id": d["api_name_id"]}
    cols = {k: v[order] for k, v in cols.items()}
    valid = {k: v != NO_VALUE for k, v in cols.items() if k not in ("start", "end")}
    return _write(cols, valid, out / "launches.parquet")


def build_thread_api_union(con, out: Path) -> int:
    d = _numpy(con, f"""
        SELECT pid * {1 << 24} + tid AS k, start, "end",
               name_id IN (SELECT id FROM api_names WHERE name LIKE '{SYNC_PATTERN}') AS is_sync
        FROM api_calls WHERE pid IS NOT NULL AND tid IS NOT NULL""")
    order = np.argsort(d["k"], kind="stable")
    k, s, e, sync = (d[c][order] for c in ("k", "start", "end", "is_sync"))
    del d, order
    parts: list[tuple[int, bool, np.ndarray, np.ndarray]] = []
    cuts = np.flatnonzero(np.diff(k)) + 1
    for a, b in zip(np.r_[0, cuts], np.r_[cuts, len(k)]):
        if a < b:
            parts.append((int(k[a]), False, *_se(merge(s[a:b], e[a:b]))))
            m = sync[a:b]
            parts.append((int(k[a]), True, *_se(merge(s[a:b][m], e[a:b][m]))))
    z = np.zeros(0, np.int64)
    cols = {
        "pid": np.concatenate([np.full(len(p[2]), p[0] >> 24) for p in parts]) if parts else z,
        "tid": np.concatenate([np.full(len(p[2]), p[0] & 0xFFFFFF) for p in parts]) if parts else z,
        "is_sync": np.concatenate([np.full(len(p[2]), p[1]) for p in parts]) if parts else z.astype(bool),
        "start": np.concatenate([p[2] for p in parts]) if parts else z,
        "end": np.concatenate([p[3] for p in parts]) if parts else z,
    }
    return _write(cols, {}, out / "thread_api_union.parquet")


def _se(u) -> tuple[np.ndarray, np.ndarray]:
    return u.starts, u.ends


def build_derived(con, out: Path) -> dict[str, int]:
    """Write the derived Parquet files into ``out`` using the views on ``con``; return row counts."""
    return {"launches": build_launches(con, out), "thread_api_union": build_thread_api_union(con, out)}


def create_derived_views(con, cache: Path) -> None:
    esc = str(cache).replace("'", "''")
    con.execute(f"CREATE OR REPLACE VIEW launches AS SELECT * FROM read_parquet('{esc}/launches.parquet')")
    con.execute(
        f"CREATE OR REPLACE VIEW thread_api_union AS SELECT * FROM read_parquet('{esc}/thread_api_union.parquet')")
