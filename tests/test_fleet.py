"""The fleet (src/dashcam/fleet, agent/fleet.py, `dashcam fleet`): planted fleets whose answers are known by
construction (dashcam.testing.fleets), in-process (`--workers 1`); Dask runs are in test_fleet_dask.py."""
from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from dashcam.errors import BadParameter, NoReports
from dashcam.fleet import analyse, to_markdown, to_text
from dashcam.fleet.digest import Digest, digest
from dashcam.fleet.inputs import discover, is_fleet, ranks_from_names
from dashcam.fleet.report import reduce, table_rows
from dashcam.fleet.rules import THRESHOLDS
from dashcam.testing import fleets, scenarios

MS = 1_000_000


@pytest.fixture(scope="module")
def straggler_dir(tmp_path_factory) -> Path:
    return fleets.straggler_fleet(tmp_path_factory.mktemp("fleet"))


@pytest.fixture(scope="module")
def report(straggler_dir):
    return analyse([str(straggler_dir)], workers=1)


def finding(report, kind):
    found = [f for f in report.findings if f.kind == kind]
    assert len(found) == 1, [f.kind for f in report.findings]
    return found[0]


# -- the planted straggler fleet -----------------------------------------------------------------------

def test_verdict_counts_and_identity(report):
    assert report.verdict == "straggler"
    assert (report.reports, report.analysed, report.units) == (9, 8, 8)
    assert report.hosts == ["node-a", "node-b"]
    assert report.rank_sources == {"env:SLURM_PROCID": 8, "name": 1}  # the truncated report records none
    assert report.step_comparison == {"method": "steps", "steps_compared": 6, "step_counts": {6: 8}}
    assert [f.kind for f in report.findings] == ["straggler", "idle_outlier", "slow_gpu", "incomplete"]


def test_straggler_is_the_rank_that_arrives_last(report):
    f = finding(report, "straggler")
    assert f.ranks == [3] and f.hosts == ["node-a"] and f.devices == [3]
    # 7.8 ms of compute against 6 ms: 1.8 ms late at each of the 6 all-reduces, on one clock (all ends together)
    assert f.figures == {"rank": 3, "gpu": 3, "last_arrivals": 6, "collectives_compared": 6, "late_ns": 1_800_000,
                         "clock_uncertainty_ns": 0, "threshold_ns": 1_000_000, "first_late_ns": 1_800_000,
                         "cause": "compute", "compute_between_ns": 7_800_000, "others_compute_between_ns": 6 * MS,
                         "compute_excess_pct": 30.0, "kernel_ratio": 1.3}
    assert f.commands[0].endswith("report_3.sqlite --gpu 3")
    assert "(30 % more: its kernels run 1.3x as long as on the median GPU)" in f.sentence
    # the ranks that wait most have the most NCCL time: the straggler has the least
    nccl = {r.rank: r.nccl_ns for r in report.rows}
    assert min(nccl, key=nccl.get) == 3 and nccl[3] == 12 * MS and nccl[0] == 22_800_000


def test_idle_outlier_names_its_cause(report):
    f = finding(report, "idle_outlier")
    assert f.ranks == [6] and f.devices == [2]
    assert f.figures["idle_ns"] == 10 * MS and f.figures["idle_pct"] == pytest.approx(16.722, abs=1e-3)
    assert f.figures["median_idle_pct"] == pytest.approx(1.672, abs=1e-3)
    assert f.figures["dominant_cause"] == "cpu_work" and f.figures["cause_pct"] > 90
    assert f.commands == [f"dashcam tool run gpu_gaps {f.reports[0]} --gpu 2"]


def test_slow_gpu_for_one_kernel(report):
    f = finding(report, "slow_gpu")
    assert f.ranks == [5] and f.devices == [1]
    assert f.figures == {"rank": 5, "gpu": 1, "kernel": "flash_fwd_kernel", "ratio": 1.5, "avg_ns": 3_000_000.0,
                         "median_avg_ns": 2_000_000.0, "slow_kernels": 1}


def test_the_corrupt_report_is_named_and_the_rest_analysed(report, straggler_dir):
    f = finding(report, "incomplete")
    assert f.reports == [str(straggler_dir / "report_8.sqlite")] and f.ranks == [8]
    assert f.figures == {"reports": 1, "fleet_reports": 9}
    bad = next(d for d in report.digests if d.path.endswith("report_8.sqlite"))
    assert bad.error_kind == "unreadable" and "truncated" in bad.error


def test_rank_table_rows(report):
    rows = {r.rank: r for r in report.rows}
    assert sorted(rows) == list(range(8))
    assert (rows[0].compute_step_ns, rows[0].collective_step_ns, rows[0].last_steps) == (6 * MS, 3_800_000, 0)
    # on one clock: rank 5 arrives 1 ms after the others' median (its 7 ms of compute), rank 6 1.5 ms (its gap)
    assert [rows[r].late_ns for r in range(8)] == [0, 0, 0, 1_800_000, 0, 1_000_000, 1_500_000, 0]
    assert [rows[r].last_arrivals for r in range(8)] == [0, 0, 0, 6, 0, 0, 0, 0]
    assert (rows[5].compute_step_ns, rows[5].collective_step_ns) == (7 * MS, 2_800_000)
    assert (rows[6].compute_step_ns, rows[6].collective_step_ns) == (6 * MS, 2_300_000)
    assert rows[3].flags == ["straggler"] and rows[6].flags == ["idle_outlier"] and rows[5].flags == ["slow_gpu"]
    assert rows[0].kernel_busy_pct == pytest.approx(98.328, abs=1e-3) and rows[0].host == "node-a"
    assert len(table_rows(report)) == 8  # small fleets list every GPU


def test_paragraph_is_grounded_and_short(report):
    from dashcam.evidence.grounding import check

    assert report.grounded, report.ungrounded_numbers
    assert len(report.paragraph.split()) <= 120
    assert report.paragraph.startswith("Rank 3 is the straggler: it arrived last at the collective in 6 of 6 "
                                       "collectives, a median 1.8 ms after the other ranks on one clock")
    assert "report_8.sqlite" in report.paragraph
    ok, bad = check("Rank 3 computes 9.9 ms per step.", report.evidence())
    assert not ok and bad == ["9.9 ms"]


def test_renderings(report):
    text, md = to_text(report), to_markdown(report)
    assert text.startswith("dashcam fleet: straggler  (9 reports on 2 hosts, 8 GPUs compared; ranks from the "
                           "environment (SLURM_PROCID) 8, the file name 1)\none clock: each report's recorded session "
                           "start (UTC); 6 collectives compared, clock uncertainty 0 ms")
    assert "rank  host" in text and "drill down:" in text
    assert md.startswith("### dashcam fleet: straggler") and "| 3 | node-a | 3 |" in md


def test_digests_are_small(report):
    for d in report.digests:
        assert len(d.model_dump_json()) < 100_000


def test_stored_steps_are_packed_and_read_back_exactly(report, tmp_path):
    from dashcam.fleet import store

    d = next(d for d in report.digests if d.devices and d.devices[0].steps.compute_ns)
    f = tmp_path / "report_0.sqlite"
    f.write_bytes(b"a report")
    st = f.stat()
    d = d.model_copy(update={"path": str(f), "size": st.st_size, "mtime_ns": st.st_mtime_ns})
    store.save(f, d)
    entry = json.loads(store.entry_path(f).read_text())
    assert isinstance(entry["devices"][0]["steps"], str)  # one string per device, not thousands of numbers
    back = store.load(f)
    assert back == d and back.devices[0].steps.compute_ns == d.devices[0].steps.compute_ns
    entry["devices"][0]["steps"] = entry["devices"][0]["steps"][:-8]  # damaged: digested again, not trusted
    store.entry_path(f).write_text(json.dumps(entry))
    assert store.load(f) is None


def test_a_rerun_maps_only_changed_reports(tmp_path, monkeypatch):
    monkeypatch.delenv("DASHCAM_CACHE_DIR")  # the digests beside the reports, in .dashcam-fleet/
    folder = fleets.uniform_fleet(tmp_path)
    first = analyse([str(folder)], workers=1)
    assert first.mapped == 4 and (folder / ".dashcam-fleet" / "report_0.sqlite.json").is_file()
    again = analyse([str(folder)], workers=1)
    assert again.mapped == 0 and again.model_dump(exclude={"mapped"}) == first.model_dump(exclude={"mapped"})
    f = folder / "report_3.sqlite"
    st = f.stat()
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))  # touched: the fingerprint holds the mtime
    assert analyse([str(folder)], workers=1).mapped == 1
    fleets.straggler_fleet(tmp_path / "other")
    for name in ("report_1.sqlite", "report_5.sqlite"):  # one report changed, one new
        (folder / name).write_bytes((tmp_path / "other" / "report_3.sqlite").read_bytes())
    r = analyse([str(folder)], workers=1)
    assert (r.reports, r.mapped) == (5, 2)


# -- other fleets ---------------------------------------------------------------------------------------

def test_node_straggler(tmp_path):
    r = analyse([str(fleets.node_fleet(tmp_path))], workers=1)
    assert r.verdict == "straggler" and r.units == 16
    f = finding(r, "node_straggler")
    # the node reports record SLURM_PROCID 0 and 8 (their first ranks): node-b's report is rank 8
    assert f.hosts == ["node-b"] and f.ranks == [8] and f.devices == list(range(8))
    assert r.rank_sources == {"env:SLURM_PROCID": 2}
    assert f.figures["late_ns"] == 1_800_000 and f.figures["late_collectives"] == 6
    assert f.figures["compute_between_ns"] == 7_800_000 and f.figures["others_compute_between_ns"] == 6 * MS
    assert f.figures["compute_excess_pct"] == 30.0 and f.figures["cause"] == "compute"
    assert not [x for x in r.findings if x.kind == "straggler"]
    assert r.grounded, r.ungrounded_numbers


def test_one_report_of_a_whole_node(tmp_path):
    r = analyse([str(fleets.node_report(tmp_path / "node.sqlite"))], workers=1)
    assert r.units == 8 and r.rank_sources == {"env:SLURM_PROCID": 1}
    f = finding(r, "straggler")
    assert f.devices == [5] and f.ranks == [0] and f.title.startswith("rank 0 GPU 5 is the straggler")
    assert f.figures["last_arrivals"] == 6 and f.figures["compute_excess_pct"] == 30.0


def test_uniform_fleet(tmp_path):
    r = analyse([str(fleets.uniform_fleet(tmp_path))], workers=1)
    assert r.verdict == "uniform" and r.findings == []
    assert all(row.last_steps == 0 and row.voted_steps == 6 for row in r.rows)
    assert r.paragraph.startswith("The 4 GPUs of the 4 analysed reports look alike") and r.grounded
    busy = {f"{row.kernel_busy_pct:.1f}" for row in r.rows}  # one figure, not a range from it to itself
    assert len(busy) == 1 and f"look alike: each kernel-busy {busy.pop()} %," in r.paragraph


@pytest.fixture(scope="module")
def uniform_digests(tmp_path_factory):
    folder = fleets.uniform_fleet(tmp_path_factory.mktemp("uniform"))
    return [digest(str(p)) for p in discover([str(folder)])]


def _reduce(digests):
    for i, d in enumerate(digests):
        d.rank = i
    return reduce(digests, {"name": len(digests)})


def test_kernel_mix(uniform_digests):
    ds = [d.model_copy(deep=True) for d in uniform_digests]
    ds[2].devices[0].top[0].name = "fp32_gemm_fallback_kernel"
    r = _reduce(ds)
    f = finding(r, "kernel_mix")
    assert r.verdict == "imbalanced" and f.ranks == [2]
    assert f.figures == {"rank": 2, "gpu": 2, "extra_kernels": 1, "missing_kernels": 1}


def test_unequal_steps_versions_and_models_are_incomplete(uniform_digests):
    ds = [d.model_copy(deep=True) for d in uniform_digests]
    steps = ds[1].devices[0].steps
    for k in ("compute_ns", "comm_ns", "exposed_comm_ns", "idle_ns", "collective_ns", "collective"):
        setattr(steps, k, getattr(steps, k)[:4])
    ds[3].nsys_version = "2025.1.1"
    ds[0].devices[0].gpu_name = "NVIDIA A100-SXM4-80GB"
    r = _reduce(ds)
    titles = [f.title for f in r.findings if f.kind == "incomplete"]
    assert titles == ["1 GPU captured a number of steps other than most GPUs' 6", "2 nsys versions in the fleet",
                      "2 GPU models in the fleet"]
    assert r.step_comparison["steps_compared"] == 4 and r.verdict == "incomplete"


def test_a_fleet_of_many_nsys_versions_names_three_and_counts_the_rest(uniform_digests):
    ds = [d.model_copy(deep=True) for d in uniform_digests] * 2  # the 4 reports twice: 8
    ds = [d.model_copy(deep=True) for d in ds]
    for d, v in zip(ds, ["2025.1", "2025.1", "2025.1", "2024.5", "2024.5", "2026.1", "2023.4", "2022.2"]):
        d.nsys_version = v
    f = next(f for f in _reduce(ds).findings if f.title == "5 nsys versions in the fleet")
    assert f.sentence == ("The reports come from 5 nsys versions: `2025.1` (3), `2024.5` (2), `2026.1` (1) "
                          "and 2 others (2).")


def test_subgroups_vote_apart(uniform_digests):
    """Ranks whose main collective is another kernel are compared only among themselves: a group of 2 casts no
    vote, so the shorter collectives of ranks 0-1 (another group) single nobody out."""
    ds = [d.model_copy(deep=True) for d in uniform_digests]
    for d in ds[:2]:
        d.collectives = ["ncclDevKernel_AllGather_RING_LL"]
        d.devices[0].steps.collective_ns = [x // 2 for x in d.devices[0].steps.collective_ns]
    r = _reduce(ds)
    assert {row.rank: row.voted_steps for row in r.rows} == {0: 0, 1: 0, 2: 0, 3: 0}
    assert r.verdict == "uniform"


def test_a_thousand_ranks_reduce_fast_and_the_table_stays_short(uniform_digests):
    base = uniform_digests[0]
    ds = []
    for i in range(1024):
        d = base.model_copy(deep=True)
        d.path, d.host = f"/runs/report_{i:04d}.sqlite", f"node{i // 8}"
        scale = 1.3 if i == 77 else 1.0 + (i % 7) * 0.004
        s = d.devices[0].steps
        s.compute_ns = [round(x * scale) for x in s.compute_ns]
        c = d.devices[0].coll
        shift = 2 * MS if i == 77 else (i % 7) * 4_000  # 77 arrives 2 ms late; all end together
        c.start_ns, c.dur_ns = [x + shift for x in c.start_ns], [x - shift for x in c.dur_ns]
        if i == 77:
            s.collective_ns = [x // 2 for x in s.collective_ns]
        ds.append(d)
    r = _reduce(ds)  # its time at 1,024 ranks is bench/bench_fleet.py's warm run (docs/fleet.md)
    assert finding(r, "straggler").ranks == [77]
    rows = table_rows(r)
    assert [x[0] for x in rows[-3:]] == ["p10", "median", "p90"] and len(rows) <= 3 + 3 + 1 + 3
    assert "77" in [x[0] for x in rows]


# -- identity and inputs --------------------------------------------------------------------------------

def test_ranks_from_names():
    paths = [Path(f"run/report_{r:04d}.sqlite") for r in (0, 7, 77)]
    assert ranks_from_names(paths) == [0, 7, 77]
    assert ranks_from_names([Path("job12_rank3.sqlite"), Path("job12_rank4.sqlite")]) == [3, 4]
    assert ranks_from_names([Path("job12_rank3.sqlite")], r"job(\d+)") == [12]
    assert ranks_from_names([Path("a_1.sqlite"), Path("b_1.sqlite")]) == [None, None]  # duplicates: not ranks
    assert ranks_from_names([Path("node.sqlite")]) == [None]
    with pytest.raises(BadParameter):
        ranks_from_names(paths, "(")


def test_the_largest_reports_are_digested_first(tmp_path):
    from dashcam.fleet.execute import biggest_first

    sizes = [10, 300, 10, 5, 300]
    paths = []
    for i, n in enumerate(sizes):
        paths.append(tmp_path / f"report_{i}.sqlite")
        paths[-1].write_bytes(b"x" * n)
    paths.append(tmp_path / "missing.sqlite")
    assert biggest_first(paths) == [1, 4, 0, 2, 3, 5]  # ties and the missing file keep the given order


def test_ranks_from_the_environment_then_the_order(tmp_path):
    for name, rank in (("alpha", 5), ("beta", 2)):
        fleets.node_report(tmp_path / f"{name}.sqlite")
        import sqlite3

        con = sqlite3.connect(tmp_path / f"{name}.sqlite")
        con.execute("UPDATE META_DATA_CAPTURE SET value = ? WHERE name LIKE '%ENVIRONMENT_VARIABLE'",
                    (f'RANK="{rank}"',))
        con.commit()
        con.close()
    (tmp_path / "gamma.sqlite").write_bytes(b"")
    r = analyse([str(tmp_path)], workers=1)
    ranks = {Path(d.path).name: (d.rank, d.rank_source) for d in r.digests}
    assert ranks == {"alpha.sqlite": (5, "env:RANK"), "beta.sqlite": (2, "env:RANK"), "gamma.sqlite": (0, "order")}


def test_discover_and_is_fleet(tmp_path):
    for n in ("r_1.sqlite", "r_2.sqlite", "r_2.nsys-rep", "r_3.nsys-rep", "notes.txt"):
        (tmp_path / n).write_bytes(b"x")
    assert [p.name for p in discover([str(tmp_path)])] == ["r_1.sqlite", "r_2.sqlite", "r_3.nsys-rep"]
    assert [p.name for p in discover([str(tmp_path / "r_*.sqlite")])] == ["r_1.sqlite", "r_2.sqlite"]
    assert is_fleet(str(tmp_path)) and is_fleet("runs/*.sqlite") and is_fleet(["a.sqlite", "b.sqlite"])
    assert not is_fleet("a.sqlite") and not is_fleet(None)
    with pytest.raises(NoReports):
        discover([str(tmp_path / "none_*.sqlite")])


# -- the tool underneath: iterations per_device ----------------------------------------------------------

def test_iterations_per_device(tmp_path):
    from dashcam.profile import Profile
    from dashcam.tools import get_tool

    p = Profile.open(scenarios.nccl_exposed(tmp_path / "x.sqlite"))
    r = get_tool("iterations")(p, {"per_device": True})
    assert r.step_count == 4 and len(r.step_devices) == 8
    s = r.step_devices[0]
    assert (s.index, s.device_id, s.compute_ns, s.comm_ns, s.exposed_comm_ns, s.kernel_idle_ns, s.collective_ns) == \
        (0, 0, 6 * MS, 4 * MS, 4 * MS, 0, 4 * MS)
    assert s.collective == scenarios.NCCL_KERNEL
    assert get_tool("iterations")(p, {}).step_devices == []


# -- the command line ------------------------------------------------------------------------------------

def test_cli_fleet_summary_and_ask(cli, straggler_dir, report):
    r = cli("fleet", str(straggler_dir), "--workers", "1", "--format", "json")
    assert r.returncode == 0
    data = json.loads(r.stdout)
    assert data["verdict"] == "straggler" and data["paragraph"] == report.paragraph
    r = cli("summary", str(straggler_dir), "--format", "markdown")
    assert r.returncode == 0 and r.stdout.startswith("### dashcam fleet: straggler")
    r = cli("ask", "which rank is the straggler?", str(straggler_dir), "--json")
    a = json.loads(r.stdout)
    assert a["answer"].startswith("Rank 3 is the straggler") and a["drill"] is None and a["grounded"]


def test_a_fleet_question_about_one_kind_of_finding_leads_with_it(report):
    from dashcam.agent.fleet import ask_fleet

    lead = {f.kind: f.sentence for f in report.findings}
    for question, kind in (("did any capture fail?", "incomplete"), ("which gpu is slower at the same kernel?",
                           "slow_gpu"), ("is any rank idle a lot?", "idle_outlier")):
        a = ask_fleet(question, report, offline=True)
        assert a.answer == lead[kind] + " " + report.paragraph and a.grounded, question
    a = ask_fleet("which node is slow?", report, offline=True)  # one host per rank here: no node straggler
    assert a.answer == "No node holds the others back. " + report.paragraph
    assert ask_fleet("which rank is the straggler?", report, offline=True).answer == report.paragraph


def test_a_chinese_fleet_question_is_read_as_its_english_words(report):
    from dashcam.agent.fleet import ask_fleet
    from dashcam.agent.language import NOTE_SIMPLIFIED

    lead = {f.kind: f.sentence for f in report.findings}
    a = ask_fleet("有没有哪个 rank 闲置很多？", report, offline=True)
    assert a.answer == NOTE_SIMPLIFIED + "\n" + lead["idle_outlier"] + " " + report.paragraph and a.grounded
    a = ask_fleet("どのランクが遅いですか", report, offline=True)
    assert a.answer.startswith("dashcam does not understand questions in Japanese") and a.drill is None


def test_ask_drills_into_a_rank_and_a_gpu_on_a_node(cli, straggler_dir):
    a = json.loads(cli("ask", "why is rank 6 idle?", str(straggler_dir), "--json", "--offline").stdout)
    assert a["target"]["report"].endswith("report_6.sqlite") and a["drill"]["intent"] == "idle"
    assert "collate_batch" in a["answer"] and a["grounded"]
    a = json.loads(cli("ask", "why is GPU 1 on node node-b slow?", str(straggler_dir), "--json",
                            "--offline").stdout)
    assert a["target"]["host"] == "node-b" and a["target"]["report"].endswith("report_5.sqlite")
    r = cli("ask", "why is rank 99 slow?", str(straggler_dir))
    assert r.returncode == BadParameter.exit_code and "no rank 99" in r.stderr


def test_a_drilled_answer_starts_with_what_the_fleet_found_about_that_rank(cli, straggler_dir):
    """Rank 3's own report shows its collectives exposed; that the others wait for it is the fleet's finding,
    and comes first. A rank the findings do not name gets its report's answer only."""
    a = json.loads(cli("ask", "why is rank 3 slow?", str(straggler_dir), "--json", "--offline").stdout)
    assert a["in_fleet"].startswith("Rank 3 is the straggler: it arrived last at the collective in 6 of 6 collectives")
    assert a["answer"].startswith("On rank 3 (") and "): In the fleet: Rank 3 is the straggler" in a["answer"]
    assert a["answer"].endswith("In its own report: " + a["drill"]["answer"]) and a["grounded"]
    shown = cli("ask", "why is rank 3 slow?", str(straggler_dir), "--offline").stdout
    assert "In the fleet: Rank 3 is the straggler" in " ".join(shown.split())
    b = json.loads(cli("ask", "why is rank 2 slow?", str(straggler_dir), "--json", "--offline").stdout)
    assert b["in_fleet"] is None and b["answer"] == f"On rank 2 ({b['target']['report']}): " + b["drill"]["answer"]


def test_cli_exit_codes(cli, tmp_path, straggler_dir):
    empty = tmp_path / "empty"
    empty.mkdir()
    r = cli("fleet", str(empty))
    assert r.returncode == NoReports.exit_code and r.stderr.count("\n") == 1
    r = cli("fleet", str(straggler_dir), "--workers", "0")
    assert r.returncode == BadParameter.exit_code
    r = cli("summary", str(straggler_dir), "--llm")
    assert r.returncode == BadParameter.exit_code


def test_fleet_thresholds_are_in_definitions():
    text = (Path(__file__).resolve().parents[1] / "docs" / "definitions.md").read_text()
    for name, value in THRESHOLDS.items():
        row = next((ln for ln in text.splitlines() if ln.startswith("|") and f"`{name}`" in ln), None)
        assert row is not None, name
        assert re.search(rf"\|\s*{value:g}\s*\|", row), row


def test_a_digest_of_a_missing_file_is_an_error_not_an_exception(tmp_path):
    d = digest(str(tmp_path / "gone.sqlite"))
    assert isinstance(d, Digest) and d.error_kind == "unreadable" and "no such file" in d.error.lower()


def test_fleet_chat(report):
    from rich.console import Console

    from dashcam.agent.fleet import run_fleet_chat

    lines = iter(["which rank is the straggler?", "/fleet", "/nope", "/exit"])
    console = Console(record=True, width=200)
    assert run_fleet_chat(report, console, offline=True, read=lambda prompt="": next(lines)) == 0
    out = console.export_text()
    assert out.count("Rank 3 is the straggler") == 2 and "fleet chat commands" in out


def test_the_progress_bar_keeps_its_width_and_says_what_it_does():
    """Rendered on an 80-column terminal: the status before the first report, then a 200-character report name
    cut in the middle to NAME_WIDTH, and the bar BAR_WIDTH characters wide whatever the name."""
    import io

    from rich.console import Console

    from dashcam.fleet.progress import BAR_WIDTH, NAME_WIDTH, ReportBar, fit_name

    def line(bar: ReportBar) -> str:
        out = Console(file=io.StringIO(), width=80, force_terminal=True, color_system=None)
        out.print(bar.progress.get_renderable())
        return out.file.getvalue().rstrip("\n")

    bar = ReportBar(9, True, console=Console(file=io.StringIO(), force_terminal=True))
    try:
        bar.status("starting 2 Dask workers…")
        first = line(bar)
        assert first.startswith("starting 2 Dask workers…") and "0/9" in first
        name = "report_" + "x" * 180 + "_node_b_rank_0007.sqlite"
        bar.advance(name)
        second = line(bar)
        assert second.startswith(fit_name(name)) and len(fit_name(name)) == NAME_WIDTH == 36
        assert fit_name(name) == "report_xxxxxxxxxx…b_rank_0007.sqlite"  # 17 + 1 + 18: its start and its end
        # name, a space, the bar (1/9 of it drawn: 3 of 30 characters), a space, the count
        assert second.index("1/9") == NAME_WIDTH + 1 + BAR_WIDTH + 1 and BAR_WIDTH == 30
        assert second[NAME_WIDTH + 1:NAME_WIDTH + 1 + BAR_WIDTH] == "━" * 3 + " " * 27
        assert len(second) <= 80
    finally:
        bar.close()
    assert fit_name("report_3.sqlite") == "report_3.sqlite"
    assert ReportBar(9, False).progress is None  # not a terminal: nothing
