"""memory: device memory over time, allocator churn, and unified-memory faults and migrations.

Device memory in use (measure/definitions.py): per GPU, allocations minus frees of device memory
(CUDA_GPU_MEMORY_USAGE_EVENTS with memory kind device, array or device-static; ``nsys profile
--cuda-memory-usage=true``), every process together, from the first recorded event. Memory allocated before
the capture started is not seen, so ``in_use_*`` are what the capture allocated. A free with no byte count
frees what the last allocation at its address (same process and GPU) held. ``peak_bytes`` is the highest
value inside the window (the value at the window start included), ``lowest_bytes`` the lowest, and ``timeline``
the value after each
event, at most ``TIMELINE_POINTS`` points (the highest of each equal slice of the window). Managed
allocations (``cudaMallocManaged``) are counted apart (``managed_*``): their pages live where they are used.

Allocator churn: allocation and free events in the window and in each step (the iterations tool's steps),
and the time in allocation API calls (``ALLOC_API``: cudaMalloc*, cudaFree*, cuMemAlloc*, cuMemFree*, ...) per
name and per step, each call clipped to the window or step.

Unified memory: page faults on the CPU (CUDA_UM_CPU_PAGE_FAULT_EVENTS) and on each GPU
(CUDA_UM_GPU_PAGE_FAULT_EVENTS: records, and the faults they count), and migrations: memcpy rows with
copyKind 11-13 (the driver moving managed pages; ``memcpy.migration``), their count, bytes and union time per
GPU, by direction and cause (migrationCause). A kernel *waited on unified memory* when a GPU page fault of its
GPU overlaps one of its launches, migrations on its GPU overlap one of its launches (``migration_overlap_ns``:
the migrations' union inside its launches, summed; the kernel that runs while pages move is the one that
faulted them in, so it pays), or migrations on its GPU run between its launch call's end and its start while no
kernel of that GPU runs (``migration_wait_ns``: that part of the migrations' union, summed over its launches;
migrations under an earlier kernel are that kernel's, not the next one's). ``kernels_waiting`` lists them, most
migration time (overlap + wait) and faults first.
"""
from __future__ import annotations

import re

import numpy as np
from pydantic import BaseModel, Field

from dashcam.measure.intervals import Union, kernel_unions, merge, overlapping

from .base import Tool, ToolParams, ToolResult, WindowInfo

DEVICE_KINDS = ("device", "array", "device_static")
MANAGED_KINDS = ("managed", "managed_static")
ALLOC_API = r"^(cuda(Malloc|Free)\w*|cuMem(Alloc|Free|Create|Release)\w*)$"
TIMELINE_POINTS = 50


class Params(ToolParams):
    pass


class MemoryPoint(BaseModel):
    t_ms: float = Field(description="ms from the start of the profile's GPU activity.")
    in_use_bytes: int


class DeviceMemory(BaseModel):
    device_id: int
    allocations: int = Field(description="Device-memory allocations in the window.")
    frees: int = Field(description="Device-memory frees in the window.")
    allocated_bytes: int
    freed_bytes: int
    in_use_start_bytes: int = Field(description="Device memory in use at the window start (what the capture "
                                                "allocated before it).")
    in_use_end_bytes: int = Field(description="At the window end.")
    peak_bytes: int = Field(description="The highest device memory in use inside the window.")
    peak_at_ms: float = Field(description="When it was first reached.")
    lowest_bytes: int = Field(0, description="The lowest device memory in use inside the window (the value at the "
                                             "window start included).")
    total_memory_bytes: int | None = Field(None, description="The GPU's memory (TARGET_INFO_GPU.totalMemory).")
    peak_pct: float | None = Field(None, description="peak_bytes as % of total_memory_bytes.")
    managed_allocations: int = Field(0, description="Managed-memory allocations in the window.")
    managed_allocated_bytes: int = 0
    timeline: list[MemoryPoint] = Field(description="Device memory in use over the window.")


class ApiTime(BaseModel):
    name: str
    calls: int = Field(description="Calls overlapping the window.")
    total_ns: int = Field(description="Their durations clipped to the window, summed.")
    max_ns: int


class StepMemory(BaseModel):
    index: int = Field(description="The step (iterations tool).")
    start_ns: int
    end_ns: int
    allocations: int = Field(description="Allocation events (every memory kind) in the step.")
    frees: int
    allocated_bytes: int
    api_calls: int = Field(description="Allocation API calls (ALLOC_API) starting in the step.")
    api_ns: int = Field(description="Their time, clipped to the step.")


class Migrations(BaseModel):
    device_id: int
    count: int
    bytes: int
    union_ns: int = Field(description="The migrations' union inside the window.")
    htod_bytes: int
    dtoh_bytes: int
    cause_bytes: dict[str, int] = Field(description="migrationCause -> bytes (prefetch, page_fault, "
                                                 "speculative_prefetch, eviction, access_counters, unknown).")


class KernelWait(BaseModel):
    name: str = Field(description="Kernel short name (untrusted profile text).")
    device_id: int
    launches: int = Field(description="Its launches in the window.")
    faulting_launches: int = Field(description="Launches with a GPU page fault of their GPU during them.")
    faults: int = Field(description="Page faults (numberOfPageFaults) of the fault records overlapping them.")
    migration_wait_ns: int = Field(description="Migrations on its GPU between each launch call's end and the "
                                               "kernel's start while no kernel of its GPU runs (union), summed.")
    kernel_ns: int = Field(0, description="Its launches' time inside the window, summed.")
    migration_overlap_ns: int = Field(0, description="Migrations on its GPU during its launches (union), summed.")
    migration_overlap_bytes: int = Field(0, description="The bytes those migrations moved (each migration's bytes "
                                                        "in proportion to the part of it inside the launch).")
    overlap_pct: float = Field(0.0, description="migration_overlap_ns as % of kernel_ns: the fault-bound share of "
                                                "its time.")


class UnifiedMemory(BaseModel):
    cpu_faults: int = Field(description="CPU page faults on managed memory in the window.")
    gpu_fault_records: int = Field(description="GPU page-fault records in the window.")
    gpu_faults: int = Field(description="The faults they count (numberOfPageFaults).")
    migrations: list[Migrations] = Field(description="Per GPU with migrations.")
    kernels_waiting: list[KernelWait] = Field(description="Kernels that waited on faults or migrations (at most "
                                                          "`limit`).")


class Result(ToolResult):
    recorded: bool = Field(description="The capture has memory usage events (--cuda-memory-usage=true).")
    devices: list[DeviceMemory] = Field(description="GPUs with device-memory events.")
    alloc_api: list[ApiTime] = Field(description="Allocation API calls by name, most time first.")
    steps: list[StepMemory] = Field(default_factory=list, description="Per step, the first `limit`.")
    step_method: str | None = None
    unified: UnifiedMemory


def _events(profile) -> dict[str, np.ndarray]:
    d = profile.con.execute("""SELECT start, coalesce(pid, -1) AS pid, coalesce(device_id, -1) AS device_id,
            coalesce(address, -1) AS address, bytes, mem_kind, op FROM gpu_memory_events
        ORDER BY start, op""").fetchnumpy()
    return {c: np.asarray(np.ma.getdata(v)) for c, v in d.items()}


def in_use(ev: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Per event: its signed device-memory delta (definitions.py; frees without bytes take their allocation's)."""
    held: dict[tuple, int] = {}
    delta = np.zeros(len(ev["start"]), np.int64)
    device = np.isin(ev["mem_kind"], DEVICE_KINDS)
    for i in range(len(delta)):
        key = (int(ev["pid"][i]), int(ev["device_id"][i]), int(ev["address"][i]))
        n = int(ev["bytes"][i])
        if ev["op"][i] == "alloc":
            held[key] = n
            delta[i] = n
        elif ev["op"][i] == "free":
            delta[i] = -(n or held.get(key, 0))
            held.pop(key, None)
    return np.where(device, delta, 0), device


def _timeline(t: np.ndarray, level: np.ndarray, w, start_level: int) -> list[MemoryPoint]:
    pts = [MemoryPoint(t_ms=round(w.rel_ms(w.start_ns), 6), in_use_bytes=start_level)]
    if not len(t):
        return pts
    edges = np.linspace(w.start_ns, w.end_ns, TIMELINE_POINTS + 1)
    slot = np.clip(np.searchsorted(edges, t, side="right") - 1, 0, TIMELINE_POINTS - 1)
    for s in np.unique(slot):
        m = np.flatnonzero(slot == s)
        i = m[np.argmax(level[m])]
        pts.append(MemoryPoint(t_ms=round(w.rel_ms(int(t[i])), 6), in_use_bytes=int(level[i])))
    return pts


def _devices(profile, w, devices: list[int], ev: dict[str, np.ndarray]) -> list[DeviceMemory]:
    delta, _ = in_use(ev)
    total = {int(d): t for d, t in profile.rows("SELECT device_id, total_memory FROM gpus WHERE device_id IS NOT NULL")}
    out = []
    for d in devices:
        mine = ev["device_id"] == d
        if not mine.any():
            continue
        t, dd = ev["start"][mine].astype(np.int64), delta[mine]
        level = np.cumsum(dd)
        before = t < w.start_ns
        inside = (t >= w.start_ns) & (t <= w.end_ns)
        start_level = int(level[before][-1]) if before.any() else 0
        lv = level[inside]
        peak = max([start_level, *lv.tolist()])
        at = w.start_ns if peak == start_level else int(t[inside][int(np.argmax(lv))])
        ops, kinds = ev["op"][mine][inside], ev["mem_kind"][mine][inside]
        dev_k = np.isin(kinds, DEVICE_KINDS)
        managed = np.isin(kinds, MANAGED_KINDS) & (ops == "alloc")
        tot = total.get(d)
        out.append(DeviceMemory(
            device_id=d, allocations=int((dev_k & (ops == "alloc")).sum()), frees=int((dev_k & (ops == "free")).sum()),
            allocated_bytes=int(dd[inside][dd[inside] > 0].sum()), freed_bytes=int(-dd[inside][dd[inside] < 0].sum()),
            in_use_start_bytes=start_level, in_use_end_bytes=int(lv[-1]) if len(lv) else start_level,
            peak_bytes=int(peak), peak_at_ms=round(w.rel_ms(at), 6), lowest_bytes=int(min([start_level, *lv.tolist()])),
            total_memory_bytes=tot,
            peak_pct=round(100.0 * peak / tot, 3) if tot else None,
            managed_allocations=int(managed.sum()),
            managed_allocated_bytes=int(ev["bytes"][mine][inside][managed].astype(np.int64).sum()),
            timeline=_timeline(t[inside], lv, w, start_level)))
    return out


def _alloc_api(profile, w) -> tuple[list[ApiTime], dict[str, np.ndarray]]:
    d = profile.con.execute(f"""SELECT a.start, a."end", n.name FROM api_calls a JOIN api_names n ON n.id = a.name_id
        WHERE regexp_matches(n.name, '{ALLOC_API}') AND a."end" > {w.start_ns} AND a.start < {w.end_ns}""").fetchnumpy()
    s, e = np.asarray(d["start"], np.int64), np.asarray(d["end"], np.int64)
    names = np.asarray(d["name"], object)
    clipped = np.minimum(e, w.end_ns) - np.maximum(s, w.start_ns)
    rows = []
    for n in sorted(set(names.tolist())):
        m = names == n
        rows.append(ApiTime(name=n, calls=int(m.sum()), total_ns=int(clipped[m].sum()), max_ns=int((e - s)[m].max())))
    rows.sort(key=lambda r: (-r.total_ns, r.name))
    return rows, {"start": s, "end": e}


def _steps(profile, w, params: Params, ev: dict[str, np.ndarray], api: dict[str, np.ndarray]):
    from .iterations import Params as StepParams
    from .iterations import run as steps_run

    r = steps_run(profile, StepParams(gpu=params.gpu, start_ms=params.start_ms, end_ms=params.end_ms,
                                      limit=params.limit))
    out = []
    t = ev["start"].astype(np.int64)
    for s in r.steps:
        a, b = max(s.start_ns, w.start_ns), min(s.end_ns, w.end_ns)
        m = (t >= a) & (t < b)
        am = (api["start"] >= a) & (api["start"] < b)
        allocs = m & (ev["op"] == "alloc")
        out.append(StepMemory(index=s.index, start_ns=s.start_ns, end_ns=s.end_ns, allocations=int(allocs.sum()),
                              frees=int((m & (ev["op"] == "free")).sum()),
                              allocated_bytes=int(ev["bytes"][allocs].astype(np.int64).sum()),
                              api_calls=int(am.sum()),
                              api_ns=int((np.minimum(api["end"][am], b) - api["start"][am]).clip(0).sum())))
    return out, r.method


def _unified(profile, w, devices: list[int], limit: int) -> UnifiedMemory:
    dev_list = ", ".join(str(int(d)) for d in devices) or "NULL"
    inside = f'"end" >= {w.start_ns} AND start <= {w.end_ns}'
    cpu = int(profile.one(f"SELECT count(*) FROM um_faults WHERE side = 'cpu' AND {inside}")[0])
    n_rec, n_faults = profile.one(f"""SELECT count(*), coalesce(sum(faults), 0)::BIGINT FROM um_faults
        WHERE side = 'gpu' AND device_id IN ({dev_list}) AND {inside}""")
    migrations = []
    unions, rows_of = {}, {}
    for d in devices:
        m = profile.con.execute(f"""SELECT start, "end", bytes, kind, coalesce(migration_cause, 'unknown') AS cause
            FROM memcpy WHERE migration AND device_id = {int(d)} AND "end" > {w.start_ns} AND start < {w.end_ns}
            """).fetchnumpy()
        if not len(m["start"]):
            continue
        s, e, nbytes = (np.asarray(m[c], np.int64) for c in ("start", "end", "bytes"))
        kind, cause = np.asarray(m["kind"], object), np.asarray(m["cause"], object)
        unions[d] = merge(s, e)
        rows_of[d] = (s, e, nbytes)
        cause_bytes = {c: int(nbytes[cause == c].sum()) for c in sorted(set(cause.tolist()))}
        migrations.append(Migrations(device_id=d, count=len(s), bytes=int(nbytes.sum()),
                                     union_ns=merge(s, e, w).total, htod_bytes=int(nbytes[kind == "HtoD"].sum()),
                                     dtoh_bytes=int(nbytes[kind == "DtoH"].sum()), cause_bytes=cause_bytes))
    waits: dict[tuple[int, int], dict] = {}
    for (d, nm), add in _kernel_migrations(profile, w, unions, rows_of).items():
        row = waits.setdefault((d, nm), {"launches": 0, "wait": 0, "faulting": 0, "faults": 0})
        for key, v in add.items():
            row[key] = row.get(key, 0) + v
    if n_rec:
        for d, nm, launches, faulting, faults in profile.rows(f"""
                WITH k AS (SELECT device_id, coalesce(short_name_id, -1) AS name, start, "end" FROM kernel_times
                           WHERE device_id IN ({dev_list}) AND "end" > {w.start_ns} AND start < {w.end_ns}),
                     f AS (SELECT device_id, start, "end", faults FROM um_faults WHERE side = 'gpu'),
                     per AS (SELECT k.device_id, k.name, k.start, sum(f.faults) AS faults FROM k LEFT JOIN f
                             ON f.device_id = k.device_id AND f.start < k."end" AND f."end" > k.start
                             GROUP BY ALL)
                SELECT device_id, name, count(*), count(faults), coalesce(sum(faults), 0)::BIGINT FROM per
                GROUP BY 1, 2"""):
            row = waits.setdefault((int(d), int(nm)), {"launches": int(launches), "wait": 0, "faulting": 0,
                                                       "faults": 0})
            row["launches"] = int(launches)
            row["faulting"], row["faults"] = int(faulting), int(faults)
    hit = {key: v for key, v in waits.items() if v["wait"] or v["faults"] or v.get("overlap")}
    label = {int(i): v for i, v in profile.rows("SELECT id, value FROM strings WHERE id IN (SELECT unnest(?))",
                                                [[nm for _, nm in hit]])} if hit else {}
    rows = [KernelWait(name=label.get(nm, "<unnamed kernel>"), device_id=d, launches=v["launches"],
                       faulting_launches=v["faulting"], faults=v["faults"], migration_wait_ns=v["wait"],
                       kernel_ns=v.get("kernel", 0), migration_overlap_ns=v.get("overlap", 0),
                       migration_overlap_bytes=v.get("bytes", 0),
                       overlap_pct=round(100.0 * v.get("overlap", 0) / v["kernel"], 3) if v.get("kernel") else 0.0)
            for (d, nm), v in hit.items()]
    rows.sort(key=lambda r: (-(r.migration_overlap_ns + r.migration_wait_ns), -r.faults, r.device_id, r.name))
    return UnifiedMemory(cpu_faults=cpu, gpu_fault_records=int(n_rec), gpu_faults=int(n_faults),
                         migrations=migrations, kernels_waiting=rows[:limit])


def _intersect(u: Union, v: Union) -> Union:
    """The time in both unions."""
    p, r = overlapping(u.starts, u.ends, v.starts, v.ends)
    return merge(np.maximum(u.starts[r], v.starts[p]), np.minimum(u.ends[r], v.ends[p]))


def _kernel_migrations(profile, w, unions: dict[int, Union], rows_of: dict) -> dict[tuple[int, int], dict]:
    """Per (device, kernel name): its launches, their time, the migrations overlapping them (time, bytes) and the
    migration wait before them outside every kernel of the device (module docstring)."""
    if not unions:
        return {}
    ids = ", ".join(str(d) for d in unions)
    k = profile.con.execute(f"""SELECT device_id, coalesce(short_name_id, -1) AS name, start,
            greatest(start, {w.start_ns}) AS a, least("end", {w.end_ns}) AS b, coalesce(api_end, start) AS api_end
        FROM launches
        WHERE device_id IN ({ids}) AND "end" > {w.start_ns} AND start < {w.end_ns}""").fetchnumpy()
    dev, name, start, ka, kb, api_end = (np.asarray(k[c], np.int64) for c in ("device_id", "name", "start", "a",
                                                                               "b", "api_end"))
    out: dict[tuple[int, int], dict] = {}
    for d, u in unions.items():
        sel = dev == d
        q, a = start[sel], np.minimum(api_end[sel], start[sel])
        under = _intersect(u, kernel_unions(profile, w, [d])[d])  # migrations while a kernel of d runs
        wait = u.overlap(a, q) - under.overlap(a, q)
        s, e = ka[sel], kb[sel]
        over = u.overlap(s, e)
        ms, me, mb = rows_of[d]
        p, r = overlapping(ms, me, s, e)
        part = (np.minimum(me[r], e[p]) - np.maximum(ms[r], s[p])) / np.maximum(me[r] - ms[r], 1)
        moved = np.zeros(len(s))
        np.add.at(moved, p, mb[r] * part)
        for nm, wt, ov, ns, b in zip(name[sel].tolist(), wait.tolist(), over.tolist(), (e - s).tolist(),
                                     moved.tolist()):
            row = out.setdefault((d, nm), {"launches": 0, "wait": 0, "overlap": 0, "kernel": 0, "bytes": 0})
            row["launches"] += 1
            row["wait"] += int(wt)
            row["overlap"] += int(ov)
            row["kernel"] += int(ns)
            row["bytes"] += round(b)
    return out


def run(profile, params: Params) -> Result:
    w = profile.window(params.start_ms, params.end_ms)
    devices = profile.check_gpu(params.gpu)
    notes = []
    recorded = profile.has_table("gpu_memory")
    ev = _events(profile)
    out = _devices(profile, w, devices, ev) if recorded else []
    api, calls = _alloc_api(profile, w)
    steps, method = [], None
    if recorded or len(calls["start"]):
        steps, method = _steps(profile, w, params, ev, calls)
    if not recorded:
        notes.append("No memory usage events in this capture (CUDA_GPU_MEMORY_USAGE_EVENTS): "
                     "`nsys profile --cuda-memory-usage=true` records allocations and frees.")
    um = _unified(profile, w, devices, params.limit)
    if not (profile.has_table("um_cpu_faults") or profile.has_table("um_gpu_faults")) and profile.has_migrations:
        notes.append("Unified-memory migrations but no page-fault records: `nsys profile "
                     "--cuda-um-cpu-page-faults=true --cuda-um-gpu-page-faults=true` records the faults behind them.")
    if any(re.search(r"Managed", a.name) for a in api) and not um.migrations:
        notes.append("cudaMallocManaged calls but no migrations in the window.")
    return Result(tool="memory", window=WindowInfo.of(w), recorded=recorded, devices=out, alloc_api=api[: params.limit],
                  steps=steps, step_method=method, unified=um, notes=notes)


TOOL = Tool(
    name="memory",
    summary=("Device memory and unified memory: per GPU the peak and timeline of allocated device memory "
             "(--cuda-memory-usage), allocations and frees in the window and per step with the time in allocation "
             "calls (allocator churn), unified-memory page faults and migrations (bytes, time, cause) and the "
             "kernels that waited on them."),
    params=Params, result=Result, run=run,
)
