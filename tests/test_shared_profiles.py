"""Every tool on every real export in ../shared/profiles, and the counts checked against plain SQL.

Tools are picked up from ``available_tools()``: a tool added later is tested here too.
"""
from __future__ import annotations

import csv
import json
import sqlite3
from collections import Counter
from pathlib import Path

import pytest

from dashcam.profile import Profile
from dashcam.tools import available_tools, get_tool

from .conftest import SHARED, SHARED_GPU, SHARED_NO_GPU, SHARED_SQLITE, sha256, shared_or_skip

# Values for parameters a tool requires (everything else keeps its default).
EXAMPLE_ARGS = {"sql": {"query": "SELECT device_id, count(*) FROM kernels GROUP BY 1"}}

CLOVERLEAF = "hpcgroup__pipit__perlmutter-cloverleaf-cuda.sqlite"
CLOVERLEAF_GPU_CSV = "hpcgroup__pipit__cloverleaf_gpu_trace.csv"
CLOVERLEAF_API_CSV = "hpcgroup__pipit__cloverleaf-cuda_api_trace.csv"


def tool_args(tool) -> dict:
    """Arguments to run ``tool`` with: its defaults plus EXAMPLE_ARGS for required parameters."""
    args = dict(EXAMPLE_ARGS.get(tool.name, {}))
    missing = [n for n, f in tool.params.model_fields.items() if f.is_required() and n not in args]
    if missing:
        pytest.fail(f"tool {tool.name!r} requires {missing}: add an example to EXAMPLE_ARGS "
                    "in tests/test_shared_profiles.py")
    return args


def plain(path: Path, sql: str, params: tuple = ()) -> list[tuple]:
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return con.execute(sql, params).fetchall()
    finally:
        con.close()


def tables_of(path: Path) -> dict[str, list[str]]:
    names = [r[0] for r in plain(path, "SELECT name FROM sqlite_master WHERE type='table'")]
    return {n: [r[1] for r in plain(path, f'PRAGMA table_info("{n}")')] for n in names}


@pytest.mark.parametrize("path", SHARED_GPU, ids=lambda p: p.name)
@pytest.mark.parametrize("tool_name", [t.name for t in available_tools()])
def test_every_tool_runs(opened, path, tool_name):
    tool = get_tool(tool_name)
    result = tool(opened(path), tool_args(tool))
    assert result.tool == tool_name
    result.model_dump_json()


@pytest.mark.parametrize("path", SHARED_GPU, ids=lambda p: p.name)
def test_overview_invariants_against_plain_sql(opened, path):
    before = sha256(path)
    r = get_tool("overview")(opened(path))
    tables = tables_of(path)
    activity = [t for t in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET")
                if t in tables]
    union = " UNION ALL ".join(f'SELECT start, "end", deviceId FROM {t}' for t in activity)
    lo, hi = plain(path, f'SELECT min(start), max("end") FROM ({union})')[0]
    assert r.window_ns == hi - lo
    devices = [d for (d,) in plain(path, f"SELECT DISTINCT deviceId FROM ({union}) ORDER BY 1")]
    assert [d.device_id for d in r.devices] == devices
    for d in r.devices:
        assert 0 <= d.kernel_busy_pct <= d.busy_pct <= 100
        assert 0 <= d.kernel_busy_ns <= d.busy_ns <= r.window_ns
        n = (plain(path, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE deviceId = ?", (d.device_id,))[0][0]
             if "CUPTI_ACTIVITY_KIND_KERNEL" in tables else 0)
        assert d.kernel_count == n
    runtime = tables.get("CUPTI_ACTIVITY_KIND_RUNTIME")
    if runtime is None:
        api = 0
    elif "eventClass" in runtime:
        api = plain(path, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE eventClass IS NOT 67")[0][0]
    else:
        api = plain(path, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME")[0][0]
    assert r.api_calls == api
    assert sha256(path) == before


def _csv_rows(name: str) -> list[dict]:
    p = SHARED / name
    if not p.exists():
        pytest.skip(f"{p} not present")
    with open(p, newline="") as f:
        return list(csv.DictReader(f))


def test_cloverleaf_gpu_events_match_independent_reader(opened):
    p = opened(shared_or_skip(CLOVERLEAF))
    rows = _csv_rows(CLOVERLEAF_GPU_CSV)
    assert len(rows) == 3182  # enter + leave per kernel and per memcpy
    kernels, memcpys = p.count("kernels"), p.count("memcpy")
    assert (kernels + memcpys) * 2 == len(rows)
    enters = Counter(r["type"] for r in rows if r["Event Type"] == "Enter")
    assert enters["kernel"] == kernels == 1312
    kinds = dict(p.rows("SELECT kind, count(*) FROM memcpy GROUP BY 1"))
    assert kinds == {"HtoD": enters["CUDA_MEMCPY_KIND_HTOD"], "DtoH": enters["CUDA_MEMCPY_KIND_DTOH"]}
    r = get_tool("overview")(p)
    assert sum(d.kernel_count + d.memcpy_count for d in r.devices) * 2 == len(rows)


def test_cloverleaf_api_calls_match_independent_reader(opened):
    p = opened(shared_or_skip(CLOVERLEAF))
    rows = _csv_rows(CLOVERLEAF_API_CSV)
    assert len(rows) == 6096
    assert p.count("api") * 2 == len(rows)
    assert get_tool("overview")(p).api_calls * 2 == len(rows)
    # the same calls by (raw) name
    csv_names = Counter(r["Name"] for r in rows if r["Event Type"] == "Enter")
    assert dict(p.rows("SELECT raw_name, count(*) FROM api GROUP BY 1")) == dict(csv_names)


BUSY_TOOLS = ["memcpy", "streams", "launch_latency", "gpu_gaps"]


@pytest.mark.skipif(not SHARED_SQLITE, reason="../shared/profiles not present")
@pytest.mark.parametrize("tool", BUSY_TOOLS)
@pytest.mark.parametrize("path", SHARED_GPU, ids=lambda p: p.name)
def test_kernel_busy_is_the_same_in_every_tool(path, tool):
    """Every tool that reports kernel busy reports overview's, on the whole window and a sub-window."""
    p = Profile.open(path, progress=False)
    length_ms = p.window().length_ns / 1e6
    for window in ({}, {"start_ms": length_ms / 3, "end_ms": length_ms / 2}):
        r, o = get_tool(tool)(p, window), get_tool("overview")(p, window)
        field = "kernel_busy_ns" if hasattr(r.devices[0], "kernel_busy_ns") else "kernel_busy_pct"
        assert [(d.device_id, getattr(d, field)) for d in r.devices] == [
            (d.device_id, getattr(d, field)) for d in o.devices]


@pytest.mark.skipif(not SHARED_SQLITE, reason="../shared/profiles not present")
@pytest.mark.parametrize("path", SHARED_GPU, ids=lambda p: p.name)
def test_gap_api_time_covers_the_causes_it_names(opened, path):
    """Per device, API time by name over all gaps: at least the CPU-side CUDA time (calls are counted one by
    one, so nested calls can only add), and at least what any of the largest gaps names."""
    p = opened(path)
    length_ms = p.window().length_ns / 1e6
    for window in ({}, {"start_ms": length_ms / 3, "end_ms": length_ms / 2}):
        for d in get_tool("gpu_gaps")(p, {**window, "limit": 20}).devices:
            assert sum(d.cuda_api_calls.values()) >= d.causes["cuda_api"] + d.causes["sync_wait"]
            for g in d.largest_gaps:
                for name, ns in g.cuda_api_calls.items():
                    assert d.cuda_api_calls[name] >= ns


@pytest.mark.skipif(not SHARED_NO_GPU, reason="no shared export without GPU activity here")
@pytest.mark.parametrize("path", SHARED_NO_GPU, ids=lambda p: p.name)
def test_a_capture_without_gpu_activity_says_so(path, tmp_path):
    """A capture without GPU activity: window tools exit 8 with one line; the summary and ask say what the capture
    holds and how to record the GPU side, never "enable tracing" advice for what was traced (JACC.jl traced CUDA;
    its script failed before touching the GPU, and its error line is said)."""
    from .conftest import run_cli

    r = run_cli("tool", "run", "gpu_gaps", str(path), cache=tmp_path / "c")
    assert r.returncode == 8 and len(r.stderr.strip().splitlines()) == 1 and "no GPU activity" in r.stderr
    s = json.loads(run_cli("summary", str(path), "--format", "json", cache=tmp_path / "c").stdout)
    assert s["verdict"] == "no_gpu_activity" and s["grounded"]
    f = s["findings"][0]
    wl = json.loads(run_cli("tool", "run", "workload", str(path), "--json", cache=tmp_path / "c").stdout)
    if wl["cuda_api_calls"] == 0 and wl["cuda_trace_on"]:  # traced, never called (JACC.jl: its script failed)
        assert f["kind"] == "cuda_unused" and "-t cuda" not in s["paragraph"]
        assert wl["program_error"] is None or wl["program_error"] in s["paragraph"]
    elif wl["cuda_api_calls"] == 0:  # nothing CUDA was traced: say so and how to trace it
        assert f["kind"] == "cpu_only_capture" and "-t cuda" in s["paragraph"]
    else:  # CUDA was traced: the GPU records were lost, not "turn tracing on"
        assert f["kind"] in ("gpu_records_missing", "no_cuda_work") and "tracing on" not in s["paragraph"]
    a = json.loads(run_cli("ask", "why is the GPU idle?", str(path), "--json", "--offline",
                           cache=tmp_path / "c").stdout)
    assert f["sentence"] in a["answer"] and a["grounded"]
