"""Each device's five time shares in a window (measure/definitions.py ``Shares``: kernel-busy, copy-busy, busy, idle,
kernel-idle), measured once here for every tool that reports them.

kernel-busy is the window minus the gaps of the gap table (gap_causes.idle_in); busy adds the copies and memsets
inside those gaps; copy-busy is the union of the copies and memsets over the whole window."""
from __future__ import annotations

from dashcam.measure.definitions import Shares, Window
from dashcam.measure.intervals import memory_unions
from dashcam.profile.gap_causes import idle_in


def device_shares(profile, w: Window, devices: list[int]) -> dict[int, Shares]:
    idle = idle_in(profile, w, devices)
    copies = memory_unions(profile, w, devices)
    out = {}
    for d in devices:
        kernel = w.length_ns - idle[d][0]
        out[d] = Shares(window_ns=w.length_ns, kernel_busy_ns=kernel,
                        copy_busy_ns=copies[d].total if d in copies else 0, busy_ns=kernel + idle[d][1])
    return out
