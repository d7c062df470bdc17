"""A question that times an activity by its common name (issue 25): the optimizer, the GEMMs, attention, the backward
pass, file I/O, MPI's start-up, or words of the user's own — found by name in the capture, with the figures the
planted program has by construction (dashcam.testing.activity_programs), or said to be absent with what would
record it; never the health summary in its place."""
from __future__ import annotations

import re

import pytest

from dashcam.agent.activities import activity_intent, asked_activity, subject
from dashcam.agent.ask import ask
from dashcam.agent.models import Targets
from dashcam.measure.activities import activity_named, patterns
from dashcam.profile import Profile
from dashcam.testing.activity_programs import training_activities
from dashcam.tools.feature_time import Params, run

MS = 1_000_000


@pytest.fixture(scope="module")
def program(tmp_path_factory):
    return training_activities(tmp_path_factory.mktemp("activities") / "train.sqlite")


@pytest.fixture(scope="module")
def profile(program):
    return Profile.open(program, progress=False)


def _time(profile, **kw):
    return run(profile, Params(**kw))


def test_kernel_family_is_its_kernels_time_and_share(profile):
    r = _time(profile, activity="GEMM kernels")
    k = next(s for s in r.sources if s.source == "kernels")
    assert (k.count, k.summed_ns, k.pct_of_kernel_time) == (4, 4 * MS, 20.0)
    assert [n.name for n in k.names] == ["ampere_sgemm_128x64_tn"]
    r = _time(profile, activity="attention kernels")
    k = next(s for s in r.sources if s.source == "kernels")
    assert (k.count, k.summed_ns, k.pct_of_kernel_time) == (8, 14 * MS, 70.0)
    assert [(n.name, n.total_ns) for n in k.names] == [("flash_bwd_kernel", 8 * MS), ("flash_fwd_kernel", 6 * MS)]


def test_optimizer_from_its_ranges_clipped_to_the_window_with_the_rest_outside(profile):
    r = _time(profile, activity="the optimizer")
    assert r.window.length_ns == 36_500_000
    assert (r.found, r.main_source, r.total_ns) == (True, "nvtx", 6_700_000)
    nvtx = next(s for s in r.sources if s.source == "nvtx")
    assert (nvtx.count, nvtx.outside_count, nvtx.outside_ns) == (4, 0, 1_300_000)
    kernels = next(s for s in r.sources if s.source == "kernels")
    assert (kernels.summed_ns, kernels.names[0].name) == (2 * MS, "multi_tensor_apply_kernel")


def test_file_io_after_the_last_kernel_is_counted_outside_the_window(profile):
    r = _time(profile, activity="file I/O")
    osrt = next(s for s in r.sources if s.source == "osrt")
    assert (osrt.count, osrt.summed_ns) == (1, 1 * MS)  # `read`, inside
    assert (osrt.outside_count, osrt.outside_ns) == (3, 6 * MS)
    assert [(n.name, n.count, n.total_ns) for n in osrt.outside_names] == [("pwrite64", 3, 6 * MS)]


def test_literal_words_match_as_words_and_fall_back_to_one_of_them(profile):
    assert _time(profile, activity="halo exchange").found is False
    r = _time(profile, activity="sgemm exchange")  # the two words name nothing together; `sgemm` alone does
    assert (r.found, r.matched, r.total_ns) == (True, "sgemm", 4 * MS)
    word = re.compile(patterns("exchange")["api"], re.I)
    assert word.search("halo_exchange") and word.search("exchangeHalo")
    assert not word.search("cudaThreadExchangeStreamCaptureMode")
    assert re.search(patterns("halo exchanges")["nvtx"], "update_halo_exchange", re.I)


@pytest.mark.parametrize("question, activity", [
    ("how much time does the optimizer take?", "the optimizer"),
    ("how long do the GEMMs take?", "GEMM kernels"),
    ("what share of the time goes to matrix multiplies?", "GEMM kernels"),
    ("how much time is spent in data loading?", "data loading"),
    ("how long does saving the checkpoint take?", "checkpoint saving"),
    ("how much time do layer norms take?", "normalization kernels"),
    ("how can I reduce the time?", None),           # the verb, not reduction kernels
    ("where is the time loss?", None),              # a loss of time, not the loss
])
def test_activity_words(question, activity):
    assert activity_named(question) == activity


@pytest.mark.parametrize("question, words", [
    ("how long does one halo exchange take?", "halo exchange"),
    ("how much time is spent in the particle push?", "particle push"),
    ("how much time goes to mesh refinement?", "mesh refinement"),
    ("how long does it take?", None),
])
def test_subject_of_a_time_question(question, words):
    assert subject(question) == words


def test_routing_keeps_entities_comparisons_and_other_subjects():
    t = Targets()
    assert activity_intent("unknown", t, "how much time does the optimizer take?") == "time_in"
    assert activity_intent("iterations", t, "how long does the optimizer step take?") == "time_in"
    assert activity_intent("memcpy", t, "how much time is spent in the data loader?") == "time_in"
    assert activity_intent("unknown", t, "how long does one halo exchange take?") == "time_in"
    # two activities: a comparison the NVTX table answers; a named range: its own analysis
    assert activity_intent("nvtx", t, "how long is the backward pass compared with the forward pass?") == "nvtx"
    assert activity_intent("nvtx", Targets(nvtx="forward"), "how long does the forward pass take?") == "nvtx"
    assert activity_intent("memcpy", t, "how much time do the copies take?") == "memcpy"
    assert activity_intent("idle", t, "how much time is the GPU idle during the optimizer?") == "idle"
    assert asked_activity("优化器花了多少时间？") == "the optimizer"


@pytest.mark.parametrize("question, said, forbidden", [
    ("how much time does the optimizer take?",
     ["`Optimizer.step#AdamW.step` 4 ranges, 6.7 ms", "18.4 %", "`multi_tensor_apply_kernel` 2 ms", "1.3 ms more"],
     ["First thing to try"]),
    ("how long do the GEMMs take?", ["GEMM kernels take 4 ms of GPU time (20.0 % of all kernel time)"], []),
    ("how much time goes to attention?", ["Attention kernels take 14 ms", "70.0 %", "`flash_bwd_kernel` 4 launches"],
     []),
    ("how much time does the backward pass take?", ["Kernels named like the backward pass take 8 ms"], []),
    ("how much time is spent writing the output files?", ["`pwrite64` 3 calls, 6 ms"], []),
    ("why does MPI_Init take so long?", ["`MPI_Init`: 1 range, 8 ms, outside the window", "start-up"], []),
    ("how long does checkpoint saving take?", ["Nothing in this capture is named like checkpoint saving",
                                               "NVTX ranges", "nvtxRangePushA"], ["First thing to try"]),
    ("how long does one halo exchange take?", ["Nothing in this capture is named like `halo exchange`"],
     ["First thing to try"]),
])
def test_answers(program, question, said, forbidden):
    a = ask(question, Profile.open(program, progress=False), offline=True)
    assert a.intent == "time_in" and a.grounded, a.answer
    for s in said:
        assert s in a.answer, a.answer
    for s in forbidden:
        assert s not in a.answer, a.answer
