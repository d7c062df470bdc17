import pytest

from dashcam.agent.intents import INTENTS, PRIORITY, RULES, classify, classify_all, scores

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
    ("what's wrong with GPU 3?", "slow"),
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


def test_intent_lists_agree():
    assert INTENTS[-1] == "unknown"
    assert sorted(PRIORITY) == sorted(INTENTS[:-1]) == sorted(RULES)


def test_ties_go_by_priority():
    # memcpy 3 (memcpy) and nccl 3 (nccl): nccl is earlier in PRIORITY
    s = scores("nccl memcpy")
    assert (s["nccl"], s["memcpy"]) == (3, 3)
    assert classify("nccl memcpy") == "nccl"
    # idle 3 and slow 2 + 1: idle before slow
    s = scores("idle and slow, the slowest")
    assert (s["idle"], s["slow"]) == (3, 3)
    assert classify("idle and slow, the slowest") == "idle"


def test_scores_add_weights():
    s = scores("why is the GPU idle with gaps and bubbles?")
    assert s["idle"] == 3 + 2 + 3


def test_classify_all_best_first():
    assert classify_all("why is GPU 5 idle and slow?") == ["idle", "slow"]
    assert classify_all("is the memcpy bandwidth slow?") == ["memcpy", "slow"]  # 3 + 2 = 5 vs 2
    assert classify_all("hello") == []


def test_quoted_names_are_ignored():
    assert scores("'nccl' `memcpy` \"idle\"") == dict.fromkeys(RULES, 0)
    assert classify("why is the 'ncclDevKernel_AllReduce' kernel slow?") == "slow"
    assert classify("why is the ncclDevKernel_AllReduce kernel slow?") == "nccl"


def test_compare_needs_gpus():
    # "compare" alone says nothing; with a GPU/device/rank word it is a GPU comparison
    assert scores("How does forward compare with backward?")["compare_gpus"] == 0
    assert scores("compare iteration 3 with iteration 5")["compare_gpus"] == 0
    assert scores("compare the devices")["compare_gpus"] == 3
    assert scores("compare this with deviceSynchronize")["compare_gpus"] == 0  # not the word "device"


def test_launch_rate_beats_kernel_count():
    s = scores("How many kernels are launched per second?")
    assert (s["launch"], s["overview"]) == (1 + 3, 3)
    assert classify("How many kernels are there?") == "overview"
