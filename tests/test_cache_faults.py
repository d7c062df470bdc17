"""Fault injection on the cache (profile/cache/): builds killed at 20 moments, every cache file
damaged or deleted in turn, four first opens at once, a replaced profile, a read-only profile
folder, a full or read-only disk, stale locks and build folders.

Builds are stopped by the DASHCAM_TEST_HOOK checkpoints, not by timed signals, so every case is
deterministic. Each case checks that the next command answers exactly as an undisturbed run does.
"""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import stat
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dashcam.errors import CacheDamaged
from dashcam.profile import Profile
from dashcam.profile import cache as cache_mod
from dashcam.profile.cache import HOOK_ENV, cache_dir_for, read_manifest
from dashcam.profile.cache import lock as cache_lock
from dashcam.profile.cache import open as cache_open
from dashcam.testing.builder import ExportBuilder
from dashcam.tools import get_tool

from .conftest import MS, US, run_cli

TOOLS = ("overview", "gpu_gaps", "nvtx")  # between them they read every raw and derived cache file


def every_table_export(path: Path, steps: int = 6) -> Path:
    """Two ranks with kernels, launches, copies, memsets, syncs and NVTX ranges (text and registered):
    every table the cache copies, so its build passes every checkpoint."""
    b = ExportBuilder("2024")
    for rank, pid in ((0, 100), (1, 101)):
        b.gpu(rank, "NVIDIA H100 80GB HBM3", 132)
        b.process(pid, f"python train.py --rank {rank}")
        t = 1 * MS
        for step in range(steps):
            b.nvtx(f"step {step}", t, t + 9 * MS, pid=pid, registered=rank == 1)
            b.nvtx("forward", t + 1 * MS, t + 5 * MS, pid=pid)
            b.copy_call(rank, t, t + 30 * US, t + 10 * US, t + 400 * US, 8 << 20, "HtoD", pid=pid)
            b.memset(rank, t + 450 * US, t + 480 * US, 1 << 20, pid=pid)
            for i in range(8):
                ks = t + 1 * MS + i * 500 * US
                b.launch(rank, ks - 40 * US, ks - 30 * US, ks, ks + (300 + 50 * rank) * US,
                         name=f"kernel_{i % 3}", pid=pid)
            c = b.api("cudaStreamSynchronize", t + 6 * MS, t + 8 * MS, pid=pid)
            b.sync_event(rank, t + 6 * MS, t + 8 * MS, corr=c, pid=pid)
            t += 10 * MS
    return b.write(path)


def tool_json(profile: Profile, name: str) -> dict:
    return json.loads(get_tool(name)(profile, {}).model_dump_json())


@pytest.fixture(scope="module")
def export(tmp_path_factory) -> Path:
    return every_table_export(tmp_path_factory.mktemp("export") / "run.sqlite")


@pytest.fixture(scope="module")
def expected(export, tmp_path_factory) -> dict[str, str]:
    """Each tool's `tool run NAME --json` output from an undisturbed build."""
    cache = tmp_path_factory.mktemp("pristine")
    out = {}
    for name in TOOLS:
        r = run_cli("tool", "run", name, export, "--json", cache=cache)
        assert r.returncode == 0, r.stderr
        out[name] = r.stdout
    return out


def leftovers(folder: Path) -> list[str]:
    """What a build may leave in the cache's folder besides finished caches: build folders, locks, trash."""
    return sorted(p.name for p in folder.iterdir() if p.name.startswith((".build-", ".trash-"))
                  or p.name.endswith(".lock") or ".lock." in p.name)


def the_cache(cache_root: Path) -> Path:
    (found,) = [p for p in (cache_root / "profiles").iterdir() if not p.name.startswith(".") and p.is_dir()]
    return found


# -- killed builds ----------------------------------------------------------------------------------

def test_a_build_killed_at_20_moments_is_redone_by_the_next_command(export, expected, tmp_path):
    cache = tmp_path / "cache"
    log = tmp_path / "checkpoints.log"
    r = run_cli("info", export, "--json", cache=cache, env={HOOK_ENV: f"log:{log}"})
    assert r.returncode == 0, r.stderr
    names = log.read_text().splitlines()
    assert len(names) >= 20 and names[0] == "locked" and names[-1] == "released"
    assert {"started", "derived", "nvtx groups", "nvtx kernels", "manifest", "renamed"} <= set(names)
    assert sum(n.startswith("chunk") for n in names) == 6  # kernel, runtime, memcpy, memset, sync, nvtx
    n = len(names)
    points = sorted({1 + round(i * (n - 1) / 19) for i in range(20)})
    assert len(points) == 20
    folder = cache / "profiles"
    for k, point in enumerate(points):
        shutil.rmtree(cache, ignore_errors=True)
        killed = run_cli("info", export, "--json", cache=cache, env={HOOK_ENV: f"kill:{point}"})
        assert killed.returncode == -9, (point, killed.stderr)
        tool = TOOLS[k % len(TOOLS)]
        again = run_cli("tool", "run", tool, export, "--json", cache=cache)
        assert again.returncode == 0, (point, again.stderr)
        assert again.stdout == expected[tool], point
        assert "internal error" not in again.stderr
        assert leftovers(folder) == [], point  # the dead builder's folder and lock are gone
        assert read_manifest(the_cache(cache))["version"] == cache_mod.CACHE_VERSION


# -- damaged caches ---------------------------------------------------------------------------------

@contextlib.contextmanager
def cache_env(root: Path):
    """DASHCAM_CACHE_DIR set to ``root`` for the code inside (module-scoped fixtures cannot monkeypatch)."""
    old = os.environ.get("DASHCAM_CACHE_DIR")
    os.environ["DASHCAM_CACHE_DIR"] = str(root)
    try:
        yield root
    finally:
        if old is None:
            os.environ.pop("DASHCAM_CACHE_DIR")
        else:
            os.environ["DASHCAM_CACHE_DIR"] = old


@pytest.fixture(scope="module")
def built(export, tmp_path_factory) -> tuple[Path, dict]:
    """A finished cache of ``export`` kept aside (copied in place by each damage test) and the tools' results."""
    with cache_env(tmp_path_factory.mktemp("built")):
        p = Profile.open(export, progress=False)
        results = {name: tool_json(p, name) for name in TOOLS}
        p.con.close()
        return cache_dir_for(export), results


def place(built_cache: Path, export: Path) -> Path:
    """A fresh copy of the finished cache where ``export``'s cache goes; return that folder."""
    target = cache_dir_for(export)
    shutil.rmtree(target, ignore_errors=True)
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(built_cache, target)
    return target


def cache_files(built_cache: Path) -> list[str]:
    return sorted(read_manifest(built_cache)["files"])


def damage(path: Path, how: str) -> None:
    data = path.read_bytes()
    if how == "delete":
        path.unlink()
    elif how == "truncate":
        path.write_bytes(data[: len(data) // 2])
    elif how == "overwrite":  # same size, garbage in the middle
        mid = len(data) // 2
        path.write_bytes(data[:mid - 8] + b"\xde\xad\xbe\xef" * 4 + data[mid + 8:])
    elif how == "empty":
        path.write_bytes(b"")
    else:
        raise ValueError(how)


def reopen_and_check(export: Path, results: dict, capsys, why: str) -> None:
    p = Profile.open(export, progress=False)
    try:
        assert {name: tool_json(p, name) for name in TOOLS} == results
    finally:
        p.con.close()
    err = capsys.readouterr().err
    assert f"the cache of {export.name} is damaged ({why}" in err, err
    assert err.count("\n") == 1  # one line
    man = read_manifest(cache_dir_for(export))
    assert cache_mod.check_files(cache_dir_for(export), man) is None


def test_every_cache_file_damaged_or_deleted_in_turn_is_rebuilt(export, built, capsys):
    built_cache, results = built
    files = cache_files(built_cache)
    assert {"launches.parquet", "gaps.parquet", "gap_api.parquet", "nvtx_kernels.parquet", "strings.parquet",
            "kernel-00000.parquet", "nvtx-00000.parquet"} <= set(files)
    hows = ("truncate", "overwrite", "empty")
    for i, name in enumerate(files):
        for how in ("delete", hows[i % len(hows)]):
            target = place(built_cache, export)
            size = (target / name).stat().st_size
            damage(target / name, how)
            why = {"delete": f"{name} is missing", "truncate": f"{name} has {size // 2:,} bytes",
                   "empty": f"{name} has 0 bytes", "overwrite": f"{name} was overwritten"}[how]
            reopen_and_check(export, results, capsys, why)


@pytest.mark.parametrize("how,why", [("delete", "manifest.json is missing"),
                                     ("garbage", "manifest.json is unreadable")])
def test_a_missing_or_garbage_manifest_is_rebuilt(export, built, capsys, how, why):
    built_cache, results = built
    target = place(built_cache, export)
    if how == "delete":
        (target / "manifest.json").unlink()
    else:
        (target / "manifest.json").write_text("{not json")
    reopen_and_check(export, results, capsys, why)


def hide(target: Path, name: str) -> None:
    """Damage ``name`` past what the manifest's checks see: zero its pages (footer and size kept) and
    record the damaged file in the manifest, as damage the CRC's ends miss would be."""
    path = target / name
    data = bytearray(path.read_bytes())
    footer = struct.unpack("<I", data[-8:-4])[0]
    data[4:len(data) - footer - 8] = bytes(len(data) - footer - 12)
    path.write_bytes(bytes(data))
    man = read_manifest(target)
    man["files"][name] = cache_mod.file_check(path)
    (target / "manifest.json").write_text(json.dumps(man))


def test_a_read_error_while_a_command_runs_rebuilds_the_cache_and_answers(export, built, expected, tmp_path):
    built_cache, _ = built
    cache = tmp_path / "cache"
    with cache_env(cache):
        target = place(built_cache, export)
    hide(target, "launches.parquet")  # read by gpu_gaps' queries, not when the views are made
    r = run_cli("tool", "run", "gpu_gaps", export, "--json", cache=cache)
    assert r.returncode == 0, r.stderr
    assert r.stdout == expected["gpu_gaps"]
    assert r.stderr.startswith(f"dashcam: the cache of {export.name} is damaged (reading it failed: ")
    assert r.stderr.count("\n") == 1
    assert cache_mod.check_files(target, read_manifest(target)) is None


def test_chat_rebuilds_a_damaged_cache_and_runs_the_line_again(export, built, capsys, monkeypatch):
    """In `dashcam chat` a read error on a damaged cache reopens the profile on a rebuilt cache and runs the
    same line again: the answer, not an internal error."""
    from io import StringIO

    from rich.console import Console

    from dashcam.agent.chat import ChatSession, run_repl

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    built_cache, results = built
    target = place(built_cache, export)
    hide(target, "launches.parquet")  # read by gpu_gaps' queries, not when the views are made
    session = ChatSession(Profile.open(export, progress=False), str(export), offline=True)
    lines = iter(["/run gpu_gaps"])

    def read(prompt=""):
        try:
            return next(lines)
        except StopIteration:
            raise EOFError from None

    buf = StringIO()
    assert run_repl(session, Console(file=buf, width=200), read=read) == 0
    out = buf.getvalue()
    assert "internal error" not in out and f"dashcam tool run gpu_gaps {export}" in out
    err = capsys.readouterr().err
    assert err.startswith(f"dashcam: the cache of {export.name} is damaged (reading it failed: launches.parquet "
                          "is unreadable (") and err.count("\n") == 1
    assert cache_mod.check_files(target, read_manifest(target)) is None
    assert tool_json(session.profile, "gpu_gaps") == results["gpu_gaps"]


def test_a_file_unreadable_when_the_views_are_made_is_rebuilt(export, built, capsys):
    built_cache, results = built
    target = place(built_cache, export)
    path = target / "gaps.parquet"
    path.write_bytes(path.read_bytes()[:100])
    man = read_manifest(target)
    man["files"]["gaps.parquet"] = cache_mod.file_check(path)
    (target / "manifest.json").write_text(json.dumps(man))
    reopen_and_check(export, results, capsys, "reading it failed: ")


def test_a_cache_still_unreadable_after_one_rebuild_is_a_clear_error(export, monkeypatch, capsys):
    real = cache_open.build_cache

    def broken(profile, tables, out, progress=None):
        man = real(profile, tables, out, progress)
        (out / "gaps.parquet").write_bytes(b"PAR1 not really")
        return man

    monkeypatch.setattr(cache_open, "build_cache", broken)
    with pytest.raises(CacheDamaged) as e:
        Profile.open(export, progress=False)
    assert e.value.exit_code == 16
    assert str(cache_dir_for(export)) in str(e.value) and "even after a rebuild" in str(e.value)
    assert "rebuilding it" in capsys.readouterr().err


def test_the_cli_gives_up_after_one_rerun(export, monkeypatch):
    """guarded (cli.py): a read error on a damaged cache reruns the command once on a rebuilt cache; a
    second one is exit 16 naming the cache, never an internal error."""
    import typer

    from dashcam.cli import guarded

    real = cache_open.build_cache

    def damaging(profile, tables, out, progress=None):  # damage the manifest's checks do not see
        man = real(profile, tables, out, progress)
        path = out / "launches.parquet"
        data = bytearray(path.read_bytes())
        footer = struct.unpack("<I", data[-8:-4])[0]
        data[4:len(data) - footer - 8] = bytes(len(data) - footer - 12)
        path.write_bytes(bytes(data))
        return man

    monkeypatch.setattr(cache_open, "build_cache", damaging)
    calls = []

    @guarded
    def command():
        calls.append(1)
        Profile.open(export, progress=False).rows("SELECT sum(start) FROM launches")

    with pytest.raises(typer.Exit) as e:
        command()
    assert e.value.exit_code == 16 and len(calls) == 2


def test_a_bug_is_not_taken_for_a_damaged_cache(export, capsys):
    """A reader error on a cache that reads in full is a bug: no rebuild, an internal error (exit 1)."""
    import duckdb
    import typer

    from dashcam.cli import guarded

    calls = []

    @guarded
    def command():
        calls.append(1)
        p = Profile.open(export, progress=False)
        duckdb.sql(f"SELECT * FROM read_parquet('{p.cache}/launches-gone.parquet')").fetchall()

    with pytest.raises(typer.Exit) as e:
        command()
    assert e.value.exit_code == 1 and len(calls) == 1
    err = capsys.readouterr().err
    assert "internal error" in err and "damaged" not in err
    assert read_manifest(cache_dir_for(export)) is not None  # the cache was kept


def test_damage_inside_a_chunk_is_rebuilt_not_an_internal_error(export, built, expected, tmp_path):
    """Bytes overwritten inside a raw chunk, on the first page of its ``start`` column (size kept, and the
    manifest's CRC made to match, as damage its ends miss would be): DuckDB fails on it with words of its
    own (a varint too large); the cache is checked in full, found damaged, rebuilt, and the command answers."""
    import pyarrow.parquet as pq

    built_cache, _ = built
    cache = tmp_path / "cache"
    with cache_env(cache):
        target = place(built_cache, export)
    path = target / "nvtx-00000.parquet"
    meta = pq.ParquetFile(path).metadata.row_group(0)
    (column,) = [meta.column(i) for i in range(meta.num_columns) if meta.column(i).path_in_schema == "start"]
    at = column.data_page_offset
    data = bytearray(path.read_bytes())
    data[at:at + 64] = b"\xab" * 64
    path.write_bytes(bytes(data))
    man = read_manifest(target)
    man["files"][path.name] = cache_mod.file_check(path)
    (target / "manifest.json").write_text(json.dumps(man))
    r = run_cli("tool", "run", "nvtx", export, "--json", cache=cache)
    assert r.returncode == 0, r.stderr
    assert r.stdout == expected["nvtx"]
    assert r.stderr.startswith(f"dashcam: the cache of {export.name} is damaged (reading it failed: "
                               f"nvtx-00000.parquet is unreadable (")
    assert r.stderr.count("\n") == 1


# -- concurrency, locks and stale builds -----------------------------------------------------------

def test_four_first_opens_at_once_build_once(export, expected, tmp_path):
    cache = tmp_path / "cache"
    gate = tmp_path / "gate"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DASHCAM_", "OPENAI_", "GITHUB_"))}
    env.update({"DASHCAM_CACHE_DIR": str(cache), HOOK_ENV: f"wait:{gate}"})
    errs = [tmp_path / f"err{i}" for i in range(4)]
    procs = [subprocess.Popen([sys.executable, "-m", "dashcam.cli", "tool", "run", "gpu_gaps", str(export), "--json"],
                              stdout=subprocess.PIPE, stderr=open(errs[i], "w"), env=env, text=True)
             for i in range(4)]
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and sum("waiting for" in e.read_text() for e in errs) < 3:
            time.sleep(0.05)
        gate.touch()
        outs = [p.communicate(timeout=120)[0] for p in procs]
    finally:
        gate.touch()
        for p in procs:
            if p.poll() is None:
                p.kill()
    builders = (tmp_path / "gate.builders").read_text().split()
    assert len(builders) == 1  # one build; the three others waited for it
    assert all(p.returncode == 0 for p in procs)
    assert outs == [expected["gpu_gaps"]] * 4
    waiting = [e.read_text() for e in errs if e.read_text()]
    assert len(waiting) == 3
    assert all(w.startswith(f"dashcam: waiting for pid {builders[0]} on {socket.gethostname()}, which is building "
                            f"the cache of {export.name}") and w.count("\n") == 1 for w in waiting)
    assert leftovers(cache / "profiles") == []


def write_owner(path: Path, pid: int, host: str | None = None) -> None:
    path.write_text(json.dumps({"pid": pid, "host": host or socket.gethostname(), "started": 0, "nonce": "x"}))


def dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def test_stale_builds_are_removed_and_live_ones_kept(export, tmp_path, monkeypatch):
    folder = cache_dir_for(export).parent
    folder.mkdir(parents=True, exist_ok=True)
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        made = {}
        for name, pid, host, age in [("dead_here", dead_pid(), None, 0), ("alive_here", sleeper.pid, None, 0),
                                     ("other_host_fresh", 1, "elsewhere", 0), ("other_host_old", 1, "elsewhere", 120),
                                     ("ownerless_old", None, None, 7200), ("ownerless_fresh", None, None, 0)]:
            d = folder / f".build-{name}"
            d.mkdir()
            (d / "kernel-00000.parquet").write_bytes(b"x" * 100)
            if pid is not None:
                write_owner(d / "owner.json", pid, host)
            then = time.time() - age
            for p in [*d.iterdir(), d]:
                os.utime(p, (then, then))
            made[name] = d
        (folder / ".trash-old").mkdir()
        Profile.open(export, progress=False)
        kept = sorted(p.name for p in folder.iterdir() if p.name.startswith((".build-", ".trash-")))
        assert kept == [".build-alive_here", ".build-other_host_fresh", ".build-ownerless_fresh"]
    finally:
        sleeper.kill()
        sleeper.wait()


def test_a_stale_lock_is_broken(export, tmp_path, capsys, monkeypatch):
    lock = cache_dir_for(export).with_name(cache_dir_for(export).name + ".lock")
    lock.parent.mkdir(parents=True, exist_ok=True)
    write_owner(lock, dead_pid())  # a dead process of this host: broken at once, silently
    p = Profile.open(export, progress=False)
    assert p.count("kernels") == 96 and not lock.exists()
    assert capsys.readouterr().err == ""
    shutil.rmtree(cache_dir_for(export))
    # Another host's builder that stopped touching its lock: broken after STALE_S, having said it waits.
    monkeypatch.setattr(cache_lock, "STALE_S", 0.3)
    write_owner(lock, 4242, "node7")
    p = Profile.open(export, progress=False)
    assert p.count("kernels") == 96 and not lock.exists()
    assert capsys.readouterr().err == (f"dashcam: waiting for pid 4242 on node7, which is building the cache of "
                                       f"{export.name} ({lock})\n")


def live_owner(pid: int) -> dict:
    """The owner record a builder of this machine with pid ``pid`` writes (cache.lock.this_builder)."""
    return dict(cache_lock.this_builder(), pid=pid, pid_start=cache_lock.start_ticks(pid))


def test_a_live_builder_of_this_machine_is_waited_for_however_long(export, capsys, monkeypatch):
    """A lock held by a live process of this machine (a build stopped with Ctrl-Z, say) is not broken by
    time: the waiter waits until that process is gone (a zombie counts as gone), then builds."""
    import threading

    monkeypatch.setattr(cache_lock, "STALE_S", 0.2)
    lock = cache_dir_for(export).with_name(cache_dir_for(export).name + ".lock")
    lock.parent.mkdir(parents=True, exist_ok=True)
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        lock.write_text(json.dumps(live_owner(sleeper.pid)))
        opened = {}
        t = threading.Thread(target=lambda: opened.update(p=Profile.open(export, progress=False)))
        t.start()
        time.sleep(1.5)
        assert t.is_alive() and lock.exists()  # many times STALE_S: still waiting
        sleeper.kill()  # not reaped yet: a zombie
        t.join(60)
        assert not t.is_alive() and opened["p"].count("kernels") == 96 and not lock.exists()
    finally:
        sleeper.kill()
        sleeper.wait()
    assert capsys.readouterr().err == (f"dashcam: waiting for pid {sleeper.pid} on {socket.gethostname()}, which "
                                       f"is building the cache of {export.name} ({lock})\n")


def test_a_lock_whose_pid_was_reused_is_broken(export, capsys):
    """The lock's pid runs, but a later process got it (another start time): the builder is gone."""
    lock = cache_dir_for(export).with_name(cache_dir_for(export).name + ".lock")
    lock.parent.mkdir(parents=True, exist_ok=True)
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        owner = live_owner(sleeper.pid)
        owner["pid_start"] -= 1
        lock.write_text(json.dumps(owner))
        assert Profile.open(export, progress=False).count("kernels") == 96 and not lock.exists()
    finally:
        sleeper.kill()
        sleeper.wait()
    assert capsys.readouterr().err == ""


def test_a_leftover_lock_of_a_finished_build_is_removed_by_the_next_open(export, capsys):
    Profile.open(export, progress=False)
    lock = cache_dir_for(export).with_name(cache_dir_for(export).name + ".lock")
    write_owner(lock, dead_pid())  # killed after its cache was in place
    Profile.open(export, progress=False)
    assert not lock.exists() and capsys.readouterr().err == ""


# -- the profile and its folder ---------------------------------------------------------------------

def test_a_profile_replaced_by_another_gets_its_own_cache(export, expected, tmp_path):
    other = every_table_export(tmp_path / "other.sqlite", steps=3)
    want = run_cli("tool", "run", "gpu_gaps", other, "--json", cache=tmp_path / "c1")
    assert want.returncode == 0 and want.stdout != expected["gpu_gaps"]
    path = tmp_path / "run.sqlite"
    shutil.copy(export, path)
    cache = tmp_path / "c2"
    first = run_cli("tool", "run", "gpu_gaps", path, "--json", cache=cache)
    assert first.stdout == expected["gpu_gaps"]
    os.replace(other, path)
    second = run_cli("tool", "run", "gpu_gaps", path, "--json", cache=cache)
    assert second.returncode == 0 and second.stdout == want.stdout and second.stderr == ""
    assert leftovers(cache / "profiles") == []


def test_a_read_only_profile_folder_puts_the_cache_in_the_user_cache(export, expected, tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    path = ro / "run.sqlite"
    shutil.copy(export, path)
    ro.chmod(0o555)  # as root too: the folder's write bits decide
    try:
        r = run_cli("tool", "run", "nvtx", path, "--json", cache=tmp_path / "unused",
                    env={"DASHCAM_CACHE_DIR": None, "XDG_CACHE_HOME": str(tmp_path / "xdg")})
        assert r.returncode == 0, r.stderr
        assert r.stdout == expected["nvtx"]
        assert sorted(p.name for p in ro.iterdir()) == ["run.sqlite"]
        assert len(list((tmp_path / "xdg" / "dashcam" / "profiles").iterdir())) == 1
    finally:
        ro.chmod(stat.S_IRWXU)


# -- full and read-only disks ----------------------------------------------------------------------

def mount_tmpfs(where: Path, size: str, *options: str) -> bool:
    if os.geteuid() != 0 or shutil.which("mount") is None:
        return False
    where.mkdir(parents=True, exist_ok=True)
    opts = ",".join((f"size={size}", *options))
    mount = subprocess.run(["mount", "-t", "tmpfs", "-o", opts, "tmpfs", str(where)], capture_output=True)
    return mount.returncode == 0


def umount(where: Path) -> None:
    subprocess.run(["umount", str(where)], capture_output=True)


def assert_unwritable(r, folder: Path, export: Path, *words: str) -> None:
    assert r.returncode == 15, r.stderr
    line = r.stderr.strip()
    assert "\n" not in line and "internal error" not in line
    assert line.startswith("dashcam: error: ") and f"the cache of {export.name} in {folder}" in line
    assert "it needs " in line and "DASHCAM_CACHE_DIR" in line
    for w in words:
        assert w in line, line


def files_in(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*") if not p.is_dir()]


@pytest.mark.parametrize("size,words", [("16k", ("no room", "it needs about")),  # below the estimate: refused
                                        ("48k", ("no room", "it needs more than"))])  # the build fills it
def test_a_full_disk_is_one_line_and_leaves_nothing(export, tmp_path, size, words):
    big = every_table_export(tmp_path / "run.sqlite", steps=1)  # 0.35x of it fits in 48k, its cache does not
    assert big.stat().st_size * cache_mod.NEED_RATIO < 44_000
    disk = tmp_path / "disk"
    if not mount_tmpfs(disk, size):
        pytest.skip("needs root and tmpfs to fill a real disk (test_a_write_error_at_any_moment covers the rest)")
    try:
        r = run_cli("tool", "run", "overview", big, "--json", cache=disk)
        assert_unwritable(r, disk / "profiles", big, *words)
        assert files_in(disk) == []
    finally:
        umount(disk)
    ok = run_cli("tool", "run", "overview", big, "--json", cache=tmp_path / "roomy")  # DASHCAM_CACHE_DIR elsewhere
    assert ok.returncode == 0 and ok.stderr == ""


def test_a_read_only_cache_folder_is_one_line(export, tmp_path):
    disk = tmp_path / "disk"
    if not mount_tmpfs(disk, "1m", "ro"):
        pytest.skip("needs root and tmpfs")
    try:
        r = run_cli("tool", "run", "overview", export, "--json", cache=disk)
        assert_unwritable(r, disk / "profiles", export, "cannot write", "Read-only file system")
    finally:
        umount(disk)


@pytest.mark.parametrize("point,code", [(1, "ENOSPC"), (4, "ENOSPC"), (9, "EDQUOT"), (12, "ENOSPC"),
                                        (17, "EROFS"), (20, "ENOSPC")])
def test_a_write_error_at_any_moment_is_one_line_and_leaves_nothing(export, tmp_path, point, code):
    """A patched writer (the DASHCAM_TEST_HOOK ``fail`` checkpoint) stands for a disk that fills up or turns
    read-only at that moment of the build, on machines where no tmpfs can be mounted."""
    cache = tmp_path / "cache"
    r = run_cli("tool", "run", "overview", export, "--json", cache=cache, env={HOOK_ENV: f"fail:{point}:{code}"})
    words = ("cannot write",) if code == "EROFS" else ("no room",)
    assert_unwritable(r, cache / "profiles", export, *words)
    assert files_in(cache) == []
