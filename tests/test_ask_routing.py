"""Questions as people type them on the shipped example: the GPU an answer talks about, its evidence rows,
"the other one" in chat, two questions in one, the fallback, and what `ask --json` records."""
import json
from pathlib import Path

import pytest

from dashcam.agent.ask import ask
from dashcam.agent.chat import ChatSession
from dashcam.profile import Profile
from dashcam.text.figures import evidence_row

from .conftest import run_cli

DEMO = Path(__file__).resolve().parents[1] / "examples" / "demo.sqlite"


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DASHCAM_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
        yield Profile.open(DEMO, progress=False)


def gaps_row(answer) -> str:
    e = next(e for e in answer.evidence if e.tool == "gpu_gaps")
    return evidence_row(e.result, gpus=answer.gpus)


def test_second_gpu_is_gpu_1_and_its_evidence_shows_gpu_1(demo):
    a = ask("why is my second GPU idle?", demo, offline=True)
    assert a.targets.gpus == [1] and a.gpus == [1] and a.intent == "idle"
    assert a.answer.startswith("GPU 1 was kernel-idle 69.59 ms (59.2 % of the 117.59 ms window)")
    assert "GPU 1:" in gaps_row(a) and "GPU 0:" not in gaps_row(a)


def test_an_answer_without_a_named_gpu_shows_the_gpus_it_names_main_first(demo):
    a = ask("why is the gpu idle?", demo, offline=True)  # the idlest first, then the comparison
    assert a.targets.gpus == [] and a.gpus == [1, 0]
    row = gaps_row(a)
    assert row.index("GPU 1:") < row.index("GPU 0:")


def test_the_other_one_answers_for_the_other_gpu(demo):
    s = ChatSession(demo, str(DEMO), offline=True)
    first = s.handle("why is my second GPU idle?")
    other = s.handle("and the other one?")
    assert other.gpus == [0] and other.answer != first.answer
    assert other.answer.startswith("GPU 0 was kernel-idle 21.59 ms (18.4 % of the 117.59 ms window)")
    assert "GPU 0:" in gaps_row(other) and "GPU 1:" not in gaps_row(other)
    assert "| gpu_gaps | gpu=0 | GPU 0:" in s.transcript()


def test_the_other_gpu_after_an_answer_about_the_idlest(demo):
    s = ChatSession(demo, str(DEMO), offline=True)
    s.handle("why is the gpu idle?")  # talks about GPU 1 first
    assert s.handle("what about the other gpu?").gpus == [0]


def test_a_line_pointing_back_at_the_last_window_keeps_it(demo):
    s = ChatSession(demo, str(DEMO), offline=True)
    s.handle("why is gpu 0 idle between 10 and 50 ms?")
    then = s.handle("which kernels run then?")
    assert [(c.name, c.args) for c in then.tool_calls] == [
        ("top_kernels", {"gpu": 0, "start_ms": 10.0, "end_ms": 50.0, "limit": 5})]
    assert then.answer.startswith("The top kernels on GPU 0 by GPU time, of 31.6 ms summed over 80 kernels")
    later = s.handle("what should i fix then?")  # "then" as "in that case": a question of its own
    assert later.intent == "healthy" and all("start_ms" not in c.args for c in later.tool_calls)


def test_two_questions_in_one_line_are_answered_in_order(demo):
    a = ask("which kernels take the most time, and are my copies pinned?", demo, offline=True)
    assert a.intents == ["top_kernels", "memcpy"] and a.intent == "top_kernels"
    tools = [c.name for c in a.tool_calls]
    assert tools.index("top_kernels") < tools.index("memcpy")
    first, second = a.answer.split("\n\n")
    assert "ampere_sgemm_128x64_tn" in first and "pageable" in second and a.grounded


def test_each_part_of_a_line_keeps_its_own_gpu_and_a_named_gpu_carries_forward(demo):
    """A GPU named in the second part is not the first part's scope; a GPU named first is the later parts'."""
    a = ask("first tell me which kernels take the most time, then why gpu 1 is idle", demo, offline=True)
    assert a.intents == ["top_kernels", "idle"]
    assert [(c.name, c.args) for c in a.tool_calls][:2] == [("top_kernels", {"limit": 5}), ("gpu_gaps", {"gpu": 1})]
    first, second = a.answer.split("\n\n")
    assert first.startswith("The top kernels by GPU time, of 144 ms summed over 360 kernels")  # both GPUs
    assert second.startswith("GPU 1 was kernel-idle 69.59 ms") and a.grounded
    b = ask("why is gpu 1 idle and which kernels take the most time", demo, offline=True)
    assert ("top_kernels", {"gpu": 1, "limit": 5}) in [(c.name, c.args) for c in b.tool_calls]


def test_part_targets_scope_and_subject():
    from dashcam.agent.models import Targets
    from dashcam.agent.targets import part_targets

    line = Targets(gpus=[1], start_ms=10.0, end_ms=20.0, api="cudaMemcpy")
    first, second = part_targets(line, ["how long do cudaMemcpy calls take", "why is gpu 1 idle between 10 and 20 ms"])
    assert (first.gpus, first.start_ms, first.end_ms, first.api) == ([], None, None, "cudaMemcpy")
    assert (second.gpus, second.start_ms, second.end_ms, second.api) == ([1], 10.0, 20.0, "cudaMemcpy")
    # GPUs that no part names came from the conversation: every part keeps the line's targets
    chat = Targets(gpus=[0])
    assert part_targets(chat, ["which kernels run then", "how busy are the copies"]) == [chat, chat]
    chat_window = Targets(start_ms=5.0, end_ms=9.0)
    assert part_targets(chat_window, ["which kernels run then", "how busy are the copies"]) == [chat_window] * 2


def test_a_question_nothing_places_gets_the_verdict_and_what_else(demo):
    a = ask("hmm, thoughts?", demo, offline=True)
    health = ask("is this profile healthy?", demo, offline=True)
    assert a.intent == "unknown" and a.answer.startswith(health.answer)
    assert "You can also ask about" in a.answer and "CUDA API call costs" in a.answer
    assert "I can only answer" not in a.answer
    off_topic = ask("tell me a joke about bananas", demo, offline=True)  # "tell me ... about" is not "tell me about"
    assert off_topic.intent == "unknown" and off_topic.answer.startswith(health.answer)
    assert ask("tell me about this profile", demo, offline=True).intent == "overview"


def test_cuda_api_question_names_the_function_as_the_profile_spells_it(demo):
    a = ask("how long do cudamemcpy calls take", demo, offline=True)
    assert a.intent == "api" and a.targets.api == "cudaMemcpy"
    # the one function named: its figures, then where it is called and what the GPU ran meanwhile (api_detail)
    assert [(c.name, c.args) for c in a.tool_calls] == [("api", {"name": "cudaMemcpy"}),
                                                        ("api_detail", {"name": "cudaMemcpy"})]
    assert a.answer.startswith("`cudaMemcpy`: 6 calls from one thread, 48.17 ms in all") and a.grounded
    assert "`cudaMemcpy` is called from the NVTX range `train_step <n>` (6 calls)." in a.answer


def test_a_named_cuda_function_without_calls_is_answered_by_its_variants_said_as_such(demo):
    a = ask("how long do cudaLaunch calls take", demo, offline=True)  # the demo calls cudaLaunchKernel only
    assert [(c.name, c.args) for c in a.tool_calls][0] == ("api", {"name": "cudaLaunch"})  # the tool finds them
    assert next(e for e in a.evidence if e.tool == "api").result["variants_of"] == "cudaLaunch"
    assert a.answer.startswith("There is no call of `cudaLaunch` itself in the 117.59 ms window; its variants: "
                               "`cudaLaunchKernel`. `cudaLaunchKernel`: 360 calls from 2 threads, 2.16 ms in all")
    assert a.grounded
    none = ask("how long do cudaFree calls take?", demo, offline=True)  # no variant either: said plainly
    assert none.answer.startswith("There is no call of `cudaFree` in the 117.59 ms window.")


def test_a_question_about_overlap_gets_the_copy_time_beside_kernels(tmp_path, monkeypatch):
    """Planted: one GPU, a kernel 1-11 ms on stream 7; a 4 ms pinned copy at 6-10 ms on stream 8 (under the
    kernel) and a 2 ms one at 13-15 ms (alone): 6 ms of copies, 4 ms of it (66.667 %) beside the kernel."""
    from dashcam.testing.builder import ExportBuilder

    ms = 1_000_000
    b = ExportBuilder("2024")
    b.gpu(0)
    b.process(100)
    b.launch(0, ms - 20_000, ms - 10_000, ms, 11 * ms)
    b.copy_call(0, 6 * ms - 10_000, 6 * ms - 5_000, 6 * ms, 10 * ms, 1 << 30, stream=8)
    b.copy_call(0, 13 * ms - 10_000, 13 * ms - 5_000, 13 * ms, 15 * ms, 1 << 29, stream=8)
    monkeypatch.setenv("DASHCAM_CACHE_DIR", str(tmp_path / "cache"))
    p = Profile.open(b.write(tmp_path / "overlap.sqlite"), progress=False)
    a = ask("do the copies overlap with compute?", p, offline=True)
    assert a.intent == "memcpy" and a.grounded
    assert "On GPU 0, 4 ms of its 6 ms of copies and memsets (66.7 %) ran while its kernels ran." in a.answer
    plain = ask("how fast are the copies?", p, offline=True)  # not asked: not said
    assert "ran while its kernels ran" not in plain.answer


def test_copies_that_never_run_beside_kernels_are_said_to_take_turns(demo):
    a = ask("are the copies hidden behind kernels?", demo, offline=True)  # the demo's copies stall its kernels
    assert a.intent == "memcpy"
    assert "On GPU 1, none of its 48 ms of copies and memsets ran while its kernels ran: they took turns." in a.answer


def test_ask_json_records_the_intent_its_score_and_the_runner_up(tmp_path):
    r = run_cli("ask", "is the cpu blocked on the gpu?", DEMO, "--offline", "--json", cache=tmp_path)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["intent"] == "sync" and out["intent_score"] > out["runner_up_score"] > 0
    assert out["runner_up"] and out["intents"] == ["sync"] and out["gpus"] == [1]
    assert {"api", "other_gpu", "ranks"} <= set(out["targets"])


# -- LLM mode: the same targets, the same evidence rows, the same never-refuse fallback -------------------------
# (the scripted chat-completions server on 127.0.0.1, tests/fake_openai.py)

def _llm_env(monkeypatch, fake):
    monkeypatch.setenv("OPENAI_BASE_URL", fake.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")


def _user_message(request) -> str:
    return next(m["content"] for m in reversed(request["messages"]) if m["role"] == "user")


def test_llm_mode_gets_the_ordinal_gpu_and_its_evidence_shows_it(demo, monkeypatch):
    from .fake_openai import FakeOpenAI, call, say

    text = "GPU 1 was idle 69.59 ms of the 117.59 ms window."
    with FakeOpenAI([call("gpu_gaps", {}), say(text)]) as fake:  # the model asks for every GPU
        _llm_env(monkeypatch, fake)
        a = ask("why is my second GPU idle?", demo)
    assert a.mode == "llm" and a.answer == text and a.grounded
    assert a.targets.gpus == [1] and a.gpus == [1] and a.intent == "idle"
    assert "The question names GPU 1; use gpu=1." in _user_message(fake.requests[0])
    row = gaps_row(a)  # the result holds both GPUs; the evidence shows the one asked about
    assert "GPU 1:" in row and "GPU 0:" not in row


def test_llm_mode_never_refuses_a_question_it_cannot_place(demo, monkeypatch):
    from dashcam.agent.llm import NO_TOOL_NOTE

    from .fake_openai import FakeOpenAI, say

    refusal = "I can only answer questions about this profile's timeline."
    with FakeOpenAI([say(refusal)]) as fake:  # the model gives up without calling a tool
        _llm_env(monkeypatch, fake)
        a = ask("hmm, thoughts?", demo)
    health = ask("is this profile healthy?", demo, offline=True)
    assert len(fake.requests) == 1 and a.mode == "offline" and NO_TOOL_NOTE in a.notes
    assert a.answer.startswith(health.answer) and "You can also ask about" in a.answer
    assert refusal not in a.answer and a.grounded


def test_llm_mode_failing_still_answers_with_the_asked_gpu(demo, monkeypatch):
    from .fake_openai import FakeOpenAI, error

    with FakeOpenAI([error(500)]) as fake:
        _llm_env(monkeypatch, fake)
        a = ask("why is my second GPU idle?", demo)
    assert a.mode == "offline" and any(n.startswith("LLM failed") for n in a.notes)
    assert a.answer.startswith("GPU 1 was kernel-idle 69.59 ms") and a.gpus == [1]


def test_llm_chat_the_other_one_is_the_other_gpu(demo, monkeypatch):
    from .fake_openai import FakeOpenAI, call, say

    script = [call("gpu_gaps", {"gpu": 1}), say("GPU 1 was idle 69.59 ms."),
              call("gpu_gaps", {"gpu": 0}), say("GPU 0 was idle 21.59 ms.")]
    with FakeOpenAI(script) as fake:
        _llm_env(monkeypatch, fake)
        s = ChatSession(demo, str(DEMO))
        first = s.handle("why is my second GPU idle?")
        other = s.handle("and the other one?")
    assert first.mode == other.mode == "llm" and other.gpus == [0]
    assert "The question names GPU 1; use gpu=1." in _user_message(fake.requests[0])
    assert "The question names GPU 0; use gpu=0." in _user_message(fake.requests[2])
    assert "GPU 0:" in gaps_row(other) and "GPU 1:" not in gaps_row(other)


def test_ask_loads_only_what_the_answer_needs(tmp_path):
    """Median offline ask under 1 s with start-up (issue 14): "why is GPU 1 idle?" on the example, cache warm,
    imports neither pyarrow (no Parquet read of its own), nor the OpenAI SDK, nor the findings engine with every
    rule's tools, nor the answers of other intents, nor Dask, nor the Chinese tables (issue 29)."""
    import subprocess
    import sys

    heavy = ("pyarrow", "openai", "dashcam.findings.engine", "dashcam.tools.cuda_graphs", "dashcam.agent.answers.cpu",
             "dask", "tiktoken", "jieba", "opencc", "dashcam.agent.chinese")  # English: no Chinese tables (han.py)
    code = ("import runpy, sys\n"
            f"sys.argv = ['dashcam', 'ask', 'why is GPU 1 idle?', {str(DEMO)!r}]\n"
            "try:\n    runpy.run_module('dashcam.cli', run_name='__main__')\nexcept SystemExit:\n    pass\n"
            f"print('LOADED', sorted(m for m in {heavy!r} if m in sys.modules))\n")
    env = {k: v for k, v in __import__("os").environ.items() if not k.startswith(("OPENAI_", "DASHCAM_"))}
    env["DASHCAM_CACHE_DIR"] = str(tmp_path)
    for _ in range(2):  # the first run builds the cache (pyarrow writes it); the second is the warm ask
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
        assert r.returncode == 0, r.stderr
    assert "GPU 1 was kernel-idle 69.59 ms" in r.stdout and r.stdout.strip().endswith("LOADED []")
