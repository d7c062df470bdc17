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
from dashcam.intervals import EMPTY, gaps, memory_unions, merge

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


NONE = np.iinfo(np.int64).max


def _kernels_with_launch(profile, w, device: int) -> dict[str, np.ndarray]:
    """The device's kernels overlapping the window with their launch call, sorted by start.

    Among kernels with the same start, the one whose launch call returned first comes first
    (the order ``launches`` is stored in; a plain filtered scan keeps it). Arrays: start, end,
    name (short-name id), key (pid << 24 | tid of the launch call, -1 if none), api_start,
    api_end, api_name (name id).
    """
    d = profile.con.execute(
        f"""SELECT start, "end", coalesce(short_name_id, -1) AS name, coalesce(pid * 16777216 + api_tid, -1) AS key,
                   coalesce(api_start, 0) AS api_start, coalesce(api_end, {NONE}) AS api_end,
                   coalesce(api_name_id, -1) AS api_name
            FROM launches WHERE device_id = {int(device)} AND "end" > {w.start_ns} AND start < {w.end_ns}"""
    ).fetchnumpy()
    return {k: np.asarray(v, dtype=np.int64) for k, v in d.items()}


def _first_after_window(profile, w, devices) -> dict[int, dict[str, int]]:
    """Per device, the first kernel starting at or after the window end (it closes the window's tail gap)."""
    rows = profile.dicts(
        f"""SELECT device_id, start, coalesce(short_name_id, -1) AS name,
                   coalesce(pid * 16777216 + api_tid, -1) AS key, coalesce(api_start, 0) AS api_start,
                   coalesce(api_end, {NONE}) AS api_end, coalesce(api_name_id, -1) AS api_name
            FROM launches WHERE start >= {w.end_ns} AND device_id IN ({','.join(str(int(x)) for x in devices)})
            QUALIFY row_number() OVER (PARTITION BY device_id ORDER BY start, api_end NULLS LAST) = 1""")
    return {int(r.pop("device_id")): r for r in rows}


def _thread_calls(profile, key: int, sync_ids: np.ndarray) -> dict[str, np.ndarray]:
    """All API calls of one thread (key = pid << 24 | tid): start, end, name id, is_sync; in stored order."""
    d = profile.con.execute(
        f"""SELECT start, "end", coalesce(name_id, -1) AS name
            FROM api_calls WHERE pid = {int(key) >> 24} AND tid = {int(key) & 0xFFFFFF}""").fetchnumpy()
    out = {k: np.asarray(v, dtype=np.int64) for k, v in d.items()}
    out["is_sync"] = np.isin(out["name"], sync_ids)
    return out


class _DeviceGaps:
    """The gaps of one device and, per gap, the launch call of the kernel that closes it."""

    def __init__(self, profile, w, d: int, after: dict | None, params) -> None:
        ks = _kernels_with_launch(profile, w, d)
        self.union = merge(ks["start"], ks["end"], w)
        self.gaps = g = gaps(self.union, w)
        n = len(g)
        self.key = np.full(n, -1, np.int64)
        self.api_start = np.zeros(n, np.int64)
        self.api_end = np.full(n, NONE, np.int64)
        after_name = -1
        idx = np.zeros(n, np.int64)
        hit = np.zeros(n, bool)
        if len(ks["start"]):
            idx = np.searchsorted(ks["start"], g.ends, side="left")
            hit = idx < len(ks["start"])
            hit[hit] &= ks["start"][idx[hit]] == g.ends[hit]
            self.key[hit], self.api_start[hit], self.api_end[hit] = (
                ks["key"][idx[hit]], ks["api_start"][idx[hit]], ks["api_end"][idx[hit]])
        tail = bool(n) and g.ends[-1] == w.end_ns and after is not None
        if tail:
            self.key[-1], self.api_start[-1], self.api_end[-1] = after["key"], after["api_start"], after["api_end"]
            after_name = after["name"]
        self.known = (self.key >= 0) & (self.api_end != NONE)
        self.split = np.where(self.known, np.clip(self.api_end, g.starts, g.ends), g.starts)
        self.pre_end = np.where(self.known, np.clip(self.api_start, g.starts, self.split), g.starts)
        self.all_api = np.zeros(n, np.int64)
        self.sync = np.zeros(n, np.int64)
        # the largest gaps, with the name ids around them (the kernel arrays are dropped after this)
        dur = g.ends - g.starts
        eligible = np.flatnonzero(dur >= params.min_gap_us * 1000)
        if len(eligible) > params.limit:  # the top `limit` without sorting every gap
            eligible = eligible[np.argpartition(-dur[eligible], params.limit - 1)[: params.limit]]
        self.top = eligible[np.lexsort((eligible, -dur[eligible]))]
        self.top_names = {}
        for i in self.top:
            before = np.flatnonzero(ks["end"] == g.starts[i])
            b = int(ks["name"][before[-1]]) if len(before) else -1
            if hit[i]:
                a, call = int(ks["name"][idx[i]]), int(ks["api_name"][idx[i]])
            elif tail and i == n - 1:
                a, call = after_name, after["api_name"]
            else:
                a, call = -1, -1
            self.top_names[int(i)] = (b, a, call)


def run(profile, params: Params) -> Result:
    w = profile.window(params.start_ms, params.end_ms)
    devices = profile.check_gpu(params.gpu)
    mun = memory_unions(profile, w, devices)
    after = _first_after_window(profile, w, devices)
    dev = {d: _DeviceGaps(profile, w, d, after.get(d), params) for d in devices}

    # One launching thread at a time (its calls can number millions): the overlap of its calls
    # with the CPU-side part [gap start, pre_end) of every gap it closed, and for the largest
    # gaps the time per API name.
    named: dict[tuple[int, int], dict[int, int]] = {}
    keys = np.concatenate([x.key[x.known] for x in dev.values()]) if dev else np.zeros(0, np.int64)
    sync_ids = np.array([r[0] for r in profile.rows("SELECT id FROM api_names WHERE name LIKE '%Synchronize%'")],
                        dtype=np.int64)
    for key in np.unique(keys):
        calls = _thread_calls(profile, key, sync_ids)
        sy = calls["is_sync"]
        u_all = merge(calls["start"], calls["end"])
        u_sync = merge(calls["start"][sy], calls["end"][sy])
        for d, x in dev.items():
            g = x.gaps
            sel = x.known & (x.key == key) & (x.pre_end > g.starts)
            if sel.any():
                x.all_api[sel] = u_all.overlap(g.starts[sel], x.pre_end[sel])
                x.sync[sel] = u_sync.overlap(g.starts[sel], x.pre_end[sel])
            for i in x.top:
                if x.key[i] == key and x.pre_end[i] > g.starts[i]:
                    a, b = int(g.starts[i]), int(x.pre_end[i])
                    m = (calls["end"] > a) & (calls["start"] < b)
                    t = np.minimum(calls["end"][m], b) - np.maximum(calls["start"][m], a)
                    per = {}
                    for nid, ns in zip(calls["name"][m].tolist(), t.tolist()):
                        per[nid] = per.get(nid, 0) + ns
                    named[(d, int(i))] = per

    out = []
    for d, x in dev.items():
        g = x.gaps
        queued = x.known & (x.split < g.ends)
        memcpy = np.zeros(len(g), np.int64)
        if queued.any():
            memcpy[queued] = mun.get(d, EMPTY).overlap(x.split[queued], g.ends[queued])
        causes = {
            "sync_wait": x.sync,
            "cuda_api": x.all_api - x.sync,
            "launch_overhead": x.split - x.pre_end,
            "cpu_work": x.pre_end - g.starts - x.all_api,
            "memcpy": memcpy,
            "dependency": np.where(x.known, g.ends - x.split, 0) - memcpy,
            "unknown": np.where(x.known, 0, g.ends - g.starts),
        }
        out.append(_device_result(d, w, x, causes))
    _describe(profile, dev, out, named)
    notes = []
    if not profile.has_table("runtime"):
        notes.append("No CUDA API rows in this profile: gaps cannot be attributed (all 'unknown').")
    return Result(tool="gpu_gaps", window=WindowInfo.of(w), devices=out, notes=notes)


def _device_result(d, w, x: _DeviceGaps, causes) -> DeviceGaps:
    g = x.gaps
    dur = g.ends - g.starts
    idle = int(dur.sum())
    totals = {c: int(causes[c].sum()) for c in CAUSES}
    hist, lo = [], 0
    for hi, label in BUCKETS:
        m = (dur >= lo) & ((dur < hi) if hi is not None else True)
        hist.append(HistogramBucket(bucket=label, count=int(m.sum()), total_ns=int(dur[m].sum())))
        lo = hi or 0
    largest = []
    for i in x.top:
        cz = {c: int(causes[c][i]) for c in CAUSES}
        call = None
        if x.known[i]:
            key = int(x.key[i])
            call = LaunchCall(name="?", pid=key >> 24, tid=key & 0xFFFFFF,
                              start_ns=int(x.api_start[i]), end_ns=int(x.api_end[i]))
        largest.append(Gap(
            start_ns=int(g.starts[i]), end_ns=int(g.ends[i]), duration_ns=int(dur[i]),
            start_ms=round(w.rel_ms(int(g.starts[i])), 6), kernel_before=None, kernel_after=None,
            launch_call=call, causes=cz, dominant_cause=max(CAUSES, key=lambda c: cz[c]),
        ))
    return DeviceGaps(
        device_id=d, kernel_busy_pct=round(pct(x.union.total, w), 3), idle_ns=idle, idle_pct=round(pct(idle, w), 3),
        gap_count=len(g), histogram=hist, causes=totals,
        cause_pct={c: round(100.0 * v / idle, 3) if idle else 0.0 for c, v in totals.items()},
        dominant_cause=max(CAUSES, key=lambda c: totals[c]) if idle > 0 else None, largest_gaps=largest,
    )


def _describe(profile, dev: dict, out: list[DeviceGaps], named: dict) -> None:
    """Names around the largest gaps: kernels before/after, the launch call, API time by name, NVTX range."""
    kernel_ids, api_ids = set(), set()
    for x in dev.values():
        for b, a, call in x.top_names.values():
            kernel_ids.update((b, a))
            api_ids.add(call)
    for per in named.values():
        api_ids.update(per)
    kernel_ids.discard(-1)
    api_ids.discard(-1)
    knames = dict(profile.rows(f"SELECT id, value FROM strings WHERE id IN ({','.join(map(str, kernel_ids))})")) \
        if kernel_ids else {}
    anames = dict(profile.rows(f"SELECT id, name FROM api_names WHERE id IN ({','.join(map(str, api_ids))})")) \
        if api_ids else {}
    probes = []
    for (d, x), r in zip(dev.items(), out):
        for i, gap in zip(x.top, r.largest_gaps):
            b, a, call = x.top_names[int(i)]
            gap.kernel_before, gap.kernel_after = knames.get(b), knames.get(a)
            if gap.launch_call:
                gap.launch_call.name = anames.get(call, "?")
                probes.append((d, int(i), gap.launch_call.pid, gap.launch_call.tid, gap.start_ns))
            per = named.get((d, int(i)), {})
            gap.cuda_api_calls = {anames.get(nid, "?"): ns for nid, ns in sorted(per.items(), key=lambda kv: -kv[1])}
    _nvtx_ranges(profile, dev, out, probes)


def _nvtx_ranges(profile, dev: dict, out: list[DeviceGaps], probes: list[tuple]) -> None:
    """The innermost NVTX range (latest start) open on the launching thread at each gap start.

    Found on the string-free view first; the label is then read for those few rows only.
    """
    if not probes:
        return
    v = ",".join(f"({d},{i},{pid},{tid},{t})" for d, i, pid, tid, t in probes)
    inner = profile.rows(
        f"""SELECT v.d, v.i, v.pid, v.tid, max(n.start) FROM nvtx_times n
            JOIN (VALUES {v}) v(d, i, pid, tid, t) ON n.pid = v.pid AND n.tid = v.tid
            WHERE n.is_range AND n.start <= v.t AND n."end" > v.t GROUP BY ALL""")
    if not inner:
        return
    labels = {(pid, tid, st): lab for pid, tid, st, lab in profile.rows(
        f"""SELECT pid, tid, start, label FROM nvtx WHERE is_range
            AND start IN ({','.join(str(int(r[4])) for r in inner)})""")}
    gap_at = {(r.device_id, int(i)): gap for (d, x), r in zip(dev.items(), out) for i, gap in zip(x.top, r.largest_gaps)}
    for d, i, pid, tid, st in inner:
        gap_at[(d, i)].nvtx_range = labels.get((pid, tid, st))


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

    from dashcam.render import fmt_ns, print_notes

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
    print_notes(result.notes, console)
