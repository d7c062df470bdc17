import sqlite3

import pytest

from dashcam.profile import Profile
from dashcam.testing.builder import ExportBuilder
from dashcam.tools import get_tool
from dashcam.tools.small_kernels import SMALL_TIME_SHARE_PCT

from .conftest import MS, SHARED_GPU, US


def _h100s() -> ExportBuilder:
    """Three 132-SM GPUs with known small-kernel shares: 50 %, 25 % and exactly 30 %."""
    b = ExportBuilder()
    for d in (0, 1, 2):
        b.gpu(d, sm_count=132)
    # device 0: 5 ms of kernels, 2.5 ms in grids under 132 blocks
    b.kernel(0, 0, 1 * MS, name="tiny", grid=(10, 1, 1))
    b.kernel(0, 1 * MS, 2 * MS, name="tiny", grid=(10, 1, 1))
    b.kernel(0, 2 * MS, 2500 * US, name="tiled", grid=(4, 3, 1))  # 12 blocks
    b.kernel(0, 3 * MS, 4500 * US, name="exact", grid=(11, 12, 1))  # 132 blocks: not fewer than the SMs
    b.kernel(0, 5 * MS, 6 * MS, name="big", grid=(264, 1, 1))
    # device 1: 1 ms small of 4 ms
    b.kernel(1, 0, 3 * MS, name="big", grid=(264, 1, 1))
    b.kernel(1, 3 * MS, 4 * MS, name="tiny", grid=(10, 1, 1))
    # device 2: 3 ms small of 10 ms = 30 %, on the threshold
    b.kernel(2, 0, 7 * MS, name="big", grid=(264, 1, 1))
    b.kernel(2, 7 * MS, 10 * MS, name="tiny", grid=(10, 1, 1))
    return b


def test_small_grid_share_per_device(build):
    r = get_tool("small_kernels")(build(_h100s()))
    d0, d1, d2 = r.devices
    assert (d0.sm_count, d0.kernel_count, d0.kernel_time_ns) == (132, 5, 5 * MS)
    assert (d0.small_count, d0.small_time_ns, d0.small_time_pct, d0.verdict) == (3, 2500 * US, 50.0, "small_kernels")
    assert [(k.name, k.count, k.total_ns, k.avg_blocks) for k in d0.top_small] == [
        ("tiny", 2, 2 * MS, 10.0), ("tiled", 1, 500 * US, 12.0)]
    assert (d1.small_count, d1.small_time_ns, d1.small_time_pct, d1.verdict) == (1, 1 * MS, 25.0, "ok")
    assert (d2.small_time_pct, d2.verdict) == (30.0, "small_kernels")
    assert SMALL_TIME_SHARE_PCT == 30.0 and r.small_time_threshold_pct == 30.0
    assert r.notes == []


def test_limit_and_gpu(build):
    r = get_tool("small_kernels")(build(_h100s()), {"gpu": 0, "limit": 1})
    assert [d.device_id for d in r.devices] == [0]
    assert [k.name for k in r.devices[0].top_small] == ["tiny"]
    assert r.devices[0].small_time_ns == 2500 * US  # the limit cuts rows, not totals


def test_launch_configuration_most_common_then_first_launched(build):
    b = ExportBuilder()
    b.gpu(0, sm_count=132)
    # "mixed": 8x1x1 twice (written first in the table), 4x2x1 twice but launched earlier: a tie, the first
    # launched wins, with its own block shape; "counted": 2x1x1 three times beats 4x1x1 launched first
    b.kernel(0, 2 * MS, 3 * MS, name="mixed", grid=(8, 1, 1), block=(256, 1, 1))
    b.kernel(0, 3 * MS, 4 * MS, name="mixed", grid=(8, 1, 1), block=(256, 1, 1))
    b.kernel(0, 0, 1 * MS, name="mixed", grid=(4, 2, 1), block=(64, 2, 1))
    b.kernel(0, 1 * MS, 2 * MS, name="mixed", grid=(4, 2, 1), block=(64, 2, 1))
    b.kernel(0, 4 * MS, 5 * MS, name="counted", grid=(4, 1, 1))
    for i in range(3):
        b.kernel(0, (5 + i) * MS, (6 + i) * MS, name="counted", grid=(2, 1, 1), block=(32, 1, 1))
    rows = {k.name: (k.count, k.grid, k.block) for k in get_tool("small_kernels")(build(b)).devices[0].top_small}
    assert rows == {"mixed": (4, "4x2x1", "64x2x1"), "counted": (4, "2x1x1", "32x1x1")}


def test_threshold_follows_each_gpus_sm_count(build):
    b = ExportBuilder()
    b.gpu(3, sm_count=8, nsys_id=0)  # TARGET_INFO_GPU.id 0 is CUDA device 3
    b.kernel(3, 0, 1 * MS, name="ten_blocks", grid=(10, 1, 1))
    b.kernel(3, 1 * MS, 2 * MS, name="four_blocks", grid=(2, 2, 1))
    r = get_tool("small_kernels")(build(b))
    d = r.devices[0]
    assert (d.device_id, d.sm_count, d.small_count, d.small_time_pct) == (3, 8, 1, 50.0)
    assert [k.name for k in d.top_small] == ["four_blocks"]


def test_gpu_without_sm_count_is_not_guessed(build):
    b = ExportBuilder("2021")  # no TARGET_INFO_GPU at all
    b.kernel(0, 0, 1 * MS, name="tiny", grid=(1, 1, 1))
    b.kernel(0, 1 * MS, 3 * MS, name="big", grid=(264, 1, 1))
    r = get_tool("small_kernels")(build(b))
    d = r.devices[0]
    assert (d.sm_count, d.kernel_count, d.kernel_time_ns) == (None, 2, 3 * MS)
    assert (d.small_count, d.small_time_ns, d.small_time_pct, d.verdict, d.top_small) == (None, None, None, None, [])
    assert any("GPU 0" in n and "SM count unknown" in n for n in r.notes)


def test_durations_clipped_to_window(build):
    b = ExportBuilder()
    b.gpu(0, sm_count=132)
    b.kernel(0, 0, 4 * MS, name="tiny", grid=(10, 1, 1))  # 2 ms inside [2, 8]
    b.kernel(0, 4 * MS, 10 * MS, name="big", grid=(264, 1, 1))  # 4 ms inside
    r = get_tool("small_kernels")(build(b), {"start_ms": 2, "end_ms": 8})
    d = r.devices[0]
    assert (d.kernel_time_ns, d.small_time_ns, d.top_small[0].total_ns) == (6 * MS, 2 * MS, 2 * MS)
    assert d.small_time_pct == pytest.approx(33.333)
    assert d.verdict == "small_kernels"


def test_device_with_only_copies(build):
    b = ExportBuilder()
    b.gpu(0, sm_count=132)
    b.memcpy(0, 0, 1 * MS, 1 << 20)
    d = get_tool("small_kernels")(build(b)).devices[0]
    assert (d.kernel_count, d.small_count, d.small_time_pct, d.verdict) == (0, 0, 0.0, "ok")


@pytest.mark.parametrize("path", SHARED_GPU, ids=lambda p: p.name)
def test_real_profiles_invariants(path):
    r = get_tool("small_kernels")(Profile.open(path, progress=False))
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    for d in r.devices:
        n = con.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE deviceId = ?",
                        [d.device_id]).fetchone()[0]
        assert d.kernel_count == n
        if d.sm_count is None:
            assert d.verdict is None and d.small_time_pct is None
            continue
        small = con.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE deviceId = ? "
                            "AND gridX * gridY * gridZ < ?", [d.device_id, d.sm_count]).fetchone()[0]
        assert d.small_count == small
        assert 0 <= d.small_time_pct <= 100
        assert d.verdict == ("small_kernels" if d.small_time_pct >= 30 else "ok")
        assert sum(k.total_ns for k in d.top_small) <= d.small_time_ns <= d.kernel_time_ns
    con.close()


def test_render_prints_names_literally(build):
    from rich.console import Console

    from dashcam.tools.small_kernels import render

    b = ExportBuilder()
    b.gpu(0, sm_count=132)
    b.kernel(0, 0, 1 * MS, name="k[red]x[/red]", grid=(1, 1, 1))
    console = Console(record=True, width=200)
    render(get_tool("small_kernels")(build(b)), console)
    assert "k[red]x[/red]" in console.export_text()
