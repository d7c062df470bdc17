"""kernel_detail: one kernel's analysis — its launches and durations, grid against the SMs, launch-to-start
latency, what ran or was serviced while it ran, where it was launched from, its instantiations.

The kernel is every launch whose short or demangled name contains ``kernel`` (case-insensitive), on the selected
GPUs, overlapping the window; template instantiations (full names) are listed apart. Definitions
(docs/definitions.md, "kernel detail"):

- durations are clipped to the window; ``share_pct`` is their sum as % of all kernel time on the selected GPUs
  (sums of durations, as top_kernels);
- the launch configuration is the most frequent (grid, block) of the launches; ``sms_used`` is
  min(blocks, SMs): a grid of fewer blocks than the GPU has SMs leaves the others idle while it runs;
- ``shapes``: with several launch configurations, each one's launches and median duration (a kernel run on inputs
  of different sizes); the most frequent configuration's registers per thread and shared memory per block, and
  its theoretical occupancy on the GPU's model (measure/occupancy.py);
- launch-to-start latency: kernel start - end of the API call that launched it (same pid and correlationId);
- "during it" is the union of the kernel's own intervals: copies, unified-memory migrations (copy kinds 11-13)
  and GPU page faults (CUDA_UM_GPU_PAGE_FAULT_EVENTS) overlapping it, counted once each, with the time they
  overlap it; kernels of other names overlapping it (any stream);
- launched from: the innermost NVTX range open on the launching thread when the launch call started.
"""
from __future__ import annotations

from collections import Counter

import numpy as np
from pydantic import BaseModel, Field

from dashcam.errors import BadParameter
from dashcam.measure.gpu_models import model_of
from dashcam.measure.intervals import merge
from dashcam.measure.occupancy import occupancy
from dashcam.profile.gap_dependency import WAIT_NAMES

from .base import Tool, ToolParams, ToolResult, WindowInfo
from .enclosing import enclosing_ranges


class Params(ToolParams):
    kernel: str | None = Field(None, description="Case-insensitive substring of the kernel's short or demangled name; "
                                                 "default: the kernel (short name) with the most time.")
    exact: bool = Field(False, description="Match the short name exactly (case-insensitive) instead of a substring: "
                                           "'add' without 'addmm'.")


class Instantiation(BaseModel):
    full_name: str = Field(description="Demangled name: one template instantiation.")
    short_name: str
    launches: int
    total_ns: int


class Overlap(BaseModel):
    count: int = Field(description="Events overlapping the kernel's runs, each once.")
    bytes: int = Field(0, description="Their bytes (copies, migrations).")
    overlap_ns: int = Field(description="Time they overlap the kernel's runs (union of the kernel's intervals).")


class Launcher(BaseModel):
    nvtx_range: str | None = Field(description="Group label of the innermost NVTX range open on the launching thread "
                                               "at the call.")
    launches: int


class Shape(BaseModel):
    grid: list[int]
    block: list[int]
    launches: int
    total_ns: int
    median_ns: float


class Result(ToolResult):
    kernel_filter: str
    launches: int = Field(description="Matching kernels overlapping the window.")
    total_ns: int
    mean_ns: float | None = None
    median_ns: float | None = None
    max_ns: int | None = None
    min_ns: int | None = None
    share_pct: float = Field(0.0, description="total_ns as % of all kernel time on the selected GPUs in the window.")
    kernel_time_ns: int = Field(0, description="All kernel time on the selected GPUs in the window (the share's "
                                               "denominator).")
    instantiations: list[Instantiation] = Field(default_factory=list, description="Most time first.")
    device_ids: list[int] = Field(default_factory=list)
    grid: list[int] | None = Field(None, description="Most frequent grid (x, y, z) of the launches.")
    block: list[int] | None = Field(None, description="Most frequent block (x, y, z).")
    blocks: int | None = Field(None, description="Blocks of that grid.")
    threads_per_block: int | None = None
    config_launches: int = Field(0, description="Launches with that configuration.")
    sm_count: int | None = Field(None, description="SMs of the GPU with the most of these launches.")
    sms_used: int | None = Field(None, description="min(blocks, sm_count): SMs the grid can occupy at once.")
    blocks_per_sm: float | None = Field(None, description="blocks / sm_count.")
    shapes: list[Shape] = Field(default_factory=list, description="With more than one launch configuration: each "
                                "(grid, block), its launches and durations, most time first (at most 5).")
    registers_per_thread: int | None = Field(None, description="Registers per thread of the most frequent "
                                                               "configuration's launches (the most frequent value).")
    shared_mem_bytes: int | None = Field(None, description="Shared memory per block, static + dynamic, bytes.")
    gpu_model: str | None = Field(None, description="The GPU model (measure/gpu_models.py) of that GPU, if known.")
    occupancy_pct: float | None = Field(None, description="Theoretical occupancy of that configuration "
                                                          "(measure/occupancy.py): resident warps / warp slots, %.")
    occupancy_blocks_per_sm: int | None = Field(None, description="Its resident blocks per SM.")
    occupancy_limit: str | None = Field(None, description="What limits them: registers, shared memory, threads or "
                                                          "blocks.")
    latency_launches: int = Field(0, description="Launches joined to their launch call.")
    latency_median_ns: float | None = Field(None, description="Median kernel start - launch call end.")
    latency_min_ns: int | None = None
    latency_max_ns: int | None = None
    latency_p10_ns: float | None = Field(None, description="10th percentile of kernel start - launch call end.")
    latency_p90_ns: float | None = Field(None, description="90th percentile of kernel start - launch call end.")
    latency_total_ns: int = Field(0, description="The launch-to-start waits summed (the positive ones).")
    stream_wait_calls: int = Field(0, description="Stream-wait calls of the launching processes in the capture "
                                                  "(cudaStreamWaitEvent, "
                                                  "cuStreamWaitValue, ...; profile/gap_dependency.py WAIT_CALLS): "
                                                  "0 means no traced call made a stream wait on another.")
    latency_gpu_busy_pct: float | None = Field(None, description="Of the summed launch-to-start waits, % during which "
                                                                  "the GPU ran other work (kernels, copies): the "
                                                                  "kernel queued behind it; the rest the GPU was idle.")
    latency_idle_waits: int = Field(0, description="Launch-to-start waits in which the GPU had idle time (no kernel, "
                                                   "copy or memset) inside the window.")
    latency_idle_ns: int = Field(0, description="The GPU's idle time inside those waits, in the window: what "
                                                "the latency cost the GPU.")
    copies: Overlap = Field(description="Copies (not migrations) overlapping the kernel's runs.")
    migrations: Overlap = Field(description="Unified-memory migrations overlapping the kernel's runs.")
    page_fault_migrations: int = Field(0, description="Of those, migrations whose cause is a page fault.")
    gpu_page_faults: int = Field(0, description="GPU page faults (numberOfPageFaults summed) during its runs.")
    other_kernels: Overlap = Field(description="Kernels of other names overlapping its runs (other streams).")
    launched_from: list[Launcher] = Field(default_factory=list, description="Most launches first.")


def _count(profile, sql: str) -> list[tuple]:
    try:
        return profile.rows(sql)
    except Exception:  # a capture without that table's view: nothing of that kind
        return []


def _overlap(union, rows: list[tuple]) -> Overlap:
    if not rows:
        return Overlap(count=0, bytes=0, overlap_ns=0)
    s = np.array([r[0] for r in rows], np.int64)
    e = np.array([r[1] for r in rows], np.int64)
    ov = union.overlap(s, e)
    hit = ov > 0
    return Overlap(count=int(hit.sum()), bytes=int(sum(int(r[2] or 0) for r, h in zip(rows, hit) if h)),
                   overlap_ns=int(ov[hit].sum()))


def run(profile, params: Params) -> Result:
    w = profile.window(params.start_ms, params.end_ms)
    devices = profile.check_gpu(params.gpu)
    devs = ", ".join(str(d) for d in devices)
    clip = f'least("end", {w.end_ns}) - greatest(start, {w.start_ns})'
    inside = f'"end" > {w.start_ns} AND start < {w.end_ns} AND device_id IN ({devs})'
    if params.kernel is None:  # the kernel with the most time
        top = profile.rows(f"SELECT short_name FROM kernels WHERE {inside} GROUP BY 1 ORDER BY sum({clip}) DESC, 1 "
                           "LIMIT 1")
        params = params.model_copy(update={"kernel": top[0][0] if top else "", "exact": True})
    if not params.kernel.strip() and profile.rows(f"SELECT count(*) FROM kernels WHERE {inside}")[0][0]:
        raise BadParameter("kernel must name a kernel (a part of its name)")
    match = ("lower(short_name) = lower($1)" if params.exact else
             "(strpos(lower(name), lower($1)) > 0 OR strpos(lower(short_name), lower($1)) > 0)")
    rows = profile.rows(
        f"""SELECT start, "end", {clip} AS d, device_id, stream_id, pid, correlation_id, short_name, name,
                   grid_x, grid_y, grid_z, block_x, block_y, block_z, registers_per_thread, shared_mem_per_block
            FROM kernels WHERE {inside} AND {match} ORDER BY start""", [params.kernel])
    total_kernel = profile.rows(f"SELECT coalesce(sum({clip}), 0) FROM kernels WHERE {inside}")[0][0]
    base = {"tool": "kernel_detail", "window": WindowInfo.of(w), "kernel_filter": params.kernel,
            "kernel_time_ns": int(total_kernel), "copies": Overlap(count=0, overlap_ns=0),
            "migrations": Overlap(count=0, overlap_ns=0), "other_kernels": Overlap(count=0, overlap_ns=0)}
    if not rows:
        return Result(**base, launches=0, total_ns=0,
                      notes=[f"No kernel name contains {params.kernel!r} in this window."])
    d = np.array([r[2] for r in rows], np.int64)
    inst: dict[str, list] = {}
    for r in rows:
        x = inst.setdefault(r[8], [r[7], 0, 0])
        x[1] += 1
        x[2] += int(r[2])
    instantiations = [Instantiation(full_name=k, short_name=v[0], launches=v[1], total_ns=v[2])
                      for k, v in sorted(inst.items(), key=lambda kv: (-kv[1][2], kv[0]))]
    on = Counter(int(r[3]) for r in rows)
    main_dev = min(on, key=lambda x: (-on[x], x))
    configs = Counter((tuple(int(v or 1) for v in r[9:12]), tuple(int(v or 1) for v in r[12:15])) for r in rows)
    (grid, block), n_config = min(configs.items(), key=lambda kv: (-kv[1], kv[0]))
    blocks = grid[0] * grid[1] * grid[2]
    sm = profile.gpus[main_dev].sm_count if main_dev in profile.gpus else None
    figures = {
        "launches": len(rows), "total_ns": int(d.sum()), "mean_ns": round(float(d.mean()), 1),
        "median_ns": round(float(np.median(d)), 1), "max_ns": int(d.max()), "min_ns": int(d.min()),
        "share_pct": round(100.0 * int(d.sum()) / total_kernel, 3) if total_kernel else 0.0,
        "instantiations": instantiations, "device_ids": sorted(on), "grid": list(grid), "block": list(block),
        "blocks": blocks, "threads_per_block": block[0] * block[1] * block[2], "config_launches": n_config,
        "sm_count": sm, "sms_used": min(blocks, sm) if sm else None,
        "blocks_per_sm": round(blocks / sm, 3) if sm else None}
    figures.update(_shapes(rows, configs, grid, block, profile.gpus.get(main_dev)))
    figures.update(_latency(profile, rows, sorted(on), w))
    union = merge(np.array([r[0] for r in rows], np.int64), np.array([r[1] for r in rows], np.int64), w)
    lo, hi = int(union.starts[0]), int(union.ends[-1])
    near = f'"end" > {lo} AND start < {hi} AND device_id IN ({", ".join(str(x) for x in sorted(on))})'
    copies = _count(profile, f'SELECT start, "end", bytes, migration, migration_cause FROM memcpy WHERE {near}')
    figures["copies"] = _overlap(union, [c for c in copies if not c[3]])
    figures["migrations"] = _overlap(union, [c for c in copies if c[3]])
    figures["page_fault_migrations"] = _overlap(
        union, [c for c in copies if c[3] and str(c[4] or "").replace("_", " ") == "page fault"]).count
    faults = _count(profile, f"SELECT start, \"end\", faults FROM um_faults WHERE side = 'gpu' AND {near}")
    fault_ov = union.overlap(np.array([f[0] for f in faults], np.int64), np.array([f[1] for f in faults], np.int64)) \
        if faults else np.zeros(0, np.int64)
    # a fault record is an instant or an interval: it counts when it lies on the kernel's runs
    on_kernel = [f for f, o in zip(faults, fault_ov) if o > 0 or union.overlap(f[0], f[0] + 1) > 0]
    figures["gpu_page_faults"] = int(sum(int(f[2] or 1) for f in on_kernel))
    others = _count(profile, f"""SELECT start, "end", 0 FROM kernels WHERE {near}
                                  AND NOT {match.replace("$1", "'" + _sql_text(params.kernel) + "'")}""")
    figures["other_kernels"] = _overlap(union, others)
    figures["launched_from"] = _launched_from(profile, rows)
    return Result(**{**base, **figures})


def _shapes(rows: list[tuple], configs: Counter, grid: tuple, block: tuple, gpu) -> dict:
    """The launch configurations when there are several (their durations differ: a kernel called on two shapes),
    and the theoretical occupancy of the most frequent one on its GPU's model (measure/occupancy.py)."""
    out: dict = {}
    if len(configs) > 1:
        by: dict[tuple, list[int]] = {}
        for r in rows:
            key = (tuple(int(v or 1) for v in r[9:12]), tuple(int(v or 1) for v in r[12:15]))
            by.setdefault(key, []).append(int(r[2]))
        out["shapes"] = sorted((Shape(grid=list(g), block=list(b), launches=len(d), total_ns=sum(d),
                                      median_ns=round(float(np.median(d)), 1)) for (g, b), d in by.items()),
                               key=lambda x: (-x.total_ns, x.grid, x.block))[:5]
    mine = [r for r in rows if tuple(int(v or 1) for v in r[9:12]) == grid
            and tuple(int(v or 1) for v in r[12:15]) == block and r[15] is not None]
    if not mine:
        return out
    regs = Counter(int(r[15]) for r in mine).most_common(1)[0][0]
    shared = Counter(int(r[16] or 0) for r in mine).most_common(1)[0][0]
    model = model_of(gpu.name) if gpu is not None else None
    occ = occupancy(model.compute if model else None, block[0] * block[1] * block[2], regs, shared)
    out.update(registers_per_thread=regs, shared_mem_bytes=shared, gpu_model=model.name if model else None)
    if occ is not None:
        out.update(occupancy_pct=occ.pct, occupancy_blocks_per_sm=occ.blocks_per_sm, occupancy_limit=occ.limit)
    return out


def _sql_text(s: str) -> str:
    return s.replace("'", "''")


def _latency(profile, rows: list[tuple], devices: list[int], w) -> dict:
    """Kernel start - launch call end, per launch joined on (pid, correlationId), how much of those waits the GPU
    spent on other work, and the GPU's idle time inside them, in the window ``w``."""
    keys = {(int(r[5]), int(r[6])): int(r[0]) for r in rows if r[5] is not None and r[6] is not None}
    if not keys:
        return {}
    pids = ", ".join(str(p) for p in sorted({k[0] for k in keys}))
    lo, hi = min(keys.values()), max(keys.values())
    calls = _count(profile, f"""SELECT pid, correlation_id, "end" FROM api
                                WHERE pid IN ({pids}) AND start <= {hi} AND "end" >= {lo} - 10000000000""")
    joined = [(int(e), keys[(int(p), int(c))]) for p, c, e in calls if (int(p), int(c)) in keys]
    if not joined:
        return {}
    lat = np.array([k - e for e, k in joined], np.int64)
    waits = [(e, k) for e, k in joined if k > e]
    busy_pct, idle_waits, idle_ns = None, 0, 0
    if waits:
        lo, hi = min(e for e, _ in waits), max(k for _, k in waits)
        ops = _count(profile, f"""SELECT start, "end" FROM gpu_ops WHERE "end" > {lo} AND start < {hi}
                                  AND device_id IN ({", ".join(str(d) for d in devices)})""")
        busy = merge(np.array([o[0] for o in ops], np.int64), np.array([o[1] for o in ops], np.int64))
        a = np.array([e for e, _ in waits], np.int64)
        b = np.array([k for _, k in waits], np.int64)
        over = busy.overlap(a, b) if len(busy) else np.zeros(len(a), np.int64)
        busy_pct = round(100.0 * int(over.sum()) / int((b - a).sum()), 3)
        # the idle part of each wait inside the window (a first launch's wait before the window is no gap)
        ca, cb = np.maximum(a, w.start_ns), np.minimum(b, w.end_ns)
        inside = np.maximum(cb - ca, 0)
        idle = inside - (busy.overlap(ca, np.maximum(ca, cb)) if len(busy) else 0)
        idle_waits, idle_ns = int((idle > 0).sum()), int(np.maximum(idle, 0).sum())
    waited = int(sum(k - e for e, k in waits))
    stream_waits = _count(profile, f"SELECT count(*) FROM api_calls WHERE pid IN ({pids}) AND name_id IN "
                                   f"(SELECT id FROM ({WAIT_NAMES}))")
    return {"latency_launches": len(lat), "latency_median_ns": round(float(np.median(lat)), 1),
            "latency_min_ns": int(lat.min()), "latency_max_ns": int(lat.max()), "latency_gpu_busy_pct": busy_pct,
            "latency_p10_ns": round(float(np.percentile(lat, 10)), 1),
            "latency_p90_ns": round(float(np.percentile(lat, 90)), 1), "latency_total_ns": waited,
            "latency_idle_waits": idle_waits, "latency_idle_ns": idle_ns,
            "stream_wait_calls": int(stream_waits[0][0]) if stream_waits else 0}


def _launched_from(profile, rows: list[tuple]) -> list[Launcher]:
    """The NVTX range each launch call started in (tools/enclosing.py)."""
    keys = {(int(r[5]), int(r[6])) for r in rows if r[5] is not None and r[6] is not None}
    if not keys:
        return []
    pids = ", ".join(str(p) for p in sorted({k[0] for k in keys}))
    lo = min(int(r[0]) for r in rows)
    calls = [(c[0], c[1], c[3]) for c in _count(profile, f"""SELECT pid, tid, correlation_id, start FROM api
                                                         WHERE pid IN ({pids}) AND start <= {int(rows[-1][0])}
                                                           AND start >= {lo} - 10000000000""")
             if (int(c[0]), int(c[2])) in keys]
    return [Launcher(nvtx_range=k, launches=v) for k, v in enclosing_ranges(profile, calls)]


TOOL = Tool(
    name="kernel_detail",
    summary=("One kernel's analysis (name substring): launches, total/mean/median/max, share of kernel time, grid x "
             "block against the SMs, launch-to-start latency, copies, unified-memory migrations and page faults "
             "during it, other kernels overlapping it, the NVTX range it is launched from, its instantiations."),
    params=Params, result=Result, run=run,
)
