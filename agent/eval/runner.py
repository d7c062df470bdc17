"""Running the cases: one case in offline, replay, model or record mode, and a whole run (load, run, gate).

Modes: offline (ChatSession with the planner), model (a real OPENAI_* endpoint), replay (each
case's script served by FakeOpenAI on 127.0.0.1, through agent.llm; ``evals/replays/*.yaml`` or
``--cases GLOB``), record (model mode through RecordingProxy, each case's replies written out as a
replay case, dashcam.agent.eval.recording). Thresholds per mode in ``evals/thresholds.yaml``
(dashcam.agent.eval.gate).
"""
from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path

from dashcam.errors import BadParameter

from ..chat import ChatSession
from ..llm import config_from_env, told_numbers
from ..models import Answer
from ..replay import FakeOpenAI, RecordingProxy, script_reply
from .cases import HELD_OUT, Case, case_files, load_cases
from .checks import check_script, grounding_gaps, score
from .fleet_case import ask_fleet_turns
from .gate import SECTIONS, gate, load_thresholds
from .profiles import Profiles
from .recording import write_recording
from .report import Report
from .results import CaseResult, summarize

# The curated cases and the tuned paraphrase sets (questions as users type them, in English and in Chinese);
# the held-out files (*held_out.yaml) are scored apart.
CASES_GLOB = "evals/cases/*.yaml,evals/paraphrase/tuned.yaml,evals/paraphrase/zh_tuned.yaml"
REPLAYS_DIR = "evals/replays"


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


def ask_turns(case: Case, profile, path: str, offline: bool, model: str | None) -> Answer:
    """The question and its follow-ups through a ChatSession; the last answer."""
    session = ChatSession(profile, path, model=model, offline=offline)
    answer = session.answer(case.question)
    for line in case.follow_ups:
        answer = session.answer(line)
    return answer


def run_case(case: Case, profiles: Profiles, mode: str, model: str | None = None, latency_limit: float | None = None,
             proxy=None) -> CaseResult:
    """One case in ``mode`` (offline | model | record | replay); errors become an "error" result."""
    try:
        got = profiles.get(case)
    except Exception as e:
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
            if case.profile.fleet:
                answer = ask_fleet_turns(case, profile, offline=(mode == "offline"), model=model)
            else:
                answer = ask_turns(case, profile, path, offline=(mode == "offline"), model=model)
            latency = time.perf_counter() - t0
    except Exception as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else ""
        return CaseResult(case, "error", detail=f"{type(e).__name__}: {first}")
    finally:
        if fake is not None:
            fake.__exit__(None, None, None)
    extra = () if case.profile.fleet else told_numbers(profile, answer.targets)
    ungrounded, unflagged = gaps = grounding_gaps(answer, extra)
    checks = score(case, answer, latency, extra, latency_limit, llm=(mode != "offline"), gaps=gaps)
    if fake is not None:
        checks.append(check_script(len(fake.replies), fake.exhausted))
    result = CaseResult(case, "passed" if all(c.ok for c in checks) else "failed", checks, latency, answer,
                        ungrounded=ungrounded, unflagged=unflagged)
    if mode == "record":
        result.script = proxy.take()
    return result


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
    cases = sorted(load_cases(files), key=lambda c: c.set in HELD_OUT)  # the held-out sets scored last
    section = SECTIONS[mode]
    thresholds, th_file = load_thresholds(thresholds_path, section)
    latency_limit = thresholds.get("max_case_latency_s")
    config = config_from_env(model) if mode in ("model", "record") else None
    results: list[CaseResult] = []
    with tempfile.TemporaryDirectory(prefix="dashcam-eval-") as tmp:
        with patched_env(DASHCAM_CACHE_DIR=str(Path(tmp) / "cache")):
            profiles = Profiles(Path(tmp))
            proxy = None
            if mode == "record":
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
