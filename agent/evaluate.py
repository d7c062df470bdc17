"""`dashcam eval`: score the agent on questions whose right answers are known.

Cases (YAML lists in ``evals/cases/*.yaml``; LLM replays in ``evals/replays/*.yaml``)::

    - id: sync-stall-idle-gpu0
      intent: idle                        # the row of the score table
      tags: [cause-sync_wait]             # optional labels (in --json)
      profile: {scenario: sync_stall}     # dashcam.testing.scenarios, built once per run into a temp dir;
                                          # or {shared: FILE}: ../shared/profiles/FILE next to the repo
                                          # (skipped when absent); or {path: FILE} relative to the case file
      question: "why is GPU 0 idle?"
      follow_ups: ["and GPU 1?"]          # chat turns (ChatSession); expectations apply to the last answer
      expect:
        diagnosis: [sync_wait, cudaStreamSynchronize]   # one of these phrases is said
        facts: [{gpu: 0}, {text: cudaStreamSynchronize}, {percent: 71.6, tol: 0.5},
                {ms: 5.005, tol_pct: 1}, {number: 240}]
        forbid: ["GPU 1"]                 # none of these phrases is said
        grounded: true                    # default; false = not checked
        tools: [{name: gpu_gaps, args: {gpu: 0}}]       # each called, args a subset
        max_tool_calls: 1                 # optional: at most this many distinct tool runs
        notes: ["recovered a tool call"]  # optional: each a substring of some answer note
        max_latency_s: 5                  # optional; default from the thresholds file
      expect_fail: [facts, trajectory]    # optional (true or the failing check kinds): see below
      why: "..."                          # optional: what the case shows
      script: [...]                       # replays only: the model's replies (dashcam.agent.replay)

Checks, each pass/fail; a case passes when all of its checks pass:
- diagnosis: one phrase appears (case-insensitive; ``_``, ``-`` and spaces are the same; from a word
  start, so "stall" finds "stalled"; "GPU 1" does not find "GPU 10");
- facts, one check each: ``gpu`` "GPU N" is mentioned; ``text`` a case-insensitive substring;
  ``percent`` a number written with % within ``tol`` points (default 0.5); ``ms`` a time in any unit
  (ns/µs/ms/s/min, converted to ms) within ``tol_pct`` % (default 1) or ``tol`` ms; ``number`` a
  number (not an id) equal to it, or within ``tol``. Numbers are read with agent.grounding.numbers_in;
- forbid: no phrase appears (same matching as diagnosis);
- grounded: the answer says it is grounded, lists no ungrounded number, and an independent
  grounding.check of its text against its evidence agrees (an *unflagged* number is one the agent
  missed: the worst outcome, it reaches the user as a fact);
- trajectory: every expected tool was called with at least the expected args (and no more than
  ``max_tool_calls`` runs);
- notes, latency (seconds for all turns of the case, the profile already open);
- LLM modes: llm (the model answered: no "LLM failed" fallback); replay: script (every scripted
  reply was used, no request went past the end — the loop asked exactly what the script expected).

Expectations always describe the right answer to the user. A replay scripting a model mistake the
loop cannot repair (it asks GPU 0 for a question about GPU 1) fails those checks, which shows the
mistake in the score; ``expect_fail`` lists the check kinds that must fail, so the gate counts the
case as *as designed* only when exactly those fail (``true``: any failure). ``--record`` writes
the check kinds that failed live into each recorded case, so replaying a recording is as designed
while the loop scores the model's replies as it did live, and "passed" stays the model's score.

Modes: offline (ChatSession with the planner), model (a real OPENAI_* endpoint), replay (each
case's script served by FakeOpenAI on 127.0.0.1, through agent.llm; ``evals/replays/*.yaml`` or
``--cases GLOB``), record (model mode through RecordingProxy, each case's replies written out as a
replay case). Thresholds per mode in
``evals/thresholds.yaml``; ``gate`` lists what is below them (the CLI exits 14).
"""
from __future__ import annotations

import glob
import json
import os
import re
import statistics
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator, model_validator

from dashcam.errors import BadParameter

from .models import Answer, ToolCall

CASES_GLOB = "evals/cases/*.yaml"
REPLAYS_DIR = "evals/replays"
THRESHOLDS_FILE = "evals/thresholds.yaml"
EXIT_BELOW = 14
CHECK_KINDS = ("diagnosis", "facts", "forbid", "grounded", "trajectory", "notes", "latency", "llm", "script")
SECTIONS = {"offline": "offline", "replay": "llm-replay", "model": "model", "record": "model"}
TIME_TO_MS = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3, "min": 6e4}
LLM_FAILED = "LLM failed"


# -- cases ------------------------------------------------------------------------------------

def _listify(v):
    return [v] if isinstance(v, str) else v


class ProfileRef(BaseModel):
    model_config = ConfigDict(extra="forbid")
    scenario: str | None = None
    shared: str | None = None
    path: str | None = None

    @model_validator(mode="after")
    def _one(self):
        if sum(v is not None for v in (self.scenario, self.shared, self.path)) != 1:
            raise ValueError("give exactly one of scenario, shared, path")
        return self

    def label(self) -> str:
        return self.scenario or self.shared or self.path or ""

    @property
    def kind(self) -> str:
        return "planted" if self.scenario else "shared" if self.shared else "file"


class Fact(BaseModel):
    model_config = ConfigDict(extra="forbid")
    gpu: int | None = None
    text: str | None = None
    percent: float | None = None
    ms: float | None = None
    number: float | None = None
    tol: float | None = Field(None, ge=0)
    tol_pct: float | None = Field(None, ge=0)

    @model_validator(mode="after")
    def _one(self):
        given = [k for k in ("gpu", "text", "percent", "ms", "number") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError("a fact is one of gpu, text, percent, ms, number")
        if self.tol_pct is not None and self.ms is None:
            raise ValueError("tol_pct is for ms facts")
        if self.tol is not None and given[0] in ("gpu", "text"):
            raise ValueError("tol is for percent, ms and number facts")
        return self

    def label(self) -> str:
        if self.gpu is not None:
            return f"GPU {self.gpu}"
        if self.text is not None:
            return f"text {self.text!r}"
        if self.percent is not None:
            return f"{self.percent:g} % ±{self.tol if self.tol is not None else 0.5:g}"
        if self.ms is not None:
            pct = 1 if self.tol_pct is None else self.tol_pct
            tol = f"±{self.tol:g} ms" if self.tol is not None else f"±{pct:g} %"
            return f"{self.ms:g} ms {tol}"
        return f"number {self.number:g}" + (f" ±{self.tol:g}" if self.tol else "")


class ToolExpect(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    args: dict = Field(default_factory=dict)


class Expect(BaseModel):
    model_config = ConfigDict(extra="forbid")
    diagnosis: list[str] = Field(default_factory=list)
    facts: list[Fact] = Field(default_factory=list)
    forbid: list[str] = Field(default_factory=list)
    grounded: bool = True
    tools: list[ToolExpect] = Field(default_factory=list)
    max_tool_calls: int | None = Field(None, ge=0)
    notes: list[str] = Field(default_factory=list)
    max_latency_s: float | None = Field(None, gt=0)

    _lists = field_validator("diagnosis", "forbid", "notes", mode="before")(_listify)


class Case(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str
    intent: str
    tags: list[str] = Field(default_factory=list)
    profile: ProfileRef
    question: str
    follow_ups: list[str] = Field(default_factory=list)
    expect: Expect = Field(default_factory=Expect)
    expect_fail: bool | list[str] = False
    why: str | None = None
    script: list | None = None
    recorded: dict | None = None
    _file: Path = PrivateAttr(default=Path("."))
    _raw: dict = PrivateAttr(default_factory=dict)

    _follow = field_validator("follow_ups", mode="before")(_listify)

    @field_validator("expect_fail")
    @classmethod
    def _kinds(cls, v):
        if isinstance(v, list):
            bad = [k for k in v if k not in CHECK_KINDS]
            if bad:
                raise ValueError(f"unknown check kinds {bad}; kinds: {', '.join(CHECK_KINDS)}")
        return v

    @property
    def file(self) -> Path:
        return self._file


def _yaml():
    try:
        import yaml
    except ImportError:  # pragma: no cover - PyYAML comes with the test extras
        raise BadParameter("dashcam eval reads YAML: install PyYAML (pip install -e '.[test]')") from None
    return yaml


def case_files(pattern: str) -> list[Path]:
    files = sorted(Path(p) for p in glob.glob(pattern))
    if not files:
        raise BadParameter(f"no case files match {pattern}")
    return files


def load_cases(files: list[Path]) -> list[Case]:
    """Every case of every file, validated; a bad case is one line naming its file and id."""
    yaml = _yaml()
    out: list[Case] = []
    seen: dict[str, Path] = {}
    for f in files:
        try:
            data = yaml.safe_load(Path(f).read_text(encoding="utf-8"))
        except yaml.YAMLError as e:
            raise BadParameter(f"{f}: not valid YAML ({str(e).splitlines()[0]})") from None
        if data is None:
            continue
        if not isinstance(data, list):
            raise BadParameter(f"{f}: a case file is a YAML list of cases")
        for i, raw in enumerate(data):
            name = raw.get("id", f"#{i + 1}") if isinstance(raw, dict) else f"#{i + 1}"
            try:
                case = Case.model_validate(raw)
            except ValidationError as e:
                err = e.errors()[0]
                where = ".".join(str(x) for x in err["loc"]) or "case"
                raise BadParameter(f"{f}: case {name}: {where}: {err['msg']}") from None
            if case.id in seen:
                raise BadParameter(f"{f}: case id {case.id!r} also in {seen[case.id]}")
            seen[case.id] = Path(f)
            case._file, case._raw = Path(f), raw
            out.append(case)
    return out


# -- scoring ------------------------------------------------------------------------------------

@dataclass
class Check:
    kind: str
    name: str
    ok: bool
    detail: str = ""


def _norm(s: str) -> str:
    return re.sub(r"[\s_\-]+", " ", s.lower()).strip()


def has_phrase(text: str, phrase: str) -> bool:
    """``phrase`` in ``text``: case-insensitive, ``_``/``-``/spaces alike, starting at a word start
    ("stall" finds "stalled", not "install"); a phrase ending in a digit is not the start of a longer
    number ("GPU 1" does not find "GPU 10" or "GPU 1.5")."""
    p = _norm(phrase)
    if not p:
        return False
    rx = (r"(?<!\w)" if re.match(r"\w", p[0]) else "") + re.escape(p) + (r"(?!\.?\d)" if p[-1].isdigit() else "")
    return re.search(rx, _norm(text)) is not None


def check_diagnosis(text: str, phrases: list[str]) -> Check:
    hit = next((p for p in phrases if has_phrase(text, p)), None)
    return Check("diagnosis", "diagnosis", hit is not None,
                 f"said {hit!r}" if hit else "said none of: " + ", ".join(phrases))


def _numbers(text: str) -> list[tuple[str, float, str | None]]:
    from .grounding import numbers_in

    return numbers_in(text)


def check_fact(text: str, fact: Fact) -> Check:
    name = f"fact {fact.label()}"
    nums = _numbers(text)
    if fact.gpu is not None:
        hits = [w for w, v, u in nums if u == "#gpu" and v == fact.gpu]
        if not hits:  # an id the extraction skipped (e.g. in a quoted phrase)
            hits = re.findall(rf"(?i)\bGPU\s*#?\s*{fact.gpu}(?![\d.])", text)
        return Check("facts", name, bool(hits), "mentioned" if hits else "GPU ids said: "
                     + (", ".join(w for w, _, u in nums if u == "#gpu") or "none"))
    if fact.text is not None:
        ok = fact.text.lower() in text.lower()
        return Check("facts", name, ok, "found" if ok else "not in the answer")
    if fact.percent is not None:
        tol = 0.5 if fact.tol is None else fact.tol
        seen = [(w, v) for w, v, u in nums if u == "%"]
        kind = "percentages"
        hit = next((w for w, v in seen if abs(v - fact.percent) <= tol + 1e-9), None)
    elif fact.ms is not None:
        tol = fact.tol if fact.tol is not None else abs(fact.ms) * (1 if fact.tol_pct is None else fact.tol_pct) / 100
        seen = [(w, v * TIME_TO_MS[u]) for w, v, u in nums if u in TIME_TO_MS]
        kind = "times"
        hit = next((w for w, v in seen if abs(v - fact.ms) <= tol + 1e-12), None)
    else:
        tol = fact.tol or 0
        seen = [(w, v) for w, v, u in nums if not (u or "").startswith("#")]
        kind = "numbers"
        hit = next((w for w, v in seen if abs(v - fact.number) <= tol + 1e-9), None)
    if hit is not None:
        return Check("facts", name, True, f"said {hit!r}")
    return Check("facts", name, False, f"{kind} said: " + (", ".join(w for w, _ in seen) or "none"))


def check_forbid(text: str, phrases: list[str]) -> Check:
    said = [p for p in phrases if has_phrase(text, p)]
    return Check("forbid", "forbid", not said, "said " + ", ".join(map(repr, said)) if said else "none said")


def grounding_gaps(answer: Answer, extra_values=()) -> tuple[list[str], list[str]]:
    """(every ungrounded number, those the answer did not flag) — the re-check is grounding.check."""
    from .grounding import check

    _, bad = check(answer.answer, answer.evidence, extra_values)
    flagged = list(answer.ungrounded_numbers)
    unflagged = [n for n in bad if n not in flagged]
    return flagged + unflagged, unflagged


def check_grounded(answer: Answer, extra_values=(), gaps: tuple[list[str], list[str]] | None = None) -> Check:
    """``gaps``: grounding_gaps of the answer when the caller has it already."""
    ungrounded, unflagged = gaps if gaps is not None else grounding_gaps(answer, extra_values)
    ok = answer.grounded and not ungrounded
    if ok:
        return Check("grounded", "grounded", True, "every number from a tool result")
    detail = "ungrounded: " + ", ".join(ungrounded)
    if unflagged:
        detail += " (not flagged by the agent: " + ", ".join(unflagged) + ")"
    elif not ungrounded:
        detail = "the answer says it is not grounded"
    return Check("grounded", "grounded", False, detail)


def _args_match(actual, expected) -> bool:
    if isinstance(expected, dict):
        return isinstance(actual, dict) and all(k in actual and _args_match(actual[k], v) for k, v in expected.items())
    if isinstance(expected, (int, float)) and not isinstance(expected, bool):
        return isinstance(actual, (int, float)) and not isinstance(actual, bool) and abs(actual - expected) < 1e-9
    return actual == expected


def _call_label(name: str, args: dict) -> str:
    return name + "(" + ", ".join(f"{k}={json.dumps(v)}" for k, v in args.items()) + ")"


def check_trajectory(tool_calls: list[ToolCall], expected: list[ToolExpect], max_calls: int | None = None) -> Check:
    missing = [e for e in expected if not any(c.name == e.name and _args_match(c.args, e.args) for c in tool_calls)]
    called = ", ".join(_call_label(c.name, c.args) for c in tool_calls) or "no tools"
    problems = []
    if missing:
        problems.append("missing " + ", ".join(_call_label(e.name, e.args) for e in missing))
    if max_calls is not None and len(tool_calls) > max_calls:
        problems.append(f"{len(tool_calls)} tool runs > {max_calls}")
    return Check("trajectory", "trajectory", not problems, "; ".join(problems + [f"called {called}"]))


def check_notes(notes: list[str], phrases: list[str]) -> Check:
    missing = [p for p in phrases if not any(p.lower() in n.lower() for n in notes)]
    return Check("notes", "notes", not missing,
                 ("missing " + ", ".join(map(repr, missing)) + "; notes: " + ("; ".join(notes) or "none"))
                 if missing else "present")


def check_latency(seconds: float, limit: float) -> Check:
    return Check("latency", "latency", seconds <= limit, f"{seconds:.2f} s (limit {limit:g} s)")


def check_llm(answer: Answer) -> Check:
    failed = [n for n in answer.notes if n.startswith(LLM_FAILED)]
    return Check("llm", "llm", not failed, failed[0] if failed else f"answered in {answer.mode} mode")


def check_script(unused: int, past_end: int) -> Check:
    problems = []
    if unused:
        problems.append(f"{unused} scripted replies unused")
    if past_end:
        problems.append(f"{past_end} requests past the end of the script")
    return Check("script", "script", not problems, "; ".join(problems) or "every reply used")


def score(case: Case, answer: Answer, latency_s: float, extra_values=(), latency_limit: float | None = None,
          llm: bool = False, gaps: tuple[list[str], list[str]] | None = None) -> list[Check]:
    """The checks of one case on its last answer (script checks are added by the replay runner)."""
    e, text = case.expect, answer.answer
    checks = []
    if e.diagnosis:
        checks.append(check_diagnosis(text, e.diagnosis))
    checks += [check_fact(text, f) for f in e.facts]
    if e.forbid:
        checks.append(check_forbid(text, e.forbid))
    if e.grounded:
        checks.append(check_grounded(answer, extra_values, gaps))
    if e.tools or e.max_tool_calls is not None:
        checks.append(check_trajectory(answer.tool_calls, e.tools, e.max_tool_calls))
    if e.notes:
        checks.append(check_notes(answer.notes, e.notes))
    limit = e.max_latency_s or latency_limit
    if limit:
        checks.append(check_latency(latency_s, limit))
    if llm:
        checks.append(check_llm(answer))
    return checks


# -- results ------------------------------------------------------------------------------------

@dataclass
class CaseResult:
    case: Case
    status: str  # passed | failed | skipped | error
    checks: list[Check] = field(default_factory=list)
    latency_s: float | None = None
    answer: Answer | None = None
    detail: str = ""  # why skipped, or the error
    ungrounded: list[str] = field(default_factory=list)
    unflagged: list[str] = field(default_factory=list)
    script: list | None = None  # --record: the replies recorded

    @property
    def failed_kinds(self) -> list[str]:
        return sorted({c.kind for c in self.checks if not c.ok})

    @property
    def as_designed(self) -> bool | None:
        ef = self.case.expect_fail
        if self.status == "skipped":
            return None
        if not ef:
            return self.status == "passed"
        if ef is True:
            return self.status != "passed"
        return self.status == "failed" and self.failed_kinds == sorted(set(ef))

    def to_json(self) -> dict:
        c, a = self.case, self.answer
        return {
            "id": c.id, "file": str(c.file), "intent": c.intent, "tags": c.tags,
            "profile": c.profile.model_dump(exclude_none=True), "question": c.question,
            "follow_ups": c.follow_ups, "status": self.status,
            "passed": self.status == "passed", "expect_fail": c.expect_fail, "as_designed": self.as_designed,
            "latency_s": None if self.latency_s is None else round(self.latency_s, 3),
            "checks": [{"kind": k.kind, "name": k.name, "ok": k.ok, "detail": k.detail} for k in self.checks],
            "detail": self.detail or None,
            "answer": a.answer if a else None, "answer_mode": a.mode if a else None,
            "answer_intent": a.intent if a else None,
            "tool_calls": [t.model_dump() for t in a.tool_calls] if a else [],
            "notes": a.notes if a else [], "grounded": a.grounded if a else None,
            "ungrounded_numbers": self.ungrounded, "unflagged_numbers": self.unflagged,
        }


def _pct(n: int, d: int) -> float | None:
    """n/d in %, one decimal; never rounded up to 100 when one case is missing (1999/2000 -> 99.9)."""
    if not d:
        return None
    return min(round(100 * n / d, 1), 99.9) if n < d else 100.0


def _group(results: list[CaseResult]) -> dict:
    ran = [r for r in results if r.status != "skipped"]
    lat = [r.latency_s for r in ran if r.latency_s is not None]
    designed = [r for r in ran if r.as_designed]
    return {"cases": len(ran), "passed": sum(r.status == "passed" for r in ran),
            "pct": _pct(sum(r.status == "passed" for r in ran), len(ran)),
            "as_designed": len(designed), "as_designed_pct": _pct(len(designed), len(ran)),
            "skipped": len(results) - len(ran),
            "mean_latency_s": round(statistics.fmean(lat), 3) if lat else None}


def summarize(results: list[CaseResult]) -> dict:
    intents = sorted({r.case.intent for r in results})
    return {
        "by_intent": {i: _group([r for r in results if r.case.intent == i]) for i in intents},
        "overall": _group(results),
        "planted": _group([r for r in results if r.case.profile.kind == "planted"]),
        "shared": _group([r for r in results if r.case.profile.kind == "shared"]),
        "ungrounded_numbers": sum(len(r.ungrounded) for r in results),
        "unflagged_ungrounded": sum(len(r.unflagged) for r in results),
    }


# -- thresholds ---------------------------------------------------------------------------------

# key -> (what, how to read it from the summary, at least (True) / at most (False))
GATES: dict[str, tuple[str, Callable[[dict], Any], bool]] = {
    "pass_pct": ("cases passed %", lambda s: s["overall"]["pct"], True),
    "planted_pass_pct": ("planted cases passed %", lambda s: s["planted"]["pct"], True),
    "shared_pass_pct": ("shared-profile cases passed %", lambda s: s["shared"]["pct"], True),
    "as_designed_pct": ("cases as designed %", lambda s: s["overall"]["as_designed_pct"], True),
    "ungrounded_numbers": ("ungrounded numbers", lambda s: s["ungrounded_numbers"], False),
    "unflagged_ungrounded": ("unflagged ungrounded numbers", lambda s: s["unflagged_ungrounded"], False),
    "mean_latency_s": ("mean latency s", lambda s: s["overall"]["mean_latency_s"], False),
}
CASE_LIMITS = ("max_case_latency_s",)


def load_thresholds(path: str | None, section: str) -> tuple[dict, str | None]:
    """(the mode's thresholds, the file read or None when the default file is absent)."""
    p = Path(path or THRESHOLDS_FILE)
    if not p.is_file():
        if path:
            raise BadParameter(f"thresholds file not found: {p}")
        return {}, None
    try:
        data = _yaml().safe_load(p.read_text(encoding="utf-8")) or {}
    except Exception as e:  # noqa: BLE001 - YAML/JSON errors: one line
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
            if key in ("shared_pass_pct", "planted_pass_pct"):  # no such case ran (e.g. no ../shared)
                rows.append({"threshold": key, "what": what, "value": None, "limit": limit, "ok": True})
                continue
            ok = False
        else:
            ok = value >= limit if at_least else value <= limit
        rows.append({"threshold": key, "what": what, "value": value, "limit": limit, "ok": ok})
        if not ok:
            failures.append(f"{what} {'none' if value is None else f'{value:g}'} {'<' if at_least else '>'} {limit:g}")
    return rows, failures


# -- running ------------------------------------------------------------------------------------

@contextmanager
def patched_env(**values: str | None):
    def apply(env: dict[str, str | None]) -> None:
        for k, v in env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v

    old = {k: os.environ.get(k) for k in values}
    try:
        apply(values)
        yield
    finally:
        apply(old)


def scenarios() -> dict[str, Callable]:
    from dashcam.testing import scenarios as sc

    return {"demo": sc.demo, **(getattr(sc, "SCENARIOS", None) or {})}


def repo_root(start: Path) -> Path:
    """The folder holding pyproject.toml above ``start`` (the case file), else the current folder."""
    for d in [start.resolve(), *start.resolve().parents]:
        if (d / "pyproject.toml").is_file():
            return d
    return Path.cwd()


class Profiles:
    """Opened profiles by case reference; planted ones built once per scenario into ``tmp``."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.opened: dict[str, tuple[Any, str]] = {}

    def path_for(self, case: Case) -> Path:
        ref = case.profile
        if ref.scenario:
            table = scenarios()
            if ref.scenario not in table:
                raise BadParameter(f"unknown scenario {ref.scenario!r}; scenarios: {', '.join(sorted(table))}")
            out = self.tmp / f"{ref.scenario}.sqlite"
            if not out.exists():
                table[ref.scenario](out)
            return out
        if ref.shared:
            return repo_root(case.file.parent).parent / "shared" / "profiles" / ref.shared
        p = Path(ref.path)
        return p if p.is_absolute() else case.file.parent / p

    def get(self, case: Case):
        """(Profile, path) or None when a shared profile is absent."""
        from dashcam.profile import Profile

        path = self.path_for(case)
        key = str(path)
        if key not in self.opened:
            if case.profile.shared and not path.exists():
                return None
            self.opened[key] = (Profile.open(path, progress=False), key)
        return self.opened[key]


def ask_turns(case: Case, profile, path: str, offline: bool, model: str | None) -> Answer:
    """The question and its follow-ups through a ChatSession; the last answer."""
    from .chat import ChatSession

    session = ChatSession(profile, path, model=model, offline=offline)
    answer = session.answer(case.question)
    for line in case.follow_ups:
        answer = session.answer(line)
    return answer


def _told(profile, answer: Answer) -> list[float]:
    from .llm import told_numbers

    return told_numbers(profile, answer.targets)


def run_case(case: Case, profiles: Profiles, mode: str, model: str | None = None, latency_limit: float | None = None,
             proxy=None) -> CaseResult:
    """One case in ``mode`` (offline | model | record | replay); errors become an "error" result."""
    from .replay import FakeOpenAI, script_reply

    try:
        got = profiles.get(case)
    except Exception as e:  # noqa: BLE001 - a broken case must not stop the run
        return CaseResult(case, "error", detail=f"profile: {type(e).__name__}: {e}")
    if got is None:
        return CaseResult(case, "skipped", detail=f"{case.profile.shared} not present in ../shared/profiles")
    profile, path = got
    fake = None
    try:
        if mode == "replay":
            if case.script is None:
                return CaseResult(case, "error", detail="no script: a replay case needs the model's replies")
            replies = [script_reply(x) for x in case.script]
            model = (case.recorded or {}).get("model") or "replay"
            fake = FakeOpenAI(replies, model=model).__enter__()
            env = patched_env(OPENAI_BASE_URL=fake.base_url, OPENAI_API_KEY="replay")
        elif mode == "record":
            env = patched_env(OPENAI_BASE_URL=proxy.base_url, OPENAI_API_KEY="recording")
            proxy.take()
        else:
            env = patched_env()
        with env:
            t0 = time.perf_counter()
            answer = ask_turns(case, profile, path, offline=(mode == "offline"), model=model)
            latency = time.perf_counter() - t0
    except Exception as e:  # noqa: BLE001
        first = str(e).strip().splitlines()[0] if str(e).strip() else ""
        return CaseResult(case, "error", detail=f"{type(e).__name__}: {first}")
    finally:
        if fake is not None:
            fake.__exit__(None, None, None)
    extra = _told(profile, answer)
    ungrounded, unflagged = gaps = grounding_gaps(answer, extra)
    checks = score(case, answer, latency, extra, latency_limit, llm=(mode != "offline"), gaps=gaps)
    if fake is not None:
        checks.append(check_script(len(fake.replies), fake.exhausted))
    result = CaseResult(case, "passed" if all(c.ok for c in checks) else "failed", checks, latency, answer,
                        ungrounded=ungrounded, unflagged=unflagged)
    if mode == "record":
        result.script = proxy.take()
    return result


@dataclass
class Report:
    mode: str
    section: str
    model: str | None
    sources: list[str]
    results: list[CaseResult]
    summary: dict
    thresholds_file: str | None
    gates: list[dict]
    failures: list[str]
    recorded_to: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.failures

    def to_json(self) -> dict:
        return {"mode": self.mode, "thresholds_section": self.section, "model": self.model, "sources": self.sources,
                "summary": self.summary, "thresholds_file": self.thresholds_file, "gates": self.gates,
                "failures": self.failures, "ok": self.ok, "recorded_to": self.recorded_to,
                "cases": [r.to_json() for r in self.results]}

    def failure_line(self) -> str:
        return f"eval below thresholds ({self.section}): " + "; ".join(self.failures)


def choose_mode(offline: bool, replay: bool, model: str | None, record: str | None) -> str:
    """offline | replay | record | model: --replay, --record, --offline, --model, else model if configured."""
    if sum(bool(x) for x in (offline, replay, record)) > 1:
        raise BadParameter("choose one of --offline, --replay, --record")
    if replay:
        return "replay"
    if offline:
        if model:
            raise BadParameter("--offline and --model exclude each other")
        return "offline"
    from .llm import config_from_env

    configured = config_from_env(model) is not None
    if record:
        if not configured:
            raise BadParameter("--record needs a model endpoint: set OPENAI_API_KEY and/or OPENAI_BASE_URL")
        return "record"
    if model and not configured:
        raise BadParameter("--model needs OPENAI_API_KEY and/or OPENAI_BASE_URL (an OpenAI-compatible endpoint)")
    return "model" if configured else "offline"


def run_eval(mode: str, cases_glob: str | None = None, replays_dir: str | None = None, model: str | None = None,
             record_dir: str | None = None, thresholds_path: str | None = None,
             on_case: Callable[[int, int, str], None] | None = None) -> Report:
    """Load the cases, run them in ``mode``, summarize and gate; --record also writes the replies."""
    if cases_glob and replays_dir:
        raise BadParameter("give --cases GLOB or --replays DIR, not both")
    if mode == "replay" and not cases_glob:
        pattern = str(Path(replays_dir or REPLAYS_DIR) / "*.yaml")
    else:
        pattern = cases_glob or CASES_GLOB
    files = case_files(pattern)
    cases = load_cases(files)
    section = SECTIONS[mode]
    thresholds, th_file = load_thresholds(thresholds_path, section)
    latency_limit = thresholds.get("max_case_latency_s")
    from .llm import config_from_env

    config = config_from_env(model) if mode in ("model", "record") else None
    results: list[CaseResult] = []
    with tempfile.TemporaryDirectory(prefix="dashcam-eval-") as tmp:
        with patched_env(DASHCAM_CACHE_DIR=str(Path(tmp) / "cache")):
            profiles = Profiles(Path(tmp))
            proxy = None
            if mode == "record":
                from .replay import RecordingProxy

                proxy = RecordingProxy(config.base_url, config.api_key, timeout_s=config.timeout_s).__enter__()
            try:
                for i, case in enumerate(cases):
                    if on_case:
                        on_case(i, len(cases), case.id)
                    results.append(run_case(case, profiles, mode, model=model, latency_limit=latency_limit,
                                            proxy=proxy))
            finally:
                if proxy is not None:
                    proxy.__exit__(None, None, None)
    summary = summarize(results)
    gates, failures = gate(summary, thresholds)
    if not any(r.status != "skipped" for r in results):
        failures.append("no case ran")
    report = Report(mode, section, config.model if config else None, [str(f) for f in files], results, summary,
                    th_file, gates, failures)
    if mode == "record":
        report.recorded_to = write_recording(results, Path(record_dir), config.model)
    return report


def write_recording(results: list[CaseResult], out_dir: Path, model: str) -> list[str]:
    """Each answered case as a replay case: its YAML fields, the replies recorded, and the check kinds
    that failed live as ``expect_fail`` (latency left out: a replay is not timed like the endpoint)."""
    yaml = _yaml()
    out_dir.mkdir(parents=True, exist_ok=True)
    at = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    by_file: dict[Path, list[dict]] = {}
    for r in results:
        if r.status not in ("passed", "failed") or r.script is None:
            continue
        raw = {k: v for k, v in r.case._raw.items() if k not in ("script", "recorded", "expect_fail", "why")}
        failed = [k for k in r.failed_kinds if k != "latency"]
        raw["expect_fail"] = failed or False
        if failed:
            raw["why"] = f"recorded from {model}: failed {', '.join(failed)} live"
        raw["recorded"] = {"model": model, "at": at}
        if r.case.profile.path and not Path(r.case.profile.path).is_absolute():  # keep it pointing at the file
            raw["profile"] = {"path": str((r.case.file.parent / r.case.profile.path).resolve())}
        from .replay import script_item

        raw["script"] = [script_item(x) for x in r.script]
        by_file.setdefault(r.case.file, []).append(raw)
    written = []
    for src, items in by_file.items():
        dest = out_dir / src.name
        dest.write_text(yaml.safe_dump(items, sort_keys=False, allow_unicode=True, width=110), encoding="utf-8")
        written.append(str(dest))
    return written


# -- output -------------------------------------------------------------------------------------

def _fmt(v, suffix: str = "") -> str:
    return "-" if v is None else f"{v:g}{suffix}"


def render_report(report: Report, console) -> None:
    """The score table per intent and overall, the cases that failed and why, the thresholds."""
    from rich.table import Table
    from rich.text import Text

    s = report.summary
    designed = any(r.case.expect_fail for r in report.results)
    mode = report.mode + (f" · {report.model}" if report.model else "")
    t = Table(title=f"dashcam eval · {mode}", title_justify="left")
    for col, just in (("intent", "left"), ("cases", "right"), ("passed", "right"), ("%", "right"),
                      ("mean latency s", "right")):
        t.add_column(col, justify=just)
    if designed:
        t.add_column("as designed", justify="right")

    def row(name: str, g: dict, style: str | None = None, end: bool = False) -> None:
        cells = [Text(name), str(g["cases"]), str(g["passed"]), _fmt(g["pct"]), _fmt(g["mean_latency_s"])]
        if designed:
            cells.append(str(g["as_designed"]))
        t.add_row(*cells, style=style, end_section=end)

    items = list(s["by_intent"].items())
    for i, (intent, g) in enumerate(items):
        row(intent, g, end=(i == len(items) - 1))
    row("overall", s["overall"], style="bold")
    console.print(t)
    skipped = [r for r in report.results if r.status == "skipped"]
    if skipped:
        console.print(Text(f"skipped {len(skipped)}: " + ", ".join(r.case.id for r in skipped)
                           + " (profile not present)", style="dim"))
    for r in report.results:
        if r.status in ("passed", "skipped"):
            continue
        mark = "as designed" if r.as_designed else "FAIL"
        line = Text(f"{mark} ", style="yellow" if r.as_designed else "red bold")
        line.append(Text(f"{r.case.id} ({r.case.intent}): "))
        if r.status == "error":
            line.append(Text(f"error: {r.detail}"))
        else:
            line.append(Text("; ".join(f"{c.name}: {c.detail}" for c in r.checks if not c.ok)))
        console.print(line)
    for r in report.results:
        if r.status == "passed" and r.as_designed is False:
            console.print(Text(f"FAIL {r.case.id} ({r.case.intent}): passed, but expected to fail "
                               f"{r.case.expect_fail}", style="red bold"))
    console.print(Text(f"ungrounded numbers: {s['ungrounded_numbers']} (not flagged by the agent: "
                       f"{s['unflagged_ungrounded']})"))
    if report.thresholds_file:
        parts = [f"{g['what']} {_fmt(g['value'])} (need {'≥' if GATES[g['threshold']][2] else '≤'} {g['limit']:g}: "
                 f"{'ok' if g['ok'] else 'BELOW'})" for g in report.gates]
        console.print(Text(f"thresholds ({report.section}, {report.thresholds_file}): " + "; ".join(parts),
                           style="green" if report.ok else "red"))
    else:
        console.print(Text(f"no thresholds file ({THRESHOLDS_FILE}): not gated", style="dim"))
    for f in report.recorded_to:
        console.print(Text(f"recorded: {f}", style="dim"))
