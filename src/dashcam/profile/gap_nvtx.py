"""cpu_work by NVTX range, split with the cache (``gap_nvtx.parquet``), so gpu_gaps need not read every
range of each launching thread per query.

Which gaps: per device, the ``MAX_GAPS`` gaps with the most cpu_work over the whole-profile window (ties:
the earlier first) whose launch call is known: what gpu_gaps and cpu examine without --start/--end
(gap_context.cpu_work_parts). Each one's CPU-side part ``[start, pre_end)`` is split by the rule of
gap_context.py (the innermost NVTX range open on the launching thread, outside its CUDA calls) into rows
``(device_id, start, pre_end, key, cpu_work, what, group_id, ns)`` (``key``, ``cpu_work``: the gap's, as in
the gap table): ``what`` 0, one row per part, its time in no range
(group_id -1); 1, its time per group of the innermost range (-1: a range without a label group); 2, per
group of the innermost range with a kind. A window that cuts a gap or brings other gaps up splits those
at query time, the same way.

During the build: the parts and their threads' calls are taken when the gap table is built (derive step);
each NVTX chunk then keeps only its ranges that overlap a part of their thread (most do not), in the
worker that extracted it; the split is made once every chunk is in, on the ranges in row order (the order
a query reads them, which breaks ties between equal ranges).
"""
from __future__ import annotations

import threading
from pathlib import Path

import numpy as np

from dashcam.measure.intervals import merge, overlapping
from dashcam.profile.gap_causes import NONE, split_points
from dashcam.profile.gap_context import INNERMOST, INNERMOST_KINDED, MAX_GAPS, NO_RANGE, by_part, split_by_group

TABLE = "gap_nvtx.parquet"
COLUMNS = ["device_id", "start", "pre_end", "key", "cpu_work", "what", "group_id", "ns"]
THREAD_BITS = (1 << 48) - 1  # pid << 24 | tid: how NVTX rows are matched to a launching thread


class GapNvtx:
    """Collects, during a build, the examined parts, their calls and the NVTX ranges that reach them."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.parts: list[np.ndarray] = []  # per device: rows (device, a, pre_end, key, cpu_work)
        self.calls: list[tuple[np.ndarray, ...]] = []  # (part number, start, end) of calls overlapping a part
        self.chunks: dict[int, tuple[np.ndarray, ...]] = {}  # chunk number -> ranges reaching a part
        self.reach: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # thread -> union of its parts
        self.n = 0

    def add_device(self, d: int, cols: dict[str, np.ndarray], calls_of) -> None:
        """The examined parts of device ``d`` from its gap-table columns (gaps by start); ``calls_of(key)``:
        the thread's CUDA calls (start, end)."""
        cw = cols["cpu_work"]
        idx = np.flatnonzero(cw > 0)
        idx = idx[np.lexsort((cols["start"][idx], -cw[idx]))][:MAX_GAPS]
        a, b, key = cols["start"][idx], cols["end"][idx], cols["key"][idx]
        known = (key >= 0) & (cols["api_end"][idx] != NONE)
        _, pre_end = split_points(a, b, known, cols["api_start"][idx], cols["api_end"][idx], cols["node_wait"][idx])
        keep = known & (pre_end > a)
        rows = np.stack([np.full(int(keep.sum()), d, np.int64), a[keep], pre_end[keep], key[keep], cw[idx][keep]], 1)
        for k in np.unique(rows[:, 3]).tolist():
            mine = np.flatnonzero(rows[:, 3] == k)
            c = calls_of(k)
            p, r = overlapping(c["start"], c["end"], rows[mine, 1], rows[mine, 2])
            self.calls.append((self.n + mine[p], c["start"][r], c["end"][r]))
        self.parts.append(rows)
        self.n += len(rows)

    def seal(self) -> None:
        """After the last device: each thread's parts as one union, for the chunk filter."""
        if not self.parts:
            return
        rows = np.concatenate(self.parts)
        for k in np.unique(rows[:, 3] & THREAD_BITS).tolist():
            m = (rows[:, 3] & THREAD_BITS) == k
            u = merge(rows[m, 1], rows[m, 2])
            self.reach[k] = (u.starts, u.ends)

    def add_chunk(self, i: int, ranges: tuple[np.ndarray, ...]) -> None:
        """Chunk ``i``'s ranges (nvtx_kernels.chunk_ranges: start, end, thread, group) that overlap a part of
        their thread."""
        s, e, t, g = ranges
        keep = np.zeros(len(s), bool)
        for k, (us, ue) in self.reach.items():
            m = np.flatnonzero(t == k)
            if not len(m):
                continue
            j = np.searchsorted(ue, s[m], "right")  # the first part ending after the range starts
            ok = j < len(us)
            ok[ok] = us[j[ok]] < e[m][ok]
            keep[m[ok]] = True
        with self.lock:
            self.chunks[i] = (s[keep], e[keep], t[keep], g[keep])

    def write(self, out: Path, kinded: set[int]) -> tuple[int, dict[str, dict]]:
        """Split every examined part and write TABLE; ``kinded``: the groups whose label has a kind. Returns
        the number of parts and per device (id as text) the sums over its parts, what gpu_gaps reports over
        the whole profile: ``groups`` / ``kinded`` (group id as text -> ns), ``examined_ns``."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        z = np.zeros(0, np.int64)
        rows = np.concatenate(self.parts) if self.parts else np.zeros((0, 5), np.int64)
        ranges = [np.concatenate([self.chunks[i][c] for i in sorted(self.chunks)] or [z]) for c in range(4)]
        calls = [np.concatenate([c[x] for c in self.calls] or [z]) for x in range(3)]
        got: list[tuple[np.ndarray, ...]] = []
        for d in np.unique(rows[:, 0]).tolist():
            pn = np.flatnonzero(rows[:, 0] == d)  # this device's parts, by number
            parts = [(int(a), int(b), int(k)) for a, b, k in rows[pn, 1:4].tolist()]
            r = []
            for k in sorted({p[2] for p in parts}):
                mine = np.flatnonzero(rows[pn, 3] == k)
                m = ranges[2] == (k & THREAD_BITS)
                p, j = overlapping(ranges[0][m], ranges[1][m], rows[pn[mine], 1], rows[pn[mine], 2])
                r.append({"i": mine[p], "start": ranges[0][m][j], "end": ranges[1][m][j], "grp": ranges[3][m][j]})
            r = by_part({c: np.concatenate([x[c] for x in r]) for c in ("i", "start", "end", "grp")})
            cm = np.isin(calls[0], pn)
            c = {"i": np.searchsorted(pn, calls[0][cm]), "start": calls[1][cm], "end": calls[2][cm]}
            split = split_by_group(parts, r, c, kinded) if len(r["i"]) else ((z, z, z), (z, z, z))
            in_range = np.zeros(len(pn), np.int64)
            np.add.at(in_range, split[0][0], split[0][2])
            got.append((np.full(len(pn), NO_RANGE), pn, np.full(len(pn), -1), rows[pn, 4] - in_range))
            for what, (p, g, ns) in zip((INNERMOST, INNERMOST_KINDED), split):
                got.append((np.full(len(p), what), pn[p], g, ns))
        what, pn, group, ns = (np.concatenate([x[c] for x in got] or [z]).astype(np.int64) for c in range(4))
        o = np.lexsort((group, what, rows[pn, 1], rows[pn, 0])) if len(pn) else z
        cols = {"device_id": rows[pn, 0][o], "start": rows[pn, 1][o], "pre_end": rows[pn, 2][o],
                "key": rows[pn, 3][o], "cpu_work": rows[pn, 4][o], "what": what[o], "group_id": group[o], "ns": ns[o]}
        schema = pa.schema([(c, pa.int64()) for c in COLUMNS])
        pq.write_table(pa.table({c: pa.array(cols[c], pa.int64()) for c in COLUMNS}, schema=schema),
                       out / TABLE, compression="lz4", write_page_checksum=True)
        sums: dict[str, dict] = {}
        for d in np.unique(rows[:, 0]).tolist():
            x = sums[str(d)] = {"groups": {}, "kinded": {}, "examined_ns": int(rows[rows[:, 0] == d, 4].sum())}
            on = cols["device_id"] == d
            for what, key in ((INNERMOST, "groups"), (INNERMOST_KINDED, "kinded")):
                m = on & (cols["what"] == what)
                # summed per group in numpy, not row by row in Python: the benchmark's rows run to hundreds of
                # thousands, and this runs after the last NVTX chunk, when nothing else is left to overlap it
                g, at = np.unique(cols["group_id"][m], return_inverse=True)
                tot = np.zeros(len(g), np.int64)
                np.add.at(tot, at.reshape(-1), cols["ns"][m])
                x[key] = {str(a): b for a, b in zip(g.tolist(), tot.tolist())}
        return len(rows), sums
