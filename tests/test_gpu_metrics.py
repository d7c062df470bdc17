"""gpu_metrics on planted samples (testing/features.py busy_not_busy) in two layouts of GPU_METRICS:

- "2026": GPU_METRICS(rawTimestamp, timestamp, typeId, metricId, value) and TARGET_INFO_GPU_METRICS(typeId,
  sourceId, typeName, metricId, metricName), as in the nsys 2026.4 / schema 3.28.1 schema reference, with the
  unit-suffixed names newer nsys versions give ("SM Active [Throughput %]");
- "2024": GPU_METRICS(timestamp, typeId, metricId, value), as the schema reference has it before rawTimestamp,
  with the older names ("SMs Active", "Tensor Active").
typeId is 0x1000100000000 + TARGET_INFO_GPU.pwGpuId (builder.metric_type_id).
"""
import numpy as np
import pytest

from dashcam.profile import Profile
from dashcam.testing.builder import ExportBuilder
from dashcam.testing.features import busy_not_busy
from dashcam.tools import get_tool
from dashcam.tools.gpu_metrics import metric_key, metric_unit, weighted

from .conftest import MS, US

tool = get_tool("gpu_metrics")


@pytest.mark.parametrize("schema", ["2026", "2024"])
def test_busy_but_not_busy(tmp_path, schema):
    p = Profile.open(busy_not_busy(tmp_path / f"m{schema}.sqlite", schema), progress=False)
    r = tool(p)
    assert r.capture_rate_hz == 10_000.0 and r.window.length_ns == 20_500 * US
    d = r.devices[0]
    assert (d.device_id, d.sample_interval_ns, d.sample_rate_hz, d.kernel_busy_pct) == (0, 100 * US, 10_000.0, 97.561)
    assert (d.sm_active_pct, d.sm_active_in_kernels_pct, d.tensor_active_in_kernels_pct,
            d.warp_occupancy_in_kernels_pct) == (14.634, 15.0, 0.0, 10.0)
    m = {x.name: x for x in d.metrics}
    sm = m["SM Active [Throughput %]" if schema == "2026" else "SMs Active"]
    assert (sm.key, sm.primary, sm.unit, sm.samples, sm.covered_ns) == ("sm_active", True, "%", 205, 20_500 * US)
    assert (sm.mean, sm.p10, sm.p50, sm.p90, sm.min, sm.max) == (14.634, 15.0, 15.0, 15.0, 0.0, 15.0)
    assert (sm.in_kernels_mean, sm.in_kernels_ns, sm.in_gaps_mean, sm.in_gaps_ns) == (15.0, 20 * MS, 0.0, 500 * US)
    gr = m["GR Active [Throughput %]" if schema == "2026" else "GR Active"]
    assert (gr.key, gr.mean, gr.in_kernels_mean) == ("gr_active", 97.561, 100.0)  # the sampler's "util"
    other = m["NVDEC Active [Throughput %]" if schema == "2026" else "NVDEC Active"]
    assert (other.key, other.primary) == (None, False)  # a name no pattern knows is kept, unmapped
    clock = m["GPC Clock Frequency [MHz]" if schema == "2026" else "GPC Clock Frequency"]
    assert (clock.unit, clock.mean, clock.in_gaps_mean) == ("MHz" if schema == "2026" else None, 1755.0, 1755.0)
    if schema == "2026":  # two variants of one key: the % one is primary
        avg = m["Compute Warps in Flight [Avg Warps per Cycle]"]
        assert (avg.key, avg.primary, avg.unit, avg.in_kernels_mean) == ("warp_occupancy", False, "warps/cycle", 12.5)
    assert len(d.metric_set) == (9 if schema == "2026" else 8) and d.samples == 205 * len(d.metric_set)
    k = d.top_kernels[0]
    assert (k.name, k.kernel_time_ns) == ("spmv_csr_kernel", 20 * MS)
    assert (k.means["sm_active"], k.means["tensor_active"], k.means["dram_read"]) == (15.0, 0.0, 85.0)


def test_window_and_percentiles(tmp_path):
    """A window over the hole only: every sample covering [11, 11.5] ms is 0 but the clock."""
    p = Profile.open(busy_not_busy(tmp_path / "m.sqlite"), progress=False)
    d = tool(p, {"start_ms": 10.0, "end_ms": 10.5}).devices[0]
    assert (d.sm_active_pct, d.sm_active_in_kernels_pct, d.kernel_busy_pct) == (0.0, None, 0.0)


def test_weighted_statistics():
    s = weighted(np.array([0.0, 10.0, 20.0]), np.array([1, 5, 4]))
    assert s == {"mean": 13.0, "p10": 0.0, "p50": 10.0, "p90": 20.0, "min": 0.0, "max": 20.0}


def test_names_by_generation():
    names = ("SM Active", "SMs Active", "SM Active [Throughput %]", "Tensor Active / FP16 Active",
             "Compute Warps in Flight [Avg]", "DRAM Write Throughput", "PCIe RX Throughput",
             "NVLink TX Responses User Data", "Vertex/Tess/Geometry Warps in Flight")
    assert [metric_key(n) for n in names] == ["sm_active", "sm_active", "sm_active", "tensor_active",
                                              "warp_occupancy", "dram_write", "pcie_rx", "nvlink_tx", None]
    assert metric_unit("SYS Clock Frequency [MHz]", "sys_clock") == "MHz" and metric_unit("SM Issue", "sm_issue") == "%"


def test_no_metrics_and_unmapped_sources(build):
    b = ExportBuilder()
    b.launch(0, 0, 5 * US, 10 * US, 20 * US)
    r = tool(build(b))
    assert r.devices == [] and "--gpu-metrics-devices" in r.notes[0]
    b = ExportBuilder()  # two GPUs, metrics of a GPU the profile has no activity on: matched, but not asked
    b.gpu(0).gpu(1)
    b.launch(0, 0, 5 * US, 10 * US, 20 * US)
    b.gpu_metric(1, "SMs Active", [(15 * US, 50.0)])
    r = tool(build(b))
    assert r.devices == [] and "No GPU metric samples" in r.notes[0]
