"""The offline planner's answers: one function per intent, each writing its answer from tool results.

Which function answers which intent is the intent table's ``answer`` (agent/intent_table.py).
Each takes a ``Ctx`` (context.py: the profile, the question's targets, the one tool-run memo) and
returns the text. Every number written comes from a tool result, only reformatted (text/format.py);
comparisons that decide a wording are made on the numbers but never printed. Diagnoses (is it
healthy, why is it slow, what to fix first) and every remedy come from the findings engine, so an
answer and ``dashcam summary`` never disagree.
"""
from __future__ import annotations

import importlib

from ..intent_table import INTENTS
from .context import Ctx, StepNotFound
from .overview import EXAMPLE_QUESTIONS, missing_gpu, unknown


def _answer(spec: str):
    """ "module:function" of an intent table entry -> the answer function in this package."""
    module, _, fn = spec.partition(":")
    return getattr(importlib.import_module(f"{__name__}.{module}"), fn)


class _Templates(dict):
    """intent -> its answer function: the intent table's ``answer`` (intent_table.py), and ``unknown`` (the
    fallback for questions it cannot place). Each module is imported when its intent is first answered, so
    one `dashcam ask` loads only the answers (and tools) it uses."""

    def __getitem__(self, intent: str):
        value = super().__getitem__(intent)
        if isinstance(value, str):
            value = _answer(value)
            self[intent] = value
        return value


TEMPLATES = _Templates({**{name: i.answer for name, i in INTENTS.items()}, "unknown": unknown})

__all__ = ["Ctx", "EXAMPLE_QUESTIONS", "StepNotFound", "TEMPLATES", "missing_gpu"]
