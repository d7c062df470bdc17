"""dashcam diff: planted before/after pairs with known verdicts and exact deltas, the CLI, the real profiles."""
from __future__ import annotations

import json

import pytest

from dashcam.reports.diff import REGRESSION_EXIT_CODE, RULE, compare, to_markdown, to_text
from dashcam.testing.builder import ExportBuilder

from .conftest import MS, SHARED_GPU, US, run_cli, shared_or_skip

MB = 1_000_000


def training(steps: int = 5, stall_ms: float = 0.0, relu_ms: float = 3.0, copy_ms: float = 2.0, copy_mb: int = 4,
             gpus: tuple = (0,), extra: tuple | None = None, label: str = "train_step") -> ExportBuilder:
    """``steps`` NVTX "``label`` i" ranges back to back from 1 ms. Per step and GPU: gemm_kernel 5 ms, then
    (``stall_ms`` of host cudaStreamSynchronize with the GPU idle), relu_kernel ``relu_ms``, an HtoD copy of
    ``copy_mb`` MB for ``copy_ms``. Default step: 10 ms, kernel busy 8 ms, GPU busy all of it.
    ``extra=(name, ms)``: one more kernel on stream 8 at the step start, hidden under gemm (busy unchanged)."""
    b = ExportBuilder()
    for g in gpus:
        b.gpu(g)
    step = round((5 + stall_ms + relu_ms + copy_ms) * MS)
    t = 1 * MS
    for i in range(steps):
        b.nvtx(f"{label} {i}", t, t + step)
        for g in gpus:
            pid = 100 + g
            b.launch(g, t - 20 * US, t - 10 * US, t, t + 5 * MS, name="gemm_kernel", pid=pid)
            if extra:
                b.launch(g, t - 9 * US, t - 8 * US, t, t + round(extra[1] * MS), name=extra[0], stream=8, pid=pid)
            relu_start = t + 5 * MS + round(stall_ms * MS)
            if stall_ms:
                b.api("cudaStreamSynchronize", t + 5 * MS, relu_start, pid=pid)
            relu_end = relu_start + round(relu_ms * MS)
            b.launch(g, relu_start - 5 * US, relu_start - 2 * US, relu_start, relu_end, name="relu_kernel", pid=pid)
            b.copy_call(g, relu_end - 5 * US, relu_end - 2 * US, relu_end, t + step, copy_mb * MB, pid=pid)
        t += step
    return b


def diff(build, before: ExportBuilder, after: ExportBuilder, **kw):
    return compare(build(before), build(after), **kw)


def test_sync_stall_is_a_regression_with_exact_deltas(build):
    d = diff(build, training(), training(stall_ms=2))
    assert d.verdict == "regressed" and d.threshold_pct == 5.0 and d.rule == RULE
    assert d.reason == "median step time 10.000 ms → 12.000 ms (+20.0%): grew by more than the 5% threshold."
    s = d.step_time
    assert (s.metric, s.before_ns, s.after_ns, s.delta_ns, s.delta_pct) == (
        "median_step", 10 * MS, 12 * MS, 2 * MS, 20.0)
    k = d.kernel_time
    assert (k.metric, k.before_ns, k.after_ns, k.delta_pct) == ("kernel_busy_per_step", 8 * MS, 8 * MS, 0.0)
    assert (d.before.window_ns, d.after.window_ns, d.before.step_count, d.after.step_count) == (50 * MS, 60 * MS, 5, 5)
    (g,) = d.devices
    assert (g.device_id, g.after_device_id) == (0, 0)
    assert (g.busy_pct_before, g.busy_pct_after, g.busy_pct_delta) == (100.0, 83.333, -16.667)  # 50 of 60 ms
    assert (g.kernel_busy_pct_before, g.kernel_busy_pct_after, g.kernel_busy_pct_delta) == (80.0, 66.667, -13.333)
    assert (g.kernel_busy_ns_before, g.kernel_busy_ns_after) == (40 * MS, 40 * MS)
    assert [(r.full_name, r.total_ns_before, r.total_ns_after, r.delta_ns, r.delta_pct) for r in d.kernels] == [
        ("gemm_kernel", 25 * MS, 25 * MS, 0, 0.0), ("relu_kernel", 15 * MS, 15 * MS, 0, 0.0)]
    assert d.kernel_unit == "step" and [(r.before_ns, r.after_ns, r.change) for r in d.kernels] == [
        (5 * MS, 5 * MS, "unchanged"), (3 * MS, 3 * MS, "unchanged")]
    c = d.comparability
    assert (c.comparable, c.reason, c.shared_kernel_pct_before, c.shared_kernel_pct_after) == (True, None, 100.0, 100.0)
    assert c.step_definition_before == c.step_definition_after == "nvtx:train_step <n>"
    assert d.new_kernels == [] and d.gone_kernels == []
    assert [(r.name, r.count_before, r.count_after, r.total_ns_before, r.total_ns_after, r.delta_ns, r.delta_pct)
            for r in d.sync] == [("cudaStreamSynchronize", 0, 5, 0, 10 * MS, 2 * MS, None)]  # per step
    (m,) = d.memcpy
    assert (m.kind, m.count_before, m.count_after, m.bytes_delta, m.total_ns_before, m.delta_ns) == (
        "HtoD", 5, 5, 0, 10 * MS, 0)
    assert (m.before_ns, m.bytes_per_unit_before) == (2 * MS, 4 * MB)


def test_removing_the_stall_is_an_improvement(build):
    d = diff(build, training(stall_ms=2), training())
    assert d.verdict == "improved"
    assert (d.step_time.delta_ns, d.step_time.delta_pct) == (-2 * MS, -16.667)
    assert [(r.name, r.count_before, r.count_after, r.delta_ns, r.delta_pct) for r in d.sync] == [
        ("cudaStreamSynchronize", 5, 0, -2 * MS, -100.0)]
    assert d.devices[0].busy_pct_delta == 16.667


def test_one_percent_is_neutral_at_5_and_regressed_at_half_a_percent(build):
    before, after = build(training()), build(training(relu_ms=3.1))  # step +1 %, kernel time 8 -> 8.1 ms (+1.25 %)
    d = compare(before, after)
    assert d.verdict == "neutral"
    assert (d.step_time.delta_ns, d.step_time.delta_pct, d.kernel_time.delta_pct) == (0.1 * MS, 1.0, 1.25)
    assert d.reason == ("median step time 10.000 ms → 10.100 ms (+1.0%) and kernel-busy per step (all GPUs) 8.000 ms "
                        "→ 8.100 ms (+1.2%): both within the 5% threshold.")
    (relu,) = [r for r in d.kernels if r.name == "relu_kernel"]
    assert (relu.total_ns_after - relu.total_ns_before, relu.delta_ns, relu.delta_pct, relu.change) == (
        0.5 * MS, 0.1 * MS, 3.333, "unchanged")  # 0.1 ms more per step, within 5 %
    assert d.kernels[0].name == "relu_kernel"  # largest |delta| first
    assert compare(before, after, threshold_pct=0.5).verdict == "regressed"
    assert compare(before, after, threshold_pct=1.0).verdict == "regressed"  # kernel time +1.25 % > 1 %
    assert compare(before, after, threshold_pct=1.25).verdict == "neutral"  # "more than" the threshold


def test_tie_break_on_kernel_time(build):
    """Same 10 ms step; relu 3 -> 4 ms and the copy 2 -> 1 ms (and 4 -> 8 MB): kernel time 8 -> 9 ms per step."""
    before, after = training(), training(relu_ms=4, copy_ms=1, copy_mb=8)
    d = diff(build, before, after)
    assert d.verdict == "regressed" and d.step_time.delta_pct == 0.0
    assert (d.kernel_time.before_ns, d.kernel_time.after_ns, d.kernel_time.delta_pct) == (8 * MS, 9 * MS, 12.5)
    assert "tie-break kernel-busy per step (all GPUs) 8.000 ms → 9.000 ms (+12.5%)" in d.reason
    (m,) = d.memcpy
    assert (m.bytes_before, m.bytes_after, m.bytes_delta) == (20 * MB, 40 * MB, 4 * MB)  # +4 MB per step
    assert (m.total_ns_before, m.total_ns_after, m.delta_ns, m.delta_pct) == (10 * MS, 5 * MS, -1 * MS, -50.0)
    back = diff(build, after, before)
    assert back.verdict == "improved" and back.kernel_time.delta_pct == -11.111


def test_new_and_gone_kernels(build):
    d = diff(build, training(extra=("old_bias", 1.0)), training(extra=("new_bias", 0.5)))
    assert d.verdict == "neutral"  # hidden under gemm: step and kernel busy unchanged
    assert [(r.full_name, r.count_before, r.count_after, r.total_ns_before, r.total_ns_after, r.delta_ns,
             r.delta_pct) for r in d.new_kernels] == [("new_bias", 0, 5, 0, 2.5 * MS, 0.5 * MS, None)]
    assert [(r.full_name, r.count_before, r.count_after, r.total_ns_before, r.total_ns_after, r.delta_ns,
             r.delta_pct) for r in d.gone_kernels] == [("old_bias", 5, 0, 5 * MS, 0, -1 * MS, -100.0)]
    assert [r.change for r in [*d.new_kernels, *d.gone_kernels]] == ["new", "gone"]
    assert {r.full_name for r in d.kernels} == {"gemm_kernel", "relu_kernel"}


def test_limit_cuts_kernel_lists_with_a_note(build):
    d = diff(build, training(), training(extra=("new_bias", 0.5)), limit=1)
    assert [r.name for r in d.kernels] == ["gemm_kernel"]  # both 0 delta: by name
    assert any("kernels (changed): showing 1 of 2" in n for n in d.notes)


def test_gpu_count_differs_is_not_comparable(build):
    d = diff(build, training(), training(gpus=(0, 1)))
    assert d.verdict == "not_comparable"
    assert d.reason == "GPU count differs: 1 before, 2 after."
    assert d.devices == []
    # kernel time is summed over GPUs: doubled per step
    assert [(r.name, r.delta_ns, r.delta_pct, r.change) for r in d.kernels] == [
        ("gemm_kernel", 5 * MS, 100.0, "more"), ("relu_kernel", 3 * MS, 100.0, "more")]


def test_no_kernels_on_one_side_is_not_comparable(build):
    copies = ExportBuilder()
    copies.copy_call(0, 0, 10 * US, 20 * US, 2 * MS, 4 * MB)
    d = diff(build, training(), copies)
    assert d.verdict == "not_comparable" and d.reason == "No kernels in the after profile."
    assert [r.full_name for r in d.gone_kernels] == ["gemm_kernel", "relu_kernel"]
    nothing = ExportBuilder()
    nothing.api("cudaMalloc", 0, 1 * MS)  # no GPU activity at all
    d = diff(build, nothing, training())
    assert d.verdict == "not_comparable" and d.reason == "No kernels in the before profile."
    assert d.before.window_ns == 0 and any("before profile has no GPU activity" in n for n in d.notes)


def test_different_device_ids_match_by_rank(build):
    d = diff(build, training(gpus=(0, 1)), training(gpus=(2, 3), stall_ms=2))
    assert d.verdict == "regressed"
    assert [(x.device_id, x.after_device_id, x.busy_pct_delta) for x in d.devices] == [(0, 2, -16.667),
                                                                                        (1, 3, -16.667)]
    assert any("matched by rank order (0->2, 1->3)" in n for n in d.notes)
    assert d.kernel_time.before_ns == 16 * MS  # 8 ms per step on each of two GPUs


def test_no_steps_uses_the_window(build):
    def plain(ms: int) -> ExportBuilder:
        b = ExportBuilder()
        b.kernel(0, 0, ms * MS, name="solo")
        return b

    d = diff(build, plain(10), plain(9))
    assert d.verdict == "improved" and d.step_time.metric == "window" and d.kernel_time.metric == "kernel_busy"
    assert (d.step_time.before_ns, d.step_time.after_ns, d.step_time.delta_pct) == (10 * MS, 9 * MS, -10.0)
    assert any("No steps found in before and after" in n for n in d.notes)
    (solo,) = d.kernels  # the GPU ran solo all of both windows: 1 s of kernel time per second, unchanged
    assert (d.kernel_unit, solo.before_ns, solo.after_ns, solo.change) == ("second", 1e9, 1e9, "unchanged")


def test_text_and_markdown_are_formatted_from_the_model(build):
    label = "<img src=x> step"
    d = diff(build, training(extra=("x|evil", 1.0), label=label), training(stall_ms=2, label=label))
    text = to_text(d)
    assert "verdict: regressed - median step time 10.000 ms → 12.000 ms (+20.0%)" in text
    assert "GPU 0 kernel-busy" in text and "80.0%" in text and "66.7%" in text and "-13.3 pts" in text
    assert "cudaStreamSynchronize" in text and "+2.000 ms (n/a)" in text and "Host sync per step" in text
    md = to_markdown(d)
    assert md.startswith("**dashcam diff: regressed** — median step time 10.000 ms → 12.000 ms (+20.0%)")
    assert "| median step time | 10.000 ms | 12.000 ms | +2.000 ms (+20.0%) |" in md
    assert "| GPU 0 busy | 100.0% | 83.3% | -16.7 pts |" in md
    assert "| `x\\|evil` | 5 | 5.000 ms |" in md  # profile text: in a code span, pipe escaped
    assert "| gemm_kernel | 5.000 ms | 5.000 ms | +0.000 ms (+0.0%) | unchanged |" in md.replace("`", "")
    assert "**Kernel time per step (all GPUs)**" in md
    for block in md.split("\n\n"):  # every row of a table has as many cell separators as its header
        rows = [line for line in block.splitlines() if line.startswith("|")]
        assert len({line.count("|") - line.count("\\|") for line in rows}) <= 1, block


# -- CLI -----------------------------------------------------------------------------------------


@pytest.fixture
def pair(tmp_path):
    return training().write(tmp_path / "before.sqlite"), training(stall_ms=2).write(tmp_path / "after.sqlite")


def test_cli_formats(pair, tmp_path):
    before, after = pair
    j = run_cli("diff", before, after, "--format", "json", cache=tmp_path / "cache")
    assert j.returncode == 0, j.stderr
    data = json.loads(j.stdout)
    assert (data["verdict"], data["threshold_pct"], data["rule"]) == ("regressed", 5.0, RULE)
    assert data["step_time"]["delta_pct"] == 20.0 and data["sync"][0]["delta_ns"] == 2 * MS  # per step
    assert {"before", "after", "devices", "kernels", "new_kernels", "gone_kernels", "memcpy", "sync",
            "notes", "reason"} <= data.keys()
    t = run_cli("diff", after, before, "--fail-on-regression", cache=tmp_path / "cache")  # improved: exit 0
    assert (t.returncode, t.stderr) == (0, "")
    assert "verdict: improved - median step time 12.000 ms → 10.000 ms (-16.7%)" in t.stdout


def test_cli_fail_on_regression(pair, tmp_path):
    before, after = pair
    r = run_cli("diff", before, after, "--fail-on-regression", "--format", "markdown", cache=tmp_path / "cache")
    assert r.returncode == REGRESSION_EXIT_CODE == 13
    assert r.stdout.startswith("**dashcam diff: regressed**")  # the report is printed before the exit
    assert len(r.stderr.strip().splitlines()) == 1 and "regressed" in r.stderr
    n = run_cli("diff", before, after, "--fail-on-regression", "--format", "markdown", "--threshold", "25",
                cache=tmp_path / "cache")
    assert n.returncode == 0 and n.stdout.startswith("**dashcam diff: neutral**")
    assert "within the 25% threshold" in n.stdout


def test_cli_bad_input(pair, tmp_path):
    before, _ = pair
    assert run_cli("diff", before, tmp_path / "missing.sqlite", cache=tmp_path / "cache").returncode == 3
    bad = run_cli("diff", before, before, "--format", "html", cache=tmp_path / "cache")
    assert bad.returncode == 11 and len(bad.stderr.strip().splitlines()) == 1
    assert run_cli("diff", before, before, "--threshold", "-1", cache=tmp_path / "cache").returncode == 11


# -- the real profiles ---------------------------------------------------------------------------


def test_two_gpus_vs_one_is_not_comparable(opened):
    mfu = opened(shared_or_skip("nsys-ai__mfu_2gpu_before.sqlite"))
    clover = opened(shared_or_skip("hpcgroup__pipit__perlmutter-cloverleaf-cuda.sqlite"))
    d = compare(mfu, clover)
    assert d.verdict == "not_comparable" and d.reason == "GPU count differs: 2 before, 1 after."
    assert (d.before.gpu_count, d.after.gpu_count, d.devices) == (2, 1, [])
    assert to_markdown(d) and to_text(d)


@pytest.mark.parametrize("path", SHARED_GPU, ids=lambda p: p.name)
def test_a_profile_against_itself_is_neutral(opened, path):
    p = opened(path)
    d = compare(p, p, limit=1000)
    assert d.verdict == "neutral"
    assert d.step_time.delta_ns == 0 and d.step_time.delta_pct == 0.0
    assert d.kernel_time.delta_ns == 0
    assert all(x.busy_pct_delta == 0 and x.kernel_busy_pct_delta == 0 for x in d.devices)
    assert len(d.devices) == d.before.gpu_count
    assert all(r.delta_ns == 0 and r.count_before == r.count_after for r in [*d.kernels, *d.memcpy, *d.sync])
    assert d.new_kernels == [] and d.gone_kernels == []
    # kernel totals equal top_kernels' (same definition)
    from dashcam.tools import get_tool

    tk = get_tool("top_kernels")(p)
    assert (d.before.kernel_count, d.before.kernel_time_ns) == (tk.kernel_count, tk.total_kernel_ns)
    assert sum(r.total_ns_before for r in d.kernels) == tk.total_kernel_ns
    assert to_markdown(d) and to_text(d)


def test_kernel_labels_tell_same_short_names_apart():
    from dashcam.reports.diff import KernelDelta, _kernel_label

    def row(full: str, short: str = "elementwise_kernel") -> KernelDelta:
        return KernelDelta(name=short, full_name=full, count_before=1, count_after=1, total_ns_before=1,
                           total_ns_after=1, before_ns=1, after_ns=1, delta_ns=0, delta_pct=0.0, change="unchanged")

    head = "void at::native::elementwise_kernel<(int)128, (int)2, void at::native::gpu_kernel_impl<"
    rows = [row(head + "AddFunctor<float>>(int, T1)"), row(head + "MulFunctor<float>>(int, T1)"), row("gemm", "gemm")]
    labels = [_kernel_label(r, rows) for r in rows]
    assert labels == ["elementwise_kernel …void at::native::gpu_kernel_impl<AddFunctor<float>>(int, T1)",
                      "elementwise_kernel …void at::native::gpu_kernel_impl<MulFunctor<float>>(int, T1)",
                      "gemm"]  # the tail fits in the 61 characters left after the short name
    middle = [row(head + f"{f}Functor<float>>" + "(" + "int, " * 20 + "T1)") for f in ("Add", "Mul")]
    start = len(head) - 20  # 20 characters before the first one that differs
    assert _kernel_label(middle[0], middle) == ("elementwise_kernel …" + middle[0].full_name[start:start + 59] + "…")
    assert all(len(x) <= 80 for x in labels) and len(_kernel_label(middle[1], middle)) == 80


# -- pairs that cannot be compared ---------------------------------------------------------------------------


def other_program(steps: int = 5) -> ExportBuilder:
    """Another program: NVTX "train_step i" ranges of 0.5 ms with one fft_kernel of 0.4 ms each, no kernel in
    common with ``training``."""
    b = ExportBuilder()
    b.gpu(0)
    for i in range(steps):
        t = 1 * MS + i * 500 * US
        b.nvtx(f"train_step {i}", t, t + 500 * US)
        b.launch(0, t - 20 * US, t - 10 * US, t, t + 400 * US, name="fft_kernel", pid=100)
    return b


def pattern_steps(first: str | None = None, steps: int = 6) -> ExportBuilder:
    """No NVTX: per 10 ms step gemm_kernel 5 ms then relu_kernel 3 ms; ``first``: a 0.1 ms kernel before gemm
    in every step, which then marks the steps (same marker count, earlier first launch)."""
    b = ExportBuilder()
    b.gpu(0)
    for i in range(steps):
        t = 1 * MS + i * 10 * MS
        if first:
            b.launch(0, t - 30 * US, t - 25 * US, t, t + 100 * US, name=first, pid=100)
        b.launch(0, t - 20 * US, t - 10 * US, t + 100 * US, t + 5 * MS, name="gemm_kernel", pid=100)
        b.launch(0, t + 5 * MS - 5 * US, t + 5 * MS - 2 * US, t + 5 * MS, t + 8 * MS, name="relu_kernel", pid=100)
    return b


def test_unrelated_programs_are_not_comparable(build):
    d = diff(build, training(), other_program())  # the after steps are 20x shorter: once "improved -95 %"
    assert d.verdict == "not_comparable"
    c = d.comparability
    assert (c.comparable, c.shared_kernel_pct_before, c.shared_kernel_pct_after, c.min_shared_pct) == (
        False, 0.0, 0.0, 50.0)
    assert d.reason == c.reason == (
        "Different programs: the kernels both profiles run hold 0 % of the before profile's kernel time and 0 % of "
        "the after's (at least 50 % on each side needed; --min-shared lowers it).")
    assert d.step_time.delta_pct == -95.0  # still reported, but no verdict rests on it
    assert d.kernels == [] and [r.change for r in d.new_kernels + d.gone_kernels] == ["new", "gone", "gone"]
    assert compare(build(training()), build(other_program()), min_shared_pct=0).verdict == "improved"


def test_shared_share_is_kernel_time_on_each_side(build):
    """gemm+relu (8 ms per step) plus a big new kernel of 9 ms hidden on stream 8: the after side's shared
    share is 8 / 17 = 47.059 % < 50 %, the before side's 100 %."""
    d = diff(build, training(), training(extra=("huge_new_kernel", 9.0)))
    c = d.comparability
    assert (c.shared_kernel_pct_before, c.shared_kernel_pct_after) == (100.0, 47.059)
    assert d.verdict == "not_comparable" and "47.059 % of the after's" in d.reason
    assert diff(build, training(), training(extra=("new_kernel", 7.0))).comparability.comparable  # 8/15 = 53 %


def test_steps_from_different_kernels_are_not_comparable(build):
    d = diff(build, pattern_steps(), pattern_steps(first="prep_kernel"))
    c = d.comparability
    assert (c.step_definition_before, c.step_definition_after) == ("kernel_pattern:gemm_kernel",
                                                                   "kernel_pattern:prep_kernel")
    assert c.shared_kernel_pct_before == 100.0 and c.shared_kernel_pct_after == 98.75  # 7.9 of 8 ms per step
    assert d.verdict == "not_comparable" and d.reason == (
        "Steps are defined differently (kernel 'gemm_kernel' before, kernel 'prep_kernel' after): their step times "
        "measure different units of work.")
    assert diff(build, pattern_steps(), pattern_steps()).verdict == "neutral"  # the same definition


def test_steps_on_one_side_only_is_not_comparable(build):
    d = diff(build, training(), pattern_steps())  # NVTX steps before; the after profile's steps from a kernel
    assert d.verdict == "not_comparable"
    assert d.reason == ("Steps are defined differently (NVTX range 'train_step <n>' before, kernel 'gemm_kernel' "
                        "after): their step times measure different units of work.")
    solo = ExportBuilder()  # two kernels at irregular times: no steps
    for s, e in ((0, 5 * MS), (6 * MS, 8 * MS), (20 * MS, 21 * MS)):
        solo.kernel(0, s, e, name="gemm_kernel")
    d = diff(build, training(), solo)
    assert d.after.step_method == "none" and d.verdict == "not_comparable"
    assert d.reason == ("Steps found in the before profile (NVTX range 'train_step <n>') but none in the after: there "
                        "is no common unit of work to compare.")


def test_a_longer_capture_of_the_same_program_is_unchanged_per_step(build):
    d = diff(build, training(steps=5), training(steps=10))
    assert d.verdict == "neutral" and d.kernel_unit == "step"
    assert [(r.full_name, r.total_ns_before, r.total_ns_after, r.before_ns, r.after_ns, r.delta_ns, r.change)
            for r in d.kernels] == [("gemm_kernel", 25 * MS, 50 * MS, 5 * MS, 5 * MS, 0, "unchanged"),
                                    ("relu_kernel", 15 * MS, 30 * MS, 3 * MS, 3 * MS, 0, "unchanged")]
    md = to_markdown(d)
    assert "| `gemm_kernel` | 5.000 ms | 5.000 ms | +0.000 ms (+0.0%) | unchanged |" in md
    assert "| HtoD | 2.000 ms | 2.000 ms | +0.000 ms (+0.0%) | 4.00 MB | 4.00 MB | +0 B |" in md  # copies per step
    # a stall regression over a shorter capture: the kernels do not read "less" (faster)
    d = diff(build, training(steps=10), training(steps=5, stall_ms=2))
    assert d.verdict == "regressed" and {r.change for r in d.kernels} == {"unchanged"}
    assert [(m.delta_ns, m.bytes_delta) for m in d.memcpy] == [(0, 0)]  # nor the copies
    assert "| `cudaStreamSynchronize` | 0 | 1 | 0.000 ms | 2.000 ms | +2.000 ms (n/a) |" in to_markdown(d)


def test_cli_fail_on_regression_never_fires_on_a_pair_it_cannot_compare(tmp_path):
    before, after = training().write(tmp_path / "a.sqlite"), other_program().write(tmp_path / "b.sqlite")
    r = run_cli("diff", before, after, "--fail-on-regression", cache=tmp_path / "cache")
    assert r.returncode == 32 and r.stdout.startswith("before:") and "verdict: not_comparable - Different" in r.stdout
    [line] = r.stderr.strip().splitlines()
    assert line.startswith("dashcam: error: not comparable, so no regression verdict: Different programs")
    plain = run_cli("diff", before, after, "--format", "json", cache=tmp_path / "cache")
    assert plain.returncode == 0 and json.loads(plain.stdout)["comparability"]["comparable"] is False
    low = run_cli("diff", before, after, "--fail-on-regression", "--min-shared", "0", cache=tmp_path / "cache")
    assert low.returncode == 0 and "verdict: improved" in low.stdout
    bad = run_cli("diff", before, after, "--min-shared", "150", cache=tmp_path / "cache")
    assert bad.returncode == 11 and "--min-shared from 0 to 100" in bad.stderr


def kernel_loop(steps: int) -> ExportBuilder:
    """``steps`` launches of gemm_kernel 1 ms then relu_kernel 0.5 ms, one pair every 2 ms: iterations finds the
    steps from gemm's launches, so ``steps`` launches give ``steps - 1`` steps and one pair lies after the last."""
    b = ExportBuilder()
    b.gpu(0)
    for i in range(steps):
        t = 1 * MS + i * 2 * MS
        b.launch(0, t, t + 5 * US, t + 10 * US, t + 10 * US + 1 * MS, name="gemm_kernel")
        b.launch(0, t + 20 * US, t + 25 * US, t + 1100 * US, t + 1600 * US, name="relu_kernel")
    return b


def test_per_step_totals_are_what_the_steps_hold(build):
    # 10 launches are 9 steps, 40 are 39: the whole capture's kernel time over the step count read 1.667 ms a step
    # before and 1.538 ms after, so one program captured twice was "improved" (-7.7 %) by the tie-break
    d = diff(build, kernel_loop(10), kernel_loop(40))
    assert (d.before.step_count, d.after.step_count, d.kernel_unit) == (9, 39, "step")
    assert (d.kernel_time.before_ns, d.kernel_time.after_ns) == (1.5 * MS, 1.5 * MS)
    assert d.verdict == "neutral"
    assert [(r.full_name, r.count_before, r.total_ns_before, r.before_ns, r.after_ns, r.change) for r in d.kernels] == [
        ("gemm_kernel", 10, 10 * MS, 1 * MS, 1 * MS, "unchanged"),
        ("relu_kernel", 10, 5 * MS, 0.5 * MS, 0.5 * MS, "unchanged")]
