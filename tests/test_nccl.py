import sqlite3

import pytest

from dashcam.profile import Profile
from dashcam.testing.builder import ExportBuilder
from dashcam.tools import get_tool

from .conftest import MS, SHARED_GPU, SHARED_SQLITE, US

ALLREDUCE = "ncclDevKernel_AllReduce_Sum_f32_RING_LL"


def planted() -> ExportBuilder:
    """Window [0, 20] ms on five GPUs with known communication/compute overlap."""
    b = ExportBuilder()
    # GPU 0: AllReduce [2,6] half under gemm [0,4]; SendRecv [10,11] fully under gemm [8,20]
    b.kernel(0, 0, 4 * MS, name="gemm", stream=7)
    b.kernel(0, 2 * MS, 6 * MS, name=ALLREDUCE, stream=20)
    b.kernel(0, 8 * MS, 20 * MS, name="gemm", stream=7)
    b.kernel(0, 10 * MS, 11 * MS, name="ncclDevKernel_SendRecv", stream=20)
    b.kernel(0, 14 * MS, 15 * MS, name="AllReduce_custom", stream=9)  # not NCCL: compute
    # GPU 1: only NCCL kernels
    b.kernel(1, 0, 6 * MS, name="ncclKernel_AllGather_RING_LL_Sum_int8_t", stream=20)
    b.kernel(1, 10 * MS, 12 * MS, name="ncclKernel_AllGather_RING_LL_Sum_int8_t", stream=20)
    # GPU 2: no NCCL
    b.kernel(2, 0, 20 * MS, name="gemm")
    # GPU 3: NCCL only in the demangled name, fully hidden behind compute
    b.kernel(3, 0, 4 * MS, name="gemm", stream=7)
    b.kernel(3, 1 * MS, 2 * MS, name="void ncclDevKernel_Broadcast_RING_LL(ncclDevComm*, unsigned long)",
             short="broadcast_k", stream=20)
    # GPU 4: 1.9 ms exposed = 9.5 % of the window, just under the limit
    b.kernel(4, 0, 1900 * US, name="ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL", stream=20)
    return b


def test_half_overlapped_comm_on_another_stream(build):
    r = get_tool("nccl")(build(planted()))
    assert r.window.length_ns == 20 * MS
    d = r.devices[0]
    assert d.comm_kernel_count == 2  # AllReduce_custom has no 'nccl' in its name
    assert (d.comm_ns, d.comm_pct) == (5 * MS, 25.0)  # [2,6] + [10,11]
    assert (d.compute_ns, d.compute_pct) == (16 * MS, 80.0)  # [0,4] + [8,20]
    assert (d.overlap_ns, d.overlap_pct) == (3 * MS, 60.0)  # [2,4] + [10,11] of 5 ms
    assert (d.exposed_comm_ns, d.exposed_comm_pct) == (2 * MS, 10.0)
    assert d.verdict == "not_overlapped"  # exactly at the 10 % limit
    assert [(k.name, k.count, k.total_ns) for k in d.top_kernels] == [
        (ALLREDUCE, 1, 4 * MS), ("ncclDevKernel_SendRecv", 1, 1 * MS)]


def test_device_with_only_nccl(build):
    d = get_tool("nccl")(build(planted())).devices[1]
    assert (d.comm_kernel_count, d.comm_ns, d.compute_ns) == (2, 8 * MS, 0)
    assert (d.overlap_ns, d.overlap_pct, d.exposed_comm_ns, d.exposed_comm_pct) == (0, 0.0, 8 * MS, 40.0)
    assert d.verdict == "not_overlapped"
    assert [(k.count, k.total_ns) for k in d.top_kernels] == [(2, 8 * MS)]


def test_verdicts_and_full_name_match(build):
    r = get_tool("nccl")(build(planted()))
    # GPU 4's 1.9 ms of communication runs alone: under the 10 % limit, but not "overlapped"
    assert [d.verdict for d in r.devices] == ["not_overlapped", "not_overlapped", "no_nccl", "overlapped",
                                              "minor"]
    d2, d3, d4 = r.devices[2:]
    assert (d2.comm_kernel_count, d2.comm_ns, d2.overlap_pct, d2.top_kernels) == (0, 0, None, [])
    assert (d3.comm_ns, d3.overlap_ns, d3.overlap_pct, d3.exposed_comm_ns) == (1 * MS, 1 * MS, 100.0, 0)
    assert [k.name for k in d3.top_kernels] == ["broadcast_k"]
    assert (d4.exposed_comm_ns, d4.exposed_comm_pct) == (1900 * US, 9.5)
    assert r.comm_kernel_count == 6 and r.notes == []


def test_window_clips_comm_and_compute(build):
    r = get_tool("nccl")(build(planted()), {"start_ms": 3, "end_ms": 12, "gpu": 0})
    d, = r.devices
    assert r.window.length_ns == 9 * MS
    assert (d.comm_ns, d.compute_ns, d.overlap_ns, d.overlap_pct) == (4 * MS, 5 * MS, 2 * MS, 50.0)
    assert (d.exposed_comm_ns, d.exposed_comm_pct) == (2 * MS, 22.222)
    assert [(k.name, k.total_ns) for k in d.top_kernels] == [(ALLREDUCE, 3 * MS), ("ncclDevKernel_SendRecv", 1 * MS)]


def test_gpu_filter_and_limit(build):
    r = get_tool("nccl")(build(planted()), {"gpu": 0, "limit": 1})
    assert [d.device_id for d in r.devices] == [0] and r.comm_kernel_count == 2
    assert [k.name for k in r.devices[0].top_kernels] == [ALLREDUCE]


def test_no_nccl_kernels(build):
    b = ExportBuilder()
    b.kernel(0, 0, 1 * MS)
    r = get_tool("nccl")(build(b))
    assert r.comm_kernel_count == 0 and r.devices[0].verdict == "no_nccl"
    assert r.devices[0].compute_ns == 1 * MS and r.devices[0].exposed_comm_ns == 0
    assert any("No NCCL" in n for n in r.notes)


def test_no_kernel_table(build):
    b = ExportBuilder()
    b.memcpy(0, 0, 1 * MS, 10)
    r = get_tool("nccl")(build(b))
    assert r.devices[0].verdict == "no_nccl"
    assert any("No kernels" in n for n in r.notes)


@pytest.mark.skipif(not SHARED_SQLITE, reason="../shared/profiles not present")
@pytest.mark.parametrize("path", SHARED_GPU, ids=lambda p: p.name)
def test_shared_profiles(path):
    r = get_tool("nccl")(Profile.open(path, progress=False))
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        want = con.execute(
            "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k LEFT JOIN StringIds s ON s.id = k.shortName "
            "LEFT JOIN StringIds d ON d.id = k.demangledName "
            "WHERE s.value LIKE '%nccl%' OR d.value LIKE '%nccl%'").fetchone()[0]
    except sqlite3.OperationalError:  # no kernel table
        want = 0
    finally:
        con.close()
    assert r.comm_kernel_count == want
    for d in r.devices:
        assert 0 <= d.overlap_ns <= min(d.comm_ns, d.compute_ns)
        assert d.exposed_comm_ns == d.comm_ns - d.overlap_ns
        for v in (d.comm_pct, d.compute_pct, d.exposed_comm_pct, d.overlap_pct or 0):
            assert 0 <= v <= 100
        assert (d.verdict == "no_nccl") == (d.comm_kernel_count == 0)
        assert sum(k.count for k in d.top_kernels) <= d.comm_kernel_count


@pytest.mark.parametrize("window", [{}, {"start_ms": 3, "end_ms": 12}])
def test_comm_plus_compute_minus_overlap_is_overviews_kernel_busy(build, window):
    p = build(planted())
    r, o = get_tool("nccl")(p, window), get_tool("overview")(p, window)
    assert [(d.device_id, d.comm_ns + d.compute_ns - d.overlap_ns) for d in r.devices] == [
        (d.device_id, d.kernel_busy_ns) for d in o.devices]


def test_comm_and_compute_kernels_sharing_a_start(build):
    b = ExportBuilder()
    b.kernel(0, 0, 4 * MS, name=ALLREDUCE, stream=20)
    b.kernel(0, 0, 2 * MS, name="gemm", stream=7)  # same start as a comm kernel, shorter
    b.kernel(0, 6 * MS, 8 * MS, name=ALLREDUCE, stream=20)
    b.kernel(0, 6 * MS, 8 * MS, name=ALLREDUCE, stream=21)  # the same comm interval twice, no compute under it
    b.kernel(0, 9 * MS, 10 * MS, name="gemm", stream=7)
    b.kernel(0, 11 * MS, 12 * MS, name=ALLREDUCE, stream=20)
    b.kernel(0, 11 * MS, 12 * MS, name="gemm", stream=7)  # the same interval as comm and as compute
    d = get_tool("nccl")(build(b)).devices[0]
    assert (d.comm_kernel_count, d.comm_ns) == (4, 7 * MS)  # [0,4] + [6,8] + [11,12]
    assert d.compute_ns == 4 * MS  # [0,2] + [9,10] + [11,12]
    assert (d.overlap_ns, d.exposed_comm_ns) == (3 * MS, 4 * MS)


@pytest.mark.skipif(not SHARED_SQLITE, reason="../shared/profiles not present")
@pytest.mark.parametrize("path", SHARED_GPU, ids=lambda p: p.name)
def test_shared_kernel_busy_is_overviews(path):
    p = Profile.open(path, progress=False)
    length_ms = p.window().length_ns / MS
    for window in ({}, {"start_ms": length_ms / 3, "end_ms": length_ms / 2}):
        r, o = get_tool("nccl")(p, window), get_tool("overview")(p, window)
        assert [(d.device_id, d.comm_ns + d.compute_ns - d.overlap_ns) for d in r.devices] == [
            (d.device_id, d.kernel_busy_ns) for d in o.devices]
