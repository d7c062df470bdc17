"""A question naming one of this profile's entities gets that entity's analysis, whatever its other words say.

The entities are matched against the profile (targets.py: kernel short and demangled names, NVTX label groups,
CUDA API functions), never a word list. When the question names one and the classifier chose an intent that
would answer something else in its place — the health summary, the profile overview, a feature its words name
("broadcast", "FSDP" -> NCCL), the whole-GPU views (small kernels, GPU metrics, comparing GPUs) — the entity's
own intent answers instead: top_kernels for a kernel (with its analysis, answers/entity.py), nvtx for a range,
api for a function, cpu for an OS runtime function ("pwrite64", "the read calls"), streams for a stream
("stream 7"). Intents that answer about the entity in their own
terms (launch, idle, memcpy, sync, ...) keep the question.
"""
from __future__ import annotations

import re

from .models import Targets
from .targets import profile_names

# Intents that answer about the whole profile or another subject: a named entity takes the question from them.
TAKEN_FROM = frozenset({"unknown", "healthy", "slow", "overview", "nccl", "small_kernels", "gpu_metrics",
                        "compare_gpus", "streams"})


# A named kernel's launch shape, not the cost of launching it
LAUNCH_SHAPE = re.compile(r"\bconfig(?:uration)?s?\b|\bgrid|\bblocks?\b|\bthreads? per block|\bblock ?size", re.I)
COMMS = re.compile(r"communicat|\bcomms?\b|collective|all[-_ ]?reduce|all[-_ ]?gather|reduce[-_ ]?scatter|通信",
                   re.I)


def entity_intent(intent: str, targets: Targets, profile, question: str = "") -> str:
    """``intent``, or the intent of the entity the question names (module docstring)."""
    if intent == "launch" and targets.kernel and LAUNCH_SHAPE.search(question):
        return "top_kernels"  # "kernel launch config for cupy_subtract": its grid and block (answers/entity.py)
    if intent not in TAKEN_FROM:
        return intent
    names = profile_names(profile)
    kernel = targets.kernel
    if kernel and names.kernel_has(kernel) and not (intent == "nccl" and "nccl" in kernel.lower()):
        if intent == "compare_gpus" and len(names.devices) > 1:
            return intent
        return "top_kernels"
    if kernel and intent == "nccl" and "nccl" not in kernel.lower():  # a kernel the profile lacks, not NCCL
        return "top_kernels"
    if targets.nvtx and names.label_form(targets.nvtx) and (
            intent in ("unknown", "healthy", "slow", "overview")
            or (intent == "nccl" and "nccl" not in targets.nvtx.lower() and not COMMS.search(question))):
        return "nvtx"  # "time in FSDP?": its FSDP:: ranges; "FSDP's communication?" stays NCCL
    if targets.api and names.api_spelling(targets.api) in names.apis and intent in ("unknown", "overview"):
        return "api"
    if targets.osrt and intent in ("unknown", "healthy", "slow", "overview"):
        return "cpu"  # "how long does pwrite64 take?": the OS runtime function's calls (answers/cpu.py)
    if targets.streams and intent in ("unknown", "healthy", "slow", "overview", "small_kernels"):
        return "streams"  # "is stream 7 busy?", "what does stream 13 do?": that stream's figures
    return intent
