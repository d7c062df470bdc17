"""Scope checks of the model's tool calls, against the profile and against the question's targets.

A call that is off gets a clear error back (the model then has its next turn to call again):
- a GPU the profile lacks;
- a window outside the profile (``start_ms``/``end_ms`` are ms from the start of GPU activity: an end
  past the window's end, a negative start, a start not before the end) — the tools would clamp it
  silently and the reproduce command would show the wrong window;
- a question that names no GPU, on a profile with several, answered from one GPU: a call with ``gpu=N``
  before any call of the whole profile is refused, so the answer starts from every GPU.
The other half of the targets — every GPU the question names gets a tool result of its own — is
checked on the answer (``unasked_gpus``; the loop asks for the missing calls once).
"""
from __future__ import annotations

from dashcam.errors import DashcamError

from .models import Targets

WINDOW_SLACK_MS = 0.001  # an end written with the window's length rounded to the µs is inside it


def _window_ms(profile) -> float | None:
    try:
        return profile.window().length_ns / 1e6
    except (DashcamError, AttributeError):
        return None


def call_scope_error(name: str, args: dict, profile, targets: Targets, whole_profile_seen: bool) -> str | None:
    """The error to send back for a call whose scope is off, or None (module docstring)."""
    devices = list(getattr(profile, "devices", []) or [])
    gpu = args.get("gpu")
    if isinstance(gpu, int) and devices and gpu not in devices:
        return (f"GPU {gpu} is not in this profile (GPUs with activity: {', '.join(map(str, devices))}); "
                "call again with one of them, or without gpu for all")
    length = _window_ms(profile)
    start, end = args.get("start_ms"), args.get("end_ms")
    if length is not None:
        span = f"0 to {length:.3f} ms from the start of GPU activity"
        if isinstance(start, (int, float)) and start < 0:
            return f"start_ms {start:g} is before the window ({span}); times are ms from its start"
        if isinstance(end, (int, float)) and end > length + WINDOW_SLACK_MS:
            return (f"end_ms {end:g} is past the end of the window ({span}); pass ms inside it, or leave "
                    "end_ms out for the end")
        if isinstance(start, (int, float)) and start >= length:
            return f"start_ms {start:g} is past the end of the window ({span})"
    if isinstance(start, (int, float)) and isinstance(end, (int, float)) and start >= end:
        return f"start_ms {start:g} is not before end_ms {end:g}"
    if (isinstance(gpu, int) and len(devices) > 1 and not targets.gpus and not whole_profile_seen
            and not targets.ranks):
        return (f"the question names no GPU and this profile has {len(devices)} ({', '.join(map(str, devices))}): "
                f"call {name} without gpu first to see all of them, then look at one")
    return None


def unasked_gpus(targets: Targets, covered: set[int], profile) -> list[int]:
    """GPUs the question names (and the profile has) that no tool result is about."""
    devices = set(getattr(profile, "devices", []) or [])
    return [g for g in targets.gpus if g in devices and g not in covered]
