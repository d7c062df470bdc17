"""The copy remedies as data: each declares what it would save, what shows it is already done, and its words per
programming model. ``copies(f, gpu)`` offers the one that saves the most among those not yet applied, says the
applied ones as done, and falls back to moving less data when pinning and overlapping have nothing left to give.

| remedy   | saves (memcpy fields of the GPU)                         | already done when (practices.py)          |
|----------|----------------------------------------------------------|-------------------------------------------|
| pin      | ``pin_saving_ns``: pageable copies at the link's pinned rate | pinned, or at_link_peak                |
| overlap  | ``overlap_saving_ns``: exposed copy time, bounded by the kernel time no copy overlaps | overlapped |
| resident | ``exposed_copy_ns`` at most: copies that need not happen  | resident (then: move fewer bytes)          |

``resident`` applies to round trips only (copies back of at least ROUND_TRIP_MIN_PCT of the bytes copied in, or any
OpenACC / OpenMP offload program that copies per step): an input stream cannot stay on the GPU. Once pinning is done
(or the copies run at the link's peak), the remedy offered ends with "beyond that, only moving less data shortens
the copies themselves".

A remedy saving under LOW_LOSS_PCT of the window is not offered. The time the chosen one saves is returned with
its text, so the finding states that saving (findings/impact.py).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from dashcam.findings import practices
from dashcam.findings.thresholds import LOW_LOSS_PCT
from dashcam.text.format import duration

PYTHONIC = ("pytorch", "jax", "tensorflow", "cupy", "numba", "python")


def by_family(family: str | None, options: dict[str, str]) -> str:
    """The wording for ``family``: its own, else the Python one for Python families, else the default."""
    if family in options:
        return options[family]
    if family in PYTHONIC and "python" in options:
        return options["python"]
    return options["default"]


# nvc++ -stdpar code has no streams or explicit copies of its own: its data lives in managed memory.
STDPAR = ("keep the data on the GPU between the parallel algorithms: no host reads or writes of the vectors between "
          "them (each one migrates the managed pages back), and prefetch them to the GPU before the loop "
          "(`cudaMemPrefetchAsync` on the managed allocation)")
PIN = {
    "pytorch": "copy from pinned memory (`pin_memory=True` in the DataLoader, or `.pin_memory()`), so each copy runs "
               "at the link's speed",
    "cupy": "copy from pinned host memory (`cupyx.empty_pinned`), so each copy runs at the link's speed",
    "julia": "pin the host arrays (`CUDA.pin`), so each copy runs at the link's speed",
    "openacc": "allocate host arrays pinned (`-gpu=pinned` with nvc/nvfortran), so each copy runs at the link's speed",
    "openmp_offload": "allocate host arrays pinned (`-gpu=pinned` with nvc, or `cudaHostRegister` on the host "
                      "buffers), so each copy runs at the link's speed",
    "stdpar": STDPAR,
    "default": "copy from pinned host memory (`cudaMallocHost` or `cudaHostRegister` on the buffers), so each copy "
               "runs at the link's speed",
}
OVERLAP = {
    "pytorch": "overlap the copies with compute: pinned memory and `.to(device, non_blocking=True)` on a side "
               "`torch.cuda.Stream`, so the next batch copies while this one computes",
    "jax": "overlap the copies with compute: `jax.device_put` the next batch while this step runs (prefetch)",
    "cupy": "overlap the copies with compute: copy the next chunk on its own `cupy.cuda.Stream(non_blocking=True)`",
    "julia": "overlap the copies with compute: copy the next chunk on another task (each task has its own stream)",
    "openacc": "overlap the copies with compute: put the `update`/`data` transfers and the compute regions on `async` "
               "queues, in chunks, and `wait` only where the data is needed",
    "openmp_offload": "overlap the copies with compute: `target update ... nowait` with `depend` clauses, in chunks, "
                      "so transfers of one chunk run under the kernels of another",
    "default": "overlap the copies with compute: `cudaMemcpyAsync` on a second stream from pinned memory, in chunks "
               "(double buffering), so one chunk copies while the kernels work on the other",
    "stdpar": STDPAR,
    # the copies are asynchronous already, on the kernels' stream or waited for
    "async": "overlap the copies with compute: give them a stream of their own and split them in chunks (double "
             "buffering), so one chunk copies while the kernels work on the other",
}
RESIDENT = {
    "pytorch": "move less data: keep tensors on the GPU between steps (no `.cpu()`/`.item()` round trips) and copy "
               "only what changes",
    "openacc": "move less data: keep the arrays on the GPU across the time steps with a data region (`!$acc data` / "
               "`#pragma acc data`) and `update` only what changes",
    "openmp_offload": "move less data: keep the arrays on the GPU across the time steps (`#pragma omp target data "
                      "map(...)` or `target enter data`) and `target update` only what changes",
    "julia": "move less data: keep the arrays on the GPU (`CuArray`) across the loop and copy back only results",
    "stdpar": "move less data: " + STDPAR,
    "default": "move less data: keep the arrays on the GPU between steps and transfer only what changes",
}
FEWER_BYTES = ("only moving less data shortens the copies themselves: copy only what the GPU needs, in a compact form "
               "(lower precision, packed data), or generate it on the GPU")
# Copies back to the host of at least this share of the bytes copied to the device: the same arrays go back and
# forth (a round trip per step), which keeping them on the GPU removes; an input stream (HtoD only) it does not.
ROUND_TRIP_MIN_PCT = 25.0


@dataclass(frozen=True)
class Remedy:
    key: str
    saving: Callable  # (memcpy device row) -> ns it would save at most (None: unknown)
    done: tuple[Callable, ...]  # practices that show it is applied (each (f, gpu) -> sentence | None)
    words: dict[str, str]
    needs: Callable = lambda f, d: True  # whether it can apply at all (pinning needs pageable copies)
    also: tuple[Callable, ...] = ()  # practices said with it when it is done (the copies are asynchronous already)


CATALOGUE = (
    Remedy("pin", lambda d: d.pin_saving_ns if d.host_link_gbps else None, (practices.pinned, practices.at_link_peak),
           PIN),
    # from pageable memory an "asynchronous" copy is staged and blocks: overlapping includes pinning, and saves both
    # with the arrays resident the copies left are the first load and the result: nothing to hide them under
    Remedy("overlap", lambda d: min(d.exposed_copy_ns, d.overlap_saving_ns + d.pin_saving_ns),
           (practices.overlapped,), OVERLAP, needs=lambda f, d: practices.resident(f, d.device_id) is None,
           also=(practices.async_copies,)),
    Remedy("resident", lambda d: d.exposed_copy_ns, (practices.resident,), RESIDENT,
           needs=lambda f, d: round_trip(f, d)),
)


def round_trip(f, d) -> bool:
    """``d``'s copies go back and forth: DtoH bytes at least ROUND_TRIP_MIN_PCT of HtoD bytes, or offload code."""
    back = 100.0 * d.dtoh_bytes >= ROUND_TRIP_MIN_PCT * max(d.htod_bytes, 1)
    return f.family in ("openacc", "openmp_offload", "stdpar") or back


def copies(f, gpu: int | None = None) -> tuple[str, int | None]:
    """(the copy remedy to try first, in the program's words and with what is already done said first; the time it
    saves at most, or None when unknown) for ``gpu``'s copies (default: the GPU with the most host copies)."""
    d = practices.copy_row(f, gpu)
    if d is None:
        return _cap(RESIDENT["default"]) + ".", None
    floor = LOW_LOSS_PCT * f.window_ns / 100.0
    done: list[str] = []
    offer: list[tuple[int, Remedy]] = []
    small: list[tuple[int, Remedy]] = []  # remedies that apply but save less than the floor
    for r in CATALOGUE:
        if not r.needs(f, d):
            continue
        applied = [s for check in r.done if (s := check(f, d.device_id))]
        if r.key == "pin" and len(applied) == 2:  # "all 10 host copies ... are already pinned and run at 24 GB/s"
            applied = [applied[0] + " and " + practices.at_link_peak(f, d.device_id, subject=False)]
        if applied:
            applied = [s for check in r.also if (s := check(f, d.device_id))] + applied
            done += [s for s in applied if s not in done]
            continue
        saves = r.saving(d)
        if saves is None or saves >= floor:
            offer.append((saves if saves is not None else 0, r))
        elif saves > 0:
            small.append((saves, r))
    head = practices.said(done)
    if offer:
        saves, r = max(offer, key=lambda x: x[0])  # ties: catalogue order (max keeps the first)
        family = "async" if r.key == "overlap" and practices.async_copies(f, d.device_id) else f.family
        text = by_family(family, r.words)
        if r.key != "resident" and (practices.at_link_peak(f, d.device_id) or practices.pinned(f, d.device_id)):
            text += "; beyond that, " + FEWER_BYTES
        return (f"{head}; {text}." if head else _cap(text) + "."), (saves or None)
    if small and not head:  # pinning would help the copies, but they are too small a part of the run to matter
        saves, r = max(small, key=lambda x: x[0])
        return (f"The copies are too small a part of the run to be worth fixing: {SMALL_WORDS[r.key]} would save at "
                f"most {duration(saves)} of the {duration(f.window_ns)} window."), None
    return (f"{head}: {FEWER_BYTES}." if head else _cap(FEWER_BYTES) + "."), d.exposed_copy_ns or None


# A remedy in a few words, for one that saves too little to offer (copies)
SMALL_WORDS = {"pin": "copying from pinned memory", "overlap": "overlapping the copies with compute",
               "resident": "keeping the data on the GPU"}


def _cap(s: str) -> str:
    return s[0].upper() + s[1:]
