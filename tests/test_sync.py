"""sync: host time blocked in *Synchronize calls, per API name and per thread, planted to the ns."""
import sqlite3

import pytest

from dashcam.errors import BadParameter, UnknownGpu
from dashcam.testing.builder import ExportBuilder
from dashcam.tools import get_tool

from .conftest import SHARED_GPU, SHARED_SQLITE, US, plain_window

tool = get_tool("sync")


def two_threads() -> ExportBuilder:
    b = ExportBuilder()
    b.thread(100, 100, "python")
    b.thread(100, 101, "loader")
    b.kernel(0, 100 * US, 200 * US)  # window [100, 200] us
    # thread 100: stream sync [110, 150], device sync [140, 170] (overlaps it), a driver sync nested in the first
    b.api("cudaStreamSynchronize", 110 * US, 150 * US, tid=100)
    b.api("cuStreamSynchronize", 112 * US, 148 * US, tid=100, driver=True)
    b.api("cudaDeviceSynchronize", 140 * US, 170 * US, tid=100)
    # thread 101: stream sync [130, 160] overlapping thread 100's; an event sync clipped to [100, 120]
    b.api("cudaStreamSynchronize", 130 * US, 160 * US, tid=101)
    b.api("cudaEventSynchronize", 50 * US, 120 * US, tid=101)
    b.api("cudaEventSynchronize", 110 * US, 125 * US, tid=101)  # overlaps the one above: the thread counts once
    # not host-blocking syncs / not syncs
    b.api("cudaStreamWaitEvent", 105 * US, 106 * US, tid=100)
    b.api("cudaMemcpyAsync", 171 * US, 180 * US, tid=100)
    b.api("cudaStreamSynchronize", 300 * US, 310 * US, tid=100)  # after the window
    return b


def test_two_threads_overlapping(build):
    r = tool(build(two_threads()))
    assert r.window.length_ns == 100 * US
    assert r.sync_calls == 6
    calls = {c.name: (c.count, c.threads, c.total_ns, c.max_ns, c.pct_of_window) for c in r.calls}
    assert calls == {
        # 40 us on thread 100 + 30 us on thread 101; at least one of them blocked in [110, 160]: 50 %
        "cudaStreamSynchronize": (2, 2, 70 * US, 40 * US, 50.0),
        "cuStreamSynchronize": (1, 1, 36 * US, 36 * US, 36.0),
        "cudaDeviceSynchronize": (1, 1, 30 * US, 30 * US, 30.0),
        "cudaEventSynchronize": (2, 1, 25 * US, 20 * US, 25.0),  # [100, 125]: clipped, overlap counted once
    }
    assert [c.name for c in r.calls][0] == "cudaStreamSynchronize"
    # the mean call is each call's own clipped length, not the union: the event syncs [100, 120] and
    # [110, 125] overlap (25 us blocked) but last 20 and 15 us
    assert {c.name: c.mean_ns for c in r.calls} == {
        "cudaStreamSynchronize": 35e3, "cuStreamSynchronize": 36e3, "cudaDeviceSynchronize": 30e3,
        "cudaEventSynchronize": 17.5e3}
    threads = [(t.pid, t.tid, t.thread_name, t.count, t.total_ns, t.pct_of_window, t.top_call) for t in r.threads]
    assert threads == [
        (100, 100, "python", 3, 60 * US, 60.0, "cudaStreamSynchronize"),  # union [110, 170]
        (100, 101, "loader", 3, 55 * US, 55.0, "cudaStreamSynchronize"),  # [100, 125] + [130, 160]
    ]
    assert r.excluded_wait_event_calls == 1
    assert any("cudaStreamWaitEvent" in n and "do not block the host" in n for n in r.notes)


def test_wait_events_counted_without_sync_calls(build):
    """No sync call in the window: the stream-wait-event calls are still counted (no sync row carries the count)."""
    b = ExportBuilder()
    b.kernel(0, 100 * US, 200 * US)
    b.api("cudaStreamWaitEvent", 105 * US, 106 * US, tid=100)
    b.api("cudaStreamWaitEvent", 150 * US, 151 * US, tid=100)
    b.api("cudaStreamWaitEvent", 250 * US, 251 * US, tid=100)  # after the window
    r = tool(build(b))
    assert (r.sync_calls, r.excluded_wait_event_calls, r.calls) == (0, 2, [])


def test_user_window_clips(build):
    r = tool(build(two_threads()), {"start_ms": 0.045, "end_ms": 0.055})  # [145, 155] us
    calls = {c.name: (c.count, c.total_ns) for c in r.calls}
    assert calls == {"cudaStreamSynchronize": (2, 15 * US), "cuStreamSynchronize": (1, 3 * US),
                     "cudaDeviceSynchronize": (1, 10 * US)}
    assert [(t.tid, t.total_ns) for t in r.threads] == [(100, 10 * US), (101, 10 * US)]
    assert r.sync_calls == 4


def test_name_pct_is_the_union_over_threads_total_the_sum(build):
    b = ExportBuilder()
    b.kernel(0, 0, 100 * US)
    for tid in (100, 101, 102):
        b.api("cudaDeviceSynchronize", 0, 100 * US, tid=tid)
    r = tool(build(b))
    c = r.calls[0]
    assert (c.count, c.threads, c.total_ns, c.pct_of_window) == (3, 3, 300 * US, 100.0)
    assert [t.pct_of_window for t in r.threads] == [100.0, 100.0, 100.0]
    b = ExportBuilder()
    b.kernel(0, 0, 100 * US)
    for tid, a, z in ((100, 0, 30), (101, 50, 80), (102, 10, 40)):  # union [0, 40] + [50, 80] = 70 us
        b.api("cudaStreamSynchronize", a * US, z * US, tid=tid)
    c = tool(build(b)).calls[0]
    assert (c.total_ns, c.pct_of_window) == (90 * US, 70.0)


def test_limit_threads(build):
    r = tool(build(two_threads()), {"limit": 1})
    assert [t.tid for t in r.threads] == [100]
    assert any("showing 1 of 2 threads" in n for n in r.notes)


def test_gpu_selects_the_processes_driving_it(build):
    b = ExportBuilder()
    b.kernel(0, 0, 100 * US, pid=100)
    b.kernel(1, 0, 100 * US, pid=200)
    b.api("cudaStreamSynchronize", 10 * US, 30 * US, pid=100)
    b.api("cudaStreamSynchronize", 10 * US, 50 * US, pid=200)
    p = build(b)
    assert [(t.pid, t.total_ns) for t in tool(p, {"gpu": 1}).threads] == [(200, 40 * US)]
    assert [t.pid for t in tool(p).threads] == [200, 100]
    with pytest.raises(UnknownGpu):
        tool(p, {"gpu": 5})


def api_only() -> ExportBuilder:
    b = ExportBuilder()
    b.api("cudaMalloc", 0, 10 * US)
    b.api("cudaStreamSynchronize", 20 * US, 50 * US)
    b.api("cudaFree", 90 * US, 100 * US)
    return b


def test_api_only_profile_uses_the_api_span(build):
    p = build(api_only())
    r = tool(p)
    assert (r.window.start_ns, r.window.end_ns) == (0, 100 * US)
    assert [(c.name, c.total_ns, c.pct_of_window) for c in r.calls] == [("cudaStreamSynchronize", 30 * US, 30.0)]
    assert any("span of its host rows" in n for n in r.notes)
    r = tool(p, {"start_ms": 0.02, "end_ms": 0.04})
    assert r.window.length_ns == 20 * US and r.calls[0].pct_of_window == 100.0
    with pytest.raises(BadParameter):
        tool(p, {"start_ms": 5})


def test_no_sync_calls(build):
    b = ExportBuilder()
    b.launch(0, 0, 5 * US, 10 * US, 20 * US)
    r = tool(build(b))
    assert (r.sync_calls, r.calls, r.threads, r.excluded_wait_event_calls) == (0, [], [], 0)


# -- real profiles -----------------------------------------------------------------------------------------

def _sql_sync_count(path) -> int:
    """Runtime rows named *Synchronize* (not backtraces) overlapping the GPU-activity window, by plain SQL."""
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        w0, w1 = plain_window(con)
        rcols = {r[1] for r in con.execute("PRAGMA table_info(CUPTI_ACTIVITY_KIND_RUNTIME)")}
        not_backtrace = "AND r.eventClass != 67" if "eventClass" in rcols else ""
        return con.execute(f"""
            SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s ON s.id = r.nameId
            WHERE s.value LIKE '%Synchronize%' AND r.end > ? AND r.start < ? {not_backtrace}""",
                           (w0, w1)).fetchone()[0]
    finally:
        con.close()


@pytest.mark.skipif(not SHARED_SQLITE, reason="../shared/profiles not present")
@pytest.mark.parametrize("path", SHARED_GPU, ids=lambda p: p.name)
def test_real_profiles_invariants(path):
    from dashcam.profile import Profile

    r = tool(Profile.open(path, progress=False))
    assert r.sync_calls == sum(c.count for c in r.calls) == _sql_sync_count(path)
    assert sum(t.count for t in r.threads) == r.sync_calls or len(r.threads) == 10
    for c in r.calls:
        assert "Synchronize" in c.name and 0 <= c.pct_of_window <= 100
        assert 0 <= c.max_ns <= min(c.total_ns, r.window.length_ns)
        assert 0 <= c.mean_ns <= c.max_ns
    for t in r.threads:
        assert 0 <= t.total_ns <= r.window.length_ns and 0 <= t.pct_of_window <= 100
