"""Planted programs for step detection and kernel names (tests/test_steps_and_names.py): steps found where there
are none and missed where there are, and template wrappers that hide their kernels. One GPU (device 0, H100,
132 SMs), one process (pid 100, thread 100) unless stated; every kernel is launched by a 5 us
``cudaLaunchKernel`` call 10 us before it starts. Each program's docstring states its figures, by construction.
"""
from __future__ import annotations

from pathlib import Path

from dashcam.testing.builder import ExportBuilder
from dashcam.testing.workloads import NVTX_DOMAIN_CREATE

MS, US = 1_000_000, 1_000
H100 = "NVIDIA H100 80GB HBM3"
LAYERS = 16
WRAPPER = ("void clover::par_ranged2d_kernel<{f}(int, int, int, int, clover::Buffer2D<double> &)::"
           "[lambda(int, int) (instance 1)]>(clover::Range2d, T1)")
WRAPPED = (("PdV_kernel", 500 * US), ("accelerate_kernel", 300 * US), ("viscosity_kernel", 200 * US))


def _builder() -> ExportBuilder:
    b = ExportBuilder("2024")
    b.gpu(0, H100, 132)
    b.process(100, "trt_infer")
    return b


def _launch(b: ExportBuilder, start: int, dur: int, name: str, tid: int = 100, short: str | None = None) -> None:
    """A kernel [start, start + dur) launched by a 5 us call 10 us before it starts."""
    corr = b.api("cudaLaunchKernel", start - 10 * US, start - 5 * US, tid=tid)
    b.kernel(0, start, start + dur, name=name, corr=corr, short=short)


def _inference(b: ExportBuilder, t: int) -> None:
    """One ``inference`` range [t, t + 2 ms) with its 16 ``Identity_<i>`` layers, one kernel each."""
    b.nvtx("inference", t, t + 2 * MS)
    for i in range(LAYERS):
        s = t + 200 * US + i * 100 * US
        b.nvtx(f"Identity_{i}", s, s + 100 * US)
        _launch(b, s + 10 * US, 80 * US, f"trt_identity_{i}")


def trt_layers(path: str | Path) -> Path:
    """A TensorRT inference loop: 5 steps, the inference ranges, not the layers.

    5 ``inference`` ranges of 2 ms every 10 ms from 1 ms (covering a fifth of their span: not back-to-back),
    each holding 16 layer ranges ``Identity_0`` .. ``Identity_15`` of 100 us from its start + 200 us, each
    layer running its own kernel ``trt_identity_<i>`` (80 us from the layer's start + 10 us).
    - iterations: method nvtx, label ``inference``, 5 steps starting at 1, 11, 21, 31, 41 ms, median 2 ms
      (not the 80 layer ranges).
    """
    b = _builder()
    for k in range(5):
        _inference(b, 1 * MS + k * 10 * MS)
    return b.write(path)


def trt_one_inference(path: str | Path) -> Path:
    """One inference of 16 layers: no steps (the layers are its layers, not 16 steps).

    One ``inference`` range [1, 3) ms holding the 16 layers of ``trt_layers`` (one kernel each, 16 names).
    - iterations: method none, 0 steps (one enclosing instance: its 16 layers are not 16 steps).
    """
    b = _builder()
    _inference(b, 1 * MS)
    return b.write(path)


def library_nvtx(path: str | Path) -> Path:
    """Only library-internal NVTX: no steps.

    6 ``isResharding`` ranges (nvFuser's internals) of 1 ms back-to-back from 1 ms on thread 100, and 6
    ``getKernelArgument`` ranges of 1 ms back-to-back from 1 ms on thread 101, and 6 ``conv_fwd`` ranges of
    1 ms back-to-back from 1 ms on thread 102 in NVTX domain 1, ``cuDNN``; kernels ``fusion_a`` [1.1, 1.5)
    ms, ``fusion_b`` [3.1, 3.5) ms, ``fusion_c`` [4.1, 4.5) ms launched from thread 100. The window (GPU
    activity) is [1.1, 4.5) ms: 4 ranges of each overlap it.
    - iterations: method none, 0 steps; with ``label='isResharding'`` the 4 ranges in the window, median 1 ms.
    """
    b = _builder()
    b.thread(100, 101, "worker")
    b.nvtx("cuDNN", 0, None, tid=102, event_type=NVTX_DOMAIN_CREATE, domain=1)
    for i in range(6):
        b.nvtx("isResharding", 1 * MS + i * MS, 2 * MS + i * MS)
        b.nvtx("getKernelArgument", 1 * MS + i * MS, 2 * MS + i * MS, tid=101)
        b.nvtx("conv_fwd", 1 * MS + i * MS, 2 * MS + i * MS, tid=102, domain=1)
    for name, at in (("fusion_a", 1100), ("fusion_b", 3100), ("fusion_c", 4100)):
        _launch(b, at * US, 400 * US, name)
    return b.write(path)


def for_each_calls(path: str | Path) -> Path:
    """Three different for_each calls: no steps (one generic name, different GPU work).

    Three ``for_each`` ranges of 1 ms back-to-back from 1 ms, each launching a different kernel
    (``fill_kernel``, ``scale_kernel``, ``sum_kernel``, 500 us from the range's start + 100 us).
    - iterations: method none, 0 steps.
    """
    b = _builder()
    for i, name in enumerate(("fill_kernel", "scale_kernel", "sum_kernel")):
        t = 1 * MS + i * MS
        b.nvtx("for_each", t, t + MS)
        _launch(b, t + 100 * US, 500 * US, name)
    return b.write(path)


def steady_loop(path: str | Path) -> Path:
    """A 50-iteration loop of one kernel at a steady period: 50 steps.

    No NVTX; one kernel ``stencil_kernel`` launched 50 times, 150 us every 200 us from 1 ms.
    - iterations: method kernel_pattern, ``stencil_kernel``, 1 launch a step, 50 steps from 1 ms to
      10.8 ms, period 200 us, every step 200 us.
    """
    b = _builder()
    for i in range(50):
        _launch(b, 1 * MS + i * 200 * US, 150 * US, "stencil_kernel")
    return b.write(path)


def wrapper_templates(path: str | Path) -> Path:
    """One wrapper template with three functor instantiations of 50/30/20 % of kernel time.

    CloverLeaf's ``clover::par_ranged2d_kernel<F>`` with three lambda instantiations, each launched 10 times
    (one every 600 us from 1 ms, PdV_kernel's first, then accelerate_kernel's, then viscosity_kernel's):
    ``PdV_kernel``'s lambda 500 us a launch (5 ms, 50 %), ``accelerate_kernel``'s 300 us (3 ms, 30 %),
    ``viscosity_kernel``'s 200 us (2 ms, 20 %); 10 ms of kernel time. The export's shortName is
    ``par_ranged2d_kernel`` for all three, as nsys writes it.
    - top_kernels: ``par_ranged2d_kernel<PdV_kernel>`` 50 %, ``par_ranged2d_kernel<accelerate_kernel>`` 30 %,
      ``par_ranged2d_kernel<viscosity_kernel>`` 20 %; the top family is the first, 50 %, its top kernel 50 %.
    """
    b = _builder()
    t = 1 * MS
    for f, dur in WRAPPED:
        for _ in range(10):
            _launch(b, t, dur, WRAPPER.format(f=f), short="par_ranged2d_kernel")
            t += 600 * US
    return b.write(path)


STEPS_PROGRAMS = {"trt_layers": trt_layers, "trt_one_inference": trt_one_inference, "library_nvtx": library_nvtx,
                  "for_each_calls": for_each_calls, "steady_loop": steady_loop,
                  "wrapper_templates": wrapper_templates}
