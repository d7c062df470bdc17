"""The diagnosis speaks the program's own model, fits its GPU, reads SM counts from every schema, and reads the
capture span before it says "capture more" (testing/programming_models_programs.py states each program's facts)."""
from __future__ import annotations

import re

import pytest

from dashcam.evidence import ToolRuns
from dashcam.findings import diagnose
from dashcam.testing.builder import ExportBuilder
from dashcam.tools.workload import classify

from .conftest import MS, US

ACC_WORDS = re.compile(r"\bacc\b|!\$acc|gang|num_gangs|`async`", re.I)
STREAMS = re.compile(r"cudaMemcpyAsync|streams?\b|cudaMallocHost|pinned", re.I)
PYTHON = re.compile(r"python|\.item\(\)|py-spy|DataLoader|torch\.", re.I)
CAPTURE_MORE = re.compile(r"capture more|--duration|longer window|capture a window of the loop|capture the loop",
                          re.I)


def texts(d) -> str:
    """Everything the diagnosis says: the paragraph, every finding's sentence and remedy, the notes."""
    return " ".join([d.paragraph or "", *(f.sentence or "" for f in d.findings),
                     *(f.advice or "" for f in d.findings), *d.notes])


def test_openmp_offload_gets_openmp_words_not_openacc(planted):
    p = planted("omp_offload_c")
    wl = ToolRuns(p).get("workload")
    assert {(s.points_to, s.source, s.value) for s in wl.evidence} == {
        ("openacc", "table", "CUPTI_ACTIVITY_KIND_OPENACC_LAUNCH"),
        ("openmp_offload", "kernel", "nvkernel_main_F1L12_1"), ("openmp_offload", "library", "libnvomp.so")}
    d = diagnose(p)
    f = d.lead
    assert (d.verdict, d.workload, f.figures["gpu"]) == ("under_parallelized", "openmp_offload", 0)
    assert "16x1x1 blocks of 128x1x1 threads" in f.sentence and "108 SMs" in f.sentence
    assert "`teams distribute parallel for`" in f.advice and "`num_teams`" in f.advice
    idle = next(x for x in d.findings if x.kind == "idle")
    assert "`nowait`" in idle.advice and "target regions" in idle.advice
    assert not ACC_WORDS.search(texts(d))


def test_stdpar_gets_parallel_algorithm_words_not_streams(planted):
    p = planted("stdpar_cxx")
    wl = ToolRuns(p).get("workload")
    assert (wl.family, wl.language) == ("stdpar", "c++")
    assert {(s.source, s.value) for s in wl.evidence if s.points_to == "stdpar"} >= {("nvtx_domain", "STDPAR")}
    d = diagnose(p)
    f = d.lead
    assert (d.verdict, f.cause, f.figures["kernel_idle_ns"]) == ("idle", "cpu_work", 57 * MS)
    assert "`std::execution::par_unseq`" in f.advice
    assert not STREAMS.search(texts(d))


def test_stdpar_sync_waits_get_algorithm_words_not_cuda_events(planted):
    d = diagnose(planted("stdpar_sync"))
    f = d.lead
    assert (d.verdict, d.workload, f.cause, f.figures["kernel_idle_ns"]) == ("idle", "stdpar", "sync_wait", 57 * MS)
    assert "`std::transform_reduce`" in f.advice
    assert not re.search(r"CUDA event|cudaMemcpyAsync|\bstreams?\b|pinned", f.advice + d.paragraph, re.I)


def test_thrust_kernels_alone_are_not_stdpar():
    """thrust/cub kernels in a plain nvcc program (no STDPAR domain) corroborate nothing: CUDA C/C++."""
    facts = {"process": [("./sort_bench", 1)], "thread": [], "command": None, "nvtx_domain": [], "nvtx": [],
             "api": [("cudaLaunchKernel", 40)], "table": [], "library": [],
             "kernel": [("_kernel_agent", "void thrust::cuda_cub::core::_kernel_agent<int>(int)", 40)]}
    assert classify(facts)["family"] == "cuda_cpp"
    facts["nvtx_domain"] = [("STDPAR", 1)]
    assert classify(facts)["family"] == "stdpar"


def test_libnvomp_corroborates_openmp_offload_never_alone():
    """libnvomp.so is NVHPC's OpenMP runtime for host threads too (a CUDA C + MPI code built with nvc++ -mp): alone
    it says nothing; beside `nvkernel_` kernels it outweighs the OpenACC table NVHPC also writes."""
    facts = {"process": [("./a.out", 1)], "thread": [], "command": None, "nvtx_domain": [], "nvtx": [],
             "api": [("cudaLaunchKernel", 1)], "kernel": [("saxpy", "saxpy(double *, int)", 1)],
             "table": [], "library": [("libnvomp.so", 1)]}
    assert classify(facts)["family"] == "cuda_cpp"
    facts["table"] = [("CUPTI_ACTIVITY_KIND_OPENACC_LAUNCH", 1)]
    facts["kernel"] = [("nvkernel_main_F1L12_1", "nvkernel_main_F1L12_1", 1)]
    assert classify(facts)["frameworks"] == ["openmp_offload", "openacc"]
    assert [s.source for s in classify(facts)["evidence"] if s.points_to == "openmp_offload"] == ["kernel", "library"]


def test_cpp_binary_linking_libtorch_gets_no_python_words(planted):
    d = diagnose(planted("libtorch_gtest"))
    f = d.lead
    assert (d.verdict, d.workload, f.cause, f.figures["kernel_idle_ns"]) == ("idle", "libtorch", "cpu_work", 57 * MS)
    assert "busy in host code outside CUDA calls" in f.sentence
    assert not PYTHON.search(texts(d))


def test_no_fp8_on_an_rtx_3080_fp8_on_an_h100(planted):
    d = diagnose(planted("gemm_rtx3080"))
    busy = next(x for x in d.findings if x.kind == "gpu_busy")
    assert (d.verdict, busy.figures["least_kernel_busy_pct"]) == ("healthy", 99.005)
    assert "TF32, bf16/FP16" in busy.advice and "FP8" not in texts(d)
    h = diagnose(planted("gemm_h100"))
    assert h.verdict == "healthy" and "TF32, bf16/FP16, FP8" in next(x for x in h.findings
                                                                      if x.kind == "gpu_busy").advice


def test_old_schema_sm_count_from_target_info_cuda_gpu(planted):
    p = planted("old_schema_sm_count")
    assert (p.gpus[0].name, p.gpus[0].sm_count) == ("GeForce RTX 3080", 68)
    d = diagnose(p)
    assert not any("SM count unknown" in n for n in d.notes)
    small = next(x for x in d.findings if x.kind == "small_kernels")
    assert "fewer blocks than its 68 SMs" in small.sentence


def test_whole_process_capture_never_says_capture_more(planted):
    p = planted("whole_run_few_kernels")
    span = ToolRuns(p).get("workload").span
    assert (span.whole_process, span.first_cuda_call, span.init_call, span.init_ns) == (True, "cudaFree", "cudaFree",
                                                                                       273 * MS)
    assert (span.gpu_start_ns, span.gpu_end_ns, span.before_gpu_ns) == (300 * MS, 308 * MS, 300 * MS)
    assert span.creates_context  # the first call, cudaFree, is the longest before the window
    d = diagnose(p)
    assert (d.verdict, d.lead.figures["kernel_count"]) == ("too_little_work", 3)
    assert "already spans the whole process" in d.lead.sentence and "give the run more of it" in d.lead.advice
    assert not CAPTURE_MORE.search(texts(d))
    assert ("`cudaFree` took 273 ms before the first GPU work (CUDA creates its context in the first calls), "
            "outside the GPU window the findings measure.") in d.notes


def test_a_window_of_the_run_still_says_capture_more(planted):
    p = planted("window_few_kernels")
    span = ToolRuns(p).get("workload").span
    # the longest call before the window is the first launch call, [299.99, 299.995] ms
    assert (span.whole_process, span.first_cuda_call, span.init_ns) == (False, "cudaLaunchKernel", 5 * US)
    d = diagnose(p)
    assert d.verdict == "too_little_work" and d.lead.advice.startswith("Capture more of the run")
    assert d.lead.sentence.startswith("Too little GPU work captured for a verdict") and "GPU-bound" not in d.paragraph
    assert not any("before the first GPU work" in n for n in d.notes)


def test_a_profiler_range_is_not_the_whole_process(build):
    """The first call starts CUDA, but cudaProfilerStart/Stop bound the capture: a capture range."""
    b = ExportBuilder()
    b.gpu(0)
    b.api("cudaFree", 0, 2 * MS)
    b.api("cudaProfilerStart", 2 * MS, 2 * MS + 500 * US)
    b.launch(0, 3 * MS, 3 * MS + 5_000, 4 * MS, 5 * MS)
    b.api("cudaProfilerStop", 6 * MS, 7 * MS)
    p = build(b)
    span = ToolRuns(p).get("workload").span
    assert (span.whole_process, span.profiler_range, span.init_call) == (False, True, "cudaFree")
    # one kernel in the program's own range: widen that range, not "--capture-range" (it has one: julia-f-rep)
    d = diagnose(p)
    assert d.verdict == "too_little_work"
    assert "the program's own capture range (`cudaProfilerStart`/`Stop`) holds too little" in d.paragraph
    assert "`--capture-range`" not in d.paragraph


@pytest.mark.parametrize("first_ms, whole", [(300, True), (5, False)])
def test_a_first_call_that_creates_the_context_starts_cuda_whatever_its_name(build, first_ms, whole):
    """CuPy's first call is a cudaMalloc that takes 365 ms: it created the context, so CUDA started in the capture;
    a 5 ms cudaMalloc on a live context tells nothing."""
    b = ExportBuilder()
    b.gpu(0)
    b.api("cudaMalloc", 0, first_ms * MS)
    b.launch(0, 400 * MS, 400 * MS + 5_000, 401 * MS, 402 * MS)
    b.api("cudaDeviceSynchronize", 402 * MS, 403 * MS)
    span = ToolRuns(build(b)).get("workload").span
    assert (span.whole_process, span.first_cuda_call) == (whole, "cudaMalloc")


@pytest.mark.parametrize("injected_ms, whole", [(300, True), (-5_000, False)])
def test_nsys_saying_cuda_was_injected_in_the_capture_starts_cuda(build, injected_ms, whole):
    """An OpenACC runtime creates the context in calls CUPTI does not trace (the first traced call: a 0.18 ms
    cuMemAlloc); nsys' "CUDA injection initialized" after "Profiling has started." shows CUDA came up in the
    capture. In a delayed capture the message comes before the start, at a negative time."""
    b = ExportBuilder()
    b.gpu(0)
    b.diagnostic("Profiling has started.", t=0, severity=1)
    b.diagnostic("CUDA injection initialized successfully.", t=injected_ms * MS, severity=1, source=1)
    b.api("cuMemAlloc_v2", 400 * MS, 400 * MS + 180 * US)
    b.api("cuMemHostAlloc", 401 * MS, 415 * MS)
    b.launch(0, 420 * MS, 420 * MS + 5_000, 421 * MS, 422 * MS)
    b.api("cuStreamSynchronize", 422 * MS, 423 * MS)
    span = ToolRuns(build(b)).get("workload").span
    assert (span.whole_process, span.first_cuda_call, span.init_call, span.creates_context) == (
        whole, "cuMemAlloc", "cuMemHostAlloc", False)
    assert ("injection" in span.why) == whole


def test_whole_process_cold_start_names_the_context_creation(planted):
    d = diagnose(planted("whole_run_cold_start"))
    f = d.lead
    assert (d.verdict, f.figures["startup_ns"], f.figures["startup_pct"]) == ("startup", 3_200_000, 22.857)
    assert (f.figures["pre_window_call"], f.figures["pre_window_call_ns"]) == ("cudaFree", 273 * MS)
    assert "`cudaFree` took 273 ms before the first GPU work" in f.sentence
    assert f.advice.startswith("The capture spans the whole process, so start-up is part of what the run costs.")
    assert "For the 273 ms `cudaFree` before the first GPU work" in f.advice
    # a whole run pays module loading in full: a build for the GPU's architecture cuts it, eager loading only moves it
    assert ("build only for the GPU's architecture (`-arch=sm_90` for the H100 SXM), so no PTX is JIT-compiled"
            in f.advice)
    assert "`CUDA_MODULE_LOADING=EAGER` would only move the cost to start-up" in f.advice
    assert not CAPTURE_MORE.search(texts(d))


@pytest.mark.parametrize("question", ["what happens before the first kernel?", "why does the first kernel start so "
                                      "late?", "why is there a gap before the first kernel?",
                                      "为什么第一个kernel启动这么晚?", "what happens before the GPU starts working?",
                                      "GPU开始工作之前发生了什么？"])
def test_before_the_first_kernel_is_the_host_time_before_the_window_and_the_head(planted, question):
    from dashcam.agent.ask import ask

    a = ask(question, planted("whole_run_few_kernels"), offline=True)
    assert a.intent == "idle"
    assert a.answer.splitlines()[-1] == (
        "The capture holds 300 ms of host time before the first GPU work (outside the window the other figures "
        "measure); its longest CUDA call there, `cudaFree`, took 273 ms creating the CUDA context. GPU 0's first "
        "kernel starts at the window's start.")
    assert a.grounded, a.ungrounded_numbers
