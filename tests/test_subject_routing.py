"""Questions whose subject decides the answer (issue 25, found by a fresh author battery): "is communication the
bottleneck?" is about NCCL, not the whole run; "what is limiting X?" asks why it is slow; the GPU time against the
run's wall time; a Chinese question's own words reach the answer (DALI, all-to-all); NCCL time unbalanced between
GPUs that ran the same collectives says who waits for whom."""
from __future__ import annotations

import pytest

from dashcam.agent.answers.context import Ctx
from dashcam.agent.answers.cpu import DATALOADER
from dashcam.agent.ask import ask
from dashcam.agent.intents import classify_question
from dashcam.agent.models import Targets
from dashcam.profile import Profile
from dashcam.testing.activity_programs import training_activities
from dashcam.testing.builder import ExportBuilder

MS = 1_000_000


@pytest.mark.parametrize("question, intents", [
    ("is communication the bottleneck?", ["nccl"]),
    ("how much time does all-to-all take?", ["nccl"]),
    ("通信(all-to-all)占了多少时间，会不会是瓶颈？", ["nccl"]),
    ("is NCCL balanced between the two GPUs?", ["nccl"]),
    ("Why is my MFU low? what is limiting the forward pass?", ["gpu_metrics", "slow"]),
    ("what's the total GPU time vs wall time of this run?", ["overview"]),
    ("DALI 的資料載入是不是瓶頸？", ["cpu"]),
    ("what limits my frame rate? each frame takes 40 ms", ["iterations"]),  # the frame's own answer keeps it
    ("what dominates the timeline", ["slow"]),
    ("which GPU ran the kernels", ["overview"]),
])
def test_routing(question, intents):
    assert classify_question(question).intents == intents


def test_a_chinese_question_reaches_the_answer_in_its_english_words():
    ctx = Ctx(None, Targets(), "DALI 的資料載入是不是瓶頸？")
    assert "bottleneck" in ctx.question
    assert DATALOADER.search(ctx.question)


def test_the_run_against_the_gpu_window(tmp_path):
    """training_activities: host activity from 1 ms (MPI_Init's NVTX range) to 58 ms (the last pwrite64 ends):
    57 ms; the GPU window [10.2, 46.7] ms is 36.5 ms of it, 64.0 %."""
    p = Profile.open(training_activities(tmp_path / "t.sqlite"), progress=False)
    a = ask("what's the total GPU time vs wall time of this run?", p, offline=True)
    assert a.grounded, a.ungrounded_numbers
    assert ("The capture holds 57 ms of the program's run (its first to last CUDA call, OS call or NVTX range); the "
            "window of GPU activity is 64.0 % of it.") in a.answer


def _two_gpus(tmp_path, overlapped: bool):
    """GPU 0 and GPU 1 each run 4 NCCL all-reduces; GPU 0's take 3 ms, GPU 1's 1 ms (GPU 1 arrives late at each);
    ``overlapped``: a gemm on another stream runs beside GPU 0's."""
    b = ExportBuilder()
    nccl = "ncclDevKernel_AllReduce_Sum_f32_RING_LL"
    for i in range(4):
        s = i * 10 * MS
        b.kernel(0, s, s + 5 * MS, name="gemm", stream=7)
        b.kernel(0, s + 5 * MS, s + 8 * MS, name=nccl, stream=20)
        if overlapped:
            b.kernel(0, s + 5 * MS, s + 8 * MS, name="gemm2", stream=8)
        b.kernel(1, s, s + 7 * MS, name="gemm", stream=7)
        b.kernel(1, s + 7 * MS, s + 8 * MS, name=nccl, stream=20)
    return Profile.open(b.write(tmp_path / f"nccl{int(overlapped)}.sqlite"), progress=False)


def test_unbalanced_nccl_says_who_waits(tmp_path):
    a = ask("is NCCL balanced between the two GPUs?", _two_gpus(tmp_path, False), offline=True)
    assert a.grounded, a.ungrounded_numbers
    assert ("GPU 0 spends 12 ms in NCCL against GPU 1's 4 ms: a collective's kernels run until every GPU has arrived, "
            "so GPU 0 waits in them for GPU 1, which arrives late") in a.answer
    hidden = ask("is NCCL balanced between the two GPUs?", _two_gpus(tmp_path, True), offline=True)
    assert "arrives late" not in hidden.answer  # compute runs beside GPU 0's: not a wait


def test_a_word_that_is_a_segment_of_a_label_names_those_ranges(tmp_path):
    """nvFuser's `executor_utils::NVRTC` and `executor_utils::Nvrtc::CompileProgram`: "NVRTC" names them (a whole
    segment between "::"), a word inside a segment does not ("util" of `executor_utils`)."""
    from dashcam.agent.targets import parse_targets

    b = ExportBuilder()
    b.nvtx("executor_utils::NVRTC", 1 * MS, 5 * MS)
    b.nvtx("executor_utils::Nvrtc::CompileProgram", 1 * MS, 4 * MS)
    b.kernel(0, 6 * MS, 7 * MS)
    p = Profile.open(b.write(tmp_path / "nvrtc.sqlite"), progress=False)
    assert parse_targets("how long does NVRTC compilation take per kernel?", p).nvtx == "NVRTC"
    assert parse_targets("how long does util take?", p).nvtx is None


def test_a_range_is_the_label_itself_and_what_its_thread_does_inside_it(tmp_path):
    """quasiben's CuPy shape: `square-diff` holds `compute` (a first launch's module load, 0.3 ms of its 1.1 ms) and
    `faster compute` (the same kernel again, 50 us); "compute" is the label `compute`, not `faster compute` too."""
    from dashcam.tools.range_detail import Params, run

    b = ExportBuilder()
    b.process(100, "python")
    b.kernel(0, 0, 10_000, name="fill")  # the GPU window spans the ranges: [0, 2] ms
    b.kernel(0, 1_990_000, 2 * MS, name="fill")
    b.nvtx("square-diff", 0, 2 * MS)
    b.nvtx("compute", 100_000, 1_200_000)
    b.api("cuModuleLoadData", 150_000, 450_000)
    b.launch(0, 500_000, 510_000, 520_000, 530_000, name="cupy_subtract", api_name="cuLaunchKernel")
    b.nvtx("faster compute", 1_300_000, 1_350_000)
    b.launch(0, 1_310_000, 1_320_000, 1_330_000, 1_340_000, name="cupy_subtract", api_name="cuLaunchKernel")
    p = Profile.open(b.write(tmp_path / "cupy.sqlite"), progress=False)
    r = run(p, Params(label="compute"))
    assert (r.instances, r.total_ns, r.other_labels) == (1, 1_100_000, ["faster compute"])
    assert [(c.name, c.count, c.total_ns) for c in r.api_calls] == [("cuModuleLoadData", 1, 300_000),
                                                                    ("cuLaunchKernel", 1, 10_000)]
    outer = run(p, Params(label="square-diff"))
    assert [(x.name, x.total_ns) for x in outer.inner_ranges] == [("compute", 1_100_000), ("faster compute", 50_000)]
    a = ask('why does the "compute" range take 1.1 ms but "faster compute" only 0.05 ms?', p, offline=True)
    assert a.grounded, a.ungrounded_numbers
    assert "`cuModuleLoadData` 1 call, 0.3 ms" in a.answer and "loads GPU code" in a.answer


def test_a_named_kernels_launch_config_is_its_analysis_not_launch_overhead():
    from dashcam.agent.entities import entity_intent

    t = Targets(kernel="cupy_subtract")
    assert entity_intent("launch", t, None, "kernel launch config for cupy_subtract") == "top_kernels"
    assert entity_intent("launch", t, None, "is cupy_subtract launch-bound?") == "launch"


def test_times_past_the_gpu_window_are_read_from_the_capture_start(tmp_path):
    """training_activities: the GPU window is [10.2, 46.7] ms of the capture (36.5 ms). "between 40 ms and 46 ms"
    lies past its end as window times; read from the capture's start (nsys' timeline) it is 29.8 to 35.8 ms."""
    from dashcam.agent.planner import answer_offline

    p = Profile.open(training_activities(tmp_path / "t.sqlite"), progress=False)
    a = answer_offline("why is the GPU idle between 40 ms and 46 ms?", p)
    assert "from 29.8 ms to 35.8 ms" in a.answer, a.answer
    assert any("read from the start of the capture" in n and "29.800 to 35.800 ms of the GPU window, which starts "
               "10.200 ms into the capture" in n for n in a.notes), a.notes
    assert a.grounded, a.ungrounded_numbers
    # beyond the capture as well: nothing to read
    b = answer_offline("why is the GPU idle between 400 ms and 460 ms?", p)
    assert "Nothing falls in the requested window" in b.answer
