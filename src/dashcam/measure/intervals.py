"""Interval arithmetic on the timeline (numpy): unions, gaps and overlap by prefix sums.

These implement the definitions in ``definitions.py``; every tool measures busy time,
gaps and overlaps with them, so the numbers agree across tools.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dashcam.measure.definitions import Window


@dataclass
class Union:
    """Disjoint, sorted intervals ``[starts[i], ends[i])`` and their prefix lengths."""

    starts: np.ndarray
    ends: np.ndarray

    def __post_init__(self) -> None:
        self.starts = np.asarray(self.starts, dtype=np.int64)
        self.ends = np.asarray(self.ends, dtype=np.int64)
        self._cum = np.empty(len(self.starts) + 1, np.int64)  # filled in place: no second copy of the lengths
        self._cum[0] = 0
        np.cumsum(np.subtract(self.ends, self.starts), out=self._cum[1:])

    @property
    def total(self) -> int:
        return int(self._cum[-1])

    def __len__(self) -> int:
        return len(self.starts)

    def covered_before(self, t: np.ndarray | int) -> np.ndarray:
        """Length of the union inside ``(-inf, t)`` for each ``t``."""
        t = np.asarray(t, dtype=np.int64)
        if len(self.starts) == 0:
            return np.zeros_like(t)
        i = np.searchsorted(self.starts, t, side="right")  # intervals starting before or at t
        prev = np.maximum(i - 1, 0)
        partial = np.where(i > 0, np.clip(t - self.starts[prev], 0, self.ends[prev] - self.starts[prev]), 0)
        return np.where(i > 0, self._cum[prev] + partial, 0)

    def overlap(self, a: np.ndarray | int, b: np.ndarray | int) -> np.ndarray:
        """Length of the union inside ``[a, b)``, element-wise (0 where b <= a)."""
        a = np.asarray(a, dtype=np.int64)
        b = np.asarray(b, dtype=np.int64)
        return np.where(b > a, self.covered_before(np.maximum(a, b)) - self.covered_before(a), 0)


EMPTY = Union(np.zeros(0, np.int64), np.zeros(0, np.int64))


def unique_points(x: np.ndarray) -> np.ndarray:
    """The distinct values of ``x``, sorted: ``np.unique(x)`` by a sort and a comparison. numpy 2.4's
    ``np.unique`` hashes first, about 1 us a distinct value: the 3 M segment bounds of a thread's calls took
    2.9 s, sorted 0.02 s."""
    y = np.sort(np.asarray(x))
    if len(y) < 2:
        return y
    keep = np.empty(len(y), bool)
    keep[0] = True
    np.not_equal(y[1:], y[:-1], out=keep[1:])
    return y[keep]


def merge(starts: np.ndarray, ends: np.ndarray, window: Window | None = None) -> Union:
    """Union of intervals (any order), clipped to ``window`` when given. Touching intervals merge."""
    s = np.asarray(starts, dtype=np.int64)
    e = np.asarray(ends, dtype=np.int64)
    if window is not None:
        keep = (e > window.start_ns) & (s < window.end_ns)
        s = np.maximum(s[keep], window.start_ns)
        e = np.minimum(e[keep], window.end_ns)
    keep = e >= s
    if not keep.all():  # copies only when an interval is dropped (a thread's calls: 180,000 rows, 3 MB)
        s, e = s[keep], e[keep]
    del keep
    if len(s) == 0:
        return Union(s, e)
    if len(s) > 1 and (s[1:] < s[:-1]).any():
        o = np.argsort(s, kind="stable")
        s, e = s[o], e[o]
        del o
    new = np.empty(len(s), dtype=bool)
    new[0] = True
    run_max = np.maximum.accumulate(e)
    np.greater(s[1:], run_max[:-1], out=new[1:])
    del run_max
    first = np.flatnonzero(new)
    del new
    return Union(s[first], np.maximum.reduceat(e, first))


def int_columns(con, sql: str) -> dict[str, np.ndarray]:
    """The columns of ``sql`` as int64 numpy arrays (DuckDB's numpy fetch: as fast as Arrow for millions
    of rows, and a command that reads no Parquet itself never imports pyarrow, about 0.1 s of start-up).

    The query must not return NULLs: coalesce or filter them out.
    """
    return {name: np.asarray(col, np.int64) for name, col in con.sql(sql).fetchnumpy().items()}


def arrow_batches(rel, rows: int):
    """A DuckDB relation's result as a stream of Arrow record batches of up to ``rows`` rows
    (``to_arrow_reader`` in DuckDB 1.5+, ``fetch_arrow_reader`` before)."""
    return (getattr(rel, "to_arrow_reader", None) or rel.fetch_arrow_reader)(rows)


def unions_by_device(profile, source_sql: str, window: Window, devices: list[int] | None = None) -> dict[int, Union]:
    """Per-device union of ``source_sql`` rows (columns device_id, start, end) inside the window.

    ``profile``: a Profile, or a bare DuckDB connection with the model views (cache build).
    """
    d = int_columns(getattr(profile, "con", profile),
                    f'SELECT device_id, start, "end" FROM ({source_sql}) '
                    f'WHERE "end" > {int(window.start_ns)} AND start < {int(window.end_ns)} AND device_id IS NOT NULL')
    dev, s, e = d["device_id"], d["start"], d["end"]
    out: dict[int, Union] = {}
    if len(dev):
        o = np.argsort(dev, kind="stable")
        dev, s, e = dev[o], s[o], e[o]
        cuts = np.flatnonzero(np.diff(dev)) + 1
        for a, b in zip(np.r_[0, cuts], np.r_[cuts, len(dev)]):
            out[int(dev[a])] = merge(s[a:b], e[a:b], window)
    for dv in devices or []:
        out.setdefault(int(dv), EMPTY)
    return out


def gaps(u: Union, window: Window) -> Union:
    """The holes of ``u`` inside the window, including before the first and after the last interval."""
    s = np.concatenate(([window.start_ns], u.ends))
    e = np.concatenate((u.starts, [window.end_ns]))
    keep = e > s
    return Union(s[keep], e[keep])


def kernel_unions(profile, window: Window, devices: list[int]) -> dict[int, Union]:
    """Per device, the union of its kernels inside the window (its *kernel busy* time).

    Read per device from ``launches``, which the cache stores sorted by device and start, so
    no sorting is needed; memoized on the profile for the window.
    """
    memo = profile.__dict__.setdefault("_kernel_unions", {})
    out = {}
    for d in devices:
        key = (int(d), window.start_ns, window.end_ns)
        if key not in memo:
            a = profile.con.execute(
                f'SELECT start, "end" FROM launches WHERE device_id = {int(d)} '
                f'AND "end" > {window.start_ns} AND start < {window.end_ns}').fetchnumpy()
            memo[key] = merge(a["start"], a["end"], window)
        out[int(d)] = memo[key]
    return out


def memory_unions(profile, window: Window, devices: list[int]) -> dict[int, Union]:
    """Per device, the union of its memcpys and memsets inside the window; memoized on the profile."""
    memo = profile.__dict__.setdefault("_memory_unions", {})
    key = (window.start_ns, window.end_ns)
    missing = [d for d in devices if (int(d), *key) not in memo]
    if missing:
        for d, u in unions_by_device(profile, MEMORY_OPS, window, missing).items():
            memo[(d, *key)] = u
    return {int(d): memo[(int(d), *key)] for d in devices}


MEMORY_OPS = 'SELECT device_id, start, "end" FROM memcpy UNION ALL SELECT device_id, start, "end" FROM memset'


def overlapping(starts: np.ndarray, ends: np.ndarray, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every (probe, row) pair where row ``[starts, ends)`` overlaps probe ``[a, b)`` (start < b and end > a),
    by probe then row start. Rows are bucketed by the power of two of their length: in a bucket whose
    longest row lasts L, a probe's candidates are the rows starting in ``(a - L, b)``, one slice of the
    bucket sorted by start; the work is about the pairs found, not probes x rows.
    """
    starts, ends = np.asarray(starts, np.int64), np.asarray(ends, np.int64)
    a, b = np.asarray(a, np.int64), np.asarray(b, np.int64)
    n = len(starts)
    if len(a) and n > 8 * len(a) + 1000 and bool((starts[1:] >= starts[:-1]).all()):
        # Rows read in start order, many per probe: first drop the rows no probe can reach. A row of length
        # at most T overlapping [a, b) starts in (a - T, b); longer rows are all kept.
        dur = ends - starts
        t = max(int(dur.mean()) * 8, 1)
        edge = np.zeros(n + 1, np.int64)
        np.add.at(edge, np.searchsorted(starts, a - t, "left"), 1)
        np.add.at(edge, np.searchsorted(starts, b, "left"), -1)
        idx = np.flatnonzero((np.cumsum(edge[:-1]) > 0) | (dur > t))
        p, r = _overlapping(starts[idx], ends[idx], a, b)
        return p, idx[r]
    return _overlapping(starts, ends, a, b)


def _overlapping(starts: np.ndarray, ends: np.ndarray, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    dur = ends - starts
    bucket = np.frexp(np.maximum(dur, 0).astype(np.float64))[1]
    probes, rows = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)]
    by_bucket = np.argsort(bucket.astype(np.uint8), kind="stable")  # a radix sort, not a scan of all rows per bucket
    cuts = np.flatnonzero(np.diff(bucket[by_bucket])) + 1
    for lo_i, hi_i in zip(np.r_[0, cuts], np.r_[cuts, len(bucket)]) if len(bucket) else ():
        idx = by_bucket[lo_i:hi_i]
        s = starts[idx]
        if len(s) > 1 and (s[1:] < s[:-1]).any():  # rows read in start order need no sort
            idx = idx[np.argsort(s, kind="stable")]
            s = starts[idx]
        longest = max(int(dur[idx].max()), 0)
        lo, hi = np.searchsorted(s, a - longest, "right"), np.searchsorted(s, b, "left")
        n = np.maximum(hi - lo, 0)
        if not n.sum():
            continue
        p = np.repeat(np.arange(len(a)), n)
        r = idx[np.arange(n.sum()) - np.repeat(np.cumsum(n) - n, n) + np.repeat(lo, n)]
        keep = ends[r] > a[p]
        probes.append(p[keep])
        rows.append(r[keep])
    p, r = np.concatenate(probes), np.concatenate(rows)
    o = np.lexsort((r, starts[r], p))
    return p[o], r[o]


def innermost(a: int, b: int, excluded: Union, starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``[a, b)`` minus ``excluded``, cut where ranges begin and end: per elementary segment, its time
    outside ``excluded`` and the index of the innermost range covering it (-1: none).

    Innermost is the covering range that started last; among ranges starting together, the one that
    ends first (a push/pop child opened at the same instant as its parent). The times sum to
    ``b - a - excluded.overlap(a, b)``. Ranks come from the ranges' own bounds, not the bounds clipped to
    ``[a, b)`` (two ranges both open across ``[a, b)`` would tie there, and the input order would decide).
    """
    starts, ends = np.asarray(starts, np.int64), np.asarray(ends, np.int64)
    s, e = np.clip(starts, a, b), np.clip(ends, a, b)
    pts = unique_points(np.concatenate(([a, b], s, e)))
    lo, hi = pts[:-1], pts[1:]
    time = (hi - lo) - excluded.overlap(lo, hi)
    if not len(s):
        return time, np.full(len(lo), -1, np.int64)
    rank = np.empty(len(s), np.int64)
    rank[np.lexsort((-ends, starts))] = np.arange(len(s))  # later start, then earlier end: higher rank
    cover = (s[None, :] <= lo[:, None]) & (e[None, :] >= hi[:, None])
    scored = np.where(cover, rank[None, :], -1)
    best = scored.argmax(axis=1)
    return time, np.where(scored.max(axis=1) >= 0, best, -1)
