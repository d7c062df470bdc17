import numpy as np
import pytest

from dashcam.measure.intervals import kernel_unions, memory_unions, merge
from dashcam.testing.builder import ExportBuilder
from dashcam.tools import get_tool

from .conftest import MS, SHARED_GPU, US


def test_busy_counts_overlapping_streams_once(build):
    b = ExportBuilder()
    b.gpu(0)
    # window = [0, 10 ms]: kernels on two streams overlap in [2, 3] ms
    b.kernel(0, 0, 1 * MS, stream=7)
    b.kernel(0, 2 * MS, 4 * MS, stream=7)
    b.kernel(0, 3 * MS, 5 * MS, stream=8)
    b.memcpy(0, 9 * MS, 10 * MS, 1 << 20)
    r = get_tool("overview")(build(b))
    d = r.devices[0]
    assert r.window_ns == 10 * MS
    assert d.kernel_count == 3
    assert d.kernel_busy_ns == 4 * MS  # [0,1] + [2,5]
    assert d.kernel_busy_pct == 40.0
    assert d.busy_ns == 5 * MS
    assert d.busy_pct == 50.0
    assert d.kernel_idle_ns == 6 * MS


def test_window_is_shared_by_all_devices(build):
    b = ExportBuilder()
    b.kernel(0, 0, 2 * MS)
    b.kernel(1, 6 * MS, 8 * MS)
    r = get_tool("overview")(build(b))
    assert r.window_ns == 8 * MS
    assert [d.kernel_busy_pct for d in r.devices] == [25.0, 25.0]


def test_user_window_clips_events(build):
    b = ExportBuilder()
    b.kernel(0, 0, 4 * MS)
    b.kernel(0, 6 * MS, 10 * MS)
    r = get_tool("overview")(build(b), {"start_ms": 2, "end_ms": 8})
    assert r.window_ns == 6 * MS
    assert r.devices[0].kernel_busy_ns == 4 * MS  # [2,4] + [6,8]
    assert r.devices[0].kernel_count == 2


def test_versions_from_each_metadata_table(build):
    for schema, version in (("2024", "2024.5.1.113"), ("2022", "2022.2.1.31"), ("2021", None)):
        b = ExportBuilder(schema)
        b.kernel(0, 0, 5 * US)
        r = get_tool("overview")(build(b, f"{schema}.sqlite"))
        assert r.nsys_version == version


def test_busy_counts_copies_inside_a_gap_the_window_cuts(build):
    b = ExportBuilder()
    b.kernel(0, 0, 1 * MS)
    b.kernel(0, 9 * MS, 10 * MS)
    b.memcpy(0, 2 * MS, 3 * MS, 1 << 20, stream=9)  # inside the gap [1, 9) ms
    b.memcpy(0, 5 * MS, 7 * MS, 1 << 20, stream=9)
    r = get_tool("overview")(build(b), {"start_ms": 2.5, "end_ms": 9.5})  # cuts the gap at 2.5 ms
    d = r.devices[0]
    assert d.kernel_busy_ns == 500 * US  # [9, 9.5]
    assert d.busy_ns == 500 * US + 500 * US + 2 * MS  # + [2.5, 3] + [5, 7]


def _direct_unions(p, w):
    ku, mu = kernel_unions(p, w, p.devices), memory_unions(p, w, p.devices)
    both = {d: merge(np.concatenate((ku[d].starts, mu[d].starts)), np.concatenate((ku[d].ends, mu[d].ends)))
            for d in p.devices}
    return {d: (ku[d].total, both[d].total) for d in p.devices}


@pytest.mark.parametrize("path", SHARED_GPU, ids=lambda x: x.name)
@pytest.mark.parametrize("window", [(None, None), (0.13, 0.71), (0.5, None), (0.33, 0.34)])
def test_busy_from_the_gap_table_equals_the_unions_on_real_exports(opened, path, window):
    p = opened(path)
    full = p.window()
    length = full.length_ns / MS
    start, end = ((None if f is None else f * length) for f in window)
    w = p.window(start, end)
    r = get_tool("overview")(p, {"start_ms": start, "end_ms": end})
    assert {d.device_id: (d.kernel_busy_ns, d.busy_ns) for d in r.devices} == _direct_unions(p, w)
