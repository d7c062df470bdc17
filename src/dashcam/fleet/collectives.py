"""The map step's collective table: per device, each NCCL kernel with what came before it (on the worker).

Per device (the NCCL kernels of tools/nccl.py, by start, the first MAX_COLLECTIVES): its kind (the collective
named in the kernel's name, ``collective_kind``), start on the export's clock (Digest.clock maps it to UTC) and
duration, how long after the start of the API call that launched it it started (-1 when the capture has no such
call), the stream it ran on, and, since the previous NCCL kernel's end on that device (the first: since the
device's first GPU work), the time the device computed (union of its other kernels), the time its process spent in
MPI calls (NVTX ``MPI_*`` ranges, as ``--trace=mpi`` records them) and in OS runtime calls (``--trace=osrt``),
each a union, and the whole interval. Per report: when its first CUDA call began and when its last
``ncclCommInit*`` NVTX range ended (NCCL's own NVTX ranges; -1 when not recorded). Rank arrivals are compared on
the client (arrivals.py); a digest keeps these few integers per collective, never the kernels.
"""
from __future__ import annotations

import re
from typing import ClassVar

import numpy as np
from pydantic import Field

from dashcam.fleet.packed import Packed

MAX_COLLECTIVES = 200  # collectives kept per device: enough to vote on, and a digest stays a few KB
# The NCCL operations, longest first (AllReduce before Reduce); point-to-point ones (SendRecv, Send, Recv) do not
# finish together across ranks and are left out of arrival comparisons (arrivals.py).
_KIND = re.compile(r"(AllReduce|AllGather|ReduceScatter|AllToAll|Broadcast|SendRecv|Reduce|Send|Recv|Gather|"
                   r"Scatter)", re.IGNORECASE)
POINT_TO_POINT = frozenset({"SendRecv", "Send", "Recv"})
_CANON = {k.lower(): k for k in ("AllReduce", "AllGather", "ReduceScatter", "AllToAll", "Broadcast", "SendRecv",
                                 "Reduce", "Send", "Recv", "Gather", "Scatter")}


def collective_kind(kernel_name: str) -> str:
    """``AllReduce`` for ``ncclDevKernel_AllReduce_Sum_f32_RING_LL``; the name itself when it names none."""
    m = _KIND.search(kernel_name or "")
    return _CANON[m.group(1).lower()] if m else (kernel_name or "?")


class Collectives(Packed):
    """One device's NCCL kernels as parallel lists (index i is its i-th collective); times in ns."""

    FIELDS: ClassVar[tuple[str, ...]] = ("kind", "start_ns", "dur_ns", "launch_lag_ns", "compute_before_ns",
                                         "interval_before_ns", "mpi_before_ns", "osrt_before_ns", "stream_id")
    DELTA: ClassVar[tuple[str, ...]] = ("start_ns",)
    kind: list[int] = Field(default_factory=list, description="Index into Digest.collective_kinds.")
    start_ns: list[int] = Field(default_factory=list, description="Kernel start on the export's clock.")
    dur_ns: list[int] = Field(default_factory=list, description="Kernel duration (its end - start).")
    launch_lag_ns: list[int] = Field(default_factory=list, description="Its start - its launch call's start; "
                                                                       "-1: no launch call recorded.")
    compute_before_ns: list[int] = Field(default_factory=list, description="Other kernels' union since the "
                                                                           "previous collective.")
    interval_before_ns: list[int] = Field(default_factory=list, description="Since the previous collective's end.")
    mpi_before_ns: list[int] = Field(default_factory=list, description="Of that interval, the time in its process's "
                                                                       "MPI calls (NVTX MPI_* ranges, union).")
    osrt_before_ns: list[int] = Field(default_factory=list, description="... and in its OS runtime calls (union).")
    stream_id: list[int] = Field(default_factory=list, description="The CUDA stream it ran on (its communicator's "
                                                                   "proxy: arrivals.py); -1: not recorded.")


def collectives_of(profile, kinds: list[str]) -> dict[int, Collectives]:
    """Per device with NCCL kernels, its Collectives (``kinds``: the report's kind names, appended to)."""
    from dashcam.tools.nccl import comm_and_compute, comm_kernels

    w = profile.window()
    comm = comm_kernels(profile, w)
    if not comm:
        return {}
    launch = _launch_starts(profile)
    streams = _streams(profile)
    pids = dict(profile.rows("SELECT device_id, min(pid) FROM kernel_times WHERE device_id IS NOT NULL GROUP BY 1"))
    host: dict = {}  # pid -> its (MPI, OS runtime) unions, read once
    first = dict(profile.rows('SELECT device_id, min(start) FROM gpu_ops WHERE device_id IS NOT NULL GROUP BY 1'))
    out = {}
    for dev, (cs, ce, names) in comm.items():
        order = np.argsort(cs, kind="stable")
        cs, ce, names = cs[order], ce[order], names[order]
        _, compute = comm_and_compute(profile, w, dev, cs, ce)
        cs, ce, names = cs[:MAX_COLLECTIVES], ce[:MAX_COLLECTIVES], names[:MAX_COLLECTIVES]
        prev = np.concatenate([[int(first.get(dev, cs[0]))], ce[:-1]]).astype(np.int64)
        prev = np.minimum(prev, cs)
        ids = [_index(kinds, collective_kind(str(n))) for n in names]
        starts, calls = launch.get(dev, (np.zeros(0, np.int64), np.zeros(0, np.int64)))
        lag = np.full(len(cs), -1, np.int64)
        stream = _stream_at(streams.get(dev), cs)
        if len(starts):
            at = np.minimum(np.searchsorted(starts, cs), len(starts) - 1)
            hit = (starts[at] == cs) & (calls[at] >= 0)
            lag[hit] = np.maximum(cs[hit] - calls[at[hit]], 0)
        pid = pids.get(dev)
        if pid not in host:
            host[pid] = host_unions(profile, pid, w)
        mpi, osrt = host[pid]
        out[dev] = Collectives(kind=ids, start_ns=cs.tolist(), dur_ns=(ce - cs).tolist(), launch_lag_ns=lag.tolist(),
                               compute_before_ns=compute.overlap(prev, cs).tolist(),
                               interval_before_ns=(cs - prev).tolist(), mpi_before_ns=mpi.overlap(prev, cs).tolist(),
                               osrt_before_ns=osrt.overlap(prev, cs).tolist(), stream_id=stream.tolist())
    return out


def host_unions(profile, pid, w):
    """(MPI NVTX ranges, OS runtime calls) of process ``pid`` as unions over the window; empty when the capture
    holds none (checked first: the NVTX table of a large capture has a million rows)."""
    from dashcam.measure.intervals import EMPTY, merge
    from dashcam.profile.coverage import holds
    from dashcam.profile.cpu_source import source

    if pid is None:
        return EMPTY, EMPTY
    mpi = osrt = EMPTY
    if profile.has_view("nvtx_times") and holds(profile, "mpi"):
        a = profile.con.execute(
            f'SELECT start, "end" FROM nvtx_times WHERE pid = {int(pid)} AND "end" > start AND group_id IN '
            "(SELECT group_id FROM nvtx_groups WHERE starts_with(label, 'MPI_'))").fetchnumpy()
        mpi = merge(np.asarray(a["start"], np.int64), np.asarray(a["end"], np.int64), w)
    if holds(profile, "os_runtime"):
        a = source(profile).osrt_of_process(int(pid), w.start_ns, w.end_ns)
        osrt = merge(a["start"], a["end"], w)
    return mpi, osrt


def _index(kinds: list[str], kind: str) -> int:
    if kind not in kinds:
        kinds.append(kind)
    return kinds.index(kind)


def _launch_starts(profile) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """Per device: the NCCL kernels' starts (sorted) and their launch calls' starts (-1 where none)."""
    from dashcam.tools.nccl import COMM_NAMES

    a = profile.con.execute(
        "SELECT device_id, start, coalesce(api_start, -1) AS api FROM launches "
        f"WHERE short_name_id IN (SELECT id FROM strings WHERE value IN ({COMM_NAMES})) "
        "AND device_id IS NOT NULL ORDER BY device_id, start").fetchnumpy()
    dev, s, api = (np.asarray(a[k], np.int64) for k in ("device_id", "start", "api"))
    return {int(d): (s[dev == d], api[dev == d]) for d in np.unique(dev)}


def _streams(profile) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """Per device: the NCCL kernels' starts (sorted) and their streams."""
    from dashcam.tools.nccl import COMM_NAMES

    a = profile.con.execute(
        "SELECT device_id, start, coalesce(stream_id, -1) AS stream FROM kernel_times "
        f"WHERE (short_name_id IN (SELECT id FROM strings WHERE value IN ({COMM_NAMES})) OR name_id IN "
        f"(SELECT id FROM strings WHERE value IN ({COMM_NAMES}))) AND device_id IS NOT NULL "
        "ORDER BY device_id, start, stream").fetchnumpy()
    dev, s, st = (np.asarray(a[k], np.int64) for k in ("device_id", "start", "stream"))
    return {int(d): (s[dev == d], st[dev == d]) for d in np.unique(dev)}


def _stream_at(streams: tuple[np.ndarray, np.ndarray] | None, cs: np.ndarray) -> np.ndarray:
    """The stream of each kernel starting at ``cs`` (-1 where none is found)."""
    out = np.full(len(cs), -1, np.int64)
    if streams is None or not len(streams[0]):
        return out
    starts, ids = streams
    at = np.minimum(np.searchsorted(starts, cs), len(starts) - 1)
    hit = starts[at] == cs
    out[hit] = ids[at[hit]]
    return out


def host_marks(profile) -> tuple[int, int]:
    """(first CUDA API call's start, last ``ncclCommInit*`` NVTX range's end) on the export's clock; -1 when not
    recorded."""
    first = profile.one("SELECT min(start) FROM api_calls")
    init = profile.one("SELECT max(\"end\") FROM nvtx WHERE label LIKE 'ncclCommInit%' AND \"end\" IS NOT NULL") \
        if profile.has_view("nvtx") else None
    return (int(first[0]) if first and first[0] is not None else -1,
            int(init[0]) if init and init[0] is not None else -1)
