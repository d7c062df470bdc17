"""What an offline answer needs: the profile, the question's targets, and the one tool-run memo.

``Ctx.call(tool, **args)`` runs a tool once per distinct call (``evidence.ToolRuns``) and returns its
typed result model; the calls and their evidence are what the answer rests on, in call order.
``ctx.facts`` reads the same memo for the findings engine (advice in the workload's terms).
"""
from __future__ import annotations

from functools import cached_property

from dashcam.errors import DashcamError
from dashcam.evidence import ToolRuns
from dashcam.findings.facts import Facts
from dashcam.text.format import at_ms, duration

from ..models import Targets


class StepNotFound(DashcamError):
    """The question names a step the profile does not have."""


class Ctx:
    """The profile, the targets, the question (a Chinese one as its English words, han.to_english, the reading the
    classifier and the targets use, so that every answer's own tests of its words hold for it too), and the memo
    of tool runs."""

    def __init__(self, profile, targets: Targets, question: str = "", runs: ToolRuns | None = None) -> None:
        from ..han import to_english

        self.profile = profile
        self.targets = targets
        self.question = to_english(question)
        self.runs = runs or ToolRuns(profile)
        self.notes: list[str] = []
        self._win: dict | None = None

    def call(self, tool: str, **args):
        """The typed result of ``tool`` (None args dropped); identical calls run once. Tool notes on what
        the profile lacks ("No ...") become the answer's notes."""
        result = self.runs.get(tool, **args)
        for n in result.notes or []:
            if n.startswith("No "):
                self.note(n)
        return result

    @property
    def tool_calls(self):
        return self.runs.calls

    @property
    def evidence(self):
        return self.runs.evidence

    def note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)

    @property
    def gpus(self) -> list[int | None]:
        """The GPUs to ask about: each named one, or None (all)."""
        return list(dict.fromkeys(self.targets.gpus)) or [None]

    @property
    def win(self) -> dict:
        """Window args: the asked window, else the asked step's window, else {} (the whole profile)."""
        if self._win is None:
            self._win = self.targets.window_args()
            if not self._win and self.targets.step is not None:
                self._win = step_window(self, self.targets.step)
        return self._win

    @property
    def whole_profile(self) -> bool:
        return not self.win

    @cached_property
    def facts(self) -> Facts:
        """The findings engine's view of the asked window (all GPUs), on the same memo."""
        return Facts(self.runs, self.win)


def window_words(result, whole: bool) -> str:
    """ "the 117.59 ms window" or "the 20 ms window from 10 ms to 30 ms"."""
    w = result.window
    if whole:
        return f"the {duration(w.length_ns)} window"
    return f"the {duration(w.length_ns)} window from {at_ms(w.start_ms)} to {at_ms(w.end_ms)}"


def devices_of(results: list) -> list:
    """Device rows of several per-GPU results, one per device, in order."""
    seen, out = set(), []
    for r in results:
        for d in r.devices or []:
            if d.device_id not in seen:
                seen.add(d.device_id)
                out.append(d)
    return out


def calls_per_gpu(ctx: Ctx, tool: str, **args) -> list:
    return [ctx.call(tool, gpu=g, **ctx.win, **args) for g in ctx.gpus]


def step_window(ctx: Ctx, index: int) -> dict:
    """start_ms/end_ms of step ``index`` (iterations over the whole profile); StepNotFound if absent."""
    r = ctx.call("iterations", limit=min(1000, max(10, index + 1)))
    step = next((s for s in r.steps if s.index == index), None)
    if step is None:
        raise StepNotFound(f"step {index} not found ({r.step_count} steps)")
    w = r.window
    start = max(0.0, (step.start_ns - w.start_ns) / 1e6 + w.start_ms)
    end = max(start, (step.end_ns - w.start_ns) / 1e6 + w.start_ms)
    return {"start_ms": round(start, 6), "end_ms": round(end, 6)}
