"""What the program already does: each check reads the tool results and returns the sentence that says so (with its
figures), or None when the program does not do it. A remedy whose practice is already in place is never advised;
it is said as done, and the next remedy is offered (findings/remedies.py).

- ``pinned``: at least PINNED_DONE_PCT of a GPU's host copies are from or to pinned memory (memcpy
  ``pinned_copies`` of ``host_copies``).
- ``at_link_peak``: its host copies run at NEAR_PEAK or more of what pinned copies reach over its link
  (``host_copy_link_pct``): pinning or bigger copies cannot make them faster; only moving fewer bytes can.
- ``async_copies``: at least ASYNC_DONE_PCT of its explicit copies are issued by an asynchronous call.
- ``overlapped``: overlapping the copies with kernels would save under LOW_LOSS_PCT of the window
  (``overlap_saving_ns``): the kernels already run under the copies, or the copies under the kernels.
- ``resident``: in a loop of steps (the iterations tool), at most RESIDENT_MAX_COPIES_PER_STEP host copies a step;
  without steps, at most RESIDENT_MAX_COPIES copies and RESIDENT_MAX_COPIES_PER_KERNEL a kernel:
  the arrays stay on the GPU across the loop (a data region, arrays kept on the device) and only the first and last
  copies remain. (One input copy per step is an input stream, not resident arrays.)
- ``prefetch``: the program calls ``cudaMemPrefetchAsync``/``cuMemPrefetchAsync`` (or ``cudaMemAdvise``).
- ``readback``: the host reads a flag or scalar back with a synchronous copy (memcpy ``readbacks``) at least
  READBACK_MIN_COUNT times, one for every fewer than GRAPH_MIN_KERNELS_PER_READBACK kernels: each graph could hold
  only the few kernels between two readbacks, so CUDA graphs are no remedy for that loop.
"""
from __future__ import annotations

from dashcam.findings.thresholds import (
    ASYNC_DONE_PCT,
    GRAPH_MIN_KERNELS_PER_READBACK,
    LOW_LOSS_PCT,
    PINNED_DONE_PCT,
    READBACK_MIN_COUNT,
    RESIDENT_MAX_COPIES,
    RESIDENT_MAX_COPIES_PER_KERNEL,
    RESIDENT_MAX_COPIES_PER_STEP,
)
from dashcam.measure.gpu_models import NEAR_PEAK
from dashcam.text.format import count, percent


def copy_row(f, gpu: int | None):
    """The memcpy device row of ``gpu`` (or, when None, of the GPU whose copies no kernel hides take longest: the
    one a copy remedy is for)."""
    rows = f.rows("memcpy")
    if gpu is None:
        return max(rows.values(), key=lambda d: (d.exposed_copy_ns, d.host_copies, -d.device_id), default=None)
    return rows.get(gpu)


def pinned(f, gpu: int | None = None) -> str | None:
    d = copy_row(f, gpu)
    if d is None or not d.host_copies or 100.0 * d.pinned_copies < PINNED_DONE_PCT * d.host_copies:
        return None
    which = "all" if d.pinned_copies == d.host_copies else f"{d.pinned_copies} of"
    return f"{which} {count(d.host_copies, 'host copy', 'host copies')} on GPU {d.device_id} are already pinned"


def at_link_peak(f, gpu: int | None = None, subject: bool = True) -> str | None:
    """``subject``: the sentence names the copies ("the host copies on GPU 0 run at ..."); else it continues one
    that did ("run at ...")."""
    d = copy_row(f, gpu)
    if d is None or d.host_copy_link_pct is None or d.host_copy_link_pct < 100.0 * NEAR_PEAK:
        return None
    rate = (f"the host copies on GPU {d.device_id} run" if subject else "run") + f" at {d.host_copy_gbps:.3g} GB/s"
    if d.host_copy_link_pct <= 100.0:
        return f"{rate}, {percent(d.host_copy_link_pct)} of what pinned copies reach over {d.host_link}"
    return f"{rate}, as fast as pinned copies go over {d.host_link}"


def async_copies(f, gpu: int | None = None) -> str | None:
    d = copy_row(f, gpu)
    if d is None or not d.copy_count or 100.0 * d.async_copies < ASYNC_DONE_PCT * d.copy_count:
        return None
    streams = f" on {count(d.copy_streams, 'stream')}" if d.copy_streams > 1 else ""
    which = "all" if d.async_copies == d.copy_count else f"{d.async_copies} of"
    return f"{which} {count(d.copy_count, 'copy', 'copies')} are already asynchronous{streams}"


def overlapped(f, gpu: int | None = None) -> str | None:
    d = copy_row(f, gpu)
    if d is None or not d.copy_count or not d.copy_kernel_overlap_ns:
        return None
    if 100.0 * d.overlap_saving_ns >= LOW_LOSS_PCT * max(f.window_ns, 1):
        return None
    hidden = 100.0 * d.copy_kernel_overlap_ns / d.kernel_busy_ns if d.kernel_busy_ns else 0.0
    if hidden >= 50.0:
        return f"{percent(round(hidden, 3))} of the kernel time already runs under the copies"
    return f"{percent(d.copy_kernel_overlap_pct)} of the copy time already overlaps kernels"


def resident(f, gpu: int | None = None) -> str | None:
    d = copy_row(f, gpu)
    o = f.device("overview", d.device_id) if d is not None else None
    if d is None or o is None or not o.kernel_count:
        return None
    steps = f.iterations.step_count if f.iterations is not None else 0
    if steps >= 2:  # a loop: fewer than one copy every few steps
        if d.host_copies > RESIDENT_MAX_COPIES_PER_STEP * steps:
            return None
        per = f"{count(steps, 'step')}"
    elif d.host_copies <= min(RESIDENT_MAX_COPIES, RESIDENT_MAX_COPIES_PER_KERNEL * o.kernel_count):
        per = f"{count(o.kernel_count, 'kernel')}"
    else:
        return None
    return f"the arrays already stay on the GPU: {count(d.host_copies, 'host copy', 'host copies')} for {per}"


def _calls(f, pattern: str) -> tuple[int, str, str | None]:
    """(calls, where, the most called function) of the API functions matching ``pattern``: the calls in the window,
    or, when none is, those outside it (where: "in the window" / "outside the window")."""
    r = f.runs.maybe("api", name=pattern)
    if r is None or not (r.api_calls or r.outside_calls):
        return 0, "", None
    top = max(r.functions, key=lambda x: (x.calls + x.outside_calls, x.name), default=None)
    if r.api_calls:
        return r.api_calls, "in the window", top.name if top else None
    return r.outside_calls, "outside the window", top.name if top else None


def prefetch(f) -> str | None:
    n, where, top = _calls(f, "*MemPrefetch*")
    if n:
        return f"the program already prefetches managed memory ({count(n, f'`{top}` call')} {where})"
    n, where, top = _calls(f, "*MemAdvise*")
    return f"the program already gives memory hints ({count(n, f'`{top}` call')} {where})" if n else None


def readback(f, gpu: int | None = None) -> str | None:
    rows = [d for d in f.rows("memcpy").values() if gpu is None or d.device_id == gpu]
    d = max(rows, key=lambda x: (x.readbacks, -x.device_id), default=None)
    o = f.device("overview", d.device_id) if d is not None else None
    if d is None or o is None or d.readbacks < READBACK_MIN_COUNT:
        return None
    if o.kernel_count >= GRAPH_MIN_KERNELS_PER_READBACK * d.readbacks:
        return None
    return (f"the host reads a value back from GPU {d.device_id} {count(d.readbacks, 'time')} "
            f"(synchronous copies of a few bytes) among {count(o.kernel_count, 'kernel')}: a graph cannot cross that "
            "wait")


def said(done: list[str | None]) -> str:
    """The practices already in place as one clause ("all 20 host copies on GPU 0 are already pinned and they run
    at 24 GB/s, ..."), capitalised; "" when none."""
    parts = [x for x in done if x]
    if not parts:
        return ""
    text = parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
    return text[0].upper() + text[1:]
