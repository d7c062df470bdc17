"""The fleet on Dask (src/dashcam/fleet/execute.py): the same JSON from `--workers 1`, a 2-worker LocalCluster and
an existing cluster (a `dask scheduler` and a `dask worker` started here on 127.0.0.1); a worker that dies is
retried once, then reported; an unreachable scheduler, workers without dashcam: one error each."""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dashcam.errors import SchedulerUnreachable, WorkersLackDashcam
from dashcam.fleet import analyse, to_json
from dashcam.testing import fleets


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(args: list[str], log: Path) -> subprocess.Popen:
    """A Dask process in its own session (so its children are stopped with it), output to ``log``."""
    return subprocess.Popen(args, stdout=open(log, "w"), stderr=subprocess.STDOUT, start_new_session=True)


def stop(*procs: subprocess.Popen) -> None:
    for p in procs:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGTERM)
    for p in procs:
        try:
            p.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait(timeout=10)


def wait_for_workers(address: str, n: int = 1, timeout: float = 60) -> None:
    from distributed import Client

    with Client(address, timeout=timeout) as c:
        c.wait_for_workers(n, timeout=timeout)


SCHEDULER = [sys.executable, "-m", "distributed.cli.dask_scheduler"]
FREE_HTTP = ["--dashboard-address", "127.0.0.1:0"]  # its HTTP endpoints, served without a dashboard too: not 8787
WORKER = [sys.executable, "-m", "distributed.cli.dask_worker"]
NO_DASHCAM = [sys.executable, "-c", "import sys; sys.modules['dashcam'] = None; "
              "from distributed.cli.dask_worker import main; sys.argv[0] = 'dask-worker'; main()"]


@pytest.fixture(scope="module")
def fleet_dir(tmp_path_factory) -> Path:
    return fleets.straggler_fleet(tmp_path_factory.mktemp("dask"))


@pytest.fixture(scope="module")
def in_process(fleet_dir):
    return json.loads(to_json(analyse([str(fleet_dir)], workers=1, use_store=False)))


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A `dask scheduler` (writing a scheduler file) and one `dask worker` of one thread, on 127.0.0.1."""
    d = tmp_path_factory.mktemp("cluster")
    port, sched_file = free_port(), d / "scheduler.json"
    address = f"tcp://127.0.0.1:{port}"
    s = start([*SCHEDULER, "--host", "127.0.0.1", "--port", str(port), "--no-dashboard", *FREE_HTTP,
               "--scheduler-file", str(sched_file)], d / "scheduler.log")
    w = start([*WORKER, address, "--nthreads", "1", "--host", "127.0.0.1", "--no-dashboard"], d / "worker.log")
    try:
        wait_for_workers(address)
        yield address, sched_file
    finally:
        stop(w, s)


@pytest.fixture
def bar_events(monkeypatch) -> list[tuple[str, str]]:
    """What the fleet's progress bar is told, in order: ("status", text) and ("advance", report name)."""
    from dashcam.fleet import execute

    events: list[tuple[str, str]] = []

    class Recorder:
        def __init__(self, total, show) -> None:
            events.append(("total", str(total)))

        def status(self, text: str) -> None:
            events.append(("status", text))

        def advance(self, name: str) -> None:
            events.append(("advance", name))

        def close(self) -> None:
            events.append(("close", ""))

    monkeypatch.setattr(execute, "ReportBar", Recorder)
    return events


def test_local_cluster_gives_the_same_json(fleet_dir, in_process, bar_events):
    on_dask = json.loads(to_json(analyse([str(fleet_dir)], workers=2, use_store=False)))
    assert on_dask == in_process
    assert in_process["verdict"] == "straggler" and in_process["mapped"] == 9
    # the bar says what it does while the cluster starts, before the first report is done
    assert bar_events[:4] == [("total", "9"), ("status", "starting 2 Dask workers…"),
                              ("status", "checking the Dask workers…"), ("status", "digesting 9 reports on 2 workers")]
    assert [k for k, _ in bar_events[4:]] == ["advance"] * 9 + ["close"]


def test_a_small_fleet_by_default_starts_no_dask_and_reports_as_dask_workers_do(fleet_dir, in_process):
    """9 planted reports of a few KB: far below DASK_MIN_WORK_S, so no --workers digests them in this process
    (in_process is the report Dask workers give: test_local_cluster_gives_the_same_json)."""
    code = ("import json, sys\nfrom dashcam.fleet import analyse, to_json\n"
            f"r = analyse([{str(fleet_dir)!r}], use_store=False)\n"
            "print(json.dumps({'report': json.loads(to_json(r)), 'dask': sorted(m for m in ('dask', 'distributed') "
            "if m in sys.modules)}))")
    env = {k: v for k, v in os.environ.items() if k != "DASK_SCHEDULER_ADDRESS"}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["dask"] == []
    assert out["report"] == in_process


def test_an_existing_cluster_gives_the_same_json(fleet_dir, in_process, cluster, bar_events):
    address, sched_file = cluster
    by_address = json.loads(to_json(analyse([str(fleet_dir)], scheduler=address, use_store=False)))
    assert by_address == in_process
    assert bar_events[1:4] == [("status", f"connecting to the Dask scheduler at {address}…"),
                               ("status", "checking the Dask workers…"), ("status", "digesting 9 reports on 1 worker")]
    by_file = json.loads(to_json(analyse([str(fleet_dir)], scheduler_file=str(sched_file), use_store=False)))
    assert by_file == in_process


def test_the_environment_names_the_scheduler(fleet_dir, in_process, cluster, monkeypatch):
    monkeypatch.setenv("DASK_SCHEDULER_ADDRESS", cluster[0])
    r = analyse([str(fleet_dir)], use_store=False)
    assert json.loads(to_json(r)) == in_process


def test_a_warm_run_starts_no_cluster(fleet_dir, monkeypatch):
    monkeypatch.delenv("DASHCAM_CACHE_DIR")
    analyse([str(fleet_dir)], workers=1)
    monkeypatch.setenv("DASK_SCHEDULER_ADDRESS", "tcp://127.0.0.1:1")  # would fail if it were contacted
    assert analyse([str(fleet_dir)]).mapped == 0


def test_a_worker_that_dies_is_retried_once_then_reported(fleet_dir, tmp_path, monkeypatch):
    attempts = fleet_dir / "report_2.sqlite.attempts"
    attempts.unlink(missing_ok=True)
    monkeypatch.setenv("DASHCAM_TEST_HOOK", "fleet-kill:report_2.sqlite")
    r = analyse([str(fleet_dir)], workers=2, use_store=False)
    assert len(attempts.read_text().splitlines()) == 2
    dead = next(d for d in r.digests if d.path.endswith("report_2.sqlite"))
    assert dead.error_kind == "worker_died" and "died twice" in dead.error
    lost = [f for f in r.findings if f.kind == "incomplete" and f.figures.get("reports") == 2]
    assert lost and str(fleet_dir / "report_2.sqlite") in lost[0].reports
    assert r.verdict == "straggler" and r.analysed == 7


def test_an_unreachable_scheduler(fleet_dir, cli):
    t = time.perf_counter()
    r = cli("fleet", str(fleet_dir), "--scheduler", f"tcp://127.0.0.1:{free_port()}")
    assert r.returncode == SchedulerUnreachable.exit_code and r.stderr.count("\n") == 1
    assert "does not answer" in r.stderr and time.perf_counter() - t < 60
    r = cli("fleet", str(fleet_dir), "--scheduler-file", str(fleet_dir / "nowhere.json"))
    assert r.returncode == SchedulerUnreachable.exit_code


def test_workers_without_dashcam(fleet_dir, tmp_path, cli):
    port = free_port()
    address = f"tcp://127.0.0.1:{port}"
    s = start([*SCHEDULER, "--host", "127.0.0.1", "--port", str(port), "--no-dashboard", *FREE_HTTP],
              tmp_path / "s.log")
    w = start([*NO_DASHCAM, address, "--nthreads", "1", "--no-nanny", "--host", "127.0.0.1", "--no-dashboard"],
              tmp_path / "w.log")
    try:
        wait_for_workers(address)
        with pytest.raises(WorkersLackDashcam):
            analyse([str(fleet_dir)], scheduler=address, use_store=False)
        r = cli("fleet", str(fleet_dir), "--scheduler", address)
        assert r.returncode == WorkersLackDashcam.exit_code and "cannot import dashcam" in r.stderr
    finally:
        stop(w, s)


def test_the_local_cluster_leaves_port_8787_alone(fleet_dir):
    """A user's own Dask dashboard on 8787: the fleet's scheduler serves its HTTP endpoints on a free loopback
    port, with no "Port 8787 is already in use" warning."""
    import warnings

    held = socket.socket()
    held.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # an earlier test's closed port in TIME_WAIT
    try:
        held.bind(("0.0.0.0", 8787))
        held.listen()
    except OSError:
        held.close()
        pytest.skip("port 8787 is taken by something else here")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            r = analyse([str(fleet_dir)], workers=2, use_store=False)
        assert (r.reports, r.analysed) == (9, 8)  # the planted fleet's corrupt report is the one left
    finally:
        held.close()
