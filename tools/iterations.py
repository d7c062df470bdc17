"""iterations: the repeating steps of the run (training/inference iterations), their durations and GPU busy.

Step detection, in this order:

1. NVTX (``method='nvtx'``). Candidates are label groups (the core's ``group_id``: PyTorch
   suffixes dropped and a trailing number read as ``<n>``, so "step 0", "step 1", ... and
   "ProfilerStep#0", "ProfilerStep#1", ... are one group each) with at least 3 ranges on one
   thread, no two of them overlapping. With ``label`` given, the groups containing that text are
   the candidates. Otherwise only ranges at least ``window / 100000`` long count, and:

   a. groups named like a step (``step|iter|batch|epoch``, case-insensitive) win, ranked by that
      word (step, then iter, batch, epoch), then top-level ones first, then by total range time;
   b. failing those, the candidate must be top-level (none of its ranges inside a range of another
      candidate on the same thread; a single enclosing range such as "train" does not count) and
      dense (its ranges cover at least half the time from the first one's start to the last one's
      end: back-to-back steps, not a scattered op); the largest total range time wins.

   Operator ranges (labels with ``::``: PyTorch's ``aten::to``, ``c10d::allreduce_``,
   ``FSDP::pre_forward``, ...) are never picked automatically: a top-level op that blocks on the
   GPU (``aten::to`` copying to the host) repeats densely, but it is one op of a step, not the step.
   Nor are a library's own calls traced as NVTX ranges (NVTX kinds ``mpi``, ``nccl``, ``jit`` of
   ``measure.labels``: ``MPI_Sendrecv`` under ``--trace=mpi``, ``ncclAllReduce``, NVRTC compiles):
   an MPI halo exchange repeats densely every step, but it is the communication of a step.
   Nor (step_rules.py) a library's internals (a library's NVTX domain, or labels such as nvFuser's
   ``isResharding``), nor layers: a group of labels differing by a trailing index, without a step word, whose
   ranges sit in twos or more inside one enclosing range instance (TensorRT's ``Identity_0..15`` in one
   inference); the ranges holding layers count as top-level candidates even when not dense (the inferences
   are the steps). The best-ranked candidate whose ranges hold GPU work (a kernel launched from the thread
   inside them, or kernel busy time in them) wins; without a step word its ranges must also launch the same
   kernels (three ``for_each`` calls with different kernels are not steps).
   Each range of the winner is one step.
2. Kernel pattern (``method='kernel_pattern'``), when there is no NVTX candidate: on the device with
   the most kernels in the window (n kernels), each kernel name with 3 or more launches gives step
   markers. Its launches are cut into groups at every gap (start to next start) longer than twice its
   25th-percentile gap. When the groups all hold the same number m > 1 of launches (only the first and
   the last may hold fewer), the name runs m times per step and its markers are the first launch of
   each group (a short first group is dropped: its step began before the window); otherwise (no long
   gaps, or groups of unequal size: a slow step, not a pattern) every launch is a marker. The names with
   3 to n/2 markers vote with their marker count k; the k shared by the most names is the step count
   (tie: the smaller k, longer steps), and of those names the one whose first marker comes first marks
   the steps: step i = [marker i, marker i+1), so k markers give k - 1 steps. So a pattern that repeats
   as a whole (10 kernels, then an 8 ms copy, every 20 ms) is one step even when each of its kernels
   runs 5 times in it. The flip side: a slow step that comes back exactly every few steps (every 10th,
   say) makes that longer period the step; a slow step at irregular times does not.
   When no name votes because the device ran one kernel only (its n launches give more than n/2 markers),
   and it was launched N >= 3 times at a steady period (STEADY_SPREAD), its N launches are N steps
   (``period_ns``), the last one the median period long. (A repeating sequence of several kernels gives
   votes: its k repeats are k - 1 steps, as above.)
3. Otherwise ``method='none'``.

With ``per_device``, each listed step is also split per device (``step_devices``): compute (the union of
its non-NCCL kernels inside the step), communication (the union of its NCCL kernels, as the nccl tool
names them), exposed communication (communication with no compute running), idle (the step minus the
device's kernel busy time) and the step's main collective: the NCCL kernel name with the most time
starting in the step on that device, with that time. The fleet compares these across ranks.
"""
from __future__ import annotations

from typing import Literal, NamedTuple

import numpy as np
from pydantic import BaseModel, Field

from dashcam.measure.intervals import kernel_unions
from dashcam.measure.labels import nvtx_kind
from dashcam.profile.program_facts import NVTX_DOMAIN_CREATE

from .base import Tool, ToolParams, ToolResult, WindowInfo
from .nccl import comm_and_compute, comm_kernels
from .step_rules import has_gpu_work, launches_per_range, library_internal, same_work, shares_parent

STEP_WORDS = ("step", "iter", "batch", "epoch")  # in order of preference
OPERATOR = "::"  # aten::to, c10d::allreduce_, FSDP::pre_forward: an op or hook, never a step by itself
LIBRARY_CALLS = ("mpi", "nccl", "jit")  # NVTX kinds of a library's own calls: part of a step, never the step
NO_LABEL = "<no label>"
INDEX = "<n>"  # how a label group writes a trailing number (names.nvtx_group_labels)
MAX_CHECKED = 20  # ranked NVTX candidates checked for GPU work before giving up on NVTX
MIN_STEP_FRACTION = 1e-5  # automatic NVTX candidates: ranges at least this fraction of the window
MIN_STEPS = 3
BURST_GAP = 2.0  # kernel pattern: a gap over this many times a name's 25th-percentile gap ends a group of launches
# A steady period (one kernel repeating with no other work, the kernel pattern's last resort): its
# 90th-10th percentile spread at most this share of the median. A loop of one kernel jitters by launch latency
# (microseconds) on a period of a kernel's length; a share this size still tells a loop from scattered calls.
STEADY_SPREAD = 0.1
MIN_DENSITY = 0.5  # top-level fallback: ranges cover half the span from the first range's start to the last's end


class Params(ToolParams):
    label: str | None = Field(
        None, description="Use the NVTX label group containing this text (case-insensitive) as the step, e.g. "
                          "'train_step'. Default: detect automatically.")
    per_device: bool = Field(
        False, description="Also split each listed step per device into compute, NCCL communication (and its "
                           "exposed part) and idle time, with the step's main collective (step_devices).")


class Step(BaseModel):
    index: int = Field(description="0-based, in time order.")
    start_ns: int
    end_ns: int
    duration_ns: int = Field(description="end_ns - start_ns (not clipped to the window).")
    gpu_busy_pct: float = Field(description="Lowest over the devices of: kernel busy (union of kernel intervals) "
                                            "inside the step, as % of the step's length inside the window.")
    gpu_busy_device: int | None = Field(description="The device with that lowest kernel busy %.")


class StepDevice(BaseModel):
    index: int = Field(description="The step (Step.index).")
    device_id: int
    compute_ns: int = Field(description="Union of the device's non-NCCL kernels inside the step.")
    comm_ns: int = Field(description="Union of the device's NCCL kernels inside the step.")
    exposed_comm_ns: int = Field(description="Communication with no compute kernel running.")
    kernel_idle_ns: int = Field(description="kernel-idle: the step's length inside the window minus the device's "
                                            "kernel-busy time in it.")
    collective: str | None = Field(description="The step's main collective: the NCCL kernel (short name) with the "
                                               "most time starting in the step on this device; null without one.")
    collective_ns: int = Field(description="That kernel's summed durations starting in the step (0 without one).")


class StepExtreme(BaseModel):
    index: int
    start_ns: int
    duration_ns: int
    ratio_to_median: float = Field(description="duration_ns / median_ns.")
    gpu_busy_pct: float


class Result(ToolResult):
    method: Literal["nvtx", "kernel_pattern", "none"] = Field(description="How the steps were found.")
    label: str | None = Field(None, description="NVTX label group used as the step (method nvtx).")
    pid: int | None = Field(None, description="Process of the NVTX thread (method nvtx).")
    tid: int | None = Field(None, description="Thread whose NVTX ranges are the steps (method nvtx).")
    kernel_name: str | None = Field(None, description="Kernel whose launches mark step starts (method kernel_pattern).")
    launches_per_step: int | None = Field(
        None, description="Launches of kernel_name per step (method kernel_pattern): each step starts at the first "
                          "launch of a group of this many.")
    device_id: int | None = Field(None, description="Device whose kernel sequence was used (method kernel_pattern).")
    period_ns: float | None = Field(
        None, description="Method kernel_pattern, when the device ran one kernel only, launched at a steady "
                          "period: that median period; each launch is a step.")
    busy_devices: list[int] = Field(default_factory=list, description="Devices gpu_busy_pct is computed over.")
    step_count: int
    mean_ns: float | None = None
    median_ns: float | None = None
    stdev_ns: float | None = Field(None, description="Population standard deviation of the step durations.")
    p90_ns: float | None = Field(None, description="90th percentile of the step durations (linear interpolation).")
    slowest: StepExtreme | None = None
    fastest: StepExtreme | None = None
    steps_start_ns: int | None = Field(None, description="The first step's start: with steps_end_ns, the time the "
                                                         "steps cover (per-step totals are measured inside it).")
    steps_end_ns: int | None = Field(None, description="The last step's end.")
    steps: list[Step] = Field(default_factory=list, description="Steps in time order (the first `limit`).")
    step_devices: list[StepDevice] = Field(
        default_factory=list, description="With per_device: each listed step on each device, by step then device.")


class Candidate(NamedTuple):
    label: str
    thread: int  # pid * 2**24 + tid
    count: int
    total: int  # summed range time, clipped to the window
    disjoint: bool
    top_level: bool
    starts: np.ndarray  # by start
    ends: np.ndarray
    domain: str | None = None  # the NVTX domain's name (of its first range); None for the default domain
    layers: bool = False  # labels differing by a trailing index, in twos or more inside one enclosing range
    holds_layers: bool = False  # its ranges enclose another candidate's layers

    @property
    def dense(self) -> bool:
        return self.total >= MIN_DENSITY * int(self.ends.max() - self.starts.min())

    @property
    def not_a_step(self) -> bool:
        """An operator, a library's own call or internals, or layers: never picked as the step without ``label``."""
        return (OPERATOR in self.label or nvtx_kind(self.label) in LIBRARY_CALLS or self.layers
                or library_internal(self.label, self.domain))

    @property
    def step_word(self) -> int | None:
        """Index in STEP_WORDS of the first step word in the label; None without one, or for an operator
        or a library call."""
        low = self.label.lower()
        if self.not_a_step:
            return None
        return next((i for i, word in enumerate(STEP_WORDS) if word in low), None)


def _nvtx_candidates(profile, w, label: str | None) -> list[Candidate]:
    """Per (label group, thread) with >= 3 ranges: the candidate and its ranges.

    A range overlapping the previous one of its group on the thread makes the candidate not disjoint;
    one inside an earlier-starting (or same-start, longer) range of any candidate on the thread makes
    it not top-level.
    """
    in_w = f'is_range AND "end" > {w.start_ns} AND start < {w.end_ns}'
    if label is None:
        which = f'"end" - start >= {max(1, int(w.length_ns * MIN_STEP_FRACTION))}'
        params = []
    else:
        which = f"""group_id IN (SELECT group_id FROM nvtx_groups WHERE strpos(lower(label), lower($1)) > 0)
                    OR (group_id IS NULL AND strpos('{NO_LABEL}', lower($1)) > 0)"""
        params = [label]
    r = profile.con.execute(f"""SELECT start, "end", pid * 16777216 + tid AS th, coalesce(group_id, -1) AS g,
                                       coalesce(domain_id, 0) AS dom
                                FROM nvtx_times WHERE {in_w} AND ({which})""", params).fetchnumpy()
    # A range without a thread (NULL pid or tid: a NULL key) is no candidate. Dropped here, among the rows
    # read: as a SQL condition DuckDB tested it on every range before the length test (a fifth of the query).
    has_thread = ~np.ma.getmaskarray(r["th"])
    start, end, th, g, dom = (np.asarray(r[c], np.int64)[has_thread] for c in ("start", "end", "th", "g", "dom"))
    if len(start) == 0:
        return []
    o = np.lexsort((end, start, th, g))  # blocks of one (group, thread), by start
    start, end, th, g, dom = start[o], end[o], th[o], g[o], dom[o]
    every = (start, end, th, g)  # every range read, for the layers test (an enclosing range may be alone)
    new_block = np.concatenate(([True], (g[1:] != g[:-1]) | (th[1:] != th[:-1])))
    keep = np.bincount(np.cumsum(new_block) - 1)[np.cumsum(new_block) - 1] >= MIN_STEPS
    start, end, th, g, dom, new_block = start[keep], end[keep], th[keep], g[keep], dom[keep], new_block[keep]
    if len(start) == 0:
        return []
    first = np.flatnonzero(new_block)
    overlap = np.concatenate(([False], start[1:] < end[:-1])) & ~new_block
    # enclosed: by thread, start, longest first; a running max of end (offset per thread) reaching a range's end
    o = np.lexsort((-end, start, th))
    thread_rank = np.cumsum(np.concatenate(([0], th[o][1:] != th[o][:-1])))
    pos = thread_rank * (int(end.max() - start.min()) + 1) + (end[o] - start.min())
    enclosed = np.empty(len(o), bool)
    enclosed[o] = np.concatenate(([False], np.maximum.accumulate(pos)[:-1] >= pos[1:]))
    clipped = np.minimum(end, w.end_ns) - np.maximum(start, w.start_ns)
    total = np.add.reduceat(clipped, first)
    disjoint = ~np.logical_or.reduceat(overlap, first)
    top_level = ~np.logical_or.reduceat(enclosed, first)
    ids = ", ".join(str(x) for x in sorted({int(x) for x in g[first]} - {-1}))
    labels = dict(profile.rows(f"SELECT group_id, label FROM nvtx_groups WHERE group_id IN ({ids})") if ids else [])
    domains = dict(profile.rows(f"""SELECT domain_id, any_value(label) FROM nvtx WHERE event_type = {NVTX_DOMAIN_CREATE}
                                    AND domain_id IS NOT NULL GROUP BY 1""")) if (dom != 0).any() else {}
    bounds = np.append(first, len(start))
    cands = [Candidate(labels.get(int(g[a]), NO_LABEL), int(th[a]), int(b - a), int(total[i]), bool(disjoint[i]),
                       bool(top_level[i]), start[a:b], end[a:b], domains.get(int(dom[a])))
             for i, (a, b) in enumerate(zip(bounds[:-1], bounds[1:]))]
    return _mark_layers(cands, [int(x) for x in g[first]], every) if label is None else cands


def _mark_layers(cands: list[Candidate], groups: list[int], every: tuple) -> list[Candidate]:
    """Mark the candidates that are layers (step_rules.shares_parent: a trailing-index label without a step word)
    and those whose ranges hold them."""
    start, end, th, g = every
    out = list(cands)
    for k, c in enumerate(cands):
        if not c.label.endswith(INDEX) or c.not_a_step or c.step_word is not None:
            continue
        others = (th == c.thread) & (g != groups[k])
        if shares_parent(c.starts, c.ends, start[others], end[others]):
            out[k] = out[k]._replace(layers=True)
    for lay in [c for c in out if c.layers]:
        for k, c in enumerate(out):
            if c.thread == lay.thread and not c.layers:
                i = np.searchsorted(c.starts, lay.starts, side="right") - 1
                if ((i >= 0) & (c.ends[np.maximum(i, 0)] >= lay.ends)).any():
                    out[k] = out[k]._replace(holds_layers=True)
    return out


def _ranked_nvtx(cands: list[Candidate], forced: bool) -> list[Candidate]:
    """The step candidates (see the module docstring), best first."""
    ok = [c for c in cands if c.disjoint]
    if forced:
        return sorted(ok, key=lambda c: (-c.total, c.label, c.thread))[:1]
    named = sorted((c for c in ok if c.step_word is not None),
                   key=lambda c: (c.step_word, not c.top_level, -c.total, c.label, c.thread))
    plain = sorted((c for c in ok if c.top_level and (c.dense or c.holds_layers) and not c.not_a_step),
                   key=lambda c: (-c.total, c.label, c.thread))
    return named + plain


def _pick_nvtx(profile, w, devices: list[int], cands: list[Candidate], forced: bool) -> Candidate | None:
    """The first ranked candidate whose ranges hold GPU work, and, without a step word, the same GPU work
    (step_rules); with ``label`` the largest group, as it is."""
    ranked = _ranked_nvtx(cands, forced)
    if forced:
        return ranked[0] if ranked else None
    unions = kernel_unions(profile, w, devices) if ranked else {}
    for c in ranked[:MAX_CHECKED]:
        pid, tid = c.thread >> 24, c.thread & 0xFFFFFF
        r = profile.con.execute(f"""SELECT api_start, short_name_id FROM launches
                                    WHERE pid = {pid} AND api_tid = {tid} AND short_name_id IS NOT NULL
                                      AND api_start >= {int(c.starts[0])} AND api_start < {int(c.ends.max())}
                                    ORDER BY api_start""").fetchnumpy()
        launched = launches_per_range(c.starts, c.ends, np.asarray(r["api_start"], np.int64),
                                      np.asarray(r["short_name_id"], np.int64))
        a, b = np.clip(c.starts, w.start_ns, w.end_ns), np.clip(c.ends, w.start_ns, w.end_ns)
        busy = sum((unions[d].overlap(a, b) for d in devices), np.zeros(len(a), np.int64))
        if has_gpu_work(launched, busy) and (c.step_word is not None or same_work(launched)):
            return c
    return None


def _markers(starts: np.ndarray) -> tuple[np.ndarray, int]:
    """Step markers of one kernel name from its launch starts (sorted, 3 or more) and its launches per step.

    Groups of launches are cut at gaps longer than BURST_GAP times the 25th-percentile gap; equal groups
    (the first and last may be shorter) mean the name runs that many times per step: the markers are the
    first launch of each group, dropping a short first group. Otherwise every launch is a marker.
    """
    gaps = np.diff(starts)
    cut = gaps > BURST_GAP * max(float(np.percentile(gaps, 25)), 1.0)
    first = np.flatnonzero(np.concatenate(([True], cut)))
    sizes = np.diff(np.append(first, len(starts)))
    per_step = int(sizes.max())
    if per_step > 1 and len(sizes) >= 3 and (sizes[1:-1] == per_step).all():
        return starts[first[1:] if sizes[0] < per_step else first], per_step
    return starts, 1


def _kernel_pattern(profile, w, devices: list[int]) -> tuple | None:
    """(device, kernel name, launches per step, step markers) from the busiest device's kernels, or None."""
    in_w = f'"end" > {w.start_ns} AND start < {w.end_ns}'
    r = profile.con.execute(f"""SELECT device_id, name_id, start FROM kernel_times WHERE {in_w} AND name_id IS NOT NULL
                                AND device_id = (SELECT device_id FROM kernel_times WHERE {in_w}
                                                 AND device_id IN ({", ".join(str(d) for d in devices)})
                                                 GROUP BY 1 ORDER BY count(*) DESC, 1 LIMIT 1)""").fetchnumpy()
    n = len(r["start"])
    if n == 0:
        return None
    dev = int(r["device_id"][0])
    name_id, start = np.asarray(r["name_id"], np.int64), np.asarray(r["start"], np.int64)
    o = np.lexsort((start, name_id))
    name_id, start = name_id[o], start[o]
    bounds = np.flatnonzero(np.concatenate(([True], name_id[1:] != name_id[:-1], [True])))
    votes: dict[int, list[tuple]] = {}  # marker count -> [(first marker, name id, launches per step, markers)]
    for a, b in zip(bounds[:-1], bounds[1:]):
        if b - a >= MIN_STEPS:
            markers, per_step = _markers(start[a:b])
            if MIN_STEPS <= len(markers) <= n // 2:
                votes.setdefault(len(markers), []).append((int(markers[0]), int(name_id[a]), per_step, markers))
    if not votes:
        return _steady(name_id, np.sort(start), dev, profile)
    k = min(votes, key=lambda c: (-len(votes[c]), c))  # most names share it; then fewer, longer steps
    _, nid, per_step, markers = min(votes[k], key=lambda v: v[:2])
    return dev, _kernel_name(profile, nid), per_step, markers, None


def _kernel_name(profile, nid: int) -> str:
    return profile.one(f"SELECT coalesce(max(value), '<unnamed kernel>') FROM strings WHERE id = {nid}")[0]


def _steady(names: np.ndarray, starts: np.ndarray, dev: int, profile) -> tuple | None:
    """The device's only kernel launched N >= MIN_STEPS times (starts sorted) at a steady period: (device, its
    name, 1, the N launch starts, the median period), or None. Steady: the period's spread (90th minus 10th
    percentile) at most STEADY_SPREAD of its median."""
    if len(names) < MIN_STEPS or (names != names[0]).any():
        return None
    period = np.diff(starts)
    median = float(np.median(period))
    if median <= 0 or float(np.percentile(period, 90) - np.percentile(period, 10)) > STEADY_SPREAD * median:
        return None
    return dev, _kernel_name(profile, int(names[0])), 1, starts, median


def _busy(profile, w, devices: list[int], starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, list]:
    """Per step: the lowest kernel-busy % over devices (of the step inside the window) and its device."""
    unions = kernel_unions(profile, w, devices)
    a = np.clip(starts, w.start_ns, w.end_ns)
    b = np.clip(ends, w.start_ns, w.end_ns)
    length = (b - a).astype(np.float64)
    pct = np.stack([np.where(length > 0, 100.0 * unions[d].overlap(a, b) / np.maximum(length, 1), 0.0)
                    for d in devices])
    low = np.argmin(pct, axis=0)
    return np.clip(pct[low, np.arange(len(starts))], 0.0, 100.0), [devices[i] for i in low]


def run(profile, params: Params) -> Result:
    w = profile.window(params.start_ms, params.end_ms)
    devices = profile.check_gpu(params.gpu)
    notes: list[str] = []
    out = {"method": "none"}
    starts = ends = np.zeros(0, np.int64)

    has_nvtx = profile.has_table("nvtx")
    if has_nvtx or params.label is not None:
        best = _pick_nvtx(profile, w, devices, _nvtx_candidates(profile, w, params.label), params.label is not None)
        if best is not None:
            out = {"method": "nvtx", "label": best.label, "pid": best.thread >> 24, "tid": best.thread & 0xFFFFFF}
            starts, ends = best.starts, best.ends
        elif params.label is not None:
            notes.append(f"No NVTX label group containing {params.label!r} has {MIN_STEPS} or more "
                         "non-overlapping ranges on one thread in this window.")
        else:
            notes.append("No NVTX range repeats as a step (3+ non-overlapping ranges of one label group on a "
                         "thread, named like step/iter/batch/epoch, or top-level and back-to-back, holding GPU work; "
                         "operator ranges such as aten::to, library calls such as MPI_Sendrecv, library internals "
                         "such as isResharding, and layers such as Identity_0..15 inside one range are not steps); "
                         "tried the kernel pattern. Pass label= to choose the step range.")
    if out["method"] == "none" and params.label is None:
        found = _kernel_pattern(profile, w, devices)
        if found is not None:
            dev, name, per_step, occ, period = found
            out = {"method": "kernel_pattern", "kernel_name": name, "device_id": dev, "launches_per_step": per_step,
                   "period_ns": period}
            starts, ends = occ[:-1], occ[1:]
            if period is not None:  # a steady loop: N launches are N steps, the last one period long
                starts, ends = occ, np.append(occ[1:], occ[-1] + int(round(period)))
                notes.append(f"The device ran this kernel only, {len(occ)} launches at a steady period: {len(occ)} "
                             "steps, from one launch to the next; the last step is given the median period.")
            elif per_step == 1:
                notes.append(f"Steps run from one launch of this kernel to the next: {len(occ)} launches give "
                             f"{len(occ) - 1} steps (the part after the last launch is not a step).")
            else:
                notes.append(f"This kernel runs {per_step} times per step, in groups set apart by longer gaps; steps "
                             f"run from the first launch of one group to the first of the next: {len(occ)} groups "
                             f"give {len(occ) - 1} steps (the part after the last group's first launch is not a "
                             "step).")
        else:
            notes.append("No NVTX step ranges and no repeating kernel pattern (a kernel name giving 3 to n/2 step "
                         "markers on the busiest device): no steps found.")
    if not has_nvtx and params.label is not None:
        notes.append("No NVTX events in this profile.")

    base = dict(tool="iterations", window=WindowInfo.of(w), step_count=len(starts), notes=notes, **out)
    if len(starts) == 0:
        return Result(**base)
    dur = ends - starts
    busy, busy_dev = _busy(profile, w, devices, starts, ends)
    median = float(np.median(dur))
    steps = [Step(index=i, start_ns=int(starts[i]), end_ns=int(ends[i]), duration_ns=int(dur[i]),
                  gpu_busy_pct=round(float(busy[i]), 3), gpu_busy_device=busy_dev[i])
             for i in range(min(len(starts), params.limit))]

    def extreme(i: int) -> StepExtreme:
        return StepExtreme(index=i, start_ns=int(starts[i]), duration_ns=int(dur[i]),
                           ratio_to_median=round(float(dur[i]) / median, 3) if median > 0 else 0.0,
                           gpu_busy_pct=round(float(busy[i]), 3))

    if len(starts) > params.limit:
        notes.append(f"steps lists the first {params.limit} of {len(starts)} steps (raise limit for more).")
    split = _per_device(profile, w, devices, starts[:len(steps)], ends[:len(steps)]) if params.per_device else []
    return Result(**base, busy_devices=list(devices), mean_ns=round(float(dur.mean()), 1), median_ns=median,
                  stdev_ns=round(float(dur.std()), 1), p90_ns=round(float(np.percentile(dur, 90)), 1),
                  slowest=extreme(int(np.argmax(dur))), fastest=extreme(int(np.argmin(dur))),
                  steps_start_ns=int(starts.min()), steps_end_ns=int(ends.max()), steps=steps, step_devices=split)


def _per_device(profile, w, devices: list[int], starts: np.ndarray, ends: np.ndarray) -> list[StepDevice]:
    """Each step on each device: compute, communication, exposed communication, idle, main collective."""
    a = np.clip(starts, w.start_ns, w.end_ns)
    b = np.clip(ends, w.start_ns, w.end_ns)
    busy = kernel_unions(profile, w, devices)
    comm = comm_kernels(profile, w)
    rows: dict[int, list[StepDevice]] = {}
    for d in devices:
        cs, ce, names = comm.get(d, (np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, object)))
        comm_u, compute_u = comm_and_compute(profile, w, d, cs, ce)
        compute, comm_t, busy_t = compute_u.overlap(a, b), comm_u.overlap(a, b), busy[d].overlap(a, b)
        main = _main_collectives(a, b, cs, ce, names)
        rows[d] = [StepDevice(index=i, device_id=d, compute_ns=int(compute[i]), comm_ns=int(comm_t[i]),
                              exposed_comm_ns=int(busy_t[i] - compute[i]), kernel_idle_ns=int(b[i] - a[i] - busy_t[i]),
                              collective=main[i][0], collective_ns=main[i][1]) for i in range(len(a))]
    return [rows[d][i] for i in range(len(a)) for d in devices]


def _main_collectives(a: np.ndarray, b: np.ndarray, cs: np.ndarray, ce: np.ndarray,
                      names: np.ndarray) -> list[tuple[str | None, int]]:
    """Per step [a, b): the NCCL kernel name with the most time among those starting in it, and that time."""
    out: list[dict[str, int]] = [{} for _ in range(len(a))]
    step = np.searchsorted(a, cs, side="right") - 1
    for i, s, e, n in zip(step, cs, ce, names):
        if 0 <= i < len(a) and s < b[i]:
            out[i][str(n)] = out[i].get(str(n), 0) + int(e - s)
    best = [min(x.items(), key=lambda kv: (-kv[1], kv[0])) if x else (None, 0) for x in out]  # ties: by name
    return [(n, int(t)) for n, t in best]


TOOL = Tool(
    name="iterations",
    summary=("Finds the repeating steps (iterations) of the run, from NVTX step ranges or else a repeating kernel "
             "pattern, and reports each step's duration and GPU kernel-busy %, the mean/median/p90, and the "
             "slowest and fastest step."),
    params=Params, result=Result, run=run,
)
