"""streams: how work is spread over CUDA streams and how much kernels on different streams overlap."""
from __future__ import annotations

import numpy as np
from pydantic import BaseModel, Field

from dashcam.measure.definitions import pct
from dashcam.measure.intervals import EMPTY, kernel_unions, merge

from .base import Tool, ToolParams, ToolResult, WindowInfo


class Params(ToolParams):
    pass


class StreamRow(BaseModel):
    pid: int | None = Field(description="Process owning the stream (stream ids are per process).")
    stream_id: int | None
    kernel_count: int = Field(description="Kernels on this stream overlapping the window.")
    kernel_time_ns: int = Field(description="Length of the union of this stream's kernel intervals in the window.")
    kernel_time_pct: float = Field(description="kernel_time_ns as % of the window.")
    memcpy_count: int = Field(description="Memcpys on this stream overlapping the window.")
    memset_count: int = Field(description="Memsets on this stream overlapping the window.")
    top_kernel: str | None = Field(None, description="Its kernel (short name) with the most time in the window.")


class DeviceStreams(BaseModel):
    device_id: int
    stream_count: int = Field(description="Streams with a kernel, memcpy or memset in the window.")
    kernel_count: int
    memcpy_count: int
    kernel_busy_ns: int = Field(description="Length of the union of all this device's kernel intervals in the window.")
    stream_kernel_time_ns: int = Field(description="Sum over streams of each stream's kernel union length.")
    avg_concurrency: float | None = Field(description=(
        "Time-weighted average number of streams running a kernel while any kernel runs: "
        "stream_kernel_time_ns / kernel_busy_ns (1.0 = no overlap); null when kernel_busy_ns is 0."))
    max_concurrent_kernels: int = Field(description="Most kernels observed running at the same instant.")
    overlap_ns: int = Field(description="Time during which kernels ran on two or more streams at once.")
    overlap_pct: float = Field(description="overlap_ns as % of this device's kernel_busy_ns.")
    streams: list[StreamRow] = Field(description="Streams by kernel_time_ns, descending (limit rows).")


class Result(ToolResult):
    devices: list[DeviceStreams]


def _overlap(u_starts: np.ndarray, u_ends: np.ndarray) -> int:
    """Time covered by two or more of the stream unions: a sweep over +1 (start) / -1 (end) events."""
    if len(u_starts) == 0:
        return 0
    # Encode time*2 + is_start so that at equal times ends (-1) sort before starts (+1): half-open intervals.
    ev = np.sort(np.concatenate((u_ends * 2, u_starts * 2 + 1)), kind="stable")
    level = np.cumsum(np.where(ev & 1, 1, -1))
    dt = np.diff(ev >> 1)
    return int(dt[level[:-1] >= 2].sum())


def _max_concurrent(starts: np.ndarray, ends: np.ndarray) -> int:
    """Most intervals open at one instant: at each start, starts so far minus ends at or before it."""
    if len(starts) == 0:
        return 0
    s = np.sort(starts, kind="stable")
    e = np.sort(ends, kind="stable")
    return int((np.arange(1, len(s) + 1) - np.searchsorted(e, s, side="right")).max())


def _in_window(w, devices: list[int]) -> str:
    return (f'"end" > {w.start_ns} AND start < {w.end_ns} '
            f'AND device_id IN ({", ".join(str(d) for d in devices)})')


def _key(k) -> tuple:
    """A stream: (device_id, pid, stream_id)."""
    d, p, s = k
    return int(d), None if p is None else int(p), None if s is None else int(s)


def _counts(profile, view: str, where: str) -> dict[tuple, int]:
    """Events per stream overlapping the window."""
    return {_key(k): int(n) for *k, n in profile.rows(
        f"SELECT device_id, pid, stream_id, count(*) FROM {view} WHERE {where} GROUP BY ALL")}


def _kernel_intervals(profile, where: str, w) -> tuple[dict[tuple, int], dict[tuple, tuple]]:
    """Kernel count and clipped (starts, ends) per stream, each stream's sorted by start.

    ``launches`` is stored sorted by device and start; its rows are tagged with
    hash(device, pid, stream) and bucketed in numpy by a stable sort, which keeps that
    order and is much cheaper than sorting 10^6 rows by stream in SQL.
    """
    groups = sorted(profile.rows(
        f"SELECT hash(device_id, pid, stream_id), * FROM "
        f"(SELECT device_id, pid, stream_id, count(*) FROM launches WHERE {where} GROUP BY ALL)"))
    counts = {_key(g[1:4]): int(g[4]) for g in groups}
    if not groups:
        return counts, {}
    a = profile.con.execute(f'SELECT hash(device_id, pid, stream_id) AS h, start, "end" FROM launches '
                            f'WHERE {where}').fetchnumpy()
    gi = np.searchsorted(np.array([g[0] for g in groups], dtype=np.uint64), np.asarray(a["h"], dtype=np.uint64))
    gi = gi.astype(np.int16 if len(groups) < 2**15 else np.int64)
    order = np.argsort(gi, kind="stable")  # a radix sort for int16; keeps each stream's rows in file order
    s = np.asarray(a["start"], dtype=np.int64)[order]
    e = np.asarray(a["end"], dtype=np.int64)[order]
    np.maximum(s, w.start_ns, out=s)  # clip to the window
    np.minimum(e, w.end_ns, out=e)
    cuts = np.concatenate(([0], np.cumsum(np.bincount(gi, minlength=len(groups)))))
    return counts, {_key(g[1:4]): (s[cuts[i]:cuts[i + 1]], e[cuts[i]:cuts[i + 1]]) for i, g in enumerate(groups)}


def _top_kernels(profile, where: str) -> dict[tuple, str]:
    """Per stream, the short name of its kernel with the most time in the window (one grouped pass)."""
    return {_key(k): name for *k, name in profile.rows(
        f"""SELECT device_id, pid, stream_id, arg_max(s.value, t) FROM (
                SELECT device_id, pid, stream_id, short_name_id, sum("end" - start) AS t FROM launches
                WHERE {where} GROUP BY ALL) l LEFT JOIN strings s ON s.id = l.short_name_id GROUP BY ALL""")}


def run(profile, params: Params) -> Result:
    w = profile.window(params.start_ms, params.end_ms)
    devices = profile.check_gpu(params.gpu)
    where = _in_window(w, devices)
    kc, intervals = _kernel_intervals(profile, where, w)
    mc = _counts(profile, "memcpy", where)
    sc = _counts(profile, "memset", where)
    tops = _top_kernels(profile, where) if kc else {}
    unions = {k: merge(s, e) for k, (s, e) in intervals.items()}
    device_busy = kernel_unions(profile, w, devices)

    out = []
    for d in devices:
        dev_kernels = [k for k in unions if k[0] == d]
        us = [unions[k] for k in dev_kernels]
        stream_sum = sum(u.total for u in us)
        busy = device_busy[d].total
        if len(us) <= 1:  # one stream: no other stream overlaps it
            overlap = 0
        else:
            overlap = _overlap(np.concatenate([u.starts for u in us]), np.concatenate([u.ends for u in us]))
        raw_sum = sum(int((intervals[k][1] - intervals[k][0]).sum()) for k in dev_kernels)
        if raw_sum == busy:  # no two kernels overlap at all
            most = 1 if busy > 0 else 0
        else:
            most = _max_concurrent(np.concatenate([intervals[k][0] for k in dev_kernels]),
                                   np.concatenate([intervals[k][1] for k in dev_kernels]))
        keys = sorted({k for k in (*kc, *mc, *sc) if k[0] == d},
                      key=lambda k: (-unions.get(k, EMPTY).total, -kc.get(k, 0), -mc.get(k, 0), str(k)))
        rows = [StreamRow(pid=k[1], stream_id=k[2], kernel_count=kc.get(k, 0),
                          kernel_time_ns=unions.get(k, EMPTY).total,
                          kernel_time_pct=round(pct(unions.get(k, EMPTY).total, w), 3),
                          memcpy_count=mc.get(k, 0), memset_count=sc.get(k, 0), top_kernel=tops.get(k))
                for k in keys[: params.limit]]
        out.append(DeviceStreams(
            device_id=d, stream_count=len(keys),
            kernel_count=sum(n for k, n in kc.items() if k[0] == d),
            memcpy_count=sum(n for k, n in mc.items() if k[0] == d),
            kernel_busy_ns=busy, stream_kernel_time_ns=stream_sum,
            avg_concurrency=round(stream_sum / busy, 4) if busy > 0 else None,
            max_concurrent_kernels=most, overlap_ns=overlap,
            overlap_pct=round(max(0.0, min(100.0, 100.0 * overlap / busy)), 3) if busy > 0 else 0.0,
            streams=rows))

    notes = []
    if not profile.has_table("kernel"):
        notes.append("No kernels in this profile (no CUPTI_ACTIVITY_KIND_KERNEL rows): no kernel concurrency.")
    cut = [f"GPU {x.device_id}: {x.stream_count}" for x in out if x.stream_count > params.limit]
    if cut:
        notes.append(f"Only the top {params.limit} streams per GPU are listed (streams: {', '.join(cut)}).")
    return Result(tool="streams", window=WindowInfo.of(w), devices=out, notes=notes)


TOOL = Tool(
    name="streams",
    summary=("How GPU work is spread over CUDA streams: per GPU and stream the kernel count and kernel time, "
             "memcpy count, and how much kernels on different streams actually ran concurrently."),
    params=Params, result=Result, run=run,
)
