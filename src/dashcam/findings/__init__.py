"""The one findings engine: flags, severity, ranking, verdict and advice, for every surface.

``diagnose(profile) -> Diagnosis`` (engine.py) reads the tools through one memo (facts.py), applies
the rules (rules/, one module per kind of trouble, each stating its rule), words causes and remedies
in the program's own terms (causes.py, advice/; the workload tool says what the program is) and
ranks the findings. Every threshold is in thresholds.py with its reason. ``story`` writes the
paragraph every surface shows.
"""
from dashcam.findings.models import Diagnosis, Finding

__all__ = ["Diagnosis", "Finding", "VERDICTS", "VERDICT_LABELS", "diagnose", "verdict_label"]
_FROM_ENGINE = ("VERDICTS", "VERDICT_LABELS", "diagnose", "verdict_label")


def __getattr__(name: str):
    """The engine (every rule, the tools, numpy) loads on first use: a module that needs only story.py or
    thresholds.py (the fleet's warm reduce) does not pay for it."""
    if name in _FROM_ENGINE:
        from dashcam.findings import engine

        return getattr(engine, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
