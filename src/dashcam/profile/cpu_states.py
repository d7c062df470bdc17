"""What a host thread was doing outside its CUDA calls, instant by instant (definitions.py, "What a host
thread was doing").

For a thread and parts of its time ``[a, b)``, each instant outside the thread's CUDA calls is in exactly one
state, first match wins:

``os_wait``      inside an OS runtime call that waits (labels.OS_WAIT_CALLS), the innermost call open;
``os_call``      inside another OS runtime call (ioctl, mmap, open, write, ...);
``descheduled``  switched off its CPU by the scheduler (between a context-switch-out and the next switch-in);
``running``      on a CPU per the context switches;
``unknown``      no context-switch data covers that time (none in the capture, or before the thread's first).

The states add up to the time outside CUDA calls exactly. Each OS runtime call's time goes to its name.
CPU samples taken in the parts are sorted by where they fell: in a CUDA call, in an OS runtime call, or in
host code (the rest); only the host-code samples say what the thread computed.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from dashcam.measure.intervals import EMPTY, Union, merge, unique_points
from dashcam.measure.labels import is_os_wait

STATES = ("os_wait", "os_call", "descheduled", "running", "unknown")


@dataclass
class ThreadEvents:
    """One thread's events around the parts examined (from cpu_source, each sorted by start)."""

    cuda: Union = field(default_factory=lambda: EMPTY)  # union of its CUDA calls
    os_start: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    os_end: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    os_name: list[str] = field(default_factory=list)
    sched_t: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    sched_in: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    sample_t: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    sample_id: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))


@dataclass
class Split:
    """The states of some time of one thread: ns per state, OS call name -> ns, the samples by where they fell."""

    states: dict[str, int] = field(default_factory=lambda: dict.fromkeys(STATES, 0))
    os_calls: dict[str, int] = field(default_factory=dict)
    os_counts: dict[str, int] = field(default_factory=dict)  # calls overlapping the time, per name
    host_samples: list[int] = field(default_factory=list)
    os_samples: list[int] = field(default_factory=list)
    cuda_samples: list[int] = field(default_factory=list)
    cuda_ns: int = 0
    examined_ns: int = 0

    def add(self, other: Split) -> None:
        for k, v in other.states.items():
            self.states[k] += v
        for d, o in ((self.os_calls, other.os_calls), (self.os_counts, other.os_counts)):
            for k, v in o.items():
                d[k] = d.get(k, 0) + v
        self.host_samples += other.host_samples
        self.os_samples += other.os_samples
        self.cuda_samples += other.cuda_samples
        self.cuda_ns += other.cuda_ns
        self.examined_ns += other.examined_ns


def split(ev: ThreadEvents, a: int, b: int) -> Split:
    """The states of ``[a, b)`` of the thread (see the module docstring)."""
    out = Split()
    if b <= a:
        return out
    out.examined_ns = b - a
    # OS calls and context switches that matter here
    oi = np.flatnonzero((ev.os_start < b) & (ev.os_end > a))
    os_s, os_e = np.clip(ev.os_start[oi], a, b), np.clip(ev.os_end[oi], a, b)
    lo_s, hi_s = np.searchsorted(ev.sched_t, [a, b], side="right")
    cuts = ev.sched_t[lo_s:hi_s]
    cs, ce = ev.cuda.starts, ev.cuda.ends
    ci = slice(np.searchsorted(ce, a, side="right"), np.searchsorted(cs, b, side="left"))
    pts = unique_points(np.concatenate(([a, b], os_s, os_e, cuts, np.clip(cs[ci], a, b), np.clip(ce[ci], a, b))))
    lo, hi = pts[:-1], pts[1:]
    length = hi - lo
    in_cuda = ev.cuda.overlap(lo, hi) > 0
    out.cuda_ns = int(length[in_cuda].sum())
    inner = _innermost(os_s, os_e, lo)
    # the thread's state at each segment: the last context switch at or before its start
    k = np.searchsorted(ev.sched_t, lo, side="right") - 1
    known = k >= 0  # the events include the last one before ``a``: before the thread's first, nothing is known
    running = known & (ev.sched_in[np.maximum(k, 0)] != 0) if len(ev.sched_t) else np.zeros(len(lo), bool)
    names = [ev.os_name[i] for i in oi]
    wait = np.array([is_os_wait(n) for n in names], bool)
    host = ~in_cuda
    in_os = host & (inner >= 0)
    rest = host & (inner < 0)
    if in_os.any():
        w = wait[inner[in_os]]
        out.states["os_wait"] = int(length[in_os][w].sum())
        out.states["os_call"] = int(length[in_os][~w].sum())
        for j, ns in zip(inner[in_os].tolist(), length[in_os].tolist()):
            out.os_calls[names[j]] = out.os_calls.get(names[j], 0) + ns
    for n in names:
        out.os_counts[n] = out.os_counts.get(n, 0) + 1
    out.states["running"] = int(length[rest & known & running].sum())
    out.states["descheduled"] = int(length[rest & known & ~running].sum())
    out.states["unknown"] = int(length[rest & ~known].sum())
    # samples: the segment each fell in
    si = np.flatnonzero((ev.sample_t >= a) & (ev.sample_t < b))
    if len(si):
        seg = np.searchsorted(lo, ev.sample_t[si], side="right") - 1
        for sid, g in zip(ev.sample_id[si].tolist(), seg.tolist()):
            (out.cuda_samples if in_cuda[g] else out.os_samples if inner[g] >= 0 else out.host_samples).append(sid)
    return out


def _innermost(starts: np.ndarray, ends: np.ndarray, lo: np.ndarray) -> np.ndarray:
    """Per segment start ``lo`` (segments cut at every call bound): the index of the innermost call open over the
    segment (the latest started; calls sorted by start), -1 for none. A sweep with a stack of open calls."""
    out = np.full(len(lo), -1, np.int64)
    if not len(starts):
        return out
    order = np.lexsort((-ends, starts))
    stack: list[int] = []
    p = 0
    s, e = starts.tolist(), ends.tolist()
    for g, t in enumerate(lo.tolist()):
        while p < len(order) and s[order[p]] <= t:
            stack.append(int(order[p]))
            p += 1
        while stack and e[stack[-1]] <= t:
            stack.pop()
        if stack:  # (a call below the top that ended is popped when it surfaces)
            out[g] = stack[-1]
    return out


def thread_events(src, profile, gtid: int, lo: int, hi: int, samples: bool = True) -> ThreadEvents:
    """The events of thread ``gtid`` (raw globalTid) around [lo, hi): its CUDA calls (the model's api_calls),
    OS runtime calls, context switches and CPU samples (cpu_source)."""
    c = profile.con.execute(f"""SELECT start, "end" FROM api_calls WHERE global_tid = {int(gtid)}
        AND start < {int(hi)} AND "end" > {int(lo)}""").fetchnumpy()
    ev = ThreadEvents(cuda=merge(c["start"], c["end"]))
    o = src.osrt_calls([gtid], lo, hi)
    if len(o["start"]):
        names = src.names(set(o["name_id"].tolist()))
        ev.os_start, ev.os_end, ev.os_name = o["start"], o["end"], [names[i] for i in o["name_id"].tolist()]
    s = src.sched([gtid], lo, hi)
    if len(s["start"]):
        ev.sched_t, ev.sched_in = s["start"], s["is_in"]
    if samples:
        x = src.samples([gtid], lo, hi)
        ev.sample_t, ev.sample_id = x["start"], x["id"]
    return ev
