"""memory on planted captures (testing/features.py) in the layouts of CUDA_GPU_MEMORY_USAGE_EVENTS and the
unified-memory fault tables:

- "2022": schema 2.9.1 as in the real nsys 2022.2.1 export (lazy=false): no streamId, no memory-pool columns;
  free events without a byte count;
- "2024": the schema reference's layout with the memory-pool columns (no streamId);
- "2026": nsys 2026.4 / schema 3.28.1: streamId too; CUDA_UM_CPU_PAGE_FAULT_EVENTS with sourceFile/sourceLine.
"""
import pytest

from dashcam.profile import Profile
from dashcam.testing.builder import ExportBuilder
from dashcam.testing.features import GIB, managed_faults, memory_churn
from dashcam.tools import get_tool

from .conftest import MS, US

tool = get_tool("memory")


@pytest.mark.parametrize("schema", ["2026", "2024", "2022"])
def test_peak_timeline_and_churn(tmp_path, schema):
    r = tool(Profile.open(memory_churn(tmp_path / f"m{schema}.sqlite", schema), progress=False))
    assert r.recorded and r.window.length_ns == 18_600 * US
    d = r.devices[0]
    assert (d.allocations, d.frees, d.allocated_bytes, d.freed_bytes) == (5, 4, 10 * GIB, 8 * GIB)
    assert (d.in_use_start_bytes, d.peak_bytes, d.peak_at_ms, d.in_use_end_bytes) == (20 * GIB, 22 * GIB, 0.3, 22 * GIB)
    assert (d.total_memory_bytes, d.peak_pct, d.lowest_bytes) == (80 * GIB, 27.5, 20 * GIB)
    assert [(p.t_ms, p.in_use_bytes // GIB) for p in d.timeline] == [
        (0.0, 20), (0.3, 22), (2.8, 20), (4.3, 22), (6.8, 20), (8.3, 22), (10.8, 20), (12.3, 22), (14.8, 20),
        (16.3, 22)]
    assert [(a.name, a.calls, a.total_ns, a.max_ns) for a in r.alloc_api] == [
        ("cudaMalloc", 5, 1500 * US, 300 * US), ("cudaFree", 4, 800 * US, 200 * US)]
    assert r.step_method == "nvtx"
    assert [(s.allocations, s.frees, s.allocated_bytes // GIB, s.api_calls, s.api_ns) for s in r.steps] == \
        [(1, 1, 2, 2, 500 * US)] * 4 + [(1, 0, 2, 1, 300 * US)]
    assert r.unified.migrations == [] and r.unified.kernels_waiting == []


@pytest.mark.parametrize("schema", ["2026", "2022"])
def test_unified_memory_faults_and_the_kernels_that_waited(tmp_path, schema):
    r = tool(Profile.open(managed_faults(tmp_path / f"u{schema}.sqlite", schema), progress=False))
    assert not r.recorded and "--cuda-memory-usage=true" in r.notes[0] and r.window.length_ns == 19_530 * US
    u = r.unified
    assert (u.cpu_faults, u.gpu_fault_records, u.gpu_faults) == (4, 8, 64)
    m = u.migrations[0]
    assert (m.device_id, m.count, m.bytes, m.union_ns) == (0, 24, 276 << 20, 4600 * US)
    assert (m.htod_bytes, m.dtoh_bytes, m.cause_bytes) == (260 << 20, 16 << 20, {"page_fault": 272 << 20,
                                                                              "prefetch": 4 << 20})
    assert [(k.name, k.launches, k.faulting_launches, k.faults, k.migration_wait_ns) for k in u.kernels_waiting] == \
        [("stencil_kernel", 4, 4, 64, 4 * MS)]
    g = get_tool("gpu_gaps")(Profile.open(tmp_path / f"u{schema}.sqlite", progress=False)).devices[0]
    assert (g.migration_ns, g.kernel_idle_ns) == (4600 * US, 11_530 * US)


def test_frees_without_bytes_and_managed_memory(build):
    b = ExportBuilder("2022")
    b.launch(0, 0, 5 * US, 10 * US, 100 * US)
    b.alloc(0, 20 * US, 1000, 0xA)
    b.alloc(0, 30 * US, 500, 0xB, kind=4)  # managed: counted apart, not device memory in use
    b.free(0, 40 * US, 0, 0xA)  # no byte count: frees the 1000 the allocation at 0xA held
    d = tool(build(b)).devices[0]
    assert (d.allocations, d.frees, d.peak_bytes, d.in_use_end_bytes, d.lowest_bytes) == (1, 1, 1000, 0, 0)
    assert (d.managed_allocations, d.managed_allocated_bytes) == (1, 500)


def test_allocation_calls_too_small_to_matter_get_no_remedy(build):
    """No memory-usage trace; each 10 ms step (NVTX `step <n>`) makes one 10 us cudaMalloc: 0.1 % of the step."""
    from dashcam.agent.planner import answer_offline

    b = ExportBuilder()
    b.gpu(0, "NVIDIA H100 80GB HBM3", 132)
    for i in range(4):
        t = i * 10 * MS
        b.nvtx(f"step {i}", t, t + 10 * MS)
        b.api("cudaMalloc", t + 5 * MS, t + 5 * MS + 10 * US)
        b.launch(0, t + 200 * US, t + 210 * US, t + 300 * US, t + 9 * MS)
    a = answer_offline("how much memory does the GPU use?", build(b))
    assert ("Every step allocates: step 0 makes 1 allocation call (10 µs; the capture records no allocation "
            "events). That is too little of the step's time to matter.") in a.answer, a.answer
    assert "Allocate once" not in a.answer and a.grounded
