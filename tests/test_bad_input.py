"""Bad input through the real CLI: one line on stderr, the documented exit code, never a traceback."""
from __future__ import annotations

import json
import sqlite3
import subprocess
from pathlib import Path

import pytest

from dashcam.errors import EXIT_CODES
from dashcam.testing.builder import ExportBuilder

from .conftest import MS, US


def assert_one_line_error(proc: subprocess.CompletedProcess, code: int) -> str:
    assert "Traceback" not in proc.stderr + proc.stdout
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("dashcam: error: "), lines[0]
    assert proc.returncode == code, (proc.returncode, lines[0])
    return lines[0]


def small_export() -> ExportBuilder:
    b = ExportBuilder()
    b.gpu(0, "GPU-A")
    for i in range(40):
        b.launch(0, i * MS, i * MS + 5 * US, i * MS + 10 * US, i * MS + 500 * US, name=f"k{i % 3}")
    b.nvtx("step", 0, 40 * MS)
    return b


@pytest.fixture
def export(tmp_path) -> Path:
    return small_export().write(tmp_path / "ok.sqlite")


def test_exit_codes_match_core_errors():
    assert EXIT_CODES == {"ProfileNotFound": 3, "ProfileIsDirectory": 4, "NotSQLite": 5, "NotNsysExport": 6,
                          "CorruptProfile": 7, "NoGpuActivity": 8, "UnknownGpu": 9,
                          "NsysNotFound": 27, "ReportTooNew": 28, "NsysUnavailable": 10,
                          "NsysRefusedOption": 29, "ProgramFailed": 30, "EmptyCapture": 31,
                          "BadParameter": 11, "UnsafeQuery": 12, "CacheUnwritable": 15, "CacheDamaged": 16,
                          "SchedulerUnreachable": 17, "NoReports": 18, "WorkersLackDashcam": 19,
                          "MissingDependency": 26, "NotComparable": 32}


def test_missing_file(cli, tmp_path):
    line = assert_one_line_error(cli("info", tmp_path / "nope.sqlite"), 3)
    assert "nope.sqlite" in line


def test_directory(cli, tmp_path):
    assert_one_line_error(cli("tool", "run", "overview", tmp_path), 4)


def test_text_file_is_not_sqlite(cli, tmp_path):
    p = tmp_path / "notes.sqlite"
    p.write_text("this is not a database\n" * 20)
    assert_one_line_error(cli("info", p), 5)


def test_empty_file_is_not_sqlite(cli, tmp_path):
    p = tmp_path / "empty.sqlite"
    p.write_bytes(b"")
    assert_one_line_error(cli("info", p), 5)


def test_sqlite_without_nsys_tables(cli, tmp_path):
    p = tmp_path / "other.sqlite"
    con = sqlite3.connect(p)
    con.execute("CREATE TABLE customers (id INTEGER, name TEXT)")
    con.execute("INSERT INTO customers VALUES (1, 'a')")
    con.commit()
    con.close()
    line = assert_one_line_error(cli("info", p), 6)
    assert "nsys export --type sqlite" in line


def test_truncated_file(cli, tmp_path, export):
    data = export.read_bytes()
    cut = tmp_path / "cut.sqlite"
    cut.write_bytes(data[: len(data) // 2])
    line = assert_one_line_error(cli("tool", "run", "overview", cut), 7)
    assert "truncated" in line


def test_file_cut_inside_the_header_is_truncated(cli, tmp_path, export):
    cut = tmp_path / "cut50.sqlite"
    cut.write_bytes(export.read_bytes()[:50])
    assert_one_line_error(cli("info", cut), 7)


def test_no_gpu_activity(cli, tmp_path):
    b = ExportBuilder()
    b.api("cudaMalloc", 0, 10 * US)
    b.api("cudaFree", 20 * US, 30 * US)
    p = b.write(tmp_path / "api_only.sqlite")
    assert_one_line_error(cli("tool", "run", "gpu_gaps", p), 8)  # the gaps need GPU rows
    r = cli("tool", "run", "overview", p, "--json")  # what the capture is, it can say: no GPUs, two CUDA calls
    assert r.returncode == 0 and (json.loads(r.stdout)["gpu_count"], json.loads(r.stdout)["api_calls"]) == (0, 2)


def test_unknown_gpu_lists_existing_ones(cli, tmp_path):
    b = small_export()
    b.kernel(2, 0, 10 * US)
    p = b.write(tmp_path / "two.sqlite")
    line = assert_one_line_error(cli("tool", "run", "overview", p, "--gpu", "5"), 9)
    assert "GPU 5" in line and "0, 2" in line


@pytest.mark.parametrize("args", [
    ["-a", "bogus=1"],                  # unknown parameter
    ["-a", "limit=0"],                  # out of range
    ["-a", "nokeyvalue"],               # not KEY=VALUE
    ["--start", "-1"],                  # negative time
    ["--start", "5", "--end", "2"],     # empty window
    ["--start", "1000"],                # window after the profile's end
], ids=["unknown", "range", "syntax", "negative", "empty", "outside"])
def test_bad_parameters(cli, export, args):
    assert_one_line_error(cli("tool", "run", "overview", export, *args), 11)


def test_unknown_tool(cli, export):
    line = assert_one_line_error(cli("tool", "run", "no_such_tool", export), 11)
    assert "overview" in line  # lists the tools that exist


@pytest.mark.parametrize("query", [
    "DROP VIEW kernels",
    "SELECT 1; SELECT 2",
    "SELECT * FROM read_csv('/etc/passwd')",
    "ATTACH '/tmp/x.db'",
])
def test_unsafe_sql(cli, export, query):
    assert_one_line_error(cli("tool", "run", "sql", export, "-a", f"query={query}"), 12)


def test_sql_error_is_one_line(cli, export):
    line = assert_one_line_error(cli("tool", "run", "sql", export, "-a", "query=SELECT no_such_column FROM kernels"),
                                 11)
    assert "no_such_column" in line


def test_sql_through_cli(cli, export):
    proc = cli("tool", "run", "sql", export, "-a", "query=SELECT count(*) AS n FROM kernels", "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["columns"] == ["n"] and out["rows"] == [[40]]


def _drop_table(path: Path, table: str) -> None:
    con = sqlite3.connect(path)
    con.execute(f"DROP TABLE {table}")
    con.commit()
    con.close()


@pytest.mark.parametrize("drop", [False, True], ids=["empty-runtime", "no-runtime-table"])
def test_kernels_without_api_rows_answer_overview(cli, tmp_path, drop):
    b = ExportBuilder()
    b.gpu(0)
    b.kernel(0, 0, 1 * MS)
    b.kernel(0, 3 * MS, 4 * MS)
    p = b.write(tmp_path / "kernels_only.sqlite")
    if drop:
        _drop_table(p, "CUPTI_ACTIVITY_KIND_RUNTIME")
    proc = cli("tool", "run", "overview", p, "--json")
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    out = json.loads(proc.stdout)
    assert out["api_calls"] == 0
    assert out["devices"][0]["kernel_count"] == 2
    assert out["devices"][0]["kernel_busy_pct"] == 50.0
    assert any("CUPTI_ACTIVITY_KIND_RUNTIME" in n for n in out["notes"])
    assert cli("tool", "run", "overview", p).returncode == 0  # the rich rendering too


@pytest.mark.parametrize("drop", [False, True], ids=["empty-kernel", "no-kernel-table"])
def test_api_only_answers_info(cli, tmp_path, drop):
    b = ExportBuilder()
    b.api("cudaMalloc", 0, 10 * US)
    b.api("cudaFree", 20 * US, 30 * US)
    b.api("cudaFree", 40 * US, 50 * US)
    p = b.write(tmp_path / "api_only.sqlite")
    if drop:
        _drop_table(p, "CUPTI_ACTIVITY_KIND_KERNEL")
    proc = cli("info", p, "--json")
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    out = json.loads(proc.stdout)
    assert out["rows"]["api_calls"] == 3 and out["rows"]["kernels"] == 0
    assert out["window_ns"] is None
    assert cli("info", p).returncode == 0
