"""What host threads did in given stretches of time, and which code made given CUDA calls: the facts the cpu
tool, gpu_gaps' cpu_work split and the calling-function fields report (from cpu_source's tables).

- ``split_parts``: the states (cpu_states.py) of parts ``(a, b, thread)`` of threads' time, part by part.
- ``sampled``: the functions and modules of CPU samples: *self* (the innermost frame) and *total* (anywhere on
  the stack, once per sample) sample counts.
- ``top_cause``: what a split's time mostly was, named: the OS call (by name) or the state with the most
  time; running time is named by its most sampled function.
- ``os_callers``: per thread and OS runtime call name, the function that made those calls (the most time), from
  the calls' backtraces (OSRT_CALLCHAINS; nsys records them for calls longer than a threshold, 80 us by default).
- ``steady_call``: the call on a device (ioctl, select, poll, ...) a thread makes at a steady period: a loop
  paced by its input (a camera's frames, a sensor), where the thread sleeps between inputs.
- ``call_callers``: the calling function of CUDA calls (cpu_source.caller), from the call's own CUDA backtrace,
  else the backtraces of OS runtime calls made inside it, else the CPU samples taken inside it; the most
  frequent caller among a call's stacks.
"""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

import numpy as np

from dashcam.profile.cpu_source import caller, os_caller, source
from dashcam.profile.cpu_states import Split, split, thread_events

SAMPLES = "SAMPLING_CALLCHAINS"


def split_parts(profile, parts: list[tuple[int, int, int]], samples: bool = True) -> list[Split]:
    """One Split per part ``(a, b, raw globalTid)``; each thread's events are read once, over the hull of its
    parts."""
    src = source(profile)
    out: list[Split | None] = [None] * len(parts)
    by_thread: dict[int, list[int]] = {}
    for i, (_, _, key) in enumerate(parts):
        by_thread.setdefault(int(key), []).append(i)
    for key, idx in by_thread.items():
        lo, hi = min(parts[i][0] for i in idx), max(parts[i][1] for i in idx)
        ev = thread_events(src, profile, key, lo, hi, samples=samples)
        for i in idx:
            out[i] = split(ev, parts[i][0], parts[i][1])
    return out


# A thread waiting for a device between inputs: the calls it makes once per input
DEVICE_CALLS = re.compile(r"^(?:ioctl|select|pselect6|poll|ppoll|epoll_wait|epoll_pwait2?)$")
# At least this many calls to call a period steady: fewer intervals say nothing about a rate.
STEADY_MIN_CALLS = 10
# ... and this share of the intervals between consecutive calls within STEADY_TOLERANCE_PCT of their median: a
# device delivering inputs at a fixed rate (a 25 fps camera: 40 ms) jitters by a few percent, a busy loop's
# calls do not keep to a period.
STEADY_SHARE_PCT = 80.0
STEADY_TOLERANCE_PCT = 10.0


@dataclass
class SteadyCall:
    name: str
    calls: int
    period_ns: int  # the median interval between consecutive calls


def steady_call(profile, gtid: int, lo: int, hi: int) -> SteadyCall | None:
    """The device call (DEVICE_CALLS) thread ``gtid`` makes at a steady period in [lo, hi) (module docstring and
    the STEADY_* constants), the one with the most calls; None when none does."""
    src = source(profile)
    rows = src.osrt_calls([int(gtid)], lo, hi)
    if not len(rows["start"]):
        return None
    names = src.names(set(rows["name_id"].tolist()))
    best = None
    for nid in sorted(set(rows["name_id"].tolist())):
        nm = names.get(nid, "")
        if not DEVICE_CALLS.match(nm):
            continue
        t = np.sort(rows["start"][rows["name_id"] == nid])
        if len(t) < STEADY_MIN_CALLS:
            continue
        d = np.diff(t)
        med = float(np.median(d))
        if med <= 0:
            continue
        steady = np.abs(d - med) <= STEADY_TOLERANCE_PCT / 100.0 * med
        if 100.0 * steady.mean() >= STEADY_SHARE_PCT and (best is None or len(t) > best.calls):
            best = SteadyCall(nm, len(t), round(med))
    return best


@dataclass
class Sampled:
    name: str
    module: str
    self_samples: int
    total_samples: int


def sampled(profile, sample_ids: list[int], limit: int = 10) -> tuple[list[Sampled], list[Sampled]]:
    """(functions, modules) of the samples, most self samples first (then total, then a resolved symbol before a
    bare address such as ``0x7f72be8a3249``), at most ``limit`` each."""
    if not sample_ids:
        return [], []
    src = source(profile)
    stacks = src.stacks(SAMPLES, sample_ids)
    names = src.names({x for st in stacks.values() for s, m, _ in st for x in (s, m)})
    fs, ft, ms, mt = Counter(), Counter(), Counter(), Counter()
    fmod: dict[str, str] = {}
    bare: set[str] = set()
    for sid in sample_ids:
        st = stacks.get(int(sid))
        if not st:
            continue
        frames = [(names[s], names[m]) for s, m, _ in st]
        bare.update(names[s] for s, _, unresolved in st if unresolved or _bare(names[s]))
        fs[frames[0][0]] += 1
        ms[frames[0][1]] += 1
        for fn, mod in frames:
            fmod.setdefault(fn, mod)
        ft.update({fn for fn, _ in frames})
        mt.update({mod for _, mod in frames})

    def rank(self_c: Counter, total_c: Counter, module_of) -> list[Sampled]:
        keys = sorted(total_c, key=lambda k: (-self_c.get(k, 0), -total_c[k], k in bare, k))[:limit]
        return [Sampled(k, module_of(k), self_c.get(k, 0), total_c[k]) for k in keys]

    return rank(fs, ft, lambda k: fmod.get(k, "?")), rank(ms, mt, lambda k: k)


def _bare(symbol: str) -> bool:
    """A frame nsys could not name: an address (``0x…``) or a bracketed placeholder (``[unknown]``)."""
    return not symbol or symbol.startswith(("0x", "["))


@dataclass
class Cause:
    state: str  # os_wait, os_call, descheduled, running, unknown
    name: str | None  # the OS call, or the most sampled function of the running time
    ns: int
    samples: int = 0  # samples of that function (running time)


def top_cause(profile, sp: Split) -> Cause | None:
    """The named piece with the most time in ``sp``: an OS call (its name), descheduled, or running/unknown time
    with its most sampled host function (the self count). None when ``sp`` holds no host time."""
    cands = [Cause("os_wait" if _wait(n) else "os_call", n, ns) for n, ns in sp.os_calls.items() if ns > 0]
    if sp.states["descheduled"]:
        cands.append(Cause("descheduled", None, sp.states["descheduled"]))
    for state in ("running", "unknown"):
        if sp.states[state]:
            cands.append(Cause(state, None, sp.states[state]))
    if not cands:
        return None
    best = max(cands, key=lambda c: (c.ns, c.state, c.name or ""))
    if best.state in ("running", "unknown") and sp.host_samples:
        fns, _ = sampled(profile, sp.host_samples, limit=1)
        if fns and fns[0].self_samples:
            best.name, best.samples = fns[0].name, fns[0].self_samples
    return best


def _wait(name: str) -> bool:
    from dashcam.measure.labels import is_os_wait

    return is_os_wait(name)


def call_callers(profile, calls: list[tuple[int, int, int, int]],
                 skip: list[set[str]] | None = None) -> list[str | None]:
    """The calling function of each CUDA call ``(raw globalTid, correlationId, start, end)`` (module docstring);
    ``skip``: per call, base names to pass over (a kernel's launch stub). None where no stack says."""
    src = source(profile)
    skip = skip or [set()] * len(calls)
    out: list[str | None] = [None] * len(calls)
    stacks_of: list[list[tuple[str, int]]] = [[] for _ in calls]  # per call: (table, stack id)
    chains = src.runtime_chains()
    for i, (g, corr, _, _) in enumerate(calls):
        c = chains.get((int(g), int(corr)))
        if c is not None:
            stacks_of[i].append(("CUDA_CALLCHAINS", c))
    by_thread: dict[int, list[int]] = {}
    for i, (g, _, _, _) in enumerate(calls):
        if not stacks_of[i]:
            by_thread.setdefault(int(g), []).append(i)
    for g, idx in by_thread.items():
        idx = sorted(idx, key=lambda i: calls[i][2])
        starts = np.array([calls[i][2] for i in idx], np.int64)
        ends = np.array([calls[i][3] for i in idx], np.int64)
        lo, hi = int(starts.min()), int(ends.max())

        def inside(t: np.ndarray, starts=starts, ends=ends) -> np.ndarray:
            """Per time: the index into idx of the latest call starting at or before it, if t is inside it."""
            j = np.searchsorted(starts, t, side="right") - 1
            ok = (j >= 0) & (t < ends[np.maximum(j, 0)])
            return np.where(ok, j, -1)

        o = src.osrt_calls([g], lo, hi)
        has = o["chain"] > 0
        if has.any():
            off = src.chain_offset("OSRT_CALLCHAINS",
                                   list(zip(o["chain"][has].tolist(), _os_names(src, o["name_id"][has]))))
            for j, c in zip(inside(o["start"][has]).tolist(), o["chain"][has].tolist()):
                if j >= 0 and not stacks_of[idx[j]]:
                    stacks_of[idx[j]].append(("OSRT_CALLCHAINS", c + off))
        x = src.samples([g], lo, hi)
        for j, sid in zip(inside(x["start"]).tolist(), x["id"].tolist()):
            if j >= 0 and not any(t == "CUDA_CALLCHAINS" or t == "OSRT_CALLCHAINS" for t, _ in stacks_of[idx[j]]):
                stacks_of[idx[j]].append((SAMPLES, sid))
    per_table: dict[str, set[int]] = {}
    for st in stacks_of:
        for t, c in st:
            per_table.setdefault(t, set()).add(c)
    frames = {t: src.stacks(t, ids) for t, ids in per_table.items()}
    names = src.names({x for f in frames.values() for st in f.values() for s, m, _ in st for x in (s, m)})
    for i, st in enumerate(stacks_of):
        found = Counter()
        for t, c in st:
            fr = frames[t].get(c)
            if fr:
                fn = caller([(names[s], names[m], u) for s, m, u in fr], skip[i])
                if fn:
                    found[fn] += 1
        if found:
            out[i] = max(found, key=lambda k: (found[k], k))
    return out


def _os_names(src, name_ids: np.ndarray) -> list[str]:
    names = src.names(set(name_ids.tolist()))
    return [names[i] for i in name_ids.tolist()]


def os_callers(profile, parts: list[tuple[int, int, int]]) -> dict[int, dict[str, str]]:
    """Per thread (raw globalTid): OS runtime call name -> the function that made its calls overlapping
    ``parts`` (a, b, thread), the one with the most time among the calls with a backtrace (cpu_source.os_caller)."""
    src = source(profile)
    out: dict[int, dict[str, str]] = {}
    if not (src.has("OSRT_API") and src.has("OSRT_CALLCHAINS")):
        return out
    by_thread: dict[int, list[tuple[int, int]]] = {}
    for a, b, g in parts:
        by_thread.setdefault(int(g), []).append((int(a), int(b)))
    for g, spans in by_thread.items():
        spans.sort()
        o = src.osrt_calls([g], spans[0][0], max(b for _, b in spans))
        keep = o["chain"] > 0
        if not keep.any():
            continue
        starts = np.array([a for a, _ in spans], np.int64)
        ends = np.array([b for _, b in spans], np.int64)
        j = np.searchsorted(starts, o["end"], side="left") - 1  # the last part starting before the call ends
        keep &= (j >= 0) & (o["start"] < ends[np.maximum(j, 0)])
        if not keep.any():
            continue
        names = _os_names(src, o["name_id"][keep])
        chains = o["chain"][keep].tolist()
        off = src.chain_offset("OSRT_CALLCHAINS", list(zip(chains, names)))
        stacks = src.stacks("OSRT_CALLCHAINS", [c + off for c in chains])
        text = src.names({x for st in stacks.values() for s, m, _ in st for x in (s, m)})
        time: dict[str, Counter] = {}
        for n, c, ns in zip(names, chains, (o["end"][keep] - o["start"][keep]).tolist()):
            st = stacks.get(c + off)
            fn = os_caller([(text[s], text[m], u) for s, m, u in st]) if st else None
            if fn:
                time.setdefault(n, Counter())[fn] += ns
        out[g] = {n: max(cnt, key=lambda k: (cnt[k], k)) for n, cnt in time.items()}
    return out
