"""The findings rules, one module per kind of trouble. Each has ``find(facts) -> list[Item]``: one item per
GPU (or for the profile) with its severity, the time a fix would save, the figures and evidence, its
title and lead sentence, and its first remedy (findings/advice/). The engine groups and ranks them."""
from __future__ import annotations

from dataclasses import dataclass, field

from dashcam.evidence import Evidence
from dashcam.findings.models import Severity
from dashcam.findings.thresholds import HIGH_LOSS_PCT, LOW_LOSS_PCT, MEDIUM_LOSS_PCT


@dataclass
class Item:
    kind: str
    gpu: int | None
    severity: Severity
    saving_ns: int | None
    figures: dict
    evidence: list[Evidence]
    title: str
    sentence: str
    advice: str | None
    cause: str | None = None
    extra: dict = field(default_factory=dict)  # what a rule keeps for grouping (not shown)


def loss_severity(pct: float) -> Severity:
    """Severity of losing ``pct`` % of the window: high >= 50, medium >= 25, low >= 5, else info."""
    return ("high" if pct >= HIGH_LOSS_PCT else "medium" if pct >= MEDIUM_LOSS_PCT else
            "low" if pct >= LOW_LOSS_PCT else "info")


def at_least(s: Severity, floor: Severity) -> Severity:
    order = ["info", "low", "medium", "high"]
    return s if order.index(s) >= order.index(floor) else floor


def share(part: float, whole: float) -> float:
    """``part`` as % of ``whole`` rounded to 3 decimals (what a tool would report), 0 when whole is 0."""
    return round(100.0 * part / whole, 3) if whole else 0.0
