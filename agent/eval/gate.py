"""The gate: thresholds per mode (``evals/thresholds.yaml``), checked against a run's summary.

Each mode reads its own section of the file; ``gate`` lists what is below it, and the CLI then
exits ``EXIT_BELOW`` (14) with one line on stderr.
"""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from dashcam.errors import BadParameter

from .cases import yaml_module

THRESHOLDS_FILE = "evals/thresholds.yaml"
EXIT_BELOW = 14
# mode -> its section of the thresholds file
SECTIONS = {"offline": "offline", "replay": "llm-replay", "model": "model", "record": "model"}

# key -> (what, how to read it from the summary, at least (True) / at most (False))
GATES: dict[str, tuple[str, Callable[[dict], Any], bool]] = {
    "pass_pct": ("cases passed %", lambda s: s["overall"]["pct"], True),
    "planted_pass_pct": ("planted cases passed %", lambda s: s["planted"]["pct"], True),
    "shared_pass_pct": ("shared-profile cases passed %", lambda s: s["shared"]["pct"], True),
    "as_designed_pct": ("cases as designed %", lambda s: s["overall"]["as_designed_pct"], True),
    "curated_routed_pct": ("curated cases routed %", lambda s: _set(s, "curated", "routed_pct"), True),
    "paraphrase_routed_pct": ("paraphrase cases routed %", lambda s: _set(s, "paraphrase", "routed_pct"), True),
    "paraphrase_pass_pct": ("paraphrase cases passed %", lambda s: _set(s, "paraphrase", "pct"), True),
    "zh_routed_pct": ("Chinese paraphrase cases routed %", lambda s: _set(s, "zh", "routed_pct"), True),
    "ungrounded_numbers": ("ungrounded numbers", lambda s: s["ungrounded_numbers"], False),
    "unflagged_ungrounded": ("unflagged ungrounded numbers", lambda s: s["unflagged_ungrounded"], False),
    "mean_latency_s": ("mean latency s", lambda s: s["overall"]["mean_latency_s"], False),
}
CASE_LIMITS = ("max_case_latency_s",)
# gates on a set of cases that may not have run (no such file in --cases): not gated then
OPTIONAL = ("shared_pass_pct", "planted_pass_pct", "curated_routed_pct", "paraphrase_routed_pct",
            "paraphrase_pass_pct", "zh_routed_pct")


def _set(summary: dict, name: str, key: str):
    return (summary.get("by_set", {}).get(name) or {}).get(key)


def load_thresholds(path: str | None, section: str) -> tuple[dict, str | None]:
    """(the mode's thresholds, the file read or None when the default file is absent)."""
    p = Path(path or THRESHOLDS_FILE)
    if not p.is_file():
        if path:
            raise BadParameter(f"thresholds file not found: {p}")
        return {}, None
    try:
        data = yaml_module().safe_load(p.read_text(encoding="utf-8")) or {}
    except Exception as e:
        raise BadParameter(f"{p}: not valid YAML/JSON ({str(e).splitlines()[0]})") from None
    if not isinstance(data, dict) or not isinstance(data.get(section) or {}, dict):
        raise BadParameter(f"{p}: a mapping of mode -> {{threshold: value}} is expected")
    got = data.get(section) or {}
    bad = [k for k in got if k not in GATES and k not in CASE_LIMITS]
    if bad:
        raise BadParameter(f"{p}: {section}: unknown thresholds {bad}; known: {', '.join([*GATES, *CASE_LIMITS])}")
    return got, str(p)


def gate(summary: dict, thresholds: dict) -> tuple[list[dict], list[str]]:
    """(each threshold checked, the failures as short phrases)."""
    rows, failures = [], []
    for key, limit in thresholds.items():
        if key not in GATES:
            continue
        what, read, at_least = GATES[key]
        value = read(summary)
        if value is None:
            if key in OPTIONAL:  # no such case ran (e.g. no ../shared, or no paraphrase file given)
                rows.append({"threshold": key, "what": what, "value": None, "limit": limit, "ok": True})
                continue
            ok = False
        else:
            ok = value >= limit if at_least else value <= limit
        rows.append({"threshold": key, "what": what, "value": value, "limit": limit, "ok": ok})
        if not ok:
            failures.append(f"{what} {'none' if value is None else f'{value:g}'} {'<' if at_least else '>'} {limit:g}")
    return rows, failures
