"""Where the copies go, how fast, which block the host, and which make kernels wait.

Answers ``ask "do copies stall the GPU?"`` and its paraphrases; a question about overlap ("do copies overlap
compute?") also gets each GPU's copy time that ran beside its kernels (memcpy ``copy_kernel_overlap_ns``)."""
from __future__ import annotations

import re

from dashcam.findings import advice
from dashcam.measure.gpu_models import NEAR_PEAK
from dashcam.measure.names import short_kernel_name
from dashcam.text.format import at_ms, count, duration, ids, name, percent, sentences, size, trim

from .context import Ctx, calls_per_gpu, window_words

# a question about copies running beside kernels: the answer adds each GPU's copy-kernel overlap
OVERLAP_WORDS = re.compile(r"\boverlap|\bhid(?:e|den|ing)\b|\bconcurrent|\bat the same time\b|\balongside\b|"
                           r"\bin parallel\b", re.IGNORECASE)


def _gbps(row) -> str:
    """ " at 12.0 GB/s" for a copy row with a rate (3 decimals under 0.05 GB/s), else ""."""
    g = row.gbps
    if not g or trim(g) == "0":
        return ""
    return f" at {g:.1f} GB/s" if g >= 0.05 else f" at {trim(g)} GB/s"


def copy_kinds(r) -> str:
    """ ": 10 HtoD (360 MB at 12.0 GB/s) and 10 DtoH (120 MB at 12.0 GB/s)": bytes and rate per copy
    kind present (memcpy by_kind, pinned and pageable copies together)."""
    kinds = [k for k in r.by_kind or [] if k.count]
    if not kinds:
        return ""
    parts = [f"{k.count} {k.kind} ({size(k.bytes)}{_gbps(k)})" for k in kinds]
    return ": " + (parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1])


# A question about the copies of each iteration ("copies per step", "did my data region remove the per-iteration
# copies?"): answered against the loop's steps (step_copies) before the copy totals.
PER_STEP = re.compile(r"\b(?:per|each|every|an?)[\s-]+(?:iteration|iter|step|loop|time\s*step|frame|batch)s?\b"
                      r"|\bdata\s+region|\b(?:in(?:side)?|within)\s+the\s+loop\b", re.IGNORECASE)


# A question about many small copies ("why so many small HtoD copies?"): answered with the copies under
# memcpy.SMALL_COPY_BYTES before the copy totals.
PEAK_WORDS = re.compile(r"\bpeak\b|\bfast\b|\bspeed\b|\bbandwidth\b|\bgb/s\b|\blink\b|\bpcie\b|\bnvlink\b", re.I)
SMALL = re.compile(r"\b(?:small|tiny|little)\b|\bso many\b|小", re.IGNORECASE)


def memcpy(ctx: Ctx) -> str:
    if PER_STEP.search(ctx.question or ""):
        return sentences(step_copies(ctx), memcpy_totals(ctx))
    if SMALL.search(ctx.question or ""):
        return sentences(small_copies(ctx), memcpy_totals(ctx))
    return memcpy_totals(ctx)


def small_copies(ctx: Ctx) -> str:
    """The copies under memcpy.SMALL_COPY_BYTES: how many, their bytes and time, and what to do about them."""
    gpu = ctx.targets.gpus[0] if len(set(ctx.targets.gpus)) == 1 else None
    r = ctx.call("memcpy", gpu=gpu, **ctx.win)
    limit = f"{r.small_copy_bytes // 1024} KiB"
    small = [k for k in r.small_copies if k.count]
    if not r.copy_count:
        return ""
    if not small:
        median = f" (a median {size(r.median_copy_bytes)} each)" if r.median_copy_bytes is not None else ""
        return (f"None of the {count(r.copy_count, 'copy', 'copies')} is under {limit}{median}: the copies are not "
                "small.")
    parts = [f"{k.count} {k.kind} ({size(k.bytes)}, {duration(k.total_ns)}, a median {size(k.median_bytes)} in "
             f"{duration(k.median_ns)})" for k in small]
    return (f"{r.small_copy_count} of the {count(r.copy_count, 'copy', 'copies')} are under {limit}: "
            + "; ".join(parts) + ". At that size a copy's time is its fixed cost of issue and completion, not "
            "bandwidth: gather the small arrays into one buffer and copy it once (or keep them on the GPU), so the "
            "fixed cost is paid once.")


def _against_link(d) -> str:
    """A GPU's host copies against what pinned copies reach over its link (memcpy's host_copy_* fields)."""
    rate = (f"GPU {d.device_id}'s host copies run at {d.host_copy_gbps:.3g} GB/s, {percent(d.host_copy_link_pct)} of "
            f"the {d.host_link_gbps:g} GB/s pinned copies reach over its {d.host_link} ({d.gpu_model})")
    near = d.host_copy_link_pct >= 100.0 * NEAR_PEAK
    if d.pin_saving_ns and near:  # pageable copies already near the link's peak: pinning them saves next to nothing
        return rate + (f": as fast as the link allows, pinned or not (pinning the pageable ones would save only "
                       f"{duration(d.pin_saving_ns)}).")
    if d.pin_saving_ns:
        return rate + (f"; at that rate the pageable ones would take {duration(d.pin_saving_ns)} less: the link is "
                       "not the limit, pageable memory is.")
    return rate + (": as fast as the link allows, so only moving less data shortens them." if near else ".")


def _against_dram(d) -> str:
    """A GPU's device-to-device copies against its DRAM's peak (each byte read and written: twice the rate)."""
    rate = (f"GPU {d.device_id}'s device-to-device copies run at {d.dtod_gbps:.4g} GB/s, {d.dtod_dram_gbps:.4g} GB/s "
            "of DRAM traffic (each byte read and written)")
    if d.dtod_dram_pct is None:
        return rate + "; the GPU's model, and so its DRAM peak, is not recorded."
    near = ": as fast as the memory allows, so only fewer copies help" if d.dtod_dram_pct >= 100.0 * NEAR_PEAK else ""
    return rate + f", {percent(d.dtod_dram_pct)} of the {d.gpu_model}'s {d.dram_gbps:g} GB/s{near}."


def step_copies(ctx: Ctx) -> str:
    """The copies of each step of the loop against the copies outside it (tools/step_copies.py)."""
    gpu = ctx.targets.gpus[0] if len(set(ctx.targets.gpus)) == 1 else None
    r = ctx.call("step_copies", gpu=gpu, **ctx.win)
    if not r.steps:
        out = (f"No loop was found to count copies against (no NVTX step ranges, no repeating kernel); the "
               f"capture has {count(r.copies_outside, 'copy', 'copies')} in all")
        kernels = ctx.call("top_kernels", gpu=gpu, limit=1, **ctx.win).kernel_count
        if kernels >= 2 and r.copies_outside >= kernels:  # as many copies as kernels: no region keeps the data
            return (out + f" for {count(kernels, 'kernel')}: as many copies as kernels or more, so the data moves "
                    "with the compute regions instead of staying on the GPU between them.")
        return out + "."
    loop = f"the {r.steps} steps (NVTX ranges {name(r.step_label)})" if r.method == "nvtx" else \
        f"the {r.steps} iterations of {name(short_kernel_name(r.step_label))}"
    outside = (f"; {count(r.copies_outside, 'copy', 'copies')} ({size(r.outside_bytes)}) lie outside the loop"
               if r.copies_outside else "")
    if not r.copies_inside:
        return (f"No copies inside {loop}: the data stays on the GPU during the loop{outside}, moved once "
                "(the data region works).")
    kinds = ", ".join(f"{d.copies} {d.kind}" for d in r.inside)
    return (f"The copies are still per iteration: {r.steps_with_copies} of {loop} copy, a median "
            f"{trim(r.median_copies_per_step, 1)} copies ({size(int(r.median_step_bytes))}) per step; "
            f"{count(r.copies_inside, 'copy', 'copies')} ({size(r.inside_bytes)}: {kinds}) inside the loop{outside}.")


def memcpy_totals(ctx: Ctx) -> str:
    results = calls_per_gpu(ctx, "memcpy")
    out = []
    for r in results:
        devs = r.devices
        if r.copy_count == 0:
            which = f" on GPU {ids([d.device_id for d in devs])}" if ctx.targets.gpus else ""
            out.append(f"There are no memory copies{which} in {window_words(r, ctx.whole_profile)}.")
            continue
        bound = [d for d in devs if d.transfer_bound]
        if bound:
            d = max(bound, key=lambda x: x.copy_busy_pct)
            out.append(f"GPU {d.device_id} is transfer-bound: copy-busy "
                       f"{percent(d.copy_busy_pct)} of {window_words(r, ctx.whole_profile)}, more than kernel-busy "
                       f"({percent(d.kernel_busy_pct)}).")
        else:
            d = max(devs, key=lambda x: (x.copy_busy_pct, -x.device_id))
            who = "No GPU is" if len(devs) > 1 else f"GPU {d.device_id} is not"
            more = (f", more than kernel-busy ({percent(d.kernel_busy_pct)}), but too little of it for copies to be "
                    "the bound"  # tools/memcpy.py TRANSFER_BOUND_MIN_PCT
                    if d.copy_busy_pct > d.kernel_busy_pct else f" (kernel-busy {percent(d.kernel_busy_pct)})")
            out.append(f"{who} transfer-bound: GPU {d.device_id} is copy-busy {percent(d.copy_busy_pct)} of "
                       f"{window_words(r, ctx.whole_profile)}{more}.")
        if OVERLAP_WORDS.search(ctx.question):
            for dv in devs:
                if not dv.copy_count:
                    continue
                busy = f"{duration(dv.copy_busy_ns)} of copies and memsets"
                if dv.copy_kernel_overlap_ns:
                    out.append(f"On GPU {dv.device_id}, {duration(dv.copy_kernel_overlap_ns)} of its {busy} "
                               f"({percent(dv.copy_kernel_overlap_pct)}) ran while its kernels ran.")
                else:
                    out.append(f"On GPU {dv.device_id}, none of its {busy} ran while its kernels ran: they took "
                               "turns.")
        pageable = [h for h in r.host_memory if h.host_mem == "pageable" and h.count]
        line = f"{count(r.copy_count, 'copy', 'copies')} moved {size(r.copy_bytes)}" + copy_kinds(r)
        h = max(pageable, key=lambda x: x.total_ns) if pageable else None
        # pageable copies matter when they take 1 % of the window or more (a wording choice, not printed)
        pageable_matters = bool(h) and h.total_ns * 100 >= r.window.length_ns
        if h:
            rate = _gbps(h)
            line += (f"; {count(h.count, h.kind + ' copy', h.kind + ' copies')} ({size(h.bytes)}, "
                     f"{duration(h.total_ns)}) came from pageable host memory{rate}")
        out.append(line + ".")
        if r.sync_copy_calls:
            top = r.sync_by_api[0]
            out.append(f"{top.calls} synchronous {name(top.api)} call{'' if top.calls == 1 else 's'} "
                       f"blocked the host for {duration(top.blocked_ns)}.")
        if r.pre_kernel_stall_count:
            s = r.pre_kernel_stalls[0]
            mem = " pageable" if s.pageable else " pinned" if s.pageable is False else ""
            out.append(f"{count(r.pre_kernel_stall_count, 'HtoD copy', 'HtoD copies')} stalled the GPU before its "
                       "next kernel, "
                       f"{duration(r.pre_kernel_stall_ns)} in all; the largest, "
                       f"a{mem} {duration(s.duration_ns)} copy of "
                       f"{size(s.bytes)} at {at_ms(s.start_ms)} on GPU {s.device_id}, held back "
                       f"{name(s.next_kernel)}.")
        if r.migration_count:
            out.append(f"{count(r.migration_count, 'unified-memory migration')} moved {size(r.migration_bytes)} on "
                       "demand (page faults, not explicit copies).")
        if PEAK_WORDS.search(ctx.question or ""):  # "how fast are my copies against the link's peak?"
            out += [_against_link(dv) for dv in devs if dv.host_copy_link_pct is not None]
            out += [_against_dram(dv) for dv in devs if dv.dtod_gbps is not None]
        if pageable_matters or r.sync_copy_calls:
            out.append(advice.host_copies(ctx.facts))
        elif bound or r.pre_kernel_stall_count:
            out.append(advice.transfers(ctx.facts))
    return sentences(*out)
