"""The --json field names the issue fixes as a contract, read through the real CLI."""
import json

import pytest

from dashcam.testing.scenarios import demo

from .conftest import run_cli


@pytest.fixture(scope="module")
def example(tmp_path_factory):
    return demo(tmp_path_factory.mktemp("ex") / "demo.sqlite")


def run_json(profile, *args, env_dir):
    p = run_cli("tool", "run", *args[:1], profile, *args[1:], "--json", cache=env_dir)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def test_contract_fields(example, tmp_path):
    o = run_json(example, "overview", env_dir=tmp_path)
    assert {"window_ns", "nsys_version", "schema_version"} <= o.keys()
    assert {"device_id", "kernel_count", "kernel_busy_pct", "busy_pct"} <= o["devices"][0].keys()
    k = run_json(example, "top_kernels", env_dir=tmp_path)
    assert {"name", "count", "total_ns", "pct"} <= k["kernels"][0].keys()
    g = run_json(example, "gpu_gaps", env_dir=tmp_path)
    d = g["devices"][0]
    assert {"device_id", "kernel_busy_pct", "kernel_idle_ns", "causes", "dominant_cause", "largest_gaps"} <= d.keys()
    assert {"start_ns", "end_ns", "duration_ns", "causes", "dominant_cause"} <= d["largest_gaps"][0].keys()
    assert all(isinstance(v, int) for v in d["causes"].values())
    m = run_json(example, "memcpy", env_dir=tmp_path)
    assert {"kind", "count", "bytes", "total_ns", "gbps"} <= m["by_kind"][0].keys()
    assert {b["kind"] for b in m["by_kind"]} <= {"HtoD", "DtoH", "DtoD", "HtoH", "PtoP"}
    ll = run_json(example, "launch_latency", env_dir=tmp_path)
    assert {"device_id", "launches", "queue_p50_ns", "queue_p95_ns"} <= ll["devices"][0].keys()
    s = run_json(example, "sync", env_dir=tmp_path)
    assert {"name", "count", "total_ns", "pct_of_window"} <= s["calls"][0].keys()


def test_window_and_gpu_options(example, tmp_path):
    o = run_json(example, "overview", "--gpu", "1", "--start", "10", "--end", "30", env_dir=tmp_path)
    assert o["window_ns"] == 20_000_000
    assert [d["device_id"] for d in o["devices"]] == [1]


def test_tool_list_json_has_a_schema_per_tool(tmp_path):
    p = run_cli("tool", "list", "--json", cache=tmp_path / "cache")
    assert p.returncode == 0
    tools = json.loads(p.stdout)
    names = [t["function"]["name"] for t in tools]
    from dashcam.tools import TOOL_NAMES

    assert names == TOOL_NAMES and names[:2] == ["overview", "workload"] and "sql" in names
    assert all(t["function"]["parameters"]["type"] == "object" for t in tools)
