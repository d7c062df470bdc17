"""``dashcam diff BEFORE AFTER``: what changed between two profiles of the same workload.

Per GPU busy and kernel-busy %, the step time, kernel time deltas by full kernel name, kernels
new and gone, copy and sync deltas, and a verdict. Each side is measured with the tools
(overview, iterations, memcpy, sync; kernel totals as top_kernels defines them), so every number
here equals what ``dashcam tool run`` prints for that profile.

Verdict rule (``RULE``; also in the JSON and the README), threshold T % (default 5):

1. ``not_comparable`` when the pair fails a comparability check (``comparability``: kernels on
   both sides, the same GPU count, at least ``--min-shared`` % of each side's kernel time in kernels
   both run, the same step definition); ``reason`` says which.
2. Primary metric, the time per unit of work: the median step time (``iterations``) when both
   profiles have steps, else the window length (first to last GPU activity). Its change
   p = (after - before) / before * 100: p > T -> ``regressed``; p < -T -> ``improved``.
3. Tie-break when |p| <= T: GPU kernel time, the sum over GPUs of kernel-busy (union of each
   GPU's kernels in the window; inside the steps, divided by the step count, when the primary is the step time).
   Its change q: q > T -> ``regressed``; q < -T -> ``improved``; otherwise ``neutral``.

Kernel, copy and sync deltas are per unit of work, so captures of different length compare: per step
when both profiles have steps — the totals inside the steps (the first step's start to the last step's
end: no warm-up before them, no tail after them) over the step count, as is the tie-break — else per
second of the window (``kernel_unit``); the window's totals (as the tools print them) are kept beside
them. A kernel whose time per unit changed by at most T % is ``unchanged``.

Devices are matched by device id; when the ids differ but the counts match, by rank order (the
i-th lowest id with the i-th lowest id), said in the notes.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from pydantic import BaseModel, Field

from dashcam.errors import NoGpuActivity
from dashcam.evidence import ToolRuns
from dashcam.evidence.runs import run_tool
from dashcam.measure.definitions import Window
from dashcam.measure.intervals import kernel_unions
from dashcam.reports.comparability import MIN_SHARED_PCT, Comparability
from dashcam.reports.comparability import check as check_comparable
from dashcam.text import markdown
from dashcam.text.format import bytes_signed, ms_fixed, pct_change, trim
from dashcam.text.shorten import kernel_label

REGRESSION_EXIT_CODE = 13
DEFAULT_THRESHOLD_PCT = 5.0

RULE = ("not_comparable if one side has no kernels, the GPU counts differ, the kernels both profiles run hold "
        "less than min_shared_pct % of either side's kernel time, or the steps are defined differently; else the "
        "primary metric is the median step time when both profiles have steps, else the window length: "
        "regressed if it grew by more than threshold_pct %, improved if it shrank by more than threshold_pct %; "
        "within that, the tie-break is GPU kernel time (sum over GPUs of kernel-busy, per step when steps are "
        "used) with the same threshold; neutral otherwise.")

Verdict = Literal["improved", "regressed", "neutral", "not_comparable"]
KernelUnit = Literal["step", "second", "capture"]


class Side(BaseModel):
    profile: str
    nsys_version: str | None = None
    gpu_count: int = Field(description="GPUs with at least one kernel, memcpy or memset.")
    device_ids: list[int]
    window_ns: int = Field(description="Length of the window (first to last GPU activity); 0 without activity.")
    kernel_count: int
    kernel_time_ns: int = Field(description="Summed kernel durations in the window, all GPUs (top_kernels).")
    kernel_busy_ns: int = Field(description="Sum over GPUs of kernel busy (union of that GPU's kernels).")
    steps_kernel_busy_ns: int = Field(0, description="kernel_busy_ns inside the steps (first step's start to last "
                                                     "step's end): what the tie-break divides by step_count.")
    step_method: str = Field(description="How iterations found the steps: nvtx, kernel_pattern or none.")
    step_label: str | None = Field(None, description="The NVTX label or the kernel marking the steps.")
    step_count: int = 0
    median_step_ns: float | None = None


class TimeDelta(BaseModel):
    metric: str = Field(description="median_step | window (step_time); kernel_busy_per_step | kernel_busy "
                                    "(kernel_time).")
    before_ns: float
    after_ns: float
    delta_ns: float = Field(description="after_ns - before_ns.")
    delta_pct: float | None = Field(description="delta_ns as % of before_ns; null when before_ns is 0.")


class DeviceDelta(BaseModel):
    device_id: int = Field(description="Device id in the before profile.")
    after_device_id: int = Field(description="The matched device in the after profile.")
    busy_pct_before: float
    busy_pct_after: float
    busy_pct_delta: float = Field(description="Change in percentage points of the window.")
    kernel_busy_pct_before: float
    kernel_busy_pct_after: float
    kernel_busy_pct_delta: float = Field(description="Change in percentage points of the window.")
    kernel_busy_ns_before: int
    kernel_busy_ns_after: int


class KernelDelta(BaseModel):
    name: str = Field(description="Short name (display only).")
    full_name: str = Field(description="Demangled name: kernels are matched on it.")
    count_before: int
    count_after: int
    total_ns_before: int = Field(description="Summed durations in the window, all GPUs; 0 when absent.")
    total_ns_after: int
    before_ns: float = Field(description="total_ns_before per unit of work (the diff's kernel_unit: per step, "
                                         "else per second of the window).")
    after_ns: float = Field(description="total_ns_after per unit of work.")
    delta_ns: float = Field(description="after_ns - before_ns: the change per unit of work.")
    delta_pct: float | None = Field(description="delta_ns as % of before_ns; null when that is 0.")
    change: Literal["more", "less", "unchanged", "new", "gone"] = Field(
        description="more / less kernel time per unit of work (by more than the threshold), unchanged, or a "
                    "kernel on one side only.")


class MemcpyDelta(BaseModel):
    kind: str
    count_before: int
    count_after: int
    bytes_before: int = Field(description="Bytes copied in the window (total).")
    bytes_after: int
    bytes_per_unit_before: float = Field(description="bytes_before per unit of work (kernel_unit).")
    bytes_per_unit_after: float
    bytes_delta: float = Field(description="bytes_per_unit_after - bytes_per_unit_before.")
    total_ns_before: int = Field(description="memcpy by_kind total_ns: summed copy durations in the window.")
    total_ns_after: int
    before_ns: float = Field(description="total_ns_before per unit of work.")
    after_ns: float
    delta_ns: float = Field(description="after_ns - before_ns: the change per unit of work.")
    delta_pct: float | None


class SyncDelta(BaseModel):
    name: str = Field(description="Synchronize API name (sync tool).")
    count_before: int
    count_after: int
    total_ns_before: int = Field(description="sync calls total_ns: host time blocked in this API.")
    total_ns_after: int
    before_ns: float = Field(description="total_ns_before per unit of work (kernel_unit).")
    after_ns: float
    delta_ns: float = Field(description="after_ns - before_ns: the change per unit of work.")
    delta_pct: float | None


class Diff(BaseModel):
    before: Side
    after: Side
    verdict: Verdict
    reason: str = Field(description="One sentence: which metric decided and by how much, or why the pair "
                                    "cannot be compared.")
    threshold_pct: float
    rule: str = RULE
    comparability: Comparability
    kernel_unit: KernelUnit = Field(description="What kernel deltas are per: step (both profiles have steps), "
                                                "second (of the window), or capture (totals: a side without "
                                                "GPU activity).")
    devices: list[DeviceDelta]
    step_time: TimeDelta | None = Field(description="Primary metric: median step time, else window length.")
    kernel_time: TimeDelta | None = Field(description="Tie-break metric: GPU kernel busy (per step with steps).")
    kernels: list[KernelDelta] = Field(description="Kernels on both sides, largest |delta_ns| (per unit) first.")
    new_kernels: list[KernelDelta] = Field(description="Kernels only in after, most time first.")
    gone_kernels: list[KernelDelta] = Field(description="Kernels only in before, most time first.")
    memcpy: list[MemcpyDelta]
    sync: list[SyncDelta]
    notes: list[str] = Field(default_factory=list)


# -- measuring one side ---------------------------------------------------------------------------


@dataclass
class Totals:
    """Kernel, copy and sync totals over one span of a profile (as in Measured)."""

    kernels: dict[str, tuple[str, int, int]]
    memcpy: dict[str, tuple[int, int, int]]
    sync: dict[str, tuple[int, int]]


@dataclass
class Measured:
    """What the diff needs from one profile."""

    side: Side
    devices: dict[int, object] = field(default_factory=dict)  # device id -> overview DeviceOverview row
    kernels: dict[str, tuple[str, int, int]] = field(default_factory=dict)  # full name -> (short, count, total_ns)
    memcpy: dict[str, tuple[int, int, int]] = field(default_factory=dict)  # kind -> (count, bytes, total_ns)
    sync: dict[str, tuple[int, int]] = field(default_factory=dict)  # api name -> (count, total_ns)
    step_kind: str | None = None  # "nvtx:<label>" / "kernel_pattern:<kernel>"
    in_steps: Totals | None = None  # kernels, memcpy and sync inside the steps (_steps_window): per-step totals

    def totals(self, unit: str) -> Totals | Measured:
        """What the deltas per ``unit`` divide: the totals inside the steps per step, else the whole window's."""
        return self.in_steps if unit == "step" and self.in_steps is not None else self


def _kernel_totals(profile, w) -> dict[str, tuple[str, int, int]]:
    """Per full kernel name: (short name, count, summed durations clipped to the window), as top_kernels."""
    rows = profile.rows(
        f"""SELECT name, min(short_name), count(*), sum(least("end", {w.end_ns}) - greatest(start, {w.start_ns}))
            FROM kernels WHERE "end" > {w.start_ns} AND start < {w.end_ns} AND device_id IS NOT NULL
            GROUP BY name""")
    return {n: (s, int(c), int(t)) for n, s, c, t in rows}


def measure(profile, runs: ToolRuns | None = None) -> Measured:
    """Measure one profile with the tools (through ``runs``, the profile's tool-run memo, when given)."""
    path = str(profile.path)
    try:
        w = profile.window()
    except NoGpuActivity:
        side = Side(profile=path, nsys_version=profile.nsys_version, gpu_count=0, device_ids=[], window_ns=0,
                    kernel_count=0, kernel_time_ns=0, kernel_busy_ns=0, step_method="none")
        return Measured(side=side)
    runs = runs or ToolRuns(profile)
    ov, it, mc, sy = (runs.get(tool) for tool in ("overview", "iterations", "memcpy", "sync"))
    kernels = _kernel_totals(profile, w)
    label = it.label if it.method == "nvtx" else it.kernel_name
    span = _steps_window(w, it)
    in_steps = None
    if span is not None:  # per-step totals: what the steps hold, not the head before or the tail after them
        smc, ssy = (run_tool(profile, tool, {"start_ms": span.start_ms, "end_ms": span.end_ms})[0]
                    for tool in ("memcpy", "sync"))
        in_steps = Totals(kernels=_kernel_totals(profile, span), memcpy=_memcpy_totals(smc), sync=_sync_totals(ssy))
    unions = kernel_unions(profile, span or w, [d.device_id for d in ov.devices])
    side = Side(profile=path, nsys_version=profile.nsys_version, gpu_count=ov.gpu_count,
                device_ids=[d.device_id for d in ov.devices], window_ns=ov.window_ns,
                kernel_count=sum(c for _, c, _ in kernels.values()),
                kernel_time_ns=sum(t for _, _, t in kernels.values()),
                kernel_busy_ns=sum(d.kernel_busy_ns for d in ov.devices),
                steps_kernel_busy_ns=sum(u.total for u in unions.values()) if span else 0,
                step_method=it.method, step_label=label, step_count=it.step_count, median_step_ns=it.median_ns)
    return Measured(
        side=side, devices={d.device_id: d for d in ov.devices}, kernels=kernels, memcpy=_memcpy_totals(mc),
        sync=_sync_totals(sy), step_kind=None if it.method == "none" else f"{it.method}:{label}", in_steps=in_steps)


def _memcpy_totals(mc) -> dict[str, tuple[int, int, int]]:
    return {k.kind: (k.count, k.bytes, k.total_ns) for k in mc.by_kind if k.count}


def _sync_totals(sy) -> dict[str, tuple[int, int]]:
    return {c.name: (c.count, c.total_ns) for c in sy.calls}


def _steps_window(w: Window, it) -> Window | None:
    """The time the steps cover (the first step's start to the last step's end, inside the window), where the
    per-step totals are measured: k launches of a marker kernel make k - 1 steps, and warm-up before the first
    step or work after the last is no step's; dividing the whole capture's totals by the step count would
    make two captures of one program differ by their length. None without steps."""
    if not it.step_count or it.steps_start_ns is None:
        return None
    a, b = max(w.start_ns, it.steps_start_ns), min(w.end_ns, it.steps_end_ns)
    return Window(a, b, w.profile_start_ns) if b > a else None


# -- comparing ------------------------------------------------------------------------------------


def _pct_change(before: float, after: float) -> float | None:
    return round(100.0 * (after - before) / before, 3) if before else None


def _time_delta(metric: str, before: float, after: float) -> TimeDelta:
    return TimeDelta(metric=metric, before_ns=before, after_ns=after, delta_ns=after - before,
                     delta_pct=_pct_change(before, after))


def _match_devices(b: Measured, a: Measured, notes: list[str]) -> list[DeviceDelta]:
    ids_b, ids_a = b.side.device_ids, a.side.device_ids
    if len(ids_b) != len(ids_a):
        return []
    if ids_b != ids_a:
        pairs = ", ".join(f"{x}->{y}" for x, y in zip(ids_b, ids_a))
        notes.append(f"Device ids differ (before {ids_b}, after {ids_a}): matched by rank order ({pairs}).")
    out = []
    for x, y in zip(ids_b, ids_a):
        db, da = b.devices[x], a.devices[y]
        out.append(DeviceDelta(
            device_id=x, after_device_id=y,
            busy_pct_before=db.busy_pct, busy_pct_after=da.busy_pct,
            busy_pct_delta=round(da.busy_pct - db.busy_pct, 3),
            kernel_busy_pct_before=db.kernel_busy_pct, kernel_busy_pct_after=da.kernel_busy_pct,
            kernel_busy_pct_delta=round(da.kernel_busy_pct - db.kernel_busy_pct, 3),
            kernel_busy_ns_before=db.kernel_busy_ns, kernel_busy_ns_after=da.kernel_busy_ns))
    return out


def kernel_unit(b: Side, a: Side) -> tuple[KernelUnit, float, float]:
    """What kernel deltas are per, and each side's count of that unit: steps when both profiles have them,
    else seconds of the window, else the whole capture (a side without GPU activity)."""
    if b.step_count and a.step_count:
        return "step", b.step_count, a.step_count
    if b.window_ns and a.window_ns:
        return "second", b.window_ns / 1e9, a.window_ns / 1e9
    return "capture", 1, 1


def _change(pct: float | None, threshold_pct: float) -> str:
    if pct is None or pct > threshold_pct:
        return "more"
    return "less" if pct < -threshold_pct else "unchanged"


def _kernel_deltas(b: Measured, a: Measured, limit: int, threshold_pct: float,
                   notes: list[str]) -> tuple[list, list, list]:
    unit = kernel_unit(b.side, a.side)[0]
    kb, ka = b.kernels, a.kernels
    ub, ua = b.totals(unit).kernels, a.totals(unit).kernels

    def row(name: str, change: str | None = None) -> KernelDelta:
        sb, nb, tb = kb.get(name, (None, 0, 0))
        sa, na, ta = ka.get(name, (None, 0, 0))
        pb, pa = _per_unit(b, a, ub.get(name, (None, 0, 0))[2], ua.get(name, (None, 0, 0))[2])
        pct = _pct_change(pb, pa)
        return KernelDelta(name=sa or sb or name, full_name=name, count_before=nb, count_after=na,
                           total_ns_before=tb, total_ns_after=ta, before_ns=pb, after_ns=pa,
                           delta_ns=round(pa - pb, 3), delta_pct=pct, change=change or _change(pct, threshold_pct))

    both = sorted((row(n) for n in kb.keys() & ka.keys()), key=lambda r: (-abs(r.delta_ns), r.full_name))
    new = sorted((row(n, "new") for n in ka.keys() - kb.keys()),
                 key=lambda r: (-r.total_ns_after, r.full_name))
    gone = sorted((row(n, "gone") for n in kb.keys() - ka.keys()),
                  key=lambda r: (-r.total_ns_before, r.full_name))
    for what, rows in (("kernels (changed)", both), ("new_kernels", new), ("gone_kernels", gone)):
        if len(rows) > limit:
            notes.append(f"{what}: showing {limit} of {len(rows)} kernel names (raise --limit for more).")
    return both[:limit], new[:limit], gone[:limit]


def _per_unit(b: Measured, a: Measured, tb: float, ta: float) -> tuple[float, float]:
    """``tb`` and ``ta`` (totals of the before and after profile) per unit of work (``kernel_unit``)."""
    _, units_b, units_a = kernel_unit(b.side, a.side)
    return round(tb / units_b, 3), round(ta / units_a, 3)


def _memcpy_deltas(b: Measured, a: Measured) -> list[MemcpyDelta]:
    out = []
    unit = kernel_unit(b.side, a.side)[0]
    mb, ma = b.totals(unit).memcpy, a.totals(unit).memcpy
    for kind in sorted(b.memcpy.keys() | a.memcpy.keys()):
        cb, bb, tb = b.memcpy.get(kind, (0, 0, 0))
        ca, ba, ta = a.memcpy.get(kind, (0, 0, 0))
        (_, ibb, itb), (_, iba, ita) = mb.get(kind, (0, 0, 0)), ma.get(kind, (0, 0, 0))
        pb, pa = _per_unit(b, a, itb, ita)
        ub, ua = _per_unit(b, a, ibb, iba)
        out.append(MemcpyDelta(kind=kind, count_before=cb, count_after=ca, bytes_before=bb, bytes_after=ba,
                               bytes_per_unit_before=ub, bytes_per_unit_after=ua, bytes_delta=round(ua - ub, 3),
                               total_ns_before=tb, total_ns_after=ta, before_ns=pb, after_ns=pa,
                               delta_ns=round(pa - pb, 3), delta_pct=_pct_change(pb, pa)))
    return sorted(out, key=lambda r: (-abs(r.delta_ns), r.kind))


def _sync_deltas(b: Measured, a: Measured) -> list[SyncDelta]:
    out = []
    unit = kernel_unit(b.side, a.side)[0]
    sb, sa = b.totals(unit).sync, a.totals(unit).sync
    for name in b.sync.keys() | a.sync.keys():
        cb, tb = b.sync.get(name, (0, 0))
        ca, ta = a.sync.get(name, (0, 0))
        pb, pa = _per_unit(b, a, sb.get(name, (0, 0))[1], sa.get(name, (0, 0))[1])
        out.append(SyncDelta(name=name, count_before=cb, count_after=ca, total_ns_before=tb, total_ns_after=ta,
                             before_ns=pb, after_ns=pa, delta_ns=round(pa - pb, 3), delta_pct=_pct_change(pb, pa)))
    return sorted(out, key=lambda r: (-abs(r.delta_ns), r.name))


def _metrics(b: Side, a: Side, notes: list[str]) -> tuple[TimeDelta | None, TimeDelta | None]:
    """(primary, tie-break) metrics as the rule defines them."""
    if b.step_count and a.step_count:
        step = _time_delta("median_step", b.median_step_ns, a.median_step_ns)
        kern = _time_delta("kernel_busy_per_step", b.steps_kernel_busy_ns / b.step_count,
                           a.steps_kernel_busy_ns / a.step_count)
        return step, kern
    if b.window_ns and a.window_ns:
        missing = " and ".join(s for s, x in (("before", b), ("after", a)) if not x.step_count)
        notes.append(f"No steps found in {missing}: the primary metric is the window length (first to last GPU "
                     "activity), meaningful only when both profiles capture the same work.")
        return _time_delta("window", b.window_ns, a.window_ns), _time_delta("kernel_busy", b.kernel_busy_ns,
                                                                           a.kernel_busy_ns)
    return None, None


_METRIC_TEXT = {"median_step": "median step time", "window": "window length",
                "kernel_busy_per_step": "kernel-busy per step (all GPUs)", "kernel_busy": "kernel-busy (all GPUs)"}


def _decide(c: Comparability, step: TimeDelta | None, kern: TimeDelta | None, t: float) -> tuple[str, str]:
    if not c.comparable:
        return "not_comparable", c.reason
    p = 100.0 * step.delta_ns / step.before_ns if step.before_ns else 0.0
    said = f"{_METRIC_TEXT[step.metric]} {ms_fixed(step.before_ns)} → {ms_fixed(step.after_ns)} ({pct_change(p)})"
    if p > t:
        return "regressed", f"{said}: grew by more than the {t:g}% threshold."
    if p < -t:
        return "improved", f"{said}: shrank by more than the {t:g}% threshold."
    q = 100.0 * kern.delta_ns / kern.before_ns if kern.before_ns else 0.0
    tie = f"{_METRIC_TEXT[kern.metric]} {ms_fixed(kern.before_ns)} → {ms_fixed(kern.after_ns)} ({pct_change(q)})"
    if q > t:
        return "regressed", f"{said}, within the {t:g}% threshold; tie-break {tie}: grew by more than it."
    if q < -t:
        return "improved", f"{said}, within the {t:g}% threshold; tie-break {tie}: shrank by more than it."
    return "neutral", f"{said} and {tie}: both within the {t:g}% threshold."


def compare(before, after, threshold_pct: float = DEFAULT_THRESHOLD_PCT, limit: int = 10,
            min_shared_pct: float = MIN_SHARED_PCT) -> Diff:
    """Diff two opened profiles (``dashcam.profile.profile.Profile``)."""
    return compare_measured(measure(before), measure(after), threshold_pct, limit, min_shared_pct)


def _gpu_models(m: Measured) -> list[str | None]:
    return [getattr(m.devices[i], "gpu_name", None) for i in m.side.device_ids]


def compare_measured(b: Measured, a: Measured, threshold_pct: float = DEFAULT_THRESHOLD_PCT,
                     limit: int = 10, min_shared_pct: float = MIN_SHARED_PCT) -> Diff:
    notes: list[str] = []
    for s, m in (("before", b), ("after", a)):
        if not m.side.window_ns:
            notes.append(f"The {s} profile has no GPU activity (no kernels, memcpys or memsets).")
    devices = _match_devices(b, a, notes)
    if b.side.gpu_count != a.side.gpu_count:
        notes.append(f"GPU count differs ({b.side.device_ids} before, {a.side.device_ids} after): no per-GPU "
                     "comparison.")
    models_b, models_a = _gpu_models(b), _gpu_models(a)
    if devices and models_b != models_a and None not in models_b + models_a:
        notes.append(f"GPU models differ ({', '.join(models_b)} before, {', '.join(models_a)} after): the diff "
                     "compares the hardware as well as the program.")
    step, kern = _metrics(b.side, a.side, notes)
    c = check_comparable(b.side, a.side, {n: t for n, (_, _, t) in b.kernels.items()},
                         {n: t for n, (_, _, t) in a.kernels.items()}, b.step_kind, a.step_kind, min_shared_pct)
    verdict, reason = _decide(c, step, kern, threshold_pct)
    unit = kernel_unit(b.side, a.side)[0]
    kernels, new, gone = _kernel_deltas(b, a, limit, threshold_pct, notes)
    return Diff(before=b.side, after=a.side, verdict=verdict, reason=reason, threshold_pct=threshold_pct,
                comparability=c, kernel_unit=unit, devices=devices, step_time=step, kernel_time=kern,
                kernels=kernels, new_kernels=new, gone_kernels=gone, memcpy=_memcpy_deltas(b, a),
                sync=_sync_deltas(b, a), notes=notes)


# -- text and markdown ----------------------------------------------------------------------------


def _delta(ns: float, pct: float | None) -> str:
    return f"{ms_fixed(ns, signed=True)} ({pct_change(pct)})"


def _kernel_label(r: KernelDelta, rows: list[KernelDelta], width: int = 80) -> str:
    """The short name; when other rows share it, followed by the part of the full name that tells them apart."""
    return kernel_label(r.name, r.full_name, [(x.name, x.full_name) for x in rows], width)


PER_UNIT = {"step": " per step", "second": " per second of the window", "capture": ""}
KERNEL_TABLES = ("Kernel time", "New kernels", "Gone kernels", "Host sync")  # first column: names from the profile


def _sections(d: Diff) -> list[tuple[str, list[str], list[list[str]]]]:
    """(title, header, rows) of every table, shared by the text and markdown renderers. Names are raw."""
    out = []
    summary = []
    if d.step_time is not None:
        for m in (d.step_time, d.kernel_time):
            summary.append([_METRIC_TEXT[m.metric], ms_fixed(m.before_ns), ms_fixed(m.after_ns),
                            _delta(m.delta_ns, m.delta_pct)])
    gpus = (d.before.gpu_count, d.after.gpu_count)
    summary.append(["GPUs", str(gpus[0]), str(gpus[1]), f"{gpus[1] - gpus[0]:+d}"])
    summary.append(["steps", str(d.before.step_count), str(d.after.step_count),
                    f"{d.after.step_count - d.before.step_count:+d}"])
    for x in d.devices:
        gpu = f"GPU {x.device_id}" if x.device_id == x.after_device_id else f"GPU {x.device_id}->{x.after_device_id}"
        summary.append([f"{gpu} busy", f"{x.busy_pct_before:.1f}%", f"{x.busy_pct_after:.1f}%",
                        pct_change(x.busy_pct_delta, " pts")])
        summary.append([f"{gpu} kernel-busy", f"{x.kernel_busy_pct_before:.1f}%", f"{x.kernel_busy_pct_after:.1f}%",
                        pct_change(x.kernel_busy_pct_delta, " pts")])
    out.append(("", ["metric", "before", "after", "delta"], summary))
    per = PER_UNIT[d.kernel_unit]
    if d.kernels:
        out.append((f"Kernel time{per} (all GPUs)", ["kernel", "before", "after", "delta", "change"],
                    [[_kernel_label(r, d.kernels), ms_fixed(r.before_ns), ms_fixed(r.after_ns),
                      _delta(r.delta_ns, r.delta_pct), r.change] for r in d.kernels]))
    if d.new_kernels:
        out.append(("New kernels", ["kernel", "count", "time", f"time{per}"],
                    [[_kernel_label(r, d.new_kernels), str(r.count_after), ms_fixed(r.total_ns_after),
                      ms_fixed(r.after_ns)] for r in d.new_kernels]))
    if d.gone_kernels:
        out.append(("Gone kernels", ["kernel", "count", "time", f"time{per}"],
                    [[_kernel_label(r, d.gone_kernels), str(r.count_before), ms_fixed(r.total_ns_before),
                      ms_fixed(r.before_ns)] for r in d.gone_kernels]))
    if d.memcpy:
        out.append((f"Copies{per}", ["kind", "before", "after", "delta", "bytes before", "bytes after",
                                     "bytes delta"],
                    [[r.kind, ms_fixed(r.before_ns), ms_fixed(r.after_ns), _delta(r.delta_ns, r.delta_pct),
                      bytes_signed(round(r.bytes_per_unit_before)), bytes_signed(round(r.bytes_per_unit_after)),
                      bytes_signed(round(r.bytes_delta), True)] for r in d.memcpy]))
    if d.sync:
        _, units_b, units_a = kernel_unit(d.before, d.after)
        out.append((f"Host sync{per}", ["API", "calls before", "calls after", "before", "after", "delta"],
                    [[r.name, trim(r.count_before / units_b, 2), trim(r.count_after / units_a, 2),
                      ms_fixed(r.before_ns), ms_fixed(r.after_ns), _delta(r.delta_ns, r.delta_pct)] for r in d.sync]))
    return out


def to_text(d: Diff) -> str:
    """Plain, column-aligned text for a terminal."""
    lines = [f"before: {d.before.profile}", f"after:  {d.after.profile}",
             f"verdict: {d.verdict} - {d.reason}", ""]
    for title, header, rows in _sections(d):
        if title:
            lines.append(title)
        widths = [max(len(x) for x in col) for col in zip(header, *rows)]
        for r in [header, *rows]:
            cells = [c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))]
            lines.append("  ".join(cells).rstrip())
        lines.append("")
    lines += [f"note: {n}" for n in d.notes]
    lines.append(f"rule (threshold {d.threshold_pct:g}%): {d.rule}")
    return "\n".join(lines).rstrip() + "\n"


def to_markdown(d: Diff) -> str:
    """A compact GitHub-flavoured markdown report (tables), for a PR comment."""
    lines = [f"**dashcam diff: {d.verdict}** — {markdown.cell(d.reason, False)}", ""]
    for title, header, rows in _sections(d):
        code_col = title.startswith(KERNEL_TABLES)
        if title:
            lines += [f"**{title}**", ""]
        lines.append("| " + " | ".join(header) + " |")
        lines.append("|" + "|".join(["---"] + ["---:"] * (len(header) - 1)) + "|")
        for r in rows:
            cells = [markdown.cell(c, code_col and i == 0) for i, c in enumerate(r)]
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
    for n in d.notes:
        lines.append(f"- {markdown.cell(n, False)}")
    if d.notes:
        lines.append("")
    lines.append(f"<sub>threshold {d.threshold_pct:g}%. Rule: {d.rule}</sub>")
    return "\n".join(lines) + "\n"


def to_csv(d: Diff) -> str:
    """The tables as CSV (text/formats.py: a ``# title`` line before each, a blank line between them)."""
    from dashcam.text.formats import csv_table

    return "\n\n".join(csv_table(title, header, rows) for title, header, rows in _sections(d)) + "\n"
