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
from dashcam.measure.intervals import Union, int_columns, kernel_unions, merge, overlapping, unique_points
from dashcam.measure.labels import nvtx_kind
from dashcam.profile.gap_causes import NONE, inside, split_points, whole_window

MAX_GAPS = 2000  # gaps (most cpu_work first) whose cpu_work is cut by NVTX range, per device
MIGRATIONS = "SELECT device_id, start, \"end\" FROM memcpy WHERE migration"


def cpu_work_parts(profile, w: Window, device: int, cut: list[dict]) -> tuple[list[tuple], int]:
    """The CPU-side parts ``(a, pre_end, key)`` of the device's gaps with the most cpu_work, and the
    cpu_work they hold. ``cut``: the gaps the window cuts, with their recomputed causes (gpu_gaps).

    Over the whole profile they are the parts the cache split (gap_nvtx.py), read from there."""
    st = _stored(profile)
    full = profile.full_window
    if st is not None and not cut and w.start_ns <= full[0] and w.end_ns >= full[1]:
        m = (st["device_id"] == device) & (st["what"] == NO_RANGE)
        o = np.lexsort((st["start"][m], -st["cpu_work"][m]))
        return (list(zip(st["start"][m][o].tolist(), st["pre_end"][m][o].tolist(), st["key"][m][o].tolist())),
                int(st["cpu_work"][m].sum()))
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


def _stored(profile) -> dict[str, np.ndarray] | None:
    """The cache's split (gap_nvtx.py) as int64 arrays, read once per opened profile; None without one."""
    if profile.manifest.get("derived", {}).get("gap_nvtx") is None:  # built without NVTX, or no part
        return None
    if "gap_nvtx" not in profile.memo:
        profile.memo["gap_nvtx"] = {c: np.asarray(v, np.int64) for c, v in profile.con.execute(
            "SELECT device_id, start, pre_end, key, cpu_work, what, group_id, ns FROM gap_nvtx").fetchnumpy().items()}
    return profile.memo["gap_nvtx"]


def cpu_work_by_nvtx(profile, parts: list[tuple[int, int, int]],
                     device: int | None = None) -> tuple[dict[str, int], dict[str, int]]:
    """(label group -> ns, kind -> ns) of the cpu_work inside ``parts`` (see the module docstring).

    With ``device``, the parts the cache already split (gap_nvtx.py: each device's ``MAX_GAPS`` gaps with the
    most cpu_work over the whole profile, what a query without a window examines) are read from it; the
    others (gaps a window cuts, or ranks a window brings up) are split here from the thread's ranges."""
    if not parts:
        return {}, {}
    by_group: dict[int, int] = {}
    by_kind_group: dict[int, int] = {}
    missing = parts
    if device is not None:
        missing = stored_split(profile, device, parts, by_group, by_kind_group)
    if missing:
        for out, (_, grp, ns) in zip((by_group, by_kind_group), split_parts_by_nvtx(profile, missing)):
            for g, t in zip(grp.tolist(), ns.tolist()):
                out[g] = out.get(g, 0) + t
    return named(profile, by_group, by_kind_group)


def named(profile, by_group: dict[int, int], by_kind_group: dict[int, int]) -> tuple[dict[str, int], dict[str, int]]:
    """(label -> ns, kind -> ns), most first, from ns per group of the innermost range and of the innermost range
    with a kind."""
    if not by_group and not by_kind_group:
        return {}, {}
    groups = group_labels(profile)
    by_label: dict[str, int] = {}
    by_kind: dict[str, int] = {}
    for g, add in by_group.items():
        label = groups.get(g)
        if label:
            by_label[label] = by_label.get(label, 0) + add
    for g, add in by_kind_group.items():
        k = nvtx_kind(groups.get(g))
        by_kind[k] = by_kind.get(k, 0) + add
    order = lambda d: dict(sorted(d.items(), key=lambda kv: (-kv[1], kv[0])))
    return order(by_label), order(by_kind)


def group_labels(profile) -> dict[int, str]:
    """NVTX label group id -> label (the ``nvtx_groups`` view), read once per opened profile."""
    if "nvtx_group_labels" not in profile.memo:
        profile.memo["nvtx_group_labels"] = {int(g): lab for g, lab in
                                             profile.rows("SELECT group_id, label FROM nvtx_groups")}
    return profile.memo["nvtx_group_labels"]


def whole_window_split(profile, w: Window, device: int) -> tuple[dict[str, int], dict[str, int], int] | None:
    """Over the whole profile: the device's cpu_work by NVTX range (``cpu_work_by_nvtx`` of its
    ``cpu_work_parts``) and the cpu_work examined, as the cache summed them (gap_nvtx.py); None for another
    window or without them."""
    x = (whole_window(profile, w) or {}).get(str(device), {}).get("nvtx")
    if x is None:
        return None
    labels, kinds = named(profile, {int(g): t for g, t in x["groups"].items()},
                          {int(g): t for g, t in x["kinded"].items()})
    return labels, kinds, x["examined_ns"]


def stored_split(profile, device: int, parts: list[tuple[int, int, int]], by_group: dict[int, int],
                 by_kind_group: dict[int, int]) -> list[tuple[int, int, int]]:
    """Add to ``by_group`` / ``by_kind_group`` (group id -> ns) the split the cache holds for those of ``parts``
    it examined (same start and end on this device); return the other parts."""
    st = _stored(profile)
    if st is None:
        return parts
    dev = st["device_id"] == device
    start, what = st["start"][dev], st["what"][dev]
    mark = what == NO_RANGE
    ms, me = start[mark], st["pre_end"][dev][mark]  # the examined parts, by start
    a = np.array([p[0] for p in parts], np.int64)
    j = np.minimum(np.searchsorted(ms, a), max(len(ms) - 1, 0))
    found = (ms[j] == a) & (me[j] == np.array([p[1] for p in parts], np.int64)) if len(ms) else np.zeros(len(a), bool)
    sel = np.isin(start, a[found])
    for code, out in ((INNERMOST, by_group), (INNERMOST_KINDED, by_kind_group)):
        m = sel & (what == code)
        g, at = np.unique(st["group_id"][dev][m], return_inverse=True)
        total = np.zeros(len(g), np.int64)
        np.add.at(total, at.reshape(-1), st["ns"][dev][m])
        for x, t in zip(g.tolist(), total.tolist()):
            out[x] = out.get(x, 0) + t
    return [p for p, ok in zip(parts, found.tolist()) if not ok]


# gap_nvtx.what: the part's time in no NVTX range (one row per examined part, its marker), in its innermost
# range's group, in its innermost range with a kind's group
NO_RANGE, INNERMOST, INNERMOST_KINDED = 0, 1, 2


def split_parts_by_nvtx(profile, parts: list[tuple[int, int, int]]):
    """Per ``(what, group)`` of the cpu_work inside ``parts`` read from the thread's ranges and calls: two
    triples (part index, group id, ns), innermost range and innermost kinded range (time > 0 only)."""
    z = np.zeros(0, np.int64)
    lo, hi = min(a for a, _, _ in parts), max(b for _, b, _ in parts)
    threads: dict[int, list[tuple[int, int, int]]] = {}
    for i, (a, b, k) in enumerate(parts):
        threads.setdefault(k, []).append((i, a, b))
    r = by_part(_per_thread(profile, threads, lambda k: f"""SELECT start, "end",
        coalesce(group_id, -1) AS grp FROM nvtx_times WHERE pid = {(k >> 24) & 0xFFFFFF} AND tid = {k & 0xFFFFFF}
        AND is_range AND start < {hi} AND "end" > {lo}"""))
    if not len(r["i"]):
        return (z, z, z), (z, z, z)
    c = by_part(_per_thread(profile, threads, lambda k: f"""SELECT start, "end" FROM api_calls
        WHERE global_tid = {k} AND start < {hi} AND "end" > {lo}"""))
    groups = group_labels(profile)
    return split_by_group(parts, r, c, {g for g, lab in groups.items() if nvtx_kind(lab) is not None})


def split_by_group(parts, r: dict, c: dict, kinded: set[int]):
    """``_innermost_all`` summed per part and group: ((part, group, ns) of the innermost range, (part, group,
    ns) of the innermost range with a kind); ``r``: ranges (i, start, end, grp) ordered by part, ``c``: calls
    (i, start, end); ``kinded``: the groups whose label has a kind."""
    grp, at = np.unique(r["grp"], return_inverse=True)
    has_kind = np.array([g in kinded for g in grp.tolist()], bool)[at.reshape(-1)]
    time, inner, inner_kind, seg_part = _innermost_all(parts, r, c, has_kind)
    return tuple(_sum_per_part(seg_part, j, time, r["grp"]) for j in (inner, inner_kind))


def _sum_per_part(seg_part: np.ndarray, inner: np.ndarray, time: np.ndarray, grp: np.ndarray):
    """(part, group, ns): the time of the segments with a range, summed per part and group of that range."""
    keep = (time > 0) & (inner >= 0)
    p, g, t = seg_part[keep], grp[inner[keep]], time[keep]
    if not len(p):
        z = np.zeros(0, np.int64)
        return z, z, z
    o = np.lexsort((g, p))
    p, g, t = p[o], g[o], t[o]
    new = np.flatnonzero(np.r_[True, (p[1:] != p[:-1]) | (g[1:] != g[:-1])])
    return p[new], g[new], np.add.reduceat(t, new)


def by_part(d: dict) -> dict[str, np.ndarray]:
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
    (indices into ``r``, -1: none), and its part (index into ``parts``). Each part ``[a, b)`` is moved to its
    own stretch of one axis (parts apart by 1 ns, so nothing merges or overlaps across them); lengths do not
    change with the move. Cutting
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
    pts = unique_points(np.concatenate((base, base + pb - pa, rs, re)))
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
    return time, inner, inner_kind, ids[seg_part]


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


def edge_fills(profile, w: Window, edges: list[tuple[int, int, int]]) -> list[dict]:
    """What ran in each edge ``(device, a, b)`` besides the device's kernels: its own copies/memsets (union),
    migrations among them, other GPUs' kernels (union; None when the profile has one GPU).

    Edges that overlap are read together (``edge_spans``: the heads all start at the window start, the tails all
    end at its end), one pruned scan per span and table in one statement; each edge then keeps its rows."""
    if not edges:
        return []
    spans = edge_spans(edges)
    dev_list = lambda ds: ",".join(map(str, sorted(ds)))
    when = lambda lo, hi: f'"end" > {lo} AND start < {hi}'
    mem = by_part(profile.con.execute(" UNION ALL ".join(
        f"""SELECT {j} AS i, device_id, start, "end", migration::BIGINT AS migration FROM memcpy
              WHERE device_id IN ({dev_list({edges[k][0] for k in ks})}) AND {when(lo, hi)}
            UNION ALL SELECT {j}, device_id, start, "end", 0 FROM memset
              WHERE device_id IN ({dev_list({edges[k][0] for k in ks})}) AND {when(lo, hi)}"""
        for j, (lo, hi, ks) in enumerate(spans))).fetchnumpy())
    others = {d: [x for x in profile.devices if x != d] for d, _, _ in edges}
    ker = None
    if any(others.values()):
        ker = by_part(profile.con.execute(" UNION ALL ".join(
            f"""SELECT {j} AS i, device_id, start, "end" FROM launches
                WHERE device_id IN ({dev_list({x for k in ks for x in others[edges[k][0]]})}) AND {when(lo, hi)}"""
            for j, (lo, hi, ks) in enumerate(spans) if any(others[edges[k][0]] for k in ks))).fetchnumpy())
    span_of = {k: j for j, (_, _, ks) in enumerate(spans) for k in ks}
    out = []
    for k, (d, a, b) in enumerate(edges):
        win = Window(a, b, w.profile_start_ns)
        m = (mem["i"] == span_of[k]) & (mem["device_id"] == d)
        s, e, mig = mem["start"][m], mem["end"][m], mem["migration"][m] != 0
        other_ns = None
        if others[d]:
            o = (ker["i"] == span_of[k]) & np.isin(ker["device_id"], others[d])
            other_ns = merge(ker["start"][o], ker["end"][o], win).total
        out.append({"memory_ns": merge(s, e, win).total, "migration_ns": merge(s[mig], e[mig], win).total,
                    "other_gpus_kernel_ns": other_ns})
    return out


def edge_spans(edges: list[tuple[int, int, int]]) -> list[tuple[int, int, list[int]]]:
    """The edges ``(device, a, b)`` grouped where their ``[a, b)`` overlap or touch: (lo, hi, edge indices) per
    group, the group's hull. Each edge's rows are inside its group's hull."""
    spans: list[list] = []
    for k in sorted(range(len(edges)), key=lambda k: edges[k][1]):
        _, a, b = edges[k]
        if spans and a <= spans[-1][1]:
            spans[-1][1] = max(spans[-1][1], b)
            spans[-1][2].append(k)
        else:
            spans.append([a, b, [k]])
    return [(lo, hi, ks) for lo, hi, ks in spans]


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
