"""nccl: how much GPU time goes to NCCL communication kernels and how much of it compute hides.

A communication kernel is one whose short or full name contains 'nccl' (any case): that covers
ncclKernel_*, ncclDevKernel_* (AllReduce, AllGather, ReduceScatter, SendRecv, Broadcast, ...).
Kernels from other communication libraries are not recognised. Per device, comm time is the union
of comm kernels in the window, compute time the union of all other kernels, and overlap the part of
the comm union that the compute union covers: comm + compute - the device's kernel busy time.
"""
from __future__ import annotations

import numpy as np
from pydantic import BaseModel, Field

from dashcam.measure.definitions import pct
from dashcam.measure.intervals import EMPTY, Union, kernel_unions, merge

from .base import Tool, ToolParams, ToolResult, WindowInfo

# Exposed communication (comm time not covered by compute) of a tenth of the window or more is a
# first-order cost: the GPU spends that share of the run only waiting on the network, which overlap
# (bucketing, async collectives) can usually recover. Below it, comm is a minor term.
NOT_OVERLAPPED_EXPOSED_PCT = 10.0
# Below that, communication is "overlapped" only when compute hides at least half of it; a GPU whose little
# communication runs mostly alone is "minor" (exposed, but a small cost), not called overlapped.
OVERLAPPED_MIN_PCT = 50.0

COMM_NAMES = "SELECT value FROM strings WHERE contains(lower(value), 'nccl')"
IS_COMM = f"(short_name IN ({COMM_NAMES}) OR name IN ({COMM_NAMES}))"


class Params(ToolParams):
    pass


class CommKernel(BaseModel):
    name: str = Field(description="Kernel short name.")
    count: int = Field(description="Launches overlapping the window.")
    total_ns: int = Field(description="Sum of their durations clipped to the window (not a union).")


class DeviceComm(BaseModel):
    device_id: int
    verdict: str = Field(
        description="no_nccl: no comm kernels; not_overlapped: exposed_comm_pct >= "
                    f"{NOT_OVERLAPPED_EXPOSED_PCT:g}; otherwise overlapped when overlap_pct >= "
                    f"{OVERLAPPED_MIN_PCT:g}, else minor (mostly exposed, a small share of the window).")
    comm_kernel_count: int = Field(description="NCCL kernels overlapping the window.")
    comm_ns: int = Field(description="Length of the union of NCCL kernel intervals in the window.")
    comm_pct: float = Field(description="comm_ns as % of the window.")
    compute_ns: int = Field(description="Length of the union of non-NCCL kernel intervals in the window.")
    compute_pct: float = Field(description="compute_ns as % of the window.")
    overlap_ns: int = Field(description="Part of the comm union covered by the compute union.")
    overlap_pct: float | None = Field(
        description="overlap_ns as % of comm_ns: the share of communication hidden behind compute; "
                    "null when there is no communication.")
    exposed_comm_ns: int = Field(description="comm_ns - overlap_ns: communication with no compute running.")
    exposed_comm_pct: float = Field(description="exposed_comm_ns as % of the window.")
    top_kernels: list[CommKernel] = Field(description="NCCL kernels on this device by total time.")


class Result(ToolResult):
    comm_kernel_count: int = Field(description="NCCL kernels overlapping the window on the selected GPUs.")
    devices: list[DeviceComm]


def _top_kernels(names: np.ndarray, clipped_ns: np.ndarray, limit: int) -> list[CommKernel]:
    """Per-name launch count and summed clipped time, largest total first (ties by name)."""
    uniq, inv = np.unique(names.astype(str), return_inverse=True)
    n = np.bincount(inv, minlength=len(uniq))
    t = np.bincount(inv, weights=clipped_ns, minlength=len(uniq)).astype(np.int64)
    order = sorted(range(len(uniq)), key=lambda i: (-t[i], uniq[i]))[:limit]
    return [CommKernel(name=str(uniq[i]), count=int(n[i]), total_ns=int(t[i])) for i in order]


def _without(s: np.ndarray, e: np.ndarray, rs: np.ndarray, re: np.ndarray) -> np.ndarray:
    """Mask of the rows of (s, e) left after removing one row equal to each (rs, re) pair.

    ``s`` is sorted and every pair is among the rows. Equal intervals are interchangeable,
    so the union of what is left does not depend on which of them is removed.
    """
    keep = np.ones(len(s), dtype=bool)
    lo = np.searchsorted(s, rs, side="left")
    hi = np.searchsorted(s, rs, side="right")
    alone = hi - lo == 1  # the only row starting then: it is the one
    alone[alone] = e[lo[alone]] == re[alone]
    keep[lo[alone]] = False
    for i in np.flatnonzero(~alone):  # rows sharing a start time: rare
        run = np.arange(lo[i], hi[i])
        same = run[keep[run] & (e[run] == re[i])]
        if len(same):
            keep[same[0]] = False
    return keep


def _compute_union(profile, w, device: int, cs: np.ndarray, ce: np.ndarray) -> Union:
    """Union of the device's kernels in the window other than the comm kernels (cs, ce)."""
    a = profile.con.execute(
        f'SELECT start, "end" FROM launches WHERE device_id = {int(device)} '
        f'AND "end" > {w.start_ns} AND start < {w.end_ns}').fetchnumpy()
    s, e = np.asarray(a["start"], np.int64), np.asarray(a["end"], np.int64)
    if len(s) > 1 and (s[1:] < s[:-1]).any():  # launches is stored by start; stay right if it is not
        o = np.argsort(s, kind="stable")
        s, e = s[o], e[o]
    keep = _without(s, e, cs, ce)
    return merge(s[keep], e[keep], w)


def comm_kernels(profile, w, gpu: int | None = None) -> dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Per device with NCCL kernels overlapping the window: their (starts, ends, short names)."""
    dev_filter = "" if gpu is None else f" AND device_id = {int(gpu)}"
    # Comm kernels are few: fetch them once for the union, the counts and the per-name totals. The
    # name test needs both names; skip the scan when no string mentions nccl.
    has_comm_names = profile.one(f"SELECT count(*) FROM ({COMM_NAMES})")[0] > 0
    c = profile.con.execute(
        f'SELECT device_id, start, "end", short_name FROM kernels WHERE "end" > {int(w.start_ns)} '
        f"AND start < {int(w.end_ns)} AND device_id IS NOT NULL AND {IS_COMM}{dev_filter}"
        + ("" if has_comm_names else " AND false")
    ).fetchnumpy()
    cdev = np.asarray(c["device_id"], dtype=np.int64)
    cs = np.asarray(c["start"], dtype=np.int64)
    ce = np.asarray(c["end"], dtype=np.int64)
    cname = np.asarray(c["short_name"], dtype=object)
    return {int(d): (cs[cdev == d], ce[cdev == d], cname[cdev == d]) for d in np.unique(cdev)}


def comm_and_compute(profile, w, device: int, cs: np.ndarray, ce: np.ndarray) -> tuple[Union, Union]:
    """The device's communication union (its NCCL kernels cs, ce) and compute union (its other kernels)."""
    return merge(cs, ce, w), _compute_union(profile, w, device, cs, ce)


def run(profile, params: Params) -> Result:
    w = profile.window(params.start_ms, params.end_ms)
    devices = profile.check_gpu(params.gpu)
    w0, w1 = int(w.start_ns), int(w.end_ns)
    busy = kernel_unions(profile, w, devices)
    comm: dict[int, Union] = {}
    compute: dict[int, Union] = {}
    counts: dict[int, int] = {}
    top: dict[int, list[CommKernel]] = {}
    for d, (cs, ce, cname) in comm_kernels(profile, w, params.gpu).items():
        comm[d], compute[d] = comm_and_compute(profile, w, d, cs, ce)
        counts[d] = len(cs)
        top[d] = _top_kernels(cname, np.minimum(ce, w1) - np.maximum(cs, w0), params.limit)

    out = []
    for d in devices:
        cu, k = comm.get(d, EMPTY), compute.get(d, busy[d])  # no comm kernels: every kernel is compute
        overlap = cu.total + k.total - busy[d].total  # |C & K| = |C| + |K| - |C | K|
        exposed = cu.total - overlap
        if not counts.get(d):
            verdict = "no_nccl"
        elif pct(exposed, w) >= NOT_OVERLAPPED_EXPOSED_PCT:
            verdict = "not_overlapped"
        elif 100.0 * overlap >= OVERLAPPED_MIN_PCT * cu.total:
            verdict = "overlapped"
        else:
            verdict = "minor"
        out.append(DeviceComm(
            device_id=d, verdict=verdict, comm_kernel_count=counts.get(d, 0),
            comm_ns=cu.total, comm_pct=round(pct(cu.total, w), 3),
            compute_ns=k.total, compute_pct=round(pct(k.total, w), 3),
            overlap_ns=overlap, overlap_pct=round(100.0 * overlap / cu.total, 3) if cu.total else None,
            exposed_comm_ns=exposed, exposed_comm_pct=round(pct(exposed, w), 3),
            top_kernels=top.get(d, []),
        ))

    notes = []
    if not profile.has_table("kernel"):
        notes.append("No kernels in this profile (no CUPTI_ACTIVITY_KIND_KERNEL rows): nothing to analyse.")
    elif not counts:
        notes.append("No NCCL kernels (name containing 'nccl') in the window: no multi-GPU communication "
                     "recorded, or it does not use NCCL.")
    return Result(tool="nccl", window=WindowInfo.of(w), comm_kernel_count=sum(counts.values()),
                  devices=out, notes=notes)


TOOL = Tool(
    name="nccl",
    summary=("How much GPU time NCCL communication kernels take per GPU and how much of it overlaps compute "
             "kernels; flags GPUs where exposed (un-overlapped) communication is a large share of the window."),
    params=Params, result=Result, run=run,
)
