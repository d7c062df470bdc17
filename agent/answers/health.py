"""Is it healthy? Why is it slow? What should I fix first? — the findings engine's diagnosis.

These questions get the same paragraph as ``dashcam summary`` (findings.diagnose): the same verdict,
GPU and first remedy, on the asked GPU and window when the question names one.
"""
from __future__ import annotations

from dashcam.findings import diagnose

from .context import Ctx


def health(ctx: Ctx) -> str:
    gpu = ctx.targets.gpus[0] if len(set(ctx.targets.gpus)) == 1 else None
    d = diagnose(ctx.profile, ctx.runs, gpu=gpu, **ctx.win)
    for n in d.notes:
        ctx.note(n)
    return d.paragraph
