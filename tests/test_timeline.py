"""Timeline (issue 6): binning, build_timeline on the demo scenario, `dashcam timeline`, the small strip."""
from __future__ import annotations

import io

import pytest
from rich.console import Console

from dashcam.profile import Profile
from dashcam.reports.timeline import Event, bin_row, build_timeline, render_strips, small_strip
from dashcam.testing.scenarios import demo

from .conftest import MS, SHARED_SQLITE, US, run_cli


def ev(a, b, cat):
    return Event(a, b, cat, cat)


# -- binning -------------------------------------------------------------------------

def test_event_shorter_than_a_cell_still_shows():
    # 10 cells of 100 ns; a 10 ns API call in cell 5, a 100 ns kernel in cell 0.
    cells = bin_row([ev(0, 100, "kernel"), ev(500, 510, "api")], 0, 1000, 10)
    assert cells == ["kernel", None, None, None, None, "api", None, None, None, None]
    # ... but a longer event of another category in the same cell wins it.
    cells = bin_row([ev(600, 700, "kernel"), ev(650, 660, "sync")], 0, 1000, 10)
    assert cells == [None] * 6 + ["kernel"] + [None] * 3
    # a zero-length event claims an otherwise empty cell
    assert bin_row([ev(250, 250, "api")], 0, 1000, 10)[2] == "api"


def test_overlapping_events_count_as_union_per_category():
    # cell 0 = [0, 100): three identical kernels [0, 30) (sum 90 ns, union 30 ns) vs memcpy [30, 80) (50 ns).
    events = [ev(0, 30, "kernel"), ev(0, 30, "kernel"), ev(0, 30, "kernel"), ev(30, 80, "memcpy")]
    assert bin_row(events, 0, 200, 2) == ["memcpy", None]
    # kernels [0, 40) and [20, 70) overlap: union 70 ns beats memcpy's 30 ns.
    events = [ev(0, 40, "kernel"), ev(20, 70, "kernel"), ev(70, 100, "memcpy"), ev(100, 200, "memcpy")]
    assert bin_row(events, 0, 200, 2) == ["kernel", "memcpy"]


def test_window_with_no_events_is_all_idle():
    assert bin_row([], 0, 1000, 8) == [None] * 8
    assert bin_row([ev(2000, 3000, "kernel"), ev(0, 10, "api")], 100, 1000, 8) == [None] * 8
    assert bin_row([ev(0, 10, "api")], 0, 0, 4) == [None] * 4


# -- build_timeline on the demo scenario -------------------------------------------------

@pytest.fixture
def demo_profile(tmp_path):
    return Profile.open(demo(tmp_path / "demo.sqlite"), progress=False)


def test_demo_rows_and_counts(demo_profile):
    tl = build_timeline(demo_profile)
    # window: first GPU op (GPU 1's first HtoD at 1 ms + 10 us) to the last kernel end of GPU 1
    assert tl.start_ns == tl.origin_ns == 1 * MS + 10 * US
    got = [(r.label, r.kind, len(r.events)) for r in tl.rows]
    assert got == [
        ("GPU 0 kernels", "gpu", 6 * 40),
        ("GPU 0 memory", "memory", 6),
        ("GPU 1 kernels", "gpu", 6 * 20),
        ("GPU 1 memory", "memory", 6),
        # rank 1's thread spends more time in CUDA calls (8 ms cudaMemcpy + 3 ms sync per step)
        ("pid 1001 tid 1001 (python)", "thread", 6 * (1 + 20 + 1)),
        ("pid 1000 tid 1000 (python)", "thread", 6 * (1 + 40)),
        ("NVTX pid 1001 tid 1001", "nvtx", 6),
        ("NVTX pid 1000 tid 1000", "nvtx", 6),
    ]
    rank1 = tl.rows[4].events
    assert sum(e.category == "sync" for e in rank1) == 6
    assert {e.name for e in rank1 if e.category == "sync"} == {"cudaStreamSynchronize"}
    assert {e.name for e in tl.rows[3].events} == {"HtoD 83.89 MB"}
    assert tl.rows[0].events[0].name == "ampere_sgemm_128x64_tn"
    assert {e.name for e in tl.rows[6].events} == {f"train_step {i}" for i in range(6)}
    for r in tl.rows:
        assert all(tl.start_ns <= e.start <= e.end <= tl.end_ns for e in r.events)
        assert [e.start for e in r.events] == sorted(e.start for e in r.events)


def test_gpu_filter_and_event_cap(demo_profile):
    tl = build_timeline(demo_profile, gpus=[0], max_events_per_row=10)
    assert [r.label for r in tl.rows] == ["GPU 0 kernels", "GPU 0 memory", "pid 1000 tid 1000 (python)",
                                         "NVTX pid 1000 tid 1000"]
    assert [len(r.events) for r in tl.rows] == [10, 6, 10, 6]
    # the kept API calls are the longest: the 6 copy calls (50 us) before any 6 us launch
    assert sum(e.name == "cudaMemcpyAsync" for e in tl.rows[2].events) == 6


def test_around_gap_is_largest_gap_plus_half_its_length(demo_profile):
    # GPU 1, step 0: last kernel ends at 9.1 + 8 = 17.1 ms; step 1's first kernel at 21.2 + 8.1 = 29.3 ms.
    tl = build_timeline(demo_profile, gpus=[1], around="gap")
    assert tl.highlight == (17_100 * US, 29_300 * US)
    margin = (29_300 - 17_100) * US // 2
    assert (tl.start_ns, tl.end_ns) == (17_100 * US - margin, 29_300 * US + margin)
    # the first GPU when none is given: GPU 0's gaps are 0.1 ms ... its largest is between steps
    tl0 = build_timeline(demo_profile, around="gap")
    a, b = tl0.highlight
    assert b - a == 4_200 * US  # 17.6 ms (last kernel) -> 21.8 ms (step 1's first kernel)


def test_around_kernel_and_nvtx(demo_profile):
    # first softmax kernel: GPU 0, step 0, i = 3: 1.6 ms + 3 * 0.4 ms
    tl = build_timeline(demo_profile, around=("kernel", "softmax"))
    assert tl.highlight == (2_800 * US, 3_200 * US)
    assert (tl.start_ns, tl.end_ns) == (2_600 * US, 3_400 * US)
    tl = build_timeline(demo_profile, around=("nvtx", "train_step 1"))
    assert tl.highlight == (21_200 * US, 41_200 * US)
    assert (tl.start_ns, tl.end_ns) == (11_200 * US, 51_200 * US)


def test_bad_around_and_unknown_gpu(demo_profile):
    from dashcam.errors import BadParameter, UnknownGpu

    with pytest.raises(BadParameter):
        build_timeline(demo_profile, around=("kernel", "no_such_kernel"))
    with pytest.raises(UnknownGpu):
        build_timeline(demo_profile, gpus=[5])


# -- rendering -------------------------------------------------------------------------

def test_cli_strip_has_labels_axis_and_fits(tmp_path):
    path = demo(tmp_path / "demo.sqlite")
    out = run_cli("timeline", str(path), cache=tmp_path / "cache", env={"COLUMNS": "100"})
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    for label in ["GPU 0 kernels", "GPU 1 memory", "pid 1001 tid 1001 (python)", "NVTX pid 1000 tid 1000"]:
        assert any(line.startswith(label) for line in lines), label
    assert any(line.startswith("time (ms)") and line.split()[2] == "0" for line in lines)
    assert any("┌" in line and "┐" in line for line in lines)
    assert "legend:" in out.stdout and "kernel" in out.stdout
    rows = [line for line in lines if line.startswith(("GPU ", "pid ", "NVTX ", "time (ms)"))]
    assert max(len(line) for line in rows) <= 100  # the legend and caption are prose, not cut in a pipe
    assert "\x1b[" not in out.stdout  # piped: no colour codes


def test_cli_around_gap_window(tmp_path):
    path = demo(tmp_path / "demo.sqlite")
    out = run_cli("timeline", str(path), "--gpu", "1", "--around", "gap",
                  cache=tmp_path / "cache", env={"COLUMNS": "100"})
    assert out.returncode == 0, out.stderr
    # absolute 11.0 .. 35.4 ms, the origin is 1.01 ms
    assert out.stdout.splitlines()[0].startswith("window 10.0 to 34.4 ms (24.400 ms)")
    assert "highlight" in out.stdout
    bad = run_cli("timeline", str(path), "--around", "stall", cache=tmp_path / "cache", env={"COLUMNS": "100"})
    assert bad.returncode == 11 and bad.stderr.count("\n") == 1
    bad = run_cli("timeline", str(path), "-o", str(tmp_path / "x.jpg"),
                  cache=tmp_path / "cache", env={"COLUMNS": "100"})
    assert bad.returncode == 11


def test_render_strips_colours_are_from_category(demo_profile):
    tl = build_timeline(demo_profile, gpus=[1], around="gap")
    con = Console(file=io.StringIO(), width=80, force_terminal=True, color_system="truecolor")
    render_strips(tl, con)
    text = con.file.getvalue()
    assert "\x1b[" in text and "GPU 1 kernels" in text


def test_small_strip_only_on_a_terminal(demo_profile, tmp_path):
    from dashcam.agent.ask import render_answer
    from dashcam.agent.models import Answer

    con = Console(file=io.StringIO(), width=90, force_terminal=True)
    small_strip(demo_profile, None, con)
    text = con.file.getvalue()
    assert "largest gap on GPU 1: 12.200 ms" in text and "time (ms)" in text

    answer = Answer(question="why?", answer="because", mode="offline")
    piped = Console(file=io.StringIO(), width=90)
    render_answer(answer, piped, str(demo_profile.path))
    assert "time (ms)" not in piped.file.getvalue()
    tty = Console(file=io.StringIO(), width=90, force_terminal=True)
    render_answer(answer, tty, str(demo_profile.path))
    assert "largest gap on GPU 1" in tty.file.getvalue()


# -- real profiles ---------------------------------------------------------------------

@pytest.mark.skipif(not SHARED_SQLITE, reason="no shared profiles")
@pytest.mark.parametrize("path", SHARED_SQLITE, ids=lambda p: p.name)
def test_real_profiles_invariants(path):
    p = Profile.open(path, progress=False)
    if not p.devices:
        pytest.skip("no GPU activity")
    tl = build_timeline(p, max_events_per_row=2000)
    assert sum(r.kind == "gpu" for r in tl.rows) == len(p.devices)
    assert sum(r.kind == "thread" for r in tl.rows) <= 6
    for r in tl.rows:
        assert len(r.events) <= 2000
        assert all(tl.start_ns <= e.start <= e.end <= tl.end_ns for e in r.events)
    per_device = dict(p.rows("SELECT device_id, count(*) FROM kernel_times GROUP BY 1"))
    for r in tl.rows:
        if r.kind == "gpu":
            d = int(r.label.split()[1])
            assert len(r.events) == min(per_device.get(d, 0), 2000)
    con = Console(file=io.StringIO(), width=100)
    render_strips(tl, con)
    assert max(len(x) for x in con.file.getvalue().splitlines()) <= 100
