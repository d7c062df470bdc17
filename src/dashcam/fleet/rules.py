"""The reduce step: cross-rank rules over the digests, each a named rule with its constants and reasons.

The unit of comparison is (report, device): a report of one rank holds one GPU, a report of a node
several. Every threshold is below with its reason (docs/definitions.md lists them; docs/fleet.md states
the rules).

straggler and node straggler, on one clock
    When the units share a clock and a collective kind (arrivals.py): the unit last at the collectives, late
    by LATE_MIN_MS and CLOCK_MARGIN times the clock uncertainty, or the host whose units are all late by a
    similar amount (NODE_SIMILAR_SHARE); its cause chain from what its report shows before its arrival, each
    cause from CAUSE_MIN_MS (compute also CAUSE_MIN_PCT). Otherwise, from the steps:
straggler
    In a blocking collective every rank finishes together, so the rank that arrived last waits least:
    per step, the units whose main collective is shortest (within LAST_TOLERANCE_PCT of the step's median
    collective of the shortest) arrived last. A unit is a straggler when it is last in at least
    STRAGGLER_MIN_LAST_SHARE of the steps it was compared in and its median compute per step is at least
    STRAGGLER_MIN_COMPUTE_EXCESS_PCT above the median unit's. (The rank with the most NCCL time is the one
    that waited most: the opposite of the straggler.)
    Subgroup collectives: a step's units are compared only with those whose main collective is the same
    kernel; groups of fewer than MIN_UNITS units cast no vote. A step in which more than half of a group
    ties for last singles nobody out. Unequal step counts: the steps are compared by index over the
    shortest common run (and an incomplete finding names the units with other counts). No steps with a
    collective on any unit: the whole capture is one step (total NCCL time, total compute).
node straggler
    Every unit of one host is a straggler, the fleet has more than one host: one finding for the host.
idle outlier
    A unit idle at least IDLE_OUTLIER_RATIO times the median unit's idle share and IDLE_OUTLIER_MIN_PP
    percentage points above it; its dominant gap cause (gpu_gaps) is named.
slow GPU
    The same kernel (not NCCL: collective kernels last as long as the wait) with a mean duration at least
    SLOW_GPU_MIN_RATIO times its median over the units that run it (MIN_UNITS or more, each with at least
    SLOW_GPU_MIN_LAUNCHES launches). Units already named stragglers carry their kernels' ratio there.
different kernel mix
    A unit's main kernels (KERNEL_MIX_MIN_SHARE_PCT or more of its top kernels' time, NCCL apart) include
    one that most units do not run, or miss one that is main on most units.
incomplete fleet
    Reports that failed (unreadable, truncated, a worker that died twice) or hold no GPU work; units with
    another step count than most; different nsys versions or GPU models.
"""
from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from pydantic import BaseModel, Field

from dashcam.fleet import arrivals as arr
from dashcam.fleet.digest import DeviceDigest, Digest
from dashcam.text.format import count

# Units in a comparison: a median of two is no majority; three is the fewest where one can stand out.
MIN_UNITS = 3
# Ranks leave a collective together within a few µs, so their collective times differ by when they
# arrived; within 5 % of the median collective two arrivals are a tie (launch jitter, clock reads).
LAST_TOLERANCE_PCT = 5.0
# Last in at least half the steps: a rank that holds the others back does so step after step; random
# jitter spreads "last" over the ranks (1/N of the steps each).
STRAGGLER_MIN_LAST_SHARE = 0.5
# Healthy data-parallel ranks run the same kernels on equal shares: their compute per step agrees within a
# few percent. 10 % more is clearly slower work, the cause the others wait for.
STRAGGLER_MIN_COMPUTE_EXCESS_PCT = 10.0
# Idle share at 3 times the median and 10 points above it: far outside the spread of equal ranks, and large
# enough to matter (a tenth of the run).
IDLE_OUTLIER_RATIO = 3.0
IDLE_OUTLIER_MIN_PP = 10.0
# The same kernel 20 % slower on one GPU than the median: beyond run-to-run noise of a kernel's mean
# (a few %); a GPU clocked down, hot, on another model or fed other shapes.
SLOW_GPU_MIN_RATIO = 1.2
SLOW_GPU_MIN_LAUNCHES = 3
# A kernel with a tenth of a unit's kernel time is part of what it runs; below, it is a detail.
KERNEL_MIX_MIN_SHARE_PCT = 10.0
# ... and with at least 0.5 ms in the whole capture: a few launches of microseconds (a pure-NCCL rank's
# rounding-sized helpers) are not a code path.
KERNEL_MIX_MIN_MS = 0.5

# -- arrivals on one clock (arrivals.py) --
# A rank late by less than a millisecond is launch jitter and host noise, not a straggler; the late ranks and
# nodes of real multi-node jobs are 10-40 ms behind.
LATE_MIN_MS = 1.0
# Lateness must also be twice the clock uncertainty (the median spread of the collectives' end times): an
# effect the size of the error between two node clocks is no effect.
CLOCK_MARGIN = 2.0
# A node is late as a node when its least late unit is at least half as late as its latest: all of its ranks
# behind by a similar amount (one slow rank on a node is a rank straggler).
NODE_SIMILAR_SHARE = 0.5
# A cause is named only when it accounts for at least 0.5 ms and, for compute, at least 10 % more than the
# others': never from the microseconds of rounding a pure-NCCL rank shows as "compute".
CAUSE_MIN_MS = 0.5
CAUSE_MIN_PCT = 10.0

THRESHOLDS = {f"fleet.{name}": value for name, value in dict(globals()).items() if name.isupper()}

NODE_CHECK_ALL_UP_TO = 16  # hosts: every one is tested as a late node; beyond, those with a late unit
HOST_OPTIONS = "nsys profile --trace=cuda,nvtx,osrt,mpi --sample=process-tree"  # what shows a late host
SEVERITY = {"straggler": "high", "node_straggler": "high", "idle_outlier": "medium", "slow_gpu": "medium",
            "kernel_mix": "low", "incomplete": "low"}
ORDER = list(SEVERITY)
MIXED_SHOWN = 3  # nsys versions or GPU models named in a mixed fleet's sentence; the rest are counted


@dataclass
class Unit:
    """One (report, device) of the fleet and what the rules derive for it."""

    d: Digest
    dev: DeviceDigest
    multi: bool  # the report holds several devices
    compute_step_ns: int | None = None
    collective_step_ns: int | None = None
    last_steps: int = 0
    voted_steps: int = 0
    late_ns: int | None = None  # median lateness at the collectives on one clock (arrivals.py)
    last_arrivals: int = 0
    arrivals_compared: int = 0
    flags: list[str] = field(default_factory=list)

    @property
    def rank(self) -> int | None:
        return self.d.rank

    @property
    def device_id(self) -> int:
        return self.dev.device_id

    @property
    def label(self) -> str:
        return f"rank {self.rank}" + (f" GPU {self.device_id}" if self.multi else "")

    @property
    def report(self) -> str:
        return self.d.path


class FleetFinding(BaseModel):
    kind: str = Field(description="straggler, node_straggler, idle_outlier, slow_gpu, kernel_mix, incomplete.")
    severity: str
    title: str
    sentence: str = Field(description="The finding in one sentence, as the paragraph uses it.")
    ranks: list[int] = Field(default_factory=list)
    hosts: list[str] = Field(default_factory=list)
    reports: list[str] = Field(default_factory=list, description="The reports concerned (paths).")
    devices: list[int] = Field(default_factory=list, description="The devices concerned, in the order of reports.")
    figures: dict[str, float | int | str] = Field(default_factory=dict)
    commands: list[str] = Field(default_factory=list, description="dashcam commands that drill into it.")


def units_of(digests: list[Digest]) -> list[Unit]:
    return [Unit(d, dev, len(d.devices) > 1) for d in digests if not d.error for dev in d.devices]


def _median(xs) -> float:
    return float(statistics.median(xs))


def _cmd(tool: str, path: str, **args) -> str:
    from dashcam.evidence.models import Evidence

    return Evidence(tool=tool, args={k: v for k, v in args.items() if v is not None}, result={}).command(path)


def _pct(a: float, b: float) -> float:
    return round(100.0 * (a - b) / b, 1) if b else 0.0


def _ms(ns: float | int) -> str:
    from dashcam.text.format import duration

    return duration(ns)


# -- the steps ---------------------------------------------------------------------------------------

def compare_steps(units: list[Unit]) -> dict:
    """Fill each unit's compute / collective per step and its last-arrival votes; the comparison's facts."""
    stepped = [u for u in units if u.dev.steps.collective_ns and any(c >= 0 for c in u.dev.steps.collective)]
    facts: dict = {"method": "steps"}
    if not stepped:  # fallback: the whole capture is one step
        for u in units:
            if u.dev.nccl_ns:
                busy = round(u.dev.kernel_busy_pct / 100.0 * u.d.window_ns)
                u.compute_step_ns, u.collective_step_ns = max(0, busy - u.dev.nccl_ns), u.dev.nccl_ns
        voters = [u for u in units if u.collective_step_ns is not None]
        facts["method"] = "whole_capture"
        facts["steps_compared"] = 1 if voters else 0
        if voters:
            _vote(voters, np.array([[u.collective_step_ns] for u in voters], float),
                  np.zeros((len(voters), 1), np.int64), 1)
        return facts
    counts = Counter(len(u.dev.steps.collective_ns) for u in stepped)
    n = min(counts)
    facts["steps_compared"] = n
    facts["step_counts"] = dict(sorted(counts.items()))
    for u in units:
        s = u.dev.steps
        if s.compute_ns:
            u.compute_step_ns = round(_median(s.compute_ns[:n] or s.compute_ns))
        if s.collective_ns:
            u.collective_step_ns = round(_median(s.collective_ns[:n] or s.collective_ns))
    names: dict[str, int] = {}
    kind = np.full((len(stepped), n), -1, np.int64)  # the step's main collective, one id per kernel name
    for row, u in enumerate(stepped):
        ids = np.array([names.setdefault(c, len(names)) for c in u.d.collectives] + [-1], np.int64)
        kind[row] = ids[np.asarray(u.dev.steps.collective[:n], np.int64)]  # -1 indexes the appended -1
    _vote(stepped, np.array([u.dev.steps.collective_ns[:n] for u in stepped], float), kind, len(names))
    return facts


def _vote(units: list[Unit], t: np.ndarray, kind: np.ndarray, kinds: int) -> None:
    """Per step (column) and per collective kind: the units of a group of MIN_UNITS or more vote; those whose
    collective time ``t`` is within LAST_TOLERANCE_PCT of the group's median above its minimum arrived last,
    unless the group is all alike or more than half of it ties."""
    voted = np.zeros(len(units), np.int64)
    last = np.zeros(len(units), np.int64)
    for k in range(kinds):
        member = kind == k
        x = np.where(member, t, np.nan)
        size = member.sum(axis=0)
        ok = size >= MIN_UNITS
        if not ok.any():
            continue
        x, member, size = x[:, ok], member[:, ok], size[ok]
        low, high, med = np.nanmin(x, axis=0), np.nanmax(x, axis=0), np.nanmedian(x, axis=0)
        tol = LAST_TOLERANCE_PCT / 100.0 * med
        is_last = member & (x <= low + tol)
        counts = is_last.sum(axis=0)
        decisive = (high - low > tol) & (counts <= size / 2)
        voted += member.sum(axis=1)
        last += (is_last & decisive).sum(axis=1)
    for u, v, n_last in zip(units, voted, last):
        u.voted_steps += int(v)
        u.last_steps += int(n_last)


# -- the rules ---------------------------------------------------------------------------------------

def stragglers(units: list[Unit], facts: dict, kstats: dict) -> list[FleetFinding]:
    computes = [u.compute_step_ns for u in units if u.compute_step_ns is not None]
    if len(computes) < MIN_UNITS:
        return []
    med_c = _median(computes)
    colls = [u.collective_step_ns for u in units if u.collective_step_ns is not None]
    med_coll = _median(colls) if colls else 0
    found = [u for u in units if u.voted_steps and u.last_steps / u.voted_steps >= STRAGGLER_MIN_LAST_SHARE
             and u.compute_step_ns is not None
             and u.compute_step_ns >= med_c * (1 + STRAGGLER_MIN_COMPUTE_EXCESS_PCT / 100.0)]
    out = []
    hosts = {u.d.host for u in units}
    for host in sorted(h for h in hosts if h):
        on = [u for u in units if u.d.host == host]
        if len(hosts) > 1 and len(on) > 1 and all(u in found for u in on):
            out.append(_node_straggler(host, on, units, med_coll))
            found = [u for u in found if u not in on]
    for u in sorted(found, key=lambda u: (-u.last_steps / u.voted_steps, -(u.compute_step_ns or 0))):
        out.append(_straggler(u, med_c, med_coll, facts, kstats))
    return out


def arrival_stragglers(units: list[Unit], kstats: dict) -> tuple[list[FleetFinding], arr.FleetArrivals] | None:
    """Late ranks and late nodes from the arrivals on one clock (arrivals.py); None when the units share no
    clock and collective kind (then the steps decide: ``stragglers``)."""
    t = arr.build(units, MIN_UNITS, round(LATE_MIN_MS * 1e6), CLOCK_MARGIN)
    if t is None:
        return None
    late, last = arr.lateness(t), arr.last_mask(t)
    table = arr.summary(t, late, last)
    for i, u in enumerate(t.units):
        u.late_ns, u.last_arrivals, u.arrivals_compared = table.late_ns[i], table.last_count[i], table.compared[i]
    n = t.arrival.shape[1]
    found: list[FleetFinding] = []
    on_late_node: set[int] = set()
    hosts = sorted({u.d.host for u in t.units if u.d.host})
    # every host of a small fleet; of a large one those with a late unit (a node of most of the ranks is not late
    # against the others' median, only against the other hosts')
    suspects = hosts if len(hosts) <= NODE_CHECK_ALL_UP_TO else \
        sorted({u.d.host for u in t.units if u.d.host and (u.late_ns or 0) >= t.threshold})
    for host in suspects if len(hosts) > 1 else []:
        grp = np.array([u.d.host == host for u in t.units])
        if grp.sum() < 2:
            continue
        with np.errstate(all="ignore"):
            behind = t.arrival[grp] - np.nanmedian(t.arrival[~grp], axis=0)
            each = np.nanmedian(behind, axis=1)
        all_late = np.where(np.isnan(behind), False, behind >= t.threshold).all(axis=0)
        if all_late.sum() >= STRAGGLER_MIN_LAST_SHARE * n and each.min() >= NODE_SIMILAR_SHARE * each.max():
            found.append(_late_node(t, host, grp, behind, int(all_late.sum())))
            on_late_node |= set(np.flatnonzero(grp).tolist())
    for i, u in enumerate(t.units):
        if i in on_late_node or not u.arrivals_compared:
            continue
        if u.last_arrivals >= STRAGGLER_MIN_LAST_SHARE * u.arrivals_compared and u.late_ns >= t.threshold:
            grp = np.arange(len(t.units)) == i
            found.append(_late_rank(t, u, grp, _first(late[i]), kstats))
    found.sort(key=lambda f: -int(f.figures.get("late_ns", 0)))
    return found, table


def _first(x: np.ndarray) -> float:
    """The first figure of a unit's row that is not NaN: its first collective (a communicator it is not in has
    collectives before it)."""
    ok = np.flatnonzero(~np.isnan(x))
    return float(x[ok[0]]) if len(ok) else float("nan")


def _why(t: arr.Table, grp: np.ndarray, first_late: float) -> tuple[str, dict, list[str]]:
    """The cause chain's sentence, its figures and the causes' kinds."""
    floors = {"cause_min_ns": round(CAUSE_MIN_MS * 1e6), "cause_min_pct": CAUSE_MIN_PCT}
    host_data = sorted({k for u, g in zip(t.units, grp) if g for k in u.d.host_data})
    found = arr.causes(t, grp, first_late, floors, _ms)
    figures = {k: v for c in found for k, v in c.figures.items()}
    parts = [c.sentence for c in found]
    if any(c.kind == "host" for c in found) and not any(c.kind in ("mpi", "osrt") for c in found):
        parts.append(arr.host_note(host_data, HOST_OPTIONS))
    if not found:
        figures["cause_min_ns"] = floors["cause_min_ns"]
        floor = _ms(floors["cause_min_ns"])
        parts = [f"the capture does not show why: it started and joined its communicator with the others, and "
                 f"neither its compute nor its idle time before the collectives differs by {floor} or more; "
                 f"`{HOST_OPTIONS}` records what its host did"]
    return "; ".join(parts), figures, [c.kind for c in found] or ["unknown"]


def _late_rank(t: arr.Table, u: Unit, grp: np.ndarray, first_late: float, kstats: dict) -> FleetFinding:
    why, why_figures, kinds = _why(t, grp, first_late)
    ratio = _kernel_ratio(u, kstats) if "compute" in kinds else None
    if ratio is not None and ratio >= SLOW_GPU_MIN_RATIO:  # more compute: slower kernels, or more of them
        why_figures["kernel_ratio"] = ratio
        why = why.replace(" more)", f" more: its kernels run {ratio:g}x as long as on the median GPU)", 1)
    figures = {"rank": u.rank, "gpu": u.device_id, "last_arrivals": u.last_arrivals,
               "collectives_compared": u.arrivals_compared, "late_ns": u.late_ns,
               "clock_uncertainty_ns": t.uncertainty, "threshold_ns": t.threshold, "first_late_ns": round(first_late),
               "cause": ", ".join(kinds), **why_figures}
    sentence = (f"{_cap(u.label)} is the straggler: it arrived last at the collective in {u.last_arrivals} of "
                f"{u.arrivals_compared} collectives, a median {_ms(u.late_ns)} after the other ranks on one clock "
                f"(clock uncertainty {_ms(t.uncertainty)}), so they wait for it. Why: {why}.")
    return _of_unit("straggler", u, f"{u.label} is the straggler: last in {u.last_arrivals} of "
                                    f"{u.arrivals_compared} collectives, {_ms(u.late_ns)} late ({', '.join(kinds)})",
                    sentence, figures, [_cmd("gpu_gaps", u.report, gpu=u.device_id),
                                        _cmd("iterations", u.report, per_device="true"),
                                        f"dashcam summary {_q(u.report)}"])


def _of_unit(kind: str, u: Unit, title: str, sentence: str, figures: dict, commands: list[str]) -> FleetFinding:
    """A finding about one unit."""
    return FleetFinding(kind=kind, severity=SEVERITY[kind], ranks=[u.rank], hosts=_host(u), reports=[u.report],
                        devices=[u.device_id], title=title, sentence=sentence, figures=figures, commands=commands)


def _late_node(t: arr.Table, host: str, grp: np.ndarray, behind: np.ndarray, late_at: int) -> FleetFinding:
    on = [u for u, g in zip(t.units, grp) if g]
    with np.errstate(all="ignore"):
        late = round(float(np.nanmedian(behind)))
        first = float(np.nanmedian(behind[:, 0]))
    why, why_figures, kinds = _why(t, grp, first)
    n = t.arrival.shape[1]
    ranks = sorted({u.rank for u in on})
    figures = {"host": host, "gpus_on_host": len(on), "late_collectives": late_at, "collectives_compared": n,
               "late_ns": late, "clock_uncertainty_ns": t.uncertainty, "threshold_ns": t.threshold,
               "first_late_ns": round(first), "cause": ", ".join(kinds), **why_figures}
    listed = ", ".join(str(r) for r in ranks)
    sentence = (f"Node `{host}` is the straggler: its {len(on)} GPUs (rank{'s' if len(ranks) > 1 else ''} {listed}) "
                f"arrived a median {_ms(late)} after the other nodes' at {late_at} of {n} collectives on one clock "
                f"(clock uncertainty {_ms(t.uncertainty)}), so every other rank waits for them. Why: {why}.")
    reports = list(dict.fromkeys(u.report for u in on))
    return FleetFinding(kind="node_straggler", severity=SEVERITY["node_straggler"], ranks=ranks, hosts=[host],
                        reports=reports, devices=[u.device_id for u in on], figures=figures,
                        title=f"node {host} is the straggler: {len(on)} GPUs {_ms(late)} late at {late_at} of {n} "
                              f"collectives ({', '.join(kinds)})",
                        sentence=sentence,
                        commands=[_cmd("gpu_gaps", reports[0], gpu=on[0].device_id)]
                        + [f"dashcam summary {_q(r)}" for r in reports[:2]])


def _kernel_ratio(u: Unit, kstats: dict) -> float | None:
    """Mean over the unit's top non-NCCL kernels of their mean duration over the median unit's."""
    ratios = [r for _, r, _ in _kernel_ratios(u, kstats)]
    return round(statistics.fmean(ratios), 2) if ratios else None


def _kernel_ratios(u: Unit, kstats: dict) -> list[tuple[str, float, float]]:
    """(kernel, mean over the median mean, median mean ns) for the unit's top non-NCCL kernels run by
    MIN_UNITS or more units with SLOW_GPU_MIN_LAUNCHES launches (``kstats``: kernel_stats)."""
    out = []
    for k in u.dev.top:
        means, med = kstats.get(k.name, ({}, 0.0))
        if id(u) in means and med > 0:
            out.append((k.name, round(means[id(u)] / med, 2), med))
    return out


def kernel_stats(units: list[Unit]) -> dict[str, tuple[dict[int, float], float]]:
    """Per non-NCCL kernel run by MIN_UNITS or more units (SLOW_GPU_MIN_LAUNCHES launches each): each unit's
    mean duration and their median."""
    means: dict[str, dict[int, float]] = {}
    for u in units:
        for k in u.dev.top:
            if "nccl" not in k.name.lower() and k.count >= SLOW_GPU_MIN_LAUNCHES:
                means.setdefault(k.name, {})[id(u)] = k.avg_ns
    return {n: (m, _median(list(m.values()))) for n, m in means.items() if len(m) >= MIN_UNITS}


def _straggler(u: Unit, med_c: float, med_coll: float, facts: dict, kstats: dict) -> FleetFinding:
    excess = _pct(u.compute_step_ns, med_c)
    ratio = _kernel_ratio(u, kstats)
    figures = {"rank": u.rank, "gpu": u.device_id, "last_steps": u.last_steps, "voted_steps": u.voted_steps,
               "compute_step_ns": u.compute_step_ns, "median_compute_step_ns": round(med_c),
               "compute_excess_pct": excess, "collective_step_ns": u.collective_step_ns or 0,
               "median_collective_step_ns": round(med_coll)}
    if ratio is not None:
        figures["kernel_ratio"] = ratio
    steps = "steps" if facts["method"] == "steps" else "captures (the whole capture compared)"
    why = (f"its kernels run {ratio:g}x as long as on the median GPU" if ratio and ratio >= SLOW_GPU_MIN_RATIO
           else "its kernels are not slower: it runs more of them, or waits on its host")
    sentence = (f"{_cap(u.label)} is the straggler: it arrived last at the collective in {u.last_steps} of "
                f"{u.voted_steps} {steps}, with {_ms(u.compute_step_ns)} of compute per step against a median "
                f"of {_ms(med_c)} ({excess:g} % more; {why}), so the others wait: their median collective "
                f"takes {_ms(med_coll)} per step, its own {_ms(u.collective_step_ns or 0)}.")
    return _of_unit("straggler", u, f"{u.label} is the straggler: last in {u.last_steps} of {u.voted_steps} "
                                    f"{steps}, compute +{excess:g} %", sentence, figures,
                    [_cmd("iterations", u.report, per_device="true"),
                     _cmd("top_kernels", u.report, gpu=u.device_id if u.multi else None),
                     f"dashcam summary {_q(u.report)}"])


def _node_straggler(host: str, on: list[Unit], units: list[Unit], med_coll: float) -> FleetFinding:
    """The host's units against the units of the other hosts."""
    c = round(_median([u.compute_step_ns for u in on]))
    med_c = _median([u.compute_step_ns for u in units if u not in on and u.compute_step_ns is not None] or [c])
    excess = _pct(c, med_c)
    last = min(u.last_steps for u in on)
    voted = max(u.voted_steps for u in on)
    reports = list(dict.fromkeys(u.report for u in on))
    figures = {"host": host, "gpus_on_host": len(on), "last_steps": last, "voted_steps": voted,
               "compute_step_ns": c, "others_median_compute_step_ns": round(med_c), "compute_excess_pct": excess,
               "median_collective_step_ns": round(med_coll)}
    sentence = (f"Node `{host}` is the straggler: all {len(on)} of its GPUs arrived last at the collective in "
                f"{last} of {voted} steps, with a median of {_ms(c)} of compute per step against "
                f"{_ms(med_c)} on the other hosts ({excess:g} % more): look at that host (clocks, thermals, "
                "its network link, its input pipeline).")
    return FleetFinding(kind="node_straggler", severity=SEVERITY["node_straggler"],
                        ranks=sorted({u.rank for u in on}), hosts=[host], reports=reports,
                        devices=[u.device_id for u in on], figures=figures,
                        title=f"node {host} is the straggler: {len(on)} GPUs, compute +{excess:g} %",
                        sentence=sentence,
                        commands=[f"dashcam summary {_q(r)}" for r in reports[:2]]
                        + [_cmd("iterations", reports[0], per_device="true")])


def idle_outliers(units: list[Unit], skip: set[int] = frozenset()) -> list[FleetFinding]:
    """``skip``: units a straggler finding names (their idle time is the lateness it explains)."""
    if len(units) < MIN_UNITS:
        return []
    med = _median([u.dev.idle_pct for u in units])
    out = []
    for u in sorted(units, key=lambda u: -u.dev.idle_pct):
        if id(u) in skip:
            continue
        if u.dev.idle_pct >= max(med * IDLE_OUTLIER_RATIO, med + IDLE_OUTLIER_MIN_PP):
            cause = u.dev.dominant_cause or "unknown"
            share = round(100.0 * u.dev.causes.get(cause, 0) / u.dev.idle_ns, 1) if u.dev.idle_ns else 0.0
            figures = {"rank": u.rank, "gpu": u.device_id, "idle_pct": u.dev.idle_pct, "idle_ns": u.dev.idle_ns,
                       "median_idle_pct": round(med, 3), "dominant_cause": cause, "cause_pct": share}
            out.append(FleetFinding(
                kind="idle_outlier", severity=SEVERITY["idle_outlier"], ranks=[u.rank], hosts=_host(u),
                reports=[u.report], devices=[u.device_id], figures=figures,
                title=f"{u.label} kernel-idle {u.dev.idle_pct:.1f} % (median {med:.1f} %), mostly {cause}",
                sentence=(f"{_cap(u.label)} is kernel-idle {u.dev.idle_pct:.1f} % of its window against a median "
                          f"of {med:.1f} %, mostly `{cause}` ({share:g} % of its kernel-idle time)."),
                commands=[_cmd("gpu_gaps", u.report, gpu=u.device_id)]))
    return out


def slow_gpus(units: list[Unit], skip: set[int], kstats: dict) -> list[FleetFinding]:
    out = []
    for u in units:
        if id(u) in skip:
            continue
        slow = sorted([x for x in _kernel_ratios(u, kstats) if x[1] >= SLOW_GPU_MIN_RATIO], key=lambda x: -x[1])
        if not slow:
            continue
        name, ratio, med = slow[0]
        mean = next(k.avg_ns for k in u.dev.top if k.name == name)
        figures = {"rank": u.rank, "gpu": u.device_id, "kernel": name, "ratio": ratio, "avg_ns": mean,
                   "median_avg_ns": med, "slow_kernels": len(slow)}
        more = f" (and {len(slow) - 1} more kernels)" if len(slow) > 1 else ""
        out.append(FleetFinding(
            kind="slow_gpu", severity=SEVERITY["slow_gpu"], ranks=[u.rank], hosts=_host(u), reports=[u.report],
            devices=[u.device_id], figures=figures,
            title=f"{u.label}: `{name}` {ratio:g}x slower than on the median GPU{more}",
            sentence=(f"{_cap(u.label)} runs `{name}` {ratio:g}x as long as the median GPU "
                      f"({_ms(mean)} against {_ms(med)} per launch){more}: check its clocks, temperature and "
                      "model, or the shapes it is fed."),
            commands=[_cmd("top_kernels", u.report, gpu=u.device_id, name_contains=name)]))
    return out


def kernel_mix(units: list[Unit]) -> list[FleetFinding]:
    if len(units) < MIN_UNITS:
        return []
    main, runs = {}, {}
    for u in units:
        ks = [k for k in u.dev.top if "nccl" not in k.name.lower()]
        total = sum(k.total_ns for k in ks) or 1
        main[id(u)] = {k.name for k in ks if 100.0 * k.total_ns / total >= KERNEL_MIX_MIN_SHARE_PCT
                       and k.total_ns >= KERNEL_MIX_MIN_MS * 1e6}
        runs[id(u)] = {k.name for k in u.dev.top}
    common = Counter(n for s in main.values() for n in s)
    ran = Counter(n for s in runs.values() for n in s)
    half = len(units) / 2
    out = []
    for u in units:
        extra = sorted(n for n in main[id(u)] if ran[n] <= half)
        missing = sorted(n for n, c in common.items() if c > half and n not in runs[id(u)])
        if not extra and not missing:
            continue
        parts = ([f"runs {', '.join(f'`{n}`' for n in extra[:2])} that most GPUs do not"] if extra else []) + \
                ([f"lacks {', '.join(f'`{n}`' for n in missing[:2])} that most GPUs run"] if missing else [])
        out.append(FleetFinding(
            kind="kernel_mix", severity=SEVERITY["kernel_mix"], ranks=[u.rank], hosts=_host(u),
            reports=[u.report], devices=[u.device_id],
            figures={"rank": u.rank, "gpu": u.device_id, "extra_kernels": len(extra),
                     "missing_kernels": len(missing)},
            title=f"{u.label}: a different kernel mix",
            sentence=f"{_cap(u.label)} {' and '.join(parts)}: another code path, shapes or library.",
            commands=[_cmd("top_kernels", u.report, gpu=u.device_id if u.multi else None)]))
    return out


def incomplete(digests: list[Digest], units: list[Unit], facts: dict) -> list[FleetFinding]:
    out = []
    failed = [d for d in digests if d.error and d.error_kind != "empty"]
    empty = [d for d in digests if d.error_kind == "empty"]
    for group, what in ((failed, "could not be analysed"), (empty, "hold no GPU work")):
        if not group:
            continue
        names = ", ".join(f"`{Path(d.path).name}`" for d in group[:3]) + (", ..." if len(group) > 3 else "")
        out.append(FleetFinding(
            kind="incomplete", severity=SEVERITY["incomplete"], ranks=[d.rank for d in group if d.rank is not None],
            reports=[d.path for d in group], figures={"reports": len(group), "fleet_reports": len(digests)},
            title=f"{len(group)} of {len(digests)} reports {what}",
            sentence=f"{len(group)} of {len(digests)} reports {what} ({names}); the rest is analysed.",
            commands=[f"dashcam info {_q(d.path)}" for d in group[:3]]))
    counts = facts.get("step_counts") or {}
    if len(counts) > 1:
        mode = max(counts, key=lambda k: (counts[k], k))
        odd = [u for u in units if u.dev.steps.collective_ns and len(u.dev.steps.collective_ns) != mode]
        out.append(FleetFinding(
            kind="incomplete", severity=SEVERITY["incomplete"], ranks=sorted({u.rank for u in odd}),
            reports=list(dict.fromkeys(u.report for u in odd)), devices=[u.device_id for u in odd],
            figures={"units": len(odd), "steps_most": mode, "steps_compared": facts["steps_compared"]},
            title=f"{count(len(odd), 'GPU')} captured a number of steps other than most GPUs' {mode}",
            sentence=(f"{count(len(odd), 'GPU')} captured a number of steps other than the {mode} of most; steps are "
                      f"compared over the first {facts['steps_compared']}."),
            commands=[_cmd("iterations", u.report) for u in odd[:2]]))
    for what, values in (("nsys versions", Counter(d.nsys_version for d in digests if not d.error)),
                         ("GPU models", Counter(u.dev.gpu_name for u in units))):
        values.pop(None, None)
        if len(values) > 1:
            shown = values.most_common(MIXED_SHOWN)
            listed = ", ".join(f"`{v}` ({n})" for v, n in shown)
            rest = len(values) - len(shown)
            if rest:  # the most common named, the others counted: the list is never read as all of them
                reports = sum(values.values()) - sum(n for _, n in shown)
                listed += f" and {rest} other{'s' if rest > 1 else ''} ({reports})"
            out.append(FleetFinding(kind="incomplete", severity=SEVERITY["incomplete"],
                                    figures={"kinds": len(values)}, title=f"{len(values)} {what} in the fleet",
                                    sentence=f"The reports come from {len(values)} {what}: {listed}."))
    return out


def apply(digests: list[Digest]) -> tuple[list[Unit], list[FleetFinding], dict, arr.FleetArrivals | None]:
    """Every rule over the digests: (units, findings ranked by severity then rule order, comparison facts, the
    arrival table on one clock or None). Stragglers come from the arrivals when the units share a clock and a
    collective, else from the steps."""
    units = units_of(digests)
    facts = compare_steps(units)
    kstats = kernel_stats(units)
    by_arrival = arrival_stragglers(units, kstats)
    found, table = by_arrival if by_arrival is not None else (stragglers(units, facts, kstats), None)
    named = {id(u) for f in found for u in _members(f, units)}
    found += (idle_outliers(units, named) + slow_gpus(units, named, kstats) + kernel_mix(units)
              + incomplete(digests, units, facts))
    for f in found:
        for u in _members(f, units):
            u.flags.append(f.kind)
    rank = {"high": 0, "medium": 1, "low": 2}
    found.sort(key=lambda f: (rank[f.severity], ORDER.index(f.kind)))
    return units, found, facts, table


def _members(f: FleetFinding, units: list[Unit]) -> list[Unit]:
    """The units a finding names: its (report, device) pairs, or every unit of a node straggler's host."""
    if f.kind == "node_straggler":
        return [u for u in units if u.d.host in f.hosts]
    pairs = set(zip(f.reports, f.devices))
    return [u for u in units if (u.report, u.device_id) in pairs] if pairs else []


def _cap(s: str) -> str:
    return s[:1].upper() + s[1:]


def _host(u: Unit) -> list[str]:
    return [u.d.host] if u.d.host else []


def _q(path: str) -> str:
    import shlex

    return shlex.quote(path)
