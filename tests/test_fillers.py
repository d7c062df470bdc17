"""What fills a GPU's time, on the planted programs of testing/fillers_programs.py (their docstrings state every
figure): unified-memory migrations are tied to the kernel that ran while they were serviced, and tails and gaps
are named by what fills most of them (OS runtime calls included), never by a minor filler or a handful of CPU
samples."""
from __future__ import annotations

import re

from dashcam.agent.planner import answer_offline
from dashcam.findings import advice, diagnose
from dashcam.findings.thresholds import MIN_NAMED_SAMPLES
from dashcam.testing.fillers_programs import MB
from dashcam.tools import get_tool

from .conftest import MS, US

TASKSET = re.compile(r"taskset|OMP_NUM_THREADS|core count", re.I)


def test_the_only_kernel_pays_for_the_page_faults_during_it(planted):
    d = diagnose(planted("um_one_kernel"))
    f = d.lead
    # 536 migrations of 1 MB, 200 us each, [1.5, 108.7] ms, all inside the 113 ms `add`: none in a gap
    assert (d.verdict, f.kind, f.cause, f.figures["kernel"], f.figures["kernel_ns"]) == (
        "um_migrations", "um_migrations", "kernel", "add", 113 * MS)
    assert (f.figures["migration_overlap_ns"], f.figures["migration_overlap_bytes"], f.figures["faults"]) == (
        107_200 * US, 536 * MB, 536 * 4)
    assert f.figures["overlap_pct"] == 94.867 and f.saving_ns == 107_200 * US and f.severity == "high"
    assert f.figures["saving_basis"] == "migrations removed (the kernel time they overlap)"
    assert ("`add` ran 113 ms while the driver migrated 536 MB of managed pages during it (2144 GPU page faults): "
            "94.9 % of its time overlaps migrations (107.2 ms)") in d.paragraph
    assert "cudaMemPrefetchAsync" in f.advice and "capture more" not in d.paragraph.lower()


def test_migrations_are_blamed_on_the_kernel_they_overlap_not_the_next(planted):
    p = planted("um_before_next_kernel")
    u = get_tool("memory")(p).unified
    # 15 ms of migrations under each of the 5 `gather_kernel` launches; `scatter_kernel`, queued behind it, waits
    # while A runs: none of that wait is its own
    assert [(k.name, k.launches, k.kernel_ns, k.migration_overlap_ns, k.migration_overlap_bytes, k.overlap_pct,
             k.migration_wait_ns) for k in u.kernels_waiting] == [
        ("gather_kernel", 5, 100 * MS, 75 * MS, 150 * MB, 75.0, 0)]
    f = diagnose(p).lead
    assert (f.kind, f.figures["kernel"], f.saving_ns) == ("um_migrations", "gather_kernel", 75 * MS)
    assert "scatter_kernel" not in f.sentence
    a = answer_offline("Does unified memory slow it down?", p)
    assert "`gather_kernel` waited on them: 75 ms of its 100 ms overlap migrations (75.0 %)" in a.answer


def test_a_tail_with_two_percent_migrations_is_not_filled_by_migrations(planted):
    d = diagnose(planted("um_sparse_tail"))
    f = d.lead
    assert (f.kind, f.cause, f.figures["tail_ns"], f.figures["tail_migration_ns"]) == (
        "idle", "tail", 605 * MS, 12_100 * US)
    assert "tail_filler" not in f.figures  # nothing covers TAIL_FILLER_MIN_PCT of it
    assert "filled by unified-memory migrations" not in d.paragraph
    assert "filled by nothing on the GPUs for most of it (unified-memory migrations 12.1 ms of its 605 ms)" in \
        d.paragraph
    assert "cudaMemPrefetchAsync" not in f.advice and not [x for x in d.findings if x.kind == "um_migrations"]


def test_a_tail_of_pwrite64_is_output_io_not_host_code_on_two_samples(planted):
    p = planted("pwrite_tail")
    t = get_tool("gpu_gaps")(p).devices[0].tail
    assert (t.duration_ns, t.memory_ns, t.host_os_calls, t.host_samples) == (
        89 * MS, 14 * MS, {"pwrite64": 70_600 * US}, 2)
    assert (t.host_states["os_call"], t.host_states["running"]) == (70_600 * US, 4_400 * US)
    assert (t.host_functions[0].function, t.host_functions[0].self_samples) == ("format_rows(Table const&)", 2)
    assert MIN_NAMED_SAMPLES > 2 and advice.sampled_function(t.host_functions) is None
    d = diagnose(p)
    f = d.lead
    assert (f.kind, f.cause, f.figures["tail_filler"], f.figures["tail_filler_ns"]) == (
        "idle", "tail", "output", 70_600 * US)
    # what the GPU could win is the rest of the tail: 89 - 70.6 = 18.4 ms (14.3 % of the 129 ms window): low
    assert (f.saving_ns, f.severity) == (18_400 * US, "low")
    assert f.figures["saving_basis"].startswith("the tail without its output I/O")
    assert ("89 ms of it is the tail after its last kernel, filled by `pwrite64` calls (70.6 ms): the program "
            "writing its output at teardown (output I/O, not a GPU problem)") in d.paragraph
    assert f.advice.startswith("Not a GPU problem") and "format_rows" not in d.paragraph


def test_a_camera_paced_loop_is_paced_not_oversubscribed(planted):
    p = planted("camera_paced")
    g = get_tool("gpu_gaps")(p).devices[0]
    assert (g.causes["cpu_work"], g.cpu_work_states["descheduled"]) == (837_360 * US, 758_400 * US)
    assert (g.cpu_work_paced_by.call, g.cpu_work_paced_by.calls, g.cpu_work_paced_by.period_ns) == (
        "ioctl", 24, 40 * MS)
    assert (g.busy_threads, g.cpu_cores, g.parallel_runtime_threads) == (2, 6, 0)
    assert not advice.oversubscribed(g)
    d = diagnose(p)
    f = d.lead
    assert (f.kind, f.cause, f.figures["host_state"]) == ("idle", "cpu_work", "descheduled")
    assert "the loop is paced by its input (`ioctl` on a device every 40 ms, 25 per second)" in d.paragraph
    assert not TASKSET.search(d.paragraph)
    # one frame's window holds one ioctl: the period is the capture's (24 calls), so a step is paced too
    one = get_tool("gpu_gaps")(p, {"start_ms": 0, "end_ms": 40}).devices[0].cpu_work_paced_by
    assert (one.call, one.calls, one.period_ns) == ("ioctl", 25, 40 * MS)
    a = answer_offline("what limits my frame rate?", p)
    assert "the loop is paced by its input" in a.answer and "outside the traced calls" not in a.answer


def test_a_thread_that_loses_its_core_to_busy_workers_gets_the_core_advice(planted):
    p = planted("oversubscribed")
    g = get_tool("gpu_gaps")(p).devices[0]
    # 19 gaps of 3 ms: cpu_work 2.9 ms each, 2.6 ms of it off the CPU; 6 workers on a CPU all along, 4 cores
    assert (g.causes["cpu_work"], g.cpu_work_states["descheduled"]) == (19 * 2_900 * US, 19 * 2_600 * US)
    assert (g.busy_threads, g.cpu_cores, g.cpu_work_paced_by) == (6, 4, None) and advice.oversubscribed(g)
    f = diagnose(p).lead
    assert (f.kind, f.cause, f.figures["host_state"]) == ("idle", "cpu_work", "descheduled")
    assert "`taskset`" in f.advice and "paced" not in f.advice


def test_descheduled_with_cores_to_spare_is_not_told_to_pin_threads(planted):
    p = planted("descheduled_spare_cores")
    g = get_tool("gpu_gaps")(p).devices[0]
    assert (g.busy_threads, g.cpu_cores, g.cpu_work_paced_by) == (6, 16, None) and not advice.oversubscribed(g)
    d = diagnose(p)
    assert d.lead.figures["host_state"] == "descheduled" and not TASKSET.search(d.paragraph)
    assert "no sign of too many busy threads (6 busy threads on 16 cores)" in d.lead.advice


def test_an_os_runtime_function_named_in_the_question_gets_its_calls(planted):
    """pwrite64 [47.8, 83.1] and [90.1, 125.4] ms: 70.6 ms, all after the last kernel (41 ms), on thread 8400."""
    p = planted("pwrite_tail")
    r = get_tool("api_detail")(p, {"name": "PWRITE64"})
    assert (r.function, r.source, r.calls, r.total_ns, r.union_ns, r.max_ns) == (
        "pwrite64", "os_runtime", 2, 70_600 * US, 70_600 * US, 35_300 * US)
    assert (r.after_gpu_ns, r.before_gpu_ns, r.gpu_busy_ns, r.outside_calls, r.capture_calls) == (
        70_600 * US, 0, 0, 0, 2)
    assert [(t.tid, t.calls) for t in r.threads] == [(8400, 2)]
    a = answer_offline("how long does pwrite64 take at the end of my run?", p)
    assert a.intent == "cpu"
    assert a.answer.startswith("`pwrite64` (an OS runtime call): 2 calls from one thread in the 129 ms window, 70.6 ms "
                             "in all (median 35.3 ms, longest 35.3 ms). It falls after the GPU's last kernel (all "
                             "of it), in the run's tail: the program writing its output at teardown")
    assert a.grounded, a.ungrounded_numbers


def test_a_plain_word_is_an_os_function_only_when_said_as_code(planted):
    from dashcam.agent.targets import parse_targets

    p = planted("pwrite_tail")
    assert parse_targets("how much time do the pwrite64 calls take?", p).osrt == "pwrite64"
    assert parse_targets("where is time spent in pwrite64?", p).osrt == "pwrite64"
    assert parse_targets("what is the write speed of my run?", p).osrt is None  # no `write` in this capture
    assert parse_targets("why is GPU 0 idle?", p).osrt is None
