"""Which kernels take the time, whether their grids fill the GPU, and how the streams overlap."""
from __future__ import annotations

from collections import Counter

from dashcam.findings import advice
from dashcam.text.format import count, duration, name, percent, sentences, trim
from dashcam.text.shorten import kernel_label

from .context import Ctx, calls_per_gpu, devices_of, window_words


def top_kernels(ctx: Ctx) -> str:
    kernel = ctx.targets.kernel
    results = calls_per_gpu(ctx, "top_kernels", name_contains=kernel, limit=5)
    out = []
    for r in results:
        gpus = [d.device_id for d in r.devices]
        scope = f" on GPU {gpus[0]}" if ctx.targets.gpus and len(gpus) == 1 else ""
        if r.kernel_count == 0:
            out.append(f"No kernels ran{scope} in {window_words(r, ctx.whole_profile)}.")
            continue
        if kernel is not None:
            if not r.matched_count:
                out.append(f"No kernel name contains {name(kernel)}{scope}; {count(r.kernel_count, 'kernel')} ran in "
                           f"{window_words(r, ctx.whole_profile)}.")
                continue
            out.append(f"Kernels matching {name(kernel)}{scope}: {count(r.matched_count, 'launch', 'launches')}, "
                       f"{duration(r.matched_ns)}, {percent(r.matched_pct)} of the {duration(r.total_kernel_ns)} of "
                       "kernel time.")
        rows = r.kernels[:3]
        shown = [(x.name, x.full_name) for x in rows]
        labels = [kernel_label(k.name, k.full_name, shown) for k in rows]
        listed = ", ".join(f"{name(label)} {duration(k.total_ns)} ({percent(k.pct)}, "
                           f"{count(k.count, 'launch', 'launches')})" for label, k in zip(labels, rows))
        if kernel is None:
            out.append(f"The top kernels{scope} by GPU time, of {duration(r.total_kernel_ns)} summed over "
                       f"{count(r.kernel_count, 'kernel')}: {listed}.")
            fam = advice.spread_family_in(r)
            if fam is not None:  # the summary's kernel lever: the family, not its largest instantiation
                out.append(f"By family, {name(fam.family)} takes {percent(fam.pct)} over "
                           f"{count(fam.instantiations, 'instantiation')} (its largest {percent(fam.top_kernel_pct)}): "
                           "speed up the family, all its instantiations, before any one kernel.")
        elif len(rows) > 1:
            out.append(f"By name: {listed}.")
    if kernel is None and any(r.kernel_count for r in results):
        out.append("Percentages are of summed kernel time (concurrent kernels each count).")
    shorts = {k.name for r in results for k in r.kernels}
    if kernel is not None and (len(shorts) == 1 or kernel.lower() in {x.lower() for x in shorts}):
        from .entity import kernel_analysis  # one kernel named: its analysis ("add" among "add", "addmm": `add`)

        out.append(kernel_analysis(ctx, kernel, exact=len(shorts) > 1))
    return sentences(*out)


def small_kernels(ctx: Ctx) -> str:
    devs = devices_of(calls_per_gpu(ctx, "small_kernels"))
    known = [d for d in devs if d.verdict is not None]
    if not known:
        ctx.note("SM count unknown: small kernels cannot be classified")
        return "The profile does not record the GPUs' SM counts, so kernels cannot be called small or not."
    d = max(known, key=lambda x: (x.small_time_pct, -x.device_id))
    if d.verdict != "small_kernels":
        who = "No GPU is" if len(known) > 1 else f"GPU {d.device_id} is not"
        return (f"{who} held back by small kernels: at most {percent(d.small_time_pct)} of kernel time (GPU "
                f"{d.device_id}) is in kernels with fewer blocks than its {d.sm_count} SMs.")
    out = [f"GPU {d.device_id} spends {percent(d.small_time_pct)} of its kernel time ({duration(d.small_time_ns)} of "
           f"{duration(d.kernel_time_ns)}) in {count(d.small_count, 'kernel')} with fewer blocks than its "
           f"{d.sm_count} SMs."]
    if d.top_small:
        k = d.top_small[0]
        launch = f"{k.grid} blocks of {k.block} threads" if k.grid and k.block else \
            f"{trim(k.avg_blocks, 2)} blocks on average"
        out.append(f"The largest is {name(k.name)}: {count(k.count, 'launch', 'launches')}, {duration(k.total_ns)}, "
                   f"{launch}, {duration(k.avg_ns)} per launch.")
        if k.under_parallelized:  # long launches on a few SMs: more blocks, not fusion
            out.append(advice.under_parallelized(ctx.facts, k, d.sm_count))
        else:
            out.append(advice.small_kernels(ctx.facts))
    return sentences(*out)


def streams(ctx: Ctx) -> str:
    if ctx.targets.streams:
        return named_streams(ctx)
    devs = devices_of(calls_per_gpu(ctx, "streams"))
    out = []
    for d in devs[:4]:
        if not d.kernel_count:
            out.append(f"GPU {d.device_id} ran no kernels.")
            continue
        s = d.streams[0] if d.streams else None
        top = (f"; the busiest, stream {s.stream_id}, ran kernels {percent(s.kernel_time_pct)} of the window"
               if s and s.stream_id is not None else "")
        if d.overlap_ns > 0:
            conc = (f"kernels on different streams overlapped {duration(d.overlap_ns)} ({percent(d.overlap_pct)} of "
                    f"its kernel-busy time), up to {d.max_concurrent_kernels} at once")
        else:
            conc = "no two kernels ran at the same time"
        out.append(f"GPU {d.device_id} used {count(d.stream_count, 'stream')} and {conc}{top}.")
    if len(devs) > 4:
        out.append(f"({len(devs)} GPUs in all; name one to see its streams.)")
    return sentences(*out)


def _stream_waits(ctx: Ctx, gpu: int, s) -> str:
    """What a stream's kernels wait for on the device: the kernels whose end its top kernel starts after, in the
    GPU's largest gaps that hold dependency time, behind the stream-wait calls gpu_gaps counts (its
    dependency_split); "" when none of those gaps ends at this stream's kernel or no wait call is in the capture."""
    if not s.top_kernel:
        return ""
    dev = ctx.call("gpu_gaps", gpu=gpu, **ctx.win).devices[0]
    split = dev.dependency_split
    after = [g for g in dev.largest_gaps if g.kernel_after == s.top_kernel and g.causes.get("dependency", 0) > 0]
    if not after or split is None or not split.wait_calls:
        return ""
    before = Counter(g.kernel_before for g in after if g.kernel_before)
    waits = ", ".join(f"{n} `{call}`" for call, n in split.wait_calls.items())
    behind = (f" after {name(before.most_common(1)[0][0])} ends (another stream's work)" if before else "")
    return (f"Its kernels wait on the device: in GPU {gpu}'s largest gaps {name(s.top_kernel)} starts{behind}, "
            f"behind the GPU's stream-wait calls ({waits}, {duration(split.wait_call_ns)} of waiting in all).")


def named_streams(ctx: Ctx) -> str:
    """The streams the question names ("stream 7"): per GPU that has one, its kernels, how busy it kept the GPU
    and its copies; a GPU lacking it says which streams it has."""
    results = calls_per_gpu(ctx, "streams", limit=1000)
    devs = devices_of(results)
    wanted = ctx.targets.streams
    out = []
    for d in devs:
        rows = [s for s in d.streams if s.stream_id in wanted]
        for s in rows:
            moved = [count(n, one, many) for n, one, many in ((s.memcpy_count, "copy", "copies"),
                                                               (s.memset_count, "memset", "memsets")) if n]
            copies = f", {' and '.join(moved)}" if moved else ""
            out.append(f"Stream {s.stream_id} on GPU {d.device_id} ran {count(s.kernel_count, 'kernel')}, busy "
                       f"{percent(s.kernel_time_pct)} of the window ({duration(s.kernel_time_ns)}){copies}.")
            out.append(_stream_waits(ctx, d.device_id, s))
        if rows and d.overlap_ns > 0:
            out.append(f"On GPU {d.device_id}, kernels on different streams overlapped {duration(d.overlap_ns)} "
                       f"({percent(d.overlap_pct)} of its kernel-busy time).")
    found = {s.stream_id for d in devs for s in d.streams}
    missing = [s for s in wanted if s not in found]
    if missing:
        have = "; ".join(f"GPU {d.device_id}: {', '.join(str(s.stream_id) for s in d.streams)}"
                         for d in devs if d.streams)
        out.append(f"No stream {', '.join(map(str, missing))} has work in "
                   f"{window_words(results[0], ctx.whole_profile)}" + (f" (streams: {have})." if have else "."))
    return sentences(*out)
