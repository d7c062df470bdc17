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
from dashcam.measure.intervals import EMPTY, Union, innermost, int_columns, kernel_unions, merge, overlapping
from dashcam.measure.labels import nvtx_kind
from dashcam.profile.gap_causes import NONE, inside, split_by_probe, split_points

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
    ranges = split_by_probe(_per_thread(profile, threads, lambda k: f"""SELECT start, "end",
        coalesce(group_id, -1) AS grp FROM nvtx_times WHERE pid = {(k >> 24) & 0xFFFFFF} AND tid = {k & 0xFFFFFF}
        AND is_range AND start < {hi} AND "end" > {lo}"""))
    if not ranges:
        return {}, {}
    calls = split_by_probe(_per_thread(profile, threads, lambda k: f"""SELECT start, "end" FROM api_calls
        WHERE global_tid = {k} AND start < {hi} AND "end" > {lo}"""))
    groups = {int(g): lab for g, lab in profile.rows("SELECT group_id, label FROM nvtx_groups")}
    kind_of = {lab: nvtx_kind(lab) for lab in [None, *groups.values()]}
    by_label: dict[str, int] = {}
    by_kind: dict[str, int] = {}
    for i, r in ranges.items():
        a, b, _ = parts[i]
        c = calls.get(i)
        busy = merge(c["start"], c["end"]) if c is not None else EMPTY
        labels = [groups.get(int(g)) for g in r["grp"]]
        time, inner = innermost(a, b, busy, r["start"], r["end"])
        for t, j in zip(time.tolist(), inner.tolist()):
            if t > 0 and j >= 0 and labels[j]:
                by_label[labels[j]] = by_label.get(labels[j], 0) + t
        kinds = [kind_of[x] for x in labels]
        has = np.array([k is not None for k in kinds], bool)
        if has.any():
            idx = np.flatnonzero(has)
            time, inner = innermost(a, b, busy, r["start"][idx], r["end"][idx])
            for t, j in zip(time.tolist(), inner.tolist()):
                if t > 0 and j >= 0:
                    k = kinds[idx[j]]
                    by_kind[k] = by_kind.get(k, 0) + t
    order = lambda d: dict(sorted(d.items(), key=lambda kv: (-kv[1], kv[0])))
    return order(by_label), order(by_kind)


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
