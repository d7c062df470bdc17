"""``dashcam cache list | clear | info`` and the cache's place in ``dashcam info``."""
from __future__ import annotations

import json
import os
import stat
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dashcam.cli import app
from dashcam.profile import Profile
from dashcam.profile.cache import NEED_RATIO, REGISTRY, cache_dir_for
from dashcam.testing.scenarios import demo, nvtx_steps

DAY = 86400


@pytest.fixture
def home(tmp_path, monkeypatch):
    """No DASHCAM_CACHE_DIR: caches go beside writable profiles, else under XDG_CACHE_HOME/dashcam."""
    monkeypatch.delenv("DASHCAM_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    return tmp_path


def run(*args) -> tuple[int, str]:
    r = CliRunner().invoke(app, [str(a) for a in args])
    return r.exit_code, r.output


def run_json(*args) -> dict:
    code, out = run(*args, "--json")
    assert code == 0, out
    return json.loads(out)


def size_of(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def age(folder: Path, days: float) -> None:
    then = time.time() - days * DAY
    os.utime(folder, (then, then))


@pytest.fixture
def caches(home):
    """Four profiles: a beside its cache, b in a read-only folder (cache in the user cache), c deleted
    after its cache was built, d changed after. Returns {name: (profile, cache)}."""
    runs, ro = home / "runs", home / "ro"
    runs.mkdir()
    ro.mkdir()
    out = {}
    for name, folder, make in [("a", runs, demo), ("b", ro, nvtx_steps), ("c", runs, demo), ("d", runs / "sub", demo)]:
        folder.mkdir(exist_ok=True)
        path = make(folder / f"{name}.sqlite")
        if folder == ro:
            ro.chmod(0o555)
        Profile.open(path, progress=False).con.close()
        out[name] = (path.resolve(), cache_dir_for(path))
    ro.chmod(stat.S_IRWXU)
    out["c"][0].unlink()
    nvtx_steps(out["d"][0])
    for days, name in enumerate("abcd"):  # last used: a today, b 1 day ago, c 2, d 3
        age(out[name][1], days)
    return out


def test_list_shows_each_cache_its_size_last_use_and_state(caches, home, monkeypatch):
    listed = run_json("cache", "list", "--in", home / "runs")
    rows = {Path(c["profile"]).name: c for c in listed["caches"]}
    assert list(rows) == ["a.sqlite", "b.sqlite", "c.sqlite", "d.sqlite"]  # most recently used first
    for name, (profile, cache) in caches.items():
        row = rows[f"{name}.sqlite"]
        assert row["cache"] == str(cache) and row["profile"] == str(profile)
        assert row["size_bytes"] == size_of(cache) > 0
    assert caches["a"][1].parent == home / "runs" and caches["b"][1].parent == home / "xdg" / "dashcam" / "profiles"
    assert [(r["profile_exists"], r["current"]) for r in rows.values()] == [
        (True, True), (True, True), (False, False), (True, False)]
    assert abs(rows["c.sqlite"]["last_used"] - (time.time() - 2 * DAY)) < 60
    assert listed["total_bytes"] == sum(size_of(c) for _, c in caches.values())
    # From anywhere, without --in: the user cache lists the caches built beside their profiles.
    monkeypatch.chdir(home)
    assert [Path(c["cache"]) for c in run_json("cache", "list")["caches"]] == [caches[n][1] for n in "abcd"]
    # Caches it does not list (built by older dashcams): found in the current folder, or with --in.
    (home / "xdg" / "dashcam" / REGISTRY).unlink()
    monkeypatch.chdir(home / "ro")
    assert [Path(c["cache"]) for c in run_json("cache", "list")["caches"]] == [caches["b"][1]]
    monkeypatch.chdir(home / "runs" / "sub")
    assert [Path(c["cache"]) for c in run_json("cache", "list")["caches"]] == [caches["b"][1], caches["d"][1]]
    code, out = run("cache", "list", "--in", home / "runs")
    assert code == 0 and "4 cached profiles" in out and "profile gone" in out and "stale" in out


def test_every_open_marks_the_last_use(caches, home):
    profile, cache = caches["d"]
    before = run_json("cache", "list", "--in", home / "runs")["caches"][-1]
    assert before["cache"] == str(cache)
    Profile.open(profile, progress=False).con.close()  # rebuilt (d changed), used now
    after = {c["cache"]: c for c in run_json("cache", "list", "--in", home / "runs")["caches"]}[str(cache)]
    assert after["last_used"] > before["last_used"] + 2 * DAY and after["current"]


def test_clear_older_than_then_one_profile_then_all(caches, home):
    runs = home / "runs"
    out = run_json("cache", "clear", "--older-than", 1.5, "--in", runs)
    assert [r["cache"] for r in out["removed"]] == [str(caches["c"][1]), str(caches["d"][1])]
    assert out["freed_bytes"] == sum(r["size_bytes"] for r in out["removed"]) > 0
    assert not caches["c"][1].exists() and not caches["d"][1].exists() and caches["a"][1].exists()
    out = run_json("cache", "clear", caches["b"][0])  # a profile in a read-only folder: its cache in the user cache
    assert [r["cache"] for r in out["removed"]] == [str(caches["b"][1])]
    code, text = run("cache", "clear", "--all", "--in", runs)
    assert code == 0 and text.splitlines()[-1].startswith("1 cache removed")
    assert run_json("cache", "list", "--in", runs) == {"caches": [], "exports": [], "total_bytes": 0}
    assert (home / "xdg" / "dashcam" / REGISTRY).read_text() == ""  # cleared caches are no longer listed
    assert sorted(p.name for p in runs.iterdir()) == ["a.sqlite", "sub"]  # the profiles stay


@pytest.mark.parametrize("args", [[], ["--all", "--older-than", "3"], ["x.sqlite", "--all"], ["--older-than", "-1"]])
def test_clear_needs_exactly_one_choice(home, args):
    code, out = run("cache", "clear", *args)
    assert code == 11 and "dashcam: error:" in out


def test_cache_info_says_where_without_building(home):
    path = demo(home / "p.sqlite")
    info = run_json("cache", "info", path)
    assert info == {"profile": str(path.resolve()), "cache": str(home / "p.sqlite.dashcam"), "built": False,
                    "current": False, "size_bytes": 0, "needs_bytes": int(path.stat().st_size * NEED_RATIO),
                    "cache_dir_env": None}
    assert not (home / "p.sqlite.dashcam").exists()
    Profile.open(path, progress=False).con.close()
    info = run_json("cache", "info", path)
    assert info["built"] and info["current"] and info["size_bytes"] == size_of(home / "p.sqlite.dashcam")


def test_info_shows_the_cache(home):
    path = demo(home / "p.sqlite")
    data = run_json("info", path)
    assert data["cache"] == {"path": str(home / "p.sqlite.dashcam"), "size_bytes": size_of(home / "p.sqlite.dashcam")}
