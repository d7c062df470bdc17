"""The fleet on one clock (fleet/identity.py, collectives.py, arrivals.py): planted pure-NCCL fleets whose
arrivals, waits, clocks and ranks are known by construction (dashcam.testing.fleets: nccl_fleet and friends)."""
from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from dashcam.fleet import analyse, to_text
from dashcam.fleet.identity import read_clock, read_identity
from dashcam.testing import fleets
from dashcam.testing.fleets import CLOCK_ERROR, COLLECTIVES, LATE, LATE_INIT, MS, NOISE_US, SESSION, T0, US, pid_of


@pytest.fixture(scope="module")
def node_dir(tmp_path_factory) -> Path:
    return fleets.late_node_fleet(tmp_path_factory.mktemp("late_node"))


@pytest.fixture(scope="module")
def node(node_dir):
    return analyse([str(node_dir)], workers=1)


@pytest.fixture(scope="module")
def rank_dirs(tmp_path_factory) -> dict[bool, Path]:
    return {env: fleets.late_rank_fleet(tmp_path_factory.mktemp(f"late_rank_{env}"), env=env) for env in (True, False)}


@pytest.fixture(scope="module")
def ranks(rank_dirs):
    return {env: analyse([str(d)], workers=1) for env, d in rank_dirs.items()}


def finding(report, kind):
    found = [f for f in report.findings if f.kind == kind]
    assert len(found) == 1, [f.kind for f in report.findings]
    return found[0]


# -- identity and clock ----------------------------------------------------------------------------------

def test_ranks_come_from_the_environment_not_the_pid_in_the_file_name(node, node_dir):
    assert node.rank_sources == {"env:SLURM_PROCID": 9}
    by_name = {Path(d.path).name: d.rank for d in node.digests}
    assert by_name == {f"{h}_{pid_of(r)}.sqlite": r for h, rs in (("node-a", range(3)), ("node-b", range(3, 6)),
                                                                  ("node-c", range(6, 9))) for r in rs}
    assert to_text(node).startswith("dashcam fleet: straggler  (9 reports on 3 hosts, 9 GPUs compared; ranks from "
                                    "the environment (SLURM_PROCID) 9)")


def test_without_a_recorded_rank_the_file_name_is_the_last_resort_and_said_so(ranks):
    assert ranks[False].rank_sources == {"name": 6}
    assert "ranks from the file name 6" in to_text(ranks[False])
    assert ranks[True].rank_sources == {"env:SLURM_PROCID": 6}


def test_read_identity_and_the_two_timestamp_conventions(node_dir):
    a, b, c = (sorted(node_dir.glob(f"node-{h}_*.sqlite"))[0] for h in "abc")
    ident = read_identity(a)
    assert ident.host == "node-a" and ident.env_ranks == {"SLURM_PROCID": 0, "PMI_RANK": 0}
    assert [(g.device_id, g.uuid, g.bus) for g in ident.gpus] == [(0, "uuid-0", "0000:00:00.0")]
    ca, cb, cc = (read_clock(p, None) for p in (a, b, c))
    assert (ca.normalized, ca.source, ca.offset_ns) == (False, "none", SESSION)  # no export parameter recorded
    assert (cb.normalized, cb.source, cb.offset_ns) == (False, "param", SESSION + 5 * MS)
    assert (cc.normalized, cc.source, cc.offset_ns) == (True, "param", 0)
    assert read_clock(c, SESSION + T0).normalized is True
    assert read_clock(a, T0).normalized is False  # an old export: the timestamps' size tells


# -- the arrival table -----------------------------------------------------------------------------------

def kern_pace(folder: Path) -> dict[int, list[int]]:
    """What `nsys recipe cuda_gpu_kern_pace` lists per rank: each NCCL kernel's start on the session clock, here
    UTC epoch ns from the raw tables (relative timestamps + the recorded session start; normalized ones as
    they are). Computed from its definition: the recipe needs .nsys-rep inputs, and these are SQLite exports."""
    out = {}
    for f in folder.glob("*.sqlite"):
        con = sqlite3.connect(f)
        start = con.execute("SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME").fetchone()[0]
        norm = con.execute("SELECT value FROM META_DATA_EXPORT WHERE name = 'EXPORT_PARAM_TIME_NORMALIZE'").fetchone()
        rank = int(dict(s.split("=") for s in con.execute(
            "SELECT value FROM TARGET_INFO_SYSTEM_ENV WHERE name = 'DeviceEnvironment'").fetchone()[0].split(";"))
            ["SLURM_PROCID"])
        base = 0 if norm and norm[0] == "true" else start
        out[rank] = [s + base for (s,) in con.execute(
            "SELECT k.start FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.shortName "
            "WHERE s.value LIKE 'nccl%' ORDER BY k.start")]
        con.close()
    return out


def test_arrivals_are_the_kern_pace_figures_on_one_clock(node, node_dir):
    a = node.arrivals
    assert a.clock == "utc" and a.collectives_compared == COLLECTIVES and a.kinds == {"AllReduce": COLLECTIVES}
    assert a.ranks == list(range(9)) and len(a.collectives) == COLLECTIVES
    pace = kern_pace(node_dir)
    for row in a.collectives:
        assert row.arrival_ns == [pace[r][row.index] - a.clock_zero_utc_ns for r in a.ranks]
    assert a.clock_zero_utc_ns == SESSION + T0 + fleets.FIRST_AT  # node-a's first arrival, exact in UTC


def test_waits_skew_and_the_clock_uncertainty(node):
    a = node.arrivals
    # node-c's clock runs CLOCK_ERROR ahead: the ends spread by that much, the stated uncertainty
    assert a.clock_uncertainty_ns == CLOCK_ERROR and a.threshold_ns == 1 * MS
    later = a.collectives[1]
    assert later.wait_ns == [LATE] * 3 + [0] * 3 + [LATE - CLOCK_ERROR] * 3
    assert later.skew_ns == LATE and later.end_spread_ns == CLOCK_ERROR and later.last_rank == 3
    assert later.transfer_ns == fleets.TRANSFER  # the median end (node-a, node-b on time) - the last arrival
    first = a.collectives[0]
    assert first.wait_ns == [LATE_INIT] * 3 + [0] * 3 + [LATE_INIT - CLOCK_ERROR] * 3
    assert [r.late_ns for r in node.rows] == a.late_ns


def test_late_node_is_named_with_its_cause_chain(node):
    f = finding(node, "node_straggler")
    assert f.hosts == ["node-b"] and f.ranks == [3, 4, 5] and node.verdict == "straggler"
    late = LATE - CLOCK_ERROR // 2  # against the other nodes' median: node-a on time, node-c 200 us ahead
    assert f.figures == {"host": "node-b", "gpus_on_host": 3, "late_collectives": COLLECTIVES,
                         "collectives_compared": COLLECTIVES, "late_ns": late, "clock_uncertainty_ns": CLOCK_ERROR,
                         "threshold_ns": 1 * MS, "first_late_ns": LATE_INIT - CLOCK_ERROR // 2,
                         "cause": "comm_init, host", "comm_init_late_ns": LATE_INIT - CLOCK_ERROR // 2,
                         "host_idle_excess_ns": LATE - sorted(NOISE_US)[1] * US}
    assert f.sentence.startswith("Node `node-b` is the straggler: its 3 GPUs (ranks 3, 4, 5) arrived a median "
                                 "11.9 ms after the other nodes' at 8 of 8 collectives on one clock (clock "
                                 "uncertainty 0.2 ms)")
    assert "--trace=cuda,nvtx,osrt,mpi" in f.sentence  # the capture has no host-side data: the options that do
    assert node.paragraph.startswith(f.sentence) and node.grounded, node.ungrounded_numbers


def test_microseconds_of_compute_are_never_a_cause(node, ranks):
    """The late ranks run 3-17 us of helper kernels before each collective, the others none."""
    for r in (node, ranks[True]):
        assert all("compute" not in f.figures.get("cause", "") for f in r.findings)
        assert not [f for f in r.findings if f.kind in ("kernel_mix", "slow_gpu")]
    assert "compute +" not in to_text(node)


def test_late_single_rank(ranks):
    for r in ranks.values():
        f = finding(r, "straggler")
        assert f.ranks == [4] and f.hosts == ["node-b"] and not [x for x in r.findings if x.kind == "node_straggler"]
        assert f.figures == {"rank": 4, "gpu": 1, "last_arrivals": COLLECTIVES, "collectives_compared": COLLECTIVES,
                             "late_ns": LATE, "clock_uncertainty_ns": 0, "threshold_ns": 1 * MS, "first_late_ns": LATE,
                             "cause": "host", "host_idle_excess_ns": LATE - NOISE_US[1] * US}
        assert r.arrivals.collectives[3].wait_ns == [LATE] * 4 + [0, LATE]
        assert f.title == "rank 4 is the straggler: last in 8 of 8 collectives, 12 ms late (host)"


def test_no_one_late_within_the_clock_error_is_uniform(tmp_path):
    hosts = {"node-a": [0, 1, 2], "node-b": [3, 4, 5]}
    folder = fleets.nccl_fleet(tmp_path, hosts, {}, clocks={"node-b": (700 * US, False)})
    r = analyse([str(folder)], workers=1)
    assert r.verdict == "uniform" and r.findings == []
    assert r.arrivals.collectives[2].skew_ns == 0 and r.arrivals.clock_uncertainty_ns == 0


def test_reports_without_a_session_start_are_left_off_the_clock(tmp_path):
    folder = fleets.late_rank_fleet(tmp_path)
    for f in folder.glob("*.sqlite"):
        con = sqlite3.connect(f)
        con.execute("DROP TABLE TARGET_INFO_SESSION_START_TIME")
        con.commit()
        con.close()
    r = analyse([str(folder)], workers=1)
    assert r.arrivals is None  # no common clock: no arrival table, the steps decide, and the heading says so
    assert to_text(r).splitlines()[1] == ("no common clock: 6 reports record no session start time, so the "
                                          "collectives are not lined up; stragglers come from the steps")


# -- the surfaces say the same -----------------------------------------------------------------------------

def test_ask_which_node_is_slow_and_why_rank_8_is_slow(node, node_dir):
    from dashcam.agent.fleet import ask_fleet

    a = ask_fleet("which node is slow?", node, offline=True)
    assert a.answer.startswith("Node `node-b` is the straggler") and a.grounded
    b = ask_fleet("why is rank 8 slow?", node, offline=True)  # rank 8 from SLURM_PROCID; its file name is a pid
    assert b.target.rank == 8 and b.target.report == str(node_dir / f"node-c_{pid_of(8)}.sqlite")
    c = ask_fleet("why is rank 4 slow?", node, offline=True)
    assert c.in_fleet.startswith("Node `node-b` is the straggler")


def test_cli_json_carries_the_arrival_table_and_summary_says_the_same(cli, node_dir, node):
    r = cli("fleet", str(node_dir), "--workers", "1", "--format", "json")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["paragraph"] == node.paragraph
    assert data["arrivals"]["collectives"][1]["wait_ns"][:4] == [LATE, LATE, LATE, 0]
    assert data["arrivals"]["clock_uncertainty_ns"] == CLOCK_ERROR
    s = cli("summary", str(node_dir), "--format", "markdown")
    assert s.returncode == 0 and node.paragraph.split(" Why:")[0] in " ".join(s.stdout.split())



def test_the_others_median_is_exact():
    import numpy as np

    from dashcam.fleet.arrivals import others_median

    rng = np.random.default_rng(7)
    for n in (2, 3, 4, 5, 8, 9):
        a = rng.integers(0, 100, (n, 6)).astype(float)
        a[rng.random((n, 6)) < 0.2] = np.nan
        got = others_median(a)
        for i in range(n):
            for j in range(6):
                rest = np.delete(a[:, j], i)
                rest = rest[~np.isnan(rest)]
                want = np.nan if np.isnan(a[i, j]) or not len(rest) else np.median(rest)
                assert (np.isnan(want) and np.isnan(got[i, j])) or got[i, j] == want


def test_a_late_node_holding_most_ranks_is_still_the_node(tmp_path):
    """node-b holds 4 of 6 ranks: against all the others' median it is not late, against node-a it is."""
    hosts = {"node-a": [0, 1], "node-b": [2, 3, 4, 5]}
    r = analyse([str(fleets.nccl_fleet(tmp_path, hosts, dict.fromkeys(range(2, 6), (LATE, 0))))], workers=1)
    f = finding(r, "node_straggler")
    assert f.hosts == ["node-b"] and f.figures["late_ns"] == LATE and f.figures["late_collectives"] == COLLECTIVES


def test_a_capture_that_started_late_is_matched_by_the_collectives_ends(tmp_path):
    """Rank 1's capture misses the first two all-reduces: its six are matched to the 3rd-8th by their ends."""
    folder = fleets.late_rank_fleet(tmp_path)
    f = folder / f"node-a_{pid_of(1)}.sqlite"
    con = sqlite3.connect(f)
    con.execute("DELETE FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE rowid IN (SELECT k.rowid FROM CUPTI_ACTIVITY_KIND_KERNEL "
                "k JOIN StringIds s ON s.id = k.shortName WHERE s.value LIKE 'nccl%' ORDER BY k.start LIMIT 2)")
    con.commit()
    con.close()
    r = analyse([str(folder)], workers=1)
    a = r.arrivals
    assert a.collectives_compared == COLLECTIVES and a.compared == [8, 6, 8, 8, 8, 8]
    assert a.collectives[0].arrival_ns[1] is None and a.collectives[3].wait_ns == [LATE] * 4 + [0, LATE]
    assert finding(r, "straggler").ranks == [4] and finding(r, "straggler").figures["late_ns"] == LATE


def test_lateness_within_twice_the_clock_error_is_no_verdict(tmp_path):
    """node-b's clock runs 3 ms ahead (its ends spread the collectives by 3 ms): rank 1 (node-a), 4 ms late, is
    below the threshold of twice that uncertainty, so nobody is named; at 8 ms late it is."""
    hosts = {"node-a": [0, 1, 2], "node-b": [3, 4, 5], "node-c": [6, 7, 8]}
    for late, named in ((4 * MS, False), (8 * MS, True)):
        folder = fleets.nccl_fleet(tmp_path / str(late), hosts, {1: (late, 0)}, clock_error={"node-b": 3 * MS})
        r = analyse([str(folder)], workers=1)
        assert r.arrivals.clock_uncertainty_ns == 3 * MS and r.arrivals.threshold_ns == 6 * MS
        assert r.arrivals.late_ns[1] == late  # against the others' median: five on time, three 3 ms "late"
        assert [f.ranks for f in r.findings if f.kind == "straggler"] == ([[1]] if named else [])


def test_the_host_time_before_a_late_launch_is_named_when_recorded(tmp_path):
    """Rank 4's extra 12 ms before each all-reduce are in MPI_Wait inside a poll() call (--trace=mpi,osrt)."""
    folder = fleets.nccl_fleet(tmp_path, {"node-a": [0, 1, 2], "node-b": [3, 4, 5]}, {4: (LATE, 0)}, host_calls=True)
    f = finding(analyse([str(folder)], workers=1), "straggler")
    assert f.ranks == [4] and f.figures["cause"] == "host, mpi, osrt"
    assert f.figures["mpi_excess_ns"] == LATE and f.figures["osrt_excess_ns"] == LATE
    assert "its host spends 12 ms more in MPI calls before each collective" in f.sentence
    assert "--trace=cuda,nvtx,osrt,mpi" not in f.sentence  # the capture shows it: no options to record it


def test_a_late_start_is_the_root_not_the_communicator_init_it_delays(tmp_path):
    """Rank 4 starts LATE_INIT late (its first CUDA call and its init with it), then keeps LATE behind."""
    hosts = {"node-a": [0, 1, 2], "node-b": [3, 4, 5]}
    folder = fleets.nccl_fleet(tmp_path / "start", hosts, {4: (LATE, LATE_INIT)}, late_start=True)
    f = finding(analyse([str(folder)], workers=1), "straggler")
    assert f.figures["cause"] == "start, host" and f.figures["start_late_ns"] == LATE_INIT
    assert f.figures["first_late_ns"] == LATE_INIT and "comm_init_late_ns" not in f.figures
    assert "Why: it started 20 ms after the others (its first CUDA call); its GPU sits idle" in f.sentence
    folder = fleets.nccl_fleet(tmp_path / "init", hosts, {4: (LATE, LATE_INIT)})  # started on time, init late
    f = finding(analyse([str(folder)], workers=1), "straggler")
    assert f.figures["cause"] == "comm_init, host" and f.figures["comm_init_late_ns"] == LATE_INIT


def test_repeated_collectives_make_the_verdict_last_in_7_of_8(tmp_path):
    """Rank 4 is on time at the 6th all-reduce, late at the other 7; with 5 of 8 on time it is named no more."""
    hosts = {"node-a": [0, 1, 2], "node-b": [3, 4, 5]}
    folder = fleets.nccl_fleet(tmp_path / "seven", hosts, {4: (LATE, 0)}, on_time={4: {5}})
    f = finding(analyse([str(folder)], workers=1), "straggler")
    assert (f.figures["last_arrivals"], f.figures["collectives_compared"], f.figures["late_ns"]) == (7, 8, LATE)
    assert f.sentence.startswith("Rank 4 is the straggler: it arrived last at the collective in 7 of 8 collectives")
    folder = fleets.nccl_fleet(tmp_path / "three", hosts, {4: (LATE, 0)}, on_time={4: {1, 2, 3, 5, 6}})
    r = analyse([str(folder)], workers=1)
    assert r.arrivals.last_count[4] == 3 and not [x for x in r.findings if x.kind == "straggler"]


# -- communicators ---------------------------------------------------------------------------------------

def test_collectives_are_matched_per_communicator_told_by_the_stream(tmp_path):
    """Two communicators of three ranks (streams 20 and 24) run their all-reduces at other times, and rank 4 is
    late in the second: matched by order across all six, the j-th all-reduces of both would be one collective."""
    r = analyse([str(fleets.subgroup_fleet(tmp_path))], workers=1)
    a = r.arrivals
    plan = fleets.subgroup_arrivals()
    assert a.ranks == list(range(6)) and a.collectives_compared == 2 * COLLECTIVES
    assert [(c.kind, c.stream, c.units, c.collectives) for c in a.communicators] == [
        ("AllReduce", 20, [0, 1, 2], COLLECTIVES), ("AllReduce", 24, [3, 4, 5], COLLECTIVES)]
    zero = SESSION + T0 - a.clock_zero_utc_ns
    seen = {20: 0, 24: 0}
    for row in a.collectives:
        members = fleets.SUBGROUPS[row.stream]
        j = seen[row.stream]
        assert row.occurrence == j
        seen[row.stream] += 1
        want = [plan[u][1][j] + zero if u in members else None for u in range(6)]
        assert row.arrival_ns == want
        last = max(plan[u][1][j] for u in members)
        assert row.wait_ns == [last - plan[u][1][j] if u in members else None for u in range(6)]
        assert row.last_rank == (4 if row.stream == 24 else 0) and row.end_spread_ns == 0
    assert seen == {20: COLLECTIVES, 24: COLLECTIVES}
    assert [row.wait_ns for row in a.collectives if row.stream == 24][3] == [None] * 3 + [LATE, 0, LATE]
    f = finding(r, "straggler")
    assert f.ranks == [4] and f.figures["last_arrivals"] == COLLECTIVES
    assert f.figures["collectives_compared"] == COLLECTIVES and f.figures["late_ns"] == LATE
    assert f.figures["first_late_ns"] == LATE
    assert [x.kind for x in r.findings] == ["straggler"]


def test_one_stream_per_rank_is_no_communicator_key(tmp_path):
    """Each rank's all-reduces on a stream id of its own (the ids tell nothing): matched by order across all."""
    folder = fleets.late_rank_fleet(tmp_path)
    import sqlite3 as sq

    for i, f in enumerate(sorted(folder.glob("*.sqlite"))):
        with sq.connect(f) as con:
            con.execute("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET streamId = ? WHERE streamId = 20", (30 + i,))
    r = analyse([str(folder)], workers=1)
    assert r.arrivals.communicators == [] and r.arrivals.collectives_compared == COLLECTIVES
    assert {row.stream for row in r.arrivals.collectives} == {None}
    assert finding(r, "straggler").ranks == [4]
