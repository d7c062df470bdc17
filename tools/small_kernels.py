"""small_kernels: how much GPU time goes to kernels too small to fill the GPU (fewer blocks than SMs)."""
from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from .base import OmitNone, Tool, ToolParams, ToolResult, WindowInfo

# A device is flagged when at least this % of its kernel time is in small kernels: under a
# third of the time, small grids are rarely the bottleneck worth chasing first.
SMALL_TIME_SHARE_PCT = 30.0
# A small-grid kernel whose launches last this long on average is *under-parallelized*, not small: it
# runs long on a few SMs and would finish many times sooner spread over the GPU. Below it a launch is
# short enough that its fixed cost (launch, ramp-up) matters as much, so fusing or graphs help more.
UNDER_PARALLEL_MIN_AVG_NS = 100_000


class Params(ToolParams):
    pass


class SmallKernelRow(BaseModel):
    name: str = Field(description="Short kernel name (rows are grouped by full_name).")
    full_name: str = Field(description="Demangled kernel name.")
    count: int = Field(description="Small launches of this kernel overlapping the window.")
    total_ns: int = Field(description="Summed durations of those launches, clipped to the window.")
    avg_blocks: float = Field(description="Average grid size (gridX*gridY*gridZ) of those launches.")
    avg_ns: int = Field(0, description="Average clipped duration of those launches.")
    grid: str | None = Field(None, description=(
        "The most common launch configuration of them (ties: the one launched first): grid as XxYxZ blocks."))
    block: str | None = Field(None, description="Threads per block of that same configuration, XxYxZ.")
    under_parallelized: bool = Field(False, description=(
        f"avg_ns >= {UNDER_PARALLEL_MIN_AVG_NS // 1000} us: long launches on too few blocks, not short ones."))


class DeviceSmallKernels(OmitNone):
    OMIT_NONE = frozenset({"sm_active_pct"})

    device_id: int
    sm_count: int | None = Field(description="SMs of this GPU; null when the profile does not say.")
    kernel_count: int = Field(description="Kernels overlapping the window.")
    kernel_time_ns: int = Field(description="Summed kernel durations, clipped to the window.")
    small_count: int | None = Field(
        description="Kernels with fewer blocks than sm_count; null when sm_count is unknown.")
    small_time_ns: int | None = Field(description="Summed clipped durations of the small kernels.")
    small_time_pct: float | None = Field(
        description="small_time_ns as % of this device's summed kernel time in the window (kernel_time_ns).")
    under_parallel_time_ns: int | None = Field(None, description=(
        "Of small_time_ns, the time of under-parallelized kernels (small grid, long launches); null when "
        "sm_count is unknown."))
    under_parallel_time_pct: float | None = Field(None, description=(
        "under_parallel_time_ns as % of this device's summed kernel time in the window."))
    verdict: Literal["small_kernels", "ok"] | None = Field(description=(
        f"'small_kernels' when small_time_pct >= {SMALL_TIME_SHARE_PCT:g}, else 'ok'; null when sm_count is unknown."))
    top_small: list[SmallKernelRow] = Field(description="Small kernels by total_ns, descending (limit rows).")
    sm_active_pct: float | None = Field(None, description=(
        "Where the capture has GPU metrics: the SMs' active share while the small kernels run (gpu_metrics' "
        "time-weighted sm_active inside their union); left out otherwise."))


class Result(ToolResult):
    small_time_threshold_pct: float = Field(description="small_time_pct at or above which verdict is 'small_kernels'.")
    devices: list[DeviceSmallKernels]


def _share(part: float, whole: float) -> float:
    return round(max(0.0, min(100.0, 100.0 * part / whole)), 3) if whole > 0 else 0.0


def _sm_active_inside(profile, w, device: int, sm_count: int) -> float | None:
    """gpu_metrics' sm_active while this device's small-grid kernels run (measured, not inferred from grids)."""
    from .gpu_metrics import mean_inside

    k = profile.con.execute(f"""SELECT start, "end" FROM kernel_times WHERE device_id = {int(device)}
        AND blocks < {int(sm_count)} AND "end" > {w.start_ns} AND start < {w.end_ns}""").fetchnumpy()
    return mean_inside(profile, w, device, "sm_active", k["start"], k["end"])


def run(profile, params: Params) -> Result:
    w = profile.window(params.start_ms, params.end_ms)
    devices = profile.check_gpu(params.gpu)
    sms = {d: profile.gpus[d].sm_count for d in devices if d in profile.gpus}
    known = {d: int(n) for d, n in sms.items() if n is not None and n > 0}
    sm_table = ("SELECT * FROM (VALUES " + ", ".join(f"({d}, {n})" for d, n in known.items()) +
                ") t(device_id, sm_count)") if known else \
        "SELECT CAST(NULL AS BIGINT) AS device_id, CAST(NULL AS BIGINT) AS sm_count WHERE false"
    # One scan: per (device, kernel name id, small?, launch configuration) launches, first start, clipped time,
    # blocks; small is NULL when unknown. Then per (device, full name, small?) the sums, with the most common
    # configuration (ties: the one launched first). Grouping on ids and integers, names joined on the few
    # groups: a mode() over configuration strings built for every launch took 4x as long.
    config = ("CASE WHEN grid_x IS NOT NULL AND block_x IS NOT NULL THEN grid_x || 'x' || coalesce(grid_y, 1) || 'x' "
              "|| coalesce(grid_z, 1) || ' ' || block_x || 'x' || coalesce(block_y, 1) || 'x' || coalesce(block_z, 1) "
              "END")
    groups = profile.rows(
        f"""WITH sm AS ({sm_table}),
            per_config AS (
                SELECT k.device_id, k.name_id, k.short_name_id, k.blocks < sm.sm_count AS small,
                       k.grid_x, k.grid_y, k.grid_z, k.block_x, k.block_y, k.block_z, count(*) AS n,
                       min(k.start) AS first, sum(least(k."end", {w.end_ns}) - greatest(k.start, {w.start_ns})) AS tot,
                       sum(k.blocks) AS blocks, count(*) FILTER (k.blocks IS NULL) AS no_grid
                FROM kernels k LEFT JOIN sm ON sm.device_id = k.device_id
                WHERE k."end" > {w.start_ns} AND k.start < {w.end_ns}
                  AND k.device_id IN ({", ".join(str(d) for d in devices)})
                GROUP BY ALL)
            SELECT c.device_id, coalesce(dn.value, sn.value, '<unnamed kernel>') AS name,
                   arg_min(coalesce(sn.value, dn.value, '<unnamed kernel>'), c.first), c.small, sum(c.n),
                   sum(c.tot), sum(c.blocks), sum(c.no_grid),
                   arg_min({config}, (-c.n, c.first, {config})) FILTER ({config} IS NOT NULL)
            FROM per_config c LEFT JOIN strings sn ON sn.id = c.short_name_id
                              LEFT JOIN strings dn ON dn.id = c.name_id
            GROUP BY c.device_id, 2, c.small""")
    # kernels, time, small kernels, small time, without grid, under-parallelized time
    totals = {d: [0, 0, 0, 0, 0, 0] for d in devices}
    small: dict[int, list[SmallKernelRow]] = {d: [] for d in devices}
    for dev, name, short, is_small, n, tot, blocks, no_grid, launch in groups:
        grid, _, block = (launch or "").partition(" ")
        x = totals[int(dev)]
        x[0] += int(n)
        x[1] += int(tot)
        x[4] += int(no_grid)
        if is_small:
            x[2] += int(n)
            x[3] += int(tot)
            avg = int(tot) // int(n)
            under = avg >= UNDER_PARALLEL_MIN_AVG_NS
            x[5] += int(tot) if under else 0
            small[int(dev)].append(SmallKernelRow(name=short, full_name=name, count=int(n), total_ns=int(tot),
                                                  avg_blocks=round(int(blocks) / int(n), 2), avg_ns=avg,
                                                  grid=grid or None, block=block or None,
                                                  under_parallelized=under))

    out, notes = [], []
    for d in devices:
        n, time_ns, small_n, small_ns, no_grid, under_ns = totals[d]
        top = sorted(small[d], key=lambda r: (-r.total_ns, r.full_name))[: params.limit]
        row = DeviceSmallKernels(device_id=d, sm_count=known.get(d), kernel_count=n, kernel_time_ns=time_ns,
                                 small_count=None, small_time_ns=None, small_time_pct=None, verdict=None,
                                 top_small=top)
        if d in known and small_n and profile.has_table("gpu_metrics"):
            row.sm_active_pct = _sm_active_inside(profile, w, d, known[d])
        if d in known:
            row.small_count, row.small_time_ns = small_n, small_ns
            row.small_time_pct = _share(small_ns, time_ns)
            row.under_parallel_time_ns, row.under_parallel_time_pct = under_ns, _share(under_ns, time_ns)
            row.verdict = "small_kernels" if row.small_time_pct >= SMALL_TIME_SHARE_PCT else "ok"
        elif n:
            notes.append(f"GPU {d}: SM count unknown (no smCount in TARGET_INFO_GPU or numMultiprocessors in "
                         "TARGET_INFO_CUDA_DEVICE for it); small kernels not classified, no verdict.")
        if no_grid:
            notes.append(f"GPU {d}: {no_grid} kernels have no grid size and are not counted as small.")
        out.append(row)
    if not profile.has_table("kernel"):
        notes.append("No kernels in this profile (no CUPTI_ACTIVITY_KIND_KERNEL rows).")
    return Result(tool="small_kernels", window=WindowInfo.of(w), small_time_threshold_pct=SMALL_TIME_SHARE_PCT,
                  devices=out, notes=notes)


def render(result: Result, console) -> None:
    from rich.table import Table
    from rich.text import Text

    from dashcam.text.format import fmt_ns
    from dashcam.text.tables import print_notes

    from .top_kernels import kernel_labels

    w = result.window
    console.print(Text(f"small_kernels  window {w.start_ms:.3f}–{w.end_ms:.3f} ms ({fmt_ns(w.length_ns)})",
                       style="bold"))
    for d in result.devices:
        head = f"GPU {d.device_id}: {d.kernel_count:,} kernels, {fmt_ns(d.kernel_time_ns)} kernel time; "
        if d.sm_count is None:
            console.print(Text(head + "SM count unknown, not classified"))
            continue
        console.print(Text(head + f"{d.small_count:,} with < {d.sm_count} blocks, {fmt_ns(d.small_time_ns)} "
                                  f"= {d.small_time_pct:.1f}% of kernel time -> {d.verdict}"))
        if d.top_small:
            t = Table(title_justify="left")
            for c in ("kernel", "count", "total", "avg blocks"):
                t.add_column(c, justify="left" if c == "kernel" else "right", overflow="fold",
                             ratio=1 if c == "kernel" else None)
            for r, label in zip(d.top_small, kernel_labels(d.top_small)):
                t.add_row(label, Text(f"{r.count:,}"), Text(fmt_ns(r.total_ns)), Text(f"{r.avg_blocks:g}"))
            console.print(t)
    print_notes(result.notes, console)


TOOL = Tool(
    name="small_kernels",
    summary=("How much of each GPU's kernel time goes to kernels launched with fewer blocks than the GPU has SMs "
             "(grids too small to fill the GPU), with the biggest such kernels and a verdict per GPU."),
    params=Params, result=Result, run=run,
)
