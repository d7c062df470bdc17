"""Remedies about the capture: start-up before and in the window, and "capture more" only when there is more
to capture."""
from __future__ import annotations

import re

from dashcam.findings.advice.wording import by_family
from dashcam.findings.thresholds import (
    PRE_WINDOW_CALL_NOTABLE_MS,
)
from dashcam.profile.capture_span import INIT_API
from dashcam.text.format import duration, name

# What shortens CUDA's own start-up (the context creation in the first CUDA call), said once.
CONTEXT_REMEDY = ("keep the driver loaded between runs (persistence mode: `nvidia-smi -pm 1` or the "
                  "`nvidia-persistenced` daemon) and expose only the GPUs the run uses (`CUDA_VISIBLE_DEVICES`)")


def context_start() -> str:
    """The remedy when creating the CUDA context is most of a whole-process run."""
    return (f"CUDA's start-up is most of the run, paid once per process: {CONTEXT_REMEDY}; beyond that, only more "
            "work per process makes it a smaller share.")


def pre_window_call(f) -> tuple[str, int, bool] | None:
    """The longest CUDA call before the GPU window (capture span: init_call), as (name, ns, it created the CUDA
    context), when it takes at least PRE_WINDOW_CALL_NOTABLE_MS: start-up the window does not hold. Not for a
    --start/--end window."""
    span = f.workload.span
    if f.windowed or not span.init_call or span.init_ns < PRE_WINDOW_CALL_NOTABLE_MS * 1_000_000:
        return None
    return span.init_call, span.init_ns, span.creates_context


def pre_window_words(call: tuple) -> str:
    """ "`cudaFree` took 273 ms before the first GPU work (CUDA creates its context in the first calls)"."""
    api, ns = call[0], call[1]
    creates = len(call) > 2 and call[2]
    why = " (CUDA creates its context in the first calls)" if creates or re.match(
        INIT_API + r"|^(cudaMalloc|cuMemAlloc)", api) else ""
    return f"{name(api)} took {duration(ns)} before the first GPU work{why}"


def startup(f) -> str:
    """A cold start: capture the steady state (unless the capture already spans the whole process: then start-up
    is part of what the run costs); then what makes start-up cheaper, by what dominates it."""
    wl = f.workload
    if wl.jit_ns >= wl.module_load_ns + wl.first_launch_ns and wl.span.whole_process:
        # compiling is paid once per process (and input shape): a run this short pays it in full
        extra = by_family(f.family, {
            "pytorch": " Compiling (nvFuser, Triton, `torch.compile`) is paid once per process and input shape, and "
                       "a run this short pays it in full: warm up first (call each compiled function once with the "
                       "shapes it will see) and measure or capture only what follows (`torch.cuda.profiler.start()`/"
                       "`stop()` with `nsys profile --capture-range=cudaProfilerApi`); keep shapes static so "
                       "nothing recompiles.",
            "julia": " The first call of each function compiles, once per process, and a run this short pays it in "
                     "full: call it once before the part you measure, and capture only that part "
                     "(`nsys profile --capture-range=cudaProfilerApi`).",
            "jax": " jit compiles once per process and input shape, and a run this short pays it in full: warm up "
                   "with the shapes the run uses and capture only what follows (`nsys profile "
                   "--capture-range=cudaProfilerApi`).",
            "default": " Kernels compiled at run time (NVRTC) are compiled again in every process: compile once and "
                       "keep the module (cache the cubin), or compile ahead of time for the GPU's architecture.",
        })
    elif wl.jit_ns >= wl.module_load_ns + wl.first_launch_ns:
        extra = by_family(f.family, {
            "pytorch": " Compiling (nvFuser, Triton, `torch.compile`) is paid once per process and input shape: "
                       "keep shapes static so nothing recompiles inside the loop.",
            "julia": " The first call of each function compiles: run it once before the profiled part.",
            "jax": " jit compiles each new shape once: warm up with the shapes the run uses.",
            "default": " Kernels compiled at run time (NVRTC) can be cached: compile once and keep the module.",
        })
    elif wl.span.whole_process:  # a short run pays each module's load in full: loading it eagerly only moves it
        from dashcam.findings.advice.kernels import gpu_model  # kernels.py imports this module

        model = gpu_model(f)
        arch = f" (`-arch=sm_{model.compute[0]}{model.compute[1]}` for the {model.name})" if model else ""
        lazy = (" CUDA loads each kernel's module on its first launch (lazy loading), once per process, and a run "
                "this short pays it in full")
        extra = lazy + by_family(f.family, {
            "python": ": the framework's modules are prebuilt, so only a longer run (more steps per process) "
                      "makes it a smaller share; `CUDA_MODULE_LOADING=EAGER` would only move the cost to start-up.",
            "default": ": build only for the GPU's architecture" + arch + ", so no PTX is JIT-compiled and the binary "
                       "holds less to load; `CUDA_MODULE_LOADING=EAGER` would only move the cost to start-up.",
        })
    else:
        extra = (" CUDA loads a kernel's module on its first launch (lazy loading), once: set "
                 "`CUDA_MODULE_LOADING=EAGER` to load at start-up instead, and build for the GPU's architecture so "
                 "no PTX is JIT-compiled.")
    early = pre_window_call(f)
    if early:
        extra += f" For the {duration(early[1])} {name(early[0])} before the first GPU work: {CONTEXT_REMEDY}."
    if wl.span.whole_process:
        return "The capture spans the whole process, so start-up is part of what the run costs." + extra
    return ("Profile the steady state, not the start-up: warm up first, then capture a window of the loop "
            "(`cudaProfilerStart`/`Stop` with `nsys profile --capture-range=cudaProfilerApi`, or `--delay`)." + extra)


def more_capture(f) -> str:
    """Too little GPU work: capture more of the run, unless the capture already spans the whole process (then
    the run itself has little GPU work: give it more)."""
    if f.workload.span.whole_process:
        return ("The capture already spans the whole process, from CUDA's start to its exit, so a longer capture "
                "holds no more GPU work: give the run more of it (a larger problem or more iterations) to diagnose "
                "a steady state.")
    if f.workload.span.profiler_range:  # the program sets its capture range already: widen that range
        return ("Capture more of the run: the program's own capture range (`cudaProfilerStart`/`Stop`) holds too "
                "little of it; move the calls so the range holds several iterations of the steady-state loop, so "
                "there are enough kernels for a verdict.")
    return ("Capture more of the run: a longer window around the steady-state loop (`nsys profile --duration`, "
            "`--capture-range`), so there are enough kernels for a verdict.")
