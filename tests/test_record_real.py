"""``dashcam record`` with the real nsys: record a small Python program with NVTX ranges and sleeps of known
count and length, export it, open it, and check dashcam's figures against the export's own rows and against
``nsys stats`` on the same report (under the definitions: docs/definitions.md "dashcam vs nsys stats").

Skipped without a real nsys (tests/real_nsys.py) or without the ``nvtx`` package (the test extra pins 0.2.10:
nsys 2024.2 records no ranges from 0.2.17's payload extension)."""
from __future__ import annotations

import csv
import shlex
import shutil
import sqlite3
import subprocess
import sys
from collections import Counter
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import pytest

from dashcam.errors import NsysRefusedOption
from dashcam.profile import Profile
from dashcam.profile.record import plan_recording, run_recording
from dashcam.tools import get_tool

from .conftest import MS, run_cli
from .real_nsys import REAL_NSYS, needs_nsys

NVTX = "0.2.10"  # the test extra's pin


def _nvtx_version() -> str | None:
    try:
        return version("nvtx")
    except PackageNotFoundError:
        return None


pytestmark = [needs_nsys, pytest.mark.skipif(
    _nvtx_version() != NVTX, reason=f"the NVTX ranges need the nvtx package {NVTX} (pip install -e '.[test]'), not "
                                    f"{_nvtx_version()}: nsys 2024.2 records no ranges from 0.2.17")]

STEPS, SAVES = 4, 3  # ranges by construction: STEPS "step" (30 ms of sleep each) holding a "load" (10 ms) each,
STEP_SLEEP_MS, LOAD_SLEEP_MS, SAVE_SLEEP_MS = 20, 10, 5  # then SAVES "save" ranges in the default domain
PROGRAM = f"""\
import sys
import time

import nvtx

for _ in range({STEPS}):
    with nvtx.annotate("step", domain="dashcam"):
        time.sleep({STEP_SLEEP_MS / 1000})
        with nvtx.annotate("load", domain="dashcam"):
            time.sleep({LOAD_SLEEP_MS / 1000})
for _ in range({SAVES}):
    with nvtx.annotate("save"):
        time.sleep({SAVE_SLEEP_MS / 1000})
if len(sys.argv) > 1:
    print("failing on purpose", file=sys.stderr)
    sys.exit(int(sys.argv[1]))
"""


def record(folder: Path, *args: str, program_args: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    (folder / "prog.py").write_text(PROGRAM)
    return run_cli("record", *args, "--", sys.executable, "prog.py", *program_args, cache=folder / "cache",
                   cwd=folder, env={"DASHCAM_NSYS": REAL_NSYS}, timeout=300)


def error_line(proc: subprocess.CompletedProcess, code: int) -> str:
    """The one-line error that ends a failed record (the program's and nsys's output pass through before it)."""
    assert "Traceback" not in proc.stderr + proc.stdout
    assert proc.returncode == code, proc.stderr[-2000:]
    last = proc.stderr.splitlines()[-1]
    assert last.startswith("dashcam: error: ")
    return last


def export_of(folder: Path, name: str) -> Path:
    """The cached export ``dashcam record`` made of NAME.nsys-rep (in the CLI's cache folder)."""
    (found,) = (folder / "cache" / "exports").glob(f"*/{name}.sqlite")
    return found


def nsys_stats(sqlite: Path, report: str, tmp: Path) -> list[dict]:
    """``nsys stats --report REPORT --format csv`` on a copy of the export (nsys may add tables to its input)."""
    copy = tmp / f"{report}-input.sqlite"
    shutil.copyfile(sqlite, copy)
    base = tmp / "stats"
    subprocess.run([REAL_NSYS, "stats", "-q", "--report", report, "--format", "csv", "--output", str(base),
                    str(copy)], check=True, capture_output=True, timeout=300)
    with open(f"{base}_{report}.csv", newline="") as f:
        return list(csv.DictReader(f))


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    folder = tmp_path_factory.mktemp("record")
    proc = record(folder, "--goal", "cpu", "-o", "run")
    assert proc.returncode == 0, proc.stderr[-2000:]
    return folder, proc


def test_record_prints_the_command_it_ran_and_keeps_the_report(recorded):
    folder, proc = recorded
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("recording: ")
    argv = shlex.split(lines[0].removeprefix("recording: "))
    assert argv[:2] == [REAL_NSYS, "profile"] and argv[-2:] == [sys.executable, "prog.py"]
    assert "--output=run" in argv and "--sample=process-tree" in argv and "--cpuctxsw=process-tree" in argv
    assert "--python-sampling=true" in argv  # a Python program: its own frames sampled
    trace = next(a for a in argv if a.startswith("--trace=")).split("=", 1)[1].split(",")
    assert {"nvtx", "osrt"} <= set(trace)
    assert f"report: {folder / 'run.nsys-rep'}" in lines
    assert (folder / "run.nsys-rep").stat().st_size > 0
    assert "dashcam summary:" in proc.stdout
    if "cuda" not in trace:  # no GPU here: said, with the options left out
        assert any(ln.startswith("note: no NVIDIA GPU on this machine") and "--trace=cuda" in ln for ln in lines)


def test_nvtx_ranges_equal_the_export_and_nsys_stats(recorded, tmp_path):
    folder, _ = recorded
    sqlite = export_of(folder, "run")
    con = sqlite3.connect(f"file:{sqlite}?mode=ro", uri=True)
    in_export = {text: (n, total) for text, n, total in con.execute(
        "SELECT coalesce(e.text, s.value), count(*), sum(e.\"end\" - e.start) FROM NVTX_EVENTS e "
        "LEFT JOIN StringIds s ON s.id = e.textId WHERE e.eventType = 59 GROUP BY 1")}
    con.close()
    p = Profile.open(sqlite, progress=False)
    dashcam = {label: (n, total) for label, n, total in p.rows(
        "SELECT label, count(*), sum(dur) FROM nvtx WHERE is_range GROUP BY label")}
    # nsys stats names a range DOMAIN:NAME; dashcam's label is the name (its domain is a column)
    stats = {r["Range"].removeprefix("dashcam:"): (int(r["Instances"]), int(r["Total Time (ns)"]))
             for r in nsys_stats(sqlite, "nvtx_sum", tmp_path)}
    assert {k: n for k, (n, _) in dashcam.items()} == {"step": STEPS, "load": STEPS, "save": SAVES}
    assert dashcam == in_export == stats
    assert dashcam["step"][1] >= STEPS * (STEP_SLEEP_MS + LOAD_SLEEP_MS) * MS  # ranges last at least their sleeps
    assert dashcam["load"][1] >= STEPS * LOAD_SLEEP_MS * MS and dashcam["save"][1] >= SAVES * SAVE_SLEEP_MS * MS


def test_os_runtime_calls_equal_nsys_stats(recorded, tmp_path):
    folder, _ = recorded
    sqlite = export_of(folder, "run")
    r = get_tool("cpu")(Profile.open(sqlite, progress=False), {"limit": 1000})
    calls, ns = Counter(), Counter()
    for t in r.threads:
        for c in t.os_calls:
            calls[c.name] += c.calls
            ns[c.name] += c.ns
    stats = nsys_stats(sqlite, "osrt_sum", tmp_path)
    # No CUDA calls and no OS call inside another on one thread here: dashcam's time in a call (outside CUDA
    # calls, innermost call) is then the call's whole duration, which osrt_sum sums over the whole capture; the
    # cpu tool's window without GPU activity is the span of the CPU data, every call inside it.
    assert {x["Name"]: (int(x["Num Calls"]), int(x["Total Time (ns)"])) for x in stats} == \
        {name: (calls[name], ns[name]) for name in calls}
    assert calls["clock_nanosleep"] == 2 * STEPS + SAVES  # one per time.sleep
    assert ns["clock_nanosleep"] >= STEPS * (STEP_SLEEP_MS + LOAD_SLEEP_MS) * MS + SAVES * SAVE_SLEEP_MS * MS


def test_a_capture_range_records_only_that_range(tmp_path):
    proc = record(tmp_path, "--capture-range", "nvtx:load@dashcam", "-o", "ranged")
    assert proc.returncode == 0, proc.stderr[-2000:]  # the program ran to its end (capture-range-end stop)
    sqlite = export_of(tmp_path, "ranged")
    dashcam = dict(Profile.open(sqlite, progress=False).rows(
        "SELECT label, count(*) FROM nvtx WHERE is_range GROUP BY label"))
    stats = {r["Range"]: int(r["Instances"]) for r in nsys_stats(sqlite, "nvtx_sum", tmp_path)}
    assert dashcam == {"load": 1} and stats == {"dashcam:load": 1}  # the first load range, nothing around it


def test_a_capture_range_that_never_opens_is_an_empty_capture(tmp_path):
    line = error_line(record(tmp_path, "--capture-range", "nvtx:nowhere", "-o", "none"), 31)
    assert "nsys wrote no report (none.nsys-rep): the capture range (nvtx:nowhere) never opened" in line
    assert not (tmp_path / "none.nsys-rep").exists()


def test_a_failing_program_keeps_its_report_and_summary_then_exits_30(tmp_path):
    proc = record(tmp_path, "-o", "failed", program_args=("3",))
    last = error_line(proc, 30)
    assert "dashcam summary:" in proc.stdout and (tmp_path / "failed.nsys-rep").exists()
    assert last.startswith(f"dashcam: error: `{sys.executable} prog.py 3` exited with 3; ")
    assert last.endswith("its stderr ended: failing on purpose")
    assert "failing on purpose" in proc.stderr.splitlines()[:-1]  # passed through as it came


def test_gpu_metrics_are_spelled_for_this_nsys(tmp_path, monkeypatch):
    monkeypatch.setenv("DASHCAM_NSYS", REAL_NSYS)
    argv = plan_recording([sys.executable, "prog.py"], goal="metrics", gpu=True, cwd=tmp_path).argv
    known = subprocess.run([REAL_NSYS, "profile", "--help"], capture_output=True, text=True, timeout=60).stdout
    (metrics,) = [a for a in argv if a.startswith("--gpu-metrics-device")]
    assert metrics.split("=")[0] + "=" in known  # an option this nsys takes (2024.2: --gpu-metrics-device)


def test_an_option_this_nsys_does_not_know_is_named(tmp_path, monkeypatch):
    (tmp_path / "prog.py").write_text(PROGRAM)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DASHCAM_NSYS", REAL_NSYS)
    plan = plan_recording([sys.executable, "prog.py"], output="x", cwd=tmp_path)
    plan.argv.insert(2, "--no-such-option=1")
    with pytest.raises(NsysRefusedOption, match=r"refused `--no-such-option=1` \(\"unrecogni[sz]ed option"):
        run_recording(plan, cwd=tmp_path)
    assert not (tmp_path / "x.nsys-rep").exists()
