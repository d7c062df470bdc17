"""Planted programs for step detection and kernel names (tests/test_steps_and_names.py): steps found where there
are none and missed where there are, and template wrappers that hide their kernels. One GPU (device 0, H100,
132 SMs), one process (pid 100, thread 100) unless stated; every kernel is launched by a 5 us
``cudaLaunchKernel`` call 10 us before it starts. Each program's docstring states its figures, by construction.
"""
from __future__ import annotations

from pathlib import Path

from dashcam.testing.builder import ExportBuilder

MS, US = 1_000_000, 1_000
H100 = "NVIDIA H100 80GB HBM3"
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


STEPS_PROGRAMS = {"wrapper_templates": wrapper_templates}
