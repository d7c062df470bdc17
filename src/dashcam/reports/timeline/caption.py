"""The words around a timeline picture: its title (the profile and the window) and the caption of the
highlighted interval — for a gap, the gpu_gaps tool's own figures and cause text (no rule restated here)."""
from __future__ import annotations

from pathlib import Path

from dashcam.text.format import fmt_ns

# What the times of every timeline surface (strips, SVG, PNG) count from: the window's origin (docs/definitions.md).
AXIS_LABEL = "ms from the start of the window (first GPU activity)"
# ... and of a capture without GPU activity, whose window is its host rows' span (profile/host_window.py)
HOST_AXIS_LABEL = "ms from the start of the window (first host activity: the capture has no GPU activity)"
NOTHING_DRAWN = ("Nothing to draw: the window holds no GPU work, CUDA API call or NVTX range (`dashcam tool run cpu` "
                 "reads CPU samples and thread states).")


def title(profile) -> str:
    """The profile's file name: what the picture is of."""
    return Path(str(getattr(profile, "path", "") or "profile")).name


def highlight_caption(profile, around, highlight: tuple[int, int] | None, device: int | None,
                      start_ms: float | None, end_ms: float | None) -> str | None:
    """One sentence on the highlighted interval: what it is, its length and where it starts (ms from the window's
    origin) and, for a gap, its causes as gpu_gaps gives them. None without a highlight."""
    if highlight is None:
        return None
    a, b = highlight
    w = profile.window(start_ms, end_ms)
    at = f"{fmt_ns(b - a)} from {w.rel_ms(a):.3f} ms"
    if around == "gap":
        return _gap_caption(profile, device, a, b, at, start_ms, end_ms)
    kind, name = around
    return f"Highlighted: the first {kind} matching {name!r}, {at}."


def _gap_caption(profile, device: int, a: int, b: int, at: str, start_ms, end_ms) -> str:
    from dashcam.tools import gpu_gaps

    res = gpu_gaps.run(profile, gpu_gaps.Params(gpu=device, start_ms=start_ms, end_ms=end_ms, limit=1))
    dev = next(x for x in res.devices if x.device_id == device)
    head = f"Highlighted: the largest gap on GPU {device}, {at}"
    for g in dev.largest_gaps:
        if (g.start_ns, g.end_ns) == (a, b):
            between = f" ({g.kernel_before or 'window start'} → {g.kernel_after or 'window end'})"
            return f"{head}{between}; gpu_gaps causes: {gpu_gaps.causes_text(g)}."
    return f"{head}."  # gpu_gaps ranks the same gaps (measure.intervals.gaps), so it is found above
