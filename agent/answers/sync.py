"""How long the host waits in synchronize calls, and what it costs the GPUs."""
from __future__ import annotations

from dashcam.errors import DashcamError
from dashcam.findings import advice
from dashcam.findings.rules.idle import top_api
from dashcam.text.format import count, duration, name, percent, sentences

from .context import Ctx, calls_per_gpu, devices_of, window_words


def sync(ctx: Ctx) -> str:
    results = calls_per_gpu(ctx, "sync")
    out = []
    for r in results:
        if not r.calls:
            out.append(f"No host thread called a CUDA synchronize function in "
                       f"{window_words(r, ctx.whole_profile)}.")
            continue
        c = r.calls[0]
        if c.threads == 1:
            blocked = (f"A host thread was blocked in {name(c.name)} for {duration(c.total_ns)} "
                       f"({percent(c.pct_of_window)} of {window_words(r, ctx.whole_profile)})")
        else:
            blocked = (f"Host threads were blocked in {name(c.name)} for {duration(c.total_ns)} summed over "
                       f"{c.threads} threads (in {window_words(r, ctx.whole_profile)})")
        each = f", {duration(c.mean_ns)} each on average" if c.count > 1 else ""
        out.append(f"{blocked}: {count(c.count, 'call')}{each}, the longest {duration(c.max_ns)}.")
        if len(r.calls) > 1:
            c2 = r.calls[1]
            out.append(f"Next is {name(c2.name)} with {duration(c2.total_ns)} over {count(c2.count, 'call')}.")
        th = r.threads[0]
        tn = f" ({name(th.thread_name)})" if th.thread_name else ""
        out.append(f"The most blocked thread is {th.tid}{tn} of process {th.pid}: {duration(th.total_ns)} "
                   f"({percent(th.pct_of_window)}).")
    try:
        gaps = devices_of([ctx.call("gpu_gaps", gpu=g, **ctx.win) for g in ctx.gpus])
    except DashcamError:  # an API-only capture: no GPU to attribute idle time on
        gaps = []
    idle_gpus = [d for d in gaps if d.kernel_idle_ns > 0]
    if idle_gpus and any(r.calls for r in results):
        d = max(idle_gpus, key=lambda x: (x.causes["sync_wait"], -x.device_id))
        sw = d.causes["sync_wait"]
        if d.dominant_cause == "sync_wait":
            out.append(f"On GPU {d.device_id} these waits are the main cause of kernel-idle time: `sync_wait` "
                       f"{duration(sw)} ({percent(d.cause_pct['sync_wait'])} of its kernel-idle).")
            out.append(advice.sync_wait(ctx.facts, top_api(d, sync=True)))
        else:
            out.append(f"They cost little GPU time: `sync_wait` is {duration(sw)} "
                       f"({percent(d.cause_pct['sync_wait'])}) of "
                       f"GPU {d.device_id}'s kernel-idle time, whose main cause is `{d.dominant_cause}`.")
    if ctx.targets.api:  # one synchronize function named: what it waited for (answers/entity.py)
        from .entity import api_analysis

        out.append(api_analysis(ctx, ctx.targets.api))
    return sentences(*out)
