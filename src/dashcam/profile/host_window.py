"""The window of a tool that reads host rows (CUDA API calls, NVTX ranges, OS runtime calls, CPU samples, context
switches): the GPU window when the capture has GPU activity, else the *host span* — first start to last end over
those rows, every thread — so that a CPU-only capture (``nsys profile -t osrt,nvtx -s cpu``) is still read.
``--start/--end`` are then ms from the host span's start; the note says so (definitions.md, "window").
"""
from __future__ import annotations

from dashcam.errors import NoGpuActivity
from dashcam.measure.definitions import Window
from dashcam.profile.cpu_source import source
from dashcam.profile.profile import window_in_span

HOST_WINDOW_NOTE = ("No GPU activity in this profile: the window is the span of its host rows (CUDA API calls, NVTX "
                    "ranges, OS runtime calls, CPU samples, context switches), every thread, and --start/--end are "
                    "ms from its start.")


def host_span(profile) -> tuple[int, int] | None:
    """``(first start, last end)`` over the host rows, every thread; None when the capture has none."""
    spans = []
    for view, short in (("api_calls", "runtime"), ("nvtx", "nvtx")):
        if profile.has_table(short):
            lo, hi = profile.one(f'SELECT min(start), max(coalesce("end", start)) FROM {view}')
            if lo is not None:
                spans.append((int(lo), int(hi)))
    cpu = source(profile).span()
    if cpu is not None:
        spans.append(cpu)
    if not spans:
        return None
    return min(a for a, _ in spans), max(max(b for _, b in spans), min(a for a, _ in spans) + 1)


def host_window(profile, start_ms: float | None, end_ms: float | None) -> tuple[Window, str | None]:
    """The GPU window and no note, or without GPU activity the host span's window and HOST_WINDOW_NOTE;
    NoGpuActivity when the capture has neither."""
    try:
        return profile.window(start_ms, end_ms), None
    except NoGpuActivity:
        span = host_span(profile)
        if span is None:
            raise NoGpuActivity(f"{profile.path}: no GPU activity and no host rows (CUDA API calls, NVTX ranges, "
                                "OS runtime calls, CPU samples) in this profile") from None
    return window_in_span(*span, start_ms, end_ms, "the host rows' span"), HOST_WINDOW_NOTE
