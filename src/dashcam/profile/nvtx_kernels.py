"""Kernels launched from inside NVTX ranges, per label group (the nvtx tool's attribution).

A kernel belongs to a range when the API call that launched it started on the range's thread
(same pid and tid) with ``range.start <= call.start < range.end``. Per label group a kernel
counts once, even when ranges of that group nest or overlap on its thread: the group's ranges
on each thread are merged into disjoint spans first, and the launches inside each span are
counted with prefix sums over the launches sorted by thread and call start.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dashcam.measure.intervals import int_columns

THREAD_KEY = "(pid * 16777216 + {tid})"  # pid << 24 | tid: one number per thread (globalTid's low 48 bits)
NVTX_RANGE_TYPES = (59, 60, 70, 71)  # NVTX event types that are ranges: push/pop and start/end, NVTX and NVTXt


@dataclass
class LaunchAxis:
    """Launches by thread, then call start: per thread code ``c`` the launches ``seg[c]:seg[c + 1]``,
    with ``off`` = call start - base (ascending within a thread) and prefix sums of kernel ns.

    ``[base, base + stride - 1]`` covers every call start with room for one more ns, so range
    bounds clipped to it (``clip``) select the same launches as unclipped.
    """

    threads: np.ndarray  # sorted thread keys
    seg: np.ndarray
    off: np.ndarray
    cum: np.ndarray  # cum[i] = kernel ns of the first i launches in this order
    base: int
    stride: int

    @classmethod
    def build(cls, thread: np.ndarray, call_start: np.ndarray, kernel_ns: np.ndarray) -> LaunchAxis:
        threads = np.unique(thread)
        base = int(call_start.min()) if len(call_start) else 0
        stride = (int(call_start.max()) - base + 2) if len(call_start) else 2
        code = np.searchsorted(threads, thread)
        o = np.lexsort((call_start, code))
        seg = np.concatenate(([0], np.cumsum(np.bincount(code, minlength=len(threads)))))
        return cls(threads, seg, call_start[o] - base, np.concatenate(([0], np.cumsum(kernel_ns[o]))), base, stride)

    def clip(self, t: np.ndarray) -> np.ndarray:
        """Times as offsets from ``base``, clipped to the axis."""
        return np.clip(t, self.base, self.base + self.stride - 1) - self.base


@dataclass
class KeyTotals:
    """Per (group, thread) key: launches and kernel ns inside the group's spans on that thread,
    and the first start / last end of the ranges seen (to tell whether two batches can overlap)."""

    group: np.ndarray
    thread: np.ndarray
    count: np.ndarray
    ns: np.ndarray
    first: np.ndarray
    last: np.ndarray

    @classmethod
    def empty(cls) -> KeyTotals:
        z = np.zeros(0, np.int64)
        return cls(z, z, z, z, z, z)

    @classmethod
    def concat(cls, parts: list[KeyTotals]) -> KeyTotals:
        if not parts:
            return cls.empty()
        return cls(*(np.concatenate([getattr(p, f) for p in parts]) for f in
                     ("group", "thread", "count", "ns", "first", "last")))

    def by_group(self, groups: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(count, ns) summed over threads for each group id of ``groups``."""
        order = np.argsort(groups)
        sg = groups[order]
        i = np.searchsorted(sg, self.group)
        i = np.minimum(i, max(len(sg) - 1, 0))
        hit = (sg[i] == self.group) if len(sg) else np.zeros(len(self.group), bool)
        count, ns = np.zeros(len(groups), np.int64), np.zeros(len(groups), np.int64)
        np.add.at(count, order[i[hit]], self.count[hit])
        np.add.at(ns, order[i[hit]], self.ns[hit])
        return count, ns


def attribute(axis: LaunchAxis, start: np.ndarray, end: np.ndarray, thread: np.ndarray,
              group: np.ndarray) -> KeyTotals:
    """Launches inside the merged spans of each (group, thread), for ranges ``[start, end)``.

    ``group``: label group id (-1 for none); ranges on threads without launches are dropped.
    """
    nt = len(axis.threads)
    if nt == 0 or len(start) == 0:
        return KeyTotals.empty()
    tcode = np.minimum(np.searchsorted(axis.threads, thread), nt - 1)
    keep = (axis.threads[tcode] == thread) & (end >= start)  # a range ending before it starts holds nothing
    start, end, thread, tcode, group = start[keep], end[keep], thread[keep], tcode[keep], group[keep]
    if len(start) == 0:
        return KeyTotals.empty()
    ng = int(group.max()) + 2  # key = thread code * ng + group + 1: by thread, then group
    key = tcode * ng + (group + 1)
    # dense codes of the keys present: the stable sort is a radix sort when they fit 16 bits
    if key.max() > 50_000_000:
        present, dense = np.unique(key, return_inverse=True)
    else:
        present = np.flatnonzero(np.bincount(key))
        lut = np.zeros(int(present[-1]) + 1, np.int64)
        lut[present] = np.arange(len(present))
        dense = lut[key]
    stride = axis.stride
    if len(present) > 1 and len(present) * stride > 2 ** 62:  # the key axis would overflow: halve
        half = key <= present[len(present) // 2 - 1]
        return KeyTotals.concat([attribute(axis, start[m], end[m], thread[m], group[m])
                                 for m in (half, ~half)])
    o = np.argsort(dense.astype(np.uint16) if len(present) <= 65536 else dense, kind="stable")
    dense, s, e = dense[o], start[o], end[o]
    del o, key
    blocks = np.concatenate(([0], np.cumsum(np.bincount(dense, minlength=len(present)))))
    _sort_blocks(s, e, blocks)
    # merged spans per key: positions dense * stride + offset keep keys apart on one axis
    a = dense * stride + axis.clip(s)
    b = dense * stride + axis.clip(e)
    run_max = np.maximum.accumulate(b)
    first = np.flatnonzero(np.concatenate(([True], a[1:] > run_max[:-1])))
    span_key = dense[first]
    span_a = a[first] - span_key * stride
    span_b = np.maximum.reduceat(b, first) - span_key * stride
    # launches inside each span: searched within its thread's launches (keys come thread by thread)
    span_thread = present[span_key] // ng
    lo, hi = np.empty(len(first), np.int64), np.empty(len(first), np.int64)
    cuts = np.searchsorted(span_thread, np.arange(nt + 1))
    for c in np.flatnonzero(np.diff(cuts)):
        i, j, k0 = cuts[c], cuts[c + 1], axis.seg[c]
        launches = axis.off[k0:axis.seg[c + 1]]
        lo[i:j] = np.searchsorted(launches, span_a[i:j], side="left") + k0
        hi[i:j] = np.searchsorted(launches, span_b[i:j], side="left") + k0
    per_span_n = hi - lo
    per_span_ns = axis.cum[hi] - axis.cum[lo]
    key_cuts = np.searchsorted(span_key, np.arange(len(present)))
    return KeyTotals(
        group=present % ng - 1, thread=axis.threads[present // ng],
        count=np.add.reduceat(per_span_n, key_cuts), ns=np.add.reduceat(per_span_ns, key_cuts),
        first=s[blocks[:-1]], last=np.maximum.reduceat(e, blocks[:-1]),
    )


def _sort_blocks(s: np.ndarray, e: np.ndarray, blocks: np.ndarray) -> None:
    """In place: sort each block ``[blocks[i], blocks[i + 1])`` of ``s`` (and ``e`` with it) by ``s``.

    Only blocks with a descent are sorted: exports write ranges nearly in start order, so that
    is a few small sorts.
    """
    down = np.flatnonzero(s[1:] < s[:-1]) + 1
    for i in np.unique(np.searchsorted(blocks, down, side="right") - 1):
        lo, hi = blocks[i], blocks[i + 1]
        if hi - lo > 1 and (s[lo + 1:hi] < s[lo:hi - 1]).any():
            o = np.argsort(s[lo:hi], kind="stable")
            s[lo:hi], e[lo:hi] = s[lo:hi][o], e[lo:hi][o]


def tangled(t: KeyTotals) -> np.ndarray:
    """Mask of the rows of ``t`` (totals of several batches) whose key has ranges in two batches that
    overlap in time: their spans may merge across batches, so summing the batches could count a
    kernel twice. Keys seen in one batch, or in batches apart in time, are exact as summed.

    Sorted by first start within a key, the batches are apart exactly when each one starts at or
    after the end of the one before it, so neighbours are enough.
    """
    n = len(t.group)
    if n == 0:
        return np.zeros(0, bool)
    o = np.lexsort((t.first, t.thread, t.group))
    g, th, f, la = t.group[o], t.thread[o], t.first[o], t.last[o]
    same = np.concatenate(([False], (g[1:] == g[:-1]) & (th[1:] == th[:-1])))
    bad = same & np.concatenate(([False], f[1:] < la[:-1]))
    seg = np.cumsum(~same) - 1  # key number of each row
    bad_key = np.zeros(seg[-1] + 1, bool)
    bad_key[seg[bad]] = True
    out = np.zeros(n, bool)
    out[o] = bad_key[seg]
    return out


# -- computed with the cache: the whole-profile window, every device ------------------------------

TABLE = "nvtx_kernels.parquet"  # group_id, thread (THREAD_KEY), kernel_count, gpu_ns


def window_axis(con, window: tuple[int, int], devices: list[int] | None = None) -> LaunchAxis | None:
    """The launch axis of the kernels overlapping ``window`` (durations clipped to it), on ``devices`` (default:
    every device), or None without launches."""

    w0, w1 = window
    on = "device_id IS NOT NULL" if devices is None else f'device_id IN ({", ".join(str(int(x)) for x in devices)})'
    d = int_columns(con, f"""
        SELECT {THREAD_KEY.format(tid="api_tid")} AS th, api_start, least("end", {w1}) - greatest(start, {w0}) AS d
        FROM launches WHERE "end" > {w0} AND start < {w1} AND api_start IS NOT NULL AND api_tid IS NOT NULL
         AND pid IS NOT NULL AND {on}""")
    if len(d["th"]) == 0:
        return None
    return LaunchAxis.build(d["th"], d["api_start"], d["d"])


RANGE_COLUMNS = ["start", "end", "eventType", "globalTid", "groupId"]  # what chunk_ranges reads


def read_ranges(path, window: tuple[int, int]) -> tuple[np.ndarray, ...]:
    """chunk_ranges of a written NVTX chunk file, reading only the columns it needs."""
    import pyarrow.parquet as pq

    f = pq.ParquetFile(path)  # one file: not pq.read_table, which loads pyarrow.dataset (7 MB of a worker)
    have = set(f.schema_arrow.names)
    return chunk_ranges(f.read(columns=[c for c in RANGE_COLUMNS if c in have]), window)


def chunk_ranges(table, window: tuple[int, int]) -> tuple[np.ndarray, ...]:
    """(start, end, thread, group) of the ranges of a raw NVTX chunk (Arrow) that overlap ``window``."""
    def col(name, fill):
        if name not in table.column_names:
            return np.full(table.num_rows, fill, np.int64)
        return np.asarray(table.column(name).fill_null(fill).to_numpy(), np.int64)

    has_end = (table.column("end").is_valid().to_numpy(zero_copy_only=False) if "end" in table.column_names
               else np.zeros(table.num_rows, bool))
    has_tid = (table.column("globalTid").is_valid().to_numpy(zero_copy_only=False)
               if "globalTid" in table.column_names else np.zeros(table.num_rows, bool))
    start, end = col("start", 0), col("end", 0)
    keep = has_end & has_tid & np.isin(col("eventType", 59), NVTX_RANGE_TYPES)
    keep &= (end > window[0]) & (start < window[1])
    return start[keep], end[keep], col("globalTid", 0)[keep] & ((1 << 48) - 1), col("groupId", -1)[keep]


def settle(parts: list[KeyTotals], axis: LaunchAxis, ranges_of) -> KeyTotals:
    """The totals of batches of ranges taken together: the keys whose batches overlap in time
    (``tangled``) are recomputed from all their ranges. ``ranges_of(pairs)`` yields (start, end,
    thread, group) arrays of the ranges of those (group, thread) pairs, each holding every range of
    the keys it has. A key may keep one row per batch."""
    t = KeyTotals.concat(parts)
    bad = tangled(t)
    if not bad.any():
        return t
    redo = [attribute(axis, *r) for r in ranges_of(set(zip(t.group[bad].tolist(), t.thread[bad].tolist())))]
    kept = KeyTotals(*(getattr(t, f)[~bad] for f in ("group", "thread", "count", "ns", "first", "last")))
    return KeyTotals.concat([kept, *redo])


def of_pairs(r: tuple[np.ndarray, ...], pairs: set[tuple[int, int]]) -> tuple[np.ndarray, ...]:
    """The ranges (start, end, thread, group) of ``r`` whose (group, thread) is in ``pairs``."""
    groups = np.array(sorted({g for g, _ in pairs}), np.int64)
    threads = np.array(sorted({t for _, t in pairs}), np.int64)
    m = np.isin(r[3], groups) & np.isin(r[2], threads)
    # one code per (group, thread) from their positions among the pairs' groups and threads
    code = np.searchsorted(groups, r[3][m]) * len(threads) + np.searchsorted(threads, r[2][m])
    wanted = [int(np.searchsorted(groups, g)) * len(threads) + int(np.searchsorted(threads, t)) for g, t in pairs]
    m[m] = np.isin(code, wanted)
    return tuple(x[m] for x in r)


def finish(parts: list[KeyTotals], axis: LaunchAxis, window: tuple[int, int], chunk_files: list, out) -> int:
    """Sum the per-chunk totals by (group, thread), recomputing the keys whose chunks overlap in time; write TABLE."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    def ranges_of(pairs):
        cols = [of_pairs(read_ranges(f, window), pairs) for f in chunk_files]
        yield tuple(np.concatenate([c[i] for c in cols]) for i in range(4))

    t = settle(parts, axis, ranges_of)
    # one row per (group, thread): a --gpu query can sum the threads that launch on that GPU only
    keys, inv = np.unique(np.stack([t.group, t.thread]), axis=1, return_inverse=True)
    inv = inv.reshape(-1)
    count, ns = np.zeros(keys.shape[1], np.int64), np.zeros(keys.shape[1], np.int64)
    np.add.at(count, inv, t.count)
    np.add.at(ns, inv, t.ns)
    pq.write_table(pa.table({"group_id": keys[0], "thread": keys[1], "kernel_count": count, "gpu_ns": ns}),
                   out / TABLE, write_page_checksum=True)
    return keys.shape[1]
