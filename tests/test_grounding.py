"""grounding: every number of an answer traced to a tool result, with units and rounding."""
import random

import pytest

from dashcam.agent.models import Evidence
from dashcam.evidence.grounding import Candidates, check, numbers_in
from dashcam.evidence.runs import run_tool
from dashcam.profile import Profile
from dashcam.testing.builder import ExportBuilder
from dashcam.text.format import fmt_value

from .conftest import MS, SHARED_GPU, US


def ev(result: dict, tool: str = "t") -> list[dict]:
    return [{"tool": tool, "args": {}, "result": result}]


def ok(text: str, result: dict, extra=()) -> bool:
    return check(text, ev(result), extra)[0]


def bad(text: str, result: dict, extra=()) -> list[str]:
    return check(text, ev(result), extra)[1]


# --- a realistic offline answer against real tool results ------------------------------------

@pytest.fixture
def planted(build):
    """GPU 0: kernels [0,3] [5,8] [9,10] ms. GPU 1: a kernel [0,2] ms, then a 400 MB pageable HtoD
    copy [2,6] ms. Window 10 ms: GPU 0 kernel busy 7 ms = 70 %, GPU 1 2 ms = 20 %, busy with copies 60 %."""
    b = ExportBuilder()
    b.gpu(0)
    b.gpu(1)
    b.launch(0, api_start=0, api_end=5 * US, start=0, end=3 * MS, name="ampere_sgemm_128x64_tn")
    b.launch(0, api_start=4 * MS, api_end=4 * MS + 5 * US, start=5 * MS, end=8 * MS, name="ampere_sgemm_128x64_tn")
    b.launch(0, api_start=8 * MS, api_end=8 * MS + 5 * US, start=9 * MS, end=10 * MS, name="softmax_warp_forward")
    b.launch(1, api_start=0, api_end=5 * US, start=0, end=2 * MS, name="ampere_sgemm_128x64_tn", tid=101)
    b.copy_call(1, 2 * MS, 6 * MS, 2 * MS, 6 * MS, 400_000_000, "HtoD", pinned=False, tid=101)
    p = build(b)
    return [run_tool(p, name)[1] for name in ("overview", "gpu_gaps", "memcpy", "top_kernels")]


ANSWER = (
    "GPU 1 was the idle one: its kernels ran 2 ms of the 10 ms window (20.0 %) and it sat idle 8 ms "
    "(80 %) in 1 gap. Most of its busy time was a 400 MB pageable HtoD copy (381.5 MiB, 4 ms at "
    "100 GB/s), so it was busy 60 % counting copies. GPU 0 kernels were busy 70 % (7.0 ms) over 3 "
    "kernels with 2 gaps (3 ms idle, 66.3 % of it `dependency`). `ampere_sgemm_128x64_tn` took 8 ms, "
    "88.9 % of kernel time (3 calls, 2.667 ms on average) on the NVIDIA H100 80GB HBM3.\n"
    "1. Pin the host buffer of the 400,000,000-byte copy."
)


def test_realistic_answer_is_grounded(planted):
    overview, gaps, memcpy, top = (e.result for e in planted)
    # the planted facts the answer states
    assert [d["kernel_busy_pct"] for d in overview["devices"]] == [70.0, 20.0]
    assert overview["devices"][1]["busy_pct"] == 60.0
    assert [d["kernel_idle_pct"] for d in gaps["devices"]] == [30.0, 80.0]
    assert gaps["devices"][0]["cause_pct"]["dependency"] == 66.333
    assert memcpy["by_kind"][0]["gbps"] == 100.0
    assert top["kernels"][0]["pct"] == 88.889
    assert check(ANSWER, planted) == (True, [])


@pytest.mark.parametrize("right, wrong, flagged", [
    ("(20.0 %)", "(21.0 %)", "21.0 %"), ("at 100 GB/s", "at 110 GB/s", "110 GB/s"),
    ("(7.0 ms)", "(7.1 ms)", "7.1 ms"), ("over 3 kernels", "over 13 kernels", "13"),
    ("GPU 1 was", "GPU 2 was", "GPU 2"), ("381.5 MiB", "381.6 MiB", "381.6 MiB"),
])
def test_realistic_answer_with_one_wrong_number(planted, right, wrong, flagged):
    assert right in ANSWER
    assert check(ANSWER.replace(right, wrong, 1), planted) == (False, [flagged])


# --- units -----------------------------------------------------------------------------------

NS = {"total_ns": 12_347_000}
BYTES = {"copy_bytes": 3_221_225_472}  # 3.22 GB = 3 GiB


@pytest.mark.parametrize("text", [
    "12347000 ns", "12,347,000 ns", "12347 us", "12,347 µs", "12347.0 μs", "12.35 ms", "12.347 msec",
    "0.0123 s", "0.012347 seconds", "12.35",  # unitless: a ns field read in ms
])
def test_ns_field_in_any_time_unit(text):
    assert ok(text, NS)


@pytest.mark.parametrize("text", ["12.34 ms", "12346 us", "0.013 s", "12.4", "12347000 B", "12.35 %"])
def test_ns_field_wrong_value_or_unit(text):
    assert not ok(text, NS)


def test_ms_us_and_s_fields_are_times_too():
    r = {"start_ms": 16.59, "min_gap_us": 250.0, "timeout_s": 1.5}
    assert ok("16.59 ms, 16590 us, 16.59, 0.25 ms, 250 us, 1.5 s, 1500 ms", r)
    assert bad("16.6 s", r) == ["16.6 s"]


@pytest.mark.parametrize("text", [
    "3221225472 B", "3,221,225,472 bytes", "3.22 GB", "3.2 GB", "3,221.2 MB", "3221225 KB", "3 GiB",
    "3.0 GiB", "3072 MiB", "3145728 KiB", "3.00 GB",  # "GB" may be meant as GiB: both bases accepted
])
def test_bytes_in_decimal_and_binary_units(text):
    assert ok(text, BYTES)


@pytest.mark.parametrize("text", ["3.22 GiB", "3.3 GB", "3 TB", "3221 ms"])
def test_bytes_wrong(text):
    assert not ok(text, BYTES)


def test_percent_fields_fractions_and_pct_dicts():
    r = {"kernel_busy_pct": 62.125, "overlap": 0.4567, "cause_pct": {"cpu_work": 96.434}, "count": 1}
    for text in ("62.1 %", "62.13%", "62 percent", "45.7 %", "45.67 %", "96.4 % of idle time", "62.125"):
        assert ok(text, r), text
    assert bad("62.2 %, 0.46 %, 100 %", r) == ["62.2 %", "0.46 %", "100 %"]  # an int 1 is a count, not 100 %


def test_bandwidth_as_written_or_converted():
    r = {"gbps": 71.056444}
    assert ok("71.06 GB/s, 71.1 GB/s, 71056 MB/s, 66.2 GiB/s", r)
    assert bad("71.2 GB/s", r) == ["71.2 GB/s"]


def test_ratio_with_x_or_times_sign():
    r = {"ratio_to_median": 2.5}
    assert ok("2.5× the median, 2.5x, 2.50 x", r)
    assert bad("3.5×", r) == ["3.5×"]


def test_count_suffixes_round_to_the_digits_shown():
    r = {"kernel_count": 1_612_345}
    assert ok("1.6 M kernels, 1.61M, 1612 k, 1.6 million", r)
    assert bad("1.7 M kernels", r) == ["1.7 M"]
    assert numbers_in("1.6 M kernels") == [("1.6 M", 1_600_000.0, None)]


# --- rounding --------------------------------------------------------------------------------

@pytest.mark.parametrize("text, grounded", [
    ("12.3 ms", True), ("12.35 ms", True), ("12 ms", True), ("12.349 ms", True), ("12.3490 ms", True),
    ("12.4 ms", False), ("12.34 ms", False), ("12.3491 ms", False), ("13 ms", False),
])
def test_rounding_at_the_precision_shown(text, grounded):
    assert ok(text, {"duration_ns": 12_349_000}) is grounded


def test_integer_written_rounds_to_the_unit():
    assert ok("12 ms", {"duration_ns": 12_400_000})
    assert not ok("12 ms", {"duration_ns": 12_600_000})


def test_trailing_zeros_allow_three_significant_figures():
    r = {"api_calls": 1_234_567}
    assert ok("1,230,000 calls", r)
    assert bad("1,200,000 calls", r) == ["1,200,000"]  # 2.8 % off: more than rounding to 3 figures


# --- invented numbers and ids ----------------------------------------------------------------

def test_invented_percentage_flagged():
    r = {"devices": [{"device_id": 5, "kernel_idle_pct": 62.1}]}
    assert check("GPU 5 was idle 73 % of the window.", ev(r)) == (False, ["73 %"])
    assert check("GPU 5 was idle 62.1 % of the window.", ev(r)) == (True, [])


def test_gpu_id_not_in_evidence_flagged_even_if_some_count_matches():
    r = {"devices": [{"device_id": 0, "kernel_count": 5}, {"device_id": 1, "kernel_count": 7}]}
    assert check("GPU 5 was idle.", ev(r)) == (False, ["GPU 5"])
    assert bad("gpu5 and device 5 and GPU #5", r) == ["gpu5", "device 5", "GPU 5"]
    assert bad("GPUs 0, 1 and 5 ran 5 and 7 kernels", r) == ["GPUs 5"]
    assert bad("GPUs 0-5", r) == ["GPUs 5"]
    assert check("GPU 1 ran 7 kernels; GPU 0 ran 5.", ev(r)) == (True, [])
    assert check("GPU 5 does not exist.", ev(r), extra_values=[5]) == (True, [])


def test_ids_of_other_kinds():
    r = {"steps": [{"index": 0}, {"index": 1}], "streams": [{"stream_id": 7}], "pid": 1000, "tid": 1001}
    assert ok("step 0, step 2 (the second, counted from 1), stream 7, pid 1000, thread 1001", r)
    assert bad("step 3, stream 8, rank 2", r) == ["step 3", "stream 8", "rank 2"]


def test_a_count_after_a_gpu_is_not_an_id():
    r = {"devices": [{"device_id": 0, "kernel_count": 240}]}
    assert numbers_in("On GPU 0, 240 kernels ran.") == [("GPU 0", 0.0, "#gpu"), ("240", 240.0, None)]
    assert ok("On GPU 0, 240 kernels ran.", r)


def test_percentage_computed_by_the_writer_is_flagged():
    """Strict by design: idle % = 100 - busy % is in no tool result, so it is ungrounded."""
    r = {"devices": [{"device_id": 0, "kernel_busy_pct": 81.64}]}
    assert check("GPU 0 was busy 81.6 % and idle 18.4 %.", ev(r)) == (False, ["18.4 %"])
    assert check("GPU 0 was busy 81.6 % and idle 18.4 %.", ev(r), extra_values=[18.36]) == (True, [])


def test_ungrounded_listed_once_in_order_as_written():
    assert check("73 % then 12 ms then 73 % and 12 ms", ev({"x": 1})) == (False, ["73 %", "12 ms"])


# --- extraction: what is and is not a number -------------------------------------------------

def test_identifiers_with_digits_are_not_numbers():
    text = ("ampere_sgemm_128x64_tn, cudaLaunchKernel_v7000, sm_90, H100, A100-SXM4-80GB, cuda:0, x86_64, "
            "fp16, bf16 and TF32, nsys 2024.5.1, version 3.13.2, CUDA 12.4, driver 535.104.05, a 3-way split, "
            "the 2nd try, at 12:30 on 2024-05-01 or 5/1/2024, see https://x.org/a/b?v=2, 0x1F, e2e, 3D")
    assert numbers_in(text) == []


def test_backticks_quotes_and_list_markers_are_not_checked():
    text = ('1. `sgemm 73 %` ran\n2) "idle 99 %" said the label\n  3. ‘step 4’ and \'rank 9\'\n'
            "```\nGPU 7 idle 55 ms\n```\n- the GPU's 'kernels' ran")
    assert numbers_in(text) == []
    assert check(text, ev({})) == (True, [])


def test_evidence_strings_written_verbatim_are_names():
    r = {"devices": [{"device_id": 0, "gpu_name": "NVIDIA H100 80GB HBM3"}],
         "largest_gaps": [{"nvtx_range": "train_step 17"}]}
    assert numbers_in("NVIDIA H100 80GB HBM3") == [("80GB", 80.0, "GB")]
    assert check("GPU 0 is an NVIDIA H100 80GB HBM3; the gap is in train_step 17.", ev(r)) == (True, [])
    assert bad("the gap is in train_step 18", r) == ["18"]


def test_numbers_in_tool_notes_are_candidates_in_their_unit():
    r = {"notes": ["steps lists the first 2 of 6 steps (raise limit for more)."],
         "histogram": [{"bucket": "100us-1ms", "count": 0}], "verdict_reason": "kernel busy 81.6% >= 70%"}
    assert ok("6 steps, the first 2; gaps of 0.1 to 1 ms; busy 81.6 % is at least 70 %", r)


def test_negative_numbers():
    r = {"queue_p50_ns": -450.0}
    assert numbers_in("queue delay -450 ns (−0.45 us)") == [("-450 ns", -450.0, "ns"), ("−0.45 us", -0.45, "us")]
    assert ok("queue delay -450 ns (−0.45 us), 450 ns before the call returned", r)
    assert bad("-451 ns", r) == ["-451 ns"]
    assert bad("-450 ns", {"queue_p50_ns": 450.0}) == ["-450 ns"]  # a sign written must be right


def test_thousands_separators():
    assert numbers_in("1,234 kernels and 12,345.5 ms") == [("1,234", 1234.0, None), ("12,345.5 ms", 12345.5, "ms")]
    assert ok("1,234 kernels", {"kernel_count": 1234})
    assert bad("1,235 kernels", {"kernel_count": 1234}) == ["1,235"]


def test_ranges_share_their_unit():
    r = {"window": {"start_ms": 2000.0, "end_ms": 3500.0}}
    assert numbers_in("between 2 and 3.5 s") == [("2", 2.0, "s"), ("3.5 s", 3.5, "s")]
    assert ok("between 2 and 3.5 s, i.e. 2000–3500 ms", r)
    assert numbers_in("10-100us") == [("10", 10.0, "us"), ("100us", 100.0, "us")]


def test_numbers_in_mixed_sentence():
    assert numbers_in("**GPU 3** idled 12.5 ms (62.1%) moving 3.6 GB at 71.1 GB/s, 2.5× the median.") == [
        ("GPU 3", 3.0, "#gpu"), ("12.5 ms", 12.5, "ms"), ("62.1%", 62.1, "%"), ("3.6 GB", 3.6, "GB"),
        ("71.1 GB/s", 71.1, "GB/s"), ("2.5×", 2.5, "x")]


# --- evidence shapes -------------------------------------------------------------------------

def test_evidence_models_bare_results_and_prebuilt_candidates():
    r = {"devices": [{"device_id": 2, "kernel_idle_ns": 5 * MS}]}
    text = "GPU 2 was idle 5 ms"
    assert check(text, [Evidence(tool="overview", args={}, result=r)]) == (True, [])
    assert check(text, [r]) == (True, [])
    cands = Candidates.build([r])
    assert check(text, cands) == (True, [])
    assert check("GPU 3 was idle 5 ms", cands) == (False, ["GPU 3"])
    assert check("GPU 3 was idle 5 ms", cands, extra_values=[3]) == (True, [])


def test_sql_rows_are_filed_by_column_name():
    r = {"tool": "sql", "columns": ["device_id", "total_ns", "bytes"], "rows": [[3, 5_000_000, 2_000_000_000]],
         "row_count": 1}
    assert ok("GPU 3 spent 5 ms on 2 GB", r)
    assert bad("GPU 5_000_000 GPU 4", r) == ["GPU 4"]


def test_booleans_and_args_are_not_candidates():
    e = [{"tool": "x", "args": {"limit": 17}, "result": {"transfer_bound": True}}]
    assert check("17 rows, 1 GPU", e) == (False, ["17", "1"])


# --- speed -----------------------------------------------------------------------------------

def ten_thousand_leaves() -> tuple[str, list[dict]]:
    """A 200-word answer that repeats one sentence 8 times, and evidence of 1,000 rows (10,000 number leaves)
    whose values are random: none is 12.3, 117.59, 62.1, 1234 or 71.1 (bench/bench_grounding.py times it)."""
    rnd = random.Random(1)
    rows = [{"name": f"kernel_{i}_128x64", "device_id": i % 8, "count": rnd.randint(1, 10**6),
             "total_ns": rnd.randint(1, 10**10), "avg_ns": rnd.random() * 1e6, "pct": rnd.random() * 100,
             "bytes": rnd.randint(0, 10**10), "stream_id": i % 30, "gbps": rnd.random() * 500,
             "causes": {"a": rnd.randint(0, 10**9)}} for i in range(1000)]
    text = ("GPU 3 was idle 12.3 ms of 117.59 ms, 62.1 % of the window; `kernel_5_128x64` ran 1,234 times "
            "at 71.1 GB/s moving 3.6 GB, 2.5× the median. ") * 8
    return text, [{"tool": "x", "args": {}, "result": {"rows": rows}}]


def test_200_words_against_10k_leaves_lists_each_ungrounded_number_once():
    text, evidence = ten_thousand_leaves()
    assert 190 <= len(text.split()) <= 230
    grounded, bad = check(text, evidence)
    assert not grounded
    # every made-up figure once, though the sentence comes 8 times; GPU 3 and kernel_5 are ids the rows hold
    assert bad == ["12.3 ms", "117.59 ms", "62.1 %", "1,234", "71.1 GB/s"]


# --- invariant on real results: every leaf, rendered the dashcam way, is grounded -------------

def _leaves(obj, key=None):
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _leaves(v, k)
    elif isinstance(obj, list):
        for v in obj:
            yield from _leaves(v, key)
    elif isinstance(obj, (int, float)) and not isinstance(obj, bool):
        yield key, obj


REAL = [p for p in SHARED_GPU if p.stat().st_size < 200_000_000]


@pytest.mark.parametrize("path", REAL, ids=[p.name for p in REAL])
def test_rendered_results_are_grounded_on_real_profiles(path):
    p = Profile.open(path, progress=False)
    evidence = [run_tool(p, name, {"limit": 5})[1] for name in ("overview", "gpu_gaps", "memcpy", "launch_latency")]
    lines = [f"{k}: {fmt_value(k, v)}" for e in evidence for k, v in _leaves(e.result)]
    assert lines
    assert check("\n".join(lines), evidence) == (True, [])
