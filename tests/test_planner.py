"""The offline planner: planted profiles whose right answer is known, exact text, every answer grounded."""
import pytest

from dashcam.agent import answers
from dashcam.agent.answers.overview import asks_gpu_model
from dashcam.agent.answers.steps import asks_why
from dashcam.agent.models import Targets, ToolCall
from dashcam.agent.planner import answer_offline
from dashcam.testing.builder import ExportBuilder
from dashcam.testing.scenarios import SCENARIOS, demo
from dashcam.text import format as fmt

from .conftest import MS, SHARED_GPU, US

# The remedies the findings engine gives a plain Python program (no framework evidence): neutral CUDA terms.
SYNC_WAIT = ("Remove the `cudaDeviceSynchronize` calls the loop does not need, or wait on a CUDA event only where the "
             "result is needed.")
LAUNCHES = ("Launch fewer, larger kernels: fuse them, or capture the launch sequence once in a CUDA graph "
            "(`cudaStreamBeginCapture`, `cudaGraphLaunch`).")
# pageable copies and free kernel time: overlapping (with pinned memory) saves more than pinning alone
PAGEABLE_COPIES = ("Overlap the copies with compute: `cudaMemcpyAsync` on a second stream from pinned memory, in "
                   "chunks (double buffering), so one chunk copies while the kernels work on the other.")
DEPENDENCY = ("Check the cross-stream and event waits (`cudaStreamWaitEvent`) and the other GPUs this one waits on: "
              "the kernel was queued and waited.")
PYTHON_HOST = ("Profile the Python side between launches (py-spy or `nsys profile --python-sampling=true`) and move "
               "that work out of the loop or overlap it with GPU work.")
BALANCE = ("Balance the work across GPUs (data shards, pipeline stages) so this GPU does not finish early and wait for "
           "the others.")
# The GPU-bound GEMM remedy for an export that records no GPU name (the builder's default): no format named
# that the GPU may not have (advice.precisions).
GEMM = ("Run the matrix multiplies on tensor cores in a lower precision the GPU supports (see its compute "
        "capability), with dimensions that are multiples of `16`.")


@pytest.fixture
def demo_profile(tmp_path):
    from dashcam.profile import Profile

    return Profile.open(demo(tmp_path / "demo.sqlite"), progress=False)


@pytest.fixture
def scenario(tmp_path):
    """A planted profile of dashcam.testing.scenarios by name (its docstring states the facts asserted here)."""
    from dashcam.profile import Profile

    return lambda name: Profile.open(SCENARIOS[name](tmp_path / f"{name}.sqlite"), progress=False)


def ask(question, profile, intent=None, **targets):
    a = answer_offline(question, profile, targets=Targets(**targets), intent=intent)
    assert a.mode == "offline" and a.question == question
    assert a.grounded, (a.answer, a.ungrounded_numbers)
    # a failed call (an empty window) leaves no evidence; the findings engine's savings are evidence of no call
    assert len([e for e in a.evidence if e.tool != "impact"]) <= len(a.tool_calls)
    return a


# -- formatting ---------------------------------------------------------------------

def test_time_format():
    assert fmt.duration(69_590_000) == "69.59 ms"
    assert fmt.duration(12_200_000) == "12.2 ms"
    assert fmt.duration(100_000) == "0.1 ms"
    assert fmt.duration(99_999) == "99.999 µs"
    assert fmt.duration(6_000) == "6 µs"
    assert fmt.duration(1_234_567) == "1.235 ms"
    assert fmt.duration(9_999_000_000) == "9999 ms"
    assert fmt.duration(12_345_600_000) == "12.346 s"
    assert fmt.duration(0) == "0 ms"
    assert fmt.percent(59.18) == "59.2 %"
    assert fmt.size(536_870_912) == "536.87 MB"
    assert fmt.size(272) == "272 bytes"
    assert fmt.ids([0, 1, 2]) == "0, 1 and 2"
    assert fmt.name("a`b") == "`a'b`"


def test_example_questions_cover_the_intents():
    from dashcam.agent.intents import classify

    assert len(answers.EXAMPLE_QUESTIONS) >= 12
    assert set(answers.TEMPLATES) >= {classify(q) for q in answers.EXAMPLE_QUESTIONS}
    assert "unknown" not in {classify(q) for q in answers.EXAMPLE_QUESTIONS}


# -- idle -------------------------------------------------------------------------------

def test_idle_on_demo_names_gpu1_cuda_api_and_cudamemcpy(demo_profile):
    # GPU 1: window 117.59 ms, kernels 6 x 20 x 0.4 ms = 48 ms -> idle 69.59 ms; each step's 8 ms pageable
    # cudaMemcpy (8.02 ms of API time in the gap) makes cuda_api the dominant cause.
    a = ask("Why is GPU 1 idle?", demo_profile, "idle", gpus=[1])
    assert a.answer.startswith(
        "GPU 1 was kernel-idle 69.59 ms (59.2 % of the 117.59 ms window), mostly waiting on the CPU: `cuda_api` "
        "48.11 ms "
        "(69.1 % of kernel-idle: inside other CUDA API calls), led by `cudaMemcpy`. The largest gap, 12.2 ms at "
        "16.09 ms "
        "inside `train_step 0`, ended when `ampere_sgemm_128x64_tn` started; 8.02 ms of it was in `cudaMemcpy`.")
    assert a.answer.endswith(PAGEABLE_COPIES)  # pageable copies, kernels to hide them under (memcpy says so)
    assert a.intent == "idle"
    # the gaps; the workload (overview), which words the remedy; memcpy, the remedy's precondition; iterations,
    # whether the loop copies every step (resident arrays)
    assert a.tool_calls == [ToolCall(name="gpu_gaps", args={"gpu": 1}), ToolCall(name="overview", args={}),
                            ToolCall(name="memcpy", args={}), ToolCall(name="iterations", args={"limit": 3})]


def test_idle_without_a_gpu_picks_the_idlest(demo_profile):
    a = ask("Why is the GPU idle?", demo_profile, "idle")
    assert a.answer.startswith("GPU 1 was kernel-idle 69.59 ms")
    assert "For comparison, GPU 0 was kernel-idle 21.59 ms (18.4 %)." in a.answer
    assert a.tool_calls[0] == ToolCall(name="gpu_gaps", args={})


def test_idle_end_to_end_with_parsed_question(demo_profile):
    a = answer_offline("Why is GPU 1 idle?", demo_profile)
    assert a.intent == "idle" and a.targets.gpus == [1] and a.grounded
    assert a.answer.startswith("GPU 1 was kernel-idle 69.59 ms (59.2 % of the 117.59 ms window)")


def sync_stall(b: ExportBuilder) -> ExportBuilder:
    """GPU 0: kernel [10 us, 1 ms]; the thread then blocks in cudaDeviceSynchronize [1, 5] ms (waiting on
    GPU 1, another process), then launches [5.1, 5.11] ms a kernel [5.11, 6] ms.
    Window [10 us, 6 ms] = 5.99 ms; GPU 0 idle = 5.99 - 0.99 - 0.89 = 4.11 ms (68.6 %), of it
    sync_wait 4 ms (97.3 %), cpu_work 0.1 ms, launch_overhead 10 us. GPU 1 idle 1.99 ms."""
    b.launch(0, 0, 5 * US, 10 * US, 1 * MS, name="step_kernel")
    b.api("cudaDeviceSynchronize", 1 * MS, 5 * MS)
    b.kernel(1, 1 * MS, 5 * MS, pid=200, name="other_rank_kernel")
    b.launch(0, 5 * MS + 100 * US, 5 * MS + 110 * US, 5 * MS + 110 * US, 6 * MS, name="step_kernel")
    return b


def test_sync_stall_idle_is_sync_wait_on_cudadevicesynchronize(build):
    p = build(sync_stall(ExportBuilder()))
    a = ask("Why is the GPU idle?", p, "idle")
    assert a.answer.startswith(
        "GPU 0 was kernel-idle 4.11 ms (68.6 % of the 5.99 ms window), mostly waiting on the CPU: `sync_wait` 4 ms "
        "(97.3 % of kernel-idle: blocked in synchronize calls), led by `cudaDeviceSynchronize`. The only gap, 4.11 "
        "ms at "
        "0.99 ms, ended when `step_kernel` started; 4 ms of it was in `cudaDeviceSynchronize`.")
    assert "For comparison, GPU 1 was kernel-idle 1.99 ms (33.2 %)." in a.answer
    assert a.answer.endswith(SYNC_WAIT)


def test_sync_intent_on_sync_stall(build):
    p = build(sync_stall(ExportBuilder()))
    a = ask("How long does the CPU wait in synchronize calls?", p, "sync")
    assert a.answer.startswith("A host thread was blocked in `cudaDeviceSynchronize` for 4 ms (66.8 % of the 5.99 ms "
                               "window): 1 call, the longest 4 ms.")
    assert ("On GPU 0 these waits are the main cause of kernel-idle time: `sync_wait` 4 ms (97.3 % of its "
            "kernel-idle).") in a.answer
    assert [c.name for c in a.tool_calls] == ["sync", "gpu_gaps", "overview"]


# -- launch-bound -----------------------------------------------------------------------

def launch_bound(b: ExportBuilder, n: int = 100) -> ExportBuilder:
    """Launch call i: [20i, 20i+20] us, its 5 us kernel starting when the call returns.
    With n = 100: window [20, 2005] us = 1.985 ms; kernels 500 us = 25.19 %; 99 gaps of 15 us, all
    launch_overhead (1.485 ms); queue 0, median kernel 5 us < median call 20 us, launch calls 99.7 % of the
    window: launch-bound. 100 launches / 1.985 ms = 50377.8/s."""
    for i in range(n):
        b.launch(0, 20 * i * US, (20 * i + 20) * US, (20 * i + 20) * US, (20 * i + 25) * US, name="tiny")
    return b


def test_launch_bound_verdict_and_launch_overhead(build):
    a = ask("Am I launch-bound?", build(launch_bound(ExportBuilder())), "launch")
    assert a.answer == (
        "GPU 0 is launch-bound: it is kernel-busy only 25.2 % of the window, start a median 0 ms after their launch "
        "call returns, and the median kernel (5 µs) is shorter than the median launch call (20 µs). "
        "Of GPU 0's 1.485 ms kernel-idle time, `launch_overhead` is 1.485 ms (100.0 %) and `cpu_work` 0 ms (0.0 %); "
        "it issues 50377.8 launches/s. " + LAUNCHES)
    # memcpy: whether the host reads a flag back each iteration (a graph could not cross it)
    assert [c.name for c in a.tool_calls] == ["launch_latency", "gpu_gaps", "memcpy", "overview"]


def test_ten_launches_are_too_few_to_be_launch_bound(build):
    a = ask("Am I launch-bound?", build(launch_bound(ExportBuilder(), n=10)), "launch")
    assert a.answer.startswith("GPU 0 is not launch-bound: only 10 kernels were launched, too few to call it. "
                               "Of GPU 0's 0.135 ms kernel-idle time, `launch_overhead` is 0.135 ms (100.0 %)")
    assert "CUDA graph" not in a.answer and a.grounded


def test_launch_bound_idle_advice(build):
    a = ask("Why is the GPU idle?", build(launch_bound(ExportBuilder())), "idle")
    assert a.answer.startswith("GPU 0 was kernel-idle 1.485 ms (74.8 % of the 1.985 ms window), mostly waiting on "
                               "the CPU: "
                               "`launch_overhead` 1.485 ms (100.0 % of kernel-idle")
    assert a.answer.endswith(LAUNCHES)


# -- copies -----------------------------------------------------------------------------

def test_memcpy_pageable_stall_on_demo(demo_profile):
    # by_kind HtoD: 6 x 64 MiB pinned in 0.5 ms + 6 x 80 MiB pageable in 8 ms = 905969664 B in 51 ms = 17.76 GB/s
    a = ask("Are my copies a bottleneck?", demo_profile, "memcpy")
    assert a.answer.startswith(
        "No GPU is transfer-bound: GPU 1 is copy-busy 40.8 % of the 117.59 ms window (kernel-busy 40.8 %). "
        "12 copies moved 905.97 MB: 12 HtoD (905.97 MB at 17.8 GB/s); 6 HtoD copies (503.32 MB, 48 ms) came from "
        "pageable host memory at 10.5 GB/s. "
        "6 synchronous `cudaMemcpy` calls blocked the host for 48.17 ms. 6 HtoD copies stalled the GPU before its "
        "next kernel, 48 ms in all; the largest, a pageable 8 ms copy of 83.89 MB at 0 ms on GPU 1, held back "
        "`ampere_sgemm_128x64_tn`.")
    assert a.answer.endswith(PAGEABLE_COPIES)


def test_memcpy_transfer_bound_pageable(build):
    """One 5 ms pageable HtoD copy of 100 MB by cudaMemcpy (call [0, 5.02] ms, copy [10 us, 5.01] ms), then
    a 1 ms kernel at 5.05 ms. Window [10 us, 6.05 ms] = 6.04 ms: copies 82.8 %, kernels 16.6 %: transfer-bound;
    20 GB/s; the call blocks 5.01 ms inside the window; the copy stalls the kernel."""
    b = ExportBuilder()
    b.copy_call(0, 0, 5020 * US, 10 * US, 5010 * US, 100_000_000, "HtoD", pinned=False, api_name="cudaMemcpy")
    b.launch(0, 5030 * US, 5040 * US, 5050 * US, 6050 * US, name="gemm_kernel")
    a = ask("Are my copies a bottleneck?", build(b), "memcpy")
    assert a.answer == (
        "GPU 0 is transfer-bound: copy-busy 82.8 % of the 6.04 ms window, more than "
        "kernel-busy (16.6 %). 1 copy moved 100 MB: 1 HtoD (100 MB at 20.0 GB/s); 1 HtoD copy (100 MB, 5 ms) came from "
        "pageable host memory at "
        "20.0 GB/s. 1 synchronous `cudaMemcpy` call blocked the host for 5.01 ms. 1 HtoD copy stalled the GPU "
        "before its next kernel, 5 ms in all; the largest, a pageable 5 ms copy of 100 MB at 0 ms on GPU 0, held "
        "back `gemm_kernel`. " + PAGEABLE_COPIES)


# -- GPUs that do not exist, profiles with nothing in them --------------------------------

def test_gpu_that_does_not_exist(demo_profile):
    a = ask("Why is GPU 5 idle?", demo_profile, "idle", gpus=[5])
    assert a.answer == "GPU 5 is not in this profile; it has GPUs 0 and 1."
    assert [e.tool for e in a.evidence] == ["overview"] and a.tool_calls == [ToolCall(name="overview", args={})]


def test_gpu_that_does_not_exist_parsed(demo_profile):
    a = answer_offline("Why is GPU 5 idle?", demo_profile)
    assert a.answer == "GPU 5 is not in this profile; it has GPUs 0 and 1." and a.grounded


def test_several_missing_gpus_one_gpu_profile(build):
    b = ExportBuilder()
    b.launch(0, 0, 5 * US, 10 * US, 1 * MS)
    a = ask("Compare GPU 2 and GPU 3", build(b), "compare_gpus", gpus=[0, 2, 3])
    assert a.answer == "GPUs 2 and 3 are not in this profile; it has GPU 0."


def no_gpu_activity(b: ExportBuilder) -> ExportBuilder:
    b.api("cudaMalloc", 0, 1 * MS)
    b.api("cudaFree", 2 * MS, 3 * MS)
    return b


NO_CUDA_WORK = ("No GPU activity: 2 CUDA API calls traced, none of them a kernel launch, and no kernel, copy or "
                "memset was recorded on the GPU. The 2 CUDA API calls come from 1 process over 3 ms; by time: "
                "`cudaFree` 1 ms (1 call), `cudaMalloc` 1 ms (1 call). First thing to try: capture the part of the "
                "run that computes on the GPU (`nsys profile --capture-range`, `--delay`).")
NO_CUDA_WORK_PARAGRAPH = ("No GPU activity: 2 CUDA API calls traced, none of them a kernel launch, and no "
                          "kernel, copy or memset was recorded on the GPU. First thing to try: capture the part of "
                          "the run that "
                          "computes on the GPU (`nsys profile --capture-range`, `--delay`).")


@pytest.mark.parametrize("intent", ["idle", "slow", "healthy", "memcpy", "unknown", "iterations", "overview"])
def test_no_gpu_activity(build, intent):
    """CUDA was traced (cudaMalloc, cudaFree) but nothing ran: every intent says so, and never "turn tracing on"."""
    a = ask("Why is it slow?", build(no_gpu_activity(ExportBuilder())), intent)
    if intent in ("slow", "healthy"):  # the summary's paragraph, as every health question gets
        assert a.answer == NO_CUDA_WORK_PARAGRAPH and a.grounded and [e.tool for e in a.evidence] == ["workload"]
        return
    assert a.answer == NO_CUDA_WORK and a.grounded
    assert [e.tool for e in a.evidence] == ["workload", "sql", "sql"] and "no GPU activity" in a.notes[0]


def test_no_gpu_activity_named_gpu(build):
    a = ask("Why is GPU 0 idle?", build(no_gpu_activity(ExportBuilder())), "idle", gpus=[0])
    assert a.answer == ("GPU 0 is not in this profile; it has no GPU activity at all (no kernels, memcpys or "
                        "memsets).")


def test_sync_without_gpu_activity_still_answers(build):
    b = ExportBuilder()
    b.api("cudaStreamSynchronize", 0, 2 * MS)
    b.api("cudaMalloc", 2 * MS, 4 * MS)
    a = ask("How long do we sync?", build(b), "sync")
    assert a.answer == ("A host thread was blocked in `cudaStreamSynchronize` for 2 ms (50.0 % of the 4 ms window): "
                        "1 call, the longest 2 ms. The most blocked thread is 100 (`python`) of process 100: "
                        "2 ms (50.0 %).")


def test_sync_answer_gives_the_mean_call(build):
    b = ExportBuilder()
    b.api("cudaStreamSynchronize", 0, 1 * MS)
    b.api("cudaStreamSynchronize", 2 * MS, 5 * MS)
    b.api("cudaMalloc", 5 * MS, 8 * MS)
    a = ask("How long does a sync take on average?", build(b), "sync")
    assert a.answer.startswith("A host thread was blocked in `cudaStreamSynchronize` for 4 ms (50.0 % of the 8 ms "
                               "window): 2 calls, 2 ms each on average, the longest 3 ms.")
    assert a.grounded


def three_gpus_ending_apart() -> ExportBuilder:
    b = ExportBuilder()
    b.kernel(0, 0, 10 * MS)
    b.kernel(1, 2 * MS, 8 * MS)
    b.kernel(2, 1 * MS, 12 * MS)  # the window: [0, 12] ms
    return b


@pytest.mark.parametrize("question, lead", [
    ("which gpu finished last?", "GPU 2 finished last: its last kernel ended at the window's end; GPU 0's 2 ms "
                                 "before the window's end (at 10 ms), GPU 1's 4 ms before the window's end (at 8 ms)."),
    ("which gpu was done first", "GPU 1 finished first: its last kernel ended 4 ms before the window's end (at 8 ms); "
                                 "GPU 0's 2 ms before the window's end (at 10 ms), GPU 2's at the window's end."),
    ("which GPU started first?", "GPU 0 started first: its first kernel began at the window's start; GPU 2's 1 ms "
                                 "after the window's start, GPU 1's 2 ms after the window's start."),
    ("which gpu started last", "GPU 1 started last: its first kernel began 2 ms after the window's start; GPU 2's "
                               "1 ms after the window's start, GPU 0's at the window's start."),
])
def test_which_gpu_finished_or_started_first_or_last(build, question, lead):
    a = ask(question, build(three_gpus_ending_apart()), "compare_gpus")
    assert a.answer.startswith(lead + " GPU 2 is the busiest") and a.grounded


def test_nccl_answer_says_how_much_is_hidden_on_each_gpu(build):
    """GPU 0's 1 ms of NCCL runs alone (5 % of the 20 ms window: minor, not "overlapped"); GPU 1's 2 ms run
    under a gemm (overlapped)."""
    b = ExportBuilder()
    nccl = "ncclDevKernel_AllReduce_Sum_f32_RING_LL"
    b.kernel(0, 0, 19 * MS, name="gemm", stream=7)
    b.kernel(0, 19 * MS, 20 * MS, name=nccl, stream=20)
    b.kernel(1, 0, 20 * MS, name="gemm", stream=7)
    b.kernel(1, 2 * MS, 4 * MS, name=nccl, stream=20)
    a = ask("is nccl overlapped with compute?", build(b), "nccl")
    assert a.answer == (
        "GPU 0 spends 1 ms (5.0 % of the window) in 1 NCCL kernel, and 0.0 % of that overlaps compute. "
        "Most of it runs with no compute beside it, but that costs little: 1 ms (5.0 % of the window). "
        f"Its largest is `{nccl}`: 1 launch, 1 ms. "
        "The other GPU: GPU 1, 2 ms of NCCL (100.0 % overlapped, 0.0 % of the window exposed).")
    assert a.grounded


def test_top_kernels_tells_instantiations_of_one_template_apart(build):
    """Two kernels share the short name `axpy`: the answer names each by its full name (the diff's rule,
    measure/names.kernel_label), not `axpy` twice."""
    b = ExportBuilder()
    b.kernel(0, 0, 2 * MS, name="void axpy<float>(float*)")
    b.kernel(0, 2 * MS, 4 * MS, name="void axpy<float>(float*)")
    b.kernel(0, 4 * MS, 7 * MS, name="void axpy<double>(double*)")
    b.kernel(0, 7 * MS, 8 * MS, name="gemm")
    a = ask("which kernels take the most time?", build(b), "top_kernels")
    assert a.answer.startswith("The top kernels by GPU time, of 8 ms summed over 4 kernels: "
                               "`void axpy<float>(float*)` 4 ms (50.0 %, 2 launches), `void axpy<double>(double*)` "
                               "3 ms (37.5 %, 1 launch), `gemm` 1 ms (12.5 %, 1 launch).")
    assert a.grounded


def test_window_outside_the_profile(demo_profile):
    a = ask("Why idle after 5 s?", demo_profile, "idle", start_ms=5000.0)
    assert a.answer == ("Nothing falls in the requested window: the profile's GPU activity lasts 117.59 ms, and times "
                        "are counted in ms from its start.")
    assert [e.tool for e in a.evidence] == ["overview"]


# -- unknown, overview, top kernels, steps -------------------------------------------------

def test_unknown_gets_the_health_summary_and_what_else(demo_profile):
    """Never a refusal: a question nothing places gets the findings engine's paragraph (as `summary` and a
    health question) and one line on what else it answers."""
    a = ask("Tell me a joke", demo_profile, "unknown")
    health = ask("Is this profile healthy?", demo_profile, "healthy")
    assert a.answer.startswith(health.answer + " You can also ask about NCCL communication, time in MPI or run-time "
                               "compilation, copies and pinned memory")
    assert a.answer.endswith("why a GPU is idle or what the profile holds.")
    assert "I can only answer" not in a.answer and a.intent == "unknown" and a.grounded
    assert [e.tool for e in a.evidence] == [e.tool for e in health.evidence]


def test_unknown_follow_up_keeps_the_previous_topic(demo_profile):
    first = ask("Why is GPU 1 idle?", demo_profile, "idle", gpus=[1])
    a = answer_offline("and GPU 0?", demo_profile, targets=Targets(gpus=[0]), intent="unknown", history=[first])
    assert a.intent == "idle" and a.answer.startswith("GPU 0 was kernel-idle 21.59 ms (18.4 % of the 117.59 ms window)")
    joke = answer_offline("Tell me a joke", demo_profile, targets=Targets(), intent="unknown", history=[first])
    assert joke.intent == "unknown"


def test_overview_on_demo(demo_profile):
    a = ask("What is this profile?", demo_profile, "overview")
    assert a.answer == (
        "This is an Nsight Systems `2024.5.1.113` export (schema `3.13.2`) with 2 GPUs (`NVIDIA H100 80GB HBM3`) "
        "and a 117.59 ms window of GPU activity. It has 2 processes, 378 CUDA API calls and 12 NVTX ranges. "
        "The program looks like Python (a Python process runs the CUDA work; no framework evidence). "
        "GPU 0 ran 240 kernels, kernel-busy 81.6 % of the window (busy 84.2 %, counting copies); GPU 1 ran 120 "
        "kernels, "
        "kernel-busy 40.8 % of the window (busy 81.6 %, counting copies).")


def top_two(b: ExportBuilder) -> ExportBuilder:
    """gemm_big: 3 launches of 1 ms = 3 ms (75.0 %); small_add: 1 launch of 1 ms (25.0 %)."""
    for i in range(3):
        b.launch(0, i * 2 * MS, i * 2 * MS + 5 * US, i * 2 * MS + 10 * US, i * 2 * MS + 10 * US + 1 * MS,
                 name="gemm_big")
    b.launch(0, 6 * MS, 6 * MS + 5 * US, 6 * MS + 10 * US, 7 * MS + 10 * US, name="small_add")
    return b


def test_top_kernels_exact_percentages(build):
    a = ask("Which kernels take the most time?", build(top_two(ExportBuilder())), "top_kernels")
    assert a.answer == ("The top kernels by GPU time, of 4 ms summed over 4 kernels: `gemm_big` 3 ms (75.0 %, "
                        "3 launches), `small_add` 1 ms (25.0 %, 1 launch). Percentages are of summed kernel time "
                        "(concurrent kernels each count).")
    assert a.tool_calls == [ToolCall(name="top_kernels", args={"limit": 5})]


def test_top_kernels_named_kernel(build):
    a = ask("How long does gemm_big take?", build(top_two(ExportBuilder())), "top_kernels", kernel="gemm")
    # one kernel matches: its analysis follows (answers/entity.py, kernel_detail)
    assert a.answer.startswith("Kernels matching `gemm`: 3 launches, 3 ms, 75.0 % of the 4 ms of kernel time. "
                               "Per launch of `gemm_big`: mean 1 ms, median 1 ms, longest 1 ms.")
    assert a.tool_calls[:2] == [ToolCall(name="top_kernels", args={"name_contains": "gemm", "limit": 5}),
                                ToolCall(name="kernel_detail", args={"kernel": "gemm"})]


def test_step_window_on_demo(demo_profile):
    # step 3 is NVTX range [61.6, 81.6] ms on the clock = [60.59, 80.59] ms from the window start (1.01 ms)
    a = ask("What happened in step 3?", demo_profile, "iterations", step=3)
    assert a.answer.startswith("Step 3 (the fourth of 6, from NVTX ranges `train_step <n>`) took 20 ms; the median "
                               "step takes 20 ms, and GPU 1 was kernel-busy 40.0 % of it. GPU 1 was kernel-idle 12 ms "
                               "(60.0 % of the 20 ms window from 60.59 ms to 80.59 ms)")
    assert ToolCall(name="gpu_gaps", args={"start_ms": 60.59, "end_ms": 80.59}) in a.tool_calls


def test_the_first_iteration_is_step_0(demo_profile):
    """An ordinal counts from one, the steps' index from 0: "the first iteration" is step 0."""
    a = answer_offline("why is the first iteration slow?", demo_profile)
    assert a.answer.startswith("Step 0 (the first of 6, from NVTX ranges `train_step <n>`) took 20 ms")
    assert "So step 0 is no slower than a typical step." in a.answer


@pytest.mark.parametrize("question", ["how many times is each kernel launched?", "how many times is each kernel "
                                      "called?", "每个kernel被调用了多少次？", "kernel的启动次数"])
def test_how_many_times_each_kernel_is_launched_counts_the_launches(demo_profile, question):
    a = answer_offline(question, demo_profile)
    assert a.answer.startswith("The top kernels by GPU time, of 144 ms summed over 360 kernels: "
                               "`ampere_sgemm_128x64_tn` 36 ms (25.0 %, 90 launches)")
    assert "launch-bound" not in a.answer and [c.name for c in a.tool_calls] == ["top_kernels"]


def test_utilization_leads_with_the_kernel_busy_share(demo_profile):
    a = answer_offline("what is the GPU utilization?", demo_profile)
    assert a.answer.startswith("Utilization, the kernel-busy share of the 117.59 ms window: GPU 0 81.6 % (busy with "
                               "any GPU work, copies included, 84.2 %); GPU 1 40.8 % (busy with any GPU work, copies "
                               "included, 81.6 %). GPU 1 was kernel-idle 69.59 ms")
    assert a.grounded, a.ungrounded_numbers


def test_step_that_does_not_exist(demo_profile):
    a = ask("What happened in step 42?", demo_profile, "iterations", step=42)
    assert a.answer == "There is no step 42: the profile has 6 steps, numbered from 0."


def test_healthy_is_the_summary_diagnosis(demo_profile):
    """Is it healthy? and `dashcam summary` are one findings engine: the same paragraph, verdict and GPU."""
    from dashcam.reports.summary import summarize

    a = ask("Does this look healthy?", demo_profile, "healthy")
    assert a.answer == summarize(demo_profile).paragraph
    assert a.answer.startswith("Mostly kernel-idle: GPU 1 is kernel-idle 59.2 % of the 117.59 ms window, waiting on "
                               "the CPU, "
                               "which is inside other CUDA API calls: `cuda_api` is 69.1 % of the kernel-idle time, "
                               "led "
                               "by `cudaMemcpy`.")
    assert a.answer.endswith("First thing to try (saves up to 48 ms): " + PAGEABLE_COPIES[0].lower()
                             + PAGEABLE_COPIES[1:])
    assert a.grounded


def test_healthy_busy_gpu(build):
    b = ExportBuilder()
    for i in range(20):  # 1 ms kernels every 1.01 ms, launched 0.5 ms ahead: 20 of 20.19 ms = 99.06 % busy
        s = i * 1010 * US
        b.launch(0, s - 500 * US, s - 495 * US, s, s + 1 * MS, name="big_gemm", grid=(1024, 1, 1))
    a = ask("Is this healthy?", build(b), "healthy")
    assert a.answer == ("Healthy and GPU-bound: GPU 0 is kernel-busy 99.1 % of the 20.19 ms window. Most "
                        "kernel time goes to GEMM kernels (100.0 % of it, led by `big_gemm`). No GPU is "
                        "launch-bound or transfer-bound. First thing to try: " + GEMM[0].lower() + GEMM[1:])


def test_compare_gpus_on_demo(demo_profile):
    a = ask("Compare the GPUs", demo_profile, "compare_gpus")
    assert a.answer.startswith("GPU 0 is the busiest (kernel-busy 81.6 % of the 117.59 ms window) and GPU 1 the least "
                               "busy (40.8 %)")
    assert "GPU 1 was kernel-idle 69.59 ms, mostly `cuda_api`" in a.answer


@pytest.mark.parametrize("intent", sorted(answers.TEMPLATES))
def test_every_intent_on_demo_is_grounded(demo_profile, intent):
    a = ask("question", demo_profile, intent)
    assert a.answer and a.intent == intent and a.evidence


def test_no_nvtx_note(build):
    a = ask("Which NVTX ranges take the most time?", build(top_two(ExportBuilder())), "nvtx")
    assert a.answer.startswith("This profile has no NVTX ranges")
    assert any("NVTX" in n for n in a.notes)


# -- the real profiles -------------------------------------------------------------------

QUESTIONS = ["Why is the GPU idle?", "Why is my training slow?", "Which kernels take the most time?",
             "Are memory copies a bottleneck?", "Am I launch-bound?", "Does this profile look healthy?",
             "Compare the GPUs", "Which iteration is the slowest?", "What is this profile?", "Why is GPU 7 idle?",
             "What happened between 10 ms and 20 ms?", "Tell me a joke"]


@pytest.mark.parametrize("path", SHARED_GPU, ids=[p.name for p in SHARED_GPU])
def test_shared_profiles(path):
    from dashcam.profile import Profile

    profile = Profile.open(path, progress=False)
    for q in QUESTIONS:
        a = answer_offline(q, profile)
        assert a.grounded, (q, a.answer, a.ungrounded_numbers)
        assert a.answer and a.mode == "offline"
    for intent in answers.TEMPLATES:
        a = answer_offline("question", profile, targets=Targets(), intent=intent)
        assert a.grounded, (intent, a.answer, a.ungrounded_numbers)


def test_a_number_no_tool_returned_is_flagged(demo_profile, monkeypatch):
    """The planner really checks: a made-up figure (idle as a difference of two results) is ungrounded."""
    def made_up(ctx):
        r = ctx.call("overview")
        d = r.devices[1]
        return f"GPU 1 was idle {fmt.duration(r.window_ns - d.kernel_busy_ns + 1_000_000)}."

    monkeypatch.setitem(answers.TEMPLATES, "overview", made_up)
    a = answer_offline("What is this profile?", demo_profile, targets=Targets(), intent="overview")
    assert a.answer == "GPU 1 was idle 70.59 ms." and not a.grounded and a.ungrounded_numbers == ["70.59 ms"]


# -- API-only captures -----------------------------------------------------------------------

def test_api_only_overview_describes_the_api_calls(scenario):
    # no_kernels: 56 calls in 1 process over 13 ms: cudaStreamSynchronize 5 x 1 ms, cudaMalloc 1 x 2 ms,
    # cudaLaunchKernel 50 x 5 us = 0.25 ms; one H100 listed in TARGET_INFO_GPU.
    # The trace was on (the launch calls are there): the GPU records were lost, not "turn tracing on".
    a = ask("What is this profile?", scenario("no_kernels"), "overview")
    assert a.answer == (
        "No GPU activity recorded although CUDA was traced: 56 CUDA API calls, 50 launch calls among them, but no "
        "kernel, copy or memset record arrived. The 56 CUDA API calls come from 1 process over 13 ms; by time: "
        "`cudaStreamSynchronize` 5 ms (5 calls), `cudaMalloc` 2 ms (1 call), `cudaLaunchKernel` 0.25 ms (50 calls). "
        "The export lists 1 GPU (`NVIDIA H100 80GB HBM3`), but no work on it was recorded. First thing to try: the "
        "trace was on, so the "
        "GPU records were lost or never flushed: let the program end cleanly (`cudaDeviceSynchronize()` and "
        "`cudaProfilerStop()` before exit, no `kill`), check that `nsys` can trace the GPU on this system (under "
        "WSL2 it may not), and capture again.")
    assert [c.name for c in a.tool_calls] == ["workload", "sql", "sql"] and a.grounded
    assert "no GPU activity" in a.notes[0]


def test_api_only_overview_without_launch_calls(build):
    a = ask("What is this profile?", build(no_gpu_activity(ExportBuilder())), "overview")
    assert a.answer == NO_CUDA_WORK


# -- the tail of a GPU: done with its kernels before the window ends ----------------------------

def test_idle_tail_is_the_drain_not_missing_tracing(scenario):
    # pipeline_bubble GPU 1: idle 6 ms of 30 ms = 20 %: the 2 ms leading gap (dependency, 33.3 %) and the
    # 4 ms tail after its last kernel at 26 ms (unknown); every kernel has its launch call.
    a = ask("Why is GPU 1 idle?", scenario("pipeline_bubble"), "idle", gpus=[1])
    # the tail is filled by the other stage's kernels and loses more than the dependency wait: balance the stages
    assert a.answer == (
        "GPU 1 was kernel-idle 6 ms (20.0 % of the 30 ms window). 4 ms of it is the tail after its last kernel (from "
        "26 ms), filled by other GPUs' kernels (4 ms). The largest cause of the rest is `dependency`: 2 ms (33.3 % of "
        "kernel-idle: waiting on a dependency (an event, another stream or GPU)). " + BALANCE)
    assert "nsys profile" not in a.answer and a.grounded
    assert a.tool_calls == [ToolCall(name="gpu_gaps", args={"gpu": 1}), ToolCall(name="overview", args={})]


def test_idle_all_tail_advises_balancing(build):
    """GPU 0 kernel [0, 10] ms, GPU 1 kernel [0, 4] ms, both launched before the window: GPU 1 is idle
    6 ms (60 % of 10 ms), all of it the tail; it gets the balancing advice, not the tracing advice."""
    b = ExportBuilder()
    b.launch(0, 0, 5 * US, 1 * MS, 11 * MS, name="long_kernel")
    b.launch(1, 10 * US, 15 * US, 1 * MS, 5 * MS, name="short_kernel")
    a = ask("Why is GPU 1 idle?", build(b), "idle", gpus=[1])
    assert a.answer == (
        "GPU 1 was kernel-idle 6 ms (60.0 % of the 10 ms window). 6 ms of it is the tail after its last kernel "
        "(from 4 ms), "
        "filled by other GPUs' kernels (6 ms). " + BALANCE)


def test_idle_tail_explains_unknown_without_being_largest(build):
    """GPU 0 kernel [1, 21] ms. GPU 1: kernels with no launch call at [1, 2], [3, 4], [5, 6] ms (two 1 ms
    `unknown` gaps), then one launched by a call at [9.99, 10] ms running [10, 18] ms (a 4 ms gap: cpu_work
    3.99 ms, launch_overhead 10 us), then the 3 ms tail. Idle 9 ms of 20 ms = 45 %; unknown 5 ms leads and the
    tail holds 3 ms of it; outside the tail cpu_work leads (3.99 ms = 44.3 % of kernel-idle)."""
    b = ExportBuilder()
    b.launch(0, 0, 5 * US, 1 * MS, 21 * MS, name="long_kernel")
    for k in range(3):
        b.kernel(1, (1 + 2 * k) * MS, (2 + 2 * k) * MS, name="untraced_kernel")
    b.launch(1, 9990 * US, 10 * MS, 10 * MS, 18 * MS, name="last_kernel")
    a = ask("Why is GPU 1 idle?", build(b), "idle", gpus=[1])
    # the other gaps' cpu_work (3.99 ms) loses more than the 3 ms tail: the remedy is for it
    assert a.answer == (
        "GPU 1 was kernel-idle 9 ms (45.0 % of the 20 ms window). 3 ms of it is the tail after its last kernel "
        "(from 17 ms), "
        "filled by other GPUs' kernels (3 ms). The largest cause of the rest is `cpu_work`: 3.99 ms (44.3 % of "
        "kernel-idle: "
        "busy in Python outside CUDA calls). " + PYTHON_HOST)


def test_idle_tail_largest_but_not_the_main_cause(build):
    """GPU 0 kernel [1, 11] ms; GPU 1 kernels [1, 2], [3.5, 4.5], [6, 9] ms, the last two launched 10 us
    before they start: gaps 1.5 + 1.5 ms (cpu_work 1.49 ms each, launch_overhead 10 us each) and the 2 ms
    tail. Idle 5 ms of 10 ms = 50 %; cpu_work 2.98 ms = 59.6 % leads; the tail is only the largest gap."""
    b = ExportBuilder()
    b.launch(0, 0, 5 * US, 1 * MS, 11 * MS, name="long_kernel")
    b.launch(1, 10 * US, 15 * US, 1 * MS, 2 * MS, name="a_kernel")
    b.launch(1, 3490 * US, 3500 * US, 3500 * US, 4500 * US, name="b_kernel")
    b.launch(1, 5990 * US, 6000 * US, 6000 * US, 9000 * US, name="c_kernel")
    a = ask("Why is GPU 1 idle?", build(b), "idle", gpus=[1])
    assert a.answer.startswith(
        "GPU 1 was kernel-idle 5 ms (50.0 % of the 10 ms window), mostly waiting on the CPU: `cpu_work` 2.98 ms "
        "(59.6 % of "
        "kernel-idle: busy in Python outside CUDA calls). The largest gap, 2 ms at 8 ms, ran to the end of the "
        "window; it is "
        "the GPU's tail, after its last kernel (`c_kernel`).")
    assert a.answer.endswith(PYTHON_HOST)


# -- the slowest step and why ------------------------------------------------------------------

def test_slowest_step_why_runs_gpu_gaps_on_it(scenario):
    # nvtx_steps: step 3 = [30, 55] ms; in it GPU 0 is idle 15.5 ms (62 %), cpu_work 15.42 ms (99.484 %);
    # the largest gap 15.1 ms at 33.1 ms inside `save_checkpoint`, ended by `mlp_bwd_kernel`.
    a = ask("Which step is the slowest and why?", scenario("nvtx_steps"), "iterations")
    assert a.answer == (
        "The run has 6 steps, from NVTX ranges `train_step <n>`: median 10 ms, mean 12.5 ms, p90 17.5 ms. The "
        "slowest is step 3 at 25 ms (2.5 times the median), with the GPU kernel-busy 38.0 % of it; the fastest, "
        "step 0, took 10 ms. Step 3 is slow because GPU 0 waited: it was kernel-idle 15.5 ms (62.0 % of the 25 ms "
        "window "
        "from 30 ms to 55 ms), mostly waiting on the CPU: `cpu_work` 15.42 ms (99.5 % of kernel-idle: busy in Python "
        "outside CUDA calls). The largest gap, 15.1 ms at 33.1 ms inside `save_checkpoint`, ended "
        "when `mlp_bwd_kernel` started; mostly `cpu_work`. " + PYTHON_HOST)
    assert a.tool_calls == [ToolCall(name="iterations", args={}),
                            ToolCall(name="gpu_gaps", args={"start_ms": 30.0, "end_ms": 55.0}),
                            ToolCall(name="overview", args={})]  # the workload words the cause and the remedy


def test_slowest_step_without_why_keeps_the_pointer(scenario):
    a = ask("Which step is the slowest?", scenario("nvtx_steps"), "iterations")
    assert a.answer.endswith("Step 3 is an outlier: ask why the GPU was idle in step 3 to see what it waited on.")
    assert [c.name for c in a.tool_calls] == ["iterations"]


def test_slowest_step_why_when_steps_are_even(build):
    """NVTX steps of 10, 10 and 11 ms from 0, each with one `step_gemm` kernel from 10 us after its start to
    1 ms before its end (+10 us). The GPU window starts at 10 us, so step 2 is [19.99, 30.99] ms, clipped to
    the window end at 30 ms: 10.01 ms, its kernel 10 ms of it (99.9 %): the time goes to the kernel."""
    b = ExportBuilder()
    t = 0
    for i, d in enumerate([10, 10, 11]):
        b.nvtx(f"train_step {i}", t * MS, (t + d) * MS)
        b.launch(0, t * MS, t * MS + 5 * US, t * MS + 10 * US, (t + d - 1) * MS + 10 * US, name="step_gemm")
        t += d
    a = ask("Which step is the slowest and why?", build(b), "iterations")
    assert a.answer.endswith(
        "The slowest is step 2 at 11 ms (1.1 times the median), with the GPU kernel-busy 99.9 % of it; the fastest, "
        "step 0, took 10 ms. Step 2 is close to the median, so no step stands out; here is where its time went. In "
        "step 2 GPU 0 was kernel-busy 99.9 % of the 10.01 ms window from 19.99 ms to 30 ms, so the step's time goes "
        "to its kernels. The top kernel in it is `step_gemm`: 10 ms over 1 launch. " + GEMM)
    # the GEMM remedy reads the step's kernel families (elementwise kernels beside the GEMMs: none here)
    assert [c.name for c in a.tool_calls] == ["iterations", "gpu_gaps", "top_kernels", "overview", "top_kernels"]


def test_asks_why():
    assert asks_why("Which step is the slowest and why?")
    assert asks_why("What makes step 3 slow?") and asks_why("what is the cause")
    assert not asks_why("Which step is the slowest?")
    assert not asks_why("Show me the whys and wherefores")


# -- copies: bytes and bandwidth per kind --------------------------------------------------------

def test_copy_bandwidth_per_kind_pinned_too(scenario):
    # transfer_bound: 10 HtoD of 36 MB in 3 ms and 10 DtoH of 12 MB in 1 ms, all pinned: 12 GB/s each.
    a = ask("What bandwidth do the host-to-device copies reach?", scenario("transfer_bound"), "memcpy")
    assert "20 copies moved 480 MB: 10 HtoD (360 MB at 12.0 GB/s) and 10 DtoH (120 MB at 12.0 GB/s)." in a.answer
    assert "pageable" not in a.answer


def test_copy_bytes_per_direction(build):
    """HtoD: 10 MB pinned in 1 ms + 30 MB pageable in 2 ms = 40 MB in 3 ms (13.333 GB/s); DtoH 4 KB in
    0.1 ms (0.04 GB/s, shown with 3 decimals). Kernels follow so nothing is transfer-bound."""
    b = ExportBuilder()
    b.copy_call(0, 0, 5 * US, 10 * US, 1010 * US, 10_000_000, "HtoD", pinned=True)
    b.copy_call(0, 1010 * US, 1015 * US, 1020 * US, 3020 * US, 30_000_000, "HtoD", pinned=False)
    b.launch(0, 3020 * US, 3025 * US, 3030 * US, 13030 * US, name="gemm_kernel")
    b.copy_call(0, 13030 * US, 13035 * US, 13040 * US, 13140 * US, 4_000, "DtoH", pinned=True)
    a = ask("How many bytes are copied host to device?", build(b), "memcpy")
    assert "3 copies moved 40 MB: 2 HtoD (40 MB at 13.3 GB/s) and 1 DtoH (4 KB at 0.04 GB/s); 1 HtoD copy " \
           "(30 MB, 2 ms) came from pageable host memory at 15.0 GB/s." in a.answer


# -- GPU model -----------------------------------------------------------------------------------

def test_gpu_model_not_recorded_in_old_schema(scenario):
    a = ask("Which GPU model is this?", scenario("old_schema"), "overview")
    assert a.answer.startswith("The export does not record the GPU model (it has no TARGET_INFO_GPU table), so the "
                               "model of GPU 0 is unknown. This is an Nsight Systems export (version not recorded) "
                               "with 1 GPU and a 74 ms window")
    assert "H100" not in a.answer and "A100" not in a.answer


def test_gpu_model_named(scenario):
    a = ask("Which GPU model is this?", scenario("healthy"), "overview")
    assert a.answer.startswith("GPUs 0 and 1 are `NVIDIA H100 80GB HBM3`. This is an Nsight Systems `2024.5.1.113` "
                               "export (schema `3.13.2`) with 2 GPUs and a 50 ms window")
    plain = ask("What is this profile?", scenario("healthy"), "overview")
    assert plain.answer.startswith("This is an Nsight Systems `2024.5.1.113` export (schema `3.13.2`) with 2 GPUs "
                                   "(`NVIDIA H100 80GB HBM3`)")


def test_gpu_model_questions():
    asks = asks_gpu_model
    for q in ["Which GPU model is this?", "What GPUs are these?", "What hardware is this?", "gpu name?",
              "What kind of GPU ran this?", "the model of the GPU"]:
        assert asks(q), q
    for q in ["What is this profile?", "Give me an overview", "Which GPU is idle?", "My model is slow",
              "What happened between 10 ms and 20 ms?"]:
        assert not asks(q), q


# -- comparisons ---------------------------------------------------------------------------------

@pytest.mark.parametrize("gpus", [[0, 1], []])
def test_compare_equal_gpus_names_each(scenario, gpus):
    # healthy: both GPUs 49 ms of kernels in the 50 ms window = 98 %
    a = ask("Compare GPU 0 and GPU 1.", scenario("healthy"), "compare_gpus", gpus=gpus)
    assert a.answer == "The GPUs are equally busy: GPUs 0 and 1 are each kernel-busy 98.0 % of the 50 ms window."


def test_nvtx_comparison_shows_both_ranges(scenario):
    # nvtx_steps: `backward` 6 ranges 36.6 ms (6.1 ms each), `forward` 6 ranges 18.6 ms (3.1 ms each)
    a = ask("How long is the backward pass compared with the forward pass?", scenario("nvtx_steps"), "nvtx",
            nvtx="backward")
    assert a.answer.startswith(
        "NVTX range `backward`: 6 ranges, 36.6 ms in total (average 6.1 ms, longest 6.1 ms), launching 18 kernels "
        "with 36 ms of GPU time. NVTX range `forward`: 6 ranges, 18.6 ms in total (average 3.1 ms, longest 3.1 ms), "
        "launching 18 kernels with 18 ms of GPU time.")
    single = ask("How long is the backward pass?", scenario("nvtx_steps"), "nvtx", nvtx="backward")
    assert "`forward`" not in single.answer
    assert [c.name for c in single.tool_calls] == ["nvtx", "range_detail"]  # one range named: its analysis too
