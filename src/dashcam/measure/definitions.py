"""The definitions every dashcam number rests on. Stated once, here and in the README.

window
    ``[first start, last end]`` over all kernels, memcpys, memsets and whole-graph executions
    (below) in the profile (every device together), or the user's ``--start/--end`` in milliseconds from that window's
    start. The same window for every device. Events are clipped to it.
The five time shares of a device, each a length inside the window and its % of the window; every surface
(tables, the paragraph, answers, JSON fields ``<share>_ns``/``<share>_pct``) names a figure by one of them (SHARES):

kernel-busy
    The union of that device's kernel intervals. Concurrent kernels on several streams count once.
copy-busy
    The union of its memcpy and memset intervals (unified-memory migrations are copies).
busy
    The union of its kernel, memcpy and memset intervals: any activity of the device.
idle
    No activity of the device at all: ``window - busy``.
kernel-idle
    No kernel running on it: ``window - kernel-busy``, the sum of its gaps (copies may run then).
gap
    A hole in a device's kernel union inside the window, including the hole before its
    first kernel and after its last one; the gaps add up to kernel-idle.
percentage
    Of the window length, per device. Never summed over streams or devices, so it is
    always between 0 and 100.
API call time
    A CUDA API call counts in a window when it overlaps it, with its part inside the window
    (clipped). A function's total is the sum of its calls' clipped durations (thread time: it
    can exceed the window when several threads call it at once); its percentage of the window
    is the length of the union over threads of its calls (the time at least one thread was
    inside it), so never over 100.

What a host thread was doing (profile/cpu_states.py), each instant of its time outside its
CUDA calls in the first state that holds:

os_wait (in an OS wait)
    Inside a traced OS runtime call that blocks waiting (labels.OS_WAIT_CALLS: poll, read,
    futex, pthread_cond_wait, sem_wait, sleeps, ...); the innermost call open names it.
os_call
    Inside another OS runtime call (ioctl, mmap, open, write, ...).
descheduled
    Switched off its CPU: from a context switch out (SCHED_EVENTS.isSchedIn = 0) to the next in.
running (computing)
    On a CPU per the context switches.
unknown
    No context-switch data covers it. The five add up to the time outside CUDA calls.
samples and time
    A CPU sample stands for one sampling period of the thread's CPU time; the period is the
    median interval between consecutive samples of the most sampled thread. A function's time
    is an estimate, samples x period (self: innermost frame; total: anywhere on the stack),
    always said with its sample count.
calling function of a CUDA call
    The first resolved frame above the outermost CUDA runtime/driver/profiler frame of a stack
    through the call: its CUDA backtrace, an OS runtime call's backtrace inside it, or a CPU
    sample inside it (profile/cpu_source.caller).

CUDA graphs
    A *graph kernel* has a graphNodeId: a CUDA graph launched it and the capture traced the graph
    node by node (``--cuda-graph-trace=node``); every other kernel is *eager*. A *launch call*
    (``cudaLaunchKernel``, ``cudaGraphLaunch``, ...) is charged once, however many kernels it
    started: its duration and its queue delay (its first kernel's start - the call's end) count
    once; a later kernel of a graph launch waits for the nodes before it, on the device. A
    *whole-graph execution* is a CUPTI_ACTIVITY_KIND_GRAPH_TRACE row (nsys' default
    ``--cuda-graph-trace=graph``): one graph launch as one range, its kernels not recorded. It is
    GPU activity, so it is part of the window; it is not a kernel, so not kernel busy.
    *Graph share of kernel time*: graph kernels' durations / all kernels' durations, both clipped
    to the window (or step).
GPU metric samples
    Each sample of a metric on a GPU holds its value over the interval from the previous sample of
    that metric on that GPU to its own timestamp (the first sample: one median sampling interval
    before it). A *time-weighted* mean or percentile weighs each value by the part of its interval
    inside the window (or inside kernels, gaps, one kernel's launches).
device memory in use (of a GPU)
    Allocations minus frees of device memory (CUDA_GPU_MEMORY_USAGE_EVENTS with memory kind device,
    array or device-static) recorded up to that time, every process together; memory allocated
    before the capture started is not seen. A free with no byte count frees what the last
    allocation at its address held.

All times are integer nanoseconds on the profile's own clock (relative to the session
start, as nsys writes them). ``intervals.py`` implements union, gaps and overlap on
these definitions; every tool measures with it.
"""
from __future__ import annotations

from dataclasses import dataclass

NS_PER_MS = 1_000_000

# The shares' names, as sentences say them; JSON fields use them with "_" (kernel_busy_pct, kernel_idle_ns).
KERNEL_BUSY, COPY_BUSY, BUSY, IDLE, KERNEL_IDLE = "kernel-busy", "copy-busy", "busy", "idle", "kernel-idle"
SHARES = {
    KERNEL_BUSY: "kernels running (their union)",
    COPY_BUSY: "copies or memsets running (their union)",
    BUSY: "any GPU activity: kernels, copies or memsets",
    IDLE: "no GPU activity at all (window - busy)",
    KERNEL_IDLE: "no kernel running (window - kernel-busy, the sum of the gaps)",
}


@dataclass(frozen=True)
class Shares:
    """A device's five time shares in a window (the lengths; ``pct`` gives each as % of the window)."""

    window_ns: int
    kernel_busy_ns: int
    copy_busy_ns: int
    busy_ns: int

    @property
    def idle_ns(self) -> int:
        return self.window_ns - self.busy_ns

    @property
    def kernel_idle_ns(self) -> int:
        return self.window_ns - self.kernel_busy_ns

    def ns(self, share: str) -> int:
        return getattr(self, share.replace("-", "_") + "_ns")

    def pct(self, share: str) -> float:
        """That share as % of the window, rounded to 3 decimals (as every tool reports it)."""
        return round(max(0.0, min(100.0, 100.0 * self.ns(share) / self.window_ns)), 3) if self.window_ns > 0 else 0.0

    def fields(self) -> dict[str, float | int]:
        """``kernel_busy_ns``, ``kernel_busy_pct``, ... for each share: the JSON fields of a result."""
        out: dict[str, float | int] = {}
        for share in SHARES:
            key = share.replace("-", "_")
            out[key + "_ns"], out[key + "_pct"] = self.ns(share), self.pct(share)
        return out


@dataclass(frozen=True)
class Window:
    """A half-open time range ``[start_ns, end_ns)`` on the profile clock."""

    start_ns: int
    end_ns: int
    profile_start_ns: int  # start of the whole-profile window, the origin of --start/--end

    @property
    def length_ns(self) -> int:
        return max(0, self.end_ns - self.start_ns)

    @property
    def start_ms(self) -> float:
        """Offset of this window's start from the profile window start, in ms."""
        return (self.start_ns - self.profile_start_ns) / NS_PER_MS

    @property
    def end_ms(self) -> float:
        return (self.end_ns - self.profile_start_ns) / NS_PER_MS

    def rel_ms(self, t_ns: int) -> float:
        """A profile timestamp as ms from the profile window start (how the CLI shows times)."""
        return (t_ns - self.profile_start_ns) / NS_PER_MS


def pct(part_ns: float, window: Window) -> float:
    """``part`` as a percentage of the window length, clamped to [0, 100]."""
    if window.length_ns <= 0:
        return 0.0
    return max(0.0, min(100.0, 100.0 * part_ns / window.length_ns))
