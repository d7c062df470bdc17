import sqlite3
import time

import pytest

from dashcam.errors import BadParameter, UnsafeQuery
from dashcam.testing.builder import ExportBuilder
from dashcam.tools import get_tool
from dashcam.tools.sql import VIEWS, Params, check_query

from .conftest import MS, SHARED_SQLITE, US, sha256

sql = get_tool("sql")


def planted() -> ExportBuilder:
    """GPU 0: 3 x gemm (1 ms each) + 1 x relu (0.5 ms); GPU 1: 2 x gemm (2 ms each); one memcpy."""
    b = ExportBuilder()
    b.gpu(0, "GPU-A")
    b.gpu(1, "GPU-B")
    t = 0
    for name, dev, dur in (("gemm", 0, 1 * MS), ("gemm", 0, 1 * MS), ("relu", 0, 500 * US), ("gemm", 0, 1 * MS),
                           ("gemm", 1, 2 * MS), ("gemm", 1, 2 * MS)):
        b.launch(dev, t, t + 5 * US, t + 10 * US, t + 10 * US + dur, name=name)
        t += 3 * MS
    b.copy_call(0, t, t + 5 * US, t + 10 * US, t + 110 * US, 1 << 20)
    b.nvtx("step", 0, t, registered=True)
    return b


@pytest.fixture
def prof(build):
    return build(planted())


def test_group_by_returns_planted_totals(prof):
    r = sql(prof, {"query": "SELECT device_id, name, count(*) AS n, sum(dur) AS total_ns FROM kernels "
                            "GROUP BY ALL ORDER BY device_id, name"})
    assert r.columns == ["device_id", "name", "n", "total_ns"]
    assert r.column_types[:3] == ["BIGINT", "VARCHAR", "BIGINT"]
    assert r.rows == [[0, "gemm", 3, 3 * MS], [0, "relu", 1, 500 * US], [1, "gemm", 2, 4 * MS]]
    assert r.row_count == 3 and r.truncated is False and r.notes == []


def test_join_kernels_to_their_launch_calls(prof):
    r = sql(prof, {"query": 'SELECT a.name, count(*), sum(k.start - a.start) FROM kernels k JOIN api a '
                            'ON a.pid = k.pid AND a.correlation_id = k.correlation_id GROUP BY 1'})
    assert r.rows == [["cudaLaunchKernel", 6, 6 * 10 * US]]


def test_truncation_keeps_order_and_flags_it(prof):
    r = sql(prof, {"query": "SELECT start FROM kernels ORDER BY start DESC", "max_rows": 4})
    assert r.rows == [[15 * MS + 10 * US], [12 * MS + 10 * US], [9 * MS + 10 * US], [6 * MS + 10 * US]]
    assert r.row_count == 4 and r.truncated is True
    assert "only the first 4" in r.notes[0]
    exact = sql(prof, {"query": "SELECT start FROM kernels", "max_rows": 6})
    assert exact.row_count == 6 and exact.truncated is False


def test_with_statement_comments_and_trailing_semicolon(prof):
    q = """-- busiest device
    WITH per_dev AS (SELECT device_id, sum(dur) AS busy FROM kernels /* all of them */ GROUP BY 1)
    SELECT device_id FROM per_dev ORDER BY busy DESC LIMIT 1;  -- done ;"""
    assert sql(prof, {"query": q}).rows == [[1]]


@pytest.mark.parametrize("query, expected", [
    ("SELECT 'DROP TABLE x; ATTACH ''y''' AS s", "DROP TABLE x; ATTACH 'y'"),
    ("SELECT $$ ; PRAGMA x $$ AS s", " ; PRAGMA x "),
    ('SELECT 1 AS "delete"', 1),
    ("SELECT 1 /* a /* nested */ DROP */ AS x", 1),
    ("SELECT 'read_csv(''/etc/passwd'')' AS s", "read_csv('/etc/passwd')"),
    ("SELECT count(*) AS settings FROM kernels", 6),  # 'settings' is not the keyword SET
])
def test_keywords_inside_literals_and_comments_are_fine(prof, query, expected):
    assert sql(prof, {"query": query}).rows == [[expected]]


@pytest.mark.parametrize("query, reason", [
    ("DROP VIEW kernels", "DROP"),
    ("delete from kernels", "DELETE"),
    ("SELECT 1; SELECT 2", "one statement"),
    ("SELECT 1; -- x\n DROP VIEW kernels", "one statement"),
    ("SELECT 1 ;\n;\nSELECT 2", "one statement"),
    ("ATTACH '/tmp/x.db' AS x", "ATTACH"),
    ("PRAGMA database_list", "PRAGMA"),
    ("SELECT * FROM read_parquet('/tmp/*.parquet')", "read_parquet"),
    ("SELECT * FROM READ_CSV_AUTO('/etc/passwd')", "READ_CSV_AUTO"),
    ("SELECT * FROM glob('/*')", "glob"),
    ("SELECT * FROM sqlite_scan('x.sqlite', 'StringIds')", "sqlite_scan"),
    ('SELECT * FROM "read_text"(\'/etc/hostname\')', "read_text"),
    ("SELECT * FROM '/etc/passwd'", "file by path"),
    ("SELECT * FROM kernels JOIN 'x.parquet' USING (start)", "file by path"),
    ("SELECT * FROM query('SELECT 1')", "query()"),
    ("WITH x AS (SELECT 1) INSERT INTO t SELECT * FROM x", "INSERT"),
    ("COPY kernels TO '/tmp/out.csv'", "COPY"),
    ("SELECT 1; SET threads = 1", "one statement"),
    ("SET threads = 1", "SET"),
    ("CALL pragma_version()", "CALL"),
    ("LOAD httpfs", "LOAD"),
    ("DESCRIBE kernels", "must start with SELECT or WITH"),
    ("FROM kernels", "must start with SELECT or WITH"),
    (r"SELECT E'\'' AS a; DROP VIEW kernels --'", "one statement"),  # backslash escape ends the literal
    ("SELECT 'unterminated", "unterminated"),
    ("SELECT 1 /* never closed", "unterminated"),
])
def test_unsafe_queries_are_refused_with_one_line_reason(query, reason):
    with pytest.raises(UnsafeQuery) as e:
        check_query(query)  # what run() does first
    msg = str(e.value)
    assert reason.lower() in msg.lower() and "\n" not in msg
    assert e.value.exit_code == 12


def test_views_are_untouched_after_refusals(prof):
    for q in ("DROP VIEW kernels", "SELECT 1; DROP VIEW kernels"):
        with pytest.raises(UnsafeQuery):
            sql(prof, {"query": q})
    assert sql(prof, {"query": "SELECT count(*) FROM kernels"}).rows == [[6]]


@pytest.mark.parametrize("query, reason", [
    ("", "empty"),
    ("  -- only a comment", "empty"),
    ("SELECT no_such_column FROM kernels", "no_such_column"),
    ("SELECT * FROM no_such_view", "no_such_view"),
    ("SELECT 1 +", "does not parse"),
    ("SELECT 1) UNION (SELECT 2", "parentheses"),
])
def test_broken_queries_are_bad_parameters(prof, query, reason):
    with pytest.raises(BadParameter) as e:
        sql(prof, {"query": query})
    assert reason in str(e.value) and "\n" not in str(e.value)


def test_timeout_interrupts_the_query(prof):
    t = time.time()
    with pytest.raises(BadParameter, match="timeout_s"):
        sql(prof, {"query": "SELECT count(*) FROM range(100000000000) a", "timeout_s": 0.2})
    assert time.time() - t < 3
    assert sql(prof, {"query": "SELECT 1"}).rows == [[1]]  # the connection still works


def test_sandbox_cannot_read_files_even_past_the_checks(prof, tmp_path):
    """Defence in depth: the connection itself refuses file access and setting changes."""
    import duckdb

    from dashcam.tools.sql import _sandbox

    outside = tmp_path / "secret.csv"
    outside.write_text("a\n1\n")
    box = _sandbox(prof)
    assert box.sandboxed
    for q in (f"SELECT * FROM read_csv('{outside}')", f"SELECT * FROM '{outside}'",
              "SET enable_external_access = true", "SET lock_configuration = false"):
        with pytest.raises(duckdb.Error):
            box.con.execute(q)
    assert box.con.execute("SELECT count(*) FROM kernels").fetchone() == (6,)
    # and the tools' own connection is not locked down
    assert prof.con.execute("SELECT current_setting('enable_external_access')").fetchone() == (True,)


def test_values_are_json_safe(prof):
    r = sql(prof, {"query": "SELECT 1.25::DECIMAL(5,2) AS d, 4::DECIMAL(5,2) AS i, 'nan'::DOUBLE AS nan, "
                            "DATE '2024-01-02' AS day, [1, 2] AS l, {'a': 1} AS s, 'ab'::BLOB AS b, "
                            "INTERVAL 2 SECOND AS iv, NULL AS n, 12345678901234567890::HUGEINT AS h"})
    assert r.rows == [[1.25, 4, None, "2024-01-02", [1, 2], {"a": 1}, "6162", 2.0, None, 12345678901234567890]]
    r.model_dump_json()  # serializes


def test_window_params_are_ignored(prof):
    r = sql(prof, {"query": "SELECT count(*) FROM kernels", "gpu": 7, "start_ms": 1, "end_ms": 2})
    assert r.rows == [[6]]


def test_param_limits():
    with pytest.raises(ValueError):
        Params(query="SELECT 1", max_rows=5001)
    with pytest.raises(ValueError):
        Params(query="SELECT 1", timeout_s=0)
    with pytest.raises(ValueError):
        Params()  # query is required


def test_schema_in_description_matches_the_views(prof):
    desc = sql.json_schema()["function"]["parameters"]["properties"]["query"]["description"]
    for view, cols in VIEWS.items():
        assert [r[0] for r in prof.rows(f"DESCRIBE {view}")] == cols, view
        assert f"{view}({', '.join(cols)})" in desc
    for name in ("gpu", "start_ms", "end_ms", "limit"):
        assert "Ignored by sql" in Params.model_fields[name].description


def test_check_query_returns_the_statement_without_comments():
    assert check_query("SELECT 1 -- x\n;") == "SELECT 1"


def test_empty_profile_views_answer(build):
    b = ExportBuilder("2021")
    b.api("cudaMalloc", 0, 10 * US)
    r = sql(build(b), {"query": "SELECT (SELECT count(*) FROM kernels), (SELECT count(*) FROM api), "
                                "(SELECT count(*) FROM gpus), (SELECT count(*) FROM meta)"})
    assert r.rows == [[0, 1, 0, 0]]


@pytest.mark.parametrize("path", SHARED_SQLITE, ids=lambda p: p.name)
def test_shared_profiles_counts_equal_plain_sql(path):
    from dashcam.profile import Profile

    before = sha256(path)
    p = Profile.open(path, progress=False)
    r = sql(p, {"query": "SELECT device_id, count(*) FROM kernels GROUP BY 1 ORDER BY 1"})
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        has = {x[0] for x in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        want = (con.execute("SELECT deviceId, count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL GROUP BY 1 ORDER BY 1")
                .fetchall() if "CUPTI_ACTIVITY_KIND_KERNEL" in has else [])
    finally:
        con.close()
    assert [tuple(x) for x in r.rows] == want
    assert sha256(path) == before
