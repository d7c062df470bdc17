import pytest

from dashcam.agent.intent_table import INTENT_TABLE, MIN_SCORE, Intent
from dashcam.agent.intents import INTENTS, classify, classify_all, classify_question, parts, scores
from dashcam.agent.models import Targets
from dashcam.agent.words import one_edit, stem, tokens

CASES = [
    # idle
    ("why is GPU 5 idle?", "idle"),
    ("why are GPUs 0 and 3 idle?", "idle"),
    ("what causes the gaps between kernels on gpu 2?", "idle"),
    ("are there bubbles in the pipeline?", "idle"),
    ("is the GPU underutilized?", "idle"),
    ("GPU utilization is low, why?", "idle"),
    ("is the GPU waiting on the host?", "idle"),
    ("why is the GPU idle between iterations?", "idle"),
    # slow
    ("why is gpu5 so slow between 2s and 3.5s", "slow"),
    ("what's the bottleneck?", "slow"),
    ("why does training take so long?", "slow"),
    ("what's wrong with GPU 3?", "healthy"),  # the same answer as "slow": the verdict
    ("why is 'memcpy_kernel' slow?", "slow"),  # quoted names do not vote
    # top_kernels
    ("top 5 kernels on gpu 1", "top_kernels"),
    ("which kernel takes the most time?", "top_kernels"),
    ("what are the hottest kernels?", "top_kernels"),
    ("list the slowest kernels", "top_kernels"),
    ("which kernels dominate GPU time after 1.2s?", "top_kernels"),
    # memcpy
    ("are HtoD copies using pageable memory?", "memcpy"),
    ("how is PCIe bandwidth used?", "memcpy"),
    ("is the GPU starved by data loading?", "memcpy"),
    ("how much time goes to memcpy?", "memcpy"),
    ("is the dataloader the problem?", "memcpy"),
    # launch
    ("is the training launch-bound?", "launch"),
    ("why does each kernel start 4 ms after it is launched?", "launch"),
    # time in a feature: MPI, run-time compilation
    ("how much time does MPI communication cost this rank?", "time_in"),
    ("how much time is spent compiling kernels with NVRTC?", "time_in"),
    ("how long does JIT compilation take?", "time_in"),
    ("how much time do we lose to jit compilation?", "time_in"),
    ("is the program keeping the SMs busy?", "gpu_metrics"),
    ("would CUDA graphs help?", "launch"),
    ("kernel launch overhead per GPU", "launch"),
    ("is this CPU-bound?", "launch"),
    ("How many kernels are launched per second?", "launch"),  # eval case launch-rate
    ("what is the kernel launch rate?", "launch"),
    ("launches/s on GPU 0", "launch"),
    ("how many kernels per second?", "launch"),
    # sync
    ("is the host blocking on cudaDeviceSynchronize?", "sync"),
    ("stream sync stalls", "sync"),
    ("does the host stall on host syncs?", "sync"),
    # nccl
    ("how much time goes to NCCL allreduce?", "nccl"),
    ("is communication overlapped with compute?", "nccl"),
    ("are the collectives slow on GPU 4?", "nccl"),
    # nvtx
    ("where does the time go in forward vs backward?", "nvtx"),
    ("which part of the code is slow?", "nvtx"),
    ("show the NVTX ranges", "nvtx"),
    ("which annotated region takes longest?", "nvtx"),
    ("How long is the backward pass compared with the forward pass?", "nvtx"),  # eval case nvtx-fwd-vs-bwd
    ("How does forward compare with backward?", "nvtx"),
    ("forward vs backward time", "nvtx"),
    # iterations
    ("what did GPUs 0 and 1 do in iteration 3?", "iterations"),
    ("how long does each step take?", "iterations"),
    ("what is the slowest step?", "iterations"),
    ("the first iteration is slow, why?", "iterations"),
    ("step time variance per epoch", "iterations"),
    # small_kernels
    ("Are CUDA graphs used?", "graphs"),
    ("is the decode loop using cuda graphs", "graphs"),
    ("was this traced as whole graphs?", "graphs"),
    ("Would CUDA graphs help?", "launch"),  # the launch answer says whether, with cuda_graphs' candidates
    ("nvidia-smi says 100% util, is the GPU really busy?", "gpu_metrics"),
    ("are the tensor cores used?", "gpu_metrics"),
    ("what is the SM active percentage", "gpu_metrics"),
    ("What is the peak GPU memory?", "memory"),
    ("how does memory use grow over time", "memory"),
    ("does the loop allocate every step?", "memory"),
    ("do unified memory page faults stall my kernels?", "memory"),
    ("are the kernels too small to fill the SMs?", "small_kernels"),
    ("low occupancy?", "small_kernels"),
    ("are there many tiny kernels with small grid sizes?", "small_kernels"),
    # streams
    ("are kernels running concurrently on multiple streams?", "streams"),
    ("how many streams does GPU 0 use?", "streams"),
    # healthy
    ("Is this profile healthy?", "healthy"),
    ("is anything wrong?", "healthy"),
    ("give me a summary", "healthy"),
    ("any red flags in this run?", "healthy"),
    # compare_gpus
    ("which GPU is the straggler?", "compare_gpus"),
    ("which GPU is slowest?", "compare_gpus"),
    ("compare GPU 0 and GPU 1", "compare_gpus"),
    ("Compare GPU 0 and GPU 1.", "compare_gpus"),  # eval case compare-equal-gpus
    ("Compare the GPUs.", "compare_gpus"),
    ("compare gpu5 with gpu6", "compare_gpus"),
    ("compare cuda:0 and cuda:1", "compare_gpus"),
    ("is rank 3 slow compared with the others?", "compare_gpus"),
    ("is there load imbalance across ranks?", "compare_gpus"),
    ("why is rank 3 slower than the others?", "compare_gpus"),
    ("difference between GPUs in idle time", "compare_gpus"),
    # overview
    ("how many GPUs are there?", "overview"),
    ("which nsys version made this?", "overview"),
    ("describe this profile", "overview"),
    ("what's in this profile?", "overview"),
    ("give me an overview", "overview"),
    ("what GPU is this?", "overview"),
    # api
    ("how long do cudaMemcpy calls take?", "api"),
    ("which CUDA API calls take the most time?", "api"),
    ("time in cuLaunchKernelEx", "api"),
    # cpu
    ("what is the CPU doing while GPU 0 waits?", "cpu"),
    ("is the dataloader the bottleneck?", "cpu"),
    ("which Python function blocks?", "cpu"),
    ("is the main thread descheduled?", "cpu"),
    ("which function is hottest on the CPU?", "cpu"),
    # unknown
    ("hello", "unknown"),
    ("what is the meaning of life?", "unknown"),
    ("", "unknown"),
]


@pytest.mark.parametrize("question,intent", CASES, ids=[q or "<empty>" for q, _ in CASES])
def test_classify(question, intent):
    assert classify(question) == intent


def test_every_intent_has_a_test_question():
    assert {i for _, i in CASES} == set(INTENTS)


def test_the_table_is_the_list_of_intents():
    assert INTENTS == [i.name for i in INTENT_TABLE] + ["unknown"]
    assert len(set(INTENTS)) == len(INTENTS)
    for i in INTENT_TABLE:
        assert i.tools and ":" in i.answer and i.about and i.example, i.name
        assert classify(i.example) == i.name, (i.name, i.example)


def test_ties_go_to_the_earlier_intent_of_the_table():
    s = scores("nccl memcpy")
    assert s["nccl"] == s["memcpy"] == 3
    assert classify("nccl memcpy") == "nccl"  # nccl is listed before memcpy


def test_scores_add_weights_once_per_word():
    idle = next(i for i in INTENT_TABLE if i.name == "idle")
    assert scores("why is the GPU idle?")["idle"] == idle.words["idle"]
    assert scores("idle idle idle")["idle"] == idle.words["idle"]
    assert scores("why is the GPU idle with gaps?")["idle"] == idle.words["idle"] + idle.words["gap"]


def test_entries_that_normalize_alike_count_once_at_their_highest_weight():
    memcpy = next(i for i in INTENT_TABLE if i.name == "memcpy")
    assert (memcpy.words["pinned"], memcpy.words["pin"]) == (3, 2)  # both stem to "pin"
    assert scores("pinned")["memcpy"] == scores("pin")["memcpy"] == 3
    idle = next(i for i in INTENT_TABLE if i.name == "idle")
    assert idle.phrases["doing nothing"] == idle.phrases["do nothing"] == 3  # one phrase once normalized
    assert scores("is it doing nothing")["idle"] == 3


def test_an_inflection_of_a_vocabulary_word_is_no_typo():
    from dashcam.agent.intents import KNOWN, STEMS

    # "lagging" is one edit from "laggying" (a form of the synonym "laggy"), but it is "lag" inflected
    assert tokens("lagging", KNOWN, STEMS) == ["lag"] == tokens("lag", {})
    assert tokens("kernals", KNOWN, STEMS) == tokens("kernels", {})  # a real typo is still corrected
    assert classify("is one of the gpus lagging behind the rest") == "compare_gpus"


def test_below_min_score_is_unknown():
    r = classify_question("is it waiting?")  # "wait" is a weak hint of idle (1 < MIN_SCORE)
    assert scores("is it waiting?")["idle"] < MIN_SCORE
    assert (r.intent, r.score, r.runner_up) == ("unknown", 0.0, "idle")
    assert classify_all("hello") == []


def test_classification_records_score_runner_up_and_features():
    r = classify_question("is the host blocked on the gpu?")
    assert r.intent == "sync" and r.score == scores("is the host blocked on the gpu?")["sync"]
    assert r.runner_up is not None and r.runner_up_score < r.score
    assert any("host block gpu" in f for f in r.features["sync"])


def test_quoted_names_are_ignored():
    assert set(scores("'nccl' `memcpy` \"idle\"").values()) == {0}
    # a kernel named in quotes: its own figures (top_kernels), its name says nothing about NCCL
    assert classify("why is the 'ncclDevKernel_AllReduce' kernel slow?") == "top_kernels"
    assert classify("why is the ncclDevKernel_AllReduce kernel slow?") == "nccl"


def test_compare_needs_gpus():
    assert classify("How does forward compare with backward?") == "nvtx"
    assert classify("compare iteration 3 with iteration 5") == "iterations"
    assert classify("compare the devices") == "compare_gpus"


def test_launch_rate_beats_kernel_count():
    assert classify("How many kernels are launched per second?") == "launch"
    assert classify("How many kernels are there?") == "overview"
    assert classify("how many streams per gpu") == "streams"  # "=how many gpu" needs the words side by side


# -- normalization ---------------------------------------------------------------------------------

@pytest.mark.parametrize("word,same", [
    ("idle", "idling"), ("idle", "idled"), ("utilization", "utilisation"), ("synchronize", "synchronising"),
    ("kernel", "kernels"), ("launch", "launches"), ("copy", "copies"), ("block", "blocked"), ("pin", "pinned"),
    ("iteration", "iterations"), ("transfer", "transfers")])
def test_stemming_agrees_on_forms(word, same):
    assert stem(word) == stem(same)


def test_typos_abbreviations_and_synonyms():
    known = {"kernels": 0, "idle": 1, "bottleneck": 2, "launch": 3}
    assert tokens("kernals", known) == tokens("kernels", {})        # one letter changed
    assert tokens("idel", known) == tokens("idle", {})              # two neighbours swapped (4 letters)
    assert tokens("bottlneck", known) == tokens("bottleneck", {})   # one letter missing
    assert tokens("lauch", known) == tokens("launch", {})
    assert tokens("mode", known) == [stem("mode")]                   # 4 letters, not a swap: kept
    assert tokens("util perf mem", {}) == tokens("utilization performance memory", {})
    assert tokens("gpu0", {}) == tokens("gpu 0", {}) == tokens("cuda:0", {})
    assert tokens("cpu", {}) == tokens("host", {}) and tokens("device", {}) == tokens("gpu", {})
    assert tokens("hogging", {}) == tokens("eats", {}) == tokens("dominates", {})
    assert tokens("how long do cudaFree calls take", {})[3] == "@api"
    assert "@api" not in tokens("would cuda graphs help", {})
    assert one_edit("frist", "first") and not one_edit("first", "first") and not one_edit("ab", "abcd")


def test_typos_everyday_words_route():
    assert classify("why r there bubbels in my timeline") == "idle"
    assert classify("whats the bottlneck here") == "slow"
    assert classify("wich kernals r the slowest") == "top_kernels"
    assert classify("how expensive is the comunication") == "nccl"


def test_host_waits_on_the_device_is_sync():
    for q in ("when does the host wait on the device?", "is the CPU blocked on the GPU?",
              "does the cpu stall waiting on gpu work", "how long is python stuck waiting for kernels to finish"):
        assert classify(q) == "sync", q


def test_open_questions_get_the_verdict():
    for q in ("could this go faster?", "what should I fix first?", "anything weird here?",
              "where is the time going?"):
        assert classify(q) in ("slow", "healthy"), q


def test_two_questions_in_one():
    assert parts("which kernels take the most time, and are my copies pinned?") == [
        "which kernels take the most time", "are my copies pinned"]
    r = classify_question("which kernels take the most time, and are my copies pinned?")
    assert (r.intent, r.intents) == ("top_kernels", ["top_kernels", "memcpy"])
    r = classify_question("why is GPU 5 idle and slow?")  # one question: "and slow" is no question of its own
    assert r.intents == ["idle"]


def test_then_and_after_that_join_two_questions():
    assert parts("first tell me which kernels take the most time, then why gpu 1 is idle") == [
        "first tell me which kernels take the most time", "why gpu 1 is idle"]
    assert parts("show me the top kernels then tell me if copies are pinned") == [
        "show me the top kernels", "tell me if copies are pinned"]
    r = classify_question("which kernels are slowest and after that how long do we sync")
    assert r.intents == ["top_kernels", "sync"]
    assert parts("what runs then?") == ["what runs then"]  # "then" before no question or request: no cut


def test_targets_add_their_bonus():
    plain = scores("what about it?")
    with_step = scores("what about it?", Targets(step=3))
    assert with_step["iterations"] == plain["iterations"] + 3
    assert classify("what happened there", Targets(kernel="gemm")) == "top_kernels"


def test_an_intent_is_added_by_a_table_entry(monkeypatch):
    from dashcam.agent import intents

    extra = Intent(name="cpu_side", tools=("cpu",), answer="cpu:cpu", about="CPU sampling",
                   example="where is the CPU busy?", words={"sampling": 3, "callstack": 3})
    table = [*INTENT_TABLE, extra]
    monkeypatch.setattr(intents, "COMPILED", [intents._compile(i) for i in table])
    monkeypatch.setattr(intents, "ORDER", [i.name for i in table])
    intents._score_text.cache_clear()
    try:
        assert intents.classify("show me the cpu sampling callstacks") == "cpu_side"
    finally:
        intents._score_text.cache_clear()




def test_a_phrase_lies_inside_one_clause():
    """"slow, ... between steps" is no "slow step": the words of a phrase are looked for clause by clause."""
    q = "it feels slow, the GPU between steps seems idle, what does it wait on"
    assert classify(q) == "idle"
    assert classify("which step is slow?") == "iterations"


@pytest.mark.parametrize("question, intent", [
    ("would using cuda graphs reduce the overhead?", "launch"),
    ("用 CUDA Graph 捕獲能減少這些開銷嗎", "launch"),
    ("does my program use cuda graphs?", "graphs"),
    ("how to reduce overhead of memcpy", "memcpy"),
])
def test_graphs_against_launch_overhead(question, intent):
    assert classify(question) == intent
