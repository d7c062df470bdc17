"""cpu: what the host threads were doing — in OS runtime calls, descheduled, or computing, and in which code.

Per thread (its name from ThreadNames), over the time examined:

- the *window* (default): the launching threads (those whose calls launched the GPU work in the window, of
  ``gpu`` when given; every thread with CUDA calls when none launched kernels), or with ``all_threads`` every
  thread with CPU data in the window. A capture without GPU activity has no window: the span of its host rows
  (profile/host_window.py) is examined instead, for every thread;
- ``gaps``: only the CPU-side part of the GPU's gaps (gap_causes.py), of the gaps holding the most
  ``cpu_work`` (at most 2000 per GPU, gap_context.MAX_GAPS), each on the thread that launched the kernel
  ending it: the time the GPU waited on that thread;
- ``gap_at_ms``: only the CPU-side part of the one gap of ``gpu`` holding that time.

The time outside the thread's CUDA calls is split into ``os_wait``, ``os_call``, ``descheduled``,
``running`` and ``unknown`` (definitions.md, "What a host thread was doing"); they add up to ``examined_ns -
cuda_ns``. OS runtime calls are listed by name with their time (each instant to the innermost call) and
whether they wait. CPU samples taken in host code (outside CUDA and OS runtime calls) give the hottest
functions and modules, self (innermost frame) and total (anywhere on the stack), as sample counts and as
estimated time (samples x the sampling period): estimates, always said with their sample count.

Which of these the capture holds is in ``recorded``; what it lacks is said in the notes, with the
``nsys profile`` options that record it (capture coverage).
"""
from __future__ import annotations

from pydantic import BaseModel, Field

from dashcam.errors import BadParameter, NoGpuActivity
from dashcam.measure.definitions import NS_PER_MS, Window
from dashcam.measure.labels import is_os_wait
from dashcam.profile.coverage import coverage, lacking
from dashcam.profile.cpu_source import source
from dashcam.profile.cpu_states import STATES, Split
from dashcam.profile.diagnostics import notes_for
from dashcam.profile.gap_causes import NONE, split_points
from dashcam.profile.gap_context import cpu_work_parts
from dashcam.profile.gap_cut import cut_gaps
from dashcam.profile.host_activity import os_callers, sampled, split_parts, top_cause
from dashcam.profile.host_models import CpuCause, SampledFunction
from dashcam.profile.host_window import host_window
from dashcam.profile.views import split_global_tid

from .base import Tool, ToolParams, ToolResult, WindowInfo

KINDS = ("os_runtime", "context_switches", "cpu_sampling", "cuda_backtraces")
WHAT = "what the host threads were doing"


class Params(ToolParams):
    gaps: bool = Field(False, description="Only the time the GPU waited on its launching threads: the CPU-side "
                                          "part of the gaps of `gpu` (every GPU when omitted), on the thread that "
                                          "launched the kernel ending each gap.")
    gap_at_ms: float | None = Field(None, ge=0, description="Only the one gap of `gpu` (default: the lowest GPU) "
                                                            "holding this time, ms from the start of GPU activity.")
    tid: int | None = Field(None, description="Only this thread (tid).")
    all_threads: bool = Field(False, description="Every thread with CPU data in the window, not only the "
                                                 "launching threads.")


class OsCall(BaseModel):
    name: str = Field(description="The OS runtime function (profile text).")
    wait: bool = Field(description="A call a thread blocks in, waiting (measure/labels.py OS_WAIT_CALLS).")
    calls: int = Field(description="Calls of it overlapping the time examined.")
    ns: int = Field(description="Time inside it outside CUDA calls, each instant to the innermost call open.")
    caller: str | None = Field(None, description="The function that made these calls (the most time among those with "
                                                 "a backtrace); null without OS runtime backtraces. Profile text.")


class SampledModule(BaseModel):
    module: str
    self_samples: int
    total_samples: int


class ThreadCpu(BaseModel):
    pid: int
    tid: int
    thread_name: str | None = Field(description="From ThreadNames (profile text).")
    examined_ns: int = Field(description="The time of this thread examined (the window, or its gap parts).")
    cuda_ns: int = Field(description="Of it, inside CUDA API calls (union).")
    states: dict[str, int] = Field(description="The rest by state: os_wait, os_call, descheduled, running, unknown; "
                                               "sums to examined_ns - cuda_ns.")
    os_calls: list[OsCall] = Field(description="OS runtime calls, most time first (at most `limit`).")
    samples: int = Field(description="CPU samples of the thread in the time examined.")
    host_samples: int = Field(description="Of them, in host code (outside CUDA and OS runtime calls).")
    cuda_samples: int = Field(description="Of them, inside CUDA calls.")
    functions: list[SampledFunction] = Field(description="Hottest functions of the host-code samples, most self "
                                                         "samples first (at most `limit`).")
    modules: list[SampledModule] = Field(description="Their modules (libraries, executables), the same way.")
    top_cause: CpuCause | None = Field(description="The named piece with the most time outside CUDA calls.")


class GapRef(BaseModel):
    device_id: int
    start_ms: float
    duration_ns: int
    cpu_side_ns: int = Field(description="Its CPU-side part (start to the launch call's start), the time examined.")


class Result(ToolResult):
    scope: str = Field(description="window, gaps or gap.")
    devices: list[int] = Field(description="The GPUs whose launching threads or gaps were examined.")
    gap: GapRef | None = Field(None, description="With gap_at_ms: the gap examined.")
    threads: list[ThreadCpu] = Field(description="Most time outside CUDA calls first (at most `limit`).")
    sampling_period_ns: float | None = Field(description="The median interval between consecutive samples of the "
                                                         "most sampled thread; null without CPU samples.")
    period_intervals: int | None = Field(description="How many intervals that median is taken over.")
    recorded: dict[str, str] = Field(description="Capture coverage state of os_runtime, context_switches, "
                                                 "cpu_sampling and cuda_backtraces.")


def _cpu_window(profile, params: Params) -> tuple[Window, str | None]:
    """The GPU window, or for a capture without GPU activity the span of its host rows (host_window.py)."""
    return host_window(profile, params.start_ms, params.end_ms)


def _launching_threads(profile, w: Window, devices: list[int]) -> list[int]:
    rows = profile.rows(f"""SELECT api_global_tid, count(*) FROM launches
        WHERE device_id IN ({",".join(map(str, devices))})
        AND "end" > {w.start_ns} AND start < {w.end_ns} AND api_global_tid IS NOT NULL GROUP BY 1 ORDER BY 2 DESC""")
    if not rows:
        rows = profile.rows(f"""SELECT global_tid, count(*) FROM api_calls WHERE "end" > {w.start_ns}
            AND start < {w.end_ns} AND global_tid IS NOT NULL GROUP BY 1 ORDER BY 2 DESC""")
    return [int(r[0]) for r in rows]


def _gap_parts(profile, w: Window, devices: list[int]) -> list[tuple[int, int, int]]:
    """The CPU-side parts (a, pre_end, thread) of the gaps with the most cpu_work (gap_context.cpu_work_parts;
    the gaps the window cuts on their clipped bounds, as gpu_gaps computes them)."""
    cut_rows = cut_gaps(profile, w, devices)
    return [p for d in devices for p in cpu_work_parts(profile, w, d, cut_rows)[0]]


def _one_gap(profile, w: Window, device: int, at_ms: float) -> tuple[GapRef, tuple[int, int, int] | None]:
    t = w.profile_start_ns + round(at_ms * NS_PER_MS)
    row = profile.one(f"""SELECT start, "end", key, api_start, api_end FROM gap_table
        WHERE device_id = {int(device)} AND start <= {t} AND "end" > {t}""")
    if row is None:
        raise BadParameter(f"no gap of GPU {device} holds {at_ms} ms: its kernels run then (or it is outside the "
                           "profile)")
    a, b, key, api_start, api_end = (int(x) for x in row)
    import numpy as np

    known = np.array([key >= 0 and api_end != NONE])
    _, pre_end = split_points(np.array([a]), np.array([b]), known, np.array([api_start]), np.array([api_end]))
    pe = int(pre_end[0])
    ref = GapRef(device_id=device, start_ms=round(w.rel_ms(a), 6), duration_ns=b - a, cpu_side_ns=pe - a)
    return ref, ((a, pe, key) if known[0] and pe > a else None)


def run(profile, params: Params) -> Result:
    w, window_note = _cpu_window(profile, params)
    notes = [window_note] if window_note else []
    notes += notes_for(profile, "cpu")  # nsys' own word that samples or backtraces were lost
    devices = profile.check_gpu(params.gpu) if profile.devices else []
    cov = coverage(profile)
    recorded = {r.kind: r.state for r in cov.kinds if r.kind in KINDS}
    gap = None
    if params.gap_at_ms is not None:
        if not devices:
            raise NoGpuActivity(f"{profile.path}: no GPU activity, so no gaps")
        scope = "gap"
        gap, part = _one_gap(profile, w, devices[0], params.gap_at_ms)
        devices = devices[:1]
        parts = [part] if part else []
        if not part:
            notes.append("The gap has no CPU-side part: no launch call precedes its closing kernel in it (or no kernel "
                         "closes it).")
    elif params.gaps:
        if not devices:
            raise NoGpuActivity(f"{profile.path}: no GPU activity, so no gaps")
        scope = "gaps"
        parts = _gap_parts(profile, w, devices)
    else:
        scope = "window"
        src = source(profile)
        threads = _launching_threads(profile, w, devices) if devices else []
        if params.all_threads or not devices:
            busy = src.sample_threads(w.start_ns, w.end_ns)
            extra = sorted(src.event_threads(w.start_ns, w.end_ns) | set(busy), key=lambda g: (-busy.get(g, 0), g))
            threads += [g for g in extra if g not in threads]
        parts = [(w.start_ns, w.end_ns, g) for g in threads]
    if params.tid is not None:
        parts = [p for p in parts if (p[2] & 0xFFFFFF) == params.tid]
        if not parts:
            notes.append(f"Thread {params.tid} has no time in this scope.")
    splits = split_parts(profile, parts)
    per: dict[int, Split] = {}
    for (_, _, g), sp in zip(parts, splits):
        per.setdefault(int(g), Split()).add(sp)
    period = source(profile).sampling_period()
    names = {(int(p), int(t)): n for p, t, n in profile.rows("SELECT pid, tid, name FROM threads")}
    callers = os_callers(profile, parts)
    rows = [_thread(profile, g, sp, names, period, params.limit, callers.get(g, {})) for g, sp in per.items()]
    rows.sort(key=lambda r: (-(r.examined_ns - r.cuda_ns), r.pid, r.tid))
    python = _python(profile)
    missing = lacking(cov, ["os_runtime", "context_switches", "cpu_sampling"], what=WHAT, python=python)
    if missing:
        notes.append(missing)
    else:
        notes += [lacking(cov, [kind], what=why, python=python) for kind, why in (
            ("os_runtime", "which OS calls the threads waited in"),
            ("context_switches", "when the threads were descheduled"),
            ("cpu_sampling", "which functions the threads ran")) if recorded.get(kind) != "recorded"]
    return Result(tool="cpu", window=WindowInfo.of(w), notes=notes, scope=scope, devices=devices, gap=gap,
                  threads=rows[:params.limit], sampling_period_ns=round(period[0], 1) if period else None,
                  period_intervals=period[1] if period else None, recorded=recorded)


def _python(profile) -> bool:
    """Whether the workload tool finds a Python program (for the Python capture options)."""
    from .workload import FAMILIES, _facts, classify

    family = classify(_facts(profile))["family"]
    return bool(family) and FAMILIES[family][1] == "python"


def _thread(profile, g: int, sp: Split, names: dict, period, limit: int, callers: dict[str, str]) -> ThreadCpu:
    pid, tid = split_global_tid(g)
    fns, mods = sampled(profile, sp.host_samples, limit=limit)
    per = period[0] if period else None
    est = (lambda n: round(n * per) if per else None)
    calls = sorted(sp.os_calls.items(), key=lambda kv: (-kv[1], kv[0]))[:limit]
    cause = top_cause(profile, sp)
    return ThreadCpu(
        pid=pid, tid=tid, thread_name=names.get((pid, tid)), examined_ns=sp.examined_ns, cuda_ns=sp.cuda_ns,
        states={s: sp.states[s] for s in STATES},
        os_calls=[OsCall(name=n, wait=is_os_wait(n), calls=sp.os_counts.get(n, 0), ns=ns, caller=callers.get(n))
                  for n, ns in calls],
        samples=len(sp.host_samples) + len(sp.os_samples) + len(sp.cuda_samples), host_samples=len(sp.host_samples),
        cuda_samples=len(sp.cuda_samples),
        functions=[SampledFunction(function=f.name, module=f.module, self_samples=f.self_samples,
                                   total_samples=f.total_samples, self_ns=est(f.self_samples),
                                   total_ns=est(f.total_samples)) for f in fns],
        modules=[SampledModule(module=m.name, self_samples=m.self_samples, total_samples=m.total_samples)
                 for m in mods],
        top_cause=CpuCause(state=cause.state, name=cause.name, ns=cause.ns, samples=cause.samples) if cause else None)


TOOL = Tool(
    name="cpu",
    summary=("What the host threads were doing, per thread, in a window, in a GPU's gaps (gaps=true) or in one gap "
             "(gap_at_ms): time in CUDA calls, in OS runtime calls by name (waits such as poll, read, futex, "
             "pthread_cond_wait, sleeps), descheduled, running, and the hottest sampled functions and modules with "
             "sample counts. Says which of these the capture recorded and the nsys options for the rest."),
    params=Params, result=Result, run=run,
)


def render(result: Result, console) -> None:
    """Per thread: the split of its time, its OS calls and its hottest functions."""
    from rich.table import Table
    from rich.text import Text

    from dashcam.measure.names import short_function_name
    from dashcam.text.format import fmt_ns
    from dashcam.text.shorten import shorten
    from dashcam.text.tables import print_notes

    w = result.window
    head = f"cpu  {result.scope}  window {w.start_ms:.3f}–{w.end_ms:.3f} ms ({fmt_ns(w.length_ns)})"
    if result.gap:
        g = result.gap
        head += f"  gap of GPU {g.device_id} at {g.start_ms:.3f} ms ({fmt_ns(g.duration_ns)})"
    console.print(Text(head, style="bold"))
    if result.sampling_period_ns:
        console.print(Text(f"sampling period ≈ {fmt_ns(result.sampling_period_ns)} (median of "
                           f"{result.period_intervals} intervals); sampled times are estimates", style="dim"))
    for t in result.threads:
        console.print(Text(f"\nthread {t.tid} ({t.thread_name or '?'}, pid {t.pid}): {fmt_ns(t.examined_ns)} examined, "
                           f"{fmt_ns(t.cuda_ns)} in CUDA calls; " + ", ".join(
                               f"{s} {fmt_ns(v)}" for s, v in t.states.items() if v), style="bold"))
        if t.os_calls:
            tab = Table(box=None, padding=(0, 2))
            for c in ("OS call", "wait", "calls", "time", "called from"):
                tab.add_column(c, justify="right" if c in ("calls", "time") else "left", overflow="fold")
            for c in t.os_calls:
                tab.add_row(Text(c.name), "yes" if c.wait else "", str(c.calls), fmt_ns(c.ns),
                            Text(shorten(short_function_name(c.caller)) if c.caller else "-"))
            console.print(tab)
        if t.functions:
            tab = Table(box=None, padding=(0, 2))
            for c in ("function", "module", "self", "total", "self ≈"):
                tab.add_column(c, justify="right" if c in ("self", "total", "self ≈") else "left", overflow="fold")
            for f in t.functions:
                tab.add_row(Text(shorten(short_function_name(f.function))), Text(f.module.rsplit("/", 1)[-1]),
                            str(f.self_samples), str(f.total_samples), fmt_ns(f.self_ns))
            console.print(tab)
        elif t.samples:
            console.print(Text(f"{t.samples} samples, {t.cuda_samples} of them inside CUDA calls", style="dim"))
    print_notes(result.notes, console)
