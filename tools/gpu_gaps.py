"""gpu_gaps: where each GPU was idle, and who it was waiting for.

A gap is a hole in a device's kernel union inside the window (definitions.py). For each
gap we take the kernel that ends it (the first kernel on that device starting at or after
the gap's end) and the API call that launched it (same pid and correlationId), and split
the gap at the moment that call returned, ``split = clamp(call.end, gap.start, gap.end)``:

before the split the GPU waited for the CPU; that time goes, by what the launching thread
was doing, to
    ``launch_overhead``  inside the launch call itself,
    ``sync_wait``        inside a *Synchronize call on that thread,
    ``cuda_api``         inside any other CUDA call on that thread (named per gap),
    ``cpu_work``         in no CUDA call at all (Python, data loading, ...);
after the split the kernel was queued and the GPU waited on the device:
    ``memcpy``           copies or memsets running on that device,
    ``dependency``       nothing on the device: an event, another stream or device, a host callback.
A gap whose closing kernel has no launch call in the capture (or that no kernel closes,
the tail of the window) is ``unknown``. The causes of a gap add up to its length exactly.
"""
from __future__ import annotations

import numpy as np
from pydantic import BaseModel, Field

from dashcam.definitions import pct
from dashcam.intervals import EMPTY, Union, gaps, memory_unions, merge

from .base import Tool, ToolParams, ToolResult, WindowInfo

CAUSES = ["sync_wait", "cuda_api", "launch_overhead", "cpu_work", "memcpy", "dependency", "unknown"]
CPU_SIDE = {"sync_wait", "cuda_api", "launch_overhead", "cpu_work"}
# Histogram bucket upper bounds (ns): <10 us, <100 us, <1 ms, <10 ms, <100 ms, >=100 ms.
BUCKETS = [(10_000, "<10us"), (100_000, "10-100us"), (1_000_000, "100us-1ms"), (10_000_000, "1-10ms"),
           (100_000_000, "10-100ms"), (None, ">=100ms")]


class Params(ToolParams):
    min_gap_us: float = Field(0, ge=0, description="Ignore gaps shorter than this in the largest-gaps list (us).")


class LaunchCall(BaseModel):
    name: str
    pid: int
    tid: int
    start_ns: int
    end_ns: int


class Gap(BaseModel):
    start_ns: int
    end_ns: int
    duration_ns: int
    start_ms: float = Field(description="Gap start in ms from the start of the profile's GPU activity.")
    kernel_before: str | None
    kernel_after: str | None
    launch_call: LaunchCall | None = Field(None, description="The API call that launched kernel_after.")
    nvtx_range: str | None = Field(None, description="Innermost NVTX range open on the launching thread at the gap start.")
    causes: dict[str, int] = Field(description="Cause name -> ns; adds up to duration_ns.")
    dominant_cause: str
    cuda_api_calls: dict[str, int] = Field(default_factory=dict, description="For cuda_api/sync_wait time: API name -> ns.")


class HistogramBucket(BaseModel):
    bucket: str
    count: int
    total_ns: int


class DeviceGaps(BaseModel):
    device_id: int
    kernel_busy_pct: float = Field(description="Kernel union as % of the window.")
    idle_ns: int = Field(description="Window length minus kernel busy: the sum of all gaps.")
    idle_pct: float
    gap_count: int
    histogram: list[HistogramBucket]
    causes: dict[str, int] = Field(description="Cause name -> ns over all gaps of this device; sums to idle_ns.")
    cause_pct: dict[str, float] = Field(description="Cause name -> % of this device's idle time.")
    dominant_cause: str | None
    largest_gaps: list[Gap]


class Result(ToolResult):
    devices: list[DeviceGaps]


def _thread_unions(profile, key: int) -> tuple[Union, Union]:
    """The union of all API calls and of the *Synchronize calls of one thread (key = pid << 24 | tid).

    One thread at a time keeps memory low on captures with millions of calls.
    """
    d = profile.con.execute(
        f"""SELECT start, "end", name_id IN (SELECT id FROM api_names WHERE name LIKE '%Synchronize%') AS is_sync
            FROM api_calls WHERE pid = {int(key) >> 24} AND tid = {int(key) & 0xFFFFFF}""").fetchnumpy()
    s, e = np.asarray(d["start"], np.int64), np.asarray(d["end"], np.int64)
    sync = np.asarray(d["is_sync"], bool)
    return merge(s, e), merge(s[sync], e[sync])


NONE = np.iinfo(np.int64).max


def _kernels_with_launch(profile, w, device: int) -> dict[str, np.ndarray]:
    """The device's kernels overlapping the window with their launch call, sorted by start.

    Among kernels with the same start, the one whose launch call returned first comes first
    (the order ``launches`` is stored in; a plain filtered scan keeps it).
    Arrays: start, end, key (pid << 24 | tid of the launch call, -1 if none), api_start, api_end.
    """
    d = profile.con.execute(
        f"""SELECT start, "end", coalesce(pid * 16777216 + api_tid, -1) AS key,
                   coalesce(api_start, 0) AS api_start, coalesce(api_end, {NONE}) AS api_end
            FROM launches WHERE device_id = {int(device)} AND "end" > {w.start_ns} AND start < {w.end_ns}"""
    ).fetchnumpy()
    return {k: np.asarray(v, dtype=np.int64) for k, v in d.items()}


def _first_after_window(profile, w, devices) -> dict[int, tuple[int, int, int, int]]:
    """Per device, the first kernel starting at or after the window end: (start, key, api_start, api_end)."""
    rows = profile.rows(
        f"""SELECT device_id, start, coalesce(pid * 16777216 + api_tid, -1), coalesce(api_start, 0),
                   coalesce(api_end, {NONE})
            FROM launches WHERE start >= {w.end_ns} AND device_id IN ({','.join(str(int(x)) for x in devices)})
            QUALIFY row_number() OVER (PARTITION BY device_id ORDER BY start, api_end NULLS LAST) = 1""")
    return {int(r[0]): (int(r[1]), int(r[2]), int(r[3]), int(r[4])) for r in rows}


def run(profile, params: Params) -> Result:
    w = profile.window(params.start_ms, params.end_ms)
    devices = profile.check_gpu(params.gpu)
    mun = memory_unions(profile, w, devices)
    after = _first_after_window(profile, w, devices)

    # Per device: the kernel union, its gaps, and for each gap the launch call of the kernel
    # that ends it: the kernel starting exactly at the gap's end (for the tail of a user
    # window, the first kernel after the window, if any).
    kun, gaps_of, gap_call = {}, {}, {}
    for d in devices:
        ks = _kernels_with_launch(profile, w, d)
        u = merge(ks["start"], ks["end"], w)
        g = gaps(u, w)
        kun[d], gaps_of[d] = u, g
        key = np.full(len(g), -1, np.int64)
        a_s = np.zeros(len(g), np.int64)
        a_e = np.full(len(g), NONE, np.int64)
        if len(ks["start"]):
            idx = np.searchsorted(ks["start"], g.ends, side="left")
            hit = idx < len(ks["start"])
            hit[hit] &= ks["start"][idx[hit]] == g.ends[hit]
            key[hit], a_s[hit], a_e[hit] = ks["key"][idx[hit]], ks["api_start"][idx[hit]], ks["api_end"][idx[hit]]
        if len(g) and g.ends[-1] == w.end_ns and d in after:
            _, key[-1], a_s[-1], a_e[-1] = after[d]
        gap_call[d] = (key, a_s, a_e)
    # Where each gap splits: before `pre_end` the launching thread did something else, then the
    # launch call itself ran until `split`; after `split` the kernel was queued on the device.
    split, pre_end, known = {}, {}, {}
    for d in devices:
        g, (tkey, a_start, a_end) = gaps_of[d], gap_call[d]
        known[d] = (tkey >= 0) & (a_end != NONE)
        split[d] = np.where(known[d], np.clip(a_end, g.starts, g.ends), g.starts)
        pre_end[d] = np.where(known[d], np.clip(a_start, g.starts, split[d]), g.starts)
    all_api = {d: np.zeros(len(gaps_of[d]), np.int64) for d in devices}
    sync = {d: np.zeros(len(gaps_of[d]), np.int64) for d in devices}
    # One launching thread at a time (its API unions can be large): overlap of its calls with
    # the CPU-side part [gap start, pre_end) of every gap it closed.
    keys = np.concatenate([c[0][known[d]] for d, c in gap_call.items()]) if devices else np.zeros(0, np.int64)
    for key in np.unique(keys):
        u_all, u_sync = _thread_unions(profile, key)
        for d in devices:
            g = gaps_of[d]
            sel = known[d] & (gap_call[d][0] == key) & (pre_end[d] > g.starts)
            if sel.any():
                all_api[d][sel] = u_all.overlap(g.starts[sel], pre_end[d][sel])
                sync[d][sel] = u_sync.overlap(g.starts[sel], pre_end[d][sel])

    out = []
    for d in devices:
        g = gaps_of[d]
        gs, ge = g.starts, g.ends
        tkey, a_start, a_end = gap_call[d]
        split_d, pre_d, known_d = split[d], pre_end[d], known[d]
        queued = known_d & (split_d < ge)
        memcpy = np.zeros(len(g), np.int64)
        if queued.any():
            memcpy[queued] = mun.get(d, EMPTY).overlap(split_d[queued], ge[queued])
        causes = {
            "sync_wait": sync[d],
            "cuda_api": all_api[d] - sync[d],
            "launch_overhead": split_d - pre_d,
            "cpu_work": pre_d - gs - all_api[d],
            "memcpy": memcpy,
            "dependency": np.where(known_d, ge - split_d, 0) - memcpy,
            "unknown": np.where(known_d, 0, ge - gs),
        }
        launch = {"known": known_d, "start": a_start, "end": a_end, "key": tkey}
        out.append(_device_result(d, w, kun[d], g, causes, launch, params))
    _describe(profile, w, out, {d: v[0] for d, v in after.items()})
    notes = []
    if not profile.has_table("runtime"):
        notes.append("No CUDA API rows in this profile: gaps cannot be attributed (all 'unknown').")
    return Result(tool="gpu_gaps", window=WindowInfo.of(w), devices=out, notes=notes)


def _device_result(d, w, ku: Union, g: Union, causes, launch, params) -> DeviceGaps:
    idle = int((g.ends - g.starts).sum())
    totals = {c: int(causes[c].sum()) for c in CAUSES}
    dur = g.ends - g.starts
    hist, lo = [], 0
    for hi, label in BUCKETS:
        m = (dur >= lo) & ((dur < hi) if hi is not None else True)
        hist.append(HistogramBucket(bucket=label, count=int(m.sum()), total_ns=int(dur[m].sum())))
        lo = hi or 0
    dominant = max(CAUSES, key=lambda c: totals[c]) if idle > 0 else None
    eligible = np.flatnonzero(dur >= params.min_gap_us * 1000)
    if len(eligible) > params.limit:  # the top `limit` without sorting every gap
        eligible = eligible[np.argpartition(-dur[eligible], params.limit - 1)[: params.limit]]
    order = eligible[np.lexsort((eligible, -dur[eligible]))]
    largest = []
    for i in order:
        cz = {c: int(causes[c][i]) for c in CAUSES}
        call = None
        if launch["known"][i]:
            key = int(launch["key"][i])
            call = LaunchCall(name="?", pid=key >> 24, tid=key & 0xFFFFFF,
                              start_ns=int(launch["start"][i]), end_ns=int(launch["end"][i]))
        largest.append(Gap(
            start_ns=int(g.starts[i]), end_ns=int(g.ends[i]), duration_ns=int(dur[i]),
            start_ms=round(w.rel_ms(int(g.starts[i])), 6), kernel_before=None, kernel_after=None,
            launch_call=call, causes=cz, dominant_cause=max(CAUSES, key=lambda c: cz[c]),
        ))
    return DeviceGaps(
        device_id=d, kernel_busy_pct=round(pct(ku.total, w), 3), idle_ns=idle, idle_pct=round(pct(idle, w), 3),
        gap_count=len(g), histogram=hist, causes=totals,
        cause_pct={c: round(100.0 * v / idle, 3) if idle else 0.0 for c, v in totals.items()},
        dominant_cause=dominant, largest_gaps=largest,
    )


def _values(rows) -> str:
    return ",".join("(" + ",".join(str(int(x)) for x in r) + ")" for r in rows)


def _describe(profile, w, devices: list[DeviceGaps], after_window: dict) -> None:
    """Fill in the names around the largest gaps: kernels before/after, the launch call, NVTX, API time."""
    items = [(i, d, g) for d in devices for i, g in enumerate(d.largest_gaps)]
    if not items:
        return
    ref = {(d.device_id, i): g for i, d, g in items}
    ends = [(d.device_id, i, g.end_ns if g.end_ns < w.end_ns else after_window.get(d.device_id, -1))
            for i, d, g in items]
    for dev, i, name in profile.rows(
            f"""SELECT x.d, x.i, s.value FROM (
                    SELECT v.d, v.i, arg_max(k.short_name_id, k.start) AS sid FROM kernel_times k
                    JOIN (VALUES {_values((d.device_id, i, g.start_ns) for i, d, g in items)}) v(d, i, t)
                    ON k.device_id = v.d AND k."end" = v.t GROUP BY v.d, v.i) x
                LEFT JOIN strings s ON s.id = x.sid"""):
        ref[(dev, i)].kernel_before = name
    for dev, i, name in profile.rows(
            f"""SELECT x.d, x.i, s.value FROM (
                    SELECT v.d, v.i, arg_min(k.short_name_id, k."end") AS sid FROM kernel_times k
                    JOIN (VALUES {_values(ends)}) v(d, i, t) ON k.device_id = v.d AND k.start = v.t
                    GROUP BY v.d, v.i) x
                LEFT JOIN strings s ON s.id = x.sid"""):
        ref[(dev, i)].kernel_after = name
    calls = [(d.device_id, i, g.launch_call.pid, g.launch_call.tid, g.launch_call.start_ns, g.launch_call.end_ns,
              g.start_ns, min(g.launch_call.start_ns, g.end_ns)) for i, d, g in items if g.launch_call]
    if not calls:
        return
    v = _values(calls)
    for dev, i, name in profile.rows(
            f"""SELECT x.d, x.i, n.name FROM (
                    SELECT v.d, v.i, any_value(a.name_id) AS nid FROM api_calls a
                    JOIN (VALUES {v}) v(d, i, pid, tid, s, e, gs, pe)
                    ON a.pid = v.pid AND a.tid = v.tid AND a.start = v.s AND a."end" = v.e GROUP BY v.d, v.i) x
                LEFT JOIN api_names n ON n.id = x.nid"""):
        ref[(dev, i)].launch_call.name = name
    # the innermost range (latest start) open on the launching thread at the gap start; its label
    # is then read for those few rows only (the label column is strings: slow to scan in full)
    inner = profile.rows(
        f"""SELECT v.d, v.i, v.pid, v.tid, max(n.start) FROM nvtx_times n
            JOIN (VALUES {v}) v(d, i, pid, tid, s, e, gs, pe) ON n.pid = v.pid AND n.tid = v.tid
            WHERE n.is_range AND n.start <= v.gs AND n."end" > v.gs GROUP BY ALL""")
    if inner:
        labels = {(pid, tid, st): lab for pid, tid, st, lab in profile.rows(
            f"""SELECT pid, tid, start, label FROM nvtx WHERE is_range
                AND start IN ({','.join(str(int(r[4])) for r in inner)})""")}
        for dev, i, pid, tid, st in inner:
            ref[(dev, i)].nvtx_range = labels.get((pid, tid, st))
    for dev, i, name, ns in profile.rows(
            f"""SELECT x.d, x.i, n.name, x.ns FROM (
                    SELECT v.d, v.i, a.name_id, sum(least(a."end", v.pe) - greatest(a.start, v.gs)) AS ns
                    FROM api_calls a JOIN (VALUES {v}) v(d, i, pid, tid, s, e, gs, pe)
                    ON a.pid = v.pid AND a.tid = v.tid
                    WHERE a."end" > v.gs AND a.start < v.pe GROUP BY ALL) x
                LEFT JOIN api_names n ON n.id = x.name_id ORDER BY x.ns DESC"""):
        ref[(dev, i)].cuda_api_calls[name] = int(ns)


TOOL = Tool(
    name="gpu_gaps",
    summary=("Why a GPU was idle: per device idle time, gap count and histogram, the largest gaps with the kernels "
             "around them and the NVTX range open, and the causes of each gap (sync_wait, cuda_api, "
             "launch_overhead, cpu_work = waiting on the CPU; memcpy, dependency = queued on the device; unknown)."),
    params=Params, result=Result, run=run,
)


def render(result: Result, console) -> None:
    """Per GPU: idle time and its causes, then the largest gaps with what closed them."""
    from rich.table import Table
    from rich.text import Text

    from dashcam.render import fmt_ns

    w = result.window
    console.print(Text(f"gpu_gaps  window {w.start_ms:.3f}–{w.end_ms:.3f} ms ({fmt_ns(w.length_ns)})", style="bold"))
    for d in result.devices:
        console.print(Text(
            f"\nGPU {d.device_id}: idle {fmt_ns(d.idle_ns)} ({d.idle_pct:.1f} % of the window) in {d.gap_count} gaps; "
            f"kernel busy {d.kernel_busy_pct:.1f} %; dominant cause: {d.dominant_cause or '-'}", style="bold"))
        causes = Table(show_header=True, box=None, padding=(0, 2))
        for col in ("cause", "time", "% of idle", "side"):
            causes.add_column(col, justify="left" if col in ("cause", "side") else "right")
        for c in sorted(CAUSES, key=lambda c: -d.causes[c]):
            if d.causes[c]:
                side = "CPU (launching thread)" if c in CPU_SIDE else ("device" if c != "unknown" else "-")
                causes.add_row(c, fmt_ns(d.causes[c]), f"{d.cause_pct[c]:.1f}", side)
        console.print(causes)
        if not d.largest_gaps:
            continue
        t = Table(title=Text(f"largest gaps on GPU {d.device_id}"), title_justify="left")
        for col in ("at ms", "length", "before → after", "launch call", "NVTX range", "causes"):
            t.add_column(col, overflow="fold")
        for g in d.largest_gaps:
            top = sorted(((v, k) for k, v in g.causes.items() if v), reverse=True)[:3]
            call = f"{g.launch_call.name} (tid {g.launch_call.tid})" if g.launch_call else "-"
            named = ", ".join(f"{n} {fmt_ns(v)}" for n, v in list(g.cuda_api_calls.items())[:2])
            t.add_row(f"{g.start_ms:.3f}", fmt_ns(g.duration_ns),
                      Text(f"{g.kernel_before or '-'} → {g.kernel_after or '-'}"), Text(call),
                      Text(g.nvtx_range or "-"),
                      Text(", ".join(f"{k} {fmt_ns(v)}" for v, k in top) + (f" [{named}]" if named else "")))
        console.print(t)
    for n in result.notes:
        console.print(Text("note: ", style="yellow") + Text(n))
