"""The definitions every dashcam number rests on. Stated once, here and in the README.

window
    ``[first start, last end]`` over all kernels, memcpys and memsets in the profile (every
    device together), or the user's ``--start/--end`` in milliseconds from that window's
    start. The same window for every device. Events are clipped to it.
kernel busy (of a device)
    The length of the union of that device's kernel intervals inside the window. Concurrent
    kernels on several streams count once.
busy (of a device)
    The length of the union of its kernel, memcpy and memset intervals inside the window.
gap
    A hole in a device's kernel union inside the window, including the hole before its
    first kernel and after its last one. ``idle = window - kernel busy``.
percentage
    Of the window length, per device. Never summed over streams or devices, so it is
    always between 0 and 100.

All times are integer nanoseconds on the profile's own clock (relative to the session
start, as nsys writes them). ``intervals.py`` implements union, gaps and overlap on
these definitions; every tool measures with it.
"""
from __future__ import annotations

from dataclasses import dataclass

NS_PER_MS = 1_000_000


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
