"""Planted programs for the dependency split (profile/gap_dependency.py): what a GPU's device-side ``dependency``
time was — launch-to-start latency, a real wait, or back-to-back turnaround. One process (pid 100) on one H100;
every kernel is launched by cudaLaunchKernel on the main thread. All times ns; T0 is the first kernel's start.
"""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from dashcam.testing.builder import ExportBuilder

US = 1_000
MS = 1_000_000
T0 = 10 * MS
H100 = "NVIDIA H100 80GB HBM3"


def _late_starts(path: str | Path, kernels: int, kernel_ns: int, latency_ns: int, name: str) -> Path:
    """``kernels`` kernels of ``kernel_ns`` on stream 7, one after another: kernel i+1's 5 us launch call returns as
    kernel i ends, and kernel i+1 starts ``latency_ns`` later, the device empty; no wait call, no copy."""
    b = ExportBuilder("2024")
    b.gpu(0, H100, 132)
    b.process(100, "./app")
    start = T0
    b.launch(0, T0 - 20 * US, T0 - 15 * US, T0, T0 + kernel_ns, name=name)
    for _ in range(kernels - 1):
        end = start + kernel_ns
        start = end + latency_ns
        b.launch(0, end - 5 * US, end, start, start + kernel_ns, name=name)
    return b.write(path)


def launch_to_start(path: str | Path) -> Path:
    """Launch-to-start latency: 50 kernels `stencil_kernel` of 200 us on one stream, each starting 120 us after its
    launch call returns (the call returns as the kernel before ends), the device empty, no wait call.

    Window 50 x 200 + 49 x 120 = 15,880 us; kernel busy 10 ms = 62.972 %; idle 5,880 us = 37.028 % in 49 gaps of
    120 us, all `dependency` (the launch call returned at the gap's start). Split: launch_latency 5,880 us, wait 0,
    turnaround 0; 49 latency gaps, p10 = p50 = p90 = 120 us (constant but small: no "another process" wording).
    No stream-wait call: no `cudaStreamWaitEvent` advice. Kernel i runs [i x 320, + 200) us; the window
    [0.25, 15) ms cuts the gap [200, 320) us to 70 us and [14,920, 15,040) us to 80 us: launch_latency
    45 x 120 + 70 + 80 = 5,550 us in 47 gaps, median 120 us.
    """
    return _late_starts(path, 50, 200 * US, 120 * US, "stencil_kernel")


def constant_delay(path: str | Path) -> Path:
    """A large constant launch-to-start delay: 20 kernels `solver_kernel` of 1 ms on one stream, each starting
    4.4 ms after its launch call returns (as the kernel before ends), the device empty, no wait call.

    Window 20 x 1 + 19 x 4.4 = 103.6 ms; kernel busy 20 ms = 19.305 %; idle 83.6 ms = 80.695 % in 19 gaps of
    4.4 ms, all `dependency`: launch_latency 83.6 ms, p10 = p50 = p90 = 4.4 ms (spread 0: constant; median
    over 1 ms: large), so something the trace cannot see holds the kernels (another process or context).
    """
    return _late_starts(path, 20, 1 * MS, 4400 * US, "solver_kernel")


def stream_waits(path: str | Path) -> Path:
    """Two streams in ping-pong: 80 kernels of 100 us alternate between stream 7 (`producer_kernel`, even i) and
    stream 8 (`consumer_kernel`, odd i); before launching kernel i >= 1 the host records an event on the other
    stream (cudaEventRecord, 2 us) and makes the kernel's stream wait on it (cudaStreamWaitEvent, 2 us), then
    launches it (cudaLaunchKernel, 5 us); all 80 launches (10 us apart) return before the window. Kernel i runs
    [T0 + i x 120 us, + 100 us): it starts 20 us after the kernel it waits for ends, the device empty.

    Window 80 x 100 + 79 x 20 = 9,580 us; kernel busy 8 ms = 83.507 %; idle 1,580 us = 16.493 % in 79 gaps of
    20 us, all `dependency` (every launch call returned long before). Split: wait 1,580 us, all behind a
    stream-wait call (79 `cudaStreamWaitEvent`, one before each waiting kernel), launch_latency 0, turnaround 0.
    """
    b = ExportBuilder("2024")
    b.gpu(0, H100, 132)
    b.process(100, "./pingpong")
    t = T0 - 2 * MS
    for i in range(80):
        if i:
            b.api("cudaEventRecord", t, t + 2 * US)
            b.api("cudaStreamWaitEvent", t + 2 * US, t + 4 * US)
        s = T0 + i * 120 * US
        b.launch(0, t + 4 * US, t + 9 * US, s, s + 100 * US, name="consumer_kernel" if i % 2 else "producer_kernel",
                 stream=8 if i % 2 else 7)
        t += 10 * US
    return b.write(path)


def back_to_back(path: str | Path) -> Path:
    """Back-to-back kernels: 200 kernels `gemm_kernel` of 50 us on one stream with 1 us between them, all launched
    (5 us calls, 10 us apart) in the 2.5 ms before the window, no wait call.

    Window 200 x 50 + 199 x 1 = 10,199 us; kernel busy 10 ms = 98.049 % (healthy); idle 199 us in 199 gaps of
    1 us, all `dependency`, every one a turnaround gap (under 3 us, a kernel on each side): turnaround 199 us
    = 100 % of the idle time, launch_latency 0, wait 0. No idle finding, no dependency advice.
    """
    b = ExportBuilder("2024")
    b.gpu(0, H100, 132)
    b.process(100, "./app")
    t = T0 - 2500 * US
    for i in range(200):
        s = T0 + i * 51 * US
        b.launch(0, t, t + 5 * US, s, s + 50 * US)
        t += 10 * US
    return b.write(path)


def other_gpu_wait(path: str | Path) -> Path:
    """A GPU waiting on another GPU's work, no wait call in the capture: one process drives GPU 0 (`producer_kernel`
    [0, 2) and [3, 7) ms) and GPU 1 (`consumer_kernel` [0, 1), [3, 4), [6, 7) ms); every kernel launched (5 us calls)
    before the window, so all of every gap is `dependency`. Window [0, 7) ms.

    GPU 1: idle 4 ms = 57.143 % in 2 gaps. [1, 3) ms: GPU 0's kernel runs through 2 ms, so 1 ms wait and 1 ms
    launch_latency; [4, 6) ms: GPU 0 busy all of it, 2 ms wait. Split: wait 3 ms (wait_call_ns 0, no wait calls),
    launch_latency 1 ms in 1 gap (median 1 ms). GPU 0: idle 1 ms = 14.286 %, its gap [2, 3) ms overlaps no GPU 1
    kernel: launch_latency 1 ms in 1 gap — large, but one gap is no constant pattern (no "another process").
    """
    b = ExportBuilder("2024")
    b.gpu(0, H100, 132)
    b.gpu(1, H100, 132)
    b.process(100, "./two_gpus")
    t = T0 - 1 * MS
    kernels = {0: ("producer_kernel", [(0, 2), (3, 7)]), 1: ("consumer_kernel", [(0, 1), (3, 4), (6, 7)])}
    for dev, (name, spans) in kernels.items():
        for a, z in spans:
            b.launch(dev, t, t + 5 * US, T0 + a * MS, T0 + z * MS, name=name)
            t += 10 * US
    return b.write(path)


DEPENDENCY_PROGRAMS: dict[str, Callable[[str | Path], Path]] = {
    "launch_to_start": launch_to_start,
    "constant_delay": constant_delay,
    "stream_waits": stream_waits,
    "back_to_back": back_to_back,
    "other_gpu_wait": other_gpu_wait,
}
