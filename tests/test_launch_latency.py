"""launch_latency: planted launch-bound and GPU-bound stretches with exact queue delays, the verdict,
unmatched kernels, and who launched a kernel (thread, innermost NVTX range)."""
import sqlite3
from collections import Counter

import pytest

from dashcam.errors import NoGpuActivity
from dashcam.testing.builder import ExportBuilder
from dashcam.tools import get_tool

from .conftest import MS, SHARED_GPU, SHARED_SQLITE, US, plain_window

tool = get_tool("launch_latency")


def device(r, device_id=0):
    return next(d for d in r.devices if d.device_id == device_id)


def test_launch_bound_stretch(build):
    b = ExportBuilder()
    b.memcpy(0, 0, 10 * US, 1024)  # window [0, 2010] us, set by the two copies
    b.memcpy(0, 2000 * US, 2010 * US, 1024)
    for i in range(100):  # calls back to back: [20i, 20i+20] us; 5 us kernel starting (i % 10)*100 ns after it ends
        call_end = (20 * i + 20) * US
        q = 100 * (i % 10)
        b.launch(0, 20 * i * US, call_end, call_end + q, call_end + q + 5 * US, name=f"tiny{i % 4}")
    d = device(tool(build(b)))
    assert (d.kernels, d.launches, d.unmatched) == (100, 100, 0)
    assert (d.api_p50_ns, d.api_p95_ns, d.api_max_ns) == (20 * US, 20 * US, 20 * US)
    # queue delays 0, 100, ..., 900 ns ten times each; linear interpolation: p50 = 450, p95 at rank 94.05 = 900
    assert (d.queue_p50_ns, d.queue_p95_ns, d.queue_max_ns) == (450.0, 900.0, 900)
    assert d.launches_per_s == 49_751.244  # 100 launches / 2010 us
    assert d.mean_kernel_ns == 5 * US and d.median_kernel_ns == 5 * US
    assert d.kernel_busy_pct == 24.876  # 500 us of 2010 us
    # 100 calls of 20 us; the first launch of each of the 4 kernel names is the module-loading one
    assert (d.launch_call_ns, d.first_launch_ns, d.first_launch_count) == (2000 * US, 80 * US, 4)
    assert d.launch_call_pct == 99.502
    assert d.launch_bound is True
    assert d.verdict_reason == ("launch-bound: 100 launches >= 100; launch calls after each kernel's first take 95.5% "
                                "of the window >= 10%; kernel-busy 24.9% < 70%; median queue delay 0.45 us < 10.00 us; "
                                "median kernel 5.00 us < median launch call 20.00 us")
    assert [s.stream_id for s in d.streams] == [7] and d.streams[0].queue_p50_ns == 450.0


def test_few_launches_are_not_launch_bound(build):
    """The same pattern with 10 launches: every other condition holds, but 10 launches are too few."""
    b = ExportBuilder()
    b.memcpy(0, 0, 10 * US, 1024)
    b.memcpy(0, 240 * US, 250 * US, 1024)
    for i in range(10):
        call_end = (20 * i + 20) * US
        b.launch(0, 20 * i * US, call_end, call_end + 100 * i, call_end + 100 * i + 5 * US, name="tiny")
    d = device(tool(build(b)))
    assert d.launch_bound is False
    assert d.verdict_reason.startswith("not launch-bound: 10 launches < 100")


def test_first_launches_are_module_loading_not_launch_overhead(build):
    """200 short kernels whose launch calls are 2 us each, except the first of each of 2 names, 5 ms (lazy
    module loading). The window starts with the first kernel, after its own first launch call: inside it
    the launch calls take 5 ms (k1's first) + 198 x 2 us = 5.396 ms of 5.795 ms, 93 %, but without the
    first launches 0.396 ms, 6.8 %: module loading, not launch overhead."""
    b = ExportBuilder()
    t = 0
    for i in range(200):
        call = 5 * MS if i < 2 else 2 * US
        b.launch(0, t, t + call, t + call + 100, t + call + 100 + 1 * US, name=f"k{i % 2}")
        t += call + 2 * US
    d = device(tool(build(b)))
    assert d.first_launch_count == 1 and d.first_launch_ns == 5 * MS
    assert d.launch_call_ns == 5 * MS + 198 * 2 * US
    assert d.launch_bound is False and d.verdict_reason == (
        "not launch-bound: launch calls after each kernel's first take 6.8% of the window < 10%")


def test_gpu_bound_stretch_queue_grows(build):
    b = ExportBuilder()
    for i in range(10):  # calls back to back every 20 us, 1 ms kernels queue behind each other
        b.launch(0, 20 * i * US, (20 * i + 20) * US, (20 + 1000 * i) * US, (1020 + 1000 * i) * US, name="big")
    r = tool(build(b))
    d = device(r)
    # queue delay of kernel i = (20 + 1000 i) - (20 i + 20) = 980 i us
    assert d.queue_p50_ns == 4.5 * 980 * US
    assert d.queue_p95_ns == 8379 * US  # rank 8.55 of 0, 980, ... us
    assert d.queue_max_ns == 9 * 980 * US
    assert r.window.length_ns == 10 * MS
    assert d.kernel_busy_pct == 100.0
    assert d.launches_per_s == 1000.0
    assert d.launch_bound is False
    assert d.verdict_reason == ("not launch-bound: 10 launches < 100; launch calls after each kernel's first take 1.8% "
                                "of the window < 10%; kernel-busy 100.0% >= 70%; median queue delay 4410.00 us >= "
                                "10.00 us; median kernel 1000.00 us >= median launch call 20.00 us")


def test_kernel_before_call_returns_has_negative_queue_delay(build):
    b = ExportBuilder()
    b.launch(0, 0, 10 * US, 7 * US, 8 * US)  # starts 3 us before its call returns
    d = device(tool(build(b)))
    assert (d.queue_p50_ns, d.queue_max_ns) == (-3 * US, -3 * US)


@pytest.mark.parametrize("schema", ["2024", "2022", "2021"])
def test_schema_flavours(build, schema):
    b = ExportBuilder(schema)  # 2022: backtrace duplicates (eventClass 67, 100 ns wider) of every runtime call
    b.launch(0, 0, 5 * US, 7 * US, 9 * US)
    d = device(tool(build(b, f"{schema}.sqlite")))
    assert (d.launches, d.api_max_ns, d.queue_max_ns) == (1, 5 * US, 2 * US)


def test_unmatched_kernels_and_join_needs_same_pid(build):
    b = ExportBuilder()
    b.launch(0, 0, 10 * US, 20 * US, 30 * US, pid=100)  # corr 1 of pid 100
    b.kernel(0, 40 * US, 50 * US, pid=100)  # no call at all
    b.kernel(0, 60 * US, 70 * US, pid=200, corr=1)  # pid 200's corr 1: pid 100's call must not match it
    r = tool(build(b))
    d = device(r)
    assert (d.kernels, d.launches, d.unmatched, r.unmatched) == (3, 1, 2, 2)
    assert d.queue_p50_ns == 10 * US and d.api_max_ns == 10 * US
    assert any("2 kernels have no launch call" in n for n in r.notes)


def test_per_stream_rows(build):
    b = ExportBuilder()
    for i, (stream, delay) in enumerate([(7, 1), (8, 3), (7, 1), (8, 3), (8, 3)]):
        t = 100 * i * US
        b.launch(0, t, t + 10 * US, t + (10 + delay) * US, t + 50 * US, stream=stream)
    d = device(tool(build(b)))
    assert d.queue_p50_ns == 3 * US  # delays 1, 1, 3, 3, 3
    assert [(s.stream_id, s.launches, s.queue_p50_ns) for s in d.streams] == [(8, 3, 3 * US), (7, 2, 1 * US)]
    assert d.stream_count == 2
    r = tool(build(b), {"limit": 1})
    assert [s.stream_id for s in device(r).streams] == [8]
    assert any("streams: showing the 1 streams" in n for n in r.notes)


def test_no_api_rows_reports_kernels_without_verdict(build):
    b = ExportBuilder()
    b.kernel(0, 0, 10 * US)
    b.kernel(0, 20 * US, 40 * US)
    r = tool(build(b))
    d = device(r)
    assert (d.kernels, d.launches, d.unmatched) == (2, 0, 2)
    assert d.queue_p50_ns is None and d.api_p50_ns is None and d.launches_per_s == 0.0
    assert d.kernel_busy_pct == 75.0 and d.mean_kernel_ns == 15 * US
    assert d.launch_bound is None and d.verdict_reason.startswith("no verdict")
    assert any("launches cannot be matched" in n for n in r.notes)


def test_gpu_filter_and_device_without_kernels(build):
    b = ExportBuilder()
    b.launch(0, 0, 10 * US, 10 * US, 20 * US)
    b.memcpy(1, 0, 40 * US, 1 << 20)  # device 1: copies only
    r = tool(build(b))
    assert [d.device_id for d in r.devices] == [0, 1]
    d1 = device(r, 1)
    assert (d1.kernels, d1.launches, d1.launch_bound, d1.streams) == (0, 0, None, [])
    assert [d.device_id for d in tool(build(b), {"gpu": 0}).devices] == [0]


def test_api_only_profile_has_no_window(build):
    b = ExportBuilder()
    b.api("cudaMalloc", 0, 10 * US)
    with pytest.raises(NoGpuActivity):
        tool(build(b))


def nvtx_launch_profile() -> ExportBuilder:
    b = ExportBuilder()
    b.thread(100, 100, "python")
    b.thread(100, 101, "worker")
    b.nvtx("step", 0, 1000 * US)
    b.nvtx("a", 10 * US, 30 * US)
    b.nvtx("b", 40 * US, 500 * US)
    b.nvtx("c", 50 * US, 60 * US)  # nested in b, closed before the launch at 70 us
    b.nvtx("mark", 44 * US, None, event_type=34)  # a mark is not a range
    b.nvtx("step2", 2000 * US, 2500 * US)
    b.nvtx("inner", 2000 * US, 2100 * US)  # same start as step2: the shorter one is the inner one
    b.nvtx("init", 0, 10 * US, tid=101)
    b.nvtx("other thread", 0, 2000 * US, tid=102)
    launches = [(20, 100), (45, 100), (70, 100), (600, 100), (1500, 100), (2050, 100), (2100, 100), (50, 101)]
    for t, tid in launches:  # 2100 us: the end of "inner", ranges are half-open
        b.launch(0, t * US, t * US + 2 * US, 3000 * US + t * US, 3000 * US + t * US + 1 * US, tid=tid,
                 name="void gemm_kernel<float>(float*)")
    b.launch(0, 52 * US, 54 * US, 3100 * US, 3101 * US, name="relu_kernel")  # not matching the filter
    b.kernel(0, 3200 * US, 3201 * US, name="gemm_kernel_nocall")  # matches, no call
    return b


def test_launchers_with_innermost_nvtx_range(build):
    r = tool(build(nvtx_launch_profile()), {"kernel": "GEMM"})
    assert (r.kernel_filter, r.kernel_matches, r.kernel_unmatched) == ("GEMM", 9, 1)
    got = [(x.pid, x.tid, x.thread_name, x.nvtx_range, x.launches) for x in r.launchers]
    assert got == [
        (100, 100, "python", "b", 2),
        (100, 100, "python", None, 1),
        (100, 100, "python", "a", 1),
        (100, 100, "python", "inner", 1),
        (100, 100, "python", "step", 1),
        (100, 100, "python", "step2", 1),
        (100, 101, "worker", None, 1),
    ]
    assert device(r).kernels == 10  # device statistics still cover every kernel
    assert tool(build(nvtx_launch_profile()), {"kernel": "nomatch"}).launchers == []


def test_launchers_when_no_range_holds_a_launch(build):
    """The launching thread has NVTX ranges, none open at a launch: every launcher has no range (the
    ranges read for the thread are all dropped; before, that raised IndexError)."""
    b = ExportBuilder()
    b.thread(100, 100, "python")
    b.nvtx("setup", 0, 10 * US)
    b.nvtx("between", 150 * US, 200 * US)  # read (it overlaps the launches' span), then dropped
    b.nvtx("teardown", 900 * US, 1000 * US)
    for t in (100, 300):
        b.launch(0, t * US, t * US + 2 * US, t * US + 5 * US, t * US + 9 * US, name="gemm_kernel")
    r = tool(build(b), {"kernel": "gemm"})
    assert [(x.tid, x.nvtx_range, x.launches) for x in r.launchers] == [(100, None, 2)]


def test_launchers_limit(build):
    r = tool(build(nvtx_launch_profile()), {"kernel": "gemm", "limit": 2})
    assert len(r.launchers) == 2
    assert any("launchers: showing 2 of 7" in n for n in r.notes)


# -- real profiles -----------------------------------------------------------------------------------------

def _sql_counts(path):
    """Per device: kernels overlapping the window, and those joined to a runtime row (same pid and corr)."""
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        w0, w1 = plain_window(con)
        kcols = {r[1] for r in con.execute("PRAGMA table_info(CUPTI_ACTIVITY_KIND_KERNEL)")}
        rcols = {r[1] for r in con.execute("PRAGMA table_info(CUPTI_ACTIVITY_KIND_RUNTIME)")}
        same_pid = "AND (r.globalTid >> 24) = (k.globalPid >> 24)" if "globalPid" in kcols else ""
        not_backtrace = "AND r.eventClass != 67" if "eventClass" in rcols else ""
        rows = con.execute(f"""
            SELECT k.deviceId, count(*),
                   sum(EXISTS (SELECT 1 FROM CUPTI_ACTIVITY_KIND_RUNTIME r WHERE r.correlationId = k.correlationId
                               {not_backtrace} {same_pid}))
            FROM CUPTI_ACTIVITY_KIND_KERNEL k WHERE k.end > ? AND k.start < ? GROUP BY 1""", (w0, w1)).fetchall()
        return {d: (n, m) for d, n, m in rows}
    finally:
        con.close()


@pytest.mark.skipif(not SHARED_SQLITE, reason="../shared/profiles not present")
@pytest.mark.parametrize("path", SHARED_GPU, ids=lambda p: p.name)
def test_real_profiles_invariants(path):
    from dashcam.profile import Profile

    r = tool(Profile.open(path, progress=False))
    counts = _sql_counts(path)
    assert {d.device_id: (d.kernels, d.launches) for d in r.devices if d.kernels} == counts
    for d in r.devices:
        assert d.launches + d.unmatched == d.kernels
        assert 0 <= d.kernel_busy_pct <= 100
        if d.launches:
            assert d.api_p50_ns <= d.api_p95_ns <= d.api_max_ns
            assert d.queue_p50_ns <= d.queue_p95_ns <= d.queue_max_ns
            assert d.launch_bound in (True, False) and d.verdict_reason
        assert sum(s.kernels for s in d.streams) == d.kernels or d.stream_count > len(d.streams)


def test_real_innermost_nvtx_matches_brute_force():
    from dashcam.profile import Profile

    from .conftest import shared_or_skip

    p = Profile.open(shared_or_skip("nsys-ai__mfu_2gpu_before.sqlite"), progress=False)
    r = tool(p, {"kernel": "elementwise", "limit": 1000, "end_ms": 50})
    w = r.window
    brute = p.rows(f"""
        WITH l AS (
            SELECT l.pid, l.api_tid AS tid, l.api_start AS t, row_number() OVER () AS i FROM launches l
            JOIN kernels k ON k.pid = l.pid AND k.correlation_id = l.correlation_id AND k.start = l.start
            WHERE contains(lower(k.name), 'elementwise') AND l.api_start IS NOT NULL
              AND l."end" > {w.start_ns} AND l.start < {w.end_ns})
        SELECT l.pid, l.tid, (SELECT n.label FROM nvtx n WHERE n.is_range AND n.pid = l.pid AND n.tid = l.tid
                              AND n.start <= l.t AND l.t < n."end" ORDER BY n.start DESC, n."end" LIMIT 1)
        FROM l""")
    assert len(brute) == r.kernel_matches - r.kernel_unmatched > 500
    expected = Counter(brute)
    assert {(x.pid, x.tid, x.nvtx_range): x.launches for x in r.launchers} == dict(expected)
    assert sum(1 for _, _, label in brute if label is not None) > 0


@pytest.mark.parametrize("window", [{}, {"start_ms": 2, "end_ms": 10}])
def test_kernel_busy_is_overviews(build, window):
    b = ExportBuilder()  # window [0, 12] ms; on GPU 0 streams overlap in [3, 4]
    b.kernel(0, 0, 4 * MS, stream=7)
    b.launch(0, 1 * MS, 1 * MS + 10 * US, 3 * MS, 6 * MS, stream=8)
    b.kernel(0, 9 * MS, 12 * MS, stream=7)
    b.kernel(1, 2 * MS, 5 * MS)
    p = build(b)
    r, o = tool(p, window), get_tool("overview")(p, window)
    assert [(d.device_id, d.kernel_busy_pct) for d in r.devices] == [
        (d.device_id, d.kernel_busy_pct) for d in o.devices]
    assert r.devices[0].kernel_busy_pct == (62.5 if window else 75.0)  # 5 of 8 ms; 9 of 12 ms


def test_a_repeated_launch_call_pair_keeps_each_kernel_once_with_the_earliest_call(build):
    b = ExportBuilder()
    corr = b.launch(0, 10 * US, 12 * US, 20 * US, 30 * US)
    b.api("cudaLaunchKernel", 0, 5 * US, corr=corr)  # the same (pid, correlationId) again, earlier and longer
    b.launch(0, 40 * US, 41 * US, 45 * US, 50 * US)
    r = tool(build(b))
    d = device(r)
    assert (d.kernels, d.launches, d.unmatched) == (2, 2, 0)  # the join did not duplicate the first kernel
    assert d.api_max_ns == 5 * US  # the earliest call of the pair: 0 .. 5 us
    assert d.queue_max_ns == 15 * US  # its kernel starts 15 us after that call returned


def test_kernels_sharing_one_launch_call_all_match_it_and_the_call_counts_once(build):
    """One call, three kernels (a CUDA graph launch): every kernel matches the call, but the call is one launch,
    its queue delay the first kernel's (10 - 4 = 6 us): the later kernels wait for the ones before them."""
    b = ExportBuilder()
    corr = b.api("cudaGraphLaunch", 0, 4 * US)
    for i in range(3):
        b.kernel(0, (10 + 10 * i) * US, (15 + 10 * i) * US, corr=corr)
    r = tool(build(b))
    d = device(r)
    assert (d.kernels, d.launches, d.launch_calls, d.unmatched) == (3, 3, 1, 0)
    assert (d.queue_p50_ns, d.queue_max_ns) == (6 * US, 6 * US)
    assert (d.api_p50_ns, d.api_max_ns) == (4 * US, 4 * US)
    assert d.launches_per_s == 40_000.0  # 1 call in the 25 us window [10, 35] us
    assert d.graph_kernels is None  # no graphNodeId: not known to be a graph
    assert d.verdict_reason.startswith("not launch-bound: 1 launches < 100")


def test_a_capture_without_graph_launches_keeps_its_json(build):
    """launch_calls and graph_kernels exist only when a call started several kernels / graph kernels ran."""
    b = ExportBuilder()
    b.launch(0, 0, 4 * US, 10 * US, 15 * US)
    d = tool(build(b)).model_dump(mode="json")["devices"][0]
    assert "launch_calls" not in d and "graph_kernels" not in d and "launch_calls" not in d["streams"][0]
