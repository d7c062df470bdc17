"""The impact model: what a fix would save, and the ranking that follows from it.

Every finding's ``saving_ns`` is the time its first remedy would save over the captured window on its worst GPU,
computed by its rule from the events, under the assumption the rule states (docs/definitions.md, "What a fix
would save"): the gaps a cause fills; a kernel's time times the share of SMs its grid leaves empty; the copy time
pinning or overlapping would remove (memcpy's ``pin_saving_ns``, ``overlap_saving_ns``); the exposed
communication; the idle time migrations fill. A user acts on the first remedy, so:

- **Ranking is by saving.** Capture findings come first (they say what every other figure means); then findings by
  saving, most first (ties: the engine's PRECEDENCE); findings that state no saving (what the kernels could reach is
  not in the profile) after those that do.
- **Severity follows from the saving's share of the window** (rules.loss_severity: high >= 50 %, medium >= 25 %,
  low >= 5 %). Below LOW_LOSS_PCT a finding is information: listed, never the verdict, its remedy not offered.
- **One-off costs are start-up.** JIT compiling, module loads and first launches happen once: the startup finding
  leads only when the capture is mostly start-up (STARTUP_LEAD_PCT of the window); otherwise it ranks after every
  finding that saves at least LOW_LOSS_PCT. The same time is taken out of the idle savings (``one_off_ns``), so no
  nanosecond is counted as both.
- **The kernels are the lever** when every GPU's kernels run at least KERNEL_LEVER_MIN_BUSY_PCT of the window and no
  finding saves KERNEL_LEVER_MIN_OTHER_PCT: the lead is then the top kernels (rules/kernel_lever.py).

The savings the engine computes are evidence of their own (``evidence``: the IMPACT pseudo-tool, reproduced by
`dashcam summary --format json`), so a sentence that states one is grounded.
"""
from __future__ import annotations

import re

from dashcam.evidence import Evidence
from dashcam.evidence.models import IMPACT
from dashcam.findings.models import Finding
from dashcam.findings.rules import Item, loss_severity, share
from dashcam.findings.thresholds import COLD_FIRST_LAUNCH_PCT, LOW_LOSS_PCT, STARTUP_LEAD_PCT
from dashcam.measure.labels import MODULE_LOAD_API

# Findings about the capture itself: they say how to read every other figure, so they come first.
CAPTURE_KINDS = ("too_little_work", "gpu_minor", "whole_graph_trace")
ONE_OFF_KINDS = ("startup",)


def severity(it: Item, window_ns: int):
    """An item's severity from its saving's share of the window; capture findings and findings without a saving
    keep the rule's own."""
    if it.kind in CAPTURE_KINDS or it.saving_ns is None:
        return it.severity
    return loss_severity(share(it.saving_ns, window_ns))


def mostly_startup(f) -> bool:
    """The capture is mostly start-up: JIT, module loads and first launches cover STARTUP_LEAD_PCT of the window, or
    the program compiles at run time (JIT ranges) and at least COLD_FIRST_LAUNCH_PCT of its launches are a kernel's
    first (the capture holds the compiling first calls, whose host time is the compiler's)."""
    wl = f.workload
    if wl.startup_pct >= STARTUP_LEAD_PCT:
        return True
    cold = 100.0 * wl.first_launch_count >= COLD_FIRST_LAUNCH_PCT * f.kernel_count
    return wl.jit_ns > 0 and f.kernel_count > 0 and cold


def rank_key(x: Finding, f, precedence: list[str]) -> tuple:
    """Capture findings; start-up when the capture is mostly start-up; per-run findings by saving; one-off start-up
    otherwise (after every finding that saves at least LOW_LOSS_PCT); findings without a saving; information."""
    pct = x.saving_pct or 0.0
    one_off = x.kind in ONE_OFF_KINDS
    if x.kind in CAPTURE_KINDS:
        tier = 0
    elif x.severity == "info" or (one_off and not mostly_startup(f) and pct < LOW_LOSS_PCT):
        tier = 5
    elif one_off:
        tier = 1 if mostly_startup(f) else 3
    elif x.saving_ns is None:
        tier = 4
    else:
        tier = 2
    return (tier, -(x.saving_ns or 0), precedence.index(x.kind) if x.kind in precedence else len(precedence),
            x.gpus[:1])


def one_off_ns(f, dev, cause: str) -> int:
    """The part of a GPU's ``cause`` time that is start-up, paid once: NVTX JIT ranges inside ``cpu_work``, the
    first launch call of each kernel inside ``launch_overhead`` (launch_latency's ``first_launch_ns``), module and
    library loads inside ``cuda_api``."""
    total = dev.causes.get(cause, 0)
    if cause == "cpu_work":
        return min(total, (dev.cpu_work_kinds or {}).get("jit", 0))
    if cause == "launch_overhead":
        ll = f.device("launch_latency", dev.device_id)
        return min(total, ll.first_launch_ns) if ll is not None else 0
    if cause == "cuda_api":  # module and library loads (lazy loading, JIT linking) are start-up too
        loads = sum(ns for api, ns in (dev.cuda_api_calls or {}).items() if re.search(MODULE_LOAD_API, api))
        return min(total, loads)
    return 0


# What each kind's saving assumes (the rules compute it; docs/definitions.md says it once more).
ASSUMPTIONS = {
    "idle": "the gaps the cause fills go away (their one-off start-up part left out)",
    "startup": "a warm run pays no JIT compiling, module loading or first launches (paid once)",
    "um_migrations": "with the data resident on the GPU, the migrations that fill its gaps do not happen",
    "transfer_bound": "the copy time the first copy remedy removes (pinning: memcpy pin_saving_ns; overlapping: "
                      "overlap_saving_ns; moving less data: at most the copy time no kernel hides)",
    "launch_bound": "the launches replayed without the host (a CUDA graph): the GPU's gaps spent in launch calls "
                    "and in host work between them go away (an upper bound; first launches and JIT left out)",
    "nccl_not_overlapped": "the exposed communication runs under compute",
    "under_parallelized": "the kernels' time times the share of SMs their grids leave empty (an upper bound)",
    "small_kernels": "the small grids' time times the share of SMs they leave empty (an upper bound)",
}


def evidence(kind: str, gpu: int | None, saving_ns: int, window_ns: int, assumption: str | None = None) -> Evidence:
    """The engine's own figures for a finding: its saving, as ns and as % of the window, with the assumption."""
    return Evidence(tool=IMPACT, args={}, result={
        "finding": kind, "gpu": gpu, "saving_ns": int(saving_ns),
        "saving_pct": share(saving_ns, window_ns), "assumption": assumption or ASSUMPTIONS.get(kind, "")})
