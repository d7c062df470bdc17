"""The diagnosis fits the program: one planted capture per pattern an expert found misread (testing/workloads.py
states each one's facts), asserting the verdict, the named cause, the program's family and the advice a GPU
engineer would give — and that the wrong advice is absent. Then: ask's health answer and `dashcam summary`
name the same verdict and GPU on every planted scenario and every shared export (one findings engine)."""
from __future__ import annotations

import re

import pytest

from dashcam.agent.planner import answer_offline
from dashcam.findings import diagnose
from dashcam.profile import Profile
from dashcam.reports.summary import summarize
from dashcam.testing.scenarios import SCENARIOS
from dashcam.testing.scenarios import build as build_scenario

from .conftest import MS, SHARED_SQLITE

TORCH = re.compile(r"pin_memory|non_blocking|torch|DataLoader|\.item\(\)", re.I)


def lead(p: Profile):
    d = diagnose(p)
    return d, d.lead


def test_openacc_copies_get_data_regions_not_pytorch(planted):
    d, f = lead(planted("openacc_copies"))
    assert (d.verdict, d.workload, f.gpus) == ("transfer_bound", "openacc", [0])
    assert f.figures["copy_busy_pct"] == 60.404 and f.figures["kernel_busy_pct"] == 30.303
    assert "data region (`!$acc data`" in f.advice and not TORCH.search(d.paragraph)


def test_mpi_rank_names_mpi_not_a_dataloader(planted):
    d, f = lead(planted("mpi_halo"))
    assert (d.verdict, d.workload, f.cause) == ("idle", "cuda_cpp", "cpu_work")
    # 19 MPI_Sendrecv ranges of 2.5 ms inside the 19 gaps: 47.5 ms of the 56.81 ms of cpu_work
    gaps = d.findings[0].evidence[0].result["devices"][0]
    assert gaps["cpu_work_kinds"] == {"mpi": 19 * 2500_000} and gaps["causes"]["cpu_work"] == 56_810_000
    assert "47.5 ms of it inside MPI calls (`MPI_Sendrecv`)" in d.paragraph
    assert "MPI_Isend" in f.advice and not TORCH.search(d.paragraph) and "Python" not in d.paragraph


def test_one_long_block_is_under_parallelized_not_small_kernels(planted):
    d, f = lead(planted("one_block"))
    assert (d.verdict, f.figures["top_kernel"], f.figures["avg_blocks"], f.figures["sm_count"]) == (
        "under_parallelized", "naive_sum_kernel", 1.0, 132)
    assert "1x1x1 blocks of 32x1x1 threads" in d.paragraph and "launch enough blocks" in d.paragraph
    assert not re.search(r"\bfuse\b|small kernels|CUDA graph", d.paragraph, re.I)
    assert [x.kind for x in d.findings if x.kind == "small_kernels"] == []


def test_jit_cold_start_is_startup_not_launch_bound(planted):
    d, f = lead(planted("jit_cold_start"))
    assert (d.verdict, d.workload) == ("startup", "python")
    assert f.figures["jit_ns"] == 16 * 25 * MS  # 16 NVRTC ranges of 25 ms inside the window (the first starts it)
    assert "nvrtc::compileProgram" in d.paragraph and "steady state" in d.paragraph
    assert not re.search(r"launch-bound|\bfuse\b|CUDA graph", d.paragraph, re.I)


def test_unified_memory_names_the_migrations(planted):
    d, f = lead(planted("unified_memory"))
    assert (d.verdict, d.workload, f.figures["migration_ns"], f.figures["kernel_idle_ns"]) == (
        "um_migrations", "cuda_cpp", 60 * MS, 69 * MS)
    assert (f.figures["migration_count"], f.figures["migration_bytes"]) == (60, 60 * (64 << 20))
    assert "cudaMemPrefetchAsync" in f.advice
    assert not re.search(r"tracing|pinned|transfer-bound", d.paragraph, re.I)
    # ask about idle time on it: the memcpy cause is named as migrations, with the same remedy
    a = answer_offline("Why is the GPU idle?", planted("unified_memory"))
    assert "unified-memory migrations fill 60 ms of its gaps" in a.answer and a.answer.endswith(f.advice)


def test_pinned_async_copies_get_no_pinned_or_async_advice(planted):
    d, f = lead(planted("pinned_async_copies"))
    assert (d.verdict, f.figures["copy_busy_pct"]) == ("transfer_bound", 70.707)
    # pinned and asynchronous are said as done, never advised; on the kernels' stream: a stream of their own
    assert "all 10 host copies on GPU 0 are already pinned" in d.paragraph
    assert "give them a stream of their own" in d.paragraph and "only moving less data" in d.paragraph
    assert not re.search(r"cudaMallocHost|cudaMemcpyAsync|copy from pinned|make the copies asynchronous", d.paragraph,
                         re.I)


def test_single_gpu_tail_is_its_own_copies_not_balancing(planted):
    d, f = lead(planted("tail_copies"))
    assert (d.verdict, f.cause, f.figures["tail_ns"], f.figures["tail_memory_ns"]) == ("idle", "tail", 30 * MS, 30 * MS)
    assert "tail_other_gpus_kernel_ns" not in f.figures  # one GPU: no other GPU to wait for
    assert "filled by its own copies and memsets (30 ms)" in d.paragraph
    assert not re.search(r"balance|other GPU", d.paragraph, re.I)


def test_one_kernel_is_too_little_work_not_healthy(planted):
    d, f = lead(planted("one_kernel"))
    assert (d.verdict, f.figures["kernel_count"], f.figures["window_ns"]) == ("too_little_work", 1, 14 * MS)
    assert "healthy" not in d.paragraph.lower() and "capture more of the run" in d.paragraph.lower()
    # 100 % kernel-busy: what the capture holds is GPU-bound, so the kernel's remedy comes first, more capture second
    assert f.sentence.startswith("Too little GPU work captured for a verdict on the run: 1 kernel in a 14 ms window, "
                                 "GPU 0 100.0 % kernel-busy; what it holds is GPU-bound: the kernels are the lever")
    assert f.advice.index("tensor cores") < f.advice.index("Capture more of the run")


def test_pytorch_evidence_allows_pytorch_advice(planted):
    d, f = lead(planted("torch_dataloader"))
    assert (d.verdict, d.workload, f.cause) == ("idle", "pytorch", "cpu_work")
    assert "inside data-loading ranges (`DataLoader.__next__`)" in d.paragraph
    assert "DataLoader workers" in f.advice and "pin_memory=True" in f.advice


def test_cpu_only_capture_says_there_is_no_cuda_trace(planted):
    d, f = lead(planted("cpu_only"))
    assert (d.verdict, f.kind, d.workload) == ("no_gpu_activity", "cpu_only_capture", "julia")
    assert "only CPU samples" in d.paragraph and "-t cuda" in d.paragraph


def test_api_traced_without_gpu_records_is_not_told_to_turn_tracing_on(planted):
    d, f = lead(planted("no_kernels"))
    assert (d.verdict, f.kind, f.figures["launch_calls"]) == ("no_gpu_activity", "gpu_records_missing", 50)
    assert "the trace was on" in d.paragraph and "with CUDA tracing" not in d.paragraph


def test_idle_title_says_mostly_only_for_half_the_idle_time(build):
    """From T = 1 ms, four 1 ms kernels with 10 ms of gaps between them: 3.99 ms of cpu_work before K2's launch
    call, 2.995 ms of dependency after K3's, 2.995 ms in cudaDeviceSynchronize before K4's, 20 us inside the three
    launch calls. cpu_work leads with 39.9 % of the idle time: the largest cause, not "mostly"."""
    from dashcam.testing.builder import ExportBuilder
    from dashcam.tools import get_tool

    t, us = 1 * MS, MS // 1000
    b = ExportBuilder()
    b.gpu(0)
    b.launch(0, t - 10 * us, t - 5 * us, t, t + MS)
    b.launch(0, t + 4990 * us, t + 5 * MS, t + 5 * MS, t + 6 * MS)
    b.launch(0, t + 6 * MS, t + 6005 * us, t + 9 * MS, t + 10 * MS)
    b.api("cudaDeviceSynchronize", t + 10 * MS, t + 12_995 * us)
    b.launch(0, t + 12_995 * us, t + 13 * MS, t + 13 * MS, t + 14 * MS)
    p = build(b)
    dev = get_tool("gpu_gaps")(p).devices[0]
    assert (dev.kernel_idle_ns, dev.causes["cpu_work"], dev.cause_pct["cpu_work"]) == (10 * MS, 3990 * us, 39.9)
    idle = next(f for f in diagnose(p).findings if f.kind == "idle")
    assert idle.title == "GPU 0 kernel-idle 71.4 % of the window, the largest cause `cpu_work`"


# -- one engine: ask's health answer and the summary agree --------------------------------------------

def _agree(p: Profile) -> None:
    """The same paragraph, so the same verdict, GPU and first remedy; the lead's GPU is the one it names first."""
    s = summarize(p)
    for q in ("Is this profile healthy?", "What should I fix first?", "Why is my training slow?"):
        a = answer_offline(q, p)
        assert a.answer == s.paragraph and a.grounded, (q, a.answer, s.paragraph)
    lead = next((f for f in s.findings if f.kind == s.verdict), None)
    first = re.search(r"\bGPUs? (\d+)", s.paragraph)
    if lead is not None and lead.gpus and first:
        assert int(first.group(1)) in lead.gpus


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_ask_and_summary_agree_on_planted(name, tmp_path):
    _agree(Profile.open(build_scenario(name, tmp_path / f"{name}.sqlite"), progress=False))


@pytest.mark.skipif(not SHARED_SQLITE, reason="../shared/profiles not present")
@pytest.mark.parametrize("path", SHARED_SQLITE, ids=lambda p: p.name)
def test_ask_and_summary_agree_on_shared(path):
    _agree(Profile.open(path, progress=False))
