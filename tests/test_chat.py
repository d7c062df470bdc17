"""`dashcam chat` (agent/chat.py): ChatSession logic, then the real REPL in a pseudo-terminal.

The profile is dashcam.testing.scenarios.demo: GPUs 0 and 1 (H100, 132 SMs), GPU activity from 1.01 ms
(GPU 1's first copy) to 118.6 ms (GPU 0's last kernel): a 117.59 ms window. GPU 0 runs
6 x 40 kernels of 400 us = 96 ms (81.6 % kernel busy, idle 21.59 ms); GPU 1 runs 6 x 20 = 120
kernels (48 ms, 40.8 %, idle 69.59 ms). 360 kernels in all.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from dashcam.agent.chat import COMMANDS, ChatSession, ToolOutput, merge_targets, parse_run_args, read_entry, run_repl
from dashcam.agent.models import Answer, Targets
from dashcam.profile import Profile
from dashcam.testing.scenarios import demo
from dashcam.tools import TOOL_NAMES

from .fake_openai import FakeOpenAI, call, say

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def demo_path(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("chat")
    return demo(tmp / "demo.sqlite")


@pytest.fixture(scope="module")
def profile(demo_path, tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DASHCAM_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
        return Profile.open(demo_path, progress=False)


@pytest.fixture
def session(profile, demo_path, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    return ChatSession(profile, str(demo_path), offline=True)


# -- targets across turns --------------------------------------------------------------------------

def test_merge_targets_new_gpus_and_window_replace_old():
    old = Targets(gpus=[1, 2], start_ms=10, end_ms=50, kernel="gemm")
    assert merge_targets(old, Targets(gpus=[3])) == Targets(gpus=[3], start_ms=10, end_ms=50, kernel="gemm")
    assert merge_targets(old, Targets(start_ms=5)) == Targets(gpus=[1, 2], start_ms=5, end_ms=None, kernel="gemm")
    assert merge_targets(old, Targets(all_gpus=True)) == Targets(all_gpus=True, start_ms=10, end_ms=50, kernel="gemm")
    assert merge_targets(old, Targets()) == old


def test_follow_up_reuses_previous_question_with_exact_targets(session):
    first = session.handle("why is GPU 1 idle?")
    assert isinstance(first, Answer)
    assert (first.intent, first.targets) == ("idle", Targets(gpus=[1]))
    assert first.answer.startswith("GPU 1 was kernel-idle 69.59 ms")

    second = session.handle("and GPU 0?")
    assert (second.intent, second.targets) == ("idle", Targets(gpus=[0]))
    assert second.answer.startswith("GPU 0 was kernel-idle 21.59 ms")
    assert [(e.tool, e.args) for e in second.evidence] == [("gpu_gaps", {"gpu": 0}), ("overview", {})]
    assert session.turns[-1].question == "and GPU 0? (follow-up to: why is GPU 1 idle?)"

    for line, gpu in (("what about gpu 1", 1), ("same for GPU 0", 0)):
        a = session.handle(line)
        assert (a.intent, a.targets) == ("idle", Targets(gpus=[gpu])), line
        assert session.turns[-1].base == "why is GPU 1 idle?"
    # the history handed to ask(): user/assistant pairs of every earlier turn
    assert [m["role"] for m in session.history()] == ["user", "assistant"] * 4
    assert session.history()[0]["content"] == "why is GPU 1 idle?"
    assert session.history()[1]["content"] == first.answer


def test_follow_up_window_replaces_window_and_keeps_gpu(session):
    a = session.handle("which kernels take the most time on GPU 1 between 10 ms and 50 ms?")
    assert (a.intent, a.targets) == ("top_kernels", Targets(gpus=[1], start_ms=10, end_ms=50))
    b = session.handle("same for the first 20 ms")
    assert (b.intent, b.targets) == ("top_kernels", Targets(gpus=[1], start_ms=0, end_ms=20))
    c = session.handle("and GPU 0?")
    assert (c.intent, c.targets) == ("top_kernels", Targets(gpus=[0], start_ms=0, end_ms=20))
    assert c.evidence[0].args == {"gpu": 0, "start_ms": 0.0, "end_ms": 20.0, "limit": 5}


def test_follow_up_with_its_own_topic_keeps_targets_new_question_does_not(session):
    session.handle("why is GPU 1 idle?")
    a = session.handle("and the copies?")
    assert (a.intent, a.targets) == ("memcpy", Targets(gpus=[1]))
    assert session.turns[-1].question == "and the copies?"
    b = session.handle("which kernels take the most time?")
    assert (b.intent, b.targets) == ("top_kernels", Targets())


# -- default targets ---------------------------------------------------------------------------------

def test_gpu_and_window_defaults_apply_until_cleared(session):
    assert session.handle("/gpu 1") == ("questions are now about GPU 1 unless they name another "
                                        "(/gpu all clears)")
    assert session.handle("which kernels take the most time?").targets == Targets(gpus=[1])
    assert session.handle("which kernels take the most time on GPU 0?").targets == Targets(gpus=[0])
    assert session.handle("/window 10 50").startswith("questions now cover 10-50 ms")
    assert session.handle("/window") == "default window: 10-50 ms"
    assert session.handle("which kernels take the most time?").targets == Targets(gpus=[1], start_ms=10, end_ms=50)
    assert session.handle("/gpu all").startswith("default GPUs cleared")
    assert session.handle("which kernels take the most time?").targets == Targets(start_ms=10, end_ms=50)
    assert session.handle("/window off").startswith("default window cleared")
    assert session.handle("which kernels take the most time?").targets == Targets()
    assert session.handle("/gpu") == "default GPUs: none (questions name their own)"


def test_defaults_are_not_carried_by_follow_ups_once_cleared(session):
    session.handle("/gpu 1")
    session.handle("why is the GPU idle?")
    assert session.turns[-1].asked == Targets()  # the default is not part of what was asked
    session.handle("/gpu all")
    a = session.handle("and between 10 ms and 50 ms?")
    assert (a.intent, a.targets) == ("idle", Targets(start_ms=10, end_ms=50))


@pytest.mark.parametrize("line, expected", [
    ("/gpu 7", "error: GPU 7 is not in this profile (GPUs with activity: 0, 1)"),
    ("/gpu x", "error: usage: /gpu N [M ...] | all"),
    ("/window 50 10", "error: usage: /window A B (ms from the start of GPU activity, A < B) | off"),
    ("/window 10", "error: usage: /window A B (ms from the start of GPU activity, A < B) | off"),
    ("/run", "error: usage: /run TOOL [--gpu N] [--start MS] [--end MS] [--limit N] [-a KEY=VALUE]"),
    ("/run nope", "error: unknown tool 'nope'; tools: " + ", ".join(TOOL_NAMES)),  # every tool, in registry order
    ("/run overview --gpu 9", "error: GPU 9 is not in this profile; GPUs with activity: 0, 1"),
    ("/run overview --bogus 1",
     "error: unexpected argument '--bogus'; use --gpu, --start, --end, --limit or -a KEY=VALUE"),
    ("/run overview --limit 0", "error: bad parameter: limit: Input should be greater than or equal to 1"),
    ("/save", "error: usage: /save FILE.md"),
])
def test_bad_slash_arguments_are_one_line_and_session_goes_on(session, line, expected):
    assert session.handle(line) == expected
    assert session.default_gpus == [] and session.default_window is None
    assert session.handle("why is GPU 1 idle?").targets == Targets(gpus=[1])


# -- commands --------------------------------------------------------------------------------------

def test_unknown_command_lists_the_commands(session):
    assert session.handle("/frobnicate now") == ("unknown command /frobnicate; commands: /help /tools /run /sql "
                                                 "/gpu /window /clear /summary /save /model /exit")


def test_help_lists_commands_and_examples(session):
    from dashcam.agent.answers import EXAMPLE_QUESTIONS

    text = session.handle("/help")
    for c in COMMANDS:
        assert f"\n  {c} " in text
    for q in EXAMPLE_QUESTIONS:
        assert f"\n  {q}" in text


def test_tools_one_line_each(session):
    from dashcam.tools import available_tools

    lines = session.handle("/tools").splitlines()
    assert [x.split()[0] for x in lines] == [t.name for t in available_tools()]
    assert lines[0].split(None, 1)[1] == ("What the profile is: nsys and schema version, the analysis window, per "
                                          "GPU the kernel count, kernel-busy, copy-busy, busy (any activity), idle "
                                          "and kernel-idle % of the window, and the workload (the program's language "
                                          "and framework with the evidence).")


def test_parse_run_args():
    assert parse_run_args(["--gpu", "1", "--start=2.5", "--end", "9", "--limit", "3", "-a", "min_gap_us=5",
                           "--arg", "name=x y"]) == {"gpu": 1, "start_ms": 2.5, "end_ms": 9, "limit": 3,
                                                     "min_gap_us": 5, "name": "x y"}


def test_run_and_sql_return_tool_results(session):
    out = session.handle("/run top_kernels --gpu 0 --limit 3")
    assert isinstance(out, ToolOutput)
    assert out.evidence.args == {"gpu": 0, "limit": 3}
    assert out.result.kernel_count == 240 and len(out.result.kernels) == 3
    sql = session.handle('/sql SELECT count(*) AS n FROM kernels')
    assert (sql.result.columns, sql.result.rows) == (["n"], [[360]])


def test_summary_lines(session):
    # window 117.59 ms; GPU 0: 96 ms of kernels (81.6 %), GPU 1: 48 ms (40.8 %)
    lines = session.handle("/summary").splitlines()
    assert lines[0].startswith("demo.sqlite: nsys ") and " · window 117.590 ms · 2 GPUs · 2 processes · " in lines[0]
    assert lines[1].startswith("GPU 0 (NVIDIA H100 80GB HBM3): 240 kernels, kernel-busy 81.6 %, kernel-idle 21.590 "
                               "ms in ")
    assert lines[2].startswith("GPU 1 (NVIDIA H100 80GB HBM3): 120 kernels, kernel-busy 40.8 %, kernel-idle 69.590 "
                               "ms in ")
    assert lines[2].endswith(", mostly cuda_api (69.1 % of kernel-idle)")
    assert len(lines) == 3
    session.handle("/gpu 1")
    assert [x[:5] for x in session.handle("/summary").splitlines()[1:]] == ["GPU 1"]


def test_save_writes_questions_answers_evidence_and_commands(session, demo_path, tmp_path):
    a = session.handle("why is GPU 1 idle?")
    session.handle("and GPU 0?")
    session.handle("/run overview --gpu 1")
    out = tmp_path / "talk.md"
    assert session.handle(f"/save {out}") == f"saved 2 questions and 1 tool run(s) to {out}"
    text = out.read_text()
    lines = text.splitlines()
    assert lines[0] == "# dashcam chat: demo.sqlite"
    assert "## 1. why is GPU 1 idle?" in lines
    assert "_offline · intent idle · GPU 1_" in lines
    assert a.answer in lines
    assert "## 2. and GPU 0?" in lines
    assert "_answered as: and GPU 0? (follow-up to: why is GPU 1 idle?)_  " in lines
    assert "## 3. `/run overview --gpu 1`" in lines
    assert lines.count("| tool | args | key figures |") == 3
    assert any(x.startswith("| gpu_gaps | gpu=1 | GPU 1: kernel-busy 40.8 %, kernel-idle 69.59 ms (59.2 %), ")
               for x in lines)
    assert f"dashcam tool run gpu_gaps {demo_path} --gpu 1" in lines
    assert f"dashcam tool run gpu_gaps {demo_path} --gpu 0" in lines
    assert f"dashcam tool run overview {demo_path} --gpu 1" in lines
    assert lines.count("```sh") == 3


def test_multi_line_question_is_one_heading_in_the_transcript(session, tmp_path):
    a = session.handle("why is GPU 1\nidle?")
    assert (a.intent, a.targets) == ("idle", Targets(gpus=[1]))
    session.handle(f"/save {tmp_path / 't.md'}")
    assert "## 1. why is GPU 1 idle?" in (tmp_path / "t.md").read_text().splitlines()


def test_model_switch(session, monkeypatch):
    assert session.handle("/model") == "mode: offline"
    assert session.handle("/model big-model") == ("model set to big-model, but no endpoint is configured (set "
                                                  "OPENAI_API_KEY or OPENAI_BASE_URL); mode: offline")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    assert session.handle("/model") == "mode: LLM big-model at http://127.0.0.1:9/v1"
    assert session.mode() == "LLM big-model"
    assert session.handle("/model offline") == "mode: offline (deterministic planner)"
    assert session.mode() == "offline"


def test_exit_and_empty_line(session):
    assert session.handle("   ") == ""
    assert session.handle("/exit") == "bye" and session.done


# -- LLM mode: history and streaming -----------------------------------------------------------------

def test_llm_mode_streams_tokens_and_sends_history(profile, demo_path, monkeypatch):
    script = [call("gpu_gaps", {"gpu": 1}), say("GPU 1 was idle."), call("gpu_gaps", {"gpu": 0}),
              say("GPU 0 was idle too.")]
    with FakeOpenAI(script) as fake:
        monkeypatch.setenv("OPENAI_BASE_URL", fake.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        s = ChatSession(profile, str(demo_path), model="fake-model")
        assert s.mode() == "LLM fake-model"
        tokens = []
        s.on_token = tokens.append
        a = s.handle("why is GPU 1 idle?")
        assert (a.mode, a.answer, "".join(tokens)) == ("llm", "GPU 1 was idle.", "GPU 1 was idle.")
        b = s.handle("and GPU 0?")
        assert (b.answer, b.targets) == ("GPU 0 was idle too.", Targets(gpus=[0]))
        msgs = fake.requests[2]["messages"]
        assert [m["role"] for m in msgs] == ["system", "user", "assistant", "user"]
        assert msgs[1]["content"] == "why is GPU 1 idle?" and msgs[2]["content"] == "GPU 1 was idle."
        assert msgs[3]["content"].startswith("and GPU 0? (follow-up to: why is GPU 1 idle?)")
        assert "use gpu=0" in msgs[3]["content"]


# -- the terminal loop without a terminal ------------------------------------------------------------

def feed(*lines):
    it = iter(lines)

    def read(prompt=""):
        try:
            return next(it)
        except StopIteration:
            raise EOFError from None

    return read


def test_read_entry_continuation_and_triple_quotes():
    assert read_entry(feed("why is \\", "GPU 1 idle?")) == "why is \nGPU 1 idle?"
    assert read_entry(feed('"""why is', "GPU 1", 'idle?"""')) == "why is\nGPU 1\nidle?"
    assert read_entry(feed('"""why is GPU 1 idle?"""')) == "why is GPU 1 idle?"
    assert read_entry(feed("why is GPU 1 idle?", "next")) == "why is GPU 1 idle?"


def test_run_repl_cancels_an_answer_and_goes_on(session, monkeypatch):
    from io import StringIO

    from rich.console import Console

    def slow(*a, **k):
        raise KeyboardInterrupt

    real = session.answer
    calls = []

    def answer(line):
        calls.append(line)
        return slow() if len(calls) == 1 else real(line)

    monkeypatch.setattr(session, "answer", answer)
    buf = StringIO()
    code = run_repl(session, Console(file=buf, width=200), read=feed("why is GPU 1 idle?", "why is GPU 0 idle?",
                                                                       "/nope"))
    out = buf.getvalue()
    assert code == 0
    assert out.splitlines()[0] == "dashcam chat · demo.sqlite · GPUs 0, 1 · offline · /help for commands"
    assert "cancelled" in out and "GPU 0 was kernel-idle 21.59 ms" in out and "unknown command /nope" in out


# -- the real REPL in a pseudo-terminal --------------------------------------------------------------

try:
    import pexpect
except ImportError:  # the `test` extra installs it
    pexpect = None
needs_pexpect = pytest.mark.skipif(pexpect is None or sys.platform == "win32", reason="pexpect and a pty needed")
PROMPT = "dashcam> "
TIMEOUT = 90  # generous: two cores, loaded


def spawn(demo_path, tmp_path, **env):
    child_env = {**os.environ, "DASHCAM_CACHE_DIR": str(tmp_path / "cache"), "TERM": "dumb", "COLUMNS": "200",
                 "LINES": "50", **env}
    for k in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "DASHCAM_DEBUG"):
        child_env.pop(k, None)
    child = pexpect.spawn(sys.executable, ["-m", "dashcam.cli", "chat", str(demo_path), "--offline"],
                          env=child_env, cwd=str(tmp_path), encoding="utf-8", timeout=TIMEOUT,
                          dimensions=(50, 200))
    child.expect_exact("dashcam chat · demo.sqlite · GPUs 0, 1 · offline · /help for commands")
    child.expect_exact(PROMPT)
    return child


def finish(child) -> int:
    child.sendcontrol("d")
    child.expect(pexpect.EOF)
    child.close()
    return child.exitstatus


@needs_pexpect
def test_repl_two_turns_slash_command_and_ctrl_d(demo_path, tmp_path):
    child = spawn(demo_path, tmp_path)
    try:
        child.sendline("why is GPU 1 idle?")
        child.expect(r"GPU 1 was kernel-idle 69\.59 ms")
        child.expect_exact(f"dashcam tool run gpu_gaps {demo_path} --gpu 1")
        child.expect_exact(PROMPT)
        child.sendline("and GPU 0?")
        child.expect(r"GPU 0 was kernel-idle 21\.59 ms")
        child.expect_exact(f"dashcam tool run gpu_gaps {demo_path} --gpu 0")
        child.expect_exact(PROMPT)
        child.sendline("/tools")
        child.expect(r"small_kernels +How much of each GPU's kernel time")
        child.expect_exact(PROMPT)
        assert finish(child) == 0
    finally:
        child.close(force=True)
    history = (tmp_path / "cache" / "chat_history").read_text()
    assert "why is GPU 1 idle?" in history and "and GPU 0?" in history


@needs_pexpect
def test_repl_ctrl_c_cancels_answer_and_clears_prompt(demo_path, tmp_path):
    child = spawn(demo_path, tmp_path, DASHCAM_CHAT_TEST_DELAY="3")
    try:
        child.send("half a question")
        child.expect_exact("half a question")
        child.sendcontrol("c")  # at the prompt: the line is dropped
        child.expect_exact(PROMPT)
        child.sendline("/window")  # a command, so the half line is gone
        child.expect_exact("default window: none (the whole profile)")
        child.expect_exact(PROMPT)
        child.sendline("why is GPU 1 idle?")
        child.expect_exact("(test delay 3 s)")  # the REPL is inside the answer
        child.sendcontrol("c")
        child.expect_exact("cancelled")
        child.expect_exact(PROMPT)
        child.sendline("why is GPU 0 idle?")  # the session goes on
        child.expect(r"GPU 0 was kernel-idle 21\.59 ms")
        child.expect_exact(PROMPT)
        assert finish(child) == 0
    finally:
        child.close(force=True)
    assert "half a question" not in (tmp_path / "cache" / "chat_history").read_text()


def test_chat_on_what_the_cpu_did_and_on_graphs(tmp_path, monkeypatch):
    """Issue 17 and 18's questions in a conversation. dataloader_wait (testing/host_cpu.py): GPU 0's idle time is
    98.6 % cpu_work, 42 ms of it in poll on the main thread; "and GPU 0?" repeats the question for it.
    graph_decode (testing/features.py): 250 of 750 kernels from 5 graph launches, 90.9 % of the kernel time; the
    500 eager launches are launch-bound, so graphs would help them."""
    from dashcam.testing import scenarios

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.setenv("DASHCAM_CACHE_DIR", str(tmp_path / "cache"))
    path = scenarios.build("dataloader_wait", tmp_path / "dl.sqlite")
    s = ChatSession(Profile.open(path, progress=False), str(path), offline=True)
    a = s.handle("is the dataloader the bottleneck?")
    assert a.intent == "cpu" and a.answer.startswith("Likely") and "`poll`" in a.answer and "42 ms" in a.answer
    b = s.handle("which function blocks?")
    assert b.intent == "cpu" and "`poll`" in b.answer
    c = s.handle("and GPU 0?")
    assert c.intent == "cpu" and c.targets.gpus == [0]

    path = scenarios.build("graph_decode", tmp_path / "g.sqlite")
    s = ChatSession(Profile.open(path, progress=False), str(path), offline=True)
    a = s.handle("are CUDA graphs used?")
    assert a.intent == "graphs" and a.answer.startswith("Yes") and "90.9 %" in a.answer
    b = s.handle("would CUDA graphs help?")
    assert b.intent == "launch" and "Graphs would help GPU 0" in b.answer


def test_llm_chat_shows_no_reply_it_replaces_and_saves_what_the_screen_showed(profile, demo_path, tmp_path,
                                                                              monkeypatch, capsys):
    from io import StringIO

    from rich.console import Console

    from dashcam.agent.llm import NO_TOOL_MARK, REWRITE_MARK

    made_up = "GPU 1 is idle 97 % of the time because of NCCL."
    script = [say(made_up),                                   # no tool: replaced by the offline answer
              call("gpu_gaps", {"gpu": 1}), say("GPU 1 idled 12345.6 ms."), say("GPU 1 was idle 59.18 %.")]
    shown: list[str] = []
    with FakeOpenAI(script) as fake:
        monkeypatch.setenv("OPENAI_BASE_URL", fake.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        s = ChatSession(profile, str(demo_path), model="fake-model")
        s.on_token = shown.append
        first = s.handle("why is GPU 1 idle?")
        screen_first = "".join(shown)
        shown.clear()
        second = s.handle("why is GPU 1 idle?")
        screen_second = "".join(shown)
    # the made-up reply never reached the screen: only the mark and the offline answer did
    assert first.mode == "offline" and made_up not in screen_first
    assert screen_first == NO_TOOL_MARK + first.answer and first.shown == screen_first
    # a streamed answer replaced for grounding stays on the screen, marked, with the rewrite after it
    assert screen_second == "GPU 1 idled 12345.6 ms." + REWRITE_MARK + "GPU 1 was idle 59.18 %."
    assert second.answer == "GPU 1 was idle 59.18 %." and second.shown == screen_second
    s.cmd_save(str(tmp_path / "chat.md"))
    saved = (tmp_path / "chat.md").read_text()
    assert made_up not in saved and screen_second.strip() in saved and NO_TOOL_MARK.strip() in saved
    # and the terminal loop prints the same (no second copy of a streamed answer)
    with FakeOpenAI([call("gpu_gaps", {"gpu": 1}), say("GPU 1 was idle 59.18 %.")]) as fake:
        monkeypatch.setenv("OPENAI_BASE_URL", fake.base_url)
        s = ChatSession(profile, str(demo_path), model="fake-model")
        buf = StringIO()
        capsys.readouterr()
        run_repl(s, Console(file=buf, width=200), read=feed("why is GPU 1 idle?"))
    streamed = capsys.readouterr().out
    assert streamed == "GPU 1 was idle 59.18 %." and "GPU 1 was idle 59.18 %." not in buf.getvalue()
    assert "evidence" in buf.getvalue().lower() or "gpu_gaps" in buf.getvalue()

# -- going deeper, clearing, the GPU of a step follow-up, the strip's window (issue 25) ---------------------

def test_why_after_an_idle_answer_answers_its_cause(session):
    """GPU 1 idles 69.59 ms, mostly `cuda_api` (the 8 ms cudaMemcpy of each step): "why?" asks the API."""
    first = session.handle("why is GPU 1 idle?")
    assert first.intent == "idle"
    deeper = session.handle("why?")
    assert (deeper.intent, deeper.targets.gpus) == ("api", [1])
    assert "`cudaMemcpy`: 6 calls" in deeper.answer


def test_why_after_top_kernels_analyses_the_first_kernel(session):
    session.handle("which kernels take the most time?")
    deeper = session.handle("tell me more")
    assert (deeper.intent, deeper.targets.kernel) == ("top_kernels", "ampere_sgemm_128x64_tn")
    assert "256 blocks of 128 threads on a GPU with 132 SMs" in deeper.answer


def test_clear_forgets_the_conversation(session):
    session.handle("why is GPU 1 idle?")
    assert session.handle("clear").startswith("conversation cleared")
    assert session.turns == []
    again = session.handle("and GPU 0?")  # nothing to follow up: a question of its own
    assert again.targets.gpus == [0] and "follow-up" not in again.question
    assert "/clear" in COMMANDS


def test_a_step_follow_up_keeps_the_gpu_of_the_last_answer(session):
    """Step 3's answer is about GPU 1 (the idle one); "and step 4?" stays on it instead of mixing both GPUs."""
    first = session.handle("what happened in step 3?")
    assert first.gpus[0] == 1
    nxt = session.handle("and step 4?")
    assert (nxt.targets.step, nxt.targets.gpus) == (4, [1])


def test_the_gap_strip_follows_the_window(profile):
    """The strip under an answer shows the largest gap inside the answer's window (chat's /window): in
    [15, 25] ms that is the gap gpu_gaps ranks first there (8.91 ms on GPU 1), not the whole profile's 12.2 ms."""
    from rich.console import Console

    from dashcam.reports.timeline import small_strip
    from dashcam.tools import get_tool

    console = Console(record=True, width=100)
    answer = Answer(question="q", answer="", mode="offline", intent="idle", targets=Targets(start_ms=15, end_ms=25))
    small_strip(profile, answer, console)
    gaps = get_tool("gpu_gaps")(profile, {"start_ms": 15, "end_ms": 25})
    best = max((d for d in gaps.devices if d.largest_gaps), key=lambda d: d.largest_gaps[0].duration_ns)
    expected = best.largest_gaps[0].duration_ns
    assert (best.device_id, expected) == (1, 8_910_000)
    assert f"largest gap on GPU {best.device_id}: {expected / 1e6:.3f} ms" in console.export_text()
