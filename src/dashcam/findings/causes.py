"""How the gap causes are said, in the workload's terms (profile/gap_causes.py defines them).

``words(cause, family)`` is the short gloss ("inside other CUDA API calls"), ``phrase(cause, family)``
what the GPU was waiting for ("waiting on the CPU, which is inside other CUDA API calls"). ``cpu_work``
is host code outside CUDA calls: Python for Python programs, Julia for Julia, plain host code
otherwise; never "data loading" unless the capture shows it (an NVTX range of kind ``data``). ``dependency`` is said
by the part of it that leads (``dependency_phrase``: launch-to-start latency, real waits, turnaround).
"""
from __future__ import annotations

from dashcam.profile.gap_causes import CPU_SIDE, DEVICE_SIDE
from dashcam.tools.workload import FAMILIES

_CPU_WORK = {
    "python": "busy in Python outside CUDA calls",
    "pytorch": "busy in Python and PyTorch outside CUDA calls",
    "julia": "busy in Julia code outside CUDA calls",
    "default": "busy in host code outside CUDA calls",
}
_WORDS = {
    "sync_wait": "blocked in synchronize calls",
    "cuda_api": "inside other CUDA API calls",
    "launch_overhead": "inside the kernel launch calls themselves",
    "memcpy": "queued behind copies on the device",
    "dependency": "waiting on a dependency (an event, another stream or GPU)",
    "transfer": "copying or migrating memory on the device (no launch call in the capture for the kernel after)",
    "unknown": "unattributed (no launch call in the capture)",
}
_PHRASES = {
    "sync_wait": "waiting on the CPU, which is blocked in synchronize calls",
    "cuda_api": "waiting on the CPU, which is inside other CUDA API calls",
    "launch_overhead": "waiting on the CPU to launch its kernels (launch overhead)",
    "memcpy": "waiting on copies queued ahead of its kernels",
    "dependency": "waiting on dependencies (events, other streams or GPUs)",
    "transfer": "copying or migrating memory instead of running kernels (the kernels after have no launch call "
                "in the capture)",
    "unknown": "for reasons the capture does not show (no launch call for the kernels after the gaps)",
}
# The parts of `dependency` (profile/gap_dependency.py), said the same way.
_PARTS = {
    "launch_latency": "waiting for its kernels to start after their launch",
    "wait": "waiting on dependencies (events, other streams or GPUs)",
    "turnaround": "in the turnaround between back-to-back kernels, not waiting on anything",
}
_PART_WORDS = {"launch_latency": "the device empty after each launch", "wait": _WORDS["dependency"],
               "turnaround": "between back-to-back kernels"}
PART_NAMES = {"launch_latency": "launch-to-start latency", "wait": "real waits",
              "turnaround": "back-to-back turnaround"}
# What an NVTX range of each kind is, after "inside" ("47.5 ms of it inside MPI calls").
KIND_WORDS = {"jit": "JIT-compile ranges", "mpi": "MPI calls", "nccl": "NCCL calls", "data": "data-loading ranges",
              "framework": "framework ops"}


def _cpu_work(family: str | None) -> str:
    """By the family's language (tools/workload.py FAMILIES): Python words only for a Python program."""
    language = FAMILIES[family][1] if family in FAMILIES else None
    if family == "pytorch":
        return _CPU_WORK["pytorch"]
    return _CPU_WORK.get(language or "default", _CPU_WORK["default"])


def words(cause: str, family: str | None = None) -> str:
    """Short gloss of a cause ("blocked in synchronize calls")."""
    return _cpu_work(family) if cause == "cpu_work" else _WORDS[cause]


def phrase(cause: str, family: str | None = None) -> str:
    """What the GPU waited for ("waiting on the CPU, which is blocked in synchronize calls")."""
    return f"waiting on the CPU, which is {_cpu_work(family)}" if cause == "cpu_work" else _PHRASES[cause]


def dependency_phrase(part: str) -> str:
    """What a GPU whose `dependency` time is mostly ``part`` (launch_latency, wait, turnaround) waited for."""
    return _PARTS[part]


def dependency_words(part: str) -> str:
    """The short gloss of `dependency` time that is mostly ``part`` ("the device empty after each launch")."""
    return _PART_WORDS[part]


def side(cause: str) -> str:
    if cause == "transfer":
        return "copying or migrating memory on the device"
    return ("waiting on the CPU" if cause in CPU_SIDE else "waiting on the device" if cause in DEVICE_SIDE
            else "for reasons the capture does not show")
