"""The findings engine on CUDA graphs and GPU metrics: whole-graph tracing named as a capture finding, "busy but
the SMs are empty" (gpu_underused), and one rule for suggesting CUDA graphs (cuda_graphs.graphs_fit) in every
remedy. Planted captures: testing/features.py (2026 layout) and small ones built here."""
import re

from dashcam.findings.engine import diagnose
from dashcam.profile import Profile
from dashcam.testing.builder import ExportBuilder
from dashcam.testing.features import busy_not_busy, graph_decode, graph_decode_whole
from dashcam.tools import get_tool

from .conftest import MS, US

GRAPH_ADVICE = re.compile(r"CUDA graph|reduce-overhead|cudaGraphLaunch|torch\.cuda\.graphs", re.I)


def _diag(path):
    return diagnose(Profile.open(path, progress=False))


def test_whole_graph_trace_leads_and_says_how_to_capture(tmp_path):
    d = _diag(graph_decode_whole(tmp_path / "w.sqlite"))
    assert d.verdict == "whole_graph_trace"
    f = d.lead
    assert (f.severity, f.gpus, f.figures["hidden_ns"], f.figures["graph_launches"]) == ("high", [0], 10_490 * US, 5)
    assert "10.49 ms" in f.sentence and "--cuda-graph-trace=node" in f.advice
    assert d.paragraph.startswith("CUDA graphs traced as whole graphs")


def test_graphs_partly_used_the_eager_rest_launch_bound(tmp_path):
    d = _diag(graph_decode(tmp_path / "n.sqlite"))
    assert d.verdict == "launch_bound" and "whole_graph_trace" not in [f.kind for f in d.findings]
    assert "eager launches between the graph replays" in d.lead.advice


def test_busy_but_the_sms_are_mostly_empty(tmp_path):
    d = _diag(busy_not_busy(tmp_path / "b.sqlite"))
    assert d.verdict == "gpu_underused"
    f = d.lead
    assert (f.severity, f.cause, f.figures["kernel_busy_pct"], f.figures["sm_active_in_kernels_pct"]) == \
        ("medium", "sm", 97.561, 15.0)
    assert "`spmv_csr_kernel`" in f.advice and "ncu" in f.advice and "memory-bound" in f.advice
    assert "97.6 %" in d.paragraph and "15.0 %" in d.paragraph


def test_gemm_heavy_work_with_idle_tensor_cores(build):
    b = ExportBuilder("2026")
    b.gpu(0, "NVIDIA H100 80GB HBM3", 132)
    for i in range(20):
        b.launch(0, i * 10 * US, i * 10 * US + 5 * US, 1 * MS + i * MS, 2 * MS + i * MS,
                 name="void sgemm_128x128_nn_kernel(float *)", grid=(528, 1, 1))
    samples = range(1 * MS + 100 * US, 21 * MS + 1, 100 * US)
    b.gpu_metric(0, "SM Active [Throughput %]", [(t, 90.0) for t in samples])
    b.gpu_metric(0, "Tensor Active [Throughput %]", [(t, 5.0) for t in samples])
    d = diagnose(build(b))
    f = next(x for x in d.findings if x.kind == "gpu_underused")
    assert (f.cause, f.figures["tensor_active_in_kernels_pct"], f.figures["gemm_pct"]) == ("tensor", 5.0, 100.0)
    assert "tensor cores" in f.advice.lower()


def test_no_graph_remedy_for_work_already_in_graphs(build):
    """Short small-grid kernels, all replayed from CUDA graphs (100 launches of 10 nodes): the small-kernels remedy
    says fuse, never "capture them in a CUDA graph" — they are in one."""
    b = ExportBuilder("2026")
    b.gpu(0, "NVIDIA H100 80GB HBM3", 132)
    t = 0
    for _ in range(100):
        nodes = [(t + 10 * US + j * 12 * US, t + 20 * US + j * 12 * US, f"tiny_{j % 2}") for j in range(10)]
        b.graph_launch(0, t, t + 5 * US, nodes, graph_id=1, grid=(8, 1, 1))
        t += 200 * US
    d = diagnose(build(b))
    small = next(x for x in d.findings if x.kind == "small_kernels")
    assert small.advice and not GRAPH_ADVICE.search(small.advice) and "Fuse" in small.advice
    assert not any(GRAPH_ADVICE.search(x.advice or "") and "--cuda-graph-trace" not in (x.advice or "")
                   for x in d.findings)


def test_small_kernels_measured_sm_activity(build):
    b = ExportBuilder("2026")
    b.gpu(0, "NVIDIA H100 80GB HBM3", 132)
    b.launch(0, 0, 5 * US, 1 * MS, 2 * MS, name="tiny_grid", grid=(4, 1, 1))  # small grid: SMs 3 % active
    b.launch(0, 0, 5 * US, 2 * MS, 3 * MS, name="big_grid", grid=(528, 1, 1))  # full grid: 80 %
    b.gpu_metric(0, "SM Active [Throughput %]",
                 [(t, 3.0 if t <= 2 * MS else 80.0) for t in range(1 * MS + 100 * US, 3 * MS + 1, 100 * US)])
    r = get_tool("small_kernels")(build(b))
    assert r.devices[0].sm_active_pct == 3.0
    b2 = ExportBuilder("2026")
    b2.gpu(0, "NVIDIA H100 80GB HBM3", 132)
    b2.launch(0, 0, 5 * US, 1 * MS, 2 * MS, name="tiny_grid", grid=(4, 1, 1))
    assert "sm_active_pct" not in get_tool("small_kernels")(build(b2)).model_dump()["devices"][0]
