"""Whether two profiles can be compared at all, before ``dashcam diff`` gives a verdict on them.

A verdict compares the time per unit of work; it means something only when both profiles run the same
work the same way. Four checks, in this order; the first that fails makes the pair ``not_comparable``
with its reason:

1. Both profiles have kernels.
2. The same number of GPUs with activity (per-GPU figures and kernel time summed over GPUs would
   otherwise compare different machines).
3. The same program: the kernels both profiles run (matched by full name) hold at least
   ``min_shared_pct`` % (default ``MIN_SHARED_PCT``) of the kernel time on *each* side. Two unrelated
   programs share no kernel; a change that replaces most of the kernel time with new kernels is
   compared with a lower ``--min-shared``.
4. The same step definition: when either profile has steps, both have them and they were found the
   same way (the same NVTX label, or the same kernel marking the step). Steps from different kernels,
   or steps on one side only, measure different units of work.

GPU models that differ are said in a note, not refused: comparing the same program on two GPU models
is one of the things a diff is for.
"""
from __future__ import annotations

from pydantic import BaseModel, Field

MIN_SHARED_PCT = 50.0  # below this share of kernel time in shared kernels, on either side, the programs differ


class Comparability(BaseModel):
    comparable: bool
    reason: str | None = Field(None, description="Why the pair cannot be compared (the first check that failed).")
    shared_kernel_pct_before: float = Field(description="% of the before profile's kernel time in kernels the "
                                                        "after profile also runs (matched by full name).")
    shared_kernel_pct_after: float = Field(description="% of the after profile's kernel time in kernels the "
                                                       "before profile also runs.")
    min_shared_pct: float = Field(description="The least shared share, on each side, of a comparable pair.")
    step_definition_before: str | None = Field(description="How steps were found: nvtx:LABEL, "
                                                           "kernel_pattern:KERNEL, or null without steps.")
    step_definition_after: str | None


def shared_pct(mine: dict[str, int], theirs: dict[str, int]) -> float:
    """% of the kernel time in ``mine`` (full name -> summed ns) spent in kernels ``theirs`` also has."""
    total = sum(mine.values())
    return round(100.0 * sum(t for n, t in mine.items() if n in theirs) / total, 3) if total else 0.0


def _step_text(kind: str) -> str:
    method, _, label = kind.partition(":")
    return f"NVTX range {label!r}" if method == "nvtx" else f"kernel {label!r}"


def check(before, after, kernels_before: dict[str, int], kernels_after: dict[str, int],
          steps_before: str | None, steps_after: str | None,
          min_shared_pct: float = MIN_SHARED_PCT) -> Comparability:
    """The checks of the module docstring on two diff ``Side`` s, their kernel time by full name and their
    step definitions (``nvtx:LABEL`` / ``kernel_pattern:KERNEL`` / None)."""
    sb, sa = shared_pct(kernels_before, kernels_after), shared_pct(kernels_after, kernels_before)
    out = {"shared_kernel_pct_before": sb, "shared_kernel_pct_after": sa, "min_shared_pct": min_shared_pct,
           "step_definition_before": steps_before, "step_definition_after": steps_after}
    reason = None
    empty = [s for s, x in (("before", before), ("after", after)) if not x.kernel_count]
    if empty:
        reason = f"No kernels in the {' and '.join(empty)} profile."
    elif before.gpu_count != after.gpu_count:
        reason = f"GPU count differs: {before.gpu_count} before, {after.gpu_count} after."
    elif min(sb, sa) < min_shared_pct:
        reason = (f"Different programs: the kernels both profiles run hold {sb:g} % of the before profile's kernel "
                  f"time and {sa:g} % of the after's (at least {min_shared_pct:g} % on each side needed; "
                  "--min-shared lowers it).")
    elif steps_before != steps_after:
        if steps_before and steps_after:
            reason = (f"Steps are defined differently ({_step_text(steps_before)} before, "
                      f"{_step_text(steps_after)} after): their step times measure different units of work.")
        else:
            has, lacks = ("before", "after") if steps_before else ("after", "before")
            reason = (f"Steps found in the {has} profile ({_step_text(steps_before or steps_after)}) but none in "
                      f"the {lacks}: there is no common unit of work to compare.")
    return Comparability(comparable=reason is None, reason=reason, **out)
