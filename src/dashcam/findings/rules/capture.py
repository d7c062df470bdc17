"""What the capture lets us say at all.

- no_gpu_activity: no kernel, memcpy or memset. Three different captures, three messages:
  ``cpu_only_capture`` (no CUDA API rows either: CUDA tracing was off — trace it), ``gpu_records_missing``
  (CUDA calls were traced, kernels were launched, but no GPU record arrived: the trace was on and the GPU
  activity was lost or not flushed — not "turn tracing on"), ``no_cuda_work`` (CUDA calls without launches).
- no_kernels: GPU activity, but no kernel (copies and memsets only).
- too_little_work: fewer than MIN_KERNELS_FOR_VERDICT kernels and nothing specific explains the capture
  (the engine decides): not enough GPU work for a verdict; the facts, the capture span, and "capture more" —
  unless the capture already spans the whole process (profile/capture_span.py): then the run itself has little
  GPU work, and no longer capture holds more (so is no_kernels' advice). When even the idlest GPU is kernel-busy
  HEALTHY_MIN_KERNEL_BUSY_PCT of the window, what was captured is GPU-bound: the kernels' remedy (advice.kernels,
  the Nsight Compute command) comes first, more capture second.
- gpu_minor: the capture spans the whole process and the GPU window is under GPU_MINOR_RUN_PCT of the process
  span (first to last host call): the run's time is on the host, and the most any fix inside the GPU window could
  save is that window. The engine puts it first; the window's own findings follow, weighed against their window.
  When the call that created the CUDA context holds CONTEXT_MAJOR_RUN_PCT of that span, the remedy is CUDA's
  start-up first (advice.context_start: persistence mode, fewer visible GPUs, more work per process).
"""
from __future__ import annotations

from dashcam.evidence import Evidence
from dashcam.evidence.models import IMPACT
from dashcam.findings import advice
from dashcam.findings.models import Finding
from dashcam.findings.rules import Item, share
from dashcam.findings.rules.idle import migration_detail, migrations_matter, words
from dashcam.findings.thresholds import (
    CONTEXT_MAJOR_RUN_PCT,
    GPU_MINOR_RUN_PCT,
    HEALTHY_MIN_KERNEL_BUSY_PCT,
    LOW_LOSS_PCT,
)
from dashcam.profile.coverage import BY_ID
from dashcam.text.format import count, duration, percent


def no_gpu_activity(wl, ev) -> Finding:
    """The finding for a capture without GPU activity, from the workload tool's result ``wl`` (evidence ``ev``)."""
    what = wl.family_label or "the program"
    launches = wl.runtime_api_launches + wl.driver_api_launches
    figures = {"cuda_api_calls": wl.cuda_api_calls, "launch_calls": launches}
    if wl.cuda_api_calls == 0 and wl.cuda_trace_on:  # traced, and the program never called CUDA
        kind = "cuda_unused"
        failed = f": its error output says `{wl.program_error}`" if wl.program_error else ""
        sentence = (f"No GPU activity: CUDA tracing was on, but {what} made no CUDA call in this run (nsys: "
                    f"\"No CUDA events collected\"){failed}.")
        tip = ("The run failed before it used the GPU: fix the error it printed and capture again." if wl.program_error
               else "The program never reached its GPU code in this run: check that it takes the GPU path (a missing "
                    "device, a CPU fallback, an early exit) and capture again.")
    elif wl.cuda_api_calls == 0:
        kind = "cpu_only_capture"
        held = [BY_ID[x].name if x in BY_ID else x.replace("_", " ") for x in wl.recorded]
        sentence = ("No GPU activity: this capture has no CUDA trace at all (no CUDA API calls, kernels or copies)"
                    + (f", only {', '.join(held)}" if held else "") + f", so it cannot show how {what} uses the GPU.")
        tip = ("Profile with CUDA tracing on: `nsys profile -t cuda,nvtx,osrt` (add `--sample=cpu` to keep the CPU "
               "samples).")
    elif launches:
        kind = "gpu_records_missing"
        sentence = (f"No GPU activity recorded although CUDA was traced: {count(wl.cuda_api_calls, 'CUDA API call')}, "
                    f"{count(launches, 'launch call')} among them, but no kernel, copy or memset record arrived.")
        tip = ("The trace was on, so the GPU records were lost or never flushed: let the program end cleanly "
               "(`cudaDeviceSynchronize()` and `cudaProfilerStop()` before exit, no `kill`), check that `nsys` "
               "can trace the GPU on this system (under WSL2 it may not), and capture again.")
    else:
        kind = "no_cuda_work"
        sentence = (f"No GPU activity: {count(wl.cuda_api_calls, 'CUDA API call')} traced, none of them a "
                    "kernel launch, and no kernel, copy or memset was recorded on the GPU.")
        tip = "Capture the part of the run that computes on the GPU (`nsys profile --capture-range`, `--delay`)."
    return Finding(kind=kind, severity="info", gpus=[], title=sentence.split(":")[0], figures=figures, evidence=[ev],
                   sentence=sentence, advice=tip)


def no_kernels(f) -> Finding:
    ov = f.overview
    return Finding(kind="no_kernels", severity="info", gpus=[d.device_id for d in ov.devices],
                   title="No kernels: only copies or memsets",
                   figures={"window_ns": ov.window_ns, "gpu_count": ov.gpu_count}, evidence=[f.ev("overview")],
                   sentence=(f"No kernel ran in this capture: the {duration(ov.window_ns)} of GPU activity are copies "
                             "and memsets only."),
                   advice=("The capture spans the whole process, from CUDA's start to its exit, and no kernel ran in "
                           "it: check that the program reaches its GPU compute (a skipped code path, a CPU fallback)."
                           if f.workload.span.whole_process else
                           "Capture the part of the run that launches kernels (`nsys profile --capture-range`, "
                           "`--delay`, a longer `--duration`)."))


def too_little_work(f, idlest) -> Item:
    """``idlest``: the gpu_gaps row of the idlest GPU (or None)."""
    ov = f.overview
    busy = f"{percent(idlest.kernel_busy_pct)} kernel-busy" if idlest is not None else ""
    gpu_bound = idlest is not None and idlest.kernel_busy_pct >= HEALTHY_MIN_KERNEL_BUSY_PCT
    head = "Too little GPU work captured for a verdict" + (" on the run" if gpu_bound else "")
    sentence = (f"{head}: {count(f.kernel_count, 'kernel')} in a "
                f"{duration(ov.window_ns)} window" + (f", GPU {idlest.device_id} {busy}" if idlest else ""))
    if idlest is not None and idlest.dominant_cause:
        cause = idlest.dominant_cause
        lead = ("its kernel-idle time is mostly" if idlest.cause_pct[cause] >= 50
                else "the largest part of its kernel-idle time is")
        sentence += (f"; {lead} `{cause}` ({words(idlest, cause, f.family)}, {percent(idlest.cause_pct[cause])})"
                     + (migration_detail(idlest) if migrations_matter(idlest) else ""))
    if f.workload.span.whole_process:
        sentence += "; the capture already spans the whole process, from CUDA's start to its exit"
    tip = advice.more_capture(f)
    if gpu_bound:
        # even the idlest GPU is GPU-bound in what was captured: the kernels are the lever however few they are,
        # and more capture only confirms it on a steady state
        sentence += "; what it holds is GPU-bound: the kernels are the lever"
        family = f.top.families[0].family if f.top and f.top.families else None
        tip = f"{advice.kernels(f, family)} {tip}"
    figures = {"kernel_count": f.kernel_count, "window_ns": ov.window_ns}
    if idlest is not None:
        figures.update(gpu=idlest.device_id, kernel_busy_pct=idlest.kernel_busy_pct)
    return Item("too_little_work", None, "info", None, figures, [f.ev("overview"), f.ev("gpu_gaps")],
                f"Too little GPU work: {count(f.kernel_count, 'kernel')} in {duration(ov.window_ns)}",
                sentence + ".", tip)


def small_share(pct: float) -> str:
    """A share that may round to nothing at one decimal: two significant digits below 1 % ("0.049 %")."""
    return f"{pct:.2g} %" if 0 < pct < 1 else percent(pct)


def run_share(f) -> float | None:
    """The GPU window as % of the process span, for a capture of the whole process (profile/capture_span.py) and
    no --start/--end; else None."""
    span = f.workload.span
    if f.windowed or not span.whole_process or span.host_start_ns is None:
        return None
    host = span.host_end_ns - span.host_start_ns
    return share(f.window_ns, host) if host > 0 else None


def _own_os_calls(f, host_ns: int) -> list:
    """The program's own OS runtime calls (os_runtime ``own_ns``: its threads, outside its CUDA calls; a wait only
    on a thread that drives the GPU: elsewhere it costs the run nothing) that each take LOW_LOSS_PCT of the
    process's run or more, at most two, most first."""
    calls = f.os_calls
    if calls is None or not host_ns:
        return []
    own = [o for o in calls.functions
           if (not o.wait or o.top_thread.cuda_calls) and share(o.own_ns, host_ns) >= LOW_LOSS_PCT]
    return sorted(own, key=lambda o: (-o.own_ns, o.name))[:2]


def gpu_minor(f, best_saving_ns: int) -> Item | None:
    """The gpu_minor item when the GPU window is under GPU_MINOR_RUN_PCT of a whole-process capture, else None;
    ``best_saving_ns``: the largest saving of the window's own findings (what fixing the GPU side could win)."""
    pct = run_share(f)
    if pct is None or pct >= GPU_MINOR_RUN_PCT:
        return None
    span = f.workload.span
    host_ns = span.host_end_ns - span.host_start_ns
    sentence = (f"The GPU is a small part of this run: its work spans {duration(f.window_ns)} of the "
                f"{duration(host_ns)} the capture holds of the process's run ({small_share(pct)}), so "
                "the run's time is on the host")
    context_pct = share(span.init_ns, host_ns) if span.creates_context and span.init_call else 0.0
    if span.init_call and span.init_ns:
        sentence += (f" (`{span.init_call}` alone took {duration(span.init_ns)} creating the CUDA context"
                     + (f", {small_share(context_pct)} of the run)" if context_pct >= CONTEXT_MAJOR_RUN_PCT else ")")
                     if span.creates_context else
                     f" (its longest CUDA call before the GPU work, `{span.init_call}`, took {duration(span.init_ns)})")
    own = _own_os_calls(f, host_ns)
    if own:
        sentence += ("; the program's own OS calls take " + " and ".join(
            f"{duration(o.own_ns)} in `{o.name}` ({count(o.own_calls, 'call')}, "
            f"{small_share(share(o.own_ns, host_ns))} of the run)" for o in own))
    if best_saving_ns:
        sentence += (f"; the best fix inside the GPU window saves at most {duration(best_saving_ns)}, "
                     f"{small_share(share(best_saving_ns, host_ns))} of the run")
    sampled = "cpu_sampling" in f.overview.coverage.recorded
    host = ("speed up the host side: see what the CPU does before, between and after the GPU work ("
           + ("`dashcam ask \"what is the CPU doing?\"`" if sampled else
              "capture CPU samples with `nsys profile --sample=cpu`")
           + "); for the GPU to matter, give it more of the work (a larger problem, more of the loop on the GPU).")
    if own:
        host = host.replace("speed up the host side: ", f"speed up the host side, starting with `{own[0].name}`; "
                                                        "then ", 1)
    tip = host[0].upper() + host[1:]
    figures = {"window_ns": f.window_ns, "process_span_ns": host_ns, "gpu_share_of_run_pct": pct,
               "best_window_saving_ns": best_saving_ns}
    if own:
        figures.update(os_call=own[0].name, os_call_ns=own[0].own_ns)
    if context_pct >= CONTEXT_MAJOR_RUN_PCT:  # CUDA's own start-up is what the run costs
        tip = f"{advice.context_start()} For the rest, {host}"
        figures.update(context_call=span.init_call, context_ns=span.init_ns, context_share_of_run_pct=context_pct)
    # the engine's own figures (the shares of the run), evidence as the savings are (findings/impact.py)
    ev = f.runs.record(Evidence(tool=IMPACT, args={}, result={
        "finding": "gpu_minor", **figures, "best_saving_of_run_pct": share(best_saving_ns, host_ns),
        **({"own_os_call_share_of_run_pct": {o.name: share(o.own_ns, host_ns) for o in own}} if own else {})}))
    evidence = [f.ev("workload"), f.ev("overview"), *([f.ev("os_runtime")] if own else []), ev]
    return Item("gpu_minor", None, "info", None, figures, evidence,
                f"The GPU is a small part of the run: {duration(f.window_ns)} of {duration(host_ns)}",
                sentence + ".", tip)

