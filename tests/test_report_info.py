"""What recorded a capture (issue 27): the recording vs the exporting nsys, the recorded command lines, the program's
name instead of ``nsys-launcher``, ``.qdrep`` found like ``.nsys-rep``, and report exports in ``dashcam cache``."""
from __future__ import annotations

import json
import os
import re
import shlex
import sqlite3
import time
from pathlib import Path

import pytest

from dashcam.agent.ask import find_profile
from dashcam.fleet.inputs import discover
from dashcam.profile import Profile
from dashcam.profile.recording import cuda_processes, install_dir_version, recording
from dashcam.profile.source import (
    PROFILE_SUFFIXES,
    nsys_version,
    report_nsys_command,
    report_version,
)
from dashcam.testing.builder import SCHEMAS, ExportBuilder
from dashcam.testing.scenarios import demo

from .conftest import MS, SHARED, US, run_cli
from .real_nsys import REAL_NSYS, needs_nsys
from .test_loader import fake_nsys

REPORTS = SHARED / "reports"
REAL_REPORTS = sorted(p for p in REPORTS.glob("*") if p.suffix in (".nsys-rep", ".qdrep")) if REPORTS.is_dir() else []
DAY = 86400


def readme_versions() -> dict[str, str]:
    """file -> the 'recorded with' version the shared reports' README gives (its table)."""
    out = {}
    for line in (REPORTS / "README.md").read_text().splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) >= 3 and cells[0].endswith((".nsys-rep", ".qdrep")):
            m = re.search(r"nsys (\d{4}\.\d+\.\d+\.\d+)", line)
            if m:
                out[cells[0]] = m.group(1)
    return out


def demo_nsys(tmp_path: Path) -> Path:
    """A fake nsys (test_loader) whose exports are the demo export; returns its folder."""
    return fake_nsys(tmp_path, demo(tmp_path / "demo.sqlite"))[0]


def planted(b: ExportBuilder | None = None) -> ExportBuilder:
    b = b or ExportBuilder()
    b.gpu(0)
    b.kernel(0, 1 * MS, 2 * MS, name="k", pid=100)
    b.api("cudaLaunchKernel", 900 * US, 950 * US, pid=100)
    return b


# -- recording vs exporting version ------------------------------------------------------------------

@pytest.mark.parametrize("folder, version", [
    ("/opt/nvidia/nsight-systems/2024.1.1/target-linux-x64", "2024.1.1"),
    ("/usr/local/cuda-12.2/NsightSystems-cli-2023.2.3/target-linux-x64", "2023.2.3"),
    ("/opt/nvidia/hpc_sdk/Linux_x86_64/26.5/profilers/13.2/Nsight_Systems/target-linux-x64", None),
])
def test_an_export_says_its_recording_nsys_from_the_install_folder(build, folder, version):
    p = build(planted().install_dir(folder))
    r = recording(p)
    assert r.recorded_with == version and r.recorded_with_from == ("install_dir" if version else None)
    assert r.exported_with == SCHEMAS["2024"]["version"][0] == p.nsys_version  # the export's own metadata


def test_info_and_overview_show_both_versions_the_command_and_the_program(tmp_path):
    b = planted().install_dir("/opt/nvidia/nsight-systems/2022.4.2/target-linux-x64")
    b.command("python", "train.py", "--name", "two words")
    path = b.write(tmp_path / "x.sqlite")
    exported = SCHEMAS["2024"]["version"][0]
    proc = run_cli("info", path, "--json", cache=tmp_path / "c")
    assert proc.returncode == 0, proc.stderr
    rec = json.loads(proc.stdout)["recording"]
    assert rec["recorded_with"] == "2022.4.2" and rec["exported_with"] == exported
    assert rec["command"] == shlex.join(["python", "train.py", "--name", "two words"])
    text = run_cli("info", path, cache=tmp_path / "c", env={"COLUMNS": "200"}).stdout
    assert f"recorded with nsys 2022.4.2 (its install folder), exported with nsys {exported}" in text
    assert "command: python train.py --name 'two words'" in text
    ov = run_cli("tool", "run", "overview", path, "--json", cache=tmp_path / "c")
    out = json.loads(ov.stdout)
    assert out["recording"] == rec and out["processes"] == [{"pid": 100, "name": "python", "recorded_name": None}]
    # the workload tool reads the same command line
    assert json.loads(ov.stdout)["workload"]["command"] == rec["command"]


# -- the program's name, not nsys's launcher --------------------------------------------------------

def test_a_launcher_process_is_named_by_its_main_thread(build):
    b = planted()
    b.process(100, "nsys-launcher").thread(100, 100, "python3").thread(100, 101, "pt_autograd_0")
    b.api("cudaLaunchKernel", 500 * US, 600 * US, pid=100, tid=101)
    b.process(200, "trainer").thread(200, 200, "other-name")  # not a launcher: its own name stays
    b.api("cudaMalloc", 100 * US, 200 * US, pid=200)
    p = build(b)
    assert [(x.pid, x.name, x.recorded_name) for x in cuda_processes(p)] == [
        (100, "python3", "nsys-launcher"), (200, "trainer", None)]
    assert p.rows("SELECT name FROM processes WHERE pid = 100") == [("python3",)]
    assert ["python3", 1] in p.manifest["derived"]["program_facts"]["process"]  # the workload's evidence too


def test_a_launcher_without_a_main_thread_name_is_named_by_the_recorded_command(build):
    b = planted().command("/usr/local/bin/julia", "--project=.", "run.jl")
    b.process(100, "nsys-launcher")
    b.api("cudaLaunchKernel", 500 * US, 600 * US, pid=100, tid=107)
    b.threads[(100, 100)] = "nsys-launcher"  # the main thread still carries the launcher's name
    p = build(b)
    assert [(x.name, x.recorded_name) for x in cuda_processes(p)] == [("julia", "nsys-launcher")]


# -- reports: their own version and `nsys profile` command ---------------------------------------------

def session_record(version: str, nsys_command: str) -> bytes:
    """The tail of an old report (header "Report 1."): its session record as nsys writes it (protobuf fields
    21: the version string, 25: the `nsys profile` command line)."""
    ver = f"{version}-87e152c".encode()
    cmd = nsys_command.encode()
    assert len(cmd) < 128
    return b"\xaa\x01" + bytes([len(ver)]) + ver + b"\xc2\x01\x05hostZ\xca\x01" + bytes([len(cmd)]) + cmd + \
        b"\xc2\x02\x05hostZ\x92\x03\x02\x08\x01"


def test_a_reports_version_and_nsys_command_come_from_the_report(tmp_path):
    bin_dir = demo_nsys(tmp_path)
    old = tmp_path / "old.qdrep"
    cmd = "nsys profile -t nvtx,cuda --output=cupy python nvtx-cupy.py"
    old.write_bytes(b"NVIDIA Tegra Profiler Report 1.\n" + b"\x00" * 5000 + session_record("2020.3.2.6", cmd))
    new = tmp_path / "new.nsys-rep"
    new.write_bytes(b"NVIDIA Tegra Profiler Report 2024@1@1@59-241133802077v0.\n the rest")
    assert report_version(old) == "2020.3.2.6" and report_nsys_command(old) == cmd
    assert report_version(new) == "2024.1.1.59" and report_nsys_command(new) is None
    exported = Profile.open(tmp_path / "demo.sqlite", progress=False).nsys_version
    for rep, version in ((old, "2020.3.2.6"), (new, "2024.1.1.59")):
        proc = run_cli("--nsys", bin_dir, "info", rep, "--json", cache=tmp_path / "c")
        assert proc.returncode == 0, proc.stderr
        rec = json.loads(proc.stdout)["recording"]
        assert (rec["recorded_with"], rec["recorded_with_from"], rec["exported_with"]) == (version, "report", exported)
        assert rec["nsys_command"] == (cmd if rep == old else None)
    # the export dashcam made keeps the report's version: opening the .sqlite itself says it too
    opened = list((tmp_path / "c" / "exports").rglob("old.sqlite"))
    assert len(opened) == 1
    proc = run_cli("info", opened[0], "--json", cache=tmp_path / "c")
    assert json.loads(proc.stdout)["recording"]["recorded_with"] == "2020.3.2.6"


@pytest.mark.skipif(not REAL_REPORTS, reason="no ../shared/profiles/reports")
def test_the_shared_reports_versions_and_nsys_commands():
    known = readme_versions()
    assert set(known) == {p.name for p in REAL_REPORTS}
    for rep in REAL_REPORTS:
        assert report_version(rep) == known[rep.name], rep.name
        cmd = report_nsys_command(rep)
        if cmd is not None:  # one report (launched from the GUI's CLI session) records none
            assert re.search(r"(^|/)nsys profile ", cmd), cmd


@pytest.mark.skipif(not REAL_REPORTS, reason="no ../shared/profiles/reports")
@needs_nsys
def test_real_reports_recording_version_command_and_program_name(monkeypatch):
    from dashcam.profile.source import _newer

    nsys = REAL_NSYS
    monkeypatch.setenv("DASHCAM_NSYS", nsys)
    local = nsys_version(nsys)
    opened = 0
    for rep in REAL_REPORTS:
        if _newer(report_version(rep), local):
            continue  # too new for this nsys: its own message (test_loader)
        p = Profile.open(rep, progress=False)
        opened += 1
        r = recording(p)
        assert r.recorded_with == report_version(rep) and r.exported_with == local
        con = sqlite3.connect(f"file:{p.sqlite_path}?mode=ro", uri=True)
        try:
            install = con.execute("SELECT value FROM TARGET_INFO_SYSTEM_ENV WHERE name = 'TargetInstallDir'"
                                  ).fetchone()[0]
            argv0 = con.execute("SELECT value FROM META_DATA_CAPTURE WHERE name = 'PROCESS_0:COMMAND'").fetchone()[0]
            raw = dict(con.execute("SELECT pid, name FROM PROCESSES"))
        finally:
            con.close()
        from_folder = install_dir_version(install)
        if from_folder:  # the install folder names the recording nsys too (an HPC SDK folder names none)
            assert r.recorded_with.startswith(from_folder + ".")
        assert r.command.split()[0] == argv0
        for x in cuda_processes(p):
            assert x.name != "nsys-launcher"
            if raw[x.pid] == "nsys-launcher":  # nsys 2020's launcher: the program it became
                assert x.recorded_name == "nsys-launcher" and x.name == Path(argv0).name
    assert opened


# -- .qdrep found like .nsys-rep -----------------------------------------------------------------------

def test_a_qdrep_is_found_as_the_default_profile(tmp_path, monkeypatch):
    assert ".qdrep" in PROFILE_SUFFIXES
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DASHCAM_PROFILE", raising=False)
    (tmp_path / "run.qdrep").write_bytes(b"report")
    assert find_profile(None) == "run.qdrep"
    assert discover([str(tmp_path)]) == [tmp_path / "run.qdrep"]
    (tmp_path / "run.sqlite").write_bytes(b"")  # its export beside it: counted once, as the .sqlite
    assert find_profile(None) == "run.sqlite"
    assert discover([str(tmp_path)]) == [tmp_path / "run.sqlite"]
    (tmp_path / "other.nsys-rep").write_bytes(b"report")
    with pytest.raises(Exception, match="2 profiles in this folder"):
        find_profile(None)


# -- report exports in `dashcam cache` -------------------------------------------------------------

def cache_json(*args, cache: Path, cwd: Path) -> dict:
    proc = run_cli("cache", *args, "--json", cache=cache, cwd=cwd)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def export_files_size(folder: Path) -> int:
    return sum(f.stat().st_size for f in folder.iterdir() if f.is_file())


@pytest.fixture
def exported(tmp_path):
    """Three reports exported through the fake nsys: a (current), b (changed after: its export is stale),
    c (deleted after). Returns (cache dir, {name: report}, {name: export folder})."""
    bin_dir = demo_nsys(tmp_path)
    cache = tmp_path / "cache"
    reps, folders = {}, {}
    for name in "abc":
        rep = tmp_path / "reports" / f"{name}.nsys-rep"
        rep.parent.mkdir(exist_ok=True)
        rep.write_bytes(f"report {name}".encode())
        proc = run_cli("--nsys", bin_dir, "info", rep, cache=cache, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        reps[name] = rep.resolve()
        folders[name] = next(f for f in (cache / "exports").iterdir() if f.is_dir() and f not in folders.values())
    reps["b"].write_bytes(b"report b, changed")
    reps["c"].unlink()
    return cache, reps, folders


def test_cache_list_shows_each_export_its_report_size_and_state(exported, tmp_path):
    cache, reps, folders = exported
    listed = cache_json("list", cache=cache, cwd=tmp_path)
    rows = {Path(e["report"]).name: e for e in listed["exports"]}
    assert {k: v["state"] for k, v in rows.items()} == {
        "a.nsys-rep": "current", "b.nsys-rep": "stale", "c.nsys-rep": "report gone"}
    for name, folder in folders.items():
        row = rows[f"{name}.nsys-rep"]
        assert row["export"] == str(folder) and row["report"] == str(reps[name])
        assert row["size_bytes"] == export_files_size(folder) > 0
    assert listed["total_bytes"] == (sum(c["size_bytes"] for c in listed["caches"])
                                     + sum(e["size_bytes"] for e in listed["exports"]))
    text = run_cli("cache", "list", cache=cache, cwd=tmp_path, env={"COLUMNS": "250"}).stdout
    assert f"{reps['a']} (export)" in text and "3 report exports" in text
    assert f"{reps['a']} (its export's cache)" in text  # the export's own cache, named by its report


def test_cache_info_of_a_report_says_where_its_export_is(exported, tmp_path):
    cache, reps, folders = exported
    info = cache_json("info", reps["a"], cache=cache, cwd=tmp_path)
    assert info["profile"] == str(reps["a"]) and info["exported"] is True
    assert Path(info["export"]).parent == folders["a"] and info["current"] is True
    info = cache_json("info", reps["b"], cache=cache, cwd=tmp_path)  # changed: a new export would be made
    assert info["exported"] is False and Path(info["export"]).parent.parent == folders["b"].parent
    assert Path(info["export"]).parent != folders["b"]


def test_cache_clear_of_a_report_removes_its_exports_and_their_caches(exported, tmp_path):
    cache, reps, folders = exported
    out = cache_json("clear", reps["b"], cache=cache, cwd=tmp_path)
    assert [r["export"] for r in out["removed"] if "export" in r] == [str(folders["b"])]
    assert not folders["b"].exists() and folders["a"].exists() and folders["c"].exists()
    left = {Path(c["profile"]).parent for c in cache_json("list", cache=cache, cwd=tmp_path)["caches"]}
    assert folders["b"] not in left and folders["a"] in left  # the export's cache went with it


def test_cache_clear_all_and_older_than_include_exports(exported, tmp_path):
    cache, reps, folders = exported
    then = time.time() - 3 * DAY
    os.utime(folders["c"], (then, then))
    out = cache_json("clear", "--older-than", "1", cache=cache, cwd=tmp_path)
    assert [r["export"] for r in out["removed"] if "export" in r] == [str(folders["c"])]
    assert folders["a"].exists() and folders["b"].exists() and not folders["c"].exists()
    out = cache_json("clear", "--all", cache=cache, cwd=tmp_path)
    assert sorted(r["export"] for r in out["removed"] if "export" in r) == sorted([str(folders["a"]),
                                                                                   str(folders["b"])])
    assert cache_json("list", cache=cache, cwd=tmp_path)["exports"] == []


def test_reusing_an_export_marks_it_used(tmp_path):
    bin_dir, rep, cache = demo_nsys(tmp_path), tmp_path / "x.nsys-rep", tmp_path / "cache"
    rep.write_bytes(b"report")
    assert run_cli("--nsys", bin_dir, "info", rep, cache=cache, cwd=tmp_path).returncode == 0
    folder = next((cache / "exports").iterdir())
    then = time.time() - 3 * DAY
    os.utime(folder, (then, then))
    assert run_cli("--nsys", bin_dir, "info", rep, cache=cache, cwd=tmp_path).returncode == 0
    assert folder.stat().st_mtime > then + DAY
