"""startup: the capture shows a cold start — JIT compiling, module loads and first launches.

From the workload tool: ``startup_ns``, the union of NVTX ranges that compile code (kind ``jit``),
module/library load calls and each kernel's first launch call, inside the window. A finding when it
covers at least STARTUP_MIN_PCT of the window; severity by that share; the saving is that time (a
warm run does not pay it). A CUDA call before the window of at least PRE_WINDOW_CALL_NOTABLE_MS (CUDA
initialization, context creation: advice.pre_window_call) is named in the sentence and the remedy too.
"""
from __future__ import annotations

from dashcam.findings import advice
from dashcam.findings.rules import Item, loss_severity
from dashcam.findings.thresholds import STARTUP_LEAD_PCT, STARTUP_MIN_PCT
from dashcam.text.format import count, duration, name, percent


def find(f) -> list[Item]:
    wl = f.workload
    if wl.startup_pct < STARTUP_MIN_PCT:
        return []
    parts = []  # largest first; their times are in the figures (the sentence keeps to its key numbers)
    if wl.jit_ns:
        top = next(iter(wl.jit_ranges), None)
        parts.append((wl.jit_ns, "compiling code" + (f" (NVTX {name(top)})" if top else "")))
    if wl.module_load_ns:
        parts.append((wl.module_load_ns, "loading modules"))
    if wl.first_launch_ns:
        parts.append((wl.first_launch_ns, "the first launch of each kernel (module loading)"))
    what = [text for _, text in sorted(parts, key=lambda x: -x[0])]
    head = "Start-up dominates the capture" if wl.startup_pct >= STARTUP_LEAD_PCT else "A cold start"
    sentence = (f"{head}: {percent(wl.startup_pct)} of the {duration(f.window_ns)} window "
                f"goes to {', '.join(what[:-1]) + ' and ' + what[-1] if len(what) > 1 else what[0]}, while "
                f"{count(f.kernel_count, 'kernel')} ran")
    early = advice.pre_window_call(f)
    sentence += f"; and {advice.pre_window_words(early)}." if early else "."
    figures = {"startup_ns": wl.startup_ns, "startup_pct": wl.startup_pct, "jit_ns": wl.jit_ns,
               "module_load_ns": wl.module_load_ns, "first_launch_ns": wl.first_launch_ns,
               "kernel_count": f.kernel_count, "window_ns": f.window_ns,
               "pre_window_call": early[0] if early else None, "pre_window_call_ns": early[1] if early else None}
    return [Item("startup", None, loss_severity(wl.startup_pct), wl.startup_ns, figures,
                 [f.ev("overview")], f"Start-up takes {percent(wl.startup_pct)} of the window", sentence,
                 advice.startup(f))]
