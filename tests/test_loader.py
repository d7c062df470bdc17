"""The loader: read-only, the cache (reuse, rebuild, location), .nsys-rep export, schema flavours."""
from __future__ import annotations

import os
import sqlite3
import stat
import sys
from pathlib import Path

import pytest

import dashcam.profile.cache.open as cache_open
from dashcam.profile import Profile
from dashcam.profile.cache import cache_dir_for
from dashcam.testing.builder import ExportBuilder, global_tid
from dashcam.testing.scenarios import demo
from dashcam.tools import available_tools

from .conftest import MS, SHARED_SQLITE, US, run_cli, sha256
from .test_bad_input import assert_one_line_error
from .test_shared_profiles import tool_args

# the tools that answer without GPU activity (over the host rows' span)
WINDOWLESS = ("workload", "sql", "cpu", "sync", "api", "os_runtime", "nvtx", "range_detail", "overview")


def run_every_tool(p: Profile) -> None:
    """Every tool on ``p``; on a capture without GPU activity the tools that need a window must say so."""
    from dashcam.errors import NoGpuActivity

    for tool in available_tools():
        if p.devices or tool.name in WINDOWLESS:
            tool(p, tool_args(tool))
        else:
            with pytest.raises(NoGpuActivity):
                tool(p, tool_args(tool))


def listing(folder: Path) -> list[str]:
    return sorted(x.name for x in folder.iterdir())


# -- (a) the profile's bytes never change ----------------------------------------------------

def test_planted_profile_bytes_never_change(tmp_path):
    path = demo(tmp_path / "demo.sqlite")
    before, files, mtime = sha256(path), listing(tmp_path), path.stat().st_mtime_ns
    p = Profile.open(path, progress=False)  # builds the cache
    assert sha256(path) == before
    run_every_tool(p)
    Profile.open(path, progress=False)  # reuses it
    assert sha256(path) == before and path.stat().st_mtime_ns == mtime
    assert listing(tmp_path) == files  # no journal, no cache next to it (DASHCAM_CACHE_DIR is set)


@pytest.mark.parametrize("path", SHARED_SQLITE, ids=lambda p: p.name)
def test_shared_profile_bytes_never_change(path):
    before, files = sha256(path), listing(path.parent)
    p = Profile.open(path, progress=False)
    assert sha256(path) == before
    run_every_tool(p)
    assert sha256(path) == before
    assert listing(path.parent) == files


# -- (b) cache reuse and rebuild ------------------------------------------------------------

def test_cache_is_reused_then_rebuilt_when_the_profile_changes(tmp_path, monkeypatch):
    path = demo(tmp_path / "p.sqlite")
    first = Profile.open(path, progress=False)
    manifest = cache_dir_for(path) / "manifest.json"
    built = manifest.stat().st_mtime_ns
    kernels = first.count("kernels")

    def no_rebuild(*a, **k):
        raise AssertionError("cache rebuilt although the profile did not change")

    with monkeypatch.context() as mp:
        mp.setattr(cache_open, "build_cache", no_rebuild)
        again = Profile.open(path, progress=False)
    assert manifest.stat().st_mtime_ns == built
    assert again.count("kernels") == kernels

    b = ExportBuilder()
    for i in range(7):
        b.kernel(0, i * MS, i * MS + 100 * US)
    b.write(path)
    changed = Profile.open(path, progress=False)
    assert manifest.stat().st_mtime_ns != built
    assert changed.count("kernels") == 7 != kernels


# -- (c) where the cache goes -------------------------------------------------------------------

def test_cache_next_to_profile_in_a_writable_folder(tmp_path, monkeypatch):
    monkeypatch.delenv("DASHCAM_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    path = demo(tmp_path / "p.sqlite")
    Profile.open(path, progress=False)
    assert cache_dir_for(path) == tmp_path / "p.sqlite.dashcam"
    assert (tmp_path / "p.sqlite.dashcam" / "manifest.json").exists()
    # The user cache folder only lists it (for `dashcam cache list`); nothing of the cache is there.
    listed = tmp_path / "xdg" / "dashcam" / "caches-beside-profiles.txt"
    assert [p for p in (tmp_path / "xdg").rglob("*") if p.is_file()] == [listed]
    assert listed.read_text() == f"{tmp_path / 'p.sqlite.dashcam'}\n"


def test_cache_in_user_cache_when_the_folder_has_no_write_bits(tmp_path, monkeypatch):
    monkeypatch.delenv("DASHCAM_CACHE_DIR", raising=False)
    xdg = tmp_path / "xdg"
    monkeypatch.setenv("XDG_CACHE_HOME", str(xdg))
    ro = tmp_path / "ro"
    ro.mkdir()
    path = demo(ro / "p.sqlite")
    before = sha256(path)
    ro.chmod(0o555)  # tests may run as root, who can write anyway: the mode bits must decide
    try:
        p = Profile.open(path, progress=False)
        assert listing(ro) == ["p.sqlite"]
        where = cache_dir_for(path)
        assert where.parent == xdg / "dashcam" / "profiles"
        assert (where / "manifest.json").exists()
        assert p.count("kernels") > 0 and sha256(path) == before
    finally:
        ro.chmod(stat.S_IRWXU)


def test_cache_dir_env_wins(tmp_path, monkeypatch):
    monkeypatch.setenv("DASHCAM_CACHE_DIR", str(tmp_path / "mine"))
    path = demo(tmp_path / "p.sqlite")
    Profile.open(path, progress=False)
    assert cache_dir_for(path).parent == tmp_path / "mine" / "profiles"
    assert (cache_dir_for(path) / "manifest.json").exists()
    assert not (tmp_path / "p.sqlite.dashcam").exists()


# -- (d) .nsys-rep through a fake nsys ---------------------------------------------------------------

# How every fake nsys starts (tests/test_record.py's too): it answers --version as nsys 2024.2.3 does
FAKE_NSYS_START = """#!{python}
import json, shutil, sys
args = sys.argv[1:]
if args == ["--version"]:
    print("NVIDIA Nsight Systems version 2024.2.3.38-242334140272v0")
    sys.exit(0)
"""
FAKE_NSYS = FAKE_NSYS_START + """with open({log!r}, "a") as f:
    f.write(" ".join(args) + "\\n")
if {fail!r} == "too_new":
    sys.stderr.write("Exportation error: Report was created in Nsight Systems version (2024.4.1.61-244134315967v0), "
                     "newer than your current version (2024.2.3.38-242334140272v0).\\n")
    sys.exit(1)
if {fail!r}:
    sys.stderr.write("Importing the report...\\nError: the report file is damaged\\n")
    sys.exit(1)
o = args.index("--output") + 1
report_ok = args[-1].endswith((".nsys-rep", ".qdrep"))
if args[:3] != ["export", "--type", "sqlite"] or "--force-overwrite" not in args or not report_ok:
    sys.exit("unexpected arguments: " + " ".join(args))
shutil.copyfile({fixture!r}, args[o])
"""


def fake_nsys(folder: Path, fixture: Path, fail: bool | str = False) -> tuple[Path, Path]:
    """A fake ``nsys`` in ``folder/bin`` that 'exports' by copying ``fixture``; returns (bin dir, call log)."""
    bin_dir = folder / "bin"
    bin_dir.mkdir(exist_ok=True)
    log = folder / "nsys-calls.log"
    script = bin_dir / "nsys"
    script.write_text(FAKE_NSYS.format(python=sys.executable, log=str(log), fail=fail, fixture=str(fixture)))
    script.chmod(0o755)
    return bin_dir, log


def counts(p: Profile) -> dict[str, int]:
    return {v: p.count(v) for v in ("kernels", "api", "memcpy", "nvtx", "sync_events")}


def test_nsys_rep_is_exported_once_and_reused(tmp_path, monkeypatch):
    fixture = demo(tmp_path / "demo.sqlite")
    bin_dir, log = fake_nsys(tmp_path, fixture)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    rep_dir = tmp_path / "reports"
    rep_dir.mkdir()
    rep = rep_dir / "x.nsys-rep"
    rep.write_bytes(b"not really a report, the fake nsys does not read it")

    p = Profile.open(rep, progress=False)
    assert counts(p) == counts(Profile.open(fixture, progress=False))
    assert p.path == rep and p.sqlite_path.suffix == ".sqlite"
    calls = log.read_text().splitlines()
    assert len(calls) == 1
    assert calls[0].startswith("export --type sqlite --force-overwrite true --output ")
    assert calls[0].endswith(str(rep))

    Profile.open(rep, progress=False)
    assert len(log.read_text().splitlines()) == 1  # the export is reused
    assert listing(rep_dir) == ["x.nsys-rep"]  # nothing written next to the report

    rep.write_bytes(b"a different report")
    Profile.open(rep, progress=False)
    assert len(log.read_text().splitlines()) == 2  # a changed report is exported again


def test_nsys_rep_without_nsys_on_path(tmp_path):
    rep = tmp_path / "x.nsys-rep"
    rep.write_bytes(b"report")
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    proc = run_cli("info", rep, cache=tmp_path / "cache", cwd=tmp_path, env={"PATH": str(empty)})
    line = assert_one_line_error(proc, 27)  # its own exit code: nothing to export with
    assert "`nsys` is not on PATH" in line and "DASHCAM_NSYS or --nsys" in line
    assert "`nsys export --type sqlite --output x.sqlite x.nsys-rep`" in line
    proc = run_cli("info", rep, cache=tmp_path / "cache", cwd=tmp_path, env={"DASHCAM_NSYS": str(empty / "nsys")})
    assert f"DASHCAM_NSYS={empty / 'nsys'}: no executable nsys there" in assert_one_line_error(proc, 27)
    # named with --nsys: the line names the option the user gave, not the variable it is passed on in
    proc = run_cli("--nsys", empty / "nsys", "info", rep, cache=tmp_path / "cache", cwd=tmp_path)
    line = assert_one_line_error(proc, 27)
    assert f": --nsys {empty / 'nsys'}: no executable nsys there" in line and "DASHCAM_NSYS=" not in line


def test_nsys_rep_when_nsys_fails(tmp_path):
    fixture = demo(tmp_path / "demo.sqlite")
    bin_dir, log = fake_nsys(tmp_path, fixture, fail=True)
    rep = tmp_path / "x.nsys-rep"
    rep.write_bytes(b"report")
    proc = run_cli("tool", "run", "overview", rep, cache=tmp_path / "cache", cwd=tmp_path, env={"PATH": str(bin_dir)})
    line = assert_one_line_error(proc, 10)
    assert line.endswith("Error: the report file is damaged")
    assert len(log.read_text().splitlines()) == 1
    assert listing(tmp_path / "cache" / "exports") == []  # a failed export leaves nothing behind


def test_a_report_newer_than_the_nsys_names_both_versions_and_the_ways_out(tmp_path):
    fixture = demo(tmp_path / "demo.sqlite")
    bin_dir, _ = fake_nsys(tmp_path, fixture, fail="too_new")
    rep = tmp_path / "new.nsys-rep"
    rep.write_bytes(b"NVIDIA Tegra Profiler Report 2024@4@1@61-244134315967v0.\n rest of a report")
    proc = run_cli("info", rep, cache=tmp_path / "cache", cwd=tmp_path, env={"PATH": str(bin_dir)})
    line = assert_one_line_error(proc, 28)
    assert ("recorded by Nsight Systems 2024.4.1.61, newer than this nsys (2024.2.3.38, " in line
            and "`nsys export --type sqlite --output new.sqlite new.nsys-rep`" in line
            and "install a newer Nsight Systems and set DASHCAM_NSYS or --nsys" in line)
    assert listing(tmp_path / "cache" / "exports") == []


def test_nsys_named_by_option_or_env_and_a_cached_export_needs_no_nsys(tmp_path):
    fixture = demo(tmp_path / "demo.sqlite")
    bin_dir, log = fake_nsys(tmp_path, fixture)
    rep = tmp_path / "x.qdrep"
    rep.write_bytes(b"an old report")
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    cache = tmp_path / "cache"
    proc = run_cli("--nsys", bin_dir, "info", rep, cache=cache, cwd=tmp_path, env={"PATH": str(empty)})
    assert proc.returncode == 0, proc.stderr
    assert len(log.read_text().splitlines()) == 1
    # the export is cached: no nsys at all is needed to open the report again
    proc = run_cli("info", rep, cache=cache, cwd=tmp_path, env={"PATH": str(empty)})
    assert proc.returncode == 0, proc.stderr
    assert len(log.read_text().splitlines()) == 1
    rep.write_bytes(b"a changed report")
    proc = run_cli("info", rep, cache=cache, cwd=tmp_path,
                   env={"PATH": str(empty), "DASHCAM_NSYS": str(bin_dir / "nsys")})
    assert proc.returncode == 0, proc.stderr
    assert len(log.read_text().splitlines()) == 2


# -- (e) one model over three schema flavours ------------------------------------------------------

def flavour_export(schema: str) -> ExportBuilder:
    """Two processes whose correlation ids overlap; runtime and driver calls; NVTX in text and textId."""
    b = ExportBuilder(schema)
    b.gpu(0, "A", nsys_id=3)
    b.process(4242, "trainer")
    b.process(5151, "loader")
    b.launch(0, 0, 5 * US, 10 * US, 110 * US, name="k1", pid=4242, tid=4250)         # corr 1 in 4242
    b.launch(0, 20 * US, 25 * US, 120 * US, 220 * US, name="k2", pid=4242, tid=4250)  # corr 2 in 4242
    b.launch(0, 30 * US, 35 * US, 230 * US, 330 * US, name="k3", pid=5151, api_name="cuLaunchKernel")  # corr 1
    b.api("cudaStreamSynchronize", 40 * US, 400 * US, pid=4242, tid=4250)
    b.copy_call(0, 500 * US, 510 * US, 520 * US, 620 * US, 1 << 20, "DtoH", pinned=False, pid=5151)
    b.nvtx("plain", 0, 1 * MS, pid=4242, tid=4250)
    b.nvtx("registered", 0, 2 * MS, pid=4242, tid=4250, registered=True)
    b.nvtx("mark", 50 * US, None, pid=4242, tid=4250, event_type=34)
    return b


def raw_runtime_rows(path: Path) -> int:
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return con.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME").fetchone()[0]
    finally:
        con.close()


@pytest.mark.parametrize("schema", ["2024", "2022", "2021"])
def test_normalized_model_is_the_same_for_every_schema(tmp_path, schema):
    path = flavour_export(schema).write(tmp_path / f"{schema}.sqlite")
    p = Profile.open(path, progress=False)

    # 2022 exports duplicate every runtime call as a backtrace row (eventClass 67)
    assert raw_runtime_rows(path) == (9 if schema == "2022" else 5)
    assert p.count("kernels") == 3 and p.count("api") == 5
    assert p.rows("SELECT name, raw_name, kind, pid, tid FROM api ORDER BY start") == [
        ("cudaLaunchKernel", "cudaLaunchKernel_v7000", "runtime", 4242, 4250),
        ("cudaLaunchKernel", "cudaLaunchKernel_v7000", "runtime", 4242, 4250),
        ("cuLaunchKernel", "cuLaunchKernel", "driver", 5151, 5151),
        ("cudaStreamSynchronize", "cudaStreamSynchronize_v3020", "runtime", 4242, 4250),
        ("cudaMemcpyAsync", "cudaMemcpyAsync_v3020", "runtime", 5151, 5151),
    ]
    assert p.one("SELECT DISTINCT global_tid FROM api WHERE pid = 4242") == (global_tid(4242, 4250),)
    # each kernel joins to exactly its own launch call: same pid AND correlation id
    assert p.rows("""SELECT k.name, a.name, k.pid FROM kernels k JOIN api a
                     ON a.pid = k.pid AND a.correlation_id = k.correlation_id ORDER BY k.start""") == [
        ("k1", "cudaLaunchKernel", 4242), ("k2", "cudaLaunchKernel", 4242), ("k3", "cuLaunchKernel", 5151)]
    assert p.rows('SELECT kind, host_mem, bytes, pid, device_id FROM memcpy') == [("DtoH", "pageable", 1 << 20,
                                                                                  5151, 0)]
    assert p.rows('SELECT label, is_range, "end" IS NULL, pid, tid FROM nvtx ORDER BY label') == [
        ("mark", False, True, 4242, 4250), ("plain", True, False, 4242, 4250),
        ("registered", True, False, 4242, 4250)]
    assert p.devices == [0]
    if schema == "2021":  # no TARGET_INFO_GPU
        assert p.gpus[0].name is None
    else:
        assert p.gpus[0].name == "A" and p.gpus[0].sm_count == 132
        assert p.rows("SELECT device_id, nsys_gpu_id, name FROM gpus") == [(0, 3, "A")]
    assert dict(p.rows("SELECT pid, name FROM processes")) == {4242: "trainer", 5151: "loader"}
