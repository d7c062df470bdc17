import json
import sqlite3

import pytest
from rich.console import Console

from dashcam.errors import UnknownGpu
from dashcam.profile import Profile
from dashcam.testing.builder import ExportBuilder
from dashcam.tools import get_tool
from dashcam.tools.top_kernels import render

from .conftest import MS, SHARED_GPU, US

GEMM_F = "void gemm<float>(float *)"
GEMM_H = "void gemm<half>(half *)"
RELU = "void relu(float *)"


def _one_device() -> ExportBuilder:
    """Device 0, 4 ms of kernel time: gemm<float> 3 ms (0.5 + 1 + 1.5), gemm<half> 0.5 ms, relu 0.5 ms."""
    b = ExportBuilder()
    b.gpu(0)
    b.kernel(0, 0, 500 * US, name=GEMM_F, short="gemm")
    b.kernel(0, 1 * MS, 2 * MS, name=GEMM_F, short="gemm")
    b.kernel(0, 2 * MS, 3500 * US, name=GEMM_F, short="gemm")
    b.kernel(0, 4 * MS, 4500 * US, name=GEMM_H, short="gemm")
    b.kernel(0, 5 * MS, 5500 * US, name=RELU, short="relu")
    return b


def test_pct_contract_and_grouping_by_full_name(build):
    r = get_tool("top_kernels")(build(_one_device()))
    assert r.kernel_count == 5
    assert r.total_kernel_ns == 4 * MS
    rows = [(k.name, k.full_name, k.count, k.total_ns, k.pct) for k in r.kernels]
    # the two gemm instantiations are separate rows with the same short name; ties broken by full name
    assert rows == [
        ("gemm", GEMM_F, 3, 3 * MS, 75.0),
        ("gemm", GEMM_H, 1, 500 * US, 12.5),
        ("relu", RELU, 1, 500 * US, 12.5),
    ]
    top = r.kernels[0]
    assert (top.avg_ns, top.max_ns, top.min_ns, top.device_id) == (1 * MS, 1500 * US, 500 * US, None)
    data = json.loads(r.model_dump_json())
    assert {"name", "full_name", "count", "total_ns", "pct"} <= set(data["kernels"][0])
    assert data["kernels"][0]["name"] == "gemm" and data["kernels"][0]["pct"] == 75.0


def test_limit_cuts_rows_not_totals(build):
    r = get_tool("top_kernels")(build(_one_device()), {"limit": 1})
    assert [k.full_name for k in r.kernels] == [GEMM_F]
    assert r.total_kernel_ns == 4 * MS and r.kernel_count == 5


def test_name_filter_keeps_pct_of_all_kernel_time(build):
    r = get_tool("top_kernels")(build(_one_device()), {"name_contains": "GEMM"})
    assert [(k.full_name, k.pct) for k in r.kernels] == [(GEMM_F, 75.0), (GEMM_H, 12.5)]
    assert (r.matched_count, r.matched_ns, r.matched_pct) == (4, 3500 * US, 87.5)
    assert r.total_kernel_ns == 4 * MS
    none = get_tool("top_kernels")(build(_one_device()), {"name_contains": "softmax"})
    assert none.kernels == [] and none.matched_count == 0
    assert any("softmax" in n for n in none.notes)


def _two_devices() -> ExportBuilder:
    """Device 0: A 3 ms, B 1 ms. Device 1: A 1 ms, B 3 ms. Concurrent on purpose (sums, not unions)."""
    b = ExportBuilder()
    b.gpu(0)
    b.gpu(1)
    b.kernel(0, 0, 3 * MS, name="kernel_a")
    b.kernel(0, 1 * MS, 2 * MS, name="kernel_b", stream=8)
    b.kernel(1, 0, 1 * MS, name="kernel_a")
    b.kernel(1, 0, 3 * MS, name="kernel_b", stream=8)
    return b


def test_across_devices_pct_is_of_all_devices(build):
    r = get_tool("top_kernels")(build(_two_devices()))
    assert r.total_kernel_ns == 8 * MS
    assert [(k.name, k.device_id, k.count, k.total_ns, k.pct, k.max_ns, k.min_ns) for k in r.kernels] == [
        ("kernel_a", None, 2, 4 * MS, 50.0, 3 * MS, 1 * MS),
        ("kernel_b", None, 2, 4 * MS, 50.0, 3 * MS, 1 * MS),
    ]
    assert [(d.device_id, d.kernel_count, d.kernel_time_ns) for d in r.devices] == [(0, 2, 4 * MS), (1, 2, 4 * MS)]


def test_by_device_pct_is_of_that_device(build):
    r = get_tool("top_kernels")(build(_two_devices()), {"by_device": True})
    assert [(k.device_id, k.name, k.total_ns, k.pct) for k in r.kernels] == [
        (0, "kernel_a", 3 * MS, 75.0), (0, "kernel_b", 1 * MS, 25.0),
        (1, "kernel_b", 3 * MS, 75.0), (1, "kernel_a", 1 * MS, 25.0),
    ]
    one = get_tool("top_kernels")(build(_two_devices()), {"by_device": True, "limit": 1})
    assert [(k.device_id, k.name) for k in one.kernels] == [(0, "kernel_a"), (1, "kernel_b")]


def test_gpu_param_selects_one_device(build):
    p = build(_two_devices())
    r = get_tool("top_kernels")(p, {"gpu": 1})
    assert r.total_kernel_ns == 4 * MS
    assert [(k.name, k.pct) for k in r.kernels] == [("kernel_b", 75.0), ("kernel_a", 25.0)]
    with pytest.raises(UnknownGpu):
        get_tool("top_kernels")(p, {"gpu": 5})


def test_durations_clipped_to_window(build):
    b = ExportBuilder()
    b.kernel(0, 0, 4 * MS, name="kernel_a")  # 2 ms inside [2, 8]
    b.kernel(0, 6 * MS, 7 * MS, name="kernel_a")  # 1 ms inside
    b.kernel(0, 9 * MS, 10 * MS, name="kernel_b")  # outside
    r = get_tool("top_kernels")(build(b), {"start_ms": 2, "end_ms": 8})
    assert (r.kernel_count, r.total_kernel_ns) == (2, 3 * MS)
    assert [(k.name, k.count, k.total_ns, k.max_ns, k.min_ns, k.pct) for k in r.kernels] == [
        ("kernel_a", 2, 3 * MS, 2 * MS, 1 * MS, 100.0)]


def test_profile_without_kernels(build):
    b = ExportBuilder("2021")
    b.memcpy(0, 0, 1 * MS, 1 << 20)
    r = get_tool("top_kernels")(build(b))
    assert (r.kernel_count, r.total_kernel_ns, r.kernels) == (0, 0, [])
    assert r.devices[0].kernel_time_ns == 0


def test_render_prints_names_literally(build):
    b = ExportBuilder()
    b.kernel(0, 0, 1 * MS, name="k[red]x[/red]")
    console = Console(record=True, width=200)
    render(get_tool("top_kernels")(build(b), {"by_device": True}), console)
    assert "k[red]x[/red]" in console.export_text()


@pytest.mark.parametrize("path", SHARED_GPU, ids=lambda p: p.name)
def test_real_profiles_invariants(path):
    p = Profile.open(path, progress=False)
    all_rows = get_tool("top_kernels")(p, {"limit": 1000})
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    n, total = con.execute(
        'SELECT count(*), coalesce(sum("end" - start), 0) FROM CUPTI_ACTIVITY_KIND_KERNEL').fetchone()
    con.close()
    assert all_rows.kernel_count == n  # the whole-profile window holds every kernel
    assert all_rows.total_kernel_ns == total
    assert sum(k.count for k in all_rows.kernels) == n
    assert sum(k.pct for k in all_rows.kernels) == pytest.approx(100.0, abs=0.01)
    per_dev = get_tool("top_kernels")(p, {"by_device": True, "limit": 3})
    for k in per_dev.kernels:
        assert 0 <= k.pct <= 100 and k.min_ns <= k.avg_ns <= k.max_ns and k.device_id is not None
