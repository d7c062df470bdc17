"""Kernels that leave the GPU's SMs empty, two different troubles (small_kernels tool):

- under_parallelized: grids with fewer blocks than SMs whose launches last UNDER_PARALLEL_MIN_AVG_NS or
  more on average hold at least SMALL_TIME_SHARE_PCT of a GPU's kernel time: a few SMs work for a long
  time. The remedy is more blocks (named with the launch's grid x block). Saving: that kernel time times
  the idle SM share (1 - blocks / SMs), an upper bound; severity by its share of the window.
- small_kernels: the same share in *short* small-grid launches, at least SMALL_KERNELS_MIN_LAUNCHES of them
  (fusing or graphs is about many launches): fuse them or use graphs. Saving: the same upper bound, the small
  grids' time times the SM share they leave empty (only their listed top rows); severity by its share.
"""
from __future__ import annotations

from dashcam.findings import advice
from dashcam.findings.rules import Item, loss_severity, share
from dashcam.findings.thresholds import SMALL_KERNELS_MIN_LAUNCHES
from dashcam.text.format import duration, name, percent
from dashcam.tools.small_kernels import SMALL_TIME_SHARE_PCT


def find(f) -> list[Item]:
    out = []
    for d, x in f.rows("small_kernels").items():
        if x.verdict is None or not x.sm_count:
            continue
        o = f.device("overview", d)
        under = [r for r in x.top_small if r.under_parallelized]
        if (x.under_parallel_time_pct or 0) >= SMALL_TIME_SHARE_PCT and under:
            top = under[0]
            saving = int(sum(r.total_ns * max(0.0, 1.0 - r.avg_blocks / x.sm_count) for r in under))
            launch = f"{top.grid} blocks of {top.block} threads" if top.grid and top.block else \
                f"{top.avg_blocks:g} blocks on average"
            measured = (f"; the GPU metrics show its SMs active {percent(x.sm_active_pct)} while small grids run"
                        if x.sm_active_pct is not None else "")
            sentence = (f"Under-parallelized kernels: {percent(x.under_parallel_time_pct)} of GPU {d}'s kernel time "
                        f"is in launches with fewer blocks than its {x.sm_count} SMs that run long, led by "
                        f"{name(top.name)} ({launch}, {duration(top.avg_ns)} per launch){measured}.")
            figures = {"gpu": d, "under_parallel_time_pct": x.under_parallel_time_pct,
                       "under_parallel_time_ns": x.under_parallel_time_ns, "sm_count": x.sm_count,
                       "top_kernel": top.name, "avg_ns": top.avg_ns, "avg_blocks": top.avg_blocks,
                       "sm_active_pct": x.sm_active_pct}
            out.append(Item("under_parallelized", d, loss_severity(share(saving, f.window_ns)),
                            saving, figures, [f.ev("small_kernels")],
                            f"GPU {d}: {name(top.name)} runs {launch} on {x.sm_count} SMs", sentence,
                            advice.under_parallelized(f, top, x.sm_count), extra={"impact": x.under_parallel_time_pct}))
        short_pct = round((x.small_time_pct or 0) - (x.under_parallel_time_pct or 0), 3)
        short = [r for r in x.top_small if not r.under_parallelized]
        if short_pct >= SMALL_TIME_SHARE_PCT and short and (x.small_count or 0) >= SMALL_KERNELS_MIN_LAUNCHES:
            top = short[0]
            busy = (f" (kernel-busy {percent(o.kernel_busy_pct)} of the {duration(f.window_ns)} window)"
                    if o is not None else "")
            measured = (f"; the GPU metrics show its SMs active {percent(x.sm_active_pct)} while they run"
                        if x.sm_active_pct is not None else "")
            sentence = (f"Small kernels: GPU {d}{busy} spends {percent(x.small_time_pct)} of kernel time in grids with "
                        f"fewer blocks than its {x.sm_count} SMs, led by {name(top.name)} "
                        f"({duration(top.avg_ns)} per launch){measured}.")
            figures = {"gpu": d, "small_time_pct": x.small_time_pct, "small_time_ns": x.small_time_ns,
                       "kernel_time_ns": x.kernel_time_ns, "small_count": x.small_count, "sm_count": x.sm_count,
                       "top_small": top.name, "sm_active_pct": x.sm_active_pct}
            saving = int(sum(r.total_ns * max(0.0, 1.0 - r.avg_blocks / x.sm_count) for r in short))
            out.append(Item("small_kernels", d, "medium", saving, figures, [f.ev("small_kernels"), f.ev("overview")],
                            f"GPU {d}: {percent(x.small_time_pct)} of kernel time in grids smaller than the "
                            f"{x.sm_count} SMs", sentence, advice.small_kernels(f),
                            extra={"impact": x.small_time_pct}))
    return out
