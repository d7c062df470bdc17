"""A question about one of this program's entities gets that entity's analysis: a kernel (kernel_detail), an NVTX
range (nvtx, per instance), a CUDA API function (api). The answers of top_kernels, nvtx and api call these when
the question names one entity of the profile; the planner sends a question naming one to them (entities.py)."""
from __future__ import annotations

from types import SimpleNamespace

from dashcam.findings import advice, diagnose
from dashcam.text.format import count, duration, name, percent, sentences, size, trim

from .context import Ctx

# A launch-to-start latency from this long (median) is worth explaining (a queue of a few us is normal).
LATENCY_WORTH_NS = 100_000


def _one_gpu(ctx: Ctx) -> int | None:
    """The GPU the question names when it names one, else None (all)."""
    return ctx.targets.gpus[0] if len(set(ctx.targets.gpus)) == 1 else None


def kernel_analysis(ctx: Ctx, kernel: str, exact: bool = False) -> str:
    """The kernel's figures and what they mean (tools/kernel_detail.py has the definitions); ``exact``: the kernel
    whose short name is ``kernel``, not every name containing it."""
    r = ctx.call("kernel_detail", kernel=kernel, gpu=_one_gpu(ctx), **({"exact": True} if exact else {}), **ctx.win)
    if not r.launches:
        return ""
    out = []
    if r.launches > 1:
        out.append(f"Per launch of {name(r.instantiations[0].short_name)}: mean {duration(r.mean_ns)}, median "
                   f"{duration(r.median_ns)}, longest {duration(r.max_ns)}.")
    if len(r.instantiations) > 1:
        shown = r.instantiations[:4]
        full = [i.full_name for i in shown]  # cut apart from each other (text/shorten.py)
        out.append(f"It has {len(r.instantiations)} instantiations: " + ", ".join(
            f"{name(i.full_name, full)} {count(i.launches, 'launch', 'launches')}, {duration(i.total_ns)}"
            for i in shown) + ".")
    out.append(_shapes(r))
    out.append(_grid(ctx, r))
    out.append(_occupancy(r))
    out.append(_latency(r))
    out.append(_during(ctx, r))
    places = [x for x in r.launched_from if x.nvtx_range]
    if places:
        out.append("It is launched from the NVTX range " + ", ".join(
            f"{name(x.nvtx_range)} ({count(x.launches, 'launch', 'launches')})" for x in places[:3]) + ".")
    out.append(_findings(ctx, r.instantiations[0].short_name))
    return sentences(*out)


def kernel_latency(ctx: Ctx, kernel: str) -> str:
    """The named kernel's launch-to-start latency and what the GPU did meanwhile ("" when none matches)."""
    r = ctx.call("kernel_detail", kernel=kernel, gpu=_one_gpu(ctx), **ctx.win)
    if not r.launches or len({i.short_name for i in r.instantiations}) > 1:
        return ""
    return _latency(r).replace("Launch to start:", f"{name(r.instantiations[0].short_name)}, launch to start:", 1)


def _grid(ctx: Ctx, r) -> str:
    if r.blocks is None:
        return ""
    shape = f"{count(r.blocks, 'block')} of {count(r.threads_per_block, 'thread')}"
    if r.sm_count is None:
        return f"Its usual launch is {shape}; the profile does not record the GPU's SM count."
    if r.blocks < r.sm_count:
        row = SimpleNamespace(name=r.instantiations[0].short_name, grid=r.blocks, block=r.threads_per_block)
        return (f"Its usual launch is {shape} on a GPU with {r.sm_count} SMs: it occupies {r.sms_used} of them at "
                f"most and leaves the rest idle, so it cannot use the GPU well however long it runs. "
                + advice.under_parallelized(ctx.facts, row, r.sm_count))
    return (f"Its usual launch is {shape} on a GPU with {r.sm_count} SMs ({trim(r.blocks_per_sm, 1)} blocks per "
            "SM): the grid is large enough to fill every SM.")


# Launch shapes whose median durations differ by this factor: the kernel's time follows its inputs' sizes.
SHAPES_DIFFER = 2.0
# A theoretical occupancy at or under this % is worth a word on what it does and does not mean.
LOW_OCCUPANCY_PCT = 25.0


def _shapes(r) -> str:
    """Several launch configurations with different durations: the kernel runs on inputs of different sizes."""
    medians = [x.median_ns for x in r.shapes if x.median_ns]
    if len(r.shapes) < 2 or not medians or max(medians) < SHAPES_DIFFER * min(medians):
        return ""
    return (f"Its launches come in {len(r.shapes)} shapes that take different times: " + "; ".join(
        f"grid {tuple(x.grid)} x block {tuple(x.block)}, {count(x.launches, 'launch', 'launches')}, median "
        f"{duration(x.median_ns)}" for x in r.shapes[:3]) + ": its time follows the size of the work it is given "
        "(the grid), so the long launches are the large inputs.")


def _occupancy(r) -> str:
    """Registers and shared memory per block, and the theoretical occupancy they allow (measure/occupancy.py)."""
    if r.registers_per_thread is None:
        return ""
    uses = (f"Its blocks use {r.registers_per_thread} registers per thread"
            + (f" and {_kib(r.shared_mem_bytes)} of shared memory" if r.shared_mem_bytes else ""))
    if r.occupancy_pct is None:
        why = "the GPU's model is not recorded" if r.gpu_model is None else f"the {r.gpu_model} is not in the table"
        return f"{uses}; {why}, so its occupancy is not computed."
    fit = "fits" if r.occupancy_blocks_per_sm == 1 else "fit"
    text = (f"{uses}: on the {r.gpu_model} at most {count(r.occupancy_blocks_per_sm, 'block')} {fit} on an SM at once, "
            f"{percent(r.occupancy_pct)} of its warp slots (theoretical occupancy), limited by {r.occupancy_limit}.")
    if r.occupancy_pct <= LOW_OCCUPANCY_PCT:
        text += (" Low occupancy is by design in kernels tuned for tensor cores (GEMM, FlashAttention), which hide "
                 "latency inside each warp; a memory-bound kernel at low occupancy cannot hide memory latency: "
                 "Nsight Compute's `--section Occupancy --section WarpStateStats` shows which it is.")
    return text


def _kib(nbytes: int) -> str:
    """Shared memory as CUDA states it: KiB when whole, else bytes."""
    return f"{nbytes // 1024} KiB" if nbytes % 1024 == 0 else count(nbytes, "byte")


def _latency(r) -> str:
    if r.latency_median_ns is None:
        return ""
    if r.latency_max_ns is not None and r.latency_max_ns <= 0:  # started before its launch call returned
        return (f"Launch to start: the kernel starts before its launch call returns (a median "
                f"{duration(-r.latency_median_ns)} before), so there is no launch-to-start delay.")
    spread = ("every launch alike" if r.latency_min_ns == r.latency_max_ns else
              f"{duration(r.latency_min_ns)} to {duration(r.latency_max_ns)}")
    text = (f"Launch to start: a median {duration(r.latency_median_ns)} from the end of its launch call to the "
            f"kernel's start ({spread})")
    if r.latency_median_ns < LATENCY_WORTH_NS or r.latency_gpu_busy_pct is None:
        return text + "."
    text += f", {duration(r.latency_total_ns)} of waiting in all"
    if r.latency_gpu_busy_pct >= 50:
        return (text + f"; the GPU ran other work {percent(r.latency_gpu_busy_pct)} of those waits, so the kernel "
                "queued behind earlier work on the GPU.")
    text += (f"; the GPU ran other work only {percent(r.latency_gpu_busy_pct)} of those waits, so it was not "
             "queued behind other GPU work")
    if r.latency_idle_waits:
        text += (f" (the GPU sat idle in {count(r.latency_idle_waits, 'of them', 'of them')}, "
                 f"{duration(r.latency_idle_ns)} in all: what the latency costs it)")
    # the findings' own test of a large, constant delay, on this kernel's launches
    steady = advice.steady_delay(r.latency_p10_ns, r.latency_median_ns, r.latency_p90_ns, r.latency_launches)
    if r.stream_wait_calls == 0 and steady:
        return (text + ", no traced call made it wait on another stream, and the delay is the same at nearly every "
                "launch: what holds it is outside this trace, most likely another process or context on the GPU. "
                + advice.OUTSIDE_PROCESS)
    if r.stream_wait_calls == 0:  # nothing traced made it wait: the latency of submitting it
        return (text + " and no traced call made it wait on another stream: this is its launch-to-start latency. "
                + advice.QUEUE_AHEAD)
    return text + (": something outside the trace held it (a stream or event wait, a dependency, deferred "
                   "submission).")


def _during(ctx: Ctx, r) -> str:
    out = []
    m = r.migrations
    if m.count:
        cause = (f", {count(r.page_fault_migrations, 'of them', 'of them')} caused by page faults"
                 if r.page_fault_migrations else "")
        faults = f", with {count(r.gpu_page_faults, 'GPU page fault')}" if r.gpu_page_faults else ""
        out.append(f"While it ran, {count(m.count, 'unified-memory migration')} ({size(m.bytes)}) were serviced for "
                   f"{duration(m.overlap_ns)} of its {duration(r.total_ns)}{cause}{faults}: the kernel waits for "
                   f"pages to arrive. {advice.migrations(ctx.facts)}")
    elif r.gpu_page_faults:
        out.append(f"While it ran the GPU took {count(r.gpu_page_faults, 'page fault')}.")
    if r.copies.count:
        out.append(f"{count(r.copies.count, 'copy', 'copies')} ({size(r.copies.bytes)}) overlapped it for "
                   f"{duration(r.copies.overlap_ns)}.")
    if r.other_kernels.count:
        out.append(f"{count(r.other_kernels.count, 'other kernel')} ran beside it for "
                   f"{duration(r.other_kernels.overlap_ns)}.")
    if not out:
        return "Nothing else ran or was serviced on the GPU while it ran (no copies, migrations or other kernels)."
    return " ".join(out)


def _findings(ctx: Ctx, short: str) -> str:
    """The summary's findings that name this kernel, one sentence each (at most two)."""
    d = diagnose(ctx.profile, ctx.runs, gpu=_one_gpu(ctx), **ctx.win)
    named = [f.sentence for f in d.findings if f.sentence and short in f.sentence]
    if not named:
        return ""
    return "The summary's findings that name it: " + " ".join(named[:2])


def range_analysis(ctx: Ctx, label: str) -> str:
    """The NVTX range's instances and what ran while it was open (tools/range_detail.py has the definitions)."""
    r = ctx.call("range_detail", label=label, gpu=_one_gpu(ctx), **ctx.win)
    if not r.instances:
        return ""
    out = []
    if r.instances > 1:
        spread = ("every one alike" if r.min_ns == r.max_ns else
                  f"from {duration(r.min_ns)} to {duration(r.max_ns)}")
        out.append(f"One {name(label)} takes a median {duration(r.median_ns)} (mean {duration(r.mean_ns)}, "
                   f"{spread}, over {count(r.instances, 'instance')}).")
    if r.gpu_busy_pct is not None:
        out.append(f"While it was open ({duration(r.open_ns)}) the GPU was busy {duration(r.gpu_busy_ns)}, "
                   f"{percent(r.gpu_busy_pct)} of that time.")
    launched = []
    if r.kernel_count:
        launched.append(f"{count(r.kernel_count, 'kernel')} ({duration(r.kernel_ns)}: " + ", ".join(
            f"{name(k.name)} {count(k.count, 'launch', 'launches')}" for k in r.kernels[:3]) + ")")
    if r.copy_count:
        launched.append(f"{count(r.copy_count, 'copy', 'copies')} ({size(r.copy_bytes)}, {duration(r.copy_ns)}: "
                        + ", ".join(f"{c.name} {c.count}" for c in r.copies[:3]) + ")")
    out.append("It launches " + " and ".join(launched) + "." if launched else "It launches no GPU work.")
    out.append(_range_inside(r, label))
    return sentences(*out)


# CUDA calls inside a range worth naming: this share of its time or more
RANGE_CALLS_WORTH_PCT = 10.0


def _range_inside(r, label: str) -> str | None:
    """What the range holds on its thread: nested ranges, and the CUDA calls that take a share of it (with what
    makes a slow one slow: findings/advice/calls.py); labels containing the asked one, left out."""
    from dashcam.findings.advice.calls import call_cost

    out = []
    if r.other_labels:
        verb = "contains it and is another range" if len(r.other_labels) == 1 else "contain it and are other ranges"
        out.append(f"(Only the label {name(label)} itself: " + ", ".join(name(x) for x in r.other_labels)
                   + f" {verb}.)")
    if r.inner_ranges:
        out.append("Inside it run the ranges " + ", ".join(
            f"{name(x.name)} ({count(x.count, 'range')}, {duration(x.total_ns)})" for x in r.inner_ranges) + ".")
    if r.api_calls and r.total_ns and 100.0 * r.api_ns >= RANGE_CALLS_WORTH_PCT * r.total_ns:
        top = r.api_calls[0]
        text = (f"Its thread spends {duration(r.api_ns)} of it in CUDA calls: " + ", ".join(
            f"{name(c.name)} {count(c.count, 'call')}, {duration(c.total_ns)}" for c in r.api_calls[:3]) + ".")
        cost = call_cost(top.name)
        if cost is not None and 100.0 * top.total_ns >= RANGE_CALLS_WORTH_PCT * r.total_ns:
            text += f" {name(top.name)} takes long because {cost[0]}."
        out.append(text)
    return sentences(*out) if out else None


def api_analysis(ctx: Ctx, function: str) -> str:
    """One named CUDA API function: where it is called from and what the GPU ran meanwhile (tools/api_detail.py);
    "" for a pattern or a function the profile does not call."""
    if "*" in function or "?" in function:
        return ""
    r = ctx.call("api_detail", name=function, **ctx.win)
    if not r.calls:
        return ""
    fn = name(r.function)
    places = [c for c in r.called_from if c.nvtx_range]
    where = (f"{fn} is called from the NVTX range " + ", ".join(
        f"{name(c.nvtx_range)} ({count(c.calls, 'call')})" for c in places[:3]) + "." if places else
        f"{fn} is called outside any NVTX range.")
    if r.gpu_busy_pct is None:
        return where
    if r.during:
        ran = ", ".join(f"{name(k.name)} ({count(k.count, 'kernel')}, {duration(k.overlap_ns)})" for k in r.during[:3])
        if r.gpu_busy_pct >= 50:
            return where + (f" While it ran ({duration(r.union_ns)}), the GPU ran kernels {percent(r.gpu_busy_pct)} of "
                            f"the time: it waits for {ran}.")
        return where + (f" While it ran ({duration(r.union_ns)}), the GPU ran kernels only {percent(r.gpu_busy_pct)} "
                        f"of the time ({ran}): most of the call is not spent waiting for kernels.")
    return where + f" No kernel ran while it ran ({duration(r.union_ns)}): it does not wait for kernels."
