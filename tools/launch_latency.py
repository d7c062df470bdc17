"""launch_latency: how long launches take on the host, how long kernels wait after them, and
whether a GPU is launch-bound.

Each kernel overlapping the window is joined to the API call that launched it (same pid
and correlationId; the ``launches`` view). A launch call is charged once: a call that started
several kernels (``cudaGraphLaunch``: every kernel of a CUDA graph shares its correlationId)
counts as one launch, with the first of its kernels to start. Per device and per (device, stream):

- ``launches``       kernels with a launch call; ``unmatched`` kernels without one.
- ``launch_calls``   the distinct launch calls of those kernels (only when a call started several
                     kernels; otherwise it equals ``launches`` and is left out), and
                     ``graph_kernels`` the kernels launched from CUDA graphs (graphNodeId set).
- ``api_*_ns``       duration of the launch call, per launch call.
- ``queue_*_ns``     ``first kernel start - call.end`` per launch call: a graph's later kernels wait
                     for the nodes before them on the device, not for the call. Negative when the
                     kernel starts before the call returns (the sign is kept: nothing was queued,
                     the GPU picked the kernel up while the call was still returning).
- ``launches_per_s`` launch calls / window length in s.
- ``mean_kernel_ns`` over all kernels overlapping the window (unclipped durations).

Percentiles are linear interpolation between closest ranks (``numpy.percentile`` default,
the same as DuckDB ``quantile_cont``).

- ``launch_call_ns`` the launch calls of the device's kernels (each call once), summed, clipped
                     to the window; ``first_launch_ns`` the part in each kernel's *first* launch call
                     (per process and kernel name): lazy module loading and JIT happen there, once.

Verdict, per device: launch-bound when all of these hold
    kernel busy % of the window < LAUNCH_BOUND_MAX_BUSY_PCT       (the GPU idles a lot),
    median queue delay < LAUNCH_BOUND_MAX_QUEUE_NS                (kernels run as soon as launched:
                                                                   no backlog on the GPU),
    median kernel duration < median launch-call duration          (the GPU finishes a kernel faster
                                                                   than the CPU can issue the next),
    launch calls >= LAUNCH_BOUND_MIN_LAUNCHES                     (enough launches for a pattern),
    launch calls after the first ones >= LAUNCH_BOUND_MIN_CALL_PCT (launch overhead is a real share of
                                          of the window            the time, not module loading).
"""
from __future__ import annotations

from collections import Counter

import numpy as np
from pydantic import BaseModel, Field

from dashcam.measure.definitions import pct
from dashcam.measure.intervals import arrow_batches, kernel_unions, unique_points
from dashcam.profile.gap_causes import idle_in, whole_window

from .base import OmitNone, Tool, ToolParams, ToolResult, WindowInfo

MAX_CALLER_LOOKUPS = 50_000  # launch calls whose calling function is looked up (kernel=...), at most

# Below this kernel-busy % of the window the GPU idles often enough that launch overhead can matter.
LAUNCH_BOUND_MAX_BUSY_PCT = 70.0
# A median queue delay under 10 us means kernels start right after their launch call returns:
# there is no backlog of queued work, the GPU is waiting on the CPU.
LAUNCH_BOUND_MAX_QUEUE_NS = 10_000
# Fewer launches than this are too few to call a run launch-bound (17 launches cannot keep a GPU
# waiting for long, and their medians say little).
LAUNCH_BOUND_MIN_LAUNCHES = 100
# Launch calls, not counting each kernel's first (module loading), must cover at least this share of
# the window: below it the CPU spends too little time launching for launches to be what limits the run.
LAUNCH_BOUND_MIN_CALL_PCT = 10.0
PERCENTILES = (50, 95)


class Params(ToolParams):
    kernel: str | None = Field(
        None, description="Case-insensitive substring of a kernel name. When given, also report who launched the "
                          "matching kernels (thread and innermost NVTX range at launch time). The device and "
                          "stream statistics always cover all kernels.")


class LaunchStats(OmitNone):
    OMIT_NONE = frozenset({"launch_calls", "graph_kernels"})

    kernels: int = Field(description="Kernels overlapping the window.")
    launches: int = Field(description="Kernels joined to their launch API call (same pid and correlationId).")
    launch_calls: int | None = Field(None, description="The distinct launch calls of those kernels, when a call "
                                                       "started several (a CUDA graph launch); absent otherwise "
                                                       "(equal to launches).")
    graph_kernels: int | None = Field(None, description="Kernels launched from CUDA graphs (graphNodeId set); "
                                                        "absent when none.")
    unmatched: int = Field(description="Kernels with no launch call in the capture.")
    api_p50_ns: float | None = Field(None, description="Median duration of the launch call, per launch call.")
    api_p95_ns: float | None = None
    api_max_ns: int | None = None
    queue_p50_ns: float | None = Field(
        None, description="Median over launch calls of first kernel start - launch call end; negative when the "
                          "kernel starts before the call returns.")
    queue_p95_ns: float | None = None
    queue_max_ns: int | None = None
    launches_per_s: float = Field(description="Launch calls / window length in seconds.")
    mean_kernel_ns: float | None = Field(None, description="Mean duration of the kernels overlapping the window.")


class _StreamKey(BaseModel):
    stream_id: int | None


class _DeviceKey(BaseModel):
    device_id: int


# Key first in the output (pydantic orders fields from the last base class on).
class StreamLaunches(LaunchStats, _StreamKey):
    pass


class DeviceLaunches(LaunchStats, _DeviceKey):
    median_kernel_ns: float | None = Field(None, description="Median duration of the kernels overlapping the window.")
    kernel_busy_pct: float = Field(description="Union of the device's kernels in the window, as % of the window.")
    launch_call_ns: int = Field(0, description="The launch calls of this device's kernels, each call once, durations "
                                               "clipped to the window and summed.")
    launch_call_pct: float = Field(0.0, description="launch_call_ns as % of the window.")
    first_launch_ns: int = Field(0, description="Of launch_call_ns, the first launch call of each kernel (per "
                                                "process and kernel name, on this GPU): module loading happens "
                                                "there.")
    first_launch_count: int = Field(0, description="Those first launch calls.")
    launch_bound: bool | None = Field(None, description="The verdict (rule in verdict_reason); null without launches.")
    verdict_reason: str
    stream_count: int = Field(description="Streams with kernels on this device in the window.")
    streams: list[StreamLaunches] = Field(description="Per stream, most launches first (at most `limit`).")


class Launcher(BaseModel):
    pid: int
    tid: int
    thread_name: str | None
    nvtx_range: str | None = Field(description="Innermost NVTX range open on that thread when the call started.")
    launches: int = Field(description="Matching kernels launched from this thread inside this NVTX range.")


class Result(OmitNone, ToolResult):
    OMIT_NONE = frozenset({"callers"})

    devices: list[DeviceLaunches]
    unmatched: int = Field(description="Kernels in the window without a launch call, all devices.")
    kernel_filter: str | None = None
    kernel_matches: int | None = Field(None, description="Kernels matching `kernel` in the window.")
    kernel_unmatched: int | None = Field(None, description="Of those, kernels without a launch call.")
    launchers: list[Launcher] = Field(default_factory=list,
                                      description="Who launched the matching kernels, most launches first.")
    callers: dict[str, int] | None = Field(None, description=(
        "With `kernel`, where the capture has call stacks (CUDA backtraces, OS runtime backtraces, CPU samples): "
        "the functions whose launch calls started the matching kernels -> kernels, most first, top 10 (profile "
        "text); absent without stacks."))


def _percentiles(x: np.ndarray) -> tuple[float | None, float | None, int | None]:
    if len(x) == 0:
        return None, None, None
    p50, p95 = np.percentile(x, PERCENTILES)
    return round(float(p50), 3), round(float(p95), 3), int(x.max())


def _stats(dur, matched, api_dur, queue, graph, window_s: float) -> dict:
    """Launch statistics of kernels: ``dur`` their durations, ``matched`` those with a launch call, ``graph`` those
    launched from CUDA graphs; ``api_dur`` and ``queue`` hold one value per launch call, so a call that started
    several kernels counts once, with the first of them (module docstring; ``_per_call``)."""
    a50, a95, amax = _percentiles(api_dur)
    q50, q95, qmax = _percentiles(queue)
    n, m, c = len(dur), int(matched.sum()), len(api_dur)
    g = int(graph.sum())
    return {"kernels": n, "launches": m, "launch_calls": c if c != m else None, "graph_kernels": g or None,
            "unmatched": n - m, "api_p50_ns": a50, "api_p95_ns": a95, "api_max_ns": amax,
            "queue_p50_ns": q50, "queue_p95_ns": q95, "queue_max_ns": qmax,
            "launches_per_s": round(c / window_s, 3) if window_s > 0 else 0.0,
            "mean_kernel_ns": round(float(dur.mean()), 3) if n else None}


def _per_call(start, call_start, call_end, first) -> tuple[np.ndarray, np.ndarray]:
    """Per launch call, given the row of its first kernel (``first``): the call's duration and its queue delay
    (that kernel's start - the call's end)."""
    return call_end[first] - call_start[first], start[first] - call_end[first]


def _first_rows(call: np.ndarray, matched: np.ndarray) -> np.ndarray:
    """The row of each launch call's first kernel among these rows (sorted by start): its first occurrence."""
    return np.flatnonzero(matched)[np.unique(call[matched], return_index=True)[1]]


def _verdict(busy_pct: float, queue_p50, median_kernel, api_p50, launches: int,
             steady_call_pct: float) -> tuple[bool | None, str]:
    if queue_p50 is None:
        return None, "no verdict: no kernel on this device has a launch call in the capture"
    us = lambda v: f"{v / 1000:.2f} us"
    checks = [
        (launches >= LAUNCH_BOUND_MIN_LAUNCHES,
         f"{launches} launches {'>=' if launches >= LAUNCH_BOUND_MIN_LAUNCHES else '<'} {LAUNCH_BOUND_MIN_LAUNCHES}"),
        (steady_call_pct >= LAUNCH_BOUND_MIN_CALL_PCT,
         f"launch calls after each kernel's first take {steady_call_pct:.1f}% of the window "
         f"{'>=' if steady_call_pct >= LAUNCH_BOUND_MIN_CALL_PCT else '<'} {LAUNCH_BOUND_MIN_CALL_PCT:g}%"),
        (busy_pct < LAUNCH_BOUND_MAX_BUSY_PCT,
         f"kernel-busy {busy_pct:.1f}% {'<' if busy_pct < LAUNCH_BOUND_MAX_BUSY_PCT else '>='} "
         f"{LAUNCH_BOUND_MAX_BUSY_PCT:g}%"),
        (queue_p50 < LAUNCH_BOUND_MAX_QUEUE_NS,
         f"median queue delay {us(queue_p50)} {'<' if queue_p50 < LAUNCH_BOUND_MAX_QUEUE_NS else '>='} "
         f"{us(LAUNCH_BOUND_MAX_QUEUE_NS)}"),
        (median_kernel < api_p50,
         f"median kernel {us(median_kernel)} {'<' if median_kernel < api_p50 else '>='} "
         f"median launch call {us(api_p50)}"),
    ]
    bound = all(ok for ok, _ in checks)
    if bound:
        return True, "launch-bound: " + "; ".join(text for _, text in checks)
    return False, "not launch-bound: " + "; ".join(text for ok, text in checks if not ok)


def _fetch_launches(profile, w, device: int) -> dict[str, np.ndarray]:
    """The device's kernels overlapping the window, by start (the order of ``launches``), with their launch
    call's thread, start and end (-1: no call).

    One device at a time: ``launches`` is sorted by device, so each query reads only that device's row groups,
    and its arrays are ready to use, with no grouping pass over all devices. Fetched through Arrow: on the 3.9 GB
    benchmark's 6.4 M kernels about 0.3 s where DuckDB's numpy fetch of all devices took 0.5 s. The call's pid
    is not fetched: a call's pid is its thread's (api_calls derives both from globalTid), so thread, start and
    end tell the calls apart."""
    t = profile.con.sql(f"""
        SELECT coalesce(stream_id, -1)::INTEGER AS stream_id, start, "end", coalesce(api_global_tid, -1) AS call_thread,
               coalesce(api_start, -1) AS call_start, coalesce(api_end, -1) AS call_end,
               graph_node_id IS NOT NULL AS graph
        FROM launches
        WHERE "end" > {int(w.start_ns)} AND start < {int(w.end_ns)} AND device_id = {int(device)}""").to_arrow_table()
    out = {c: t.column(c).to_numpy() for c in t.column_names}
    out["graph"] = out["graph"].astype(bool, copy=False)
    return out


def first_launch_spans(profile, w, devices: list[int], eager_only: bool = False) -> dict[int, set[tuple[int, int]]]:
    """Per device, the first launch call (start, end) of each (process, kernel name) that has a kernel with a
    launch call in the window (``eager_only``: a kernel not launched from a CUDA graph): the whole profile decides
    which launch came first, so a window that starts late has no first launches. One grouped pass over the
    launches; launch_latency and cuda_graphs both count first launches with it."""
    dev_list = ", ".join(str(int(d)) for d in devices) or "NULL"
    eager = " AND graph_node_id IS NULL" if eager_only else ""
    out: dict[int, set[tuple[int, int]]] = {}
    for dv, a, b in profile.rows(f"""SELECT device_id, arg_min(api_start, api_start), arg_min(api_end, api_start)
            FROM launches WHERE api_start IS NOT NULL AND device_id IN ({dev_list}) AND pid IS NOT NULL
            AND short_name_id IS NOT NULL GROUP BY device_id, pid, short_name_id
            HAVING bool_or("end" > {int(w.start_ns)} AND start < {int(w.end_ns)} AND api_end >= api_start{eager})"""):
        out.setdefault(int(dv), set()).add((int(a), int(b)))
    return out


def _devices(profile, params: Params, w, devices: list[int]) -> list[DeviceLaunches]:
    window_s = w.length_ns / 1e9
    whole = whole_window(profile, w)  # over the whole profile: kernel busy = window - its gaps, stored
    if whole is not None and not all(str(d) in whole for d in devices):
        whole = None
    unions = kernel_unions(profile, w, devices) if whole is None else {}
    idle = idle_in(profile, w, devices) if whole is not None else {}
    firsts = first_launch_spans(profile, w, devices)
    out = []
    for device in devices:
        d = _fetch_launches(profile, w, device)
        dst, ds, dcs, dce, dg = (d[c] for c in ("stream_id", "start", "call_start", "call_end", "graph"))
        dm = (dce != -1) & (dce >= dcs)  # a launch call of non-negative duration
        dur = d["end"] - ds
        # numbered per device: a call's kernels run on one device, and the numbers are only compared within it
        dc, first = grouped((dcs, d["call_thread"], dce), dm)
        busy = pct(unions[device].total if whole is None else w.length_ns - idle[device][0], w)
        stats = _stats(dur, dm, *_per_call(ds, dcs, dce, first), dg, window_s)
        median_kernel = float(np.median(dur)) if len(dur) else None
        calls = call_time(w, dcs[first], dce[first], firsts.get(device, set()))
        steady_pct = pct(calls["launch_call_ns"] - calls["first_launch_ns"], w)
        bound, reason = _verdict(busy, stats["queue_p50_ns"], median_kernel, stats["api_p50_ns"],
                                 stats["launch_calls"] or stats["launches"], steady_pct)
        streams = []
        if len(dst) and dst.min() == dst.max():  # one stream: its numbers are the device's
            streams.append(StreamLaunches(stream_id=None if dst[0] == -1 else int(dst[0]), **stats))
        else:
            o = np.argsort(dst, kind="stable")
            sk = dst[o]
            scuts = np.flatnonzero(np.diff(sk)) + 1
            for a, b in zip(np.r_[0, scuts], np.r_[scuts, len(sk)]):
                if b <= a:
                    continue
                i = o[a:b]
                f = _first_rows(dc[i], dm[i])
                streams.append(StreamLaunches(stream_id=None if sk[a] == -1 else int(sk[a]),
                                              **_stats(dur[i], dm[i], *_per_call(ds[i], dcs[i], dce[i], f), dg[i],
                                                       window_s)))
        streams.sort(key=lambda x: (-x.launches, -x.kernels, x.stream_id if x.stream_id is not None else -1))
        out.append(DeviceLaunches(device_id=device, median_kernel_ns=median_kernel, kernel_busy_pct=round(busy, 3),
                                  launch_call_pct=round(pct(calls["launch_call_ns"], w), 3), **calls,
                                  launch_bound=bound, verdict_reason=reason, stream_count=len(streams),
                                  streams=streams[: params.limit], **stats))
    return out


def grouped(cols: tuple[np.ndarray, ...], mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A number per distinct row of ``cols`` where ``mask`` holds, -1 elsewhere; and, by number, the group's
    first row (its lowest index). ``cols[0]`` is the call's start (nearly sorted, almost unique). One stable
    sort on it; only runs of equal starts whose other columns differ (different calls starting the same
    nanosecond) are sorted on all the columns. Both sorts are stable, so in the sorted order each group's rows
    are adjacent and keep their order: the first of them is the group's first row. The numbers follow no
    particular order: only which rows share one matters."""
    out = np.full(len(cols[0]), -1, np.int64)
    idx = np.flatnonzero(mask)
    if not len(idx):
        return out, idx
    key = cols[0][idx]
    if np.all(key[1:] >= key[:-1]):  # in order already (one thread's calls, as launched): the sort keeps it
        o = idx
    else:
        order = np.argsort(key, kind="stable")
        o, key = idx[order], key[order]
    run = np.empty(len(o), bool)
    run[0] = True
    np.not_equal(key[1:], key[:-1], out=run[1:])
    mixed = np.zeros(0, bool)
    if not run.all():  # some calls share a start: do the rows of those runs differ in another column?
        run_id = np.cumsum(run) - 1
        heads = np.flatnonzero(run)
        mixed = np.zeros(len(heads), bool)
        for c in cols[1:]:
            x = c[o]
            mixed[run_id[x != x[heads][run_id]]] = True
    if mixed.any():  # distinct calls with the same start: sort those runs on every column, each in place
        pos = np.flatnonzero(mixed[run_id])
        sub = o[pos]
        o[pos] = sub[np.lexsort(tuple(c[sub] for c in reversed(cols[1:])) + (run_id[pos],))]
        for c in cols[1:]:
            x = c[o]
            run[1:] |= x[1:] != x[:-1]
    out[o] = np.cumsum(run) - 1
    return out, o[run]


def call_ids(pid: np.ndarray, thread: np.ndarray, start: np.ndarray, end: np.ndarray,
             matched: np.ndarray) -> np.ndarray:
    """A number per launch call (pid, thread, start, end), -1 where the kernel has no call (``grouped``)."""
    return grouped((start, pid, thread, end), matched)[0]


def _clip(w, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Each interval's length inside the window (0 outside)."""
    return np.maximum(np.minimum(end, w.end_ns) - np.maximum(start, w.start_ns), 0)


def call_time(w, call_start: np.ndarray, call_end: np.ndarray, first: set[tuple[int, int]]) -> dict[str, int]:
    """The launch calls' time inside the window (one row per call), and the first launch calls' (start, end;
    ``first_launch_spans``): their time inside it and how many reach into it."""
    spans = np.array(sorted(first), np.int64).reshape(-1, 2)
    inside = _clip(w, spans[:, 0], spans[:, 1])
    return {"launch_call_ns": int(_clip(w, call_start, call_end).sum()), "first_launch_ns": int(inside.sum()),
            "first_launch_count": int((inside > 0).sum())}


def _innermost_ranges(profile, pid: np.ndarray, tid: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Per query: label of the innermost NVTX range open on thread (pid, tid) at time t (None: no range).

    Open: ``is_range``, ``start <= t < end``; innermost: the latest start (ties: the earliest end).
    Thread and time are packed into one sortable int64 (``rank << shift | time``) so every step
    is one vectorized sort or search over all threads at once.
    """
    result = np.full(len(t), None, dtype=object)
    if len(t) == 0:
        return result
    keys, q_rank = np.unique(pid * (1 << 24) + tid, return_inverse=True)
    t0, t1 = int(t.min()), int(t.max())
    width = t1 - t0 + 2
    shift = width.bit_length()
    if len(keys) >= 1 << max(0, 62 - shift):  # cannot pack: a profile spanning months with many threads
        return result
    threads = "(VALUES " + ", ".join(f"({i}, {k >> 24}, {k & 0xFFFFFF})" for i, k in enumerate(keys.tolist())) + ")"

    def pack(rank, x):  # clipping to [t0, t0 + width) changes no answer: every t lies inside
        y = x.astype(np.int64) - t0
        np.maximum(y, 0, out=y)
        np.minimum(y, width - 1, out=y)
        y |= rank.astype(np.int64) << shift
        return y

    qt = pack(q_rank, t)
    qs = np.sort(qt)
    # Keep only ranges that contain at least one query time: the first query at or after the start is before
    # the end. The ranges stream in batches, so the millions that do not stay never sit in memory at once.
    kept = []
    for batch in arrow_batches(profile.con.sql(f"""
            SELECT q.rank, n.start, n."end" FROM nvtx_times n JOIN {threads} q(rank, pid, tid)
                ON q.pid = n.pid AND q.tid = n.tid
            WHERE n.is_range AND n."end" > {t0} AND n.start <= {t1}"""), 1 << 18):
        rank, start, end = (batch.column(i).to_numpy() for i in range(3))
        j = np.searchsorted(qs, pack(rank, start), side="left")
        k = (j < len(qs)) & (qs[np.minimum(j, len(qs) - 1)] < pack(rank, end))
        if k.any():
            kept.append((rank[k], start[k], end[k]))
    if not kept:  # no range of these threads holds any of the times
        return result
    r_rank, r_start, r_end = (np.concatenate([x[i] for x in kept]).astype(np.int64) for i in range(3))
    rs, re = pack(r_rank, r_start), pack(r_rank, r_end)
    order = np.lexsort((-re, rs))  # by thread, start, then longest first
    rs, re, r_rank, r_start, r_end = rs[order], re[order], r_rank[order], r_start[order], r_end[order]
    n = len(rs)
    first = np.r_[True, (rs[1:] >> shift) != (rs[:-1] >> shift)] if n else np.zeros(0, bool)
    # prev[i]: the latest range before i on the same thread that ends after range i ends (-1: none). The ranges
    # in between end no later than i, so they contain no time past i's end. Found by pointer jumping.
    prev = np.arange(n) - 1
    prev[first] = -1
    active = np.flatnonzero(prev >= 0)
    while len(active):
        active = active[re[prev[active]] <= re[active]]
        prev[active] = prev[prev[active]]
        active = active[prev[active] >= 0]
    # The latest range starting at or before t on the thread, then outwards until one is still open at t.
    ans = np.searchsorted(rs, qt, side="right") - 1
    ans[(ans >= 0) & ((rs[np.maximum(ans, 0)] >> shift) != q_rank)] = -1
    cur = np.flatnonzero(ans >= 0)
    while len(cur):
        cur = cur[re[ans[cur]] <= qt[cur]]
        ans[cur] = prev[ans[cur]]
        cur = cur[ans[cur] >= 0]
    hit = np.flatnonzero(ans >= 0)
    if len(hit) == 0:
        return result
    # Labels of the ranges found only (fetching every label is slow).
    found, inverse = np.unique(ans[hit], return_inverse=True)
    rows = profile.rows(f"""
        SELECT q.rank, n.start, n."end", min(n.label) FROM nvtx n JOIN {threads} q(rank, pid, tid)
            ON q.pid = n.pid AND q.tid = n.tid
        WHERE n.is_range AND n.start IN (SELECT unnest(?::BIGINT[])) GROUP BY ALL""",
        [unique_points(r_start[found]).tolist()])
    label = {(r, s, e): x for r, s, e, x in rows}
    found_labels = np.empty(len(found), dtype=object)
    found_labels[:] = [label.get(k) for k in zip(r_rank[found].tolist(), r_start[found].tolist(),
                                                 r_end[found].tolist())]
    result[hit] = found_labels[inverse]
    return result


def _launchers(profile, params: Params, w, devices: list[int]) -> tuple[int, int, list[Launcher]]:
    dev_list = ", ".join(str(int(d)) for d in devices) or "NULL"
    d = profile.con.execute(f"""
        WITH k AS (
            SELECT pid, correlation_id, device_id, start FROM kernels
            WHERE "end" > {int(w.start_ns)} AND start < {int(w.end_ns)} AND device_id IN ({dev_list})
              AND name IN (SELECT value FROM strings WHERE contains(lower(value), lower(?))))
        SELECT l.pid, l.api_tid, l.api_start FROM launches l
        SEMI JOIN k ON k.pid = l.pid AND k.correlation_id = l.correlation_id AND k.device_id = l.device_id
                   AND k.start = l.start
        WHERE l."end" > {int(w.start_ns)} AND l.start < {int(w.end_ns)}""", [params.kernel]).fetchnumpy()
    pid, tid, t = (np.ma.getdata(d[c]) for c in ("pid", "api_tid", "api_start"))
    ok = ~(np.ma.getmaskarray(d["api_start"]) | np.ma.getmaskarray(d["api_tid"]) | np.ma.getmaskarray(d["pid"]))
    total = len(t)
    pid, tid, t = (np.asarray(x[ok], np.int64) for x in (pid, tid, t))
    labels = _innermost_ranges(profile, pid, tid, t)
    names = {(int(p), int(x)): n for p, x, n in profile.rows(
        "SELECT pid, tid, any_value(name) FROM threads WHERE name IS NOT NULL GROUP BY 1, 2")}
    counts = Counter(zip(pid.tolist(), tid.tolist(), labels.tolist()))
    rows = [Launcher(pid=p, tid=x, thread_name=names.get((p, x)), nvtx_range=label, launches=c)
            for (p, x, label), c in counts.items()]
    rows.sort(key=lambda r: (-r.launches, r.pid, r.tid, r.nvtx_range or ""))
    return total, total - len(t), rows


def _callers(profile, params: Params, w, devices: list[int], notes: list[str]) -> dict[str, int] | None:
    """The calling functions of the matching kernels' launch calls (profile/host_activity.call_callers: past the
    kernel's own launch stub), where the capture has call stacks; None otherwise."""
    from dashcam.measure.names import short_kernel_name
    from dashcam.profile.gap_cpu import has_stacks
    from dashcam.profile.host_activity import call_callers

    if not has_stacks(profile):
        return None
    dev_list = ", ".join(str(int(d)) for d in devices) or "NULL"
    rows = profile.rows(f"""SELECT l.api_global_tid, l.correlation_id, l.api_start, l.api_end, k.name FROM launches l
        JOIN kernels k ON k.pid = l.pid AND k.correlation_id = l.correlation_id AND k.device_id = l.device_id
         AND k.start = l.start
        WHERE l."end" > {int(w.start_ns)} AND l.start < {int(w.end_ns)} AND l.device_id IN ({dev_list})
          AND l.api_global_tid IS NOT NULL AND contains(lower(k.name), lower(?))
        ORDER BY l.start LIMIT {MAX_CALLER_LOOKUPS + 1}""", [params.kernel])
    if len(rows) > MAX_CALLER_LOOKUPS:
        notes.append(f"callers: looked up for the first {MAX_CALLER_LOOKUPS} matching launches.")
        rows = rows[:MAX_CALLER_LOOKUPS]
    found = call_callers(profile, [(g, k, s, e) for g, k, s, e, _ in rows],
                         [{short_kernel_name(n, limit=10_000)} for *_, n in rows])
    count = Counter(fn for fn in found if fn)
    return dict(sorted(count.items(), key=lambda kv: (-kv[1], kv[0]))[:10]) or None


def run(profile, params: Params) -> Result:
    w = profile.window(params.start_ms, params.end_ms)
    devices = profile.check_gpu(params.gpu)
    out = _devices(profile, params, w, devices)
    notes = []
    has_api = profile.has_table("runtime")
    if not has_api:
        notes.append("No CUDA API rows (CUPTI_ACTIVITY_KIND_RUNTIME): launches cannot be matched to their calls; "
                     "only kernel counts, durations and busy % are reported.")
    unmatched = sum(x.unmatched for x in out)
    if unmatched and has_api:
        notes.append(f"{unmatched} kernels have no launch call in the capture (the call was outside the capture "
                     "or not traced); they are left out of the api and queue statistics.")
    cut = [x.device_id for x in out if x.stream_count > len(x.streams)]
    if cut:
        notes.append(f"streams: showing the {params.limit} streams with most launches on device(s) "
                     f"{', '.join(map(str, cut))}.")
    extra = {}
    if params.kernel is not None:
        total, no_call, rows = _launchers(profile, params, w, devices)
        extra = {"kernel_filter": params.kernel, "kernel_matches": total, "kernel_unmatched": no_call,
                     "launchers": rows[: params.limit]}
        if total == 0:
            notes.append(f"No kernel in the window has a name containing {params.kernel!r}.")
        if not profile.has_table("nvtx"):
            notes.append("No NVTX ranges in this profile: the launchers' nvtx_range is empty.")
        if len(rows) > params.limit:
            notes.append(f"launchers: showing {params.limit} of {len(rows)} (thread, NVTX range) pairs.")
        extra["callers"] = _callers(profile, params, w, devices, notes)
    return Result(tool="launch_latency", window=WindowInfo.of(w), devices=out, unmatched=unmatched, notes=notes,
                  **extra)


def render(result: Result, console) -> None:
    from rich.table import Table
    from rich.text import Text

    from dashcam.text.format import fmt_ns
    from dashcam.text.tables import print_notes

    w = result.window
    console.print(Text(f"launch_latency  window {w.start_ms:.3f}–{w.end_ms:.3f} ms ({fmt_ns(w.length_ns)})",
                       style="bold"))
    cols = ("launches", "unmatched", "call p50", "call p95", "queue p50", "queue p95", "queue max", "launches/s",
            "mean kernel", "kernel busy")

    def cells(x: LaunchStats) -> list[Text]:
        return [Text(v) for v in (f"{x.launches:,}", f"{x.unmatched:,}", fmt_ns(x.api_p50_ns), fmt_ns(x.api_p95_ns),
                                  fmt_ns(x.queue_p50_ns), fmt_ns(x.queue_p95_ns), fmt_ns(x.queue_max_ns),
                                  f"{x.launches_per_s:,.0f}", fmt_ns(x.mean_kernel_ns))]

    t = Table(title="per GPU (queue = kernel start - launch call end)", title_justify="left")
    for c in ("GPU", *cols, "launch-bound"):
        t.add_column(c, justify="right")
    for d in result.devices:
        bound = "-" if d.launch_bound is None else ("yes" if d.launch_bound else "no")
        t.add_row(Text(str(d.device_id)), *cells(d), Text(f"{d.kernel_busy_pct:.1f}%"), Text(bound))
    console.print(t)
    for d in result.devices:
        console.print(Text(f"GPU {d.device_id}: {d.verdict_reason}"))
    multi = [d for d in result.devices if d.stream_count > 1]
    if multi:
        t = Table(title="per stream", title_justify="left")
        for c in ("GPU", "stream", *cols[:-1]):
            t.add_column(c, justify="right")
        for d in multi:
            for x in d.streams:
                t.add_row(Text(str(d.device_id)), Text(str(x.stream_id)), *cells(x))
        console.print(t)
    if result.kernel_filter is not None:
        console.print(Text(f"kernels matching {result.kernel_filter!r}: {result.kernel_matches:,} "
                           f"({result.kernel_unmatched:,} without a launch call)"))
        if result.launchers:
            t = Table(title="launched by", title_justify="left")
            for c in ("pid", "tid", "thread", "innermost NVTX range", "launches"):
                t.add_column(c, justify="left" if c in ("thread", "innermost NVTX range") else "right",
                             overflow="fold")
            for x in result.launchers:
                t.add_row(Text(str(x.pid)), Text(str(x.tid)), Text(x.thread_name or "-"),
                          Text(x.nvtx_range or "-"), Text(f"{x.launches:,}"))
            console.print(t)
        if result.callers:
            from dashcam.measure.names import short_function_name
            from dashcam.text.shorten import shorten

            console.print(Text("launched from: " + ", ".join(f"{shorten(short_function_name(fn))} ({n:,})"
                                                            for fn, n in result.callers.items())))
    print_notes(result.notes, console)


TOOL = Tool(
    name="launch_latency",
    summary=("Is the GPU waiting on kernel launches? Per GPU and stream: launch-call duration, queue delay "
             "(kernel start - call end) percentiles, launches/s, and a launch-bound verdict with its reason; "
             "with `kernel`, which threads and NVTX ranges launched that kernel."),
    params=Params, result=Result, run=run,
)
