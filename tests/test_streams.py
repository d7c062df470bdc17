import sqlite3

import pytest

from dashcam.profile import Profile
from dashcam.testing.builder import ExportBuilder
from dashcam.tools import get_tool

from .conftest import MS, SHARED_GPU, US


def _three_streams() -> ExportBuilder:
    """Device 0, window [0, 10] ms.

    stream 7: [0, 4] with [0.5, 1] inside it (same stream), then [5, 8]   -> union 7 ms
    stream 8: [2, 6], and a memcpy [9, 10]                               -> union 4 ms
    stream 9: [3, 3.5]                                                    -> union 0.5 ms
    device kernel union [0, 8] = 8 ms; two or more streams busy in [2, 4] and [5, 6] = 3 ms;
    three kernels at once in [3, 3.5] (and stream 7's own pair never meets a third kernel).
    """
    b = ExportBuilder()
    b.gpu(0)
    b.kernel(0, 0, 4 * MS, stream=7)
    b.kernel(0, 500 * US, 1 * MS, stream=7)
    b.kernel(0, 5 * MS, 8 * MS, stream=7)
    b.kernel(0, 2 * MS, 6 * MS, stream=8)
    b.kernel(0, 3 * MS, 3500 * US, stream=9)
    b.memcpy(0, 9 * MS, 10 * MS, 1 << 20, stream=8)
    return b


def test_concurrency_on_overlapping_streams(build):
    r = get_tool("streams")(build(_three_streams()))
    d = r.devices[0]
    assert (d.stream_count, d.kernel_count, d.memcpy_count) == (3, 5, 1)
    assert d.kernel_busy_ns == 8 * MS
    assert d.stream_kernel_time_ns == 11500 * US
    assert d.avg_concurrency == 1.4375  # 11.5 / 8
    assert d.overlap_ns == 3 * MS
    assert d.overlap_pct == 37.5  # of the 8 ms kernel busy time
    assert d.max_concurrent_kernels == 3
    assert [(s.stream_id, s.kernel_count, s.kernel_time_ns, s.kernel_time_pct, s.memcpy_count)
            for s in d.streams] == [(7, 3, 7 * MS, 70.0, 0), (8, 1, 4 * MS, 40.0, 1), (9, 1, 500 * US, 5.0, 0)]
    assert {s.pid for s in d.streams} == {100}


def test_window_clips_before_measuring(build):
    # [2.5, 5.5] ms: stream 7 [2.5, 4] + [5, 5.5] = 2 ms, stream 8 [2.5, 5.5] = 3 ms, stream 9 0.5 ms;
    # union 3 ms; >= 2 streams in [2.5, 4] + [5, 5.5] = 2 ms
    r = get_tool("streams")(build(_three_streams()), {"start_ms": 2.5, "end_ms": 5.5})
    d = r.devices[0]
    assert (d.kernel_count, d.kernel_busy_ns, d.stream_kernel_time_ns, d.overlap_ns) == (4, 3 * MS, 5500 * US, 2 * MS)
    assert d.memcpy_count == 0 and d.stream_count == 3


def test_touching_kernels_do_not_overlap(build):
    b = ExportBuilder()
    b.kernel(0, 0, 2 * MS, stream=7)
    b.kernel(0, 2 * MS, 4 * MS, stream=8)
    d = get_tool("streams")(build(b)).devices[0]
    assert (d.kernel_busy_ns, d.avg_concurrency, d.overlap_ns, d.max_concurrent_kernels) == (4 * MS, 1.0, 0, 1)


def test_same_stream_id_in_two_processes_is_two_streams(build):
    b = ExportBuilder()
    b.kernel(0, 0, 2 * MS, stream=7, pid=100)
    b.kernel(0, 1 * MS, 3 * MS, stream=7, pid=200)
    d = get_tool("streams")(build(b)).devices[0]
    assert d.stream_count == 2
    assert sorted((s.pid, s.stream_id) for s in d.streams) == [(100, 7), (200, 7)]
    assert (d.kernel_busy_ns, d.overlap_ns, d.avg_concurrency) == (3 * MS, 1 * MS, pytest.approx(4 / 3, abs=1e-4))


def test_devices_are_separate_and_gpu_filter(build):
    b = ExportBuilder()
    b.kernel(0, 0, 2 * MS, stream=7)
    b.kernel(1, 0, 2 * MS, stream=7)  # same times on another device: no overlap across devices
    b.kernel(1, 1 * MS, 2 * MS, stream=8)
    b.memset(1, 3 * MS, 4 * MS, 64, stream=9)
    p = build(b)
    d0, d1 = get_tool("streams")(p).devices
    assert (d0.overlap_ns, d0.max_concurrent_kernels, d0.stream_count) == (0, 1, 1)
    assert (d1.overlap_ns, d1.max_concurrent_kernels, d1.stream_count) == (1 * MS, 2, 3)
    assert [(s.stream_id, s.memset_count) for s in d1.streams][-1] == (9, 1)
    only = get_tool("streams")(p, {"gpu": 1})
    assert [d.device_id for d in only.devices] == [1]


def test_limit_lists_top_streams_and_says_so(build):
    r = get_tool("streams")(build(_three_streams()), {"limit": 2})
    d = r.devices[0]
    assert [s.stream_id for s in d.streams] == [7, 8] and d.stream_count == 3
    assert d.overlap_ns == 3 * MS  # totals still over all streams
    assert any("top 2 streams" in n for n in r.notes)


def test_copies_only(build):
    b = ExportBuilder("2021")
    b.memcpy(0, 0, 1 * MS, 1 << 20, stream=7)
    d = get_tool("streams")(build(b)).devices[0]
    assert (d.stream_count, d.kernel_count, d.memcpy_count) == (1, 0, 1)
    assert (d.kernel_busy_ns, d.avg_concurrency, d.overlap_ns, d.overlap_pct, d.max_concurrent_kernels) == (
        0, None, 0, 0.0, 0)


@pytest.mark.parametrize("path", SHARED_GPU, ids=lambda p: p.name)
def test_real_profiles_invariants(path):
    p = Profile.open(path, progress=False)
    r = get_tool("streams")(p, {"limit": 1000})
    busy = {d.device_id: d.kernel_busy_ns for d in get_tool("overview")(p).devices}
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    for d in r.devices:
        n = con.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE deviceId = ?",
                        [d.device_id]).fetchone()[0]
        assert d.kernel_count == n == sum(s.kernel_count for s in d.streams)
        assert d.kernel_busy_ns == busy[d.device_id]  # same definition as every other tool
        assert d.stream_kernel_time_ns == sum(s.kernel_time_ns for s in d.streams) >= d.kernel_busy_ns
        assert 0 <= d.overlap_ns <= d.kernel_busy_ns and 0 <= d.overlap_pct <= 100
        if d.kernel_busy_ns:
            assert d.avg_concurrency >= 1.0 and d.max_concurrent_kernels >= 1
        for s in d.streams:
            assert 0 <= s.kernel_time_pct <= 100
    con.close()


@pytest.mark.parametrize("window", [{}, {"start_ms": 2.5, "end_ms": 5.5}])
def test_kernel_busy_is_overviews(build, window):
    p = build(_three_streams())
    r, o = get_tool("streams")(p, window), get_tool("overview")(p, window)
    assert [(d.device_id, d.kernel_busy_ns) for d in r.devices] == [
        (d.device_id, d.kernel_busy_ns) for d in o.devices]
    assert r.devices[0].kernel_busy_ns == (3 if window else 8) * MS
