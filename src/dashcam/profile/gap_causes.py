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
device's last kernel), cannot be split: its time with the device copying, setting or migrating memory
(that device's memcpy, memset and unified-memory migration union) is ``transfer``, the rest ``unknown``
(what the capture really cannot tell). The causes of a gap add up to its length exactly.

CUDA graphs: one launch call (``cudaGraphLaunch``) starts every kernel of the graph. Only the graph's
first kernel waits for that call; a later node of the same launch (a kernel with a graphNodeId whose
launch call started an earlier kernel on this device) waits for the nodes before it, on the device:
its gap is split at its start (``split = a``), so all of it is ``memcpy`` or ``dependency``, never
launch overhead or host time.

The causes of every gap of the whole-profile window are computed once, when the cache is built
(``build_gap_table`` -> ``gaps.parquet``, with the time in each CUDA API behind them in
``gap_api.parquet``). A gap keeps its closing kernel when a narrower window cuts it, so a query
over any window reads the gaps inside it from those tables and recomputes only the (at most two
per device) gaps the window cuts, with ``gap_causes`` on their clipped bounds.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from dashcam.measure.definitions import Window
from dashcam.measure.intervals import MEMORY_OPS, Union, gaps, int_columns, merge, unions_by_device

CAUSES = ["sync_wait", "cuda_api", "launch_overhead", "cpu_work", "memcpy", "dependency", "transfer", "unknown"]
DEVICE_SIDE = ("memcpy", "dependency", "transfer")  # the device busy or waiting on itself, not on the CPU
CPU_SIDE = {"sync_wait", "cuda_api", "launch_overhead", "cpu_work"}
NONE = np.iinfo(np.int64).max  # api_end of a kernel without a launch call
SYNC_NAMES = "SELECT id FROM api_names WHERE name LIKE '%Synchronize%'"

# Columns of gaps.parquet, one row per gap of the whole-profile window, by device and start.
# key: raw globalTid of the thread that launched the closing kernel (-1: none);
# before_id / after_id: short-name string ids of the kernels ending / starting the gap (-1: none).
# API_TABLE: per gap (device_id, start, end) and API name id, the launching thread's time inside calls of
# that name during the gap's CPU-side part [start, pre_end) (calls_by_gap); only gaps with such time.
API_TABLE = "gap_api.parquet"
API_COLUMNS = ["device_id", "start", "end", "name_id", "ns"]
# mem_ns: the device's copy/memset union inside the whole gap (busy = kernel busy + mem_ns over the gaps).
# node_wait: 1 when the closing kernel is a later node of a graph launch (its wait is device-side).
TABLE_COLUMNS = ["device_id", "start", "end", "key", "api_start", "api_end", "before_id", "after_id",
                 "api_name_id", "node_wait", *CAUSES, "mem_ns"]


def split_points(a: np.ndarray, b: np.ndarray, known: np.ndarray, api_start: np.ndarray,
                 api_end: np.ndarray, node_wait: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``(split, pre_end)`` of gaps ``[a, b)`` (both ``a`` where the launch call is unknown, and where the
    closing kernel is a later node of a graph launch: ``node_wait``)."""
    split = np.where(known, np.clip(api_end, a, b), a)
    pre_end = np.where(known, np.clip(api_start, a, split), a)
    if node_wait is not None:
        wait = np.asarray(node_wait, bool)
        split, pre_end = np.where(wait, a, split), np.where(wait, a, pre_end)
    return split, pre_end


def gap_causes(a, b, known, split, pre_end, api_ns, sync_ns, memcpy_ns) -> dict[str, np.ndarray]:
    """Cause name -> ns per gap. ``api_ns``/``sync_ns``: the launching thread's CUDA-call union
    (all calls / *Synchronize calls) inside ``[a, pre_end)``; ``memcpy_ns``: the device's copy and
    memset union (migrations are copies) inside ``[split, b)``, the whole gap where the launch call is unknown."""
    return {
        "sync_wait": sync_ns,
        "cuda_api": api_ns - sync_ns,
        "launch_overhead": split - pre_end,
        "cpu_work": pre_end - a - api_ns,
        "memcpy": np.where(known, memcpy_ns, 0),
        "dependency": np.where(known, b - split - memcpy_ns, 0),
        "transfer": np.where(known, 0, memcpy_ns),
        "unknown": np.where(known, 0, b - a - memcpy_ns),
    }


def calls_by_gap(calls: dict[str, np.ndarray], a: np.ndarray, b: np.ndarray,
                 gap: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(gap, name id, ns): each call's time inside the CPU-side part ``[a, b)`` of the gaps ``gap``.

    ``a``/``b`` sorted and disjoint (the CPU-side parts of one device's gaps closed by one thread);
    calls are counted one by one, so a runtime call and the driver call nested in it both count.
    """
    first = np.searchsorted(b, calls["start"], side="right")  # the first part ending after the call starts
    stop = np.searchsorted(a, calls["end"], side="left")  # parts starting before the call ends
    n = np.maximum(stop - first, 0)
    call = np.repeat(np.arange(len(n)), n)
    part = np.repeat(first, n) + np.arange(int(n.sum())) - np.repeat(np.cumsum(n) - n, n)
    ns = np.minimum(calls["end"][call], b[part]) - np.maximum(calls["start"][call], a[part])
    keep = ns > 0
    return gap[part[keep]], calls["name"][call[keep]], ns[keep]


def _sum_pairs(parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]]) -> tuple[np.ndarray, ...]:
    """(gap, name id, ns) summed per (gap, name)."""
    if not parts:
        z = np.zeros(0, np.int64)
        return z, z, z
    gap, name, ns = (np.concatenate([p[i] for p in parts]) for i in range(3))
    o = np.lexsort((name, gap))
    gap, name, ns = gap[o], name[o], ns[o]
    new = np.flatnonzero(np.concatenate(([True], (gap[1:] != gap[:-1]) | (name[1:] != name[:-1])))) \
        if len(gap) else np.zeros(0, np.int64)
    return gap[new], name[new], np.add.reduceat(ns, new) if len(new) else ns


def later_graph_nodes(graph: np.ndarray, pid: np.ndarray, corr: np.ndarray, start: np.ndarray) -> np.ndarray:
    """Per kernel: a graph node (``graph``) that is not the first kernel of its launch call (same pid and
    correlationId) to start; kernels sorted by start."""
    later = np.zeros(len(start), bool)
    idx = np.flatnonzero(graph)
    if len(idx) == 0:
        return later
    o = idx[np.lexsort((start[idx], corr[idx], pid[idx]))]
    first = np.r_[True, (pid[o][1:] != pid[o][:-1]) | (corr[o][1:] != corr[o][:-1])]
    later[o[~first]] = True
    return later


def thread_unions(start: np.ndarray, end: np.ndarray, is_sync: np.ndarray) -> tuple[Union, Union]:
    """The union of a thread's CUDA calls, and of its *Synchronize calls."""
    return merge(start, end), merge(start[is_sync], end[is_sync])


def build_gap_table(con, out: Path, window: list[int] | None, devices: list[int], examined=None,
                    totals: dict | None = None) -> int:
    """Write ``gaps.parquet``: every gap of each of ``devices`` in the whole-profile ``window``, with its causes.

    ``con`` has the model views and ``launches``. One device at a time, so memory holds one
    device's gaps, copies and memsets, and one launching thread's calls. Returns the number of gaps.
    ``examined``: a gap_nvtx.GapNvtx that takes each device's gaps with the most cpu_work; ``totals`` (a dict)
    gets each device's whole-window sums (``whole_window_totals``).
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = pa.schema([(c, pa.int64()) for c in TABLE_COLUMNS])
    n_rows = 0
    api_schema = pa.schema([(c, pa.int64()) for c in API_COLUMNS])
    with pq.ParquetWriter(out / "gaps.parquet", schema, compression="lz4", use_dictionary=False,
                          write_statistics=["device_id", "start", "end"], write_page_checksum=True) as writer, \
            pq.ParquetWriter(out / API_TABLE, api_schema, compression="lz4", write_page_checksum=True) as api_writer:
        if window is None or not devices:
            writer.write_table(schema.empty_table())
            api_writer.write_table(api_schema.empty_table())
            return 0
        w = Window(window[0], window[1], window[0])
        sync_ids = np.array([r[0] for r in con.execute(SYNC_NAMES).fetchall()], dtype=np.int64)
        from dashcam.profile.gap_dependency import all_kernels, device_totals, split_gaps  # it builds on this module

        busy = all_kernels(con, w, devices) if totals is not None else None
        threads: dict[int, tuple[Union, Union]] = {}  # the last launching thread's call unions
        for d in devices:
            # the previous device's arrays go before this device's are computed: both at once peaked
            # about 15 MB higher on a 120 MB export (two devices of 100,000 kernels)
            memory = cols = None
            memory = unions_by_device(con, f"SELECT * FROM ({MEMORY_OPS}) WHERE device_id = {d}", w, [d])[d]
            cols = _device_gaps(con, w, d, sync_ids, memory, threads)
            if totals is not None:
                totals[str(d)] = whole_window_totals(cols)
                totals[str(d)]["dependency_split"] = device_totals(cols, split_gaps(con, cols, busy), d)
            if examined is not None:
                examined.add_device(d, cols, lambda k: threads[k][2] if k in threads else int_columns(
                    con, f'SELECT start, "end" FROM api_calls WHERE global_tid = {int(k)}'))
            writer.write_table(pa.table({c: pa.array(cols[c], pa.int64()) for c in TABLE_COLUMNS}, schema=schema),
                               row_group_size=128 * 1024)
            gap, name, ns = cols["api_by_name"]
            api_writer.write_table(pa.table({
                "device_id": np.full(len(gap), d, np.int64), "start": cols["start"][gap], "end": cols["end"][gap],
                "name_id": name, "ns": ns}, schema=api_schema))
            n_rows += len(cols["start"])
    return n_rows


# Histogram bucket upper bounds (ns) of gpu_gaps: <10 us, <100 us, <1 ms, <10 ms, <100 ms, >=100 ms.
BUCKET_BOUNDS = [10_000, 100_000, 1_000_000, 10_000_000, 100_000_000, None]


def whole_window_totals(cols: dict[str, np.ndarray]) -> dict:
    """A device's gaps over the whole-profile window summed, as gpu_gaps sums them for a window: count, cause
    sums, histogram [count, ns] per BUCKET_BOUNDS bucket, API name id -> ns (gap_api), the first kernel start
    and last kernel end (None without kernels), the copy/memset time inside the gaps; kept in the manifest."""
    dur = cols["end"] - cols["start"]
    hist, lo = [], 0
    for hi in BUCKET_BOUNDS:
        m = (dur >= lo) & (dur < hi) if hi is not None else dur >= lo
        hist.append([int(m.sum()), int(dur[m].sum())])
        lo = hi or 0
    _, name, ns = cols["api_by_name"]
    api: dict[str, int] = {}
    for n, t in zip(name.tolist(), ns.tolist()):
        api[str(n)] = api.get(str(n), 0) + t
    return {"count": len(dur), "causes": {c: int(cols[c].sum()) for c in CAUSES}, "hist": hist, "api": api,
            "kernels": cols["kernel_span"], "mem_ns": int(cols["mem_ns"].sum())}


def _device_gaps(con, w: Window, d: int, sync_ids: np.ndarray, memory: Union,
                 threads: dict[int, tuple[Union, Union]]) -> dict[str, np.ndarray]:
    """The TABLE_COLUMNS of device ``d``'s gaps in ``w``."""
    k = int_columns(con, f"""SELECT start, "end", coalesce(short_name_id, -1) AS name,
                               coalesce(api_global_tid, -1) AS key, coalesce(api_start, 0) AS api_start,
                               coalesce(api_end, {NONE}) AS api_end, coalesce(api_name_id, -1) AS api_name,
                               CAST(graph_node_id IS NOT NULL AND api_start IS NOT NULL AS BIGINT) AS graph,
                               coalesce(pid, -1) AS pid, coalesce(correlation_id, -1) AS corr
                        FROM launches WHERE device_id = {d}""")
    k["later_node"] = later_graph_nodes(k["graph"].astype(bool), k["pid"], k["corr"], k["start"])
    # the first kernel start and last kernel end inside the window, clipped (gpu_gaps' edge gaps)
    inw = (k["end"] > w.start_ns) & (k["start"] < w.end_ns)
    kernel_span = [int(np.maximum(k["start"][inw], w.start_ns).min()), int(np.minimum(k["end"][inw], w.end_ns).max())] \
        if inw.any() else None
    g = gaps(merge(k["start"], k["end"], w), w)
    n = len(g)
    row = {"device_id": np.full(n, d, np.int64), "start": g.starts, "end": g.ends,
           "key": np.full(n, -1, np.int64), "api_start": np.zeros(n, np.int64),
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
    row["node_wait"] = np.zeros(n, np.int64)
    if len(k["start"]) and n:
        row["node_wait"][hit] = k["later_node"][i[hit]]
    del k
    known = (row["key"] >= 0) & (row["api_end"] != NONE)
    split, pre_end = split_points(g.starts, g.ends, known, row["api_start"], row["api_end"], row["node_wait"])
    api_ns, sync_ns = np.zeros(n, np.int64), np.zeros(n, np.int64)
    cpu_side = known & (pre_end > g.starts)
    by_name = []
    for key in np.unique(row["key"][cpu_side]):
        if key not in threads:
            threads.clear()
            c = int_columns(con, f'SELECT start, "end", coalesce(name_id, -1) AS name FROM api_calls '
                            f'WHERE global_tid = {int(key)}')
            threads[key] = (*thread_unions(c["start"], c["end"], np.isin(c["name"], sync_ids)), c)
        u_all, u_sync, calls = threads[key]
        sel = cpu_side & (row["key"] == key)
        api_ns[sel] = u_all.overlap(g.starts[sel], pre_end[sel])
        sync_ns[sel] = u_sync.overlap(g.starts[sel], pre_end[sel])
        idx = np.flatnonzero(sel)
        by_name.append(calls_by_gap(calls, g.starts[idx], pre_end[idx], idx))
    row["api_by_name"] = _sum_pairs(by_name)
    queued = split < g.ends  # the device side: after the launch call returned, or all of a gap without one
    memcpy = np.zeros(n, np.int64)
    if queued.any():
        memcpy[queued] = memory.overlap(split[queued], g.ends[queued])
    row["mem_ns"] = memory.overlap(g.starts, g.ends)
    row["kernel_span"] = kernel_span
    return row | gap_causes(g.starts, g.ends, known, split, pre_end, api_ns, sync_ns, memcpy)


# -- reading the table for a window ---------------------------------------------------------------

def inside(w: Window, devices: list[int]) -> str:
    """SQL condition: stored gaps of ``devices`` lying wholly inside the window."""
    return (f'device_id IN ({",".join(str(int(d)) for d in devices)}) '
            f'AND start >= {w.start_ns} AND "end" <= {w.end_ns}')


def cut(w: Window, devices: list[int]) -> str:
    """SQL condition: stored gaps of ``devices`` the window cuts (they overlap it and stick out)."""
    return (f'device_id IN ({",".join(str(int(d)) for d in devices)}) AND "end" > {w.start_ns} '
            f'AND start < {w.end_ns} AND (start < {w.start_ns} OR "end" > {w.end_ns})')


def sql_values(rows: list[tuple]) -> str:
    return ", ".join("(" + ", ".join(str(int(x)) for x in r) + ")" for r in rows)


def split_by_probe(d: dict) -> dict[int, dict[str, np.ndarray]]:
    """Rows of a probe query (column ``i`` = probe number) as arrays per probe."""
    idx = np.asarray(d["i"], np.int64)
    o = np.argsort(idx, kind="stable")
    cols = {k: np.asarray(v, np.int64)[o] for k, v in d.items() if k != "i"}
    idx = idx[o]
    out = {}
    for i in np.unique(idx):
        lo, hi = np.searchsorted(idx, [i, i + 1])
        out[int(i)] = {k: v[lo:hi] for k, v in cols.items()}
    return out


def memory_in(profile, probes: list[tuple[int, int, int, int]]) -> dict[int, int]:
    """For probes (i, device, a, b): length of that device's copy/memset union inside [a, b)."""
    if not probes:
        return {}
    d = profile.con.execute(f"""
        SELECT v.i, m.start, m."end" FROM ({MEMORY_OPS}) m JOIN (VALUES {sql_values(probes)}) v(i, dev, a, b)
          ON m.device_id = v.dev AND m.start < v.b AND m."end" > v.a""").fetchnumpy()
    bounds = {i: (a, b) for i, _, a, b in probes}
    return {i: merge(x["start"], x["end"], Window(*bounds[i], bounds[i][0])).total
            for i, x in split_by_probe(d).items()}


def whole_window(profile, w: Window) -> dict | None:
    """The sums the manifest holds per device (``whole_window_totals``, keys: device id as text) when ``w`` is
    the whole-profile window the gap table was built on, else None."""
    totals = profile.manifest.get("derived", {}).get("gap_totals")
    full = profile.full_window
    return totals if totals is not None and full is not None and (w.start_ns, w.end_ns) == tuple(full) else None


def idle_in(profile, w: Window, devices: list[int]) -> dict[int, tuple[int, int]]:
    """Per device: (idle ns = the gaps' length in the window, copy/memset ns inside those gaps).

    So kernel busy = window - idle, and busy (kernels, copies, memsets) = window - idle + copy ns.
    """
    out = {d: [0, 0] for d in devices}
    whole = whole_window(profile, w)
    if whole is not None:  # every gap lies inside the whole-profile window, none is cut
        return {d: (sum(ns for _, ns in whole[str(d)]["hist"]), whole[str(d)]["mem_ns"]) if str(d) in whole else (0, 0)
                for d in devices}
    for d, idle, mem in profile.rows(f"""SELECT device_id, sum("end" - start)::BIGINT, sum(mem_ns)::BIGINT
                                        FROM gap_table WHERE {inside(w, devices)} GROUP BY 1"""):
        out[int(d)] = [int(idle), int(mem)]
    rows = profile.rows(f'SELECT device_id, greatest(start, {w.start_ns}), least("end", {w.end_ns}) '
                        f'FROM gap_table WHERE {cut(w, devices)}')
    mem = memory_in(profile, [(i, d, a, b) for i, (d, a, b) in enumerate(rows)])
    for i, (d, a, b) in enumerate(rows):
        out[int(d)][0] += int(b) - int(a)
        out[int(d)][1] += mem.get(i, 0)
    return {d: (v[0], v[1]) for d, v in out.items()}
