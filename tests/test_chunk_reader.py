"""Reading the export's tables into the cache (profile/cache/build.py ``_ChunkReader``): every value kept
with its column's kind whatever SQLite's per-value types are, and nothing left running behind a build; and
the launches table the same whether it is joined per device (one-thread builds) or at once."""
from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest

import dashcam.profile.cache.build as build
from dashcam.profile import Profile
from dashcam.testing.builder import ExportBuilder

from .conftest import MS, US

N_REGISTERED = 70_000  # more than the driver's old batch of 65,536 rows: the text column is all NULL there


def nvtx_text_late(path: Path) -> Path:
    """One kernel; N_REGISTERED NVTX marks whose labels are registered (text NULL, textId set), then three
    ranges with their label in text."""
    b = ExportBuilder()
    b.gpu(0)
    b.launch(0, 0, 5 * US, 10 * US, 2 * MS)
    for i in range(N_REGISTERED):
        b.nvtx("registered", 10 * i, None, registered=True)
    for i, label in enumerate(["step 1", "step 2", "step 3"]):
        b.nvtx(label, 3 * MS + i * MS, 3 * MS + i * MS + 500 * US)
    return b.write(path)


def read_nvtx_text(profile: Path) -> list:
    sql = 'SELECT "text" FROM NVTX_EVENTS ORDER BY rowid'
    with build._ChunkReader(profile) as reader:
        return reader.read(sql, ["text"], "nvtx").column("text").to_pylist()


def test_text_after_many_null_rows_is_read_by_the_driver(tmp_path, monkeypatch):
    p = nvtx_text_late(tmp_path / "late.sqlite")

    def no_fallback(*a, **k):
        raise AssertionError("the chunk fell back to row-by-row sqlite3")

    monkeypatch.setattr(build, "_sqlite3_chunk", no_fallback)
    text = read_nvtx_text(p)
    assert len(text) == N_REGISTERED + 3
    assert text[:N_REGISTERED] == [None] * N_REGISTERED
    assert text[N_REGISTERED:] == ["step 1", "step 2", "step 3"]


def test_late_text_reaches_the_nvtx_tool(tmp_path, monkeypatch):
    monkeypatch.setenv("DASHCAM_CACHE_DIR", str(tmp_path / "cache"))
    p = nvtx_text_late(tmp_path / "late.sqlite")
    prof = Profile.open(p, progress=False)
    assert prof.rows("SELECT label, count(*) FROM nvtx GROUP BY label ORDER BY label") == [
        ("registered", N_REGISTERED), ("step 1", 1), ("step 2", 1), ("step 3", 1)]


def test_a_value_of_the_wrong_type_becomes_null_not_an_error(tmp_path):
    """A text value in an integer column (the driver then types the column as text): the chunk is read row by
    row, the bad value is NULL, the others are kept as integers."""
    p = tmp_path / "odd.sqlite"
    con = sqlite3.connect(p)
    con.execute("CREATE TABLE t (start INTEGER, streamId INTEGER)")
    con.executemany("INSERT INTO t VALUES (?, ?)", [(1, 7), (2, "seven"), (3, 9)])
    con.commit()
    con.close()
    with build._ChunkReader(p) as reader:
        t = reader.read('SELECT "start", "streamId" FROM t ORDER BY rowid', ["start", "streamId"], "kernel")
    assert t.column("streamId").to_pylist() == [7, None, 9]
    assert str(t.schema.field("streamId").type) == "int64"


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="counts threads in /proc (Linux)")
def test_builds_leave_no_threads_behind(tmp_path):
    """A process that builds caches one after another (a fleet worker, the MCP server) keeps its thread count:
    the reader before this one left three threads per chunk."""
    p = nvtx_text_late(tmp_path / "late.sqlite")
    tables = [r[0] for r in sqlite3.connect(p).execute("SELECT name FROM sqlite_master WHERE type = 'table'")]

    def build_in(name: str) -> None:
        (tmp_path / name).mkdir()
        build.build_cache(p, tables, tmp_path / name, progress=False)

    build_in("warm")  # libraries loaded, their threads started
    before = len(os.listdir("/proc/self/task"))
    for i in range(3):
        build_in(f"c{i}")
    assert len(os.listdir("/proc/self/task")) == before


def test_launches_joined_per_device_or_at_once_are_the_same_rows(tmp_path, monkeypatch):
    """Three GPUs, a kernel without a launch call, and two kernels starting together: the one-thread build
    (DASHCAM_THREADS=1, per device) and the two-thread one write the same rows in the same order."""
    import pyarrow.parquet as pq

    from dashcam.profile.schema import THREADS_ENV

    b = ExportBuilder()
    for d in (2, 0, 1):
        b.gpu(d)
        for i in range(4):
            t = (i * 100 + d * 7) * US
            b.launch(d, t, t + 5 * US, t + 10 * US, t + 60 * US, name=f"k{d}_{i % 2}")
        b.kernel(d, 900 * US, 950 * US, name="no_call")  # no launch call: the api columns are NULL
        b.launch(d, 960 * US, 965 * US, 1000 * US, 1010 * US, name="together_a")
        b.launch(d, 961 * US, 963 * US, 1000 * US, 1020 * US, name="together_b")  # its call ended first
    p = b.write(tmp_path / "three.sqlite")
    tables = {}
    for threads in ("1", "2"):
        monkeypatch.setenv(THREADS_ENV, threads)
        monkeypatch.setenv("DASHCAM_CACHE_DIR", str(tmp_path / f"cache{threads}"))
        tables[threads] = pq.read_table(Profile.open(p, progress=False).cache / "launches.parquet")
    one, two = tables["1"], tables["2"]
    assert one.num_rows == two.num_rows == 21 and one.equals(two)
    assert one.column("device_id").to_pylist() == [0] * 7 + [1] * 7 + [2] * 7
    names = dict(Profile.open(p, progress=False).rows("SELECT id, value FROM strings"))
    dev0 = [names[i] for i in one.column("short_name_id").to_pylist()[:7]]
    assert dev0[-3:] == ["no_call", "together_b", "together_a"]  # at one start, the call that returned first
    assert one.column("api_start").to_pylist()[4] is None
