"""LLM mode against what local servers (llama.cpp, Ollama, vLLM) and small models really send: one scripted-server
case per failure seen with a real 1.5B model (issue: LLM mode holds up against a real model).

The profile is dashcam.testing.scenarios.demo (GPUs 0 and 1; gpu_gaps on GPU 1: kernel_idle_pct 59.18).
"""
from __future__ import annotations

import json

import pytest

from dashcam.agent import llm_request
from dashcam.agent.llm import LLMConfig, answer_llm, config_from_env
from dashcam.agent.llm_config import llm_options
from dashcam.agent.models import Answer, Targets
from dashcam.errors import BadParameter
from dashcam.profile import Profile
from dashcam.testing.scenarios import demo

from .conftest import run_cli
from .fake_openai import FakeOpenAI, call, cut, delayed, error, raw, say

QUESTION = "Why is GPU 1 idle?"
GOOD = "GPU 1 was idle 59.18 % of the window."


@pytest.fixture(scope="module")
def demo_path(tmp_path_factory):
    return demo(tmp_path_factory.mktemp("local") / "demo.sqlite")


@pytest.fixture(scope="module")
def profile(demo_path, tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DASHCAM_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
        return Profile.open(demo_path, progress=False)


def cfg(fake, **kw) -> LLMConfig:
    return LLMConfig(model="fake-model", base_url=fake.base_url, api_key="k", **{"max_retries": 0, **kw})


def offline():
    return lambda: Answer(question=QUESTION, answer="offline answer", mode="offline")


STREAM = [None, "stream"]


def tokens(kind):
    return (lambda t: None) if kind else None


# 1. settings a local server needs; a progress line; no retry piling up behind a timed-out request

def test_limits_from_environment_and_options(monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("DASHCAM_LLM_TIMEOUT", "900")
    monkeypatch.setenv("DASHCAM_LLM_MAX_TOKENS", "512")
    c = config_from_env()
    assert (c.timeout_s, c.max_output_tokens, c.max_retries, c.context_tokens) == (900, 512, 2, 16000)
    with llm_options(timeout=30.0, retries=0, context=8192):  # the CLI's options win over the environment
        c = config_from_env()
        assert (c.timeout_s, c.max_output_tokens, c.max_retries, c.context_tokens) == (30, 512, 0, 8192)
    assert config_from_env().timeout_s == 900
    monkeypatch.setenv("DASHCAM_LLM_TIMEOUT", "soon")
    with pytest.raises(BadParameter, match="DASHCAM_LLM_TIMEOUT='soon' is not a number"):
        config_from_env()
    monkeypatch.setenv("DASHCAM_LLM_TIMEOUT", "-1")
    with pytest.raises(BadParameter, match="DASHCAM_LLM_TIMEOUT"):
        config_from_env()


def test_a_slow_request_shows_a_waiting_line_and_a_timeout_is_not_retried(profile, capsys, monkeypatch):
    monkeypatch.setattr(llm_request, "WAIT_SHOW_S", 0.2)
    monkeypatch.setattr(llm_request, "WAIT_LOG_S", 0.3)
    with FakeOpenAI([delayed(1.0, call("gpu_gaps", {"gpu": 1})), say(GOOD)]) as fake:
        ans = answer_llm(QUESTION, profile, Targets(gpus=[1]), cfg(fake, timeout_s=5))
    err = capsys.readouterr().err
    assert ans.answer == GOOD and "waiting for the model (0 s)" in err and "waiting for the model (1 s)" in err
    # a request past its timeout is abandoned, not sent again (a one-slot server is still working on it)
    with FakeOpenAI([delayed(3, say("late")), say("second")]) as fake:
        ans = answer_llm(QUESTION, profile, Targets(), cfg(fake, timeout_s=0.5, max_retries=2), fallback=offline())
    assert len(fake.requests) == 1 and ans.mode == "offline"
    assert "not retried" in ans.notes[0]


def test_errors_that_may_pass_are_retried_by_dashcam_not_the_sdk(profile):
    with FakeOpenAI([error(503), error(429), call("gpu_gaps", {"gpu": 1}), say(GOOD)]) as fake:
        ans = answer_llm(QUESTION, profile, Targets(gpus=[1]), cfg(fake, max_retries=2))
    assert len(fake.requests) == 4 and ans.answer == GOOD
    with FakeOpenAI([error(400, message="context size 4096 is too small"), say(GOOD)]) as fake:
        ans = answer_llm(QUESTION, profile, Targets(), cfg(fake, max_retries=2), fallback=offline())
    # 9. a 400 is not retried, and the server's message is in the note
    assert len(fake.requests) == 1
    assert ans.notes == ["LLM failed (BadRequestError, HTTP 400: context size 4096 is too small); offline answer shown"]


# 6. arguments as a JSON object; 7. a body that is not a chat completion

@pytest.mark.parametrize("stream", STREAM)
def test_arguments_sent_as_an_object(profile, stream):
    with FakeOpenAI([call("gpu_gaps", {"gpu": 1}, as_object=True), say(GOOD)]) as fake:
        ans = answer_llm(QUESTION, profile, Targets(gpus=[1]), cfg(fake), on_token=tokens(stream))
    assert [(e.tool, e.args) for e in ans.evidence] == [("gpu_gaps", {"gpu": 1})]
    assert ans.mode == "llm" and ans.answer == GOOD


@pytest.mark.parametrize("stream", STREAM)
def test_an_html_page_instead_of_a_completion_falls_back_with_a_clear_note(profile, stream):
    with FakeOpenAI([raw("<html><body>Bad gateway</body></html>")]) as fake:
        ans = answer_llm(QUESTION, profile, Targets(), cfg(fake), on_token=tokens(stream), fallback=offline())
    assert ans.mode == "offline" and ans.answer == "offline answer"
    assert "OpenAI-compatible /v1 endpoint" in ans.notes[0]
    if not stream:
        assert "<html><body>Bad gateway</body></html>" in ans.notes[0]


# 8. max_tokens sent; a reply cut at the limit is not an answer

@pytest.mark.parametrize("stream", STREAM)
def test_max_tokens_is_sent_and_a_cut_off_reply_is_not_taken(profile, stream):
    with FakeOpenAI([call("gpu_gaps", {"gpu": 1}), cut(say("GPU 1 was idle 59.18 % because"))]) as fake:
        ans = answer_llm(QUESTION, profile, Targets(gpus=[1]), cfg(fake, max_output_tokens=64),
                         on_token=tokens(stream), fallback=offline())
    assert all(r["max_tokens"] == 64 for r in fake.requests)
    assert ans.mode == "offline"
    assert ans.notes == ["LLM failed (LLMError: the model's reply was cut off at the output limit (64 tokens; raise "
                         "DASHCAM_LLM_MAX_TOKENS)); offline answer shown"]
    assert [t.fate for t in ans.model_turns] == ["tool calls run", "discarded: cut off at the output limit"]


def test_an_endpoint_that_wants_max_completion_tokens_gets_it(profile):
    msg = "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead."
    with FakeOpenAI([error(400, message=msg), call("gpu_gaps", {"gpu": 1}), say(GOOD)]) as fake:
        ans = answer_llm(QUESTION, profile, Targets(gpus=[1]), cfg(fake))
    assert "max_tokens" in fake.requests[0] and fake.requests[1]["max_completion_tokens"] == 1500
    assert "max_tokens" not in fake.requests[1] and ans.answer == GOOD


# 11. reasoning blocks

@pytest.mark.parametrize("stream", STREAM)
def test_think_blocks_are_not_shown_nor_checked(profile, stream):
    shown: list[str] = []
    reply = "<think>The user asks about GPU 1. Maybe 42.5 % or 17 ms?</think>\n" + GOOD
    with FakeOpenAI([call("gpu_gaps", {"gpu": 1}), say(reply)], chunk_chars=3) as fake:
        ans = answer_llm(QUESTION, profile, Targets(gpus=[1]), cfg(fake),
                         on_token=shown.append if stream else None)
    assert ans.answer == GOOD and ans.grounded and ans.ungrounded_numbers == []
    assert len(fake.requests) == 2  # no rewrite asked for
    if stream:
        assert "".join(shown).strip() == GOOD and "think" not in "".join(shown)
    assert ans.model_turns[-1].text == reply  # kept as written in the record


# 12. notes say what happened

def test_tool_calls_that_all_failed_are_said_as_such(profile):
    script = [call("gpu_gaps", {"gpu": "one"}), call("no_such_tool"), say("GPU 1 is fine."), say("GPU 1 is fine.")]
    with FakeOpenAI(script) as fake:
        ans = answer_llm(QUESTION, profile, Targets(gpus=[1]), cfg(fake), fallback=offline())
    # answering after every call failed gets one request to call again, with the last error
    assert fake.requests[3]["messages"][-1]["content"].startswith(
        "Your tool call failed (unknown tool 'no_such_tool'; tools: overview, workload, top_kernels, gpu_gaps)")
    assert ans.mode == "offline" and len(fake.requests) == 4
    assert ans.notes == ["the model's 2 tool calls all failed (first: invalid arguments for gpu_gaps: gpu: Input "
                         "should be a valid integer, unable to parse string as an integer); the offline answer is "
                         "shown"]


def test_after_a_failed_call_one_more_try_can_succeed(profile):
    script = [call("gpu_gaps", {"gpu": 1, "end_ms": 0}), say("The window is empty."), call("gpu_gaps", {"gpu": 1}),
              say(GOOD)]
    with FakeOpenAI(script) as fake:
        ans = answer_llm(QUESTION, profile, Targets(gpus=[1]), cfg(fake), fallback=offline())
    assert ans.mode == "llm" and ans.answer == GOOD and [e.args for e in ans.evidence] == [{"gpu": 1}]
    assert [t.fate for t in ans.model_turns] == ["tool calls run", "replaced: its tool calls had all failed; asked "
                                                 "to call again", "tool calls run", "answer"]
    # the question names no window: the tools are offered without start_ms/end_ms
    assert all("end_ms" not in t["function"]["parameters"]["properties"] for t in fake.requests[0]["tools"])


def test_a_gpu_the_profile_lacks_is_answered_offline_with_a_note(demo_path, tmp_path):
    with FakeOpenAI([say("GPU 7 is busy.")]) as fake:
        out = run_cli("ask", "why is GPU 7 idle?", demo_path, "--json", cache=tmp_path / "c",
                      env={"OPENAI_BASE_URL": fake.base_url, "OPENAI_API_KEY": "k"})
    assert out.returncode == 0, out.stderr
    ans = json.loads(out.stdout)
    assert fake.requests == [] and ans["mode"] == "offline"
    assert "GPU 7 is not in this profile: answered offline, the model was not asked" in ans["notes"]


# 13. --json keeps every model turn, discarded ones included

def test_json_keeps_each_model_turn_and_its_fate(demo_path, tmp_path):
    script = [say("GPU 1 is idle 99 % of the time."), call("gpu_gaps", {"gpu": 1}), say("It idled 12345.6 ms."),
              say(GOOD)]
    with FakeOpenAI(script) as fake:
        out = run_cli("ask", QUESTION, demo_path, "--json", "--llm-timeout", "30", cache=tmp_path / "c",
                      env={"OPENAI_BASE_URL": fake.base_url, "OPENAI_API_KEY": "k"})
    assert out.returncode == 0, out.stderr
    ans = json.loads(out.stdout)
    # the first reply rested on no tool result: the offline answer replaced it, and --json says so
    assert ans["mode"] == "offline" and len(fake.requests) == 1
    assert ans["model_turns"] == [{"text": "GPU 1 is idle 99 % of the time.", "calls": [],
                                   "fate": "replaced by the offline answer: it rests on no tool result"}]
    with FakeOpenAI(script[1:]) as fake:
        out = run_cli("ask", QUESTION, demo_path, "--json", cache=tmp_path / "c",
                      env={"OPENAI_BASE_URL": fake.base_url, "OPENAI_API_KEY": "k"})
    ans = json.loads(out.stdout)
    assert ans["answer"] == GOOD and fake.requests[0]["max_tokens"] == 1500
    assert [(t["calls"], t["fate"]) for t in ans["model_turns"]] == [
        (['gpu_gaps({"gpu": 1})'], "tool calls run"),
        ([], "replaced: numbers not in any tool result (12345.6 ms); a rewrite was asked for"),
        ([], "answer (the rewrite)")]
    assert ans["model_turns"][1]["text"] == "It idled 12345.6 ms."


# 2. grounding knows whose number it is

GPU0_IDLE, GPU1_IDLE = "18.36 %", "59.18 %"  # gpu_gaps kernel_idle_pct of the demo's GPUs 0 and 1


def test_gpu_1_given_gpu_0s_figures_gets_its_calls_asked_for(profile):
    wrong = f"GPU 0 was idle {GPU0_IDLE} of the window; GPU 1 was idle {GPU0_IDLE} too."
    right = f"GPU 0 was idle {GPU0_IDLE} of the window; GPU 1 was idle {GPU1_IDLE}."
    script = [call("gpu_gaps", {"gpu": 0}), say(wrong), call("gpu_gaps", {"gpu": 1}), say(right)]
    with FakeOpenAI(script) as fake:
        ans = answer_llm("compare GPU 0 and GPU 1", profile, Targets(gpus=[0, 1]), cfg(fake))
    assert "no tool result above is about it" in fake.requests[2]["messages"][-1]["content"]
    assert ans.answer == right and ans.grounded
    assert [(e.tool, e.args) for e in ans.evidence] == [("gpu_gaps", {"gpu": 0}), ("gpu_gaps", {"gpu": 1})]


def test_a_figure_from_the_other_gpus_result_is_flagged_and_rewritten(profile):
    wrong = f"GPU 0 was idle {GPU0_IDLE}, and GPU 1 was idle {GPU0_IDLE} as well."
    script = [call("gpu_gaps", {"gpu": 0}), call("gpu_gaps", {"gpu": 1}), say(wrong), say(wrong)]
    with FakeOpenAI(script) as fake:
        ans = answer_llm("compare GPU 0 and GPU 1", profile, Targets(gpus=[0, 1]), cfg(fake))
    # every number is in some result, so the old check passed it; the GPU it is given for does not hold it
    assert f"{GPU0_IDLE} (GPU 1)" in fake.requests[3]["messages"][-1]["content"]
    assert not ans.grounded and ans.ungrounded_numbers == [f"{GPU0_IDLE} (GPU 1)"]
    assert (f"numbers given for a GPU or a named kernel, range or call whose tool results do not hold them: "
            f"{GPU0_IDLE} (GPU 1)") in ans.notes


def test_a_kernels_figure_given_to_another_kernel_is_flagged(build):
    from dashcam.evidence.attribution import check_gpus
    from dashcam.evidence.runs import run_tool
    from dashcam.testing.builder import ExportBuilder

    b = ExportBuilder()
    b.gpu(0)
    t = 0
    for _ in range(3):  # gemm_big 3 x 3.99 ms, softmax_small 3 x 0.99 ms
        b.launch(0, t, t + 5_000, t + 10_000, t + 4_000_000, name="gemm_big")
        t += 5_000_000
        b.launch(0, t, t + 5_000, t + 10_000, t + 1_000_000, name="softmax_small")
        t += 2_000_000
    ev = [run_tool(build(b), "top_kernels", {})[1], ]
    # every number is in a result, but 2.97 ms and 19.88 % are softmax_small's, not gemm_big's
    wrong = "`gemm_big` took 2.97 ms in 3 launches, 19.88 % of the kernel time."
    assert check_gpus(wrong, ev, devices=[0]).misattributed == ["2.97 ms (`gemm_big`)", "19.88 % (`gemm_big`)"]
    right = "`gemm_big` took 11.97 ms in 3 launches (80.12 %); `softmax_small` took 2.97 ms."
    assert check_gpus(right, ev, devices=[0]).misattributed == []


def test_a_time_is_not_a_count(profile):
    from dashcam.evidence.grounding import check

    ev = [{"kernels": [{"name": "gemm", "instances": 12, "total_ns": 253690826}]}]
    assert check("the compute kernel count is 253690826", ev) == (False, ["253690826"])
    assert check("gemm ran 12 times for 253690826 ns", ev) == (True, [])


# 3. tool-call scope

def test_no_gpu_named_means_the_whole_profile_first(profile):
    script = [call("gpu_gaps", {"gpu": 0}), call("gpu_gaps"), say(f"GPU 1 was idle {GPU1_IDLE}, GPU 0 {GPU0_IDLE}.")]
    with FakeOpenAI(script) as fake:
        ans = answer_llm("why is the GPU idle?", profile, Targets(), cfg(fake))
    refused = fake.requests[1]["messages"][-1]["content"]
    assert refused.startswith("error: the question names no GPU and this profile has 2 (0, 1): call gpu_gaps "
                              "without gpu first")
    assert [(e.tool, e.args) for e in ans.evidence] == [("gpu_gaps", {})] and ans.grounded


def test_a_window_past_the_profile_is_refused(profile):
    script = [call("gpu_gaps", {"gpu": 1, "end_ms": 117590}), call("gpu_gaps", {"gpu": 1}), say(GOOD)]
    with FakeOpenAI(script) as fake:
        ans = answer_llm(QUESTION, profile, Targets(gpus=[1]), cfg(fake))
    assert fake.requests[1]["messages"][-1]["content"] == (
        "error: end_ms 117590 is past the end of the window (0 to 117.590 ms from the start of GPU activity); "
        "pass ms inside it, or leave end_ms out for the end")
    assert [e.args for e in ans.evidence] == [{"gpu": 1}] and ans.answer == GOOD


def test_two_gpus_named_means_both_are_called(profile):
    script = [call("gpu_gaps", {"gpu": 0}), say(f"GPU 0 was idle {GPU0_IDLE}."), call("gpu_gaps", {"gpu": 1}),
              say(f"GPU 0 was idle {GPU0_IDLE}; GPU 1 {GPU1_IDLE}.")]
    with FakeOpenAI(script) as fake:
        ans = answer_llm("compare GPU 0 and GPU 1", profile, Targets(gpus=[0, 1]), cfg(fake))
    assert "Call the tools for gpu=1 first" in fake.requests[2]["messages"][-1]["content"]
    assert [e.args for e in ans.evidence] == [{"gpu": 0}, {"gpu": 1}] and ans.grounded


# a smaller first request

def test_the_first_request_offers_the_tools_the_question_needs_in_lean_schemas(profile):
    from dashcam.agent.context import count_tokens
    from dashcam.tools import tool_schemas

    with FakeOpenAI([call("gpu_gaps", {"gpu": 1}), say(GOOD)]) as fake:
        answer_llm(QUESTION, profile, Targets(gpus=[1]), cfg(fake))
    offered = [t["function"]["name"] for t in fake.requests[0]["tools"]]
    assert offered == ["overview", "workload", "top_kernels", "gpu_gaps"]
    assert count_tokens(json.dumps(fake.requests[0]["tools"])) < count_tokens(json.dumps(tool_schemas())) / 4
    with FakeOpenAI([call("sql", {"query": "SELECT count(*) AS n FROM kernels"}), say("It has kernels.")]) as fake:
        ans = answer_llm("tell me something about this file", profile, Targets(), cfg(fake))
    tools = {t["function"]["name"]: t["function"]["parameters"] for t in fake.requests[0]["tools"]}
    from dashcam.agent.llm_tools import DETAIL_TOOLS

    # every tool but the detail tools of a kernel, range or call the question does not name
    assert len(tools) == len(tool_schemas()) - len(DETAIL_TOOLS) and ans.evidence[0].tool == "sql"
    assert not set(DETAIL_TOOLS) & set(tools)
    assert "additionalProperties" not in tools["gpu_gaps"]
    assert set(tools["sql"]["properties"]) == {"query", "max_rows", "timeout_s"}  # its ignored ones left out
    # a tool outside the offered set still runs
    with FakeOpenAI([call("nccl"), say("No NCCL.")]) as fake:
        ans = answer_llm(QUESTION, profile, Targets(gpus=[1]), cfg(fake))
    assert [e.tool for e in ans.evidence] == ["nccl"]


def test_a_text_call_with_doubled_braces_is_read(profile):
    # what Qwen2.5-Coder-1.5B wrote on llama.cpp: the template's {{ }} copied into the call
    text = '{{"name": "gpu_gaps", "arguments": {"gpu": 1, "limit": 10, "min_gap_us": 0}}}}'
    with FakeOpenAI([say(text), say(GOOD)]) as fake:
        ans = answer_llm(QUESTION, profile, Targets(gpus=[1]), cfg(fake))
    assert [(e.tool, e.args) for e in ans.evidence] == [("gpu_gaps", {"gpu": 1})] and ans.answer == GOOD
    assert "Call a tool before you answer" in fake.requests[0]["messages"][-1]["content"]
