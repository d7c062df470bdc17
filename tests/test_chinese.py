"""Chinese questions (agent/chinese.py), questions in languages dashcam does not read (agent/language.py).

Planted profiles (dashcam.testing.scenarios), facts by construction: demo has GPUs 0 and 1, GPU 1 idle
69.59 ms (59.2 % of the 117.59 ms window), mostly inside `cudaMemcpy`; launch_bound's costliest kernel is
`vectorized_elementwise_kernel` (600 launches); sync_stall's host waits in `cudaStreamSynchronize`;
imbalance has four GPUs, GPU 2 the straggler.
"""
from __future__ import annotations

import pytest

from dashcam.agent.ask import ask
from dashcam.agent.chinese import number, segment, translate
from dashcam.agent.intents import classify, classify_question
from dashcam.agent.language import not_understood, offline_note, reply_language
from dashcam.agent.llm import LLMConfig, answer_llm
from dashcam.agent.models import Answer, Targets
from dashcam.agent.targets import parse_targets
from dashcam.agent.words import tokens
from dashcam.profile import Profile
from dashcam.testing.scenarios import demo, imbalance, launch_bound, sync_stall

from .conftest import run_cli
from .fake_openai import FakeOpenAI, call, say


@pytest.fixture(scope="module")
def profiles(tmp_path_factory):
    """The planted profiles, built and opened once for the module (their caches in a temp dir)."""
    tmp = tmp_path_factory.mktemp("zh")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DASHCAM_CACHE_DIR", str(tmp / "cache"))
        made = {name: make(tmp / f"{name}.sqlite") for name, make in
                (("demo", demo), ("launch_bound", launch_bound), ("sync_stall", sync_stall), ("imbalance", imbalance))}
        yield {name: Profile.open(path, progress=False) for name, path in made.items()}, made


# -- segmentation and normalisation ---------------------------------------------------------------

@pytest.mark.parametrize("traditional,simplified", [
    ("為什麼 GPU 1 閒置?", "为什么 GPU 1 闲置?"), ("哪個 kernel 最耗時", "哪个 kernel 最耗时"),
    ("記憶體搬移花了多少時間？", "记忆体搬移花了多少时间？"), ("主機卡在同步調用裡多久", "主机卡在同步调用里多久"),
    ("第二張卡的啟動延遲", "第二张卡的启动延迟")])
def test_traditional_and_simplified_give_the_same_words(traditional, simplified):
    assert translate(traditional).english == translate(simplified).english
    assert tokens(traditional, {}) == tokens(simplified, {})


def test_words_become_the_english_the_classifier_reads():
    assert translate("為什麼 GPU 1 閒置?").english == "why GPU 1 idle ?"
    assert translate("哪个kernel最耗时").english == "which kernel take most time"
    assert translate("卡在哪").english == "where is the bottleneck"          # 卡 here is "stuck", not a card
    assert translate("记忆体搬移").english == translate("内存搬移").english == "memory transfer"
    assert tokens("GPU 1 為什麼閒置", {}) == tokens("GPU 1 why idle", {})


def test_mixed_text_keeps_names_as_written():
    out = translate("ampere_sgemm_128x128_nn 這個kernel為什麼這麼慢").english
    assert out.startswith("ampere_sgemm_128x128_nn this kernel why")
    assert "cudaStreamSynchronize" in translate("cudaStreamSynchronize 調用要多久").english
    assert translate("why is GPU 1 idle?").english == "why is GPU 1 idle?"   # no Chinese: unchanged


def test_segmentation_keeps_table_words_whole():
    assert segment("记忆体搬移") == ["记忆体", "搬移"]
    assert "启动延迟" in segment("启动延迟有多大")


@pytest.mark.parametrize("text,n", [("2", 2), ("二", 2), ("两", 2), ("十", 10), ("十二", 12), ("二十", 20),
                                    ("二十三", 23), ("零", 0), ("十二三", None)])
def test_chinese_numerals(text, n):
    assert number(text) == n


@pytest.mark.parametrize("question,expected", [
    ("第二張卡為什麼閒置", {"gpus": [1]}), ("第2块GPU空闲吗", {"gpus": [1]}), ("1号卡为什么这么闲", {"gpus": [1]}),
    # 第N counts from one, as "the second card" is GPU 1: the 4th iteration is step 3 (the index from 0)
    ("卡1 的同步", {"gpus": [1]}), ("第4次迭代发生了什么", {"step": 3}), ("第三步花了多久", {"step": 2}),
    ("第十二步", {"step": 11}), ("步骤3花了多久", {"step": 3}),
    ("30毫秒之后 GPU 0 闲置吗", {"gpus": [0], "start_ms": 30.0}),
    ("前20毫秒的 kernel", {"start_ms": 0.0, "end_ms": 20.0}),
    ("在2秒到3秒之間 GPU 1 做了什麼", {"gpus": [1], "start_ms": 2000.0, "end_ms": 3000.0})])
def test_targets_read_like_the_english(question, expected):
    got = parse_targets(question).model_dump()
    assert {k: got[k] for k in expected} == expected


def test_ordinals_count_the_profiles_gpus_as_english_does(profiles):
    opened, _ = profiles
    four = opened["imbalance"]
    assert parse_targets("最后一张卡用了几个流", four).gpus == parse_targets("the last gpu", four).gpus == [3]
    assert parse_targets("第三块GPU为什么吃不饱", four).gpus == parse_targets("the third gpu", four).gpus == [2]


@pytest.mark.parametrize("question,intent", [
    ("為什麼 GPU 1 閒置?", "idle"), ("哪个kernel最耗时?", "top_kernels"), ("記憶體搬移花了多少時間？", "memcpy"),
    ("主机卡在同步上多久", "sync"), ("启动延迟大吗", "launch"), ("NCCL 通信有没有和计算重叠", "nccl"),
    ("每步多长时间", "iterations"), ("有没有统一内存缺页", "memory"), ("比較一下兩張卡", "compare_gpus"),
    ("瓶颈在哪里", "slow")])
def test_chinese_routes_like_its_english_twin(question, intent):
    assert classify(question) == intent


def test_two_questions_in_one_chinese_line():
    c = classify_question("哪個 kernel 最重？還有主機是不是卡在同步上")
    assert c.intents == ["top_kernels", "sync"]


# -- answers on planted profiles ------------------------------------------------------------------

def test_idle_question_in_traditional_chinese(profiles):
    opened, _ = profiles
    a = ask("為什麼 GPU 1 閒置?", opened["demo"], offline=True)
    first, rest = a.answer.split("\n", 1)
    assert first == offline_note("為什麼 GPU 1 閒置?") and "以英文回答" in first and "Answering in English" in first
    assert a.intent == "idle" and a.targets.gpus == [1] and a.question == "為什麼 GPU 1 閒置?"
    assert "69.59 ms" in rest and "59.2 %" in rest and "cudaMemcpy" in rest
    assert a.grounded and a.tool_calls[0].name == "gpu_gaps" and a.tool_calls[0].args == {"gpu": 1}


def test_second_card_in_simplified_chinese_is_gpu_1(profiles):
    opened, _ = profiles
    a = ask("为什么第二张卡一半时间什么都不做", opened["demo"], offline=True)
    assert a.intent == "idle" and a.targets.gpus == [1] and "69.59 ms" in a.answer
    assert a.answer.startswith("（以下以英文回答：离线")     # the note in the question's script


def test_costliest_kernel_mixed_with_english(profiles):
    opened, _ = profiles
    a = ask("哪个kernel最耗时?", opened["launch_bound"], offline=True)
    assert a.intent == "top_kernels" and "vectorized_elementwise_kernel" in a.answer and "600" in a.answer
    assert a.grounded


def test_sync_question_in_chinese(profiles):
    opened, _ = profiles
    a = ask("CPU 是不是被 GPU 阻塞了", opened["sync_stall"], offline=True)
    assert a.intent == "sync" and "cudaStreamSynchronize" in a.answer and a.grounded


def test_english_answers_have_no_note(profiles):
    opened, _ = profiles
    a = ask("why is GPU 1 idle?", opened["demo"], offline=True)
    assert "以英文回答" not in a.answer and a.answer.startswith("GPU 1 was kernel-idle 69.59 ms")


# -- languages dashcam does not read ---------------------------------------------------------------

@pytest.mark.parametrize("question,language", [
    ("GPU 1 はなぜアイドル状態なのですか", "Japanese"), ("GPU 1은 왜 유휴 상태인가요", "Korean"),
    ("почему GPU 1 простаивает", "Cyrillic"), ("لماذا وحدة GPU 1 خاملة", "Arabic")])
def test_other_languages_are_told_so(profiles, question, language):
    opened, _ = profiles
    a = ask(question, opened["demo"], offline=True)
    assert a.answer.startswith("dashcam does not understand questions in") and language in a.answer
    assert "English and in Chinese" in a.answer and "\n" not in a.answer
    assert a.intent == "unknown" and a.tool_calls == [] and a.grounded


def test_chinese_with_no_known_word_is_told_so(profiles):
    opened, _ = profiles
    a = ask("今天天氣怎麼樣", opened["demo"], offline=True)
    assert a.answer.startswith("dashcam 看不懂這個問題") and a.tool_calls == []
    assert not_understood("为什么") is not None          # a question word alone says nothing to answer
    assert not_understood("为什么 GPU 1 闲置") is None and not_understood("why is GPU 1 idle?") is None
    assert not_understood("kernel durations in μs") is None  # a Greek letter in a unit is not Greek


def test_cli_exit_code_for_an_unread_language(profiles, tmp_path):
    _, made = profiles
    p = run_cli("ask", "GPU 1 はなぜアイドル状態なのですか", str(made["demo"]), cache=tmp_path / "c")
    assert p.returncode == 0, p.stderr
    assert "does not understand questions in Japanese" in p.stdout
    p = run_cli("ask", "哪个kernel最耗时?", str(made["demo"]), cache=tmp_path / "c")
    assert p.returncode == 0 and p.stderr == ""                 # jieba loads quietly
    assert "以英文回答" in p.stdout and "ampere_sgemm_128x64_tn" in p.stdout


# -- LLM mode: the reply's language ------------------------------------------------------------------

@pytest.mark.parametrize("question,script", [("為什麼 GPU 1 閒置?", "Traditional"),
                                             ("为什么 GPU 1 闲置?", "Simplified")])
def test_llm_is_told_to_answer_in_the_questions_language(profiles, question, script):
    opened, _ = profiles
    reply = "GPU 1 閒置 69.59 ms（59.18 %），主要在 `cudaMemcpy`。"
    with FakeOpenAI([call("gpu_gaps", {"gpu": 1}), say(reply)]) as fake:
        config = LLMConfig(model="fake-model", base_url=fake.base_url, api_key="test-key", max_retries=0)
        a = answer_llm(question, opened["demo"], Targets(gpus=[1]), config,
                       fallback=lambda: Answer(question=question, answer="offline", mode="offline"))
    user = fake.requests[0]["messages"][1]["content"]
    assert user.startswith(question) and reply_language(question) in user
    assert f"write the answer in Chinese ({script} characters" in user
    assert a.mode == "llm" and a.answer == reply and a.grounded
    assert reply_language("why is GPU 1 idle?") is None


def test_chinese_follow_up_in_chat_keeps_the_topic(profiles):
    from dashcam.agent.chat import ChatSession

    opened, made = profiles
    chat = ChatSession(opened["demo"], str(made["demo"]), offline=True)
    first = chat.handle("為什麼 GPU 1 閒置?")
    then = chat.handle("那 GPU 0 呢?")                          # "and GPU 0?"
    assert first.intent == then.intent == "idle" and then.targets.gpus == [0]
    english = ChatSession(opened["demo"], str(made["demo"]), offline=True)
    english.handle("why is GPU 1 idle?")
    twin = english.handle("and GPU 0?")
    note, body = then.answer.split("\n", 1)
    assert "以英文回答" in note and body == twin.answer and body.startswith("GPU 0 was kernel-idle")
