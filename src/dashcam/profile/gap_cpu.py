"""One level below ``cpu_work``: what the launching thread was doing while a GPU waited on it, where the capture
recorded OS runtime calls, context switches or CPU samples; and which function made the CUDA calls around a
gap, where it recorded call stacks (gpu_gaps reports both).

A gap's ``cpu_work`` is the time in its CPU-side part ``[start, pre_end)`` (gap_causes.py) when the launching
thread was in no CUDA call. That time splits into the states of cpu_states.py (``os_wait``, ``os_call``,
``descheduled``, ``running``, ``unknown``), which add up to it exactly; its *cause* is the named piece with
the most time (host_activity.top_cause): an OS call by name, descheduled, or running time with its most
sampled function. Per device the states are summed over the same gaps gpu_gaps cuts by NVTX range (those with
the most cpu_work, ``cpu_work_examined_ns``), with the OS calls by name and the most sampled functions.

Without any of these tables in the capture nothing here runs, and gpu_gaps' result is what it was without
them.
"""
from __future__ import annotations

from dashcam.profile.coverage import holds
from dashcam.profile.cpu_source import source
from dashcam.profile.cpu_states import STATES, Split
from dashcam.profile.host_activity import call_callers, sampled, split_parts, top_cause

HOST_KINDS = ("os_runtime", "context_switches", "cpu_sampling")
STACK_KINDS = ("cuda_backtraces", "os_runtime", "cpu_sampling")
TOP_CALLS = 10
TOP_FUNCTIONS = 5


def has_host_data(profile) -> bool:
    """Whether the capture holds any of OS runtime calls, context switches or CPU samples."""
    return any(holds(profile, k) for k in HOST_KINDS)


def has_stacks(profile) -> bool:
    return holds(profile, "cuda_backtraces") or holds(profile, "cpu_sampling") or (
        holds(profile, "os_runtime") and source(profile).has("OSRT_CALLCHAINS"))


def device_split(profile, parts: list[tuple[int, int, int]]) -> dict | None:
    """Per device: the states of the cpu_work in ``parts`` (a, pre_end, thread), its OS calls by name (most
    first, top TOP_CALLS) and its most sampled host functions; None without host data."""
    if not parts or not has_host_data(profile):
        return None
    total = Split()
    for sp in split_parts(profile, parts):
        total.add(sp)
    fns, _ = sampled(profile, total.host_samples, limit=TOP_FUNCTIONS)
    period = source(profile).sampling_period()
    return {"states": dict(total.states),
            "os_calls": dict(sorted(total.os_calls.items(), key=lambda kv: (-kv[1], kv[0]))[:TOP_CALLS]),
            "functions": fns, "samples": len(total.host_samples),
            "period_ns": round(period[0], 1) if period else None}


def tail_split(profile, key: int, a: int, b: int, max_threads: int) -> dict:
    """A GPU's tail ``[a, b)``: the states of the thread ``key`` (raw globalTid) that launched its last kernel,
    its most sampled host functions, and the OS calls of that thread's process in it: each call name with the
    time of the thread that spent the most in it (the ``max_threads`` threads of the process with OS calls or
    context switches there, ``key`` first)."""
    pid = key >> 24
    others = sorted(g for g in source(profile).event_threads(a, b) if g >> 24 == pid and g != key)
    threads = [key, *others[: max_threads - 1]]
    splits = split_parts(profile, [(a, b, g) for g in threads])
    own = splits[0]
    calls: dict[str, int] = {}
    for sp in splits:
        for n, ns in sp.os_calls.items():
            calls[n] = max(calls.get(n, 0), ns)
    fns, _ = sampled(profile, own.host_samples, limit=TOP_FUNCTIONS)
    period = source(profile).sampling_period()
    return {"states": dict(own.states),
            "os_calls": dict(sorted(calls.items(), key=lambda kv: (-kv[1], kv[0]))[:TOP_CALLS]),
            "functions": fns, "samples": len(own.host_samples),
            "period_ns": round(period[0], 1) if period else None}


def gap_splits(profile, parts: list[tuple[int, int, int] | None]) -> list[tuple[dict, object] | None]:
    """Per gap part (None for a gap without cpu_work): (states, top cause) of its cpu_work."""
    if not has_host_data(profile):
        return [None] * len(parts)
    idx = [i for i, p in enumerate(parts) if p is not None]
    splits = split_parts(profile, [parts[i] for i in idx])
    out: list = [None] * len(parts)
    for i, sp in zip(idx, splits):
        out[i] = ({s: sp.states[s] for s in STATES}, top_cause(profile, sp))
    return out


def gap_callers(profile, calls: list[list[tuple[str, int, int, int, int, set]]]) -> list[dict[str, str] | None]:
    """Per gap: API name -> calling function, for its calls ``(api name, raw globalTid, correlationId, start,
    end, base names to skip)``; None for a gap where no stack names any."""
    if not has_stacks(profile):
        return [None] * len(calls)
    flat = [c for cs in calls for c in cs]
    found = call_callers(profile, [c[1:5] for c in flat], [c[5] for c in flat]) if flat else []
    out, k = [], 0
    for cs in calls:
        named = {}
        for c in cs:
            if found[k] and c[0] not in named:
                named[c[0]] = found[k]
            k += 1
        out.append(named or None)
    return out
