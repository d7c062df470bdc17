import sqlite3

import pytest

from dashcam.profile import Profile
from dashcam.testing.builder import ExportBuilder
from dashcam.tools import get_tool
from dashcam.tools.memcpy import TRANSFER_BOUND_MIN_PCT

from .conftest import MS, SHARED_GPU, SHARED_SQLITE, US


def planted() -> ExportBuilder:
    """Window [0, 23] ms. GPU 0: a pageable HtoD stall before its first kernel, pinned copies
    under a kernel, a copy after the last kernel. GPU 1: a long DtoD copy, then a short kernel."""
    b = ExportBuilder()
    b.gpu(0)
    b.gpu(1)
    # synchronous pageable HtoD, the host blocks 4.5 ms in cudaMemcpy; GPU 0 has no kernel until 5 ms
    b.copy_call(0, 0, 4500 * US, 0, 4 * MS, 8_000_000, kind="HtoD", pinned=False, api_name="cudaMemcpy")
    b.launch(0, 4 * MS, 4 * MS + 10 * US, 5 * MS, 9 * MS, name="step_kernel")
    b.copy_call(0, 5 * MS, 5 * MS + 10 * US, 6 * MS, 8 * MS, 4_000_000, kind="HtoD", pinned=True, stream=8)
    b.copy_call(0, 8 * MS, 8 * MS + 10 * US, 9 * MS, 10 * MS, 3_000_000, kind="DtoH", pinned=True)
    b.memcpy(0, 10 * MS, 10500 * US, 2_500_000, kind="HtoD", pinned=False)  # 0.5 ms: below the 1 ms minimum
    b.launch(0, 11 * MS, 11 * MS + 10 * US, 12 * MS, 20 * MS, name="gemm")
    b.memset(0, 20 * MS, 21 * MS, 1 << 20)
    b.memcpy(0, 21 * MS, 22500 * US, 3_000_000, kind="HtoD", pinned=True)  # after the last kernel: no stall
    b.memcpy(1, 0, 10 * MS, 100_000_000, kind="DtoD")
    b.kernel(1, 10 * MS, 12 * MS, name="small")
    b.kernel(1, 22 * MS, 23 * MS, name="tail")
    return b


def kind(r, k):
    return next(x for x in r.by_kind if x.kind == k)


def test_by_kind_bytes_time_and_gbps(build):
    r = get_tool("memcpy")(build(planted()))
    assert r.window.length_ns == 23 * MS
    assert [x.kind for x in r.by_kind] == ["HtoD", "DtoH", "DtoD", "HtoH", "PtoP"]  # no Unknown: none present
    h = kind(r, "HtoD")
    assert (h.count, h.bytes, h.total_ns) == (4, 17_500_000, 8 * MS)
    assert h.gbps == 2.1875  # 17.5e6 B / 8e6 ns
    d = kind(r, "DtoH")
    assert (d.count, d.bytes, d.total_ns, d.gbps) == (1, 3_000_000, 1 * MS, 3.0)
    dd = kind(r, "DtoD")
    assert (dd.count, dd.bytes, dd.total_ns, dd.gbps) == (1, 100_000_000, 10 * MS, 10.0)
    assert kind(r, "HtoH").count == 0 and kind(r, "HtoH").gbps is None
    assert r.copy_count == 6 and r.copy_bytes == 120_500_000


def test_pageable_pinned_split(build):
    r = get_tool("memcpy")(build(planted()))
    rows = {(x.kind, x.host_mem): x for x in r.host_memory}
    assert set(rows) == {("HtoD", "pageable"), ("HtoD", "pinned"), ("DtoH", "pinned")}
    pg = rows[("HtoD", "pageable")]
    assert (pg.count, pg.bytes, pg.total_ns) == (2, 10_500_000, 4500 * US)
    assert pg.gbps == 2.333333  # 10.5e6 / 4.5e6, rounded to 6 places
    pn = rows[("HtoD", "pinned")]
    assert (pn.count, pn.bytes, pn.total_ns, pn.gbps) == (2, 7_000_000, 3500 * US, 2.0)


def test_synchronous_cudamemcpy(build):
    r = get_tool("memcpy")(build(planted()))
    assert (r.sync_copy_count, r.sync_copy_calls, r.sync_copy_bytes) == (1, 1, 8_000_000)
    assert r.sync_blocked_ns == 4500 * US  # the cudaMemcpy call, not its 4 ms copy
    assert [(s.api, s.calls, s.blocked_ns) for s in r.sync_by_api] == [("cudaMemcpy", 1, 4500 * US)]


def test_device_copy_busy_overlap_and_transfer_bound(build):
    r = get_tool("memcpy")(build(planted()))
    d0, d1 = r.devices
    # memory union on GPU 0: [0,4] + [6,8] + [9,10.5] + [20,22.5] (memset and copy touch) = 10 ms
    assert d0.copy_busy_ns == 10 * MS and d0.copy_busy_pct == 43.478
    assert d0.kernel_busy_ns == 12 * MS and d0.kernel_busy_pct == 52.174
    assert d0.copy_kernel_overlap_ns == 2 * MS  # the pinned [6,8] copy under step_kernel [5,9]
    assert d0.copy_kernel_overlap_pct == 20.0  # of memory busy
    assert d0.transfer_bound is False  # copies 43 % but kernels 52 %
    assert (d0.copy_count, d0.copy_bytes) == (5, 20_500_000)
    # GPU 1: copies 10/23 = 43.5 % >= 30 and > kernels 3/23 = 13 %
    assert d1.copy_busy_ns == 10 * MS and d1.kernel_busy_ns == 3 * MS
    assert d1.copy_kernel_overlap_ns == 0
    assert d1.transfer_bound is True and d1.copy_busy_pct >= TRANSFER_BOUND_MIN_PCT


def test_transfer_bound_needs_thirty_percent(build):
    b = ExportBuilder()
    b.memcpy(0, 0, 2 * MS, 1000, kind="DtoD")  # 20 % of the window, kernels only 10 %
    b.kernel(0, 9 * MS, 10 * MS)
    d = get_tool("memcpy")(build(b)).devices[0]
    assert d.copy_busy_pct == 20.0 and d.kernel_busy_pct == 10.0
    assert d.transfer_bound is False
    from dashcam.agent.planner import answer_offline  # the answer says why copies busier than kernels are no bound

    a = answer_offline("is the data transfer the bottleneck?", build(b, "tb.sqlite")).answer
    assert a.startswith("GPU 0 is not transfer-bound: GPU 0 is copy-busy 20.0 % of the 10 ms window, more than "
                        "kernel-busy (10.0 %), but too little of it for copies to be the bound.")


def test_pre_kernel_stall(build):
    p = build(planted())
    r = get_tool("memcpy")(p)
    assert r.pre_kernel_stall_min_ns == 1 * MS
    assert (r.pre_kernel_stall_count, r.pre_kernel_stall_ns) == (1, 4 * MS)
    s = r.pre_kernel_stalls[0]
    assert (s.device_id, s.stream_id, s.start_ms, s.duration_ns, s.bytes, s.pageable) == (
        0, 7, 0.0, 4 * MS, 8_000_000, True)
    assert (s.next_kernel, s.next_kernel_start_ms) == ("step_kernel", 5.0)
    assert (r.devices[0].pre_kernel_stall_count, r.devices[1].pre_kernel_stall_count) == (1, 0)
    # a lower minimum also catches the 0.5 ms pageable copy in the gap before gemm
    r = get_tool("memcpy")(p, {"min_stall_ms": 0.5})
    assert r.pre_kernel_stall_count == 2 and r.pre_kernel_stall_ns == 4500 * US
    assert [(x.next_kernel, x.duration_ns) for x in r.pre_kernel_stalls] == [
        ("step_kernel", 4 * MS), ("gemm", 500 * US)]
    assert len(get_tool("memcpy")(p, {"min_stall_ms": 0.5, "limit": 1}).pre_kernel_stalls) == 1


def test_gpu_filter(build):
    r = get_tool("memcpy")(build(planted()), {"gpu": 1})
    assert [d.device_id for d in r.devices] == [1]
    assert r.copy_count == 1 and kind(r, "DtoD").count == 1 and kind(r, "HtoD").count == 0
    assert r.sync_copy_count == 0 and r.pre_kernel_stall_count == 0


def test_window_cut_keeps_bandwidth_of_whole_copy(build):
    b = ExportBuilder()
    b.memcpy(0, 0, 4 * MS, 8_000_000, kind="HtoD")
    b.kernel(0, 4 * MS, 8 * MS)
    r = get_tool("memcpy")(build(b), {"start_ms": 2})
    h = kind(r, "HtoD")
    assert (h.count, h.bytes, h.total_ns) == (1, 8_000_000, 2 * MS)
    assert h.gbps == 2.0  # 8e6 B over the copy's 4 ms, not over the 2 ms inside the window
    assert r.pre_kernel_stalls[0].start_ms == 2.0 and r.pre_kernel_stalls[0].duration_ns == 2 * MS


def test_driver_sync_copies_and_async_ones(build):
    b = ExportBuilder()
    b.copy_call(0, 0, 3 * MS, 1 * MS, 2 * MS, 1000, api_name="cuMemcpyHtoD_v2")
    b.copy_call(0, 3 * MS, 3100 * US, 4 * MS, 5 * MS, 1000, api_name="cuMemcpyHtoDAsync_v2")
    b.copy_call(0, 5 * MS, 5100 * US, 6 * MS, 7 * MS, 1000, api_name="cudaMemcpyAsync")
    b.copy_call(0, 7 * MS, 9 * MS, 8 * MS, 9 * MS, 500, kind="DtoH", api_name="cudaMemcpy2D")
    r = get_tool("memcpy")(build(b))
    assert {(s.api, s.calls, s.copies, s.blocked_ns) for s in r.sync_by_api} == {
        ("cuMemcpyHtoD", 1, 1, 2 * MS), ("cudaMemcpy2D", 1, 1, 2 * MS)}  # call [0,3] clipped to window start 1 ms
    assert (r.sync_copy_count, r.sync_copy_bytes, r.sync_blocked_ns) == (2, 1500, 4 * MS)


def test_backtrace_rows_do_not_double_sync_calls(build):
    b = ExportBuilder("2022")
    b.copy_call(0, 1 * MS, 3 * MS, 1 * MS, 2 * MS, 1000, api_name="cudaMemcpy")
    b.kernel(0, 3 * MS, 4 * MS)
    r = get_tool("memcpy")(build(b))
    assert (r.sync_copy_count, r.sync_copy_calls, r.sync_blocked_ns) == (1, 1, 2 * MS)


def test_unknown_kind_only_when_present(tmp_path):
    b = ExportBuilder()
    b.memcpy(0, 0, 1 * MS, 1000, kind="HtoD")
    b.memcpy(0, 1 * MS, 2 * MS, 4000, kind="HtoD")
    path = b.write(tmp_path / "unk.sqlite")
    con = sqlite3.connect(path)
    con.execute("UPDATE CUPTI_ACTIVITY_KIND_MEMCPY SET copyKind = 0 WHERE bytes = 4000")  # 0 = unknown
    con.commit()
    con.close()
    r = get_tool("memcpy")(Profile.open(path, progress=False))
    assert [x.kind for x in r.by_kind] == ["HtoD", "DtoH", "DtoD", "HtoH", "PtoP", "Unknown"]
    u = kind(r, "Unknown")
    assert (u.count, u.bytes, u.total_ns, u.gbps) == (1, 4000, 1 * MS, 0.004)


def test_no_copies_no_api(build):
    b = ExportBuilder()
    b.kernel(0, 0, 1 * MS)
    r = get_tool("memcpy")(build(b))
    assert r.copy_count == 0 and all(x.count == 0 and x.gbps is None for x in r.by_kind)
    assert r.devices[0].copy_busy_ns == 0 and r.devices[0].copy_kernel_overlap_pct == 0.0
    assert any("memcpy" in n for n in r.notes) and any("API" in n for n in r.notes)


SQL_KIND = {1: "HtoD", 2: "DtoH", 8: "DtoD", 9: "HtoH", 10: "PtoP"}


@pytest.mark.skipif(not SHARED_SQLITE, reason="../shared/profiles not present")
@pytest.mark.parametrize("path", SHARED_GPU, ids=lambda p: p.name)
def test_shared_profiles(path):
    r = get_tool("memcpy")(Profile.open(path, progress=False))
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        rows = con.execute(
            "SELECT copyKind, count(*), sum(bytes) FROM CUPTI_ACTIVITY_KIND_MEMCPY GROUP BY 1").fetchall()
    except sqlite3.OperationalError:  # no memcpy table
        rows = []
    finally:
        con.close()
    want: dict[str, list[int]] = {}
    for k, n, nbytes in rows:
        acc = want.setdefault(SQL_KIND.get(k, f"other {k}"), [0, 0])
        acc[0] += n
        acc[1] += nbytes or 0
    assert not any(k.startswith("other") for k in want)  # the shared files use only these kinds
    for x in r.by_kind:
        assert [x.count, x.bytes] == want.get(x.kind, [0, 0])
        assert x.total_ns >= 0 and (x.gbps is None) == (x.total_ns == 0)
    assert r.copy_count == sum(n for n, _ in want.values())
    for d in r.devices:
        assert 0 <= d.copy_busy_pct <= 100 and 0 <= d.kernel_busy_pct <= 100
        assert 0 <= d.copy_kernel_overlap_ns <= min(d.copy_busy_ns, d.kernel_busy_ns)
        assert 0 <= d.copy_kernel_overlap_pct <= 100
        assert d.pre_kernel_stall_ns <= d.copy_busy_ns
    assert r.sync_copy_count <= r.copy_count
    assert all(s.duration_ns >= r.pre_kernel_stall_min_ns for s in r.pre_kernel_stalls)


def _busy_fixture() -> ExportBuilder:
    """Window [0, 12] ms. GPU 0: kernels on two streams overlapping in [3, 4]; GPU 1: one kernel."""
    b = ExportBuilder()
    b.kernel(0, 0, 4 * MS, stream=7)
    b.kernel(0, 3 * MS, 6 * MS, stream=8)
    b.kernel(0, 9 * MS, 12 * MS, stream=7)
    b.memcpy(0, 5 * MS, 8 * MS, 1000)
    b.kernel(1, 2 * MS, 5 * MS)
    return b


@pytest.mark.parametrize("window", [{}, {"start_ms": 2, "end_ms": 10}])
def test_kernel_busy_is_overviews(build, window):
    p = build(_busy_fixture())
    r = get_tool("memcpy")(p, window)
    o = get_tool("overview")(p, window)
    assert [(d.device_id, d.kernel_busy_ns, d.kernel_busy_pct) for d in r.devices] == [
        (d.device_id, d.kernel_busy_ns, d.kernel_busy_pct) for d in o.devices]
    # [0, 6] + [9, 12] = 9 ms; inside [2, 10]: [2, 6] + [9, 10] = 5 ms
    assert r.devices[0].kernel_busy_ns == (5 if window else 9) * MS


def small_copies_export():
    """40 HtoD copies of 4 KiB (5 µs each) and 2 of 8 MiB (400 µs each), between kernels on GPU 0."""
    b = ExportBuilder()
    b.gpu(0)
    t = 0
    for _ in range(40):
        b.copy_call(0, t, t + 2 * US, t + 3 * US, t + 8 * US, 4096)
        t += 20 * US
    for _ in range(2):
        b.copy_call(0, t, t + 2 * US, t + 3 * US, t + 403 * US, 8 * 1024 * 1024)
        t += 500 * US
    b.launch(0, t, t + 5 * US, t + 10 * US, t + 1 * MS)
    return b


def test_small_copies_are_counted_by_direction(build):
    r = get_tool("memcpy")(build(small_copies_export()))
    assert r.small_copy_bytes == 64 * 1024 and r.small_copy_count == 40
    (s,) = r.small_copies
    assert (s.kind, s.count, s.bytes, s.total_ns, s.median_ns, s.median_bytes) == ("HtoD", 40, 40 * 4096,
                                                                                    40 * 5 * US, 5 * US, 4096)
    assert r.median_copy_bytes == 4096


def test_why_so_many_small_copies_is_answered_with_them(build):
    from dashcam.agent.planner import answer_offline

    p = build(small_copies_export())
    a = answer_offline("why are there so many small host-to-device copies?", p)
    assert a.intent == "memcpy" and a.grounded, (a.answer, a.ungrounded_numbers)
    assert a.answer.startswith("40 of the 42 copies are under 64 KiB: 40 HtoD (163.84 KB, 0.2 ms, a median "
                               "4.1 KB in 5 µs).")
    assert "gather the small arrays into one buffer" in a.answer


def test_device_to_device_copies_against_the_dram_peak(build):
    """An H100 SXM (3350 GB/s of DRAM): one 1.6 GB DtoD copy in 1 ms reads and writes 3200 GB/s, 95.522 %."""
    from dashcam.agent.planner import answer_offline

    b = ExportBuilder()
    b.gpu(0, "NVIDIA H100 80GB HBM3", 132)
    b.launch(0, 0, 5 * US, 10 * US, 2 * MS)
    b.memcpy(0, 2 * MS, 3 * MS, 1_600_000_000, "DtoD")
    p = build(b)
    d = get_tool("memcpy")(p).devices[0]
    assert (d.dram_gbps, d.dtod_gbps, d.dtod_dram_gbps, d.dtod_dram_pct) == (3350.0, 1600.0, 3200.0, 95.522)
    a = answer_offline("is the memcpy bandwidth near the peak?", p)
    assert ("GPU 0's device-to-device copies run at 1600 GB/s, 3200 GB/s of DRAM traffic (each byte read and "
            "written), 95.5 % of the H100 SXM's 3350 GB/s: as fast as the memory allows, so only fewer copies help."
            ) in a.answer
    assert a.grounded, a.ungrounded_numbers


def test_copies_too_small_to_matter_are_said_so_not_told_to_move_less_data(tmp_path):
    """One pageable 10 MB copy of 2 ms in a 100 ms run on an A100 (pinned copies reach 25 GB/s over PCIe 4.0):
    pinning would save 1.6 ms, under the findings' floor (5 % of the window): the answer says the copies are not
    worth fixing, not "pageable memory is the limit ... only moving less data shortens the copies"."""
    from dashcam.agent.planner import answer_offline
    from dashcam.profile import Profile
    from dashcam.testing.builder import ExportBuilder

    ms = 1_000_000
    b = ExportBuilder()
    b.gpu(0, "NVIDIA A100-SXM4-80GB", 108)
    b.memcpy(0, 0, 2 * ms, 10_000_000, "HtoD", pinned=False)
    for i in range(49):
        b.kernel(0, (2 + 2 * i) * ms, (4 + 2 * i) * ms)
    p = Profile.open(b.write(tmp_path / "small_copies.sqlite"), progress=False)
    a = answer_offline("how fast are my copies?", p)
    assert "The copies are too small a part of the run to be worth fixing:" in a.answer, a.answer
    assert "Only moving less data" not in a.answer and a.grounded, a.ungrounded_numbers
