"""The fleet on one clock: each rank's arrival at each collective, who waits for whom, and why (the reduce).

Clock: every unit's NCCL kernel times are put on UTC epoch ns by its report's Clock (identity.py). Units whose
report records no clock are compared only when the whole comparison is one report (one clock anyway).
Matching: per communicator and collective kind (AllReduce, AllGather, ...; point-to-point kinds left out), the
j-th kernel of that kind of that communicator on every member is one collective (matched by order and kind); a
unit that captured fewer (its capture started or stopped at another time) has each of its kernels matched to the
collective whose end is nearest on the one clock (the ends coincide). The communicator is told by the CUDA stream
its kernels run on (``communicators``): NCCL runs a communicator's kernels on the stream its caller names, and
PyTorch's ProcessGroupNCCL gives each communicator a stream of its own, created in the same order on every rank,
so the same stream id on several ranks is one communicator. It is a proxy: the NCCL NVTX payload that names the
communicator (its ``NCCL communicator ID``, in NCCL builds with NVTX payload schemas) held no values in any export
here, and the kernel's grid is no key (NCCL picks its channel count, gridDim.x, per call by message size). Streams
split a kind only when they look like communicators: every stream of that kind is shared by at least MIN_UNITS
units; otherwise (each rank its own stream id, or none recorded) that kind's collectives are matched by order
across all units, as one communicator. A key run by fewer than MIN_UNITS units is not compared. The collectives
are ordered by their median arrival.

Per collective: each unit's arrival (its kernel's start: what ``nsys recipe cuda_gpu_kern_pace`` lists per rank),
the last arrival, each unit's wait (last arrival - its own), the skew (last - first) and the spread of the end
times. A blocking collective ends on every rank within microseconds, so the median spread of the ends is the
residual clock uncertainty between the reports (node clocks differ by a millisecond or more): no lateness below
it, nor below LATE_MIN_MS, counts (``threshold_ns``).

Lateness of a unit at a collective: its arrival - the median arrival of the other units (of the units on other
hosts, for a node). A unit is last at a collective when it arrived within the clock
uncertainty of the last arrival, the collective's skew reaches the threshold, and no more than half of its units
tie for last. Straggler: a unit last in at least STRAGGLER_MIN_LAST_SHARE of its collectives, with a median
lateness at or above the threshold. Node straggler: a host (of two or more in the comparison) whose units are
all late by at least the threshold, against the other hosts' median arrival, at STRAGGLER_MIN_LAST_SHARE of the
collectives, by a similar amount (the least late unit's median at
least NODE_SIMILAR_SHARE of the latest's).

Why (``causes``), from what each report shows before its arrival, against the median of the other units:
a later communicator init (last ``ncclCommInit*`` NVTX end) or a later start (first CUDA call) for the first
collective; a slow first launch (the first collective's kernel start - its launch call); more compute between
collectives (other kernels' union since the previous collective: only when at least CAUSE_MIN_MS and
CAUSE_MIN_PCT more); more GPU idle before the collective (the host launched it late), and of that host time more
in MPI calls (NVTX ``MPI_*`` ranges) or OS runtime calls when the capture holds them, else the options that
record them. When none reaches CAUSE_MIN_MS: the capture does not
show why. All constants are in rules.py (docs/definitions.md lists them).
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import numpy as np
from pydantic import BaseModel, Field

from dashcam.fleet.collectives import POINT_TO_POINT

TABLE_MAX_COLLECTIVES = 64  # collectives listed in the report's arrival table (JSON); the verdict uses all


class CollectiveRow(BaseModel):
    """One matched collective, the units in FleetArrivals.units order (None: the unit has no such collective)."""

    index: int = Field(description="Order by median arrival.")
    kind: str
    stream: int | None = Field(None, description="Its communicator's stream, where streams tell communicators "
                                                 "apart (None: the kind's collectives are one communicator).")
    occurrence: int = Field(description="Its number among this kind's collectives (0 = first).")
    arrival_ns: list[int | None] = Field(description="Each unit's arrival: its kernel's start, ns after clock_zero.")
    wait_ns: list[int | None] = Field(description="Each unit's wait: the last arrival - its own.")
    last_rank: int | None
    last_unit: int = Field(description="Index of the last unit.")
    skew_ns: int = Field(description="Last arrival - first.")
    end_spread_ns: int = Field(description="Latest end - earliest end (they finish together: the clock's error).")
    transfer_ns: int = Field(description="Median end - the last arrival: the collective's own time, without "
                                         "waiting (a message size over it is its effective bandwidth).")


class Communicator(BaseModel):
    """A communicator told apart by its stream: its kind, stream and member units."""

    kind: str
    stream: int
    units: list[int] = Field(description="Indexes into FleetArrivals.units.")
    collectives: int = Field(description="Its collectives compared.")


class FleetArrivals(BaseModel):
    """The arrival table and its clock."""

    units: list[str] = Field(description="The units compared: 'rank R' or 'rank R GPU D'.")
    ranks: list[int | None]
    hosts: list[str | None]
    clock: str = Field(description="utc: every report's session start (or normalized timestamps) recorded; "
                                   "one_report: a single report's clock.")
    clock_zero_utc_ns: int = Field(description="The first arrival at the first collective, UTC epoch ns.")
    clock_uncertainty_ns: int = Field(description="Median spread of the collectives' end times.")
    threshold_ns: int = Field(description="The least lateness that counts: max(LATE_MIN_MS, "
                                          "CLOCK_MARGIN x clock_uncertainty_ns).")
    collectives_compared: int
    kinds: dict[str, int] = Field(description="Collectives compared per kind.")
    communicators: list[Communicator] = Field(default_factory=list, description="The communicators told apart "
                                                                                "by their streams.")
    left_out: list[str] = Field(default_factory=list, description="Units not on the common clock, and why.")
    late_ns: list[int] = Field(description="Each unit's median lateness (arrival - the others' median arrival).")
    last_count: list[int] = Field(description="Collectives at which each unit was last (skew above threshold).")
    compared: list[int] = Field(description="Collectives each unit took part in.")
    collectives: list[CollectiveRow] = Field(description=f"The first {TABLE_MAX_COLLECTIVES} collectives.")


@dataclass
class Table:
    """The full matrices behind FleetArrivals (units x collectives; NaN where a unit lacks one)."""

    units: list  # rules.Unit
    kinds: list[str]
    streams: list[int]  # per collective: its communicator's stream (-1: the kind is one communicator)
    occurrence: list[int]
    arrival: np.ndarray
    end: np.ndarray
    launch: np.ndarray
    compute: np.ndarray
    interval: np.ndarray
    mpi: np.ndarray  # host time in MPI calls before each arrival (since the previous collective)
    osrt: np.ndarray  # ... in OS runtime calls
    first_call: np.ndarray  # per unit, UTC (NaN: not recorded)
    comm_init: np.ndarray
    base: int = 0  # UTC epoch ns (or the one report's clock) of time 0 in the matrices
    uncertainty: int = 0
    threshold: int = 0
    clock: str = "utc"
    left_out: list[str] = field(default_factory=list)


def _utc(values: list[int], offset: int) -> np.ndarray:
    """``values`` (export clock; negative: not recorded) + ``offset``, in integers first, then as floats (NaN:
    not recorded): the sum is small, the values need not be."""
    a = np.asarray(values, np.int64)
    return np.where(a < 0, np.nan, (a + np.int64(offset)).astype(np.float64))


def _occurrence(ends: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """Which of the reference unit's collectives of a kind each of ``ends`` is: by order when the unit captured
    as many, else the one whose end is nearest (a capture that started or stopped at another time misses some;
    their ends coincide on the one clock). A second match of the same collective is -1 (dropped)."""
    if len(ends) == len(ref):
        return np.arange(len(ends))
    at = np.clip(np.searchsorted(ref, ends), 1, len(ref) - 1) if len(ref) > 1 else np.zeros(len(ends), np.int64)
    if len(ref) > 1:
        at = np.where(np.abs(ref[at - 1] - ends) <= np.abs(ref[at] - ends), at - 1, at)
    out = at.astype(np.int64)
    seen = np.zeros(len(out), bool)
    _, first = np.unique(out, return_index=True)
    seen[first] = True
    return np.where(seen, out, -1)


_PAIR = 1 << 40
Key = tuple[str, int]  # (kind, stream): the stream -1 where streams do not tell that kind's communicators apart


def communicators(units: list, min_units: int) -> tuple[list[Key], dict[int, np.ndarray]]:
    """The keys, and per unit (by id) each collective's index among them (-1: point-to-point, not compared);
    see the module docstring. Vectorized per unit: a thousand ranks of 200 collectives each."""
    names: list[str] = []  # kind names over the fleet
    local: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # unit -> (global kind id, stream) per collective
    on: dict[tuple[int, int], set[int]] = {}  # (kind, stream) -> units
    for u in units:
        c = u.dev.coll
        ids = np.array([names.index(k) if k in names else names.append(k) or len(names) - 1
                        for k in u.d.collective_kinds], np.int64)
        kind = ids[np.asarray(c.kind, np.int64)] if len(c.kind) else np.zeros(0, np.int64)
        stream = np.asarray(c.stream_id, np.int64) if len(c.stream_id) == len(kind) else np.full(len(kind), -1)
        local[id(u)] = kind, stream
        pairs = np.unique(kind * _PAIR + (stream + 1))  # (kind, stream) as one integer: streams < 2**40
        for k, st in zip((pairs // _PAIR).tolist(), (pairs % _PAIR - 1).tolist()):
            on.setdefault((k, st), set()).add(id(u))
    by_kind: dict[int, list[set[int]]] = {}
    for (k, st), who in on.items():
        by_kind.setdefault(k, []).append(who if st >= 0 else set())  # an unrecorded stream: no split
    split = {k for k, groups in by_kind.items() if len(groups) > 1 and all(len(g) >= min_units for g in groups)}
    keys = sorted({(names[k], st if k in split else -1) for k, st in on if names[k] not in POINT_TO_POINT})
    index = {key: i for i, key in enumerate(keys)}
    streams = np.array(sorted({st for _, st in on}), np.int64)  # stream ids can be large: their ranks index
    table = np.full((len(names), len(streams)), -1, np.int64)
    for (k, st) in on:
        if names[k] not in POINT_TO_POINT:
            table[k, np.searchsorted(streams, st)] = index[(names[k], st if k in split else -1)]
    return keys, {uid: table[kind, np.searchsorted(streams, stream)] for uid, (kind, stream) in local.items()}


def build(units: list, min_units: int, late_min_ns: int, clock_margin: float) -> Table | None:
    """The arrival table of ``units`` (rules.Unit), or None when fewer than ``min_units`` share a clock and a
    collective kind."""
    all_keys, keys_of = communicators(units, min_units)
    per_unit = {uid: {all_keys[k]: int(n) for k, n in enumerate(np.bincount(ks[ks >= 0], minlength=len(all_keys)))
                      if n} for uid, ks in keys_of.items()}
    have = [u for u in units if per_unit[id(u)]]
    reports = {u.d.path for u in have}
    left_out = []
    if len(reports) > 1:
        left_out = [f"{u.label}: its report records no session start time" for u in have if not u.d.clock.known]
        have = [u for u in have if u.d.clock.known]
    clock = "utc" if len(reports) > 1 else "one_report"
    if len(have) < min_units:
        return None
    counts: dict[Key, list[int]] = {}
    for u in have:
        for key, k in per_unit[id(u)].items():
            counts.setdefault(key, []).append(k)
    kinds = sorted(k for k, v in counts.items() if len(v) >= min_units)
    if not kinds:
        return None
    cols: list[tuple[Key, int]] = [(k, j) for k in kinds for j in range(max(counts[k]))]
    first_col = np.cumsum([0] + [max(counts[k]) for k in kinds])[:-1]
    kind_id = {k: i for i, k in enumerate(kinds)}
    n, m = len(have), len(cols)
    mats = {x: np.full((n, m), np.nan) for x in ("arrival", "end", "launch", "compute", "interval", "mpi", "osrt")}
    first_call, comm_init = np.full(n, np.nan), np.full(n, np.nan)
    offsets = [u.d.clock.offset_ns if clock == "utc" else 0 for u in have]
    # times relative to the earliest collective start: UTC epoch ns do not fit a float64 exactly, these do
    base = min(min(u.dev.coll.start_ns) + o for u, o in zip(have, offsets))
    ref_end: dict[int, np.ndarray] = {}  # per key: the ends of a unit that captured all of that key's
    rows = []
    for row, u in enumerate(have):
        c, off = u.dev.coll, offsets[row] - base
        to_col = np.array([kind_id.get(k, -1) for k in all_keys] + [-1], np.int64)
        ka = to_col[keys_of[id(u)]]  # a point-to-point one (-1) picks the last entry: -1
        idx = np.flatnonzero(ka >= 0)
        start = _utc(c.start_ns, off)[idx]
        end = start + np.asarray(c.dur_ns, np.float64)[idx]
        rows.append((row, u, idx, ka[idx], start, end))
        first_call[row] = _utc([u.d.first_call_ns], off)[0]
        comm_init[row] = _utc([u.d.comm_init_end_ns], off)[0]
        for k in np.unique(ka[idx]).tolist():
            if int((ka[idx] == k).sum()) == max(counts[kinds[k]]) and k not in ref_end:
                ref_end[k] = end[ka[idx] == k]
    for row, u, idx, kk, start, end in rows:
        c = u.dev.coll
        occ = np.zeros(len(idx), np.int64)  # each collective's number among its kind's
        for k in np.unique(kk).tolist():
            mine = kk == k
            occ[mine] = _occurrence(end[mine], ref_end[k])
        ok = occ >= 0
        idx, kk, occ, start, end = idx[ok], kk[ok], occ[ok], start[ok], end[ok]
        pos = first_col[kk] + occ
        lag = np.asarray(c.launch_lag_ns, np.float64)[idx]
        mats["arrival"][row, pos] = start
        mats["end"][row, pos] = end
        mats["launch"][row, pos] = np.where(lag < 0, np.nan, start - lag)
        mats["compute"][row, pos] = np.asarray(c.compute_before_ns, np.float64)[idx]
        mats["interval"][row, pos] = np.asarray(c.interval_before_ns, np.float64)[idx]
        mats["mpi"][row, pos] = np.asarray(c.mpi_before_ns, np.float64)[idx]
        mats["osrt"][row, pos] = np.asarray(c.osrt_before_ns, np.float64)[idx]
    keep = (~np.isnan(mats["arrival"])).sum(axis=0) >= min_units
    order = np.argsort(np.nanmedian(mats["arrival"][:, keep], axis=0), kind="stable")
    sel = np.flatnonzero(keep)[order]
    t = Table(units=have, kinds=[cols[i][0][0] for i in sel], streams=[cols[i][0][1] for i in sel],
              occurrence=[cols[i][1] for i in sel],
              first_call=first_call, comm_init=comm_init, clock=clock, left_out=left_out, base=base,
              **{x: v[:, sel] for x, v in mats.items()})
    spread = np.nanmax(t.end, axis=0) - np.nanmin(t.end, axis=0)
    t.uncertainty = int(np.median(spread)) if len(spread) else 0
    t.threshold = int(max(late_min_ns, clock_margin * t.uncertainty))
    return t


def others_median(a: np.ndarray) -> np.ndarray:
    """Per unit (row) and collective (column): the median of ``a`` over the other units of that column (NaN: not
    in it). Exact, from one sort per column: leaving one value out shifts the median's position by at most one,
    so a thousand ranks cost a sort, not a thousand medians."""
    n, m = a.shape
    order = np.argsort(a, axis=0, kind="stable")  # NaN last
    s = np.take_along_axis(a, order, axis=0)
    rank = np.empty_like(order)
    np.put_along_axis(rank, order, np.broadcast_to(np.arange(n)[:, None], (n, m)).copy(), axis=0)
    k = (~np.isnan(a)).sum(axis=0) - 1  # the others' count per column

    def at(j: np.ndarray) -> np.ndarray:  # the j-th smallest of the others
        idx = np.clip(np.where(j < rank, j, j + 1), 0, n - 1)
        return np.take_along_axis(s, idx, axis=0)

    lo = np.broadcast_to(np.maximum(k - 1, 0) // 2, (n, m))
    hi = np.broadcast_to(np.maximum(k, 0) // 2, (n, m))
    out = (at(lo) + at(hi)) / 2.0
    out[np.isnan(a) | (k < 1)[None, :]] = np.nan
    return out


def lateness(t: Table) -> np.ndarray:
    """Each unit's arrival - the median arrival of the others, per collective."""
    return t.arrival - others_median(t.arrival)


def last_mask(t: Table) -> np.ndarray:
    """Where a unit arrived last: within the clock uncertainty of the last arrival, at a collective whose skew
    reaches the threshold, and not in a tie of more than half of its units (that singles nobody out)."""
    a = np.where(np.isnan(t.arrival), -np.inf, t.arrival)
    last = a >= a.max(axis=0) - t.uncertainty
    skew = np.nanmax(t.arrival, axis=0) - np.nanmin(t.arrival, axis=0)
    members = (~np.isnan(t.arrival)).sum(axis=0)
    return last & (last.sum(axis=0) <= members / 2) & (skew >= t.threshold)


def _ints(x: np.ndarray) -> list[int | None]:
    """Whole ns as ints, None where NaN (not in that collective)."""
    out = np.nan_to_num(x).round().astype(np.int64).tolist()
    for i in np.flatnonzero(np.isnan(x)).tolist():
        out[i] = None
    return out


def _columns(t: Table) -> dict[Key, list[int]]:
    """The columns of each communicator told apart by its stream."""
    out: dict[Key, list[int]] = {}
    for j, (k, st) in enumerate(zip(t.kinds, t.streams)):
        if st >= 0:
            out.setdefault((k, st), []).append(j)
    return out


def summary(t: Table, late: np.ndarray, last: np.ndarray) -> FleetArrivals:
    zero = float(np.nanmin(t.arrival[:, 0]))
    rows = []
    for j in range(min(t.arrival.shape[1], TABLE_MAX_COLLECTIVES)):
        a = t.arrival[:, j]
        hi = float(np.nanmax(a))
        lu = int(np.nanargmax(a))
        # model_construct: the figures are built here, exact ints; validating 64 x N of them cost a third of a
        # warm 1,024-rank run
        rows.append(CollectiveRow.model_construct(
            index=j, kind=t.kinds[j], stream=None if t.streams[j] < 0 else t.streams[j],
            occurrence=t.occurrence[j], arrival_ns=_ints(a - zero),
            wait_ns=_ints(hi - a), last_rank=t.units[lu].rank, last_unit=lu, skew_ns=int(hi - np.nanmin(a)),
            end_spread_ns=int(np.nanmax(t.end[:, j]) - np.nanmin(t.end[:, j])),
            transfer_ns=int(max(np.nanmedian(t.end[:, j]) - hi, 0))))
    kinds = dict(Counter(t.kinds))
    comms = []
    for (k, st), cols in sorted(_columns(t).items()):
        member = np.flatnonzero((~np.isnan(t.arrival[:, cols])).any(axis=1)).tolist()
        comms.append(Communicator(kind=k, stream=st, units=member, collectives=len(cols)))
    with np.errstate(all="ignore"):
        med = np.nanmedian(late, axis=1)
    return FleetArrivals(units=[u.label for u in t.units], ranks=[u.rank for u in t.units],
                         hosts=[u.d.host for u in t.units], clock=t.clock, clock_zero_utc_ns=t.base + int(zero),
                         clock_uncertainty_ns=t.uncertainty, threshold_ns=t.threshold,
                         collectives_compared=t.arrival.shape[1], kinds=kinds, communicators=comms, left_out=t.left_out,
                         late_ns=[0 if np.isnan(x) else int(round(x)) for x in med],
                         last_count=[int(x) for x in last.sum(axis=1)],
                         compared=[int(x) for x in (~np.isnan(t.arrival)).sum(axis=1)], collectives=rows)


# -- why -------------------------------------------------------------------------------------------------

@dataclass
class Cause:
    kind: str  # comm_init | start | first_launch | compute | host | unknown
    sentence: str
    figures: dict


def _med(x: np.ndarray) -> float:
    x = x[np.isfinite(x)]
    return float(np.median(x)) if len(x) else float("nan")


def causes(t: Table, group: np.ndarray, first_late: float, floors: dict, fmt) -> list[Cause]:
    """The cause chain of the late ``group`` (a boolean mask over t.units) against the other units; ``floors``:
    cause_min_ns, cause_min_pct; ``fmt``: ns -> text."""
    other = ~group
    out: list[Cause] = []
    floor = floors["cause_min_ns"]

    def versus(values: np.ndarray) -> float:
        return _med(values[group]) - _med(values[other])

    if first_late >= floor:  # what made it late the first time
        init = versus(t.comm_init)
        start = versus(t.first_call)
        started_late = np.isfinite(start) and start >= floor
        if started_late:  # the root: what follows from a late start is not a cause of its own
            out.append(Cause("start", f"it started {fmt(start)} after the others (its first CUDA call)",
                             {"start_late_ns": round(start)}))
        if np.isfinite(init) and init - (start if started_late else 0) >= floor:
            out.append(Cause("comm_init", f"its communicator init (`ncclCommInit*`) finished {fmt(init)} after "
                                          "the others'", {"comm_init_late_ns": round(init)}))
        if np.isfinite(t.launch[:, 0]).all():
            lag = t.arrival[:, 0] - t.launch[:, 0]
            slow = versus(lag)
            if np.isfinite(slow) and slow >= floor:
                out.append(Cause("first_launch", f"its first collective started {fmt(_med(lag[group]))} after "
                                                 f"its launch call (the others: {fmt(_med(lag[other]))})",
                                 {"first_launch_lag_ns": round(_med(lag[group])),
                                  "others_first_launch_lag_ns": round(_med(lag[other]))}))
    if t.arrival.shape[1] > 1:  # between collectives: the previous one ended together, so the gap is the story
        comp = t.compute[:, 1:]
        idle = t.interval[:, 1:] - comp
        mine, theirs = _med(comp[group]), _med(comp[other])
        more = mine - theirs
        enough_pct = theirs <= 0 or 100.0 * more / theirs >= floors["cause_min_pct"]
        if max(mine, theirs) > 0 and more >= floor and enough_pct:
            pct = round(100.0 * more / theirs, 1) if theirs > 0 else None
            out.append(Cause("compute", f"it computes {fmt(mine)} between collectives against {fmt(theirs)} on "
                                        "the others" + (f" ({pct:g} % more)" if pct is not None else ""),
                             {"compute_between_ns": round(mine), "others_compute_between_ns": round(theirs),
                              **({"compute_excess_pct": pct} if pct is not None else {})}))
        extra = _med(idle[group]) - _med(idle[other])
        if np.isfinite(extra) and extra >= floor:
            out.append(Cause("host", f"its GPU sits idle {fmt(extra)} longer before each collective with no "
                                     "kernel running: the host launches it late",
                             {"host_idle_excess_ns": round(extra)}))
            for key, what in (("mpi", "MPI calls"), ("osrt", "OS runtime calls")):
                more = _med(getattr(t, key)[group][:, 1:]) - _med(getattr(t, key)[other][:, 1:])
                if np.isfinite(more) and more >= floor:
                    out.append(Cause(key, f"its host spends {fmt(more)} more in {what} before each collective",
                                     {f"{key}_excess_ns": round(more)}))
    return out


def host_note(host_data: list[str], options: str) -> str:
    """What shows the host side, when its MPI and OS runtime calls do not explain the late launch: the data the
    capture holds, or the options that would record it."""
    names = {"os_runtime": "OS runtime calls", "cpu_sampling": "CPU samples", "mpi": "MPI calls"}
    if host_data:
        return ("its report's " + " and ".join(names[k] for k in host_data) + " do not account for it (`dashcam "
                "tool run gpu_gaps` on its report shows what its host did)")
    return f"the capture does not show what its host did then; `{options}` records it"
