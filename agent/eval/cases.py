"""The eval case schema: case and expectation models, and loading case files (YAML lists).

Cases (YAML lists in ``evals/cases/*.yaml``; LLM replays in ``evals/replays/*.yaml``)::

    - id: sync-stall-idle-gpu0
      intent: idle                        # the row of the score table
      tags: [cause-sync_wait]             # optional labels (in --json)
      profile: {scenario: sync_stall}     # dashcam.testing.scenarios, built once per run into a temp dir;
                                          # or {shared: FILE}: ../shared/profiles/FILE next to the repo
                                          # (skipped when absent); or {path: FILE} relative to the case file;
                                          # or {fleet: NAME}: a folder of planted reports built by
                                          # dashcam.testing.fleets.FLEETS[NAME], asked as a fleet
      question: "why is GPU 0 idle?"
      follow_ups: ["and GPU 1?"]          # chat turns (ChatSession); expectations apply to the last answer
      expect:
        route: [idle]                     # optional: the intents accepted as the question's route
                                          # (default: the case's intent)
        targets: {gpus: [0]}              # optional: a subset of the parsed targets (agent/models.py)
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

Expectations always describe the right answer to the user (the checks: dashcam.agent.eval.checks).
A replay scripting a model mistake the loop cannot repair (it asks GPU 0 for a question about GPU 1)
fails those checks, which shows the mistake in the score; ``expect_fail`` lists the check kinds that
must fail, so the gate counts the case as *as designed* only when exactly those fail (``true``: any
failure). ``--record`` writes the check kinds that failed live into each recorded case, so replaying
a recording is as designed while the loop scores the model's replies as it did live, and "passed"
stays the model's score.
"""
from __future__ import annotations

import glob
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator, model_validator

from dashcam.errors import BadParameter

CHECK_KINDS = ("routing", "diagnosis", "facts", "forbid", "grounded", "trajectory", "notes", "latency", "llm", "script")


def _listify(v):
    return [v] if isinstance(v, str) else v


class ProfileRef(BaseModel):
    model_config = ConfigDict(extra="forbid")
    scenario: str | None = None
    shared: str | None = None
    path: str | None = None
    fleet: str | None = None  # a folder of planted reports (dashcam.testing.fleets.FLEETS), asked as a fleet

    @model_validator(mode="after")
    def _one(self):
        if sum(v is not None for v in (self.scenario, self.shared, self.path, self.fleet)) != 1:
            raise ValueError("give exactly one of scenario, shared, path, fleet")
        return self

    def label(self) -> str:
        return self.scenario or self.shared or self.path or (f"fleet {self.fleet}" if self.fleet else "")

    @property
    def kind(self) -> str:
        return "planted" if self.scenario or self.fleet else "shared" if self.shared else "file"


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
    route: list[str] = Field(default_factory=list)
    targets: dict = Field(default_factory=dict)
    diagnosis: list[str] = Field(default_factory=list)
    facts: list[Fact] = Field(default_factory=list)
    forbid: list[str] = Field(default_factory=list)
    grounded: bool = True
    tools: list[ToolExpect] = Field(default_factory=list)
    max_tool_calls: int | None = Field(None, ge=0)
    notes: list[str] = Field(default_factory=list)
    max_latency_s: float | None = Field(None, gt=0)

    _lists = field_validator("route", "diagnosis", "forbid", "notes", mode="before")(_listify)

    @field_validator("targets")
    @classmethod
    def _known_targets(cls, v):
        from ..models import Targets

        bad = [k for k in v if k not in Targets.model_fields]
        if bad:
            raise ValueError(f"unknown targets {bad}; targets: {', '.join(Targets.model_fields)}")
        return v


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

    @property
    def routes(self) -> list[str]:
        """The intents accepted as this question's route: expect.route, else the case's intent."""
        return self.expect.route or [self.intent]

    @property
    def set(self) -> str:
        """Which set the case belongs to, by its file (SETS: the order the sets are reported in, held-out
        last): under a ``paraphrase`` folder, questions as users type them, ``paraphrase`` (English) or
        ``zh`` (Chinese: a file whose name starts with ``zh_``), and of each the held-out part, any file
        whose stem ends in ``held_out`` (written first, scored last, never gated): ``held_out``,
        ``zh_held_out``; anywhere else ``curated`` (evals/cases: questions with exact expectations)."""
        if self._file.parent.name != "paraphrase":
            return "curated"
        stem = self._file.stem
        base = "zh" if stem.startswith("zh_") else "paraphrase"
        if stem.endswith("held_out"):
            return "zh_held_out" if base == "zh" else "held_out"
        return base


# The sets in the order they are reported: the held-out ones last.
SETS = ("curated", "paraphrase", "zh", "held_out", "zh_held_out")
HELD_OUT = ("held_out", "zh_held_out")


def yaml_module():
    """PyYAML, imported when a YAML file is read or written (the case, thresholds and recorded files)."""
    try:
        import yaml  # third-party, imported on first use
    except ImportError:  # pragma: no cover - PyYAML comes with the test extras
        raise BadParameter("dashcam eval reads YAML: install PyYAML (pip install -e '.[test]')") from None
    return yaml


def case_files(pattern: str) -> list[Path]:
    """The files of ``pattern``: a glob, or several separated by commas (each sorted, in order)."""
    files = list(dict.fromkeys(Path(p) for one in pattern.split(",") if one.strip()
                               for p in sorted(glob.glob(one.strip()))))
    if not files:
        raise BadParameter(f"no case files match {pattern}")
    return files


def load_cases(files: list[Path]) -> list[Case]:
    """Every case of every file, validated; a bad case is one line naming its file and id."""
    yaml = yaml_module()
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
