"""cuda_graphs, and graphs in launch_latency and gpu_gaps, on planted decode loops (testing/features.py
graph_decode) in two export layouts:

- "2026": KERNEL with graphNodeId and graphId (the layout of the real nsys 2026.2.1 / schema 3.25.0 exports,
  and of the 2026.4 / 3.28.1 schema reference), CUDA_GRAPH_EVENTS + CUDA_GRAPH_NODE_EVENTS,
  CUPTI_ACTIVITY_KIND_GRAPH_TRACE;
- "2024": KERNEL with graphNodeId but no graphId (nsys 2024.5 / schema 3.13.2 as in the real export; the
  2024.6.2 / 3.16.1 schema has no graphId either), the same graph tables;
- "2022": schema 2.9.1 (the real 2022.2.1 export, lazy=false): graph creation in CUDA_GRAPH_EVENTS with
  graphNodeId, kernels with graphNodeId.
Every figure is the docstring's of graph_decode.
"""
import pytest

from dashcam.profile import Profile
from dashcam.testing.builder import ExportBuilder
from dashcam.testing.features import graph_decode, graph_decode_whole
from dashcam.tools import get_tool

from .conftest import MS, US

graphs = get_tool("cuda_graphs")


def _open(tmp_path, fn, schema):
    return Profile.open(fn(tmp_path / f"{fn.__name__}_{schema}.sqlite", schema), progress=False)


@pytest.mark.parametrize("schema", ["2026", "2024", "2022"])
def test_node_traced_graphs(tmp_path, schema):
    p = _open(tmp_path, graph_decode, schema)
    r = graphs(p)
    assert (r.used, r.trace_mode, r.graph_launch_calls) == (True, "node", 5)
    assert r.capture_mode == ("node" if schema != "2022" else None)  # 2.x exports have no META_DATA_CAPTURE
    assert (r.graphs_created, r.graph_nodes_created) == ((0, 50) if schema == "2022" else (1, 50))
    assert r.window.length_ns == 19_108 * US
    d = r.devices[0]
    assert (d.kernels, d.graph_kernels, d.kernel_time_ns, d.graph_kernel_time_ns) == (750, 250, 11 * MS, 10 * MS)
    assert d.graph_kernel_pct == 90.909
    assert (d.graph_launches, d.kernels_per_graph_launch, d.graph_launch_api_p50_ns) == (5, 50.0, 100 * US)
    assert d.graphs == (1 if schema == "2026" else None)  # graph ids: KERNEL.graphId exists from 2026
    assert (d.whole_graph_executions, d.whole_graph_ns, d.whole_graph_outside_kernels_ns) == (0, 0, 0)
    e = d.eager
    assert (e.kernels, e.launch_calls, e.median_kernel_ns, e.api_p50_ns, e.queue_p50_ns) == (500, 500, 2000, 8000, 1000)
    assert e.launch_call_pct == 20.892 and e.launch_bound is True
    assert (d.candidate, r.would_help, r.candidates) == (True, True, [0])
    assert r.step_method == "nvtx" and len(r.steps) == 5
    assert all((s.kernel_time_ns, s.graph_kernel_time_ns, s.graph_kernel_pct) == (2200 * US, 2000 * US, 90.909)
               for s in r.steps)
    if schema == "2026":
        assert [(g.graph_id, g.launches, g.kernels, g.time_ns, g.mean_launch_span_ns) for g in r.graphs] == \
            [(3, 5, 250, 10 * MS, 2_098_000.0)]
    else:
        assert r.graphs == [] and any("graphId exists from nsys 2026" in n for n in r.notes)
    assert r.hidden is None


@pytest.mark.parametrize("schema", ["2026", "2024"])
def test_whole_graph_trace_is_detected_and_explained(tmp_path, schema):
    p = _open(tmp_path, graph_decode_whole, schema)
    r = graphs(p)
    assert (r.used, r.trace_mode, r.capture_mode) == (True, "graph", "graph")
    assert r.window.length_ns == 19_108 * US  # the graph executions are GPU activity: the same window
    d = r.devices[0]
    assert (d.kernels, d.graph_kernels, d.kernel_time_ns) == (500, 0, 1 * MS)
    assert (d.whole_graph_executions, d.whole_graph_ns, d.whole_graph_pct) == (5, 10_490 * US, 54.898)
    assert d.whole_graph_outside_kernels_ns == 10_490 * US
    assert (d.graph_launches, d.graphs) == (5, 1)  # GRAPH_TRACE.graphId names the graph in both layouts
    assert r.steps[0].whole_graph_ns == 2098 * US
    assert "10.49 ms" in r.hidden and "--cuda-graph-trace=node" in r.hidden
    o = get_tool("overview")(p).devices[0]
    assert o.kernel_busy_pct == 5.233  # 1 ms of 19.108 ms: kernel busy leaves the graph executions out


def test_launch_latency_charges_a_graph_launch_once(tmp_path):
    d = get_tool("launch_latency")(_open(tmp_path, graph_decode, "2026")).devices[0]
    assert (d.kernels, d.launches, d.launch_calls, d.graph_kernels) == (750, 750, 505, 250)
    assert (d.api_p50_ns, d.api_max_ns, d.queue_p50_ns, d.queue_max_ns) == (8000, 100 * US, 1000, 1000)
    assert d.launches_per_s == 26_428.721  # 505 calls / 19.108 ms


def test_a_node_waiting_for_the_node_before_it_is_not_launch_overhead(tmp_path):
    """Per step the 49 gaps of 2 us between graph nodes are device-side (dependency), the two that fall inside
    the 100 us cudaGraphLaunch call too. launch_overhead: 99 eager gaps x 7 us, the first node's 10 us and the
    4 step starts' 8 us launch calls."""
    g = get_tool("gpu_gaps")(_open(tmp_path, graph_decode, "2026")).devices[0]
    assert g.causes["launch_overhead"] == 5 * (99 * 7 + 10) * US + 4 * 8 * US == 3547 * US
    assert g.causes["dependency"] == (5 * 49 * 2 + 5 * 99 * 1 + 4 * 1) * US == 989 * US
    # A window [2.051, 2.2] ms cuts the node gap [2.050, 2.052) ms inside the launch call (recomputed, not read
    # from the stored table) and holds three more node gaps: 1 + 3 x 2 us, all dependency.
    w = get_tool("gpu_gaps")(Profile.open(tmp_path / "graph_decode_2026.sqlite", progress=False),
                             {"start_ms": 1.051, "end_ms": 1.2}).devices[0]
    assert (w.kernel_idle_ns, w.causes["dependency"], w.causes["launch_overhead"], w.gap_count) == (
        7 * US, 7 * US, 0, 4)


def test_no_graphs(build):
    b = ExportBuilder()
    for i in range(3):
        b.launch(0, i * 10 * US, i * 10 * US + 5 * US, i * 10 * US + 6 * US, i * 10 * US + 8 * US)
    r = graphs(build(b))
    assert (r.used, r.trace_mode, r.graph_launch_calls, r.would_help) == (False, "none", 0, False)
    d = r.devices[0]
    assert (d.graph_kernels, d.graph_launches, d.graphs, d.eager.launch_calls) == (0, 0, None, 3)
    assert r.steps == [] and r.hidden is None


def test_graphs_fit_only_where_eager_launches_are_launch_bound(tmp_path):
    from dashcam.tools.cuda_graphs import graphs_fit

    r = graphs(_open(tmp_path, graph_decode, "2026"))
    assert graphs_fit(r) is True and graphs_fit(r, 0) is True  # 91 % in graphs, but the eager part is launch-bound
    r.devices[0].candidate = False
    assert graphs_fit(r) is False  # already 91 % in graphs and the rest not launch-bound: nothing to capture
    r.devices[0].graph_kernel_time_ns = 0
    assert graphs_fit(r) is True
