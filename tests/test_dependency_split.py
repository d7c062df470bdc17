"""The dependency split (profile/gap_dependency.py): a GPU's device-side `dependency` time told as launch-to-start
latency, real waits or back-to-back turnaround, and the idle finding said and advised by the part that leads.
Every figure is planted (testing/dependency_programs.py and scenarios.pipeline_bubble state them)."""
from __future__ import annotations

import re

from dashcam.agent.chat import ChatSession
from dashcam.agent.planner import answer_offline
from dashcam.findings import diagnose
from dashcam.profile import Profile
from dashcam.tools import get_tool

from .conftest import MS, US

gaps = get_tool("gpu_gaps")




def split_of(p: Profile, gpu: int = 0, **params):
    dev = next(d for d in gaps(p, params).devices if d.device_id == gpu)
    return dev, dev.dependency_split


def idle_finding(p: Profile):
    d = diagnose(p)
    return d, next(f for f in d.findings if f.kind == "idle")


def test_launch_to_start_latency_is_named_and_not_an_event_wait(planted):
    p = planted("launch_to_start")
    dev, s = split_of(p)
    assert dev.causes["dependency"] == 49 * 120 * US == 5_880_000
    assert (s.launch_latency_ns, s.wait_ns, s.turnaround_ns, s.wait_calls) == (5_880_000, 0, 0, {})
    assert (s.latency_gaps, s.latency_p10_ns, s.latency_p50_ns, s.latency_p90_ns) == (49, 120_000, 120_000, 120_000)
    d, f = idle_finding(p)
    assert (f.cause, f.figures["dependency_part"], f.saving_ns, f.figures["latency_p50_ns"]) == (
        "dependency", "launch_latency", 5_880_000, 120_000)
    assert "launch-to-start latency: each kernel starts a median 0.12 ms after its launch call returned" in f.sentence
    assert "another process" not in f.sentence and "nvidia-smi" not in f.advice
    assert "StreamWaitEvent" not in f.advice and "StreamWaitEvent" not in d.paragraph
    assert "Queue work ahead" in f.advice


def test_a_window_splits_its_cut_gaps_on_their_clipped_bounds(planted):
    dev, s = split_of(planted("launch_to_start"), start_ms=0.25, end_ms=15.0)
    assert dev.causes["dependency"] == s.launch_latency_ns == (45 * 120 + 70 + 80) * US
    assert (s.latency_gaps, s.latency_p50_ns, s.wait_ns) == (47, 120_000, 0)


def test_a_large_constant_delay_says_what_the_trace_cannot_see(planted):
    p = planted("constant_delay")
    dev, s = split_of(p)
    assert (s.launch_latency_ns, s.wait_ns, s.latency_gaps) == (19 * 4400 * US, 0, 19) == (83_600_000, 0, 19)
    assert s.latency_p10_ns == s.latency_p50_ns == s.latency_p90_ns == 4.4 * MS
    d, f = idle_finding(p)
    assert (f.figures["dependency_part"], f.saving_ns) == ("launch_latency", 83_600_000)
    assert "a median 4.4 ms after its launch call returned" in f.sentence
    assert "another process or context sharing the GPU" in f.sentence
    assert "`nvidia-smi`" in f.advice and "StreamWaitEvent" not in f.advice


def test_a_question_about_the_delayed_kernel_names_what_the_trace_cannot_see(planted):
    p = planted("constant_delay")
    r = get_tool("kernel_detail")(p, {"kernel": "solver_kernel"})
    # the first launch starts 15 us after its call, the other 19 at 4.4 ms; no stream-wait call in the capture
    assert (r.latency_launches, r.latency_total_ns, r.latency_p10_ns, r.latency_p90_ns, r.stream_wait_calls) == (
        20, 19 * 4400 * US + 15 * US, 4.4 * MS, 4.4 * MS, 0)
    a = answer_offline("why is there a gap before every solver_kernel?", p)
    assert "83.615 ms of waiting in all" in a.answer
    assert "no traced call made it wait on another stream" in a.answer and "another process or context" in a.answer
    assert "`--gpuctxsw=true`" in a.answer and a.grounded, a.ungrounded_numbers
    # with stream-wait calls in the capture the waits are not blamed on another process
    w = get_tool("kernel_detail")(planted("stream_waits"), {})
    assert w.stream_wait_calls == 79


def test_a_small_launch_delay_with_no_wait_call_is_told_as_launch_latency(planted):
    p = planted("launch_to_start")
    k = get_tool("kernel_detail")(p, {"kernel": "stencil_kernel"})
    # 50 waits of 120 us but the first (15 us, before the window): the GPU idles in 49 of them, 5.88 ms
    assert (k.latency_total_ns, k.latency_idle_waits, k.latency_idle_ns, k.stream_wait_calls) == (
        5_895 * US, 49, 5_880 * US, 0)
    a = answer_offline("why does each stencil_kernel start late?", p)
    assert "(the GPU sat idle in 49 of them, 5.88 ms in all: what the latency costs it)" in a.answer
    assert ("no traced call made it wait on another stream: this is its launch-to-start latency. Queue work ahead"
            in a.answer)
    assert not re.search(r"another process|stream or event wait|work is queued ahead", a.answer), a.answer
    assert a.grounded, a.ungrounded_numbers


def test_what_a_named_stream_waits_on_in_ask_and_in_chat(planted):
    p = planted("stream_waits")
    rows = {s.stream_id: s.top_kernel for s in get_tool("streams")(p).devices[0].streams}
    assert rows == {7: "producer_kernel", 8: "consumer_kernel"}
    said = ("Its kernels wait on the device: in GPU 0's largest gaps `consumer_kernel` starts after `producer_kernel` "
            "ends (another stream's work), behind the GPU's stream-wait calls (79 `cudaStreamWaitEvent`, 1.58 ms of "
            "waiting in all).")
    assert said in answer_offline("what is stream 8 waiting on?", p).answer
    chat = ChatSession(p, str(p.path), offline=True)  # chat keeps the stream the question names
    a = chat.handle("what is stream 8 waiting on?")
    assert a.targets.streams == [8] and said in a.answer and a.grounded, a.ungrounded_numbers


def test_stream_waits_are_real_waits_named_with_their_count(planted):
    p = planted("stream_waits")
    dev, s = split_of(p)
    assert (dev.kernel_idle_ns, dev.causes["dependency"]) == (79 * 20 * US, 1_580_000)
    assert (s.wait_ns, s.wait_call_ns, s.launch_latency_ns, s.turnaround_ns) == (1_580_000, 1_580_000, 0, 0)
    assert s.wait_calls == {"cudaStreamWaitEvent": 79}
    d, f = idle_finding(p)
    assert (f.figures["dependency_part"], f.figures["wait_call"], f.figures["wait_calls"], f.saving_ns) == (
        "wait", "cudaStreamWaitEvent", 79, 1_580_000)
    assert "behind 79 `cudaStreamWaitEvent` calls" in f.sentence
    assert f.advice.startswith("Check the 79 stream waits (`cudaStreamWaitEvent`)")


def test_back_to_back_turnaround_is_healthy_not_a_dependency(planted):
    p = planted("back_to_back")
    dev, s = split_of(p)
    assert (dev.kernel_busy_pct, dev.kernel_idle_ns, dev.causes["dependency"]) == (98.049, 199 * US, 199 * US)
    assert (s.turnaround_ns, s.launch_latency_ns, s.wait_ns) == (199_000, 0, 0)
    assert (s.turnaround_gaps, s.turnaround_gap_ns, s.turnaround_pct) == (199, 199_000, 100.0)
    d = diagnose(p)
    assert d.verdict == "healthy" and not [f for f in d.findings if f.kind == "idle"]
    assert not any("StreamWaitEvent" in (f.advice or "") or "dependenc" in (f.advice or "") for f in d.findings)


def test_a_pipeline_stage_waits_on_the_other_gpu(planted):
    """pipeline_bubble GPU 0: its one 6 ms gap is all dependency, its kernel launched after the stream waits
    between the stages, while GPU 1 runs: a real wait, not latency."""
    p = planted("pipeline_bubble")
    dev, s = split_of(p)
    assert (s.wait_ns, s.launch_latency_ns, dev.causes["dependency"]) == (6 * MS, 0, 6 * MS)
    d, f = idle_finding(p)
    assert f.figures["dependency_part"] == "wait" and f.saving_ns == 6 * MS
    assert "`cudaStreamWaitEvent`" in f.advice and "other GPUs this one waits on" in f.advice


def test_ask_glosses_latency_as_latency_not_an_event_wait(planted):
    """ask's idle answer glosses the cause by the part that leads: no 'an event, another stream or GPU' for a
    single-stream capture whose kernels only start late."""
    answer = answer_offline("Why is the GPU idle?", planted("launch_to_start")).answer
    assert "`dependency` 5.88 ms (100.0 % of kernel-idle: the device empty after each launch)" in answer
    assert "an event" not in answer and "StreamWaitEvent" not in answer
    waits = answer_offline("Why is the GPU idle?", planted("stream_waits")).answer
    assert ("(100.0 % of kernel-idle: waiting on a dependency (an event, another stream or GPU)), real waits (behind 79"
            in waits)


def test_another_gpus_work_is_a_wait_only_where_it_overlaps(planted):
    p = planted("other_gpu_wait")
    g1, s1 = split_of(p, gpu=1)
    assert (g1.kernel_idle_ns, g1.kernel_idle_pct, g1.causes["dependency"]) == (4 * MS, 57.143, 4 * MS)
    assert (s1.wait_ns, s1.wait_other_gpus_ns, s1.wait_call_ns, s1.wait_calls) == (3 * MS, 3 * MS, 0, {})
    assert (s1.launch_latency_ns, s1.latency_gaps, s1.latency_p50_ns) == (1 * MS, 1, 1 * MS)
    g0, s0 = split_of(p, gpu=0)
    assert (g0.kernel_idle_ns, s0.launch_latency_ns, s0.wait_ns, s0.latency_gaps) == (1 * MS, 1 * MS, 0, 1)
    d = diagnose(p)
    idle = {f.gpus[0]: f for f in d.findings if f.kind == "idle"}
    assert (idle[1].figures["dependency_part"], idle[1].saving_ns) == ("wait", 3 * MS)
    assert "3 ms of it real waits (all while other GPUs' kernels ran)" in idle[1].sentence
    assert "StreamWaitEvent" not in idle[1].advice and "other GPUs this one waits on" in idle[1].advice
    # GPU 0: 1 ms of latency in one gap is large, but no constant pattern: no "another process"
    assert (idle[0].figures["dependency_part"], idle[0].saving_ns) == ("launch_latency", 1 * MS)
    assert "(in its one gap)" in idle[0].sentence and "another process" not in idle[0].sentence
