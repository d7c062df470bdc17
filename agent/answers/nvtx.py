"""NVTX range groups by time, with the kernels launched inside them."""
from __future__ import annotations

import re

from dashcam.text.format import count, duration, name, sentences

from .context import Ctx, calls_per_gpu, window_words

_COMPARE = re.compile(r"\b(?:compar\w*|vs|versus|than|against|relative to)\b", re.IGNORECASE)


def nvtx(ctx: Ctx) -> str:
    label = ctx.targets.nvtx
    results = calls_per_gpu(ctx, "nvtx", label=label, limit=5)
    r = results[0]
    if r.range_count == 0:
        ctx.note("no NVTX ranges in this profile" if ctx.whole_profile else "no NVTX ranges in this window")
        return ("This profile has no NVTX ranges, so there are no annotated regions to report; ask about "
                "idle time, kernels or copies instead." if ctx.whole_profile else
                f"No NVTX range overlaps {window_words(r, False)}.")
    if not r.groups:
        return f"No NVTX range label contains {name(label)}; the profile has {r.group_count} label groups."
    shown = r.groups[:1 if label else 3]
    if label and _COMPARE.search(ctx.question or ""):
        shown += compared_ranges(ctx, shown[0].label)
    out = []
    if label and r.matched_groups > 1:  # "time in FSDP?": every group the name matches first, then the largest
        out.append(f"NVTX ranges whose label contains {name(label)}: {count(r.matched_ranges, 'range')} in "
                   f"{count(r.matched_groups, 'label group')}, {duration(r.matched_ns)} in total (summed: nested "
                   "ranges each count); the largest group follows.")
    for i, g in enumerate(shown):
        gpu = (f", launching {count(g.kernel_count, 'kernel')} with {duration(g.gpu_ns)} of GPU time"
               if g.kernel_count else ", launching no kernels")
        lead = ("NVTX range" if label or i else "The NVTX range with the most time is") + " " + name(g.label)
        out.append(f"{lead}: {count(g.count, 'range')}, {duration(g.total_ns)} in total (average {duration(g.avg_ns)}, "
                   f"longest {duration(g.max_ns)}){gpu}.")
    if label and len(shown) == 1:  # one range named: its instances and what ran inside it
        from .entity import range_analysis

        out.append(range_analysis(ctx, shown[0].label.removesuffix(" <n>")))
    if r.group_count > 1:
        out.append(f"Range times are summed, so nested ranges each count; {r.range_count} ranges in "
                   f"{r.group_count} label groups overall.")
    return sentences(*out)


def compared_ranges(ctx: Ctx, shown: str) -> list:
    """Other NVTX label groups the question names beside the asked one ("backward ... compared with the
    forward pass"): the top groups of the window whose label appears in the question as words."""
    r = calls_per_gpu(ctx, "nvtx", limit=20)[0]
    return [g for g in r.groups if g.label != shown and len(g.label) >= 3
            and re.search(rf"(?<!\w){re.escape(g.label)}(?!\w)", ctx.question, re.IGNORECASE)][:2]
