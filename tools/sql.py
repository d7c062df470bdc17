"""sql: the last resort — one read-only SELECT over the normalized views.

The query is checked lexically (comments and string literals removed first): one
statement, starting with SELECT or WITH, no statement keyword that writes or changes
settings, no table function that reads files. It then runs on a separate DuckDB
connection holding the same views, with file access limited to the profile's cache
and the configuration locked, wrapped in a row limit and stopped by a timer.
"""
from __future__ import annotations

import math
import re
import threading
import weakref
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

from pydantic import Field

from dashcam.errors import BadParameter, UnsafeQuery
from dashcam.profile.gap_causes import TABLE_COLUMNS

from .base import Tool, ToolParams, ToolResult

# The views a query can read and their columns (kept equal to model.py by tests/test_sql.py).
VIEWS: dict[str, list[str]] = {
    "kernels": ["start", "end", "dur", "device_id", "stream_id", "pid", "correlation_id", "short_name", "name",
                "short_name_id", "name_id", "grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z", "blocks",
                "threads_per_block", "graph_node_id", "graph_id", "registers_per_thread", "shared_mem_per_block"],
    "api": ["start", "end", "dur", "pid", "tid", "global_tid", "correlation_id", "name", "raw_name", "kind"],
    "memcpy": ["start", "end", "dur", "device_id", "stream_id", "pid", "correlation_id", "bytes", "kind",
               "host_mem", "src_device_id", "dst_device_id", "migration", "migration_cause"],
    "memset": ["start", "end", "dur", "device_id", "stream_id", "pid", "correlation_id", "bytes"],
    "sync_events": ["start", "end", "dur", "device_id", "stream_id", "pid", "correlation_id", "sync_type"],
    "nvtx": ["start", "end", "dur", "pid", "tid", "global_tid", "label", "event_type", "domain_id", "is_range",
             "group_id"],
    "nvtx_groups": ["group_id", "label"],
    "launches": ["device_id", "stream_id", "start", "end", "pid", "correlation_id", "short_name_id",
                 "graph_node_id", "api_tid", "api_global_tid", "api_start", "api_end", "api_name_id"],
    "gap_table": TABLE_COLUMNS,
    "gap_api": ["device_id", "start", "end", "name_id", "ns"],
    "gpu_ops": ["start", "end", "device_id", "stream_id", "op"],
    "processes": ["pid", "name", "recorded_name"],
    "threads": ["pid", "tid", "name"],
    "gpus": ["device_id", "nsys_gpu_id", "name", "sm_count", "bus_location", "total_memory", "pw_gpu_id"],
    "graph_trace": ["start", "end", "device_id", "stream_id", "pid", "correlation_id", "graph_id", "graph_exec_id"],
    "graph_events": ["start", "end", "pid", "tid", "name_id", "graph_id", "graph_exec_id", "graph_node_id", "source"],
    "gpu_memory_events": ["start", "pid", "device_id", "address", "bytes", "mem_kind", "op", "correlation_id",
                          "stream_id"],
    "um_faults": ["side", "start", "end", "pid", "device_id", "address", "faults", "access"],
    "gpu_metric_samples": ["t", "type_id", "metric_id", "value"],
    "gpu_metric_names": ["type_id", "source_id", "type_name", "metric_id", "metric_name"],
    "meta": ["key", "value"],
    "strings": ["id", "value"],
}

SCHEMA_TEXT = "; ".join(f"{v}({', '.join(cols)})" for v, cols in VIEWS.items())

QUERY_HELP = (
    "One DuckDB SELECT (or WITH ... SELECT) statement, read-only. Views: " + SCHEMA_TEXT + ". "
    'Times are integer ns on the profile clock; "end" is a keyword, write it double-quoted. '
    "api.name has the version suffix stripped (cudaLaunchKernel); api.kind is runtime|driver; "
    "memcpy.kind is HtoD|DtoH|DtoD|HtoH|PtoP|Unknown (migration true: a unified-memory page migration); "
    "nvtx.end is NULL for marks; gpu_ops.op is "
    "kernel|memcpy|memset|graph. Join kernels to the api call that launched them on pid AND correlation_id. "
    "gap_table has one row per gap of each device in the whole-profile window, its causes in ns (gpu_gaps' rule; "
    "key is the launching thread's globalTid, -1 when unknown); gap_api has, per gap (device_id, start, end) and "
    "API name (name_id: strings.id, the raw name), the launching thread's ns inside those calls during the "
    "gap's CPU-side part. "
    "graph_trace: whole CUDA graph executions (captures with --cuda-graph-trace=graph); kernels.graph_node_id / "
    "graph_id mark kernels launched from graphs. gpu_memory_events.op is alloc|free; um_faults.side is cpu|gpu; "
    "gpu_metric_samples joins gpu_metric_names on (type_id, metric_id). "
    "The analysis window is [min(start), max(\"end\")] of gpu_ops. Aggregate in SQL (GROUP BY) rather than "
    "fetching raw rows. No file reads, no writes, no settings."
)

FORBIDDEN_KEYWORDS = {
    "ATTACH", "DETACH", "PRAGMA", "INSTALL", "LOAD", "COPY", "EXPORT", "IMPORT", "CREATE", "INSERT", "UPDATE",
    "DELETE", "DROP", "ALTER", "SET", "RESET", "CALL", "CHECKPOINT", "VACUUM",
}
FILE_FUNCTIONS = {"glob", "sniff_csv", "read_parquet", "read_csv", "read_json", "read_text", "read_blob",
                  "parquet_scan", "sqlite_scan", "sqlite_attach", "st_read"}
FILE_FUNCTION_PATTERN = re.compile(r"^(read_\w+|\w+_scan|parquet_\w+)$", re.IGNORECASE)
SQL_IN_STRING_FUNCTIONS = re.compile(r"\b(query|query_table)\s*\(", re.IGNORECASE)
WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_$]*")
MAX_ROWS = 5000


class Params(ToolParams):
    query: str = Field(description=QUERY_HELP)
    max_rows: int = Field(200, ge=1, le=MAX_ROWS, description="At most this many rows are returned (1..5000).")
    timeout_s: float = Field(5, gt=0, le=60, description="Stop the query after this many seconds.")
    gpu: int | None = Field(None, description="Ignored by sql: filter on device_id in the query instead.")
    start_ms: float | None = Field(None, ge=0, description="Ignored by sql: filter on start/\"end\" in the query.")
    end_ms: float | None = Field(None, ge=0, description="Ignored by sql: filter on start/\"end\" in the query.")
    limit: int = Field(10, ge=1, le=1000, description="Ignored by sql: use max_rows.")


class Result(ToolResult):
    columns: list[str] = Field(description="Column names of the result, in order.")
    column_types: list[str] = Field(description="DuckDB type of each column.")
    rows: list[list[Any]] = Field(description="The rows, each a list of JSON values in column order.")
    row_count: int = Field(description="Number of rows returned (at most max_rows).")
    truncated: bool = Field(description="True when the query had more than max_rows rows; only the first are returned.")


# -- checking -------------------------------------------------------------------------

def _lex(query: str) -> tuple[str, str, list[str]]:
    """Split off comments and literals.

    Returns ``(code, clean, quoted)``: ``code`` is the query without comments and with
    every string literal replaced by ``''`` and every quoted identifier by ``""``;
    ``clean`` is the query without comments (literals kept); ``quoted`` are the quoted
    identifiers' contents.
    """
    code: list[str] = []
    clean: list[str] = []
    quoted: list[str] = []
    i, n = 0, len(query)
    while i < n:
        c = query[i]
        if query.startswith("--", i):
            j = query.find("\n", i)
            i = n if j < 0 else j
            code.append(" ")
            clean.append(" ")
            continue
        if query.startswith("/*", i):  # DuckDB nests block comments
            depth, j = 1, i + 2
            while j < n and depth:
                if query.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif query.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            if depth:
                raise UnsafeQuery("unterminated /* comment in the query")
            code.append(" ")
            clean.append(" ")
            i = j
            continue
        if c in "'\"":
            # E'...' strings take backslash escapes; all quotes escape themselves by doubling.
            backslash = c == "'" and i > 0 and query[i - 1] in "eE" and (i < 2 or not _ident_char(query[i - 2]))
            j = i + 1
            while j < n:
                if backslash and query[j] == "\\":
                    j += 2
                elif query[j] == c and query[j + 1:j + 2] == c:
                    j += 2
                elif query[j] == c:
                    break
                else:
                    j += 1
            if j >= n:
                raise UnsafeQuery("unterminated " + ("string literal" if c == "'" else "quoted identifier"))
            if c == '"':
                quoted.append(query[i + 1:j].replace('""', '"'))
            code.append(c + c)
            clean.append(query[i:j + 1])
            i = j + 1
            continue
        if c == "$" and (i == 0 or not _ident_char(query[i - 1])):
            m = re.match(r"\$([A-Za-z_][A-Za-z0-9_]*)?\$", query[i:])
            if m:
                tag = m.group(0)
                j = query.find(tag, i + len(tag))
                if j < 0:
                    raise UnsafeQuery("unterminated $$ string literal")
                code.append("''")
                clean.append(query[i:j + len(tag)])
                i = j + len(tag)
                continue
        code.append(c)
        clean.append(c)
        i += 1
    return "".join(code), "".join(clean), quoted


def _ident_char(ch: str) -> bool:
    return ch.isalnum() or ch in "_$"


def _strip_trailing_semicolons(text: str) -> str:
    text = text.rstrip()
    while text.endswith(";"):
        text = text[:-1].rstrip()
    return text


def check_query(query: str) -> str:
    """Return the statement to run, or raise UnsafeQuery / BadParameter with a one-line reason."""
    code, clean, quoted = _lex(query)
    code = _strip_trailing_semicolons(code)
    if not code.strip():
        raise BadParameter("the query is empty")
    if ";" in code:
        raise UnsafeQuery("only one statement is allowed (a ';' is followed by more text)")
    words = WORD.findall(code)
    for w in words:
        if w.upper() in FORBIDDEN_KEYWORDS:
            raise UnsafeQuery(f"{w.upper()} is not allowed: the sql tool runs read-only SELECT queries only")
    for w in [*words, *quoted]:
        if w.lower() in FILE_FUNCTIONS or FILE_FUNCTION_PATTERN.match(w):
            raise UnsafeQuery(f"{w} is not allowed: query the views (kernels, api, ...), not files")
    if SQL_IN_STRING_FUNCTIONS.search(code):
        raise UnsafeQuery("query()/query_table() are not allowed: write the SELECT directly")
    if re.search(r"\b(FROM|JOIN)\s*''", code, re.IGNORECASE):
        raise UnsafeQuery("reading a file by path is not allowed: query the views (kernels, api, ...)")
    first = code.split()[0]
    if not words or words[0].upper() not in ("SELECT", "WITH") or not first.upper().startswith(words[0].upper()):
        raise UnsafeQuery(f"the query must start with SELECT or WITH, not {first[:20]!r}")
    depth = 0
    for ch in code:
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if depth < 0:
            break
    if depth:
        raise BadParameter("unbalanced parentheses in the query")
    statement = _strip_trailing_semicolons(clean)
    _check_parses_as_one_select(statement)
    return statement


def _check_parses_as_one_select(statement: str) -> None:
    import duckdb

    try:
        parsed = duckdb.extract_statements(statement)
    except duckdb.Error as e:
        raise BadParameter(f"query does not parse: {_first_line(e)}") from None
    if len(parsed) != 1 or parsed[0].type != duckdb.StatementType.SELECT:
        raise UnsafeQuery("only a single SELECT statement is allowed")


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


# -- running --------------------------------------------------------------------------

class _Sandbox:
    """A DuckDB connection with the profile's views that can read nothing but the cache."""

    def __init__(self, con, sandboxed: bool) -> None:
        self.con = con
        self.sandboxed = sandboxed
        self.lock = threading.Lock()


_SANDBOXES: weakref.WeakKeyDictionary[Any, _Sandbox] = weakref.WeakKeyDictionary()
PARQUET_LITERAL = re.compile(r"'((?:[^']|'')*\.parquet)'")


def _sandbox(profile) -> _Sandbox:
    """The profile's sandbox, made once: its tables and views copied from ``profile.con``, then locked.

    Copying (rather than rebuilding) keeps the sandbox equal to whatever the loader creates.
    File access is limited to the folders the views read Parquet from.
    """
    box = _SANDBOXES.get(profile)
    if box is None:
        try:
            box = _Sandbox(_copy_and_lock(profile.con), sandboxed=True)
        except Exception:
            box = _Sandbox(profile.con, sandboxed=False)
        _SANDBOXES[profile] = box
    return box


def _copy_and_lock(src):
    import duckdb

    con = duckdb.connect(":memory:", config={"threads": 2})
    tables = src.execute("SELECT database_name, schema_name, table_name, temporary FROM duckdb_tables() "
                         "WHERE NOT internal ORDER BY table_oid").fetchall()
    for database, schema, name, temporary in tables:
        rel = src.sql(f'SELECT * FROM "{database}"."{schema}"."{name}"')
        data = rel.to_arrow_table() if hasattr(rel, "to_arrow_table") else rel.arrow()
        con.register("_dashcam_copy", data)
        con.execute(f'CREATE {"TEMP " if temporary else ""}TABLE "{name}" AS SELECT * FROM _dashcam_copy')
        con.unregister("_dashcam_copy")
    pending = src.execute("SELECT sql FROM duckdb_views() WHERE NOT internal ORDER BY view_oid").fetchall()
    folders = set()
    while pending:  # a view must come after the views it reads
        failed = []
        for (sql,) in pending:
            folders.update(str(Path(p.replace("''", "'")).parent) for p in PARQUET_LITERAL.findall(sql))
            try:
                con.execute(sql)
            except duckdb.CatalogException:
                failed.append((sql,))
        if len(failed) == len(pending):
            raise RuntimeError("cannot copy the views")
        pending = failed
    allowed = ", ".join("'" + f.rstrip("/").replace("'", "''") + "/'" for f in sorted(folders))
    for setting in (f"allowed_directories = [{allowed}]", "enable_external_access = false",
                    "autoinstall_known_extensions = false", "autoload_known_extensions = false",
                    "lock_configuration = true"):
        con.execute("SET " + setting)
    return con


def _execute(box: _Sandbox, sql: str, timeout_s: float):
    """Run ``sql`` on the sandbox, interrupting it after ``timeout_s``; return (description, rows)."""
    import duckdb

    running = {"on": True}
    guard = threading.Lock()

    def stop() -> None:
        with guard:
            if running["on"]:
                box.con.interrupt()

    timer = threading.Timer(timeout_s, stop)
    timer.daemon = True
    with box.lock:
        timer.start()
        try:
            cur = box.con.execute(sql)
            return cur.description, cur.fetchall()
        except duckdb.InterruptException:
            raise BadParameter(
                f"query stopped after {timeout_s:g} s (timeout_s): aggregate or filter more, or raise timeout_s"
            ) from None
        except duckdb.Error as e:
            raise BadParameter(f"query failed: {_first_line(e)}") from None
        finally:
            with guard:
                running["on"] = False
            timer.cancel()
            # Wait for the timer thread: if it held the last reference to the connection, DuckDB would
            # be torn down in that thread, which aborts the process when it happens at interpreter exit.
            timer.join()


def json_value(v: Any) -> Any:
    """A DuckDB value as a JSON value."""
    if v is None or isinstance(v, (bool, int, str)):
        return v
    if isinstance(v, float):
        return v if math.isfinite(v) else None
    if isinstance(v, Decimal):
        return int(v) if v == v.to_integral_value() else float(v)
    if isinstance(v, (datetime, date, time)):
        return v.isoformat()
    if isinstance(v, timedelta):
        return v.total_seconds()
    if isinstance(v, (bytes, bytearray, memoryview)):
        return bytes(v).hex()
    if isinstance(v, dict):
        return {str(k): json_value(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [json_value(x) for x in v]
    return str(v)


def run(profile, params: Params) -> Result:
    statement = check_query(params.query)
    box = _sandbox(profile)
    sql = f"SELECT * FROM (\n{statement}\n) AS q LIMIT {params.max_rows + 1}"
    description, rows = _execute(box, sql, params.timeout_s)
    truncated = len(rows) > params.max_rows
    rows = rows[: params.max_rows]
    notes = []
    if truncated:
        notes.append(f"More than {params.max_rows} rows: only the first {params.max_rows} are shown "
                     "(aggregate, or raise max_rows up to 5000).")
    if not box.sandboxed:
        notes.append("The file-access sandbox could not be built: the query ran on the profile connection.")
    return Result(
        tool="sql",
        columns=[d[0] for d in description],
        column_types=[str(d[1]) for d in description],
        rows=[[json_value(v) for v in r] for r in rows],
        row_count=len(rows),
        truncated=truncated,
        notes=notes,
    )


def render(result: Result, console) -> None:
    from rich.table import Table
    from rich.text import Text

    t = Table(show_header=True, title_justify="left")
    for c in result.columns:
        t.add_column(Text(c), overflow="fold")
    for r in result.rows:
        t.add_row(*[Text("NULL" if v is None else str(v)) for v in r])
    console.print(t)
    more = " (truncated)" if result.truncated else ""
    console.print(Text(f"{result.row_count} row{'s' if result.row_count != 1 else ''}{more}"))
    for n in result.notes:
        console.print(Text("note: " + n, style="dim"))


TOOL = Tool(
    name="sql",
    summary=("Last resort when no other tool answers the question: run one read-only DuckDB SELECT over the "
             "normalized views (kernels, api, memcpy, memset, sync_events, nvtx, gpu_ops, processes, threads, "
             "gpus, meta, strings; columns in the query parameter). Ignores the gpu/start_ms/end_ms/limit parameters."),
    params=Params, result=Result, run=run,
)
