"""The first remedy is the one that saves the most, stated with that saving, and never one the program already
applies: one planted capture per shape of issue 23 (testing/lever_programs.py states each one's facts), asserting
the lead, its saving exactly, the remedy's words and that the remedy already in place is said as done, not advised."""
from __future__ import annotations

import re

import pytest

from dashcam.agent.planner import answer_offline
from dashcam.findings import diagnose
from dashcam.profile import Profile
from dashcam.reports.summary import summarize
from dashcam.tools import get_tool

from .conftest import MS, US


def memcpy_row(p: Profile, gpu: int = 0):
    return next(d for d in get_tool("memcpy")(p).devices if d.device_id == gpu)


def test_a_long_one_block_kernel_outranks_a_one_off_first_launch(planted):
    s = summarize(planted("one_launch_long_kernel"))
    lead = s.findings[0]
    assert (s.verdict, lead.kind, lead.severity) == ("under_parallelized", "under_parallelized", "high")
    assert lead.saving_ns == int(1060 * MS * (1 - 1 / 132))  # 131 of 132 SMs empty for 1.06 s
    start = next(f for f in s.findings if f.kind == "startup")
    assert (start.saving_ns, start.severity) == (300 * MS, "low")  # 21.882 %: one-off, ranked after
    assert s.findings.index(start) > 0
    assert "First thing to try (saves up to 1051.97 ms): launch enough blocks" in s.paragraph
    assert not re.search(r"steady state|CUDA_MODULE_LOADING", s.paragraph)
    assert s.grounded, s.ungrounded_numbers


def test_kernels_are_the_lever_when_no_other_fix_saves_a_tenth(planted):
    s = summarize(planted("kernel_lever"))
    lead = s.findings[0]
    assert (s.verdict, lead.kind) == ("kernel_bound", "kernel_bound")
    assert (lead.figures["top_kernel"], lead.figures["top_kernel_pct"], lead.figures["top_kernel_launches"],
            lead.figures["kernel_busy_pct"]) == ("stencil_kernel", 75.0, 20, 80.808)
    assert all((f.saving_pct or 0) < 10 for f in s.findings[1:])
    assert ("`ncu --kernel-name regex:stencil_kernel --launch-skip 1 --launch-count 1 --set full -o stencil_kernel "
            "./heat3d --steps 20`") in lead.advice
    assert "cudaStreamSynchronize" not in s.paragraph.split("First thing to try")[1]
    assert s.grounded, s.ungrounded_numbers


def test_pinned_copies_at_the_links_peak_are_said_as_done(planted):
    p = planted("copies_at_link_peak")
    d = memcpy_row(p)
    assert (d.host_copies, d.pinned_copies, d.host_copy_gbps, d.host_copy_link_pct, d.host_link) == (
        450, 446, 24.0, 96.0, "PCIe 4.0 x16")
    # the 4 pageable copies would take 2 us + 24 MB / 25 GB/s = 0.962 ms pinned: 0.038 ms saved each
    assert d.pin_saving_ns == 4 * int(1 * MS * (1 - 962 * US / MS))
    s = summarize(p)
    assert "446 of 450 host copies on GPU 0 are already pinned and run at 24 GB/s, 96.0 % of what pinned copies " \
           "reach over PCIe 4.0 x16" in s.paragraph
    assert "overlap the copies with compute" in s.paragraph and "beyond that, only moving less data" in s.paragraph
    assert not re.search(r"cudaMallocHost|cudaHostRegister|copy from pinned", s.paragraph, re.I)
    assert s.grounded, s.ungrounded_numbers
    a = answer_offline("how fast are the copies compared to the link's peak?", p).answer
    assert ("96.0 % of the 25 GB/s pinned copies reach over its PCIe 4.0 x16 (A100 80GB): as fast as the link "
            "allows, pinned or not (pinning the pageable ones would save only 0.152 ms).") in a
    assert "pageable memory is" not in a


def test_async_copies_on_four_streams_under_which_kernels_hide_leave_only_less_data(planted):
    p = planted("async_copies_hidden")
    d = memcpy_row(p)
    assert (d.copy_count, d.async_copies, d.copy_streams, d.host_copy_gbps) == (600, 600, 4, 24.0)
    assert (d.overlap_saving_ns, d.exposed_copy_ns) == (0, 225 * MS)
    s = summarize(p)
    assert s.verdict == "transfer_bound"
    assert "all 600 copies are already asynchronous on 4 streams and 100.0 % of the kernel time already runs under " \
           "the copies: only moving less data shortens the copies themselves" in s.paragraph
    advice = s.paragraph.split("First thing to try")[1]
    assert not re.search(r"second stream|separate stream|cudaMemcpyAsync|cudaMallocHost", advice)
    assert s.grounded, s.ungrounded_numbers


def test_a_data_region_that_exists_is_not_advised(planted):
    p = planted("acc_data_region")
    assert memcpy_row(p).pin_saving_ns == 3 * (20 * MS - 8_002 * US)  # each 200 MB copy pinned: 8.002 ms
    s = summarize(p)
    assert (s.verdict, s.workload) == ("transfer_bound", "openacc")
    assert s.findings[0].saving_ns == 3 * (20 * MS - 8_002 * US)
    assert "the arrays already stay on the GPU: 3 host copies for 50 steps; allocate host arrays pinned " \
           "(`-gpu=pinned`" in s.paragraph
    assert not re.search(r"data region|!\$acc data|overlap", s.paragraph.split("First thing to try")[1])
    assert s.grounded, s.ungrounded_numbers

    a = answer_offline("how fast are the copies compared to the link's peak?", p)
    assert a.intent == "memcpy" and a.grounded
    assert ("GPU 0's host copies run at 10 GB/s, 40.0 % of the 25 GB/s pinned copies reach over its PCIe 4.0 x16 "
            "(A100 80GB); at that rate the pageable ones would take 35.994 ms less: the link is not the limit, "
            "pageable memory is.") in a.answer


def test_prefetching_in_place_is_said_and_not_advised_again(planted):
    d = diagnose(planted("prefetched_managed"))
    assert d.verdict == "um_migrations"
    # 18 calls before each of 10 steps: the first 18 before the window, 162 in it
    assert d.lead.advice.startswith("The program already prefetches managed memory (162 `cudaMemPrefetchAsync` calls "
                                    "in the window), yet pages still migrate on demand")
    assert "prefetch managed memory before use" not in d.paragraph


def test_a_flag_read_back_every_iteration_gets_no_graph_advice(planted):
    p = planted("flag_readback_loop")
    assert memcpy_row(p).readbacks == 200
    d = diagnose(p)
    assert "test it every few iterations" in d.paragraph
    assert not re.search(r"CUDA graph|cudaStreamBeginCapture|cudaGraphLaunch", d.paragraph)


@pytest.mark.parametrize("name", ["demo", "sync_stall", "transfer_bound", "small_kernels", "nccl_exposed",
                                  "one_launch_long_kernel", "copies_at_link_peak", "acc_data_region"])
def test_ranked_by_saving_and_severity_from_it(planted, name):
    """Findings with a saving come in saving order after the capture findings; each severity is its saving's share
    (high >= 50 %, medium >= 25 %, low >= 5 %); the paragraph states the lead's saving and stays grounded."""
    s = summarize(planted(name))
    saved = [f for f in s.findings if f.saving_ns and f.severity != "info" and f.kind != "startup"]
    assert [f.saving_ns for f in saved] == sorted((f.saving_ns for f in saved), reverse=True)
    for f in saved:
        pct = f.saving_pct
        assert f.severity == ("high" if pct >= 50 else "medium" if pct >= 25 else "low" if pct >= 5 else "info")
    lead = s.findings[0]
    if lead.saving_ns:
        assert "First thing to try (saves up to " in s.paragraph
    assert s.grounded, s.ungrounded_numbers


def test_the_ncu_command_profiles_the_family_the_advice_is_about(build):
    from dashcam.testing.builder import ExportBuilder

    b = ExportBuilder()
    b.gpu(0)
    t = 0
    for _ in range(10):  # attention: 3 kernels x 2 ms (the top family), one GEMM of 3 ms (the top kernel)
        for name, dur in (("flash_fwd_kernel_a", 2 * MS), ("flash_fwd_kernel_b", 2 * MS),
                          ("flash_fwd_kernel_c", 2 * MS), ("ampere_sgemm_128x64_tn", 3 * MS)):
            b.launch(0, t, t + 5 * US, t + 10 * US, t + 10 * US + dur, name=name)
            t += dur + 20 * US
    s = summarize(build(b))
    advice = next(f.advice for f in s.findings if "ncu" in (f.advice or ""))
    assert advice.startswith("Attention already runs in fused kernels")
    assert "`ncu --kernel-name regex:flash_fwd_kernel_a --launch-skip 1" in advice and "sgemm" not in advice


@pytest.mark.parametrize("gpu, kernel, first", [
    # FlashAttention-2 on an H100: Hopper's kernels first; on an A100 no newer kernel: sequences and ncu
    (("NVIDIA H100 80GB HBM3", 132), "flash_fwd_kernel", "first move to Hopper's FlashAttention-3"),
    (("NVIDIA A100-SXM4-80GB", 108), "flash_fwd_kernel", "shorter sequences where batches are padded"),
    # the first generation (NERSC's fmha_*): FlashAttention-2 first
    (("NVIDIA A100-SXM4-80GB", 108), "fmha_bwd_q_dk_dv_loop_seqparallel_kernel",
     "first move to FlashAttention-2"),
])
def test_fused_attention_names_the_newer_kernel_first(build, gpu, kernel, first):
    from dashcam.testing.builder import ExportBuilder

    b = ExportBuilder()
    b.gpu(0, *gpu)
    for i in range(20):  # GPU-bound: attention 90 % of the kernel time
        t = i * 10 * MS
        b.launch(0, t, t + 5 * US, t + 10 * US, t + 9 * MS, name=kernel)
        b.launch(0, t + 9 * MS, t + 9 * MS + 5 * US, t + 9 * MS + 10 * US, t + 10 * MS, name="ampere_sgemm_128x64_tn")
    s = summarize(build(b))
    advice = next(f.advice for f in s.findings if "Attention already runs" in (f.advice or ""))
    assert advice.split(": ", 1)[1].startswith(first), advice
    assert s.grounded, s.ungrounded_numbers


def test_a_wrapper_family_spread_over_instantiations_is_the_lever_and_ncu_selects_it(planted):
    s = summarize(planted("kernel_lever_family"))
    lead = s.findings[0]
    assert (s.verdict, lead.kind) == ("kernel_bound", "kernel_bound")
    assert (lead.figures["top_kernel"], lead.figures["top_kernel_pct"], lead.figures["top_kernel_launches"],
            lead.figures["kernel_busy_pct"]) == ("par_ranged2d_kernel<PdV_kernel>", 30.0, 20, 80.808)
    assert lead.title == ("Kernel-bound: the `par_ranged2d_kernel<advec_mom_kernel>` family leads the kernel time "
                          "(70.0 %)")
    assert "its largest family, `par_ranged2d_kernel<advec_mom_kernel>`, takes 70.0 % over 4 instantiations" \
           in lead.sentence
    assert "First thing to try: speed up the `par_ranged2d_kernel<advec_mom_kernel>` kernels, all its instantiations" \
           in s.paragraph
    # the demangled name holds the instantiation's argument; the function name (ncu's default) is the wrapper's
    assert ("`ncu --kernel-name-base demangled --kernel-name 'regex:par_ranged2d_kernel<.*advec_mom_kernel' "
            "--launch-skip 1 --launch-count 1 --set full -o par_ranged2d_kernel_advec_mom_kernel ./clover --steps 20`"
            ) in lead.advice
    assert "regex:par_ranged2d_kernel " not in s.paragraph
    assert s.grounded, s.ungrounded_numbers
    # the same lever where the user asks which kernel to work on
    from dashcam.agent.planner import answer_offline

    a = answer_offline("which kernel should I optimize first?", planted("kernel_lever_family"))
    assert ("By family, `par_ranged2d_kernel<advec_mom_kernel>` takes 70.0 % over 4 instantiations (its largest "
            "17.5 %): speed up the family, all its instantiations, before any one kernel.") in a.answer
    assert a.grounded, a.ungrounded_numbers


def test_a_sliver_of_gpu_work_in_a_whole_run_says_the_run_is_on_the_host(planted):
    p = planted("gpu_minor_run")
    s = summarize(p)
    lead = s.findings[0]
    assert (s.verdict, lead.kind) == ("gpu_minor", "gpu_minor")
    assert lead.figures == {"window_ns": 990 * US, "process_span_ns": 2001 * MS, "gpu_share_of_run_pct": 0.049,
                            "best_window_saving_ns": 195 * US}
    assert s.paragraph.startswith("The GPU is a small part of this run: its work spans 0.99 ms of the 2001 ms the "
                                  "capture holds of the process's run (0.049 %)")
    assert "the best fix inside the GPU window saves at most 0.195 ms, 0.01 % of the run" in s.paragraph
    assert "First thing to try: speed up the host side: see what the CPU does" in s.paragraph
    assert "--sample=cpu" in s.paragraph
    assert s.findings[1].kind == "idle" and s.findings[1].saving_ns == 195 * US  # the window's own, after it
    assert s.grounded, s.ungrounded_numbers
    # a --start/--end window is no whole run: its own findings lead
    assert diagnose(p, start_ms=0, end_ms=0.5).verdict != "gpu_minor"
    # the idle answer agrees: the window's gaps get no remedy (no "graphs", no "async"), only their ceiling
    from dashcam.agent.planner import answer_offline

    a = answer_offline("why is the GPU idle?", p)
    assert "But the GPU's whole window is 0.049 % of the 2001 ms the capture holds of the process's run: closing " \
           "every gap would save at most 0.39 ms" in a.answer, a.answer
    assert "graph" not in a.answer.lower() and a.grounded, a.ungrounded_numbers


def test_a_host_bound_run_names_the_programs_own_os_calls_not_the_tools_waits(planted):
    """file_bound_run: fopen 400 ms and read 120 ms on the thread that drives the GPU; CUPTI's sem_wait, a helper
    thread's poll and the ioctls inside cudaFree are not the program's own."""
    s = summarize(planted("file_bound_run"))
    lead = s.findings[0]
    assert (s.verdict, lead.kind) == ("gpu_minor", "gpu_minor")
    assert (lead.figures["os_call"], lead.figures["os_call_ns"]) == ("fopen", 400 * MS)
    assert ("the program's own OS calls take 400 ms in `fopen` (10 calls, 20.0 % of the run) and 120 ms in `read` "
            "(6 calls, 6.0 % of the run);") in s.paragraph
    assert "First thing to try: speed up the host side, starting with `fopen`; then see what the CPU" in s.paragraph
    assert not any(w in s.paragraph for w in ("sem_wait", "poll", "ioctl"))
    assert "os_runtime" in {e.tool for e in lead.evidence}
    assert s.grounded, s.ungrounded_numbers


def test_a_benchmark_run_once_that_compiles_is_told_to_warm_up_and_capture_what_follows(planted):
    """compile_bound_benchmark: nvFuser compiling 500 ms of a 663 ms window, the whole process captured."""
    s = summarize(planted("compile_bound_benchmark"))
    assert (s.verdict, s.findings[0].kind) == ("startup", "startup")
    assert s.paragraph.startswith("Start-up dominates the capture: 75.4 % of the 663 ms window goes to compiling code")
    from dashcam.findings import verdict_label

    assert verdict_label(s.verdict, s.findings[0]) == "start-up dominates"
    # under half of the window, it is a cold start, not a start-up that dominates (Fuser: 27.0 %)
    lead = s.findings[0].model_copy(update={"figures": {**s.findings[0].figures, "startup_pct": 27.0}})
    assert verdict_label("startup", lead) == "a cold start"
    assert ("Compiling (nvFuser, Triton, `torch.compile`) is paid once per process and input shape, and a run this "
            "short pays it in full: warm up first") in s.paragraph
    assert "`nsys profile --capture-range=cudaProfilerApi`" in s.paragraph
    assert "cached after the first run" not in s.paragraph
    assert s.grounded, s.ungrounded_numbers


def test_python_set_up_with_no_loop_is_not_told_to_move_work_out_of_the_step_loop(planted):
    """python_setup_run: 12 different kernels 300 ms apart in a whole-process capture, Python between them."""
    p = planted("python_setup_run")
    a = answer_offline("why is the GPU idle?", p).answer
    assert "the capture holds the whole process and no repeating step, so this is set-up or one-off work" in a
    assert "step loop" not in a and "DataLoader" not in a
    s = summarize(p)
    assert s.verdict == "idle" and "set-up or one-off work" in s.paragraph


def test_a_run_that_is_mostly_cuda_starting_leads_with_its_start_up(planted):
    """context_bound_run: `cudaMalloc` creates the context in 360 ms of a 480 ms run (75.0 %)."""
    s = summarize(planted("context_bound_run"))
    lead = s.findings[0]
    assert (s.verdict, lead.kind) == ("gpu_minor", "gpu_minor")
    assert lead.figures["context_ns"] == 360 * MS and lead.figures["context_share_of_run_pct"] == 75.0
    assert lead.figures["window_ns"] == 1910 * US and lead.figures["process_span_ns"] == 480 * MS
    assert "`cudaMalloc` alone took 360 ms creating the CUDA context, 75.0 % of the run" in s.paragraph
    assert ("First thing to try: CUDA's start-up is most of the run, paid once per process: keep the driver loaded "
            "between runs (persistence mode: `nvidia-smi -pm 1`") in s.paragraph
    assert "For the rest, speed up the host side" in s.paragraph
    assert s.grounded, s.ungrounded_numbers
    # a run whose context creation is a small part of it (gpu_minor_run: 300 ms of 2001 ms) gets no such remedy
    assert "CUDA's start-up is most of the run" not in summarize(planted("gpu_minor_run")).paragraph


@pytest.mark.parametrize("question", ["how long does one time step take?", "how long is a time step?",
                                      "how long does one timestep take?"])
def test_a_time_step_is_a_step_of_the_run_not_an_nvtx_range(planted, question):
    """kernel_lever_family has no NVTX: its steps come from the kernels' launch pattern (19 of them)."""
    from dashcam.agent.planner import answer_offline

    a = answer_offline(question, planted("kernel_lever_family"))
    assert (a.intent, a.targets.nvtx) == ("iterations", None)
    assert a.answer.startswith("The run has 19 steps, from launches of `par_ranged2d_kernel<"), a.answer


def test_mfu_is_said_to_need_the_models_flops_with_the_step_time_the_trace_gives(planted):
    from dashcam.agent.planner import answer_offline

    a = answer_offline("what is the MFU?", planted("kernel_lever_family"))
    assert a.intent == "gpu_metrics"
    assert a.answer.startswith("A trace records no floating-point operation counts, so it cannot give MFU")
    assert "What this capture gives toward it: 19 steps, a median" in a.answer
    assert a.grounded, a.ungrounded_numbers


def test_negligible_idle_gets_no_remedy_in_the_idle_answer(planted):
    """gemm_h100: kernel-busy almost the whole window: its idle time is under the loss floor."""
    from dashcam.agent.planner import answer_offline
    from dashcam.findings.thresholds import LOW_LOSS_PCT
    from dashcam.tools import get_tool as tool

    p = planted("gemm_h100")
    dev = tool("gpu_gaps")(p).devices[0]
    assert 0 < dev.kernel_idle_pct < LOW_LOSS_PCT
    a = answer_offline("why is the GPU idle?", p)
    assert "of kernel-idle time is too little of the window to matter: GPU 0 is not idle in any way worth fixing" \
        in a.answer, a.answer
    assert a.grounded, a.ungrounded_numbers


def test_elementwise_kernels_beside_gemms_are_fused_into_their_epilogues(build):
    """healthy_1pct's shape: each GEMM of 1 ms followed by an elementwise add of 1 ms (a PyTorch program): the GEMM
    remedy adds the fusion of the adds (50 % of the kernel time); with the adds at 10 % it does not."""
    from dashcam.testing.builder import ExportBuilder

    def run(add_us: int):
        b = ExportBuilder()
        b.gpu(0, "NVIDIA H100 80GB HBM3", 132)
        t = 0
        for _ in range(100):
            for name, dur in (("gemm_nn_128x128", 1 * MS), ("void at::native::elementwise_add<float>(float*)",
                                                             add_us * US)):
                b.launch(0, t, t + 5 * US, t + 10 * US, t + 10 * US + dur, name=name)
                t += dur + 20 * US
        return summarize(build(b))

    s = run(1000)
    assert "The elementwise kernels beside them take 50.0 % of the kernel time" in s.paragraph, s.paragraph
    assert "`torch.compile` does it" in s.paragraph and s.grounded, s.ungrounded_numbers
    assert "elementwise kernels beside them" not in run(110).paragraph
