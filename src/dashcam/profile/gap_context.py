"""What surrounds a device's gaps: the NVTX ranges its ``cpu_work`` falls in, what fills its edge
gaps, and the unified-memory migrations inside its gaps (gpu_gaps reports them beside the causes).

cpu_work by NVTX range
    A gap's ``cpu_work`` is the time in ``[start, pre_end)`` (gap_causes.py) when the launching
    thread was in no CUDA call. Cut at every NVTX range of that thread, each piece goes to the
    *innermost* range open on the thread (intervals.innermost), or to none; the pieces add up to the
    gap's cpu_work exactly. Per device, the pieces are summed by range label group and by the label's
    kind (measure/labels.py: ``jit``, ``mpi``, ``nccl``, ``data``, ``framework``; for a kind, the
    innermost range *that has a kind* counts). Only the ``MAX_GAPS`` gaps with the most cpu_work are
    cut (``examined_ns`` says how much cpu_work they hold), so the cost stays bounded on huge profiles.
edge gaps
    ``head``: the gap from the window start to the device's first kernel; ``tail``: the gap from its
    last kernel to the window end. Each with the time, inside it, of the device's own copies and
    memsets (union), of unified-memory migrations among them, and of other GPUs' kernels (union over
    the other devices; null on a single-GPU profile): what the GPU waited *for*.
migrations
    Memcpy rows with copyKind 11, 12 or 13 (unified-memory HtoD, DtoH, DtoD migrations) are page
    migrations, not explicit copies. ``migration_ns`` is the union of a device's migrations inside its
    gaps (the migration union minus its overlap with the kernel union).
"""
from __future__ import annotations

import numpy as np

from dashcam.measure.definitions import Window
from dashcam.measure.intervals import Union, int_columns, kernel_unions, merge, overlapping
from dashcam.measure.labels import nvtx_kind
from dashcam.profile.gap_causes import NONE, inside, split_points

MAX_GAPS = 2000  # gaps (most cpu_work first) whose cpu_work is cut by NVTX range, per device
MIGRATIONS = "SELECT device_id, start, \"end\" FROM memcpy WHERE migration"


def cpu_work_parts(profile, w: Window, device: int, cut: list[dict]) -> tuple[list[tuple], int]:
    """The CPU-side parts ``(a, pre_end, key)`` of the device's gaps with the most cpu_work, and the
    cpu_work they hold. ``cut``: the gaps the window cuts, with their recomputed causes (gpu_gaps)."""
    rows = profile.rows(f"""SELECT start, "end", key, api_start, api_end, cpu_work, node_wait FROM gap_table
        WHERE {inside(w, [device])} AND cpu_work > 0 ORDER BY cpu_work DESC, start LIMIT {MAX_GAPS}""")
    rows += [(r["start"], r["end"], r["key"], r["api_start"], r["api_end"], r["causes"]["cpu_work"], r["node_wait"])
             for r in cut if r["device_id"] == device and r["causes"]["cpu_work"] > 0]
    rows = sorted(rows, key=lambda r: (-r[5], r[0]))[:MAX_GAPS]
    if not rows:
        return [], 0
    a = np.array([r[0] for r in rows], np.int64)
    b = np.array([r[1] for r in rows], np.int64)
    key = np.array([r[2] for r in rows], np.int64)
    api_end = np.array([r[4] for r in rows], np.int64)
    known = (key >= 0) & (api_end != NONE)
    _, pre_end = split_points(a, b, known, np.array([r[3] for r in rows], np.int64), api_end,
                              np.array([r[6] for r in rows], np.int64))
    parts = [(int(a[i]), int(pre_end[i]), int(key[i])) for i in range(len(rows)) if known[i] and pre_end[i] > a[i]]
    return parts, sum(int(r[5]) for r in rows)


def cpu_work_by_nvtx(profile, parts: list[tuple[int, int, int]]) -> tuple[dict[str, int], dict[str, int]]:
    """(label group -> ns, kind -> ns) of the cpu_work inside ``parts`` (see the module docstring)."""
    if not parts:
        return {}, {}
    lo, hi = min(a for a, _, _ in parts), max(b for _, b, _ in parts)
    threads: dict[int, list[tuple[int, int, int]]] = {}
    for i, (a, b, k) in enumerate(parts):
        threads.setdefault(k, []).append((i, a, b))
    r = _by_part(_per_thread(profile, threads, lambda k: f"""SELECT start, "end",
        coalesce(group_id, -1) AS grp FROM nvtx_times WHERE pid = {(k >> 24) & 0xFFFFFF} AND tid = {k & 0xFFFFFF}
        AND is_range AND start < {hi} AND "end" > {lo}"""))
    if not len(r["i"]):
        return {}, {}
    c = _by_part(_per_thread(profile, threads, lambda k: f"""SELECT start, "end" FROM api_calls
        WHERE global_tid = {k} AND start < {hi} AND "end" > {lo}"""))
    groups = {int(g): lab for g, lab in profile.rows("SELECT group_id, label FROM nvtx_groups")}
    kind_of = {lab: nvtx_kind(lab) for lab in [None, *groups.values()]}
    grp, at = np.unique(r["grp"], return_inverse=True)
    has_kind = np.array([kind_of[groups.get(g)] is not None for g in grp.tolist()], bool)[at.reshape(-1)]
    time, inner, inner_kind = _innermost_all(parts, r, c, has_kind)
    by_label: dict[str, int] = {}
    by_kind: dict[str, int] = {}
    for j, add in _sum_by(inner, time).items():
        label = groups.get(int(r["grp"][j]))
        if label:
            by_label[label] = by_label.get(label, 0) + add
    for j, add in _sum_by(inner_kind, time).items():
        k = kind_of[groups.get(int(r["grp"][j]))]
        by_kind[k] = by_kind.get(k, 0) + add
    order = lambda d: dict(sorted(d.items(), key=lambda kv: (-kv[1], kv[0])))
    return order(by_label), order(by_kind)


def _by_part(d: dict) -> dict[str, np.ndarray]:
    """The rows of a probe query (column ``i``: the part) as int64 arrays ordered by part, each part's rows in
    the order read (what gap_causes.split_by_probe hands each part)."""
    o = np.argsort(np.asarray(d["i"], np.int64), kind="stable")
    return {k: np.asarray(v, np.int64)[o] for k, v in d.items()}


def _sum_by(inner: np.ndarray, time: np.ndarray) -> dict[int, int]:
    """Range index -> the time of the segments it is innermost in (segments with time and a range)."""
    keep = (time > 0) & (inner >= 0)
    j, at = np.unique(inner[keep], return_inverse=True)
    total = np.zeros(len(j), np.int64)
    np.add.at(total, at.reshape(-1), time[keep])
    return dict(zip(j.tolist(), total.tolist()))


MAX_PAIRS = 4_000_000  # (segment, range) pairs scored at once by _innermost_all


def _innermost_all(parts, r: dict, c: dict, has_kind: np.ndarray):
    """intervals.innermost for every part that has ranges at once: per elementary segment of those parts,
    its time outside the part's launch calls, its innermost range and its innermost range with a kind
    (indices into ``r``, -1: none). Each part ``[a, b)`` is moved to its own stretch of one axis (parts
    apart by 1 ns, so nothing merges or overlaps across them); lengths do not change with the move. Cutting
    at every range's bounds cuts no less finely than at only those with a kind, and time adds up over a
    finer cut, so one cut serves both. Ranks: later start, then earlier end, then later in ``r`` (the order
    intervals.innermost breaks ties in)."""
    ids = np.unique(r["i"])
    pa = np.array([parts[i][0] for i in ids.tolist()], np.int64)
    pb = np.array([parts[i][1] for i in ids.tolist()], np.int64)
    base = np.concatenate(([0], np.cumsum(pb - pa + 1)[:-1]))
    at = lambda i: np.searchsorted(ids, i)

    def moved(i, x):
        k = at(i)
        return np.clip(x, pa[k], pb[k]) - pa[k] + base[k]

    rs, re = moved(r["i"], r["start"]), moved(r["i"], r["end"])
    pts = np.unique(np.concatenate((base, base + pb - pa, rs, re)))
    lo, hi = pts[:-1], pts[1:]
    seg_part = np.searchsorted(base, lo, "right") - 1
    valid = lo < (base + pb - pa)[seg_part]  # not the 1 ns between two parts
    lo, hi, seg_part = lo[valid], hi[valid], seg_part[valid]
    keep = np.isin(c["i"], ids)  # the calls of parts that have ranges
    busy = merge(moved(c["i"][keep], c["start"][keep]), moved(c["i"][keep], c["end"][keep]))
    time = (hi - lo) - busy.overlap(lo, hi)
    n = len(r["i"])
    rank = np.empty(n, np.int64)
    rank[np.lexsort((np.arange(n), -r["end"], r["start"], r["i"]))] = np.arange(n)
    by_rank = np.argsort(rank)
    ro = np.argsort(at(r["i"]), kind="stable")  # ranges grouped by part
    first = np.searchsorted(at(r["i"])[ro], np.arange(len(ids)))
    count = np.diff(np.r_[first, n])
    inner = np.full(len(lo), -1, np.int64)
    inner_kind = np.full(len(lo), -1, np.int64)
    per_seg = count[seg_part]
    done = 0
    while done < len(lo):
        cum = np.cumsum(per_seg[done:])
        stop = done + max(int(np.searchsorted(cum, MAX_PAIRS, "right")), 1)
        sl = slice(done, stop)
        m = per_seg[sl]
        seg = np.repeat(np.arange(done, stop), m)
        off = np.arange(int(m.sum())) - np.repeat(np.cumsum(m) - m, m)
        j = ro[np.repeat(first[seg_part[sl]], m) + off]
        cover = (rs[j] <= lo[seg]) & (re[j] >= hi[seg])
        heads = np.cumsum(m) - m
        for out, ok in ((inner, cover), (inner_kind, cover & has_kind[j])):
            best = np.maximum.reduceat(np.where(ok, rank[j], -1), heads)
            out[sl] = np.where(best >= 0, by_rank[np.maximum(best, 0)], -1)
        done = stop
    return time, inner, inner_kind


def _per_thread(profile, threads: dict[int, list[tuple[int, int, int]]], rows_of) -> dict[str, np.ndarray]:
    """The rows of ``rows_of(thread)`` (a SELECT with ``start``, ``"end"``) overlapping each probe ``(i, a, b)``
    of that thread, with column ``i``: each thread's rows read once and paired with its probes in numpy
    (intervals.overlapping). A SQL join of the probes with the rows on the thread was a hash join of every
    probe with every row of its thread (2,000 gaps x 480,000 NVTX ranges on a 200,000-kernel rank: seconds)."""
    got = []
    for k, probes in sorted(threads.items()):
        cols = int_columns(profile.con, rows_of(k))
        i, a, b = (np.array(x, np.int64) for x in zip(*probes))
        p, r = overlapping(cols["start"], cols["end"], a, b)
        got.append({"i": i[p], **{c: v[r] for c, v in cols.items()}})
    return {c: np.concatenate([g[c] for g in got]) for c in got[0]}


def edge_fill(profile, w: Window, device: int, a: int, b: int) -> dict:
    """What ran in ``[a, b)`` besides the device's kernels: its own copies/memsets, migrations among
    them, other GPUs' kernels (None when the profile has one GPU)."""
    mem = profile.con.execute(f"""SELECT start, "end", migration FROM (
            SELECT start, "end", migration FROM memcpy WHERE device_id = {device}
            UNION ALL SELECT start, "end", false FROM memset WHERE device_id = {device})
        WHERE "end" > {a} AND start < {b}""").fetchnumpy()
    win = Window(a, b, w.profile_start_ns)
    s, e = np.asarray(mem["start"], np.int64), np.asarray(mem["end"], np.int64)
    mig = np.asarray(mem["migration"], bool) if len(s) else np.zeros(0, bool)
    others = [d for d in profile.devices if d != device]
    other_ns = None
    if others:
        k = profile.con.execute(f"""SELECT start, "end" FROM launches WHERE device_id IN
            ({",".join(map(str, others))}) AND "end" > {a} AND start < {b}""").fetchnumpy()
        other_ns = merge(k["start"], k["end"], win).total
    return {"memory_ns": merge(s, e, win).total, "migration_ns": merge(s[mig], e[mig], win).total,
            "other_gpus_kernel_ns": other_ns}


def migrations_in_gaps(profile, w: Window, devices: list[int]) -> dict[int, int]:
    """Per device: its unified-memory migrations (union) inside its gaps, i.e. outside its kernel union."""
    out = dict.fromkeys(devices, 0)
    if not profile.has_migrations:
        return out
    for d in devices:
        m = profile.con.execute(f"""SELECT start, "end" FROM ({MIGRATIONS}) WHERE device_id = {int(d)}
            AND "end" > {w.start_ns} AND start < {w.end_ns}""").fetchnumpy()
        if not len(m["start"]):
            continue
        u: Union = merge(m["start"], m["end"], w)
        busy = kernel_unions(profile, w, [d])[d]
        out[d] = int(u.total - busy.overlap(u.starts, u.ends).sum())
    return out
