"""The offline planner's answers: one function per intent, each writing its answer from tool results.

Each takes a ``Ctx`` (context.py: the profile, the question's targets, the one tool-run memo) and
returns the text. Every number written comes from a tool result, only reformatted (text/format.py);
comparisons that decide a wording are made on the numbers but never printed. Diagnoses (is it
healthy, why is it slow, what to fix first) and every remedy come from the findings engine, so an
answer and ``dashcam summary`` never disagree.
"""
from __future__ import annotations

from .context import Ctx, StepNotFound
from .copies import memcpy
from .health import health
from .idle import idle
from .kernels import small_kernels, streams, top_kernels
from .launch import launch
from .nccl import nccl
from .nvtx import nvtx
from .overview import EXAMPLE_QUESTIONS, compare_gpus, missing_gpu, overview, unknown
from .steps import iterations
from .sync import sync

TEMPLATES = {
    "idle": idle, "slow": health, "top_kernels": top_kernels, "memcpy": memcpy, "launch": launch, "sync": sync,
    "nccl": nccl, "nvtx": nvtx, "iterations": iterations, "small_kernels": small_kernels, "streams": streams,
    "healthy": health, "compare_gpus": compare_gpus, "overview": overview, "unknown": unknown,
}

__all__ = ["Ctx", "EXAMPLE_QUESTIONS", "StepNotFound", "TEMPLATES", "missing_gpu"]
