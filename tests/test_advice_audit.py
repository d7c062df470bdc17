"""The advice never contradicts the export (tests/advice_audit.py checks it with plain SQL, independent of
dashcam): every planted scenario and every shared real export, on the summary and on ask's health, idle
and what-to-fix-first answers."""
from __future__ import annotations

import pytest

from dashcam.agent.planner import answer_offline
from dashcam.profile import Profile
from dashcam.reports.summary import summarize
from dashcam.testing.scenarios import SCENARIOS
from dashcam.testing.scenarios import build as build_scenario

from .advice_audit import violations
from .conftest import SHARED_SQLITE

QUESTIONS = {"healthy": "Is this profile healthy?", "idle": "Why is the GPU idle?",
             "fix_first": "What should I fix first?"}


def audit(path) -> list[str]:
    p = Profile.open(path, progress=False)
    s = summarize(p)
    texts = {"summary": s.paragraph, **{k: answer_offline(q, p).answer for k, q in QUESTIONS.items()}}
    texts.update({f"finding {f.kind}": f"{f.sentence} {f.advice or ''}" for f in s.findings if f.sentence})
    return violations(path, texts, s.verdict)


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_planted_scenarios(name, tmp_path):
    assert audit(build_scenario(name, tmp_path / f"{name}.sqlite")) == []


@pytest.mark.skipif(not SHARED_SQLITE, reason="../shared/profiles not present")
@pytest.mark.parametrize("path", SHARED_SQLITE, ids=lambda p: p.name)
def test_shared_profiles(path):
    assert audit(path) == []
