"""gpu_gaps: where each GPU was kernel-idle (no kernel running: its gaps), and who it was waiting for.

A gap is a hole in a device's kernel union inside the window (definitions.py). Each gap's
time is split into causes by the kernel that ends it and the API call that launched it
(``dashcam.profile.gap_causes`` states the rule): ``sync_wait``, ``cuda_api``, ``launch_overhead``,
``cpu_work`` (the GPU waited for the launching thread), ``memcpy``, ``dependency`` (the kernel
was queued on the device) and ``unknown`` (no launch call in the capture, or no kernel after).

The causes of every gap of the whole profile are computed with the cache (``gap_table``). A
query sums the gaps inside the window in SQL and recomputes only the gaps the window cuts,
on their clipped bounds, so any window gives the same numbers a full recomputation would.
"""
from __future__ import annotations

import re

import numpy as np
from pydantic import BaseModel, Field

from dashcam.measure.definitions import Window, pct
from dashcam.profile.coverage import holds
from dashcam.profile.cpu_source import source
from dashcam.profile.gap_causes import (
    BUCKET_BOUNDS,
    CAUSES,
    CPU_SIDE,
    DEVICE_SIDE,
    NONE,
    inside,
    sql_values,
    whole_window,
)
from dashcam.profile.gap_context import (
    cpu_work_by_nvtx,
    cpu_work_parts,
    edge_fills,
    migrations_in_gaps,
    whole_window_split,
)
from dashcam.profile.gap_cpu import device_split, gap_callers, gap_splits, has_host_data, has_stacks, tail_split
from dashcam.profile.gap_cut import ROW, cut_gaps
from dashcam.profile.gap_dependency import (
    COLUMNS,
    TURNAROUND_MAX_NS,
    all_kernels,
    device_totals,
    gap_rows,
    split_gaps,
)
from dashcam.profile.host_activity import steady_call
from dashcam.profile.host_models import CpuCause, SampledFunction
from dashcam.profile.host_window import host_span
from dashcam.text.format import fmt_ns

from .base import OmitNone, Tool, ToolParams, ToolResult, WindowInfo

# A thread on a CPU at least half the window is a busy thread: it competes for a core most of the time.
BUSY_THREAD_PCT = 50.0
# Thread names of OpenMP and BLAS worker pools (libgomp, Intel OpenMP, OpenBLAS, MKL, TBB).
PARALLEL_RUNTIME = re.compile(r"\b(?:omp|gomp|iomp|openblas|blas|mkl|tbb)", re.IGNORECASE)

# Histogram buckets: upper bound (ns, gap_causes.BUCKET_BOUNDS) and label.
BUCKETS = list(zip(BUCKET_BOUNDS, ["<10us", "10-100us", "100us-1ms", "1-10ms", "10-100ms", ">=100ms"]))


class Params(ToolParams):
    min_gap_us: float = Field(0, ge=0, description="Ignore gaps shorter than this in the largest-gaps list (us).")


class LaunchCall(BaseModel):
    name: str
    pid: int
    tid: int
    start_ns: int
    end_ns: int


class Gap(OmitNone):
    OMIT_NONE = frozenset({"cpu_work_states", "cpu_work_cause", "callers"})

    start_ns: int
    end_ns: int
    duration_ns: int
    start_ms: float = Field(description="Gap start in ms from the start of the profile's GPU activity.")
    kernel_before: str | None
    kernel_after: str | None
    launch_call: LaunchCall | None = Field(None, description="The API call that launched kernel_after.")
    nvtx_range: str | None = Field(
        None, description="Innermost NVTX range open on the launching thread at the gap start.")
    causes: dict[str, int] = Field(description="Cause name -> ns; adds up to duration_ns.")
    dominant_cause: str
    cuda_api_calls: dict[str, int] = Field(default_factory=dict,
                                           description="For cuda_api/sync_wait time: API name -> ns.")
    cpu_work_states: dict[str, int] | None = Field(None, description=(
        "Where the capture has OS runtime calls, context switches or CPU samples: the cpu_work split by what the "
        "launching thread was doing (os_wait, os_call, descheduled, running, unknown); sums to causes.cpu_work."))
    cpu_work_cause: CpuCause | None = Field(None, description="The named piece of that cpu_work with the most time.")
    callers: dict[str, str] | None = Field(None, description=(
        "Where the capture has call stacks (CUDA backtraces, OS runtime backtraces, CPU samples): CUDA API name -> "
        "the function that called it, for the launch call of kernel_after and the longest CUDA call in the gap's "
        "CPU-side part (profile text)."))


class HistogramBucket(BaseModel):
    bucket: str
    count: int
    total_ns: int


class EdgeGap(OmitNone):
    OMIT_NONE = frozenset({"host_states", "host_os_calls", "host_functions", "host_samples"})

    start_ms: float = Field(description="Gap start in ms from the start of the profile's GPU activity.")
    duration_ns: int
    memory_ns: int = Field(description="This GPU's own copies and memsets inside the gap (union).")
    migration_ns: int = Field(description="Unified-memory migrations among them (union).")
    other_gpus_kernel_ns: int | None = Field(
        description="Other GPUs' kernels inside the gap (union over them); null when the profile has one GPU.")
    host_states: dict[str, int] | None = Field(None, description=(
        "The tail only, where the capture has OS runtime calls, context switches or CPU samples: what the thread "
        "that launched the GPU's last kernel did in it outside CUDA calls (os_wait, os_call, descheduled, "
        "running, unknown; ns)."))
    host_os_calls: dict[str, int] | None = Field(None, description=(
        "The tail's time inside OS runtime calls by call name, on the thread of that process with the most time "
        "in each (ns, most first, top 10)."))
    host_functions: list[SampledFunction] | None = Field(None, description=(
        "The most sampled functions of the launching thread's host code in the tail (top 5; sample counts)."))
    host_samples: int | None = Field(None, description="CPU samples of that host code in the tail.")


class PacedCall(BaseModel):
    call: str = Field(description="The device call (ioctl, select, poll, ...; profile text).")
    calls: int = Field(description="Its calls on the thread in the window, or over the whole capture when the window "
                                   "(a step or two) holds too few to tell a period but at least one of them.")
    period_ns: int = Field(description="The median interval between consecutive calls.")
    per_second: float = Field(description="The rate that period makes (1 s / period_ns, 3 significant figures).")


class DependencySplit(OmitNone):
    OMIT_NONE = frozenset({"latency_p10_ns", "latency_p50_ns", "latency_p90_ns"})

    launch_latency_ns: int = Field(description=(
        "dependency time with the device empty after the launch call returned and no wait in the capture: "
        "launch-to-start latency, or what the trace cannot see (another process or context, a device-side wait)."))
    wait_ns: int = Field(description=(
        "dependency time that is a real wait: gaps whose kernel follows a stream-wait call on its launching thread "
        "(wait_calls) or is a later node of a graph launch, and the part of other gaps other GPUs' kernels overlap."))
    turnaround_ns: int = Field(description=(
        f"dependency time in turnaround gaps (shorter than {TURNAROUND_MAX_NS} ns between two kernels): the GPU's own "
        "turnaround between back-to-back kernels, not a dependency. The three parts sum to causes.dependency."))
    wait_call_ns: int = Field(description="Of wait_ns, the gaps whose kernel follows a stream-wait call.")
    wait_other_gpus_ns: int = Field(description="Of wait_ns, the part other GPUs' kernels overlap (the gaps with "
                                                "no stream-wait call and no graph wait).")
    wait_calls: dict[str, int] = Field(default_factory=dict, description=(
        "The stream-wait calls (cudaStreamWaitEvent, cuStreamWaitEvent, ...) behind wait_call_ns: name -> count."))
    latency_gaps: int = Field(description="Gaps with launch_latency time.")
    latency_p10_ns: float | None = Field(None, description=(
        "Per gap, its launch_latency time: 10th percentile over latency_gaps (linear interpolation)."))
    latency_p50_ns: float | None = Field(None, description="... median: how long the device sits empty between a "
                                                           "launch call returning and its kernel starting.")
    latency_p90_ns: float | None = Field(None, description="... 90th percentile.")
    turnaround_gaps: int = Field(description="Turnaround gaps (shorter than the floor, a kernel on each side).")
    turnaround_max_ns: int = Field(TURNAROUND_MAX_NS, description="That floor: a gap between two kernels shorter "
                                                                  "than this is turnaround (TURNAROUND_MAX_NS).")
    turnaround_gap_ns: int = Field(description="Their whole length (every cause).")
    turnaround_pct: float = Field(description="turnaround_gap_ns as % of this device's kernel-idle time.")


class DeviceGaps(OmitNone):
    OMIT_NONE = frozenset({"cpu_work_states", "cpu_work_os_calls", "cpu_work_functions", "cpu_work_samples",
                           "sampling_period_ns", "dependency_split", "cpu_work_paced_by", "busy_threads",
                           "cpu_cores", "parallel_runtime_threads"})

    device_id: int
    kernel_busy_pct: float = Field(description="kernel-busy: the kernel union as % of the window.")
    kernel_idle_ns: int = Field(description="kernel-idle: the window minus kernel-busy, the sum of all gaps.")
    kernel_idle_pct: float = Field(description="kernel-idle as % of the window.")
    gap_count: int
    histogram: list[HistogramBucket]
    causes: dict[str, int] = Field(description="Cause name -> ns over all gaps of this device; sums to kernel_idle_ns.")
    cause_pct: dict[str, float] = Field(description="Cause name -> % of this device's kernel-idle time.")
    dominant_cause: str | None
    cuda_api_calls: dict[str, int] = Field(
        default_factory=dict, description="API name -> ns the launching threads spent inside calls of it during the "
        "CPU-side part of this device's gaps (the time behind cuda_api and sync_wait; calls counted one by one, so "
        "a driver call nested in a runtime call adds its own time). Most time first.")
    largest_gaps: list[Gap]
    head: EdgeGap | None = Field(None, description="The gap before this GPU's first kernel in the window.")
    tail: EdgeGap | None = Field(None, description="The gap after this GPU's last kernel in the window (its causes "
                                                   "are 'unknown': no kernel ends it).")
    migration_ns: int = Field(0, description="Unified-memory migrations (memcpy copyKind 11-13) inside this GPU's "
                                             "gaps (union).")
    dependency_split: DependencySplit | None = Field(None, description=(
        "causes.dependency split into launch_latency, wait and turnaround (profile/gap_dependency.py states the "
        "rule), with the launch-latency spread and the back-to-back turnaround gaps; absent without gaps."))
    cpu_work_nvtx: dict[str, int] = Field(default_factory=dict, description=(
        "cpu_work by the innermost NVTX range open on the launching thread (label group -> ns), over the gaps "
        "holding the most cpu_work (cpu_work_examined_ns); most first, top 10."))
    cpu_work_kinds: dict[str, int] = Field(default_factory=dict, description=(
        "The same cpu_work by the kind of its innermost kinded NVTX range: jit (compiling), mpi, nccl, data "
        "(loading), framework (ops of a framework); ns."))
    cpu_work_examined_ns: int = Field(0, description="cpu_work of the gaps cut by NVTX range (all of it unless the "
                                                     "device has more than 2000 gaps with cpu_work).")
    cpu_work_states: dict[str, int] | None = Field(None, description=(
        "Where the capture has OS runtime calls, context switches or CPU samples: the cpu_work of the same gaps by "
        "what the launching threads were doing (os_wait, os_call, descheduled, running, unknown); sums to "
        "cpu_work_examined_ns."))
    cpu_work_os_calls: dict[str, int] | None = Field(None, description="That cpu_work inside OS runtime calls, by "
                                                                       "call name (ns, most first, top 10).")
    cpu_work_functions: list[SampledFunction] | None = Field(None, description=(
        "The most sampled functions of that cpu_work outside OS runtime calls (top 5; sample counts)."))
    cpu_work_samples: int | None = Field(None, description="CPU samples in that cpu_work outside OS runtime calls.")
    sampling_period_ns: float | None = Field(None, description="The capture's sampling period (cpu tool).")
    cpu_work_paced_by: PacedCall | None = Field(None, description=(
        "Where descheduled or OS-wait time is the largest part of that cpu_work: the device call the launching "
        "thread with the most cpu_work makes at a steady period (host_activity.steady_call): a loop paced by its "
        "input; null when none."))
    busy_threads: int | None = Field(None, description=(
        "Where descheduled time is the largest part of that cpu_work and the capture has context switches: the "
        "threads on a CPU at least BUSY_THREAD_PCT of the window."))
    cpu_cores: int | None = Field(None, description="The capture machine's CPU cores (TARGET_INFO_SYSTEM_ENV), with "
                                                    "busy_threads.")
    parallel_runtime_threads: int | None = Field(None, description=(
        "With busy_threads: threads named as OpenMP or BLAS workers (PARALLEL_RUNTIME)."))


class Result(ToolResult):
    devices: list[DeviceGaps]




class _Totals:
    """Per device: gap count, cause sums and histogram (count, ns per bucket)."""

    def __init__(self) -> None:
        self.count = 0
        self.causes = dict.fromkeys(CAUSES, 0)
        self.hist = [[0, 0] for _ in BUCKETS]
        self.api: dict[int, int] = {}  # API name id -> ns (cuda_api_calls)

    def add_api(self, per_name: dict[int, int]) -> None:
        for nid, ns in per_name.items():
            self.api[nid] = self.api.get(nid, 0) + ns

    def add(self, dur: int, causes: dict[str, int]) -> None:
        self.count += 1
        for c in CAUSES:
            self.causes[c] += causes[c]
        self.hist[_bucket(dur)][0] += 1
        self.hist[_bucket(dur)][1] += dur


def _bucket(dur: int) -> int:
    return next(i for i, (hi, _) in enumerate(BUCKETS) if hi is None or dur < hi)


def _inside_totals(profile, w: Window, devices: list[int]) -> dict[int, _Totals]:
    """Count, cause sums and histogram of the stored gaps lying wholly inside the window, per device (over the
    whole profile: the sums stored with the cache)."""
    whole = whole_window(profile, w)
    if whole is not None:
        out = {d: _Totals() for d in devices}
        for d in devices:
            t, x = out[d], whole.get(str(d))
            if x is None:
                continue
            t.count, t.causes, t.hist = x["count"], dict(x["causes"]), [list(h) for h in x["hist"]]
            t.api = {int(n): ns for n, ns in x["api"].items() if ns}
        return out
    dur = '("end" - start)'
    hist, lo = [], 0
    for hi, _ in BUCKETS:
        cond = f"{dur} >= {lo}" + (f" AND {dur} < {hi}" if hi is not None else "")
        hist.append(f"count(*) FILTER (WHERE {cond}), coalesce(sum({dur}) FILTER (WHERE {cond}), 0)::BIGINT")
        lo = hi or 0
    rows = profile.rows(f"""
        SELECT device_id, count(*), {", ".join(f"sum({c})::BIGINT" for c in CAUSES)}, {", ".join(hist)}
        FROM gap_table WHERE {inside(w, devices)} GROUP BY 1""")
    out = {d: _Totals() for d in devices}
    for d, nid, ns in profile.rows(f"""SELECT device_id, name_id, sum(ns)::BIGINT FROM gap_api
                                       WHERE {inside(w, devices)} GROUP BY 1, 2"""):
        out[int(d)].api[int(nid)] = int(ns)
    for r in rows:
        t = out[int(r[0])]
        t.count = int(r[1])
        t.causes = {c: int(v) for c, v in zip(CAUSES, r[2:2 + len(CAUSES)])}
        rest = r[2 + len(CAUSES):]
        t.hist = [[int(rest[2 * i]), int(rest[2 * i + 1])] for i in range(len(BUCKETS))]
    return out


def _largest_inside(profile, w: Window, devices: list[int], params: Params) -> list[dict]:
    """The ``limit`` longest stored gaps inside the window per device (ties: earlier first)."""
    cols = ", ".join(f'"{c}"' for c in [*ROW, *CAUSES])
    per_device = [f"""(SELECT {cols} FROM gap_table WHERE {inside(w, [d])}
                        AND "end" - start >= {round(params.min_gap_us * 1000)}
                       ORDER BY "end" - start DESC, start LIMIT {int(params.limit)})""" for d in devices]
    return profile.dicts(" UNION ALL ".join(per_device))


def run(profile, params: Params) -> Result:
    w = profile.window(params.start_ms, params.end_ms)
    devices = profile.check_gpu(params.gpu)
    totals = _inside_totals(profile, w, devices)
    cut = cut_gaps(profile, w, devices)
    for r in cut:
        totals[r["device_id"]].add(r["end"] - r["start"], r["causes"])
        totals[r["device_id"]].add_api(r["api_by_name"])
    top: dict[int, list[dict]] = {d: [] for d in devices}
    for r in _largest_inside(profile, w, devices, params):
        r["causes"] = {c: int(r.pop(c)) for c in CAUSES}
        top[r["device_id"]].append(r)
    for r in cut:
        if r["end"] - r["start"] >= params.min_gap_us * 1000:
            top[r["device_id"]].append(r)
    for d in devices:
        top[d] = sorted(top[d], key=lambda r: (r["start"] - r["end"], r["start"]))[: params.limit]
    out = [_device_result(d, w, totals[d], top[d]) for d in devices]
    _describe(profile, out, top, {d: totals[d].api for d in devices})
    _context(profile, w, out, cut)
    _cpu_gaps(profile, out, top)
    _dependency(profile, w, out, cut)
    notes = []
    if not profile.has_table("runtime"):
        notes.append("No CUDA API rows in this profile: gaps cannot be attributed (all 'unknown').")
    return Result(tool="gpu_gaps", window=WindowInfo.of(w), devices=out, notes=notes)


def _device_result(d: int, w: Window, t: _Totals, top: list[dict]) -> DeviceGaps:
    idle = sum(ns for _, ns in t.hist)
    largest = []
    for r in top:
        cz = r["causes"]
        call = None
        if r["key"] >= 0 and r["api_end"] != NONE:
            call = LaunchCall(name="?", pid=(r["key"] >> 24) & 0xFFFFFF, tid=r["key"] & 0xFFFFFF,
                              start_ns=r["api_start"], end_ns=r["api_end"])
        largest.append(Gap(
            start_ns=r["start"], end_ns=r["end"], duration_ns=r["end"] - r["start"],
            start_ms=round(w.rel_ms(r["start"]), 6), kernel_before=None, kernel_after=None,
            launch_call=call, causes=cz, dominant_cause=max(CAUSES, key=lambda c: cz[c]),
        ))
    return DeviceGaps(
        device_id=d, kernel_busy_pct=round(pct(w.length_ns - idle, w), 3), kernel_idle_ns=idle,
        kernel_idle_pct=round(pct(idle, w), 3), gap_count=t.count,
        histogram=[HistogramBucket(bucket=label, count=n, total_ns=ns) for (_, label), (n, ns) in zip(BUCKETS, t.hist)],
        causes=t.causes, cause_pct={c: round(100.0 * v / idle, 3) if idle else 0.0 for c, v in t.causes.items()},
        dominant_cause=max(CAUSES, key=lambda c: t.causes[c]) if idle > 0 else None, largest_gaps=largest,
    )


def _describe(profile, out: list[DeviceGaps], top: dict[int, list[dict]], api: dict[int, dict[int, int]]) -> None:
    """Names: kernels before/after the largest gaps, their launch call and API time by name, the NVTX range
    open; per device, API time by name over all its gaps (``api``: device -> name id -> ns)."""
    pairs = [(gap, r) for dev in out for gap, r in zip(dev.largest_gaps, top[dev.device_id])]
    # CUDA time by API name on the launching thread, in the CPU-side part of each gap: computed for the
    # gaps the window cuts (_cut_gaps), stored in gap_api for the others
    named = {i: r["api_by_name"] for i, (_, r) in enumerate(pairs) if "api_by_name" in r}
    stored = [(i, r["device_id"], r["start"]) for i, (gap, r) in enumerate(pairs)
              if i not in named and gap.causes["cuda_api"] + gap.causes["sync_wait"] > 0]
    if stored:
        for i, nid, ns in profile.rows(f"""
                SELECT v.i, a.name_id, a.ns FROM gap_api a JOIN (VALUES {sql_values(stored)}) v(i, d, s)
                  ON a.device_id = v.d AND a.start = v.s"""):
            named.setdefault(int(i), {})[int(nid)] = int(ns)
    kernel_ids = {x for _, r in pairs for x in (r["before_id"], r["after_id"])} - {-1}
    api_ids = ({r["api_name_id"] for _, r in pairs} | {n for per in named.values() for n in per}
               | {n for per in api.values() for n in per}) - {-1}
    knames = dict(profile.rows(f"SELECT id, value FROM strings WHERE id IN ({','.join(map(str, kernel_ids))})")) \
        if kernel_ids else {}
    anames = dict(profile.rows(f"SELECT id, name FROM api_names WHERE id IN ({','.join(map(str, api_ids))})")) \
        if api_ids else {}

    def by_name(per: dict[int, int]) -> dict[str, int]:
        out: dict[str, int] = {}
        for nid, ns in per.items():
            out[anames.get(nid, "?")] = out.get(anames.get(nid, "?"), 0) + ns
        return dict(sorted(out.items(), key=lambda kv: (-kv[1], kv[0])))

    for dev in out:
        dev.cuda_api_calls = by_name(api.get(dev.device_id, {}))
    for i, (gap, r) in enumerate(pairs):
        gap.kernel_before, gap.kernel_after = knames.get(r["before_id"]), knames.get(r["after_id"])
        if gap.launch_call:
            gap.launch_call.name = anames.get(r["api_name_id"], "?")
        gap.cuda_api_calls = by_name(named.get(i, {}))
    _nvtx_ranges(profile, [gap for gap, _ in pairs])


def _context(profile, w: Window, out: list[DeviceGaps], cut: list[dict]) -> None:
    """Per device: the edge gaps and what fills them, migrations in the gaps, cpu_work by NVTX range
    (profile/gap_context.py states the rules)."""
    whole = whole_window(profile, w)
    if whole is not None:  # stored with the cache for the whole-profile window
        spans = [(d.device_id, *whole[str(d.device_id)]["kernels"]) for d in out
                 if whole.get(str(d.device_id), {}).get("kernels")]
    else:
        spans = profile.rows(f"""SELECT device_id, min(greatest(start, {w.start_ns})), max(least("end", {w.end_ns}))
            FROM launches WHERE device_id IN ({",".join(str(d.device_id) for d in out)})
              AND "end" > {w.start_ns} AND start < {w.end_ns} GROUP BY 1""")
    first_last = {int(d): (int(a), int(b)) for d, a, b in spans}
    mig = migrations_in_gaps(profile, w, [d.device_id for d in out])
    _edge_gaps(profile, w, out, first_last)
    for dev in out:
        d = dev.device_id
        dev.migration_ns = mig.get(d, 0)
        if dev.causes["cpu_work"] > 0:
            stored = whole_window_split(profile, w, d) if not cut else None
            if stored is None:
                parts, examined = cpu_work_parts(profile, w, d, cut)
                labels, kinds = cpu_work_by_nvtx(profile, parts, d)
            else:  # summed with the cache; the parts are read only for a capture with host data
                labels, kinds, examined = stored
                parts = cpu_work_parts(profile, w, d, cut)[0] if has_host_data(profile) else []
            dev.cpu_work_nvtx = dict(list(labels.items())[:10])
            dev.cpu_work_kinds, dev.cpu_work_examined_ns = kinds, examined
            _cpu_states(profile, w, dev, parts)


def _dependency(profile, w: Window, out: list[DeviceGaps], cut: list[dict]) -> None:
    """Each device's dependency split (profile/gap_dependency.py): stored with the cache for the whole-profile
    window, else over the stored gaps inside the window and the cut ones on their clipped bounds."""
    devices = [dev.device_id for dev in out if dev.gap_count]
    whole = whole_window(profile, w) or {}
    stored = {d: whole[str(d)]["dependency_split"] for d in devices
              if "dependency_split" in whole.get(str(d), {})}
    todo = [d for d in devices if d not in stored]
    if todo:
        g = gap_rows(profile, inside(w, todo))
        mine = [r for r in cut if r["device_id"] in todo]
        if mine:
            g = {c: np.concatenate([g[c], np.array([r[c] for r in mine], np.int64)]) for c in COLUMNS} | {
                "dependency": np.concatenate([g["dependency"], [r["causes"]["dependency"] for r in mine]])}
        s = split_gaps(profile.con, g, all_kernels(profile.con, w, profile.devices))
        stored |= {d: device_totals(g, s, d) for d in todo}
    for dev in out:
        if dev.device_id in stored:
            x = stored[dev.device_id]
            dev.dependency_split = DependencySplit(**x, turnaround_pct=round(
                100.0 * x["turnaround_gap_ns"] / dev.kernel_idle_ns, 3) if dev.kernel_idle_ns else 0.0)


def _edge_gaps(profile, w: Window, out: list[DeviceGaps], first_last: dict[int, tuple[int, int]]) -> None:
    """Each device's head gap (window start to its first kernel; the whole window without kernels) and tail gap
    (its last kernel to the window end), with what fills them (gap_context.edge_fills, all edges at once)."""
    edges = []  # (device result, head | tail, device, start, end)
    for dev in out:
        d = dev.device_id
        a, b = first_last.get(d, (w.end_ns, w.end_ns))
        for name, lo, hi in (("head", w.start_ns, a), ("tail", b, w.end_ns)):
            if hi > lo and (name == "head" or d in first_last):
                edges.append((dev, name, d, lo, hi))
    for (dev, name, _, lo, hi), fill in zip(edges, edge_fills(profile, w, [e[2:] for e in edges])):
        setattr(dev, name, EdgeGap(start_ms=round(w.rel_ms(lo), 6), duration_ns=hi - lo, **fill))
    if has_host_data(profile):
        _tail_hosts(profile, w, [dev for dev in out if dev.tail is not None])


TAIL_THREADS = 16  # threads of the launching process whose OS calls in a tail are read (most events first)


def _tail_hosts(profile, w: Window, devs: list[DeviceGaps]) -> None:
    """What the host did in each tail (after the GPU's last kernel): the states of the thread that launched that
    kernel, and the OS calls of that process's threads, each call name on the thread with the most time in it
    (gap_cpu.tail_split)."""
    last = {int(d): int(g) for d, g in profile.rows(f"""
        SELECT device_id, arg_max(api_global_tid, "end") FROM launches
        WHERE device_id IN ({",".join(str(d.device_id) for d in devs)}) AND start < {w.end_ns} AND "end" > {w.start_ns}
          AND api_global_tid IS NOT NULL GROUP BY 1""")}
    for dev in devs:
        key = last.get(dev.device_id)
        if key is None:
            continue
        lo, hi = w.end_ns - dev.tail.duration_ns, w.end_ns
        found = tail_split(profile, key, lo, hi, TAIL_THREADS)
        t = dev.tail
        t.host_states, t.host_os_calls, t.host_samples = found["states"], found["os_calls"], found["samples"]
        t.host_functions = _functions(found)


def _functions(found: dict) -> list[SampledFunction]:
    """The sampled functions of a split (gap_cpu), with their estimated time (samples x the sampling period)."""
    per = found["period_ns"]
    est = (lambda n: round(n * per) if per else None)
    return [SampledFunction(function=f.name, module=f.module, self_samples=f.self_samples,
                            total_samples=f.total_samples, self_ns=est(f.self_samples), total_ns=est(f.total_samples))
            for f in found["functions"]]


def _osrt_names(profile, thread: int, w: Window) -> set[str]:
    """The OS runtime calls thread ``thread`` makes in the window, by name."""
    src = source(profile)
    rows = src.osrt_calls([int(thread)], w.start_ns, w.end_ns)
    return set(src.names(set(rows["name_id"].tolist())).values()) if len(rows["start"]) else set()


def _cpu_states(profile, w: Window, dev: DeviceGaps, parts: list[tuple]) -> None:
    """A device's cpu_work by thread state, OS call and sampled function (profile/gap_cpu.py), with the data;
    where descheduled or OS-wait time leads it, what paces the launching thread and how busy the CPUs were."""
    found = device_split(profile, parts)
    if found is None:
        return
    dev.cpu_work_states, dev.cpu_work_os_calls = found["states"], found["os_calls"]
    dev.cpu_work_functions = _functions(found)
    dev.cpu_work_samples, dev.sampling_period_ns = found["samples"], found["period_ns"]
    st = found["states"]
    top = max(st, key=lambda k: (st[k], k)) if any(st.values()) else None
    if top not in ("descheduled", "os_wait"):
        return
    per: dict[int, int] = {}
    for a, b, key in parts:
        per[int(key)] = per.get(int(key), 0) + b - a
    thread = max(per, key=lambda k: (per[k], -k))
    paced = steady_call(profile, thread, w.start_ns, w.end_ns)
    if paced is None:  # a step's window holds a call or two: the loop's period is the capture's, if it holds one
        whole = host_span(profile)
        loop = steady_call(profile, thread, *whole) if whole else None
        if loop is not None and loop.name in _osrt_names(profile, thread, w):
            paced = loop
    if paced is not None:
        dev.cpu_work_paced_by = PacedCall(call=paced.name, calls=paced.calls, period_ns=paced.period_ns,
                                          per_second=float(f"{1e9 / paced.period_ns:.3g}"))
    if top == "descheduled" and holds(profile, "context_switches"):
        running = source(profile).running_by_thread(w.start_ns, w.end_ns)
        dev.busy_threads = sum(1 for ns in running.values() if 100.0 * ns >= BUSY_THREAD_PCT * w.length_ns)
        dev.cpu_cores = source(profile).cpu_cores()
        dev.parallel_runtime_threads = sum(1 for (n,) in profile.rows("SELECT name FROM threads")
                                           if n and PARALLEL_RUNTIME.search(n))


def _cpu_gaps(profile, out: list[DeviceGaps], top: dict[int, list[dict]]) -> None:
    """The largest gaps one level deeper (profile/gap_cpu.py): their cpu_work by thread state and its named
    cause, and the functions that made their launch call and their longest CUDA call."""
    pairs = [(gap, r) for dev in out for gap, r in zip(dev.largest_gaps, top[dev.device_id])]
    parts = []
    for gap, r in pairs:
        known = r["key"] >= 0 and r["api_end"] != NONE and gap.causes["cpu_work"] > 0
        split = min(max(r["api_end"], gap.start_ns), gap.end_ns)
        parts.append((gap.start_ns, min(max(r["api_start"], gap.start_ns), split), r["key"]) if known else None)
    for (gap, _), found in zip(pairs, gap_splits(profile, parts)):
        if found is not None:
            states, cause = found
            gap.cpu_work_states = states
            gap.cpu_work_cause = CpuCause(state=cause.state, name=cause.name, ns=cause.ns,
                                          samples=cause.samples) if cause else None
    probes = [(i, r["key"], gap.start_ns, r["api_start"], r["api_end"]) for i, (gap, r) in enumerate(pairs)
              if r["key"] >= 0 and r["api_end"] != NONE]
    if not probes or not has_stacks(profile):  # no call stacks: no caller to name
        return
    calls: list[list[tuple]] = [[] for _ in pairs]
    # the launch call (by its thread and start) and the longest call in [gap start, launch call start)
    for i, name, corr, s, e, longest in profile.rows(f"""
            SELECT v.i, n.name, c.correlation_id, c.start, c."end", c.start <> v.s AS longest FROM api_calls c
            JOIN (VALUES {sql_values(probes)}) v(i, k, a, s, e) ON c.global_tid = v.k
              AND ((c.start = v.s AND c."end" = v.e) OR (c.start < v.s AND c."end" > v.a))
            LEFT JOIN api_names n ON n.id = c.name_id
            QUALIFY row_number() OVER (PARTITION BY v.i, c.start <> v.s
                                       ORDER BY least(c."end", v.s) - greatest(c.start, v.a) DESC, c.start) = 1
            ORDER BY 1, 6"""):
        skip = set() if longest or not pairs[i][0].kernel_after else {pairs[i][0].kernel_after}
        calls[i].append((name or "?", pairs[i][1]["key"], corr if corr is not None else -1, s, e, skip))
    for (gap, _), named in zip(pairs, gap_callers(profile, calls)):
        gap.callers = named


def _nvtx_ranges(profile, gaps: list[Gap]) -> None:
    """The innermost NVTX range open on the launching thread at each gap start: the latest started, and of ranges
    started at the same instant the first to end (the one nested in the others); equal ranges by label.

    Found on the string-free view first; the label is then read for those few rows only.
    """
    probes = [(i, g.launch_call.pid, g.launch_call.tid, g.start_ns) for i, g in enumerate(gaps) if g.launch_call]
    if not probes:
        return
    lo, hi = min(p[3] for p in probes), max(p[3] for p in probes)
    inner = profile.rows(
        f"""SELECT v.i, v.pid, v.tid, n.start, n."end" FROM nvtx_times n
            JOIN (VALUES {sql_values(probes)}) v(i, pid, tid, t) ON n.pid = v.pid AND n.tid = v.tid
            WHERE n.is_range AND n.start <= {hi} AND n."end" > {lo} AND n.start <= v.t AND n."end" > v.t
            QUALIFY row_number() OVER (PARTITION BY v.i ORDER BY n.start DESC, n."end") = 1""")
    if not inner:
        return
    labels = {(pid, tid, st, en): lab for pid, tid, st, en, lab in profile.rows(
        f"""SELECT pid, tid, start, "end", min(label) FROM nvtx WHERE is_range
            AND start IN ({','.join(str(int(r[3])) for r in inner)}) GROUP BY 1, 2, 3, 4""")}
    for i, pid, tid, st, en in inner:
        gaps[i].nvtx_range = labels.get((pid, tid, st, en))


TOOL = Tool(
    name="gpu_gaps",
    summary=("Why a GPU was kernel-idle (no kernel running): per device kernel-idle time, gap count and "
             "histogram, the largest gaps with the kernels around them and the NVTX range open, and the causes of "
             "each gap (sync_wait, cuda_api, "
             "launch_overhead, cpu_work = waiting on the CPU; memcpy, dependency = queued on the device; transfer = "
             "copying or migrating with no launch call known; unknown)."),
    params=Params, result=Result, run=run,
)


def render(result: Result, console) -> None:
    """Per GPU: idle time and its causes, then the largest gaps with what closed them."""
    from rich.table import Table
    from rich.text import Text

    from dashcam.text.tables import print_notes

    w = result.window
    console.print(Text(f"gpu_gaps  window {w.start_ms:.3f}–{w.end_ms:.3f} ms ({fmt_ns(w.length_ns)})", style="bold"))
    for d in result.devices:
        console.print(Text(
            f"\nGPU {d.device_id}: kernel-idle {fmt_ns(d.kernel_idle_ns)} ({d.kernel_idle_pct:.1f} % of the window) in "
            f"{d.gap_count} gaps; kernel-busy {d.kernel_busy_pct:.1f} %; dominant cause: {d.dominant_cause or '-'}",
            style="bold"))
        causes = Table(show_header=True, box=None, padding=(0, 2))
        for col in ("cause", "time", "% of kernel-idle", "side"):
            causes.add_column(col, justify="left" if col in ("cause", "side") else "right")
        for c in sorted(CAUSES, key=lambda c: -d.causes[c]):
            if d.causes[c]:
                side = "CPU (launching thread)" if c in CPU_SIDE else ("device" if c in DEVICE_SIDE else "-")
                causes.add_row(c, fmt_ns(d.causes[c]), f"{d.cause_pct[c]:.1f}", side)
        console.print(causes)
        if d.dependency_split is not None and (d.causes["dependency"] or d.dependency_split.turnaround_gaps):
            console.print(Text(_split_line(d.dependency_split, fmt_ns)))
        if not d.largest_gaps:
            continue
        t = Table(title=Text(f"largest gaps on GPU {d.device_id}"), title_justify="left")
        for col in ("at ms", "length", "before → after", "launch call", "NVTX range", "causes"):
            t.add_column(col, overflow="fold")
        for g in d.largest_gaps:
            call = f"{g.launch_call.name} (tid {g.launch_call.tid})" if g.launch_call else "-"
            t.add_row(f"{g.start_ms:.3f}", fmt_ns(g.duration_ns),
                      Text(f"{g.kernel_before or '-'} → {g.kernel_after or '-'}"), Text(call),
                      Text(g.nvtx_range or "-"), Text(causes_text(g)))
        console.print(t)
    print_notes(result.notes, console)


def causes_text(g: Gap) -> str:
    """A gap's causes as the terminal shows them: its three largest with their time, most first, then the two
    CUDA calls with the most time in it (``cpu_work 1.200 ms, cuda_api 300.00 µs [cudaMemcpy 300.00 µs]``)."""
    top = sorted(((v, k) for k, v in g.causes.items() if v), reverse=True)[:3]
    named = ", ".join(f"{n} {fmt_ns(v)}" for n, v in list(g.cuda_api_calls.items())[:2])
    return ", ".join(f"{k} {fmt_ns(v)}" for v, k in top) + (f" [{named}]" if named else "")


def _split_line(s: DependencySplit, fmt_ns) -> str:
    """The terminal's line on the dependency split: its parts, the latency median, the wait calls, the turnaround."""
    parts = [f"launch-to-start latency {fmt_ns(s.launch_latency_ns)}"
             + (f" (median {fmt_ns(s.latency_p50_ns)} over {s.latency_gaps} gaps)" if s.latency_gaps else ""),
             f"waits {fmt_ns(s.wait_ns)}" + (" (" + ", ".join(f"{n} x {k}" for k, n in s.wait_calls.items()) + ")"
                                             if s.wait_calls else ""),
             f"turnaround {fmt_ns(s.turnaround_ns)}"]
    return (f"dependency: {'; '.join(parts)}. Turnaround gaps (under {fmt_ns(TURNAROUND_MAX_NS)} between kernels): "
            f"{s.turnaround_gaps}, {fmt_ns(s.turnaround_gap_ns)} = {s.turnaround_pct:.1f} % of kernel-idle.")
