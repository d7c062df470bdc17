"""gpu_gaps: gap lengths and their causes, planted so every ns is known."""
import pytest

from dashcam.errors import UnknownGpu
from dashcam.testing.builder import ExportBuilder
from dashcam.tools import get_tool

from .conftest import MS, US

gaps = get_tool("gpu_gaps")


def only_gap(r, device=0):
    d = next(x for x in r.devices if x.device_id == device)
    return d, d.largest_gaps[0]


def test_queued_behind_copies_real_case(build):
    """The issue's real case: 155.8 ms gap, next kernel launched 1.5 ms into it, copies cover 154.5 ms."""
    b = ExportBuilder()
    b.launch(0, api_start=-100 * US, api_end=-95 * US, start=-50 * US, end=0, name="before")
    # the thread issues the copies (0.1 ms of API time), then computes, then launches at 1.49 ms
    b.copy_call(0, 100 * US, 200 * US, 1300 * US, 155_800 * US, 1 << 30, "HtoD", stream=8)
    b.launch(0, api_start=1490 * US, api_end=1500 * US, start=155_800 * US, end=156_000 * US, name="after")
    d, g = only_gap(gaps(build(b)))
    assert (g.start_ns, g.end_ns, g.duration_ns) == (0 + 0, 155_800 * US, 155_800 * US)
    assert g.causes == {"sync_wait": 0, "cuda_api": 100 * US, "launch_overhead": 10 * US,
                        "cpu_work": 1390 * US, "memcpy": 154_300 * US, "dependency": 0, "transfer": 0, "unknown": 0}
    assert g.dominant_cause == "memcpy"
    assert g.kernel_before == "before" and g.kernel_after == "after"
    assert g.launch_call.name == "cudaLaunchKernel" and g.launch_call.end_ns == 1500 * US
    assert g.cuda_api_calls == {"cudaMemcpyAsync": 100 * US}


def test_sync_wait_on_launching_thread(build):
    b = ExportBuilder()
    b.launch(0, 0, 5 * US, 10 * US, 1 * MS)
    # after the kernel, the thread blocks 4 ms in cudaDeviceSynchronize (waiting on device 1), then launches
    b.api("cudaDeviceSynchronize", 1 * MS, 5 * MS)
    b.kernel(1, 1 * MS, 5 * MS, pid=200)  # the work it waited for, other process
    b.launch(0, 5 * MS + 100 * US, 5 * MS + 110 * US, 5 * MS + 110 * US, 6 * MS)
    r = gaps(build(b), {"gpu": 0})
    d, g = only_gap(r)
    assert g.duration_ns == 4 * MS + 110 * US
    assert g.causes["sync_wait"] == 4 * MS
    assert g.causes["cpu_work"] == 100 * US
    assert g.causes["launch_overhead"] == 10 * US
    assert g.dominant_cause == "sync_wait"
    assert d.dominant_cause == "sync_wait"


def test_launch_bound_gaps_are_launch_overhead(build):
    b = ExportBuilder()
    for i in range(10):  # call i: [20i, 20i+20] us, kernel i: [20i+20, 20i+25] us
        b.launch(0, 20 * i * US, (20 * i + 20) * US, (20 * i + 20) * US, (20 * i + 25) * US, name="tiny")
    d, _ = only_gap(gaps(build(b)))
    # window [20, 205] us; 9 inner gaps of 15 us, each fully inside the next launch call
    assert d.gap_count == 9
    assert d.kernel_idle_ns == 9 * 15 * US
    assert d.causes["launch_overhead"] == 9 * 15 * US
    assert d.cause_pct["launch_overhead"] == 100.0
    assert d.kernel_busy_pct == round(100 * 50 / 185, 3)


def test_dependency_when_queued_with_nothing_on_device(build):
    b = ExportBuilder()
    b.launch(0, 0, 5 * US, 10 * US, 1 * MS, stream=7)
    b.launch(0, 20 * US, 25 * US, 3 * MS, 4 * MS, stream=8)  # waits on an event for 2 ms
    _, g = only_gap(gaps(build(b)))
    assert g.causes["dependency"] == 2 * MS
    assert sum(g.causes.values()) == g.duration_ns == 2 * MS


def test_unknown_without_launch_call_and_for_the_tail(build):
    b = ExportBuilder()
    b.kernel(0, 0, 1 * MS)
    b.kernel(0, 3 * MS, 4 * MS)  # no API row for either
    b.kernel(1, 0, 10 * MS, pid=300)
    d = next(x for x in gaps(build(b)).devices if x.device_id == 0)
    assert d.kernel_idle_ns == 2 * MS + 6 * MS
    assert d.causes["unknown"] == d.kernel_idle_ns
    assert d.dominant_cause == "unknown"


def _copies_without_launch_calls() -> ExportBuilder:
    """GPU 0: a gap [1, 5] ms closed by a kernel with no launch call, copies, a memset and a page migration
    inside it (union 1.7 ms); a gap [6, 8] ms closed by a launched kernel, a copy after the launch call returned;
    a tail [9, 12] ms with a 1 ms readback. GPU 1 (another process) keeps the window at [0, 12] ms."""
    b = ExportBuilder()
    b.kernel(0, 0, 1 * MS, name="first")
    b.memcpy(0, 1500 * US, 2500 * US, 1 << 26, "HtoD", stream=8)
    b.memset(0, 2300 * US, 2800 * US, 1 << 20, stream=9)
    b.memcpy(0, 3000 * US, 3400 * US, 1 << 22, "UM_HtoD", cause=2)
    b.kernel(0, 5 * MS, 6 * MS, name="unlaunched")
    b.api("cudaStreamSynchronize", 5 * MS, 6 * MS)  # the host waits for it: before gap 2, no part of it
    b.launch(0, 6500 * US, 6600 * US, 8 * MS, 9 * MS, name="launched")
    b.memcpy(0, 7 * MS, 7500 * US, 1 << 20, "HtoD", stream=8)
    b.memcpy(0, 9 * MS, 10 * MS, 1 << 26, "DtoH", stream=8)
    b.kernel(1, 0, 12 * MS, pid=300)
    return b


def test_a_gap_without_a_launch_call_says_what_the_device_copied(build):
    """``transfer``: the copy/memset/migration union in gaps no launch call splits; ``unknown`` the rest only."""
    r = gaps(build(_copies_without_launch_calls()), {"gpu": 0})
    d = r.devices[0]
    by_start = {g.start_ns: g for g in d.largest_gaps}
    assert by_start[1 * MS].causes == {"sync_wait": 0, "cuda_api": 0, "launch_overhead": 0, "cpu_work": 0,
                                       "memcpy": 0, "dependency": 0, "transfer": 1700 * US, "unknown": 2300 * US}
    assert by_start[6 * MS].causes == {"sync_wait": 0, "cuda_api": 0, "launch_overhead": 100 * US,
                                       "cpu_work": 500 * US, "memcpy": 500 * US, "dependency": 900 * US,
                                       "transfer": 0, "unknown": 0}
    assert by_start[9 * MS].causes["transfer"] == 1 * MS and by_start[9 * MS].causes["unknown"] == 2 * MS
    assert d.kernel_idle_ns == 9 * MS and sum(d.causes.values()) == d.kernel_idle_ns
    assert d.causes["transfer"] == 2700 * US and d.causes["unknown"] == 4300 * US
    assert d.migration_ns == 400 * US


def test_a_window_that_cuts_a_gap_recomputes_its_transfer(build):
    """From 2 ms the first gap is [2, 5] ms: copies and memset [2, 2.8] ms and the migration, 1.2 ms."""
    r = gaps(build(_copies_without_launch_calls()), {"gpu": 0, "start_ms": 2, "end_ms": 12})
    d = r.devices[0]
    g = next(g for g in d.largest_gaps if g.start_ns == 2 * MS)
    assert (g.causes["transfer"], g.causes["unknown"]) == (1200 * US, 1800 * US)
    assert d.causes["transfer"] == 2200 * US and d.causes["unknown"] == 3800 * US


def test_causes_add_up_and_percentages(build):
    b = ExportBuilder()
    b.launch(0, 0, 5 * US, 5 * US, 1 * MS)
    b.api("cudaMalloc", 1 * MS, 2 * MS)
    b.launch(0, 2 * MS, 2 * MS + 10 * US, 3 * MS, 4 * MS)
    b.memcpy(0, 2 * MS + 500 * US, 3 * MS, 1 << 20, stream=9)
    r = gaps(build(b))
    d, g = only_gap(r)
    assert g.causes == {"sync_wait": 0, "cuda_api": 1 * MS, "launch_overhead": 10 * US, "cpu_work": 0,
                        "memcpy": 500 * US, "dependency": 490 * US, "transfer": 0, "unknown": 0}
    assert sum(d.causes.values()) == d.kernel_idle_ns
    assert abs(sum(d.cause_pct.values()) - 100.0) < 0.01
    assert g.cuda_api_calls == {"cudaMalloc": 1 * MS}


def test_nested_driver_call_counts_once(build):
    b = ExportBuilder()
    b.launch(0, 0, 5 * US, 5 * US, 1 * MS)
    b.api("cudaMemcpy", 1 * MS, 3 * MS)
    b.api("cuMemcpyDtoH_v2", 1 * MS + 100 * US, 3 * MS - 100 * US, driver=True)
    b.launch(0, 3 * MS, 3 * MS + 5 * US, 3 * MS + 5 * US, 4 * MS)
    _, g = only_gap(gaps(build(b)))
    assert g.causes["cuda_api"] == 2 * MS
    assert g.causes["launch_overhead"] == 5 * US


def test_user_window_tail_uses_first_kernel_after_window(build):
    b = ExportBuilder()
    b.launch(0, 0, 5 * US, 5 * US, 1 * MS)
    b.api("cudaStreamSynchronize", 1 * MS, 9 * MS)
    b.launch(0, 9 * MS, 9 * MS + 5 * US, 9 * MS + 5 * US, 10 * MS)
    p = build(b)
    r = gaps(p, {"start_ms": 0, "end_ms": 5})  # window [5 us, 5.005 ms] cuts the 8 ms gap
    d, g = only_gap(r)
    assert g.end_ns == 5 * MS + 5 * US
    assert g.causes["sync_wait"] == 4 * MS + 5 * US
    assert d.kernel_idle_ns == g.duration_ns


def test_unknown_gpu_lists_the_ones_that_exist(build):
    b = ExportBuilder()
    b.kernel(0, 0, 1 * MS)
    b.kernel(2, 0, 1 * MS)
    with pytest.raises(UnknownGpu, match="GPUs with activity: 0, 2"):
        gaps(build(b), {"gpu": 5})


def test_nvtx_range_at_gap(build):
    b = ExportBuilder()
    b.nvtx("step 7", 0, 10 * MS)
    b.nvtx("data loading", 1 * MS, 3 * MS, registered=True)
    b.launch(0, 0, 5 * US, 5 * US, 1 * MS)
    b.launch(0, 3 * MS, 3 * MS + 5 * US, 3 * MS + 5 * US, 4 * MS)
    _, g = only_gap(gaps(build(b)))
    assert g.nvtx_range == "data loading"
    assert g.causes["cpu_work"] == 2 * MS


def test_window_cutting_a_gap_recomputes_it_on_the_clipped_bounds(build):
    """The stored gap [1 ms, 4 ms) cut by --start at 2 ms: causes of [2 ms, 4 ms) only."""
    b = ExportBuilder()
    b.launch(0, 0, 5 * US, 5 * US, 1 * MS, name="first")  # the window starts at 5 us
    b.api("cudaMalloc", 1 * MS, 3 * MS)
    b.launch(0, 3 * MS, 3 * MS + 10 * US, 4 * MS, 5 * MS, name="second")
    b.memcpy(0, 3500 * US, 3800 * US, 1 << 20, stream=9)
    p = build(b)
    full = only_gap(gaps(p))[1]
    assert full.causes["cuda_api"] == 2 * MS and full.duration_ns == 3 * MS
    d, g = only_gap(gaps(p, {"start_ms": (2 * MS - 5 * US) / MS}))
    assert (g.start_ns, g.end_ns) == (2 * MS, 4 * MS)
    assert g.causes == {"sync_wait": 0, "cuda_api": 1 * MS, "launch_overhead": 10 * US, "cpu_work": 0,
                        "memcpy": 300 * US, "dependency": 690 * US, "transfer": 0, "unknown": 0}
    assert g.cuda_api_calls == {"cudaMalloc": 1 * MS}
    assert (g.kernel_before, g.kernel_after) == ("first", "second")  # the kernel before lies outside the window
    assert d.kernel_idle_ns == 2 * MS and d.gap_count == 1


def test_largest_gaps_of_equal_length_are_the_earliest(build):
    b = ExportBuilder()
    for i in range(6):  # kernels every 100 us, 50 us long: five equal gaps of 50 us
        b.launch(0, i * 100 * US, i * 100 * US + 5 * US, i * 100 * US + 10 * US, i * 100 * US + 60 * US)
    d = gaps(build(b), {"limit": 3}).devices[0]
    assert d.gap_count == 5
    assert [g.start_ns for g in d.largest_gaps] == [60 * US, 160 * US, 260 * US]


def test_device_api_time_covers_every_gap_not_only_the_largest(build):
    """Nine 1 ms gaps with 0.6 ms of cudaMemcpy each, one 3 ms gap with 2 ms of cudaMalloc: the largest gap
    names cudaMalloc, the device as a whole spent 5.4 ms in cudaMemcpy."""
    b = ExportBuilder()
    t = 0
    b.launch(0, t, t + 5 * US, t + 5 * US, t + 1 * MS)
    t = 1 * MS
    for _ in range(9):
        b.api("cudaMemcpy", t + 100 * US, t + 700 * US)
        b.launch(0, t + 900 * US, t + 1 * MS, t + 1 * MS, t + 2 * MS)
        t += 2 * MS
    b.api("cudaMalloc", t + 500 * US, t + 2500 * US)
    b.launch(0, t + 2900 * US, t + 3 * MS, t + 3 * MS, t + 4 * MS)
    d = gaps(build(b), {"limit": 1}).devices[0]
    assert d.largest_gaps[0].cuda_api_calls == {"cudaMalloc": 2 * MS}
    assert d.cuda_api_calls == {"cudaMemcpy": 9 * 600 * US, "cudaMalloc": 2 * MS}
    assert d.causes["cuda_api"] == 9 * 600 * US + 2 * MS
    # a window from the middle of the 5th gap: half of its copy call and everything after
    w = gaps(build(b), {"start_ms": (9 * MS + 400 * US - 5 * US) / MS}).devices[0]
    assert w.cuda_api_calls == {"cudaMemcpy": 4 * 600 * US + 300 * US, "cudaMalloc": 2 * MS}
