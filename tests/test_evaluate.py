"""`dashcam eval` (agent/eval/, agent/replay.py): scoring, cases end to end, thresholds, replays, --record.

The planted profile is dashcam.testing.scenarios.demo: GPU 1 idle 59.18 % of the 117.59 ms window (69.59 ms),
69.133 % of it cuda_api (cudaMemcpy); GPU 0 idle 18.36 % (21.59 ms), 96.434 % cpu_work.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml

from dashcam.agent.eval import profiles, results
from dashcam.agent.eval.cases import Case, Fact, ToolExpect, load_cases
from dashcam.agent.eval.checks import (
    Check,
    check_diagnosis,
    check_fact,
    check_forbid,
    check_grounded,
    check_notes,
    check_trajectory,
    grounding_gaps,
    has_phrase,
)
from dashcam.agent.eval.gate import gate
from dashcam.agent.eval.results import CaseResult
from dashcam.agent.eval.runner import choose_mode, run_eval
from dashcam.agent.models import Answer, Evidence, ToolCall
from dashcam.agent.replay import FakeOpenAI, RecordingProxy, call, error, say, script_item, script_reply
from dashcam.errors import BadParameter

from .conftest import run_cli

REPO = Path(__file__).resolve().parents[1]
GOOD = ("GPU 1 was idle 59.18 % of the window (69.59 ms), mostly inside `cudaMemcpy` calls "
        "(`cuda_api`: 69.1 % of its idle time).")
WRONG = "GPU 0 was idle 18.36 % of the window (21.59 ms), mostly `cpu_work` (96.4 % of its idle time)."


@pytest.fixture(autouse=True)
def _no_model(monkeypatch):
    for k in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "DASHCAM_MODEL"):
        monkeypatch.delenv(k, raising=False)


# -- scoring on hand-made answers ---------------------------------------------------------------

def test_phrases_case_underscores_and_word_edges():
    assert has_phrase("mostly `sync_wait` here", "sync wait")
    assert has_phrase("Mostly SYNC-WAIT", "sync_wait")
    assert has_phrase("inside cudaStreamSynchronize.", "cudastreamsynchronize")
    assert not has_phrase("GPU 10 and GPU 11", "GPU 1")
    assert not has_phrase("on GPU 1.5", "GPU 1")
    assert has_phrase("GPU 1, then GPU 10", "GPU 1")
    assert has_phrase("copies stalled the GPU", "stall")  # from a word start: suffixes are fine
    assert not has_phrase("reinstall the driver", "stall")
    assert has_phrase("idle 12 %", "12 %")


def test_diagnosis_any_phrase():
    ok = check_diagnosis("mostly in `cudaMemcpy`", ["sync_wait", "cudaMemcpy"])
    assert (ok.kind, ok.ok, ok.detail) == ("diagnosis", True, "said 'cudaMemcpy'")
    bad = check_diagnosis("mostly cpu_work", ["sync_wait", "cudaMemcpy"])
    assert (bad.ok, bad.detail) == (False, "said none of: sync_wait, cudaMemcpy")


@pytest.mark.parametrize("text,fact,ok", [
    ("GPUs 0 and 1 idle", {"gpu": 1}, True),
    ("GPU 10 idle", {"gpu": 1}, False),
    ("the gpu1 stream", {"gpu": 1}, True),
    ("waits in cudaStreamSynchronize", {"text": "CUDASTREAMSYNCHRONIZE"}, True),
    ("waits in cudaMemcpy", {"text": "cudaStreamSynchronize"}, False),
    ("idle 71.6 % of the window", {"percent": 71.6}, True),
    ("idle 72.1% of the window", {"percent": 71.6}, True),     # 0.5 points: the default tolerance
    ("idle 72.2 % of the window", {"percent": 71.6}, False),
    ("idle 72.2 % of the window", {"percent": 71.6, "tol": 1}, True),
    ("idle 71.6 ms", {"percent": 71.6}, False),                 # not a percentage
    ("blocked 5.0 ms", {"ms": 5.005}, True),
    ("blocked 5005 µs", {"ms": 5.005}, True),
    ("blocked 0.005 s", {"ms": 5.005}, True),
    ("blocked 5.1 ms", {"ms": 5.005}, False),                   # 1.9 % off: default 1 %
    ("blocked 5.1 ms", {"ms": 5.005, "tol_pct": 2}, True),
    ("blocked 5.1 ms", {"ms": 5.005, "tol": 0.05}, False),
    ("blocked 5 %", {"ms": 5.005}, False),                      # not a time
    ("240 kernels ran", {"number": 240}, True),
    ("1.6 M kernels ran", {"number": 1_600_000}, True),
    ("239 kernels ran", {"number": 240}, False),
    ("239 kernels ran", {"number": 240, "tol": 1}, True),
    ("on GPU 240", {"number": 240}, False),                     # an id, not a count
])
def test_facts(text, fact, ok):
    c = check_fact(text, Fact(**fact))
    assert c.kind == "facts" and c.ok is ok, c.detail


def test_fact_details_name_what_was_said():
    c = check_fact("idle 18.36 % (21.59 ms), 96.4 % cpu", Fact(percent=59.18))
    assert (c.name, c.detail) == ("fact 59.18 % ±0.5", "percentages said: 18.36 %, 96.4 %")
    assert check_fact("idle 21.59 ms", Fact(ms=69.59)).detail == "times said: 21.59 ms"
    assert check_fact("GPU 0 only", Fact(gpu=1)).detail == "GPU ids said: GPU 0"


@pytest.mark.parametrize("bad", [{}, {"gpu": 0, "text": "x"}, {"percent": 5, "tol_pct": 1}, {"text": "x", "tol": 1}])
def test_fact_needs_exactly_one_kind(bad):
    with pytest.raises(ValueError):
        Fact(**bad)


def test_forbid():
    assert check_forbid("GPU 10 and GPU 11", ["GPU 1"]).ok
    c = check_forbid("about GPU 1.", ["GPU 1", "GPU 0"])
    assert (c.ok, c.detail) == (False, "said 'GPU 1'")


def _answer(text, grounded=True, ungrounded=(), tool_calls=(), notes=(), result=None):
    evidence = [Evidence(tool="gpu_gaps", args={"gpu": 1},
                         result=result or {"kernel_idle_pct": 59.18, "kernel_idle_ns": 69_590_000})]
    return Answer(question="q", answer=text, mode="llm", evidence=evidence, grounded=grounded,
                  ungrounded_numbers=list(ungrounded), tool_calls=list(tool_calls), notes=list(notes))


def test_grounded_needs_the_flag_and_an_independent_recheck():
    assert check_grounded(_answer("idle 59.18 % (69.59 ms)")).ok
    flagged = _answer("idle 60.5 %", grounded=False, ungrounded=["60.5 %"])
    c = check_grounded(flagged)
    assert (c.ok, c.detail) == (False, "ungrounded: 60.5 %")
    assert grounding_gaps(flagged) == (["60.5 %"], [])
    # an answer that claims to be grounded but is not: the agent missed it
    missed = _answer("idle 60.5 % (69.59 ms)")
    c = check_grounded(missed)
    assert (c.ok, c.detail) == (False, "ungrounded: 60.5 % (not flagged by the agent: 60.5 %)")
    assert grounding_gaps(missed) == (["60.5 %"], ["60.5 %"])
    # GPU 7 is vouched for by the caller (the question named it)
    assert not check_grounded(_answer("GPU 7 idles 59.18 %")).ok
    assert check_grounded(_answer("GPU 7 idles 59.18 %"), extra_values=[7]).ok


def test_trajectory_subset_of_args_and_max_calls():
    made = [ToolCall(name="gpu_gaps", args={"gpu": 1, "limit": 5}), ToolCall(name="overview", args={})]
    assert check_trajectory(made, [ToolExpect(name="gpu_gaps", args={"gpu": 1.0})]).ok
    assert check_trajectory(made, [ToolExpect(name="overview")]).ok
    c = check_trajectory(made, [ToolExpect(name="gpu_gaps", args={"gpu": 0})])
    assert (c.ok, c.detail) == (False, 'missing gpu_gaps(gpu=0); called gpu_gaps(gpu=1, limit=5), overview()')
    c = check_trajectory(made, [], max_calls=1)
    assert (c.ok, c.detail) == (False, "2 tool runs > 1; called gpu_gaps(gpu=1, limit=5), overview()")
    assert not check_trajectory([ToolCall(name="gpu_gaps", args={"gpu": True})],
                                [ToolExpect(name="gpu_gaps", args={"gpu": 1})]).ok


def test_notes():
    assert check_notes(["Recovered a tool call written as JSON text (gpu_gaps)"], ["recovered a tool call"]).ok
    assert not check_notes([], ["step cap"]).ok


def _case(**kw) -> Case:
    return Case.model_validate({"id": "c", "intent": "idle", "profile": {"scenario": "demo"}, "question": "q", **kw})


@pytest.mark.parametrize("expect_fail,status,failed,designed", [
    (False, "passed", [], True),
    (False, "failed", ["facts"], False),
    (True, "failed", ["facts"], True),
    (True, "error", [], True),
    (True, "passed", [], False),
    (["facts", "trajectory"], "failed", ["facts", "trajectory"], True),
    (["facts", "trajectory"], "failed", ["facts"], False),          # exactly those kinds
    (["facts"], "failed", ["facts", "grounded"], False),
    (["facts"], "error", [], False),
    (False, "skipped", [], None),
])
def test_as_designed(expect_fail, status, failed, designed):
    checks = [Check(k, k, False) for k in failed] + [Check("forbid", "forbid", True)]
    r = CaseResult(_case(expect_fail=expect_fail), status, checks)
    assert r.as_designed is designed


def test_case_errors_name_the_file_and_case(tmp_path):
    f = tmp_path / "bad.yaml"
    f.write_text(yaml.safe_dump([{"id": "x1", "intent": "idle", "profile": {"scenario": "demo"}, "question": "q",
                                  "expect": {"facs": []}}]))
    with pytest.raises(BadParameter, match=r"bad.yaml: case x1: expect.facs: Extra inputs are not permitted"):
        load_cases([f])
    f.write_text(yaml.safe_dump([{"id": "x1", "intent": "idle", "profile": {"scenario": "demo", "shared": "a"},
                                  "question": "q"}]))
    with pytest.raises(BadParameter, match="give exactly one of scenario, shared, path"):
        load_cases([f])
    f.write_text(yaml.safe_dump([{"id": "x1", "intent": "i", "profile": {"scenario": "demo"}, "question": "q",
                                  "expect_fail": ["fact"]}]))
    with pytest.raises(BadParameter, match="unknown check kinds"):
        load_cases([f])
    ok = [{"id": "x1", "intent": "i", "profile": {"scenario": "demo"}, "question": "q"}]
    f.write_text(yaml.safe_dump(ok))
    (tmp_path / "again.yaml").write_text(yaml.safe_dump(ok))
    with pytest.raises(BadParameter, match="case id 'x1' also in"):
        load_cases([f, tmp_path / "again.yaml"])


def test_choose_mode(monkeypatch):
    assert choose_mode(False, False, None, None) == "offline"
    with pytest.raises(BadParameter, match="--model needs OPENAI_API_KEY"):
        choose_mode(False, False, "m", None)
    with pytest.raises(BadParameter, match="choose one of"):
        choose_mode(True, True, None, None)
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    assert choose_mode(False, False, None, None) == "model"
    assert choose_mode(True, False, None, None) == "offline"
    assert choose_mode(False, True, None, None) == "replay"
    assert choose_mode(False, False, None, "out") == "record"


# -- a tiny case file end to end (offline) ------------------------------------------------------

TINY = [
    {"id": "idle-gpu1", "intent": "idle", "profile": {"scenario": "demo"}, "question": "why is GPU 1 idle?",
     "expect": {"diagnosis": ["cuda_api", "cudaMemcpy"],
                "facts": [{"gpu": 1}, {"percent": 59.18}, {"ms": 69.59}, {"text": "cudaMemcpy"}],
                "forbid": ["GPU 0"], "tools": [{"name": "gpu_gaps", "args": {"gpu": 1}}]}},
    {"id": "idle-follow-up-gpu0", "intent": "idle", "profile": {"scenario": "demo"},
     "question": "why is GPU 1 idle?", "follow_ups": ["and GPU 0?"],
     "expect": {"diagnosis": ["cpu_work"], "facts": [{"gpu": 0}, {"percent": 18.36}, {"percent": 10}],
                "tools": [{"name": "gpu_gaps", "args": {"gpu": 0}}]}},
    {"id": "absent-shared", "intent": "overview", "profile": {"shared": "no-such-profile.sqlite"},
     "question": "what is this profile?"},
    {"id": "unknown-scenario", "intent": "overview", "profile": {"scenario": "no_such_scenario"},
     "question": "what is this profile?"},
]


def write_cases(path: Path, cases: list[dict]) -> Path:
    path.write_text(yaml.safe_dump(cases, sort_keys=False))
    return path


def test_offline_end_to_end_exact(tmp_path):
    f = write_cases(tmp_path / "tiny.yaml", TINY)
    report = run_eval("offline", cases_glob=str(f), thresholds_path=str(REPO / "evals" / "thresholds.yaml"))
    by_id = {r.case.id: r for r in report.results}
    assert {k: r.status for k, r in by_id.items()} == {
        "idle-gpu1": "passed", "idle-follow-up-gpu0": "failed", "absent-shared": "skipped",
        "unknown-scenario": "error"}
    assert [c.name for c in by_id["idle-gpu1"].checks] == [
        "routing", "diagnosis", "fact GPU 1", "fact 59.18 % ±0.5", "fact 69.59 ms ±1 %", "fact text 'cudaMemcpy'",
        "forbid",
        "grounded", "trajectory", "latency"]
    follow = by_id["idle-follow-up-gpu0"]
    assert [(c.name, c.ok) for c in follow.checks if not c.ok] == [("fact 10 % ±0.5", False)]
    assert follow.answer.answer.startswith("GPU 0 was kernel-idle 21.59 ms (18.4 % of the 117.59 ms window)")
    assert "unknown scenario 'no_such_scenario'" in by_id["unknown-scenario"].detail
    s = report.summary
    assert s["by_intent"]["idle"] == {"cases": 2, "passed": 1, "pct": 50.0, "routed": 2, "routed_pct": 100.0,
                                      "as_designed": 1, "as_designed_pct": 50.0,
                                      "skipped": 0, "mean_latency_s": s["by_intent"]["idle"]["mean_latency_s"]}
    assert s["by_intent"]["overview"]["cases"] == 1 and s["by_intent"]["overview"]["skipped"] == 1
    assert (s["overall"]["cases"], s["overall"]["passed"], s["overall"]["pct"]) == (3, 1, 33.3)
    assert (s["planted"]["cases"], s["planted"]["passed"]) == (3, 1)
    assert s["ungrounded_numbers"] == 0 and s["unflagged_ungrounded"] == 0
    assert report.failures == ["planted cases passed % 33.3 < 100", "curated cases routed % 66.7 < 100"]
    # JSON: per case, each check
    js = json.loads(json.dumps(report.to_json()))
    case = next(c for c in js["cases"] if c["id"] == "idle-gpu1")
    assert case["passed"] is True and case["tool_calls"] == [
        {"name": "gpu_gaps", "args": {"gpu": 1}},  # the gaps
        {"name": "overview", "args": {}},  # the workload: how the cause and the remedy are worded
        {"name": "memcpy", "args": {}},  # the remedy's precondition: are the copies pageable?
        {"name": "iterations", "args": {"limit": 3}}]  # does the loop copy every step (arrays not resident)?
    assert {"kind": "facts", "name": "fact 59.18 % ±0.5", "ok": True, "detail": "said '59.2 %'"} in case["checks"]


def test_planted_profiles_built_once_and_cache_in_temp(tmp_path, monkeypatch):
    built = []
    real = profiles.scenarios()["demo"]

    def counting(path):
        built.append((Path(path), os.environ["DASHCAM_CACHE_DIR"]))
        return real(path)

    monkeypatch.setattr(profiles, "scenarios", lambda: {"demo": counting})
    before = os.environ["DASHCAM_CACHE_DIR"]
    f = write_cases(tmp_path / "tiny.yaml", TINY[:2])
    report = run_eval("offline", cases_glob=str(f), thresholds_path=str(REPO / "evals" / "thresholds.yaml"))
    assert len(built) == 1  # two cases, one build
    path, cache = built[0]
    assert cache == str(path.parent / "cache") and not path.parent.exists()  # a temp dir, removed at the end
    assert os.environ["DASHCAM_CACHE_DIR"] == before
    assert [r.status for r in report.results] == ["passed", "failed"]


def test_profile_path_relative_to_the_case_file(tmp_path):
    from dashcam.testing.scenarios import demo

    (tmp_path / "profiles").mkdir()
    demo(tmp_path / "profiles" / "mine.sqlite")
    case = {"id": "by-path", "intent": "idle", "profile": {"path": "../profiles/mine.sqlite"},
            "question": "why is GPU 1 idle?", "expect": {"facts": [{"percent": 59.18}]}}
    (tmp_path / "cases").mkdir()
    f = write_cases(tmp_path / "cases" / "p.yaml", [case])
    report = run_eval("offline", cases_glob=str(f), thresholds_path=str(REPO / "evals" / "thresholds.yaml"))
    assert [r.status for r in report.results] == ["passed"] and report.ok


def test_cli_thresholds_exit_code(tmp_path):
    bad = write_cases(tmp_path / "bad.yaml", TINY[:2])
    good = write_cases(tmp_path / "good.yaml", TINY[:1])
    th = tmp_path / "th.yaml"
    th.write_text("offline:\n  planted_pass_pct: 100\n  ungrounded_numbers: 0\n")
    r = run_cli("eval", "--offline", "--cases", str(bad), "--thresholds", str(th), cache=tmp_path / "cache", cwd=REPO)
    assert r.returncode == 14
    assert r.stderr == "dashcam: error: eval below thresholds (offline): planted cases passed % 50 < 100\n"
    assert "overall" in r.stdout and "FAIL idle-follow-up-gpu0" in r.stdout
    r = run_cli("eval", "--cases", str(good), "--thresholds", str(th), "--json", cache=tmp_path / "cache",
                cwd=REPO)  # offline: no model configured
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["mode"] == "offline" and data["ok"] is True and data["summary"]["overall"]["pct"] == 100.0
    assert data["gates"] == [
        {"threshold": "planted_pass_pct", "what": "planted cases passed %", "value": 100.0, "limit": 100, "ok": True},
        {"threshold": "ungrounded_numbers", "what": "ungrounded numbers", "value": 0, "limit": 0, "ok": True}]
    th.write_text("offline:\n  pass_percent: 100\n")
    r = run_cli("eval", "--cases", str(good), "--thresholds", str(th), cache=tmp_path / "cache", cwd=REPO)
    assert r.returncode == 11 and "unknown thresholds ['pass_percent']" in r.stderr


# -- replays --------------------------------------------------------------------------------------

REPLAY_STATUS = {
    "replay-good-trajectory": "passed",
    "replay-wrong-gpu-argument": "passed",       # asked for GPU 1's calls, the model answers about GPU 1
    "replay-wrong-gpu-kept": "failed",
    "replay-repeated-call": "passed",
    "replay-call-loop-step-cap": "passed",
    "replay-invented-number": "passed",
    "replay-refusal-no-numbers": "passed",        # the model called no tool: the offline answer is shown
    "replay-refusal-invented-numbers": "passed",
    "replay-call-as-json-text": "passed",
    "replay-malformed-arguments": "passed",
    "replay-rate-limited": "passed",
    "replay-follow-up-gpu0": "passed",
}


def test_repo_replays_score_as_designed():
    report = run_eval("replay", replays_dir=str(REPO / "evals" / "replays"),
                      thresholds_path=str(REPO / "evals" / "thresholds.yaml"))
    by_id = {r.case.id: r for r in report.results}
    assert {k: r.status for k, r in by_id.items()} == REPLAY_STATUS
    assert all(r.as_designed for r in report.results), [(r.case.id, r.failed_kinds) for r in report.results]
    assert report.ok and report.failures == []
    assert by_id["replay-wrong-gpu-kept"].failed_kinds == ["diagnosis", "facts", "forbid", "grounded", "trajectory"]
    assert not by_id["replay-wrong-gpu-kept"].answer.grounded
    invented = by_id["replay-invented-number"]
    assert invented.answer.answer.startswith("GPU 1 was idle 59.18 % of the window (69.59 ms); 69.1 % of that")
    assert invented.answer.grounded and invented.ungrounded == []
    refusal = by_id["replay-refusal-invented-numbers"]  # never a refusal with a profile open
    assert refusal.answer.mode == "offline" and "40 %" not in refusal.answer.answer and refusal.ungrounded == []
    assert any(n.startswith("the model answered without calling a tool") for n in refusal.answer.notes)
    assert [c.name for c in by_id["replay-repeated-call"].answer.tool_calls] == ["gpu_gaps"]
    gave_up = {"replay-refusal-no-numbers", "replay-refusal-invented-numbers"}
    for r in report.results:  # every scripted reply used; the model answered unless it called no tool
        assert {c.kind: c.ok for c in r.checks}["script"] is True
        assert r.answer.mode == ("offline" if r.case.id in gave_up else "llm")
        assert {c.kind: c.ok for c in r.checks}["llm"] is True
    assert report.summary["overall"] == {**report.summary["overall"], "cases": 12, "passed": 11, "as_designed": 12}
    assert report.summary["unflagged_ungrounded"] == 0


def test_replay_that_diverges_from_its_script(tmp_path):
    base = {"intent": "idle", "profile": {"scenario": "demo"}, "question": "why is GPU 1 idle?",
            "expect": {"facts": [{"percent": 59.18}]}}
    cases = [
        {**base, "id": "extra-reply", "script": [{"call": "gpu_gaps", "args": {"gpu": 1}}, {"say": GOOD}, "unused"]},
        {**base, "id": "too-short", "script": [{"call": "gpu_gaps", "args": {"gpu": 1}}]},
        {**base, "id": "no-script"},
    ]
    write_cases(tmp_path / "r.yaml", cases)
    report = run_eval("replay", replays_dir=str(tmp_path), thresholds_path=str(REPO / "evals" / "thresholds.yaml"))
    by_id = {r.case.id: r for r in report.results}
    extra = {c.kind: (c.ok, c.detail) for c in by_id["extra-reply"].checks}
    assert extra["script"] == (False, "1 scripted replies unused") and extra["facts"][0] is True
    short = {c.kind: (c.ok, c.detail) for c in by_id["too-short"].checks}
    assert short["script"][0] is False and "requests past the end of the script" in short["script"][1]
    assert short["llm"][0] is False and short["llm"][1].startswith("LLM failed")
    assert by_id["too-short"].answer.mode == "offline"  # the fallback, scored as a failure of the LLM run
    assert by_id["no-script"].status == "error"
    assert report.failures == ["cases as designed % 0 < 100"]


# -- the script format and the recording proxy --------------------------------------------------

def test_script_items_round_trip():
    replies = [say("hi"), call("gpu_gaps", {"gpu": 1}), call("sql", '{"query": "SELECT'),
               {"content": "thinking", "tool_calls": call("overview")["tool_calls"] + call("sync")["tool_calls"]},
               error(429, 3, "slow down")]
    items = [script_item(r) for r in replies]
    assert items == [{"say": "hi"}, {"call": "gpu_gaps", "args": {"gpu": 1}},
                     {"call": "sql", "arguments": '{"query": "SELECT'},
                     {"calls": [{"call": "overview", "args": {}}, {"call": "sync", "args": {}}], "content": "thinking"},
                     {"error": 429, "message": "slow down"}]
    back = [script_reply(yaml.safe_load(yaml.safe_dump(i))) for i in items]
    assert back[:4] == replies[:4]
    assert back[4] == error(429, 0, "slow down")
    assert script_reply({"say": "x", "delay": 2}) == {"content": "x", "delay": 2}
    with pytest.raises(ValueError, match="unknown script reply"):
        script_reply({"speak": "x"})


def test_recording_proxy_forwards_records_and_streams(tmp_path):
    from dashcam.agent.llm import LLMConfig, answer_llm
    from dashcam.agent.models import Targets
    from dashcam.profile import Profile
    from dashcam.testing.scenarios import demo

    profile = Profile.open(demo(tmp_path / "demo.sqlite"), progress=False)
    with FakeOpenAI([error(429), call("gpu_gaps", {"gpu": 1}), say(GOOD)]) as real:
        with RecordingProxy(real.base_url, "secret-key") as proxy:
            tokens = []
            ans = answer_llm("why is GPU 1 idle?", profile, Targets(gpus=[1]),
                             LLMConfig(model="m", base_url=proxy.base_url, api_key="x"), on_token=tokens.append)
            recorded = proxy.take()
    assert ans.answer == GOOD and "".join(tokens) == GOOD  # streamed to the client through the proxy
    assert [r.get("stream") for r in real.requests] == [None, None, None]  # asked upstream without streaming
    assert [script_item(r) for r in recorded] == [
        {"error": 429, "message": "scripted error 429"}, {"call": "gpu_gaps", "args": {"gpu": 1}}, {"say": GOOD}]


def test_record_then_replay_round_trip(tmp_path, monkeypatch):
    cases = [
        {"id": "rec-good", "intent": "idle", "profile": {"scenario": "demo"}, "question": "why is GPU 1 idle?",
         "expect": {"diagnosis": ["cudaMemcpy"], "facts": [{"gpu": 1}, {"percent": 59.18}],
                    "tools": [{"name": "gpu_gaps", "args": {"gpu": 1}}]}},
        {"id": "rec-wrong-gpu", "intent": "idle", "profile": {"scenario": "demo"}, "question": "why is GPU 1 idle?",
         "expect": {"facts": [{"percent": 59.18}], "tools": [{"name": "gpu_gaps", "args": {"gpu": 1}}]}},
        {"id": "rec-absent", "intent": "overview", "profile": {"shared": "no-such.sqlite"}, "question": "what?"},
    ]
    f = write_cases(tmp_path / "live.yaml", cases)
    # the second case: the model asks about GPU 0, and asked for GPU 1's calls, answers the same again
    script = [call("gpu_gaps", {"gpu": 1}), say(GOOD), call("gpu_gaps", {"gpu": 0}), say(WRONG), say(WRONG)]
    th = tmp_path / "th.yaml"
    th.write_text("model:\n  unflagged_ungrounded: 0\nllm-replay:\n  as_designed_pct: 100\n  pass_pct: 50\n")
    out = tmp_path / "recorded"
    with FakeOpenAI(script, model="real-model") as real:  # the "real" endpoint
        monkeypatch.setenv("OPENAI_BASE_URL", real.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-very-secret")
        monkeypatch.setenv("DASHCAM_MODEL", "real-model")
        assert choose_mode(False, False, None, str(out)) == "record"
        live = run_eval("record", cases_glob=str(f), record_dir=str(out), thresholds_path=str(th))
    assert not real.replies and real.exhausted == 0
    assert [r.status for r in live.results] == ["passed", "failed", "skipped"]
    assert live.recorded_to == [str(out / "live.yaml")] and live.model == "real-model"
    text = (out / "live.yaml").read_text()
    assert "sk-very-secret" not in text
    rec = yaml.safe_load(text)
    assert [c["id"] for c in rec] == ["rec-good", "rec-wrong-gpu"]
    assert rec[0]["script"] == [{"call": "gpu_gaps", "args": {"gpu": 1}}, {"say": GOOD}]
    assert rec[0]["expect_fail"] is False and rec[0]["expect"] == cases[0]["expect"]
    assert rec[1]["script"] == [{"call": "gpu_gaps", "args": {"gpu": 0}}, {"say": WRONG}, {"say": WRONG}]
    assert rec[1]["expect_fail"] == ["facts", "grounded", "trajectory"]
    assert rec[1]["recorded"]["model"] == "real-model"

    monkeypatch.delenv("OPENAI_BASE_URL")
    monkeypatch.delenv("OPENAI_API_KEY")
    again = run_eval("replay", replays_dir=str(out), thresholds_path=str(th))
    assert [(r.case.id, r.status, r.as_designed) for r in again.results] == [
        ("rec-good", "passed", True), ("rec-wrong-gpu", "failed", True)]
    assert [r.answer.answer for r in again.results] == [r.answer.answer for r in live.results[:2]]
    assert [r.answer.model for r in again.results] == ["real-model", "real-model"]
    assert again.ok and again.summary["overall"]["pct"] == 50.0
    r = run_cli("eval", "--replays", str(out), "--thresholds", str(th), "--json", cache=tmp_path / "cache",
                cwd=REPO)  # --replays implies --replay
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["mode"] == "replay"


def test_pass_pct_never_rounds_a_miss_up_to_100():
    assert results._pct(1999, 2000) == 99.9 and results._pct(2000, 2000) == 100.0 and results._pct(1, 3) == 33.3
    assert results._pct(0, 0) is None
    rows, failures = gate({"planted": {"pct": 99.9}}, {"planted_pass_pct": 100})
    assert failures == ["planted cases passed % 99.9 < 100"] and rows[0]["ok"] is False


def test_all_cases_skipped_fails_the_gate(tmp_path):
    f = write_cases(tmp_path / "s.yaml", [TINY[2]])
    report = run_eval("offline", cases_glob=str(f), thresholds_path=str(REPO / "evals" / "thresholds.yaml"))
    assert [r.status for r in report.results] == ["skipped"]
    assert report.failures == ["no case ran"]


def test_sets_by_file_held_out_last(tmp_path):
    """A file under paraphrase/ whose stem ends in held_out is held-out; zh_ files are the Chinese sets."""
    para = tmp_path / "paraphrase"
    para.mkdir()
    names = ["held_out", "tuned", "zh_held_out", "zh_tuned", "entities_held_out"]
    files = []
    for i, name in enumerate(names):
        files.append(write_cases(para / f"{name}.yaml", [{"id": f"c{i}", "intent": "idle",
                                                          "profile": {"scenario": "demo"}, "question": "q"}]))
    files.append(write_cases(tmp_path / "cases.yaml", [{"id": "c9", "intent": "idle", "profile": {"scenario": "demo"},
                                                        "question": "q"}]))
    got = {c.file.stem: c.set for c in load_cases(files)}
    assert got == {"held_out": "held_out", "tuned": "paraphrase", "zh_held_out": "zh_held_out", "zh_tuned": "zh",
                   "entities_held_out": "held_out", "cases": "curated"}
    summary = {"by_set": {"zh": {"routed_pct": 96.0}}}
    rows, failures = gate(summary, {"zh_routed_pct": 97})
    assert failures == ["Chinese paraphrase cases routed % 96 < 97"]
    assert gate({"by_set": {}}, {"zh_routed_pct": 97}) == (
        [{"threshold": "zh_routed_pct", "what": "Chinese paraphrase cases routed %", "value": None, "limit": 97,
          "ok": True}], [])                                     # no Chinese file given: not gated
    assert yaml.safe_load((REPO / "evals" / "thresholds.yaml").read_text())["offline"]["zh_routed_pct"] == 97


def test_a_fleet_case_asks_a_folder_of_planted_reports(tmp_path):
    """``profile: {fleet: NAME}``: the folder built by dashcam.testing.fleets.FLEETS[NAME], asked as a fleet."""
    from dashcam.testing.fleets import LATE, MS

    base = {"intent": "fleet", "profile": {"fleet": "late_rank"}, "question": "which rank is the straggler?"}
    cases = [{**base, "id": "fleet-right", "expect": {"diagnosis": ["Rank 4 is the straggler"],
                                                      "facts": [{"ms": LATE / MS}, {"number": 8}]}},
             {**base, "id": "fleet-wrong", "expect": {"diagnosis": ["Rank 3 is the straggler"],
                                                      "forbid": ["rank 4"]}},
             {**base, "id": "fleet-unknown", "profile": {"fleet": "no_such_fleet"}}]
    f = write_cases(tmp_path / "fleet.yaml", cases)
    report = run_eval("offline", cases_glob=str(f), thresholds_path=str(REPO / "evals" / "thresholds.yaml"))
    by_id = {r.case.id: r for r in report.results}
    assert {k: r.status for k, r in by_id.items()} == {"fleet-right": "passed", "fleet-wrong": "failed",
                                                       "fleet-unknown": "error"}
    right = by_id["fleet-right"]
    assert [c.name for c in right.checks] == ["routing", "diagnosis", "fact 12 ms ±1 %", "fact number 8", "grounded",
                                              "latency"]
    assert right.answer.intent == "fleet" and right.answer.answer.startswith("Rank 4 is the straggler")
    assert [(c.kind, c.ok) for c in by_id["fleet-wrong"].checks if not c.ok] == [("diagnosis", False),
                                                                                 ("forbid", False)]
    assert "unknown fleet 'no_such_fleet'" in by_id["fleet-unknown"].detail
