"""Capture coverage (profile/coverage.py): which kinds of data a capture holds, on planted exports and on every
shared real export, and the sentence answers give when the data a question needs is missing."""
from __future__ import annotations

import json
import sqlite3

import pytest

from dashcam.profile.coverage import BY_ID, KINDS, coverage, lacking, options_for
from dashcam.testing.builder import ExportBuilder
from dashcam.tools import get_tool

from .conftest import MS, SHARED_SQLITE, US, run_cli

# Per shared export: the kinds recorded, and the kinds its capture options had switched off or on-but-empty.
# Read off the files with plain SQL and their META_DATA_CAPTURE rows (see the test below for the table part).
EXPECTED = {
    "D-W-Chiang__JACC.jl__4e6_async_1_trace.sqlite": (
        {"cpu_sampling", "context_switches"},
        {"cuda_trace": "empty", "nvtx": "empty", "os_runtime": "off", "gpu_memory_usage": "off",
         "um_page_faults": "off", "cuda_graph_nodes": "off", "cuda_graph_whole": "empty"}),
    "NVIDIA__Fuser__report1_ee4fcf30.sqlite": (
        {"cuda_trace", "nvtx", "context_switches"},
        {"os_runtime": "off", "cpu_sampling": "off", "gpu_memory_usage": "off", "um_page_faults": "off",
         "cuda_graph_nodes": "off", "cuda_graph_whole": "empty"}),
    "hpcgroup__pipit__perlmutter-cloverleaf-cuda.sqlite": (
        {"cuda_trace", "os_runtime", "cpu_sampling", "context_switches"},
        {"nvtx": "empty", "gpu_memory_usage": "off", "um_page_faults": "off"}),
    "hpcgroup__pipit__saxpy-mpi-cuda_nsys_perlmutter0.sqlite": (  # 2022.2: no capture options; MPI by NVTX domain
        {"cuda_trace", "nvtx", "cpu_sampling", "context_switches", "cuda_backtraces", "mpi"}, {}),
    "nsys-ai__healthy_1pct.sqlite": ({"cuda_trace"}, {}),
    "nsys-ai__mfu_2gpu_before.sqlite": (
        {"cuda_trace", "nvtx", "nvtx_payloads"},
        {"os_runtime": "off", "gpu_memory_usage": "off", "um_page_faults": "off", "cuda_graph_nodes": "off",
         "cuda_graph_whole": "empty", "cpu_sampling": "off", "context_switches": "off"}),  # USE_LINUX_PERF false
    "nsys-ai__mock.sqlite": (
        {"cuda_trace"},
        {"nvtx": "off", "os_runtime": "off", "gpu_memory_usage": "off", "um_page_faults": "off",
         "cuda_graph_nodes": "off", "cuda_graph_whole": "empty", "cpu_sampling": "off", "context_switches": "off"}),
}


@pytest.mark.skipif(not SHARED_SQLITE, reason="../shared/profiles not present")
@pytest.mark.parametrize("path", SHARED_SQLITE, ids=lambda p: p.name)
def test_coverage_of_every_shared_profile(path, opened):
    assert path.name in EXPECTED, f"add the expected coverage of {path.name} to EXPECTED"
    recorded, states = EXPECTED[path.name]
    cov = coverage(opened(path))
    assert set(cov.recorded) == recorded
    assert [k.kind for k in cov.kinds] == [k.id for k in KINDS]
    got = {k.kind: k.state for k in cov.kinds}
    for kind, state in got.items():
        assert state == ("recorded" if kind in recorded else states.get(kind, "absent")), kind


@pytest.mark.skipif(not SHARED_SQLITE, reason="../shared/profiles not present")
@pytest.mark.parametrize("path", SHARED_SQLITE, ids=lambda p: p.name)
def test_table_kinds_agree_with_plain_sql(path, opened):
    """Independently of the cache's manifest: a kind proved by tables is recorded exactly when one of its
    tables has a row in the file."""
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        nonempty = {t for t in tables if con.execute(f'SELECT EXISTS (SELECT 1 FROM "{t}")').fetchone()[0]}
    finally:
        con.close()
    import re

    cov = coverage(opened(path))
    for kind in KINDS:
        if all(p.table for p in kind.proofs):
            held = any(re.search(p.table, t) for p in kind.proofs for t in nonempty)
            assert (kind.id in cov.recorded) == held, kind.id


def test_planted_capture(build):
    b = ExportBuilder()
    b.gpu(0)
    b.launch(0, 1 * US, 5 * US, 10 * US, 1 * MS)
    b.nvtx("step", 0, 2 * MS)
    b.table("OSRT_API", 3).table("SCHED_EVENTS", 2).table("CUDA_UM_GPU_PAGE_FAULT_EVENTS", 0)
    b.capture = [("CAPTURE_EVENT_TYPE", "Cuda"), ("CAPTURE_EVENT_TYPE", "OSRuntime"),
                 ("LINUX_PERF_OPTIONS:COLLECT_IP_BACKTRACE_SAMPLES", "false"),
                 ("PROCESS_0:COLLECT_UVM_GPU_PAGE_FAULTS", "true")]
    cov = coverage(build(b))
    assert cov.recorded == ["cuda_trace", "nvtx", "os_runtime", "context_switches"]
    states = {k.kind: k for k in cov.kinds}
    assert states["cpu_sampling"].state == "off"
    assert states["cpu_sampling"].evidence == ["LINUX_PERF_OPTIONS:COLLECT_IP_BACKTRACE_SAMPLES=false"]
    assert states["um_page_faults"].state == "empty"  # switched on, the table exists but holds no row
    assert states["os_runtime"].evidence == ["OSRT_API"]
    assert states["gpu_metrics"].state == "absent" and states["gpu_metrics"].options == "--gpu-metrics-devices=all"


def test_linux_perf_off_turns_sampling_and_switches_off(build):
    """USE_LINUX_PERF false (as in the nsys-ai exports): no CPU samples or context switches were collected, whatever
    LINUX_PERF_OPTIONS say; true leaves the kinds' own switches to decide."""
    b = ExportBuilder()
    b.gpu(0)
    b.launch(0, 1 * US, 5 * US, 10 * US, 1 * MS)
    b.capture = [("CAPTURE_EVENT_TYPE", "Cuda"), ("USE_LINUX_PERF", "false"),
                 ("LINUX_PERF_OPTIONS:COLLECT_CPU_CTXSW_TRACE", "true")]
    states = {k.kind: k for k in coverage(build(b)).kinds}
    assert (states["cpu_sampling"].state, states["cpu_sampling"].evidence) == ("off", ["USE_LINUX_PERF=false"])
    assert (states["context_switches"].state, states["context_switches"].evidence) == ("off", ["USE_LINUX_PERF=false"])
    b.capture = [("CAPTURE_EVENT_TYPE", "Cuda"), ("USE_LINUX_PERF", "true"),
                 ("LINUX_PERF_OPTIONS:COLLECT_CPU_CTXSW_TRACE", "true"),
                 ("LINUX_PERF_OPTIONS:COLLECT_IP_BACKTRACE_SAMPLES", "false")]
    states = {k.kind: k.state for k in coverage(build(b)).kinds}
    assert (states["cpu_sampling"], states["context_switches"]) == ("off", "empty")


def test_old_schema_without_options(build):
    b = ExportBuilder(schema="2021")
    b.launch(0, 1 * US, 5 * US, 10 * US, 1 * MS)
    cov = coverage(build(b))
    assert cov.recorded == ["cuda_trace"]
    assert {k.state for k in cov.kinds if k.kind != "cuda_trace"} == {"absent"}


def test_graph_nodes_and_mpi_domain_from_columns(build):
    b = ExportBuilder()
    b.gpu(0)
    b.kernel(0, 10 * US, 20 * US, graph_node=5)
    b.nvtx("MPI", 0, None, event_type=75)
    cov = coverage(build(b))
    assert {"cuda_graph_nodes", "mpi"} <= set(cov.recorded)
    ev = {k.kind: k.evidence for k in cov.kinds}
    assert ev["cuda_graph_nodes"] == ["CUPTI_ACTIVITY_KIND_KERNEL.graphNodeId"]
    assert ev["mpi"] == ["NVTX_EVENTS domain MPI"]


def test_lacking_sentence(build):
    b = ExportBuilder()
    b.gpu(0)
    b.launch(0, 1 * US, 5 * US, 10 * US, 1 * MS)
    b.capture = [("CAPTURE_EVENT_TYPE", "Cuda"), ("LINUX_PERF_OPTIONS:COLLECT_CPU_CTXSW_TRACE", "false")]
    cov = coverage(build(b))
    assert lacking(cov, ["cuda_trace"]) is None
    assert lacking(cov, ["os_runtime", "cuda_trace"]) is None  # one of them is enough
    assert lacking(cov, ["os_runtime", "context_switches"], what="what the CPU did") == (
        "This capture has no OS runtime calls or thread context switches (both switched off), so it cannot show "
        "what the CPU did; "
        "`nsys profile --trace=osrt --cpuctxsw=process-tree` records them.")
    assert lacking(cov, ["os_runtime", "context_switches", "cpu_sampling"]) == (
        "This capture has no OS runtime calls, thread context switches or CPU samples with call stacks (OS runtime "
        "calls and thread context switches switched off); "
        "`nsys profile --trace=osrt --cpuctxsw=process-tree --sample=process-tree` records them.")
    assert lacking(cov, ["cpu_sampling"], python=True) == (
        "This capture has no CPU samples with call stacks; "
        "`nsys profile --sample=process-tree --python-sampling=true` records them.")


def test_options_merge_trace_values():
    assert options_for(["os_runtime", "nvtx", "cuda_backtraces"]) == (
        "nsys profile --trace=osrt,nvtx,cuda --cudabacktrace=all --sample=process-tree")
    assert all(k.options for k in KINDS) and len(BY_ID) == len(KINDS)


def test_coverage_in_overview_info_and_workload(tmp_path):
    b = ExportBuilder()
    b.gpu(0)
    b.launch(0, 1 * US, 5 * US, 10 * US, 1 * MS)
    b.table("SCHED_EVENTS", 4)
    path = b.write(tmp_path / "x.sqlite")
    cache = tmp_path / "cache"
    info = json.loads(run_cli("info", path, "--json", cache=cache).stdout)
    assert info["coverage"]["recorded"] == ["cuda_trace", "context_switches"]
    ov = json.loads(run_cli("tool", "run", "overview", path, "--json", cache=cache).stdout)
    assert ov["coverage"] == info["coverage"]
    assert ov["workload"]["recorded"] == info["coverage"]["recorded"]
    text = run_cli("info", path, cache=cache).stdout
    assert "capture coverage" in text and "--trace=osrt" in text


def test_overview_tool_field(build):
    b = ExportBuilder()
    b.gpu(0)
    b.launch(0, 1 * US, 5 * US, 10 * US, 1 * MS)
    r = get_tool("overview")(build(b))
    assert r.coverage.recorded == ["cuda_trace"]


def test_every_kind_is_in_the_docs_table():
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[1] / "docs" / "input.md").read_text()
    table = doc[doc.index("## Capture coverage"):doc.index("## Read-only")]
    for kind in KINDS:
        assert f"| `{kind.id}` | {kind.name} |" in table, kind.id


@pytest.mark.parametrize("schema", ["2026", "2024"])
def test_graph_metric_memory_and_fault_kinds_on_planted_exports(tmp_path, schema, opened):
    """The kinds of issue 18's tables on the planted captures (testing/features.py): GPU metrics, memory usage, UM
    page faults, graphs traced per node or as whole graphs — each recorded from its own table or column."""
    from dashcam.testing import features

    def states(fn):
        return {k.kind: k.state for k in coverage(opened(fn(tmp_path / f"{fn.__name__}{schema}.sqlite",
                                                             schema))).kinds}

    assert states(features.busy_not_busy)["gpu_metrics"] == "recorded"
    assert states(features.memory_churn)["gpu_memory_usage"] == "recorded"
    assert states(features.managed_faults)["um_page_faults"] == "recorded"
    node = states(features.graph_decode)
    assert (node["cuda_graph_nodes"], node["cuda_graph_whole"]) == ("recorded", "off")  # MODE Node
    whole = states(features.graph_decode_whole)
    assert (whole["cuda_graph_nodes"], whole["cuda_graph_whole"]) == ("off", "recorded")
