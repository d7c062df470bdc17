"""A question that times an activity by its common name gets that activity's time, found in the capture.

"How much time does the optimizer take?", "how long do the GEMMs take?", "time spent in data loading?", "how long
does checkpoint saving take?": the words name an activity (measure/activities.py), not one of this profile's
entities, and no intent's words place the question, or they place it on a neighbour (the copies for "data loader",
the steps for "optimizer step", the NVTX table for "backward pass"). Such a question is answered by ``time_in``
(answers/features.py): the activity looked for by name in NVTX ranges, OS runtime calls, CUDA API calls and
kernels, and when none holds it, what was looked for and what would record it — never the health summary.

- A question about time (``TIME_OF``) naming one ACTIVITIES activity, with no entity of the profile named
  (targets: kernel, NVTX range, API or OS runtime function), moves to ``time_in`` from the intents in ``REROUTE``.
  Two activities ("the forward pass vs the backward pass") are a comparison: the intent chosen (the NVTX table
  ranks such ranges side by side) keeps it.
- A question about time that no intent places (``unknown``) and that names something else (``subject``: "how long
  does one halo exchange take?") is looked for literally the same way.
"""
from __future__ import annotations

import re

from dashcam.measure.activities import activities_named, activity_named

from .han import to_english
from .models import Targets
from .targets import COMMON_WORDS

# Intents that would answer a time-of-activity question with something else in its place.
REROUTE = frozenset({"unknown", "healthy", "slow", "overview", "memcpy", "iterations", "nvtx", "top_kernels",
                     "small_kernels"})

TIME_OF = re.compile(r"\bhow\s+(?:much|long)\b|\btime\b|\bspen[dt]s?\b|\bcosts?\b|\bexpensive\b|\btak(?:e|es|ing)\b|"
                     r"\bduration\b|\bshare\b|\bfraction\b|\bpercent(?:age)?\b", re.IGNORECASE)
_ART = r"(?:(?:the|my|our|a|an|one|each|every|all|its|their)\s+)?"
_SUBJECT = (
    re.compile(r"\bhow\s+(?:much\s+(?:\w+\s+)?time|long)\s+(?:does|do|did|is|are|was|were|will|would)\s+" + _ART
               + r"(?P<x>[\w/\- ]+?)\s+(?:take|takes|last|lasts|cost|costs|need|needs|use|uses|run|runs)\b", re.I),
    re.compile(r"\bhow\s+much\s+time\s+(?:goes|went|is\s+going|is\s+spent|is\s+lost)\s+(?:to|into|on|in)\s+" + _ART
               + r"(?P<x>[\w/\- ]+?)\s*(?:[?.!,;]|$)", re.I),
    re.compile(r"\b(?:time|spent|spend|spends|lost|lose)\s+(?:in|on|for|doing|during|to)\s+" + _ART
               + r"(?P<x>[\w/\- ]+?)\s*(?:[?.!,;]|$|\b(?:per|in|on|during|compared|vs|versus)\b)", re.I),
)
MAX_SUBJECT_WORDS = 3


def subject(question: str) -> str | None:
    """The words a time-of question times ("halo exchange" of "how long does one halo exchange take?"), without the
    words any question has (targets.COMMON_WORDS); None when nothing else is left or the phrasing is another."""
    for rx in _SUBJECT:
        m = rx.search(question)
        if m is None:
            continue
        words = [w for w in re.findall(r"[\w/\-]+", m.group("x")) if w.lower() not in COMMON_WORDS
                 and not w.isdigit()]
        if words and len(words) <= MAX_SUBJECT_WORDS:
            return " ".join(words)
    return None


def asked_activity(question: str) -> str | None:
    """The activity a question names (measure/activities.ACTIVITIES), else the literal subject it times."""
    text = to_english(question)
    return activity_named(text) or subject(text)


def activity_intent(intent: str, targets: Targets, question: str) -> str:
    """``intent``, or ``time_in`` for a question that times an activity (module docstring)."""
    if intent not in REROUTE or targets.kernel or targets.nvtx or targets.api or targets.osrt:
        return intent
    text = to_english(question)
    if not TIME_OF.search(text):
        return intent
    named = activities_named(text)
    if len(named) == 1 or (named and intent == "unknown"):
        return "time_in"
    if intent == "unknown" and subject(text) is not None:
        return "time_in"
    return intent
