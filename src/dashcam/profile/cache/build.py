"""Building a cache: the export's tables read in row-id chunks and written as Parquet, then the derived tables."""
from __future__ import annotations

import queue
import sqlite3
import sys
import threading
from pathlib import Path

from dashcam.errors import CorruptProfile
from dashcam.measure.labels import nvtx_kind
from dashcam.measure.names import kernel_short_name
from dashcam.profile.cache.hooks import checkpoint
from dashcam.profile.cache.where import CACHE_VERSION
from dashcam.profile.derived import build_derived
from dashcam.profile.gap_nvtx import GapNvtx
from dashcam.profile.nvtx_kernels import attribute, chunk_ranges, finish, read_ranges, window_axis
from dashcam.profile.program_facts import NvtxFacts
from dashcam.profile.schema import (
    BIG_TABLES,
    SMALL_TABLES,
    TEXT_COLUMNS,
    column_kind,
    duckdb_config,
    thread_count,
)
from dashcam.profile.source import connect_readonly, readonly_uri
from dashcam.profile.views import create_views

CHUNK_ROWS = 300_000
# NVTX rows carry label text: smaller chunks than the other tables keep the workers lean. On one thread (the
# fleet's digests, DASHCAM_THREADS=1) memory per worker comes first: a 120 MB export (956,000 NVTX rows) peaks
# about 18 MB lower with 75,000 rows a chunk than with 150,000. On two threads (a first open) speed comes first:
# each chunk is a query and a file, and the 973 MB benchmark (7.6 M NVTX rows) takes about 1 s more
# CPU in 102 chunks than in 51.
NVTX_CHUNK_ROWS = 150_000
ONE_THREAD_NVTX_CHUNK_ROWS = 75_000
WORKERS = 2
DERIVE_MEMORY = "160MB"  # DuckDB spills past this while joining: keeps the first open lean


# Raw chunks are written without general-purpose compression (it slows every scan), but each column
# with the encoding that suits it: times and correlation ids grow row by row, so their deltas are
# bit-packed; ids, kinds, devices, streams and sizes repeat, so they are dictionary-encoded (pyarrow
# falls back to plain pages when a column has too many values); label text, mostly unique, is
# zstd-compressed. On the benchmark this takes the raw chunks from 0.8x the profile's size to 0.1x
# and scans them no slower (docs/performance.md).
DELTA_COLUMNS = {"start", "end", "correlationId", "timestamp"}


def chunk_write_options(columns: list[str]) -> dict:
    """pyarrow.parquet.write_table options for a raw chunk with these columns."""
    return {"compression": {c: ("zstd" if c in TEXT_COLUMNS else "none") for c in columns},
            "use_dictionary": [c for c in columns if c not in DELTA_COLUMNS],
            "column_encoding": {c: "DELTA_BINARY_PACKED" for c in columns if c in DELTA_COLUMNS},
            "write_page_checksum": True}


def nvtx_chunk_rows() -> int:
    """NVTX rows a chunk: NVTX_CHUNK_ROWS, at most ONE_THREAD_NVTX_CHUNK_ROWS when the build runs on one thread."""
    if thread_count(WORKERS) == 1:
        return min(NVTX_CHUNK_ROWS, ONE_THREAD_NVTX_CHUNK_ROWS)
    return NVTX_CHUNK_ROWS


def _derive(out: Path, manifest: dict, examined=None):
    """Build the derived tables (derived.py) from the raw files the manifest lists; return their
    counts and the launch axis of the whole-profile window (nvtx_kernels.py; None without launches).

    Runs on one DuckDB thread: it shares the machine with the NVTX extraction (build_cache).
    """
    import duckdb

    config = duckdb_config(DERIVE_MEMORY)
    config["threads"] = 1
    con = duckdb.connect(":memory:", config=config)
    try:
        create_views(con, out, manifest)
        derived = build_derived(con, out, examined, per_device=thread_count(WORKERS) == 1)
        axis = window_axis(con, derived["window"]) if derived["window"] else None
        return derived, axis
    finally:
        con.close()


def wrapper_short_names(rows: list[tuple]) -> tuple[list[tuple], dict[int, int]]:
    """The (id, value) rows of the string table with the short names of generic wrapper kernels added
    (names.kernel_short_name: nsys' shortName drops the template argument that tells them apart), and
    demangled name id -> short name id for them. New strings get ids after the largest."""
    next_id = max((r[0] for r in rows if r[0] is not None), default=0) + 1
    ids = {v: i for i, v in rows}
    out: dict[int, int] = {}
    added = []
    for i, v in rows:
        short = kernel_short_name(None, v)
        if short is not None:
            if short not in ids:
                ids[short] = next_id
                added.append((next_id, short))
                next_id += 1
            out[i] = ids[short]
    return rows + added, out


def _short_name_column(short_names: dict[int, int]) -> str:
    """The kernel table's shortName, with the wrapper kernels' own short names (``wrapper_short_names``)."""
    if not short_names:
        return '"shortName"'
    cases = " ".join(f"WHEN {a} THEN {b}" for a, b in sorted(short_names.items()))
    return f'coalesce(CASE "demangledName" {cases} END, "shortName") AS "shortName"'


def _columns(con: sqlite3.Connection, table: str) -> list[str]:
    return [r[1] for r in con.execute(f'PRAGMA table_info("{table}")')]


def build_cache(profile: Path, tables: list[str], out: Path, progress: bool | None = None) -> dict:
    import pyarrow as pa
    import pyarrow.parquet as pq

    # The system allocator hands freed chunk buffers back to the OS, so the peak memory of a
    # build stays near two chunks per worker instead of growing with what a pool keeps.
    pa.set_memory_pool(pa.system_memory_pool())

    present = set(tables)
    con = connect_readonly(profile)
    manifest: dict = {"version": CACHE_VERSION, "source": str(profile.resolve()), "tables": {}}
    jobs: list[tuple[str, str, int, str]] = []
    short_names: dict[int, int] = {}  # demangled kernel name id -> short name id, for generic wrapper templates
    try:
        # Tables are created lazily, but not always: some exports carry empty ones. Which hold rows
        # says what the capture recorded (capture coverage, the workload's evidence); EXISTS is O(1).
        manifest["nonempty_tables"] = sorted(
            t for t in present if not t.startswith("ENUM_")
            and con.execute(f'SELECT EXISTS (SELECT 1 FROM "{t}")').fetchone()[0])
        for src, (short, wanted) in SMALL_TABLES.items():
            if src not in present:
                continue
            have = _columns(con, src)
            cols = [c for c in wanted if c in have]
            if not cols:
                continue
            sel = ", ".join(
                f'CAST("{c}" AS TEXT) AS "{c}"' if c in TEXT_COLUMNS else f'CAST("{c}" AS INTEGER) AS "{c}"'
                for c in cols
            )
            rows = con.execute(f'SELECT {sel} FROM "{src}"').fetchall()
            if short == "strings" and cols == ["id", "value"]:
                rows, short_names = wrapper_short_names(rows)
            arrays = [
                pa.array([r[i] for r in rows], type=pa.string() if c in TEXT_COLUMNS else pa.int64())
                for i, c in enumerate(cols)
            ]
            pq.write_table(pa.Table.from_arrays(arrays, names=cols), out / f"{short}.parquet",
                           write_page_checksum=True)
            manifest["tables"][short] = {"columns": cols, "rows": len(rows), "files": 1}
            checkpoint(f"table {short}")
        for src, (short, wanted) in BIG_TABLES.items():
            if src not in present:
                continue
            have = _columns(con, src)
            cols = [c for c in wanted if c in have]
            if wanted[0] not in cols:  # the time column (start; timestamp for GPU metrics)
                continue
            # Two queries: SQLite answers min(rowid) and max(rowid) from the b-tree ends only when
            # each is alone; together they scan the whole table.
            lo = con.execute(f'SELECT min(rowid) FROM "{src}"').fetchone()[0]
            hi = con.execute(f'SELECT max(rowid) FROM "{src}"').fetchone()[0]
            manifest["tables"][short] = {"columns": cols, "rows": 0, "files": 0}
            if lo is None:
                continue
            sel = ", ".join(_short_name_column(short_names) if short == "kernel" and c == "shortName" else f'"{c}"'
                            for c in cols)
            step = nvtx_chunk_rows() if short == "nvtx" else CHUNK_ROWS
            for i, a in enumerate(range(lo, hi + 1, step)):
                q = f'SELECT {sel} FROM "{src}" WHERE rowid >= {a} AND rowid < {a + step}'
                jobs.append((short, src, i, q))
    except sqlite3.DatabaseError as e:
        raise CorruptProfile(f"{profile}: unreadable SQLite file ({e})") from None
    finally:
        con.close()

    # The derived tables (derived.py) read every table but NVTX. Those chunks go first, largest
    # table first; the worker that writes the last of them then builds the derived tables (one
    # DuckDB thread) while the other worker goes on with the NVTX chunks.
    order = {"runtime": 0, "kernel": 1, "memcpy": 2, "nvtx": 9}
    jobs.sort(key=lambda j: (order.get(j[0], 5), j[2]))
    results: dict[str, list[int]] = {}
    errors: list[BaseException] = []
    q: queue.Queue = queue.Queue()
    for j in jobs:
        q.put(j)
    lock = threading.Lock()
    groups = _NvtxGroups(out)
    if callable(progress):  # the caller's own hook, progress(done, total) (dashcam mcp: progress notifications)
        bar = _Hook(progress, len(jobs) + 1) if jobs else None
    else:
        show = progress if progress is not None else sys.stderr.isatty()
        bar = _Progress(len(jobs) + 1, profile.name) if show and jobs else None
    pending = {"before_derive": sum(1 for j in jobs if j[0] != "nvtx")}

    # Kernels launched inside NVTX ranges, per label group (nvtx_kernels.py), chunk by chunk: by the
    # worker that extracted the chunk once the launch axis exists, before that by the derive step.
    nvtx_state: dict = {"axis": None, "window": None, "early": [], "parts": []}

    examined = GapNvtx()  # the gaps gpu_gaps cuts by NVTX range (gap_nvtx.py)
    nvtx_facts = NvtxFacts()  # the NVTX names and counts of program_facts.py

    def attribute_nvtx(i: int, ranges) -> None:
        examined.add_chunk(i, ranges)
        part = attribute(nvtx_state["axis"], *ranges)
        with lock:
            nvtx_state["parts"].append(part)

    def derive() -> None:
        big = {short for short, _ in BIG_TABLES.values()}
        tables = {short: (dict(info, rows=sum(results.get(short, [])), files=len(results.get(short, [])))
                          if short in big else info)
                  for short, info in manifest["tables"].items() if short != "nvtx"}
        manifest["derived"], axis = _derive(out, {**manifest, "tables": tables}, examined)
        examined.seal()
        checkpoint("derived")
        if bar:
            bar.advance()
        if axis is None:
            return
        with lock:
            nvtx_state["axis"], nvtx_state["window"] = axis, manifest["derived"]["window"]
            early, nvtx_state["early"] = nvtx_state["early"], []
        for i, path in early:
            attribute_nvtx(i, read_ranges(path, nvtx_state["window"]))

    def work() -> None:
        with _ChunkReader(profile) as reader:
            take_chunks(reader)

    def take_chunks(reader: _ChunkReader) -> None:
        while not errors:
            try:
                short, src, i, sql = q.get_nowait()
            except queue.Empty:
                return
            try:
                table = reader.read(sql, manifest["tables"][short]["columns"], short)
                if short == "nvtx":
                    table = groups.add_column(table)
                    nvtx_facts.add_chunk(table)
                path = out / f"{short}-{i:05d}.parquet"
                pq.write_table(table, path, **chunk_write_options(table.column_names))
                checkpoint(f"chunk {path.name}")
                rows = table.num_rows
                if short == "nvtx":
                    with lock:
                        ready = nvtx_state["axis"] is not None
                        if not ready:
                            nvtx_state["early"].append((i, path))
                    if ready:
                        attribute_nvtx(i, chunk_ranges(table, nvtx_state["window"]))
                del table
                with lock:
                    results.setdefault(short, []).append(rows)
                    if short != "nvtx":
                        pending["before_derive"] -= 1
                    last = short != "nvtx" and pending["before_derive"] == 0
                if bar:
                    bar.advance()
                if last:
                    derive()
            except BaseException as e:  # reported below, after the threads stop
                errors.append(e)
                return

    if pending["before_derive"] == 0:
        derive()
    n_threads = min(thread_count(WORKERS), max(1, len(jobs)))
    if n_threads == 1:
        # One thread: the calling one. A thread started per build left 2 MB resident behind it when it ended
        # (the allocators' per-thread state): a fleet worker building 8 caches in a row grew 16 MB more
        work()
    else:
        threads = [threading.Thread(target=work, daemon=True) for _ in range(n_threads)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    if bar:
        bar.close()
    if errors:
        e = errors[0]
        if isinstance(e, sqlite3.DatabaseError):
            raise CorruptProfile(f"{profile}: unreadable SQLite file ({e})") from None
        raise e
    release_free_memory()
    for short, counts in results.items():
        manifest["tables"][short]["rows"] = sum(counts)
        manifest["tables"][short]["files"] = len(counts)
    if "nvtx" in results:
        manifest["tables"]["nvtx"]["columns"].append("groupId")
        manifest["nvtx_groups"] = groups.write(out)
        checkpoint("nvtx groups")
        if "program_facts" in manifest.get("derived", {}):
            manifest["derived"]["program_facts"].update(nvtx_facts.facts(groups.ids, groups.strings()))
        if nvtx_state["axis"] is not None:
            files = sorted(out.glob("nvtx-*.parquet"))
            manifest["derived"]["nvtx_kernels"] = finish(nvtx_state["parts"], nvtx_state["axis"],
                                                         nvtx_state["window"], files, out)
            checkpoint("nvtx kernels")
            if examined.n:
                kinded = {g for label, g in groups.ids.items() if nvtx_kind(label) is not None}
                manifest["derived"]["gap_nvtx"], sums = examined.write(out, kinded)
                for d, x in sums.items():  # gpu_gaps over the whole profile reads these
                    manifest["derived"]["gap_totals"].get(d, {})["nvtx"] = x
                checkpoint("gap nvtx")
    return manifest


class _NvtxGroups:
    """Gives every NVTX label group (names.nvtx_group_labels) one id, across chunks and threads.

    Each NVTX chunk gets a ``groupId`` column: the group of its label, whether the label is in
    ``text`` or registered (``textId``, looked up in StringIds). Group labels are written to
    ``nvtx_groups.parquet`` (group_id, label).
    """

    def __init__(self, out: Path) -> None:
        self.out = out
        self.ids: dict[str, int] = {}
        self.by_text_id: dict[int, int] = {}
        import numpy as np
        import pyarrow as pa

        self.by_text: dict[str, int] = {}  # label -> group id; the same as arrays for pc.index_in:
        self._known = pa.array([], pa.string())
        self._known_gid = np.zeros(0, np.int64)
        self._strings: dict[int, str] | None = None
        self.lock = threading.Lock()

    def _ids_for(self, labels):
        """Group ids of a pyarrow string array of labels (-1 for null); each label's group is worked out once."""
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc

        from dashcam.measure.names import nvtx_group_labels

        with self.lock:
            known, known_gid = self._known, self._known_gid
        pos = pc.index_in(labels, value_set=known).fill_null(-1).to_numpy(zero_copy_only=False)
        new = (pos < 0) & labels.is_valid().to_numpy(zero_copy_only=False)
        if new.any():
            texts = labels.filter(pa.array(new)).to_pylist()
            norm = nvtx_group_labels(pa.array(texts, pa.string())).to_pylist()
            with self.lock:
                for t, x in zip(texts, norm):
                    if t not in self.by_text:
                        self.by_text[t] = self.ids.setdefault(x, len(self.ids))
                self._known = pa.array(list(self.by_text), pa.string())
                self._known_gid = np.fromiter(self.by_text.values(), np.int64, len(self.by_text))
                known, known_gid = self._known, self._known_gid
            pos = pc.index_in(labels, value_set=known).fill_null(-1).to_numpy(zero_copy_only=False)
        return np.where(pos >= 0, known_gid[np.maximum(pos, 0)] if len(known_gid) else -1, -1)

    def strings(self) -> dict[int, str]:
        """The registered strings (id -> text), read once (by _text_id_groups)."""
        self._text_id_groups([])
        return self._strings or {}

    def _text_id_groups(self, text_ids):
        """Group ids for registered-string ids (-1 where the id has no string)."""
        import numpy as np
        import pyarrow as pa
        import pyarrow.parquet as pq

        with self.lock:
            if self._strings is None:
                path = self.out / "strings.parquet"
                # one file: pq.read_table would load pyarrow.dataset, 7 MB of each fleet worker for this alone
                t = pq.ParquetFile(path).read() if path.exists() else None
                self._strings = dict(zip(t.column("id").to_pylist(), t.column("value").to_pylist())) if t else {}
            new = [int(i) for i in text_ids if int(i) not in self.by_text_id]
            labels = [self._strings.get(i) for i in new]
        if new:
            gids = self._ids_for(pa.array(labels, pa.string()))
            with self.lock:
                self.by_text_id.update(zip(new, (int(g) for g in gids)))
        return np.array([self.by_text_id[int(i)] for i in text_ids], dtype=np.int64)

    def add_column(self, table):
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc

        gid = np.full(table.num_rows, -1, np.int64)
        if "textId" in table.column_names:
            tid = table.column("textId").combine_chunks()
            has = tid.is_valid().to_numpy(zero_copy_only=False)
            if has.any():
                vals = tid.fill_null(0).to_numpy(zero_copy_only=False)
                uniq, inv = np.unique(vals[has], return_inverse=True)
                gid[has] = self._text_id_groups(uniq)[inv]
        if "text" in table.column_names:
            enc = pc.dictionary_encode(table.column("text")).combine_chunks()
            valid = enc.indices.is_valid().to_numpy(zero_copy_only=False)
            if valid.any():
                mapping = self._ids_for(enc.dictionary)
                gid[valid] = mapping[enc.indices.fill_null(0).to_numpy(zero_copy_only=False)[valid]]
        return table.append_column("groupId", pa.array(gid, pa.int64(), mask=gid < 0))

    def write(self, out: Path) -> int:
        import pyarrow as pa
        import pyarrow.parquet as pq

        labels = sorted(self.ids.items(), key=lambda kv: kv[1])
        pq.write_table(pa.table({"group_id": pa.array([i for _, i in labels], pa.int64()),
                                 "label": pa.array([k for k, _ in labels], pa.string())}),
                       out / "nvtx_groups.parquet", write_page_checksum=True)
        return len(labels)


def release_free_memory() -> None:
    """Hand the C heap's free pages back to the OS (glibc's malloc_trim; nothing elsewhere). Freed chunk
    buffers stay resident in the heap otherwise: on a 120 MB export the steps after the extraction peaked
    about 50 MB higher (269 against 217 MB)."""
    import ctypes
    import ctypes.util

    try:
        ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


# Rows a batch of the ADBC SQLite driver: a whole chunk. The driver infers each column's type from the values
# of a result's first batch; a column all NULL there (label text before the first row that has text) would be
# taken for integers and the chunk would fail when its text came.
ADBC_BATCH_ROWS = CHUNK_ROWS


class _ChunkReader:
    """Reads chunks of one export's tables as Arrow tables, on one thread: the ADBC SQLite driver on one
    read-only connection kept for all the thread's chunks, one batch a chunk (ADBC_BATCH_ROWS); plain sqlite3
    for a chunk the driver cannot read.

    Not connectorx, which read the same columns before: it ran a count query before each chunk, and each
    chunk left three idle threads behind (57 per 120 MB report), so a process that built caches one after
    another grew by about 1 MB a report; its 19 MB of code pages stayed resident too. With the driver a
    fleet worker digesting 120 MB reports peaks 25-35 MB lower and stays flat from one report to the next.
    """

    def __init__(self, profile: Path) -> None:
        self.profile = profile
        self._db = self._con = None

    def __enter__(self) -> _ChunkReader:
        return self

    def __exit__(self, *exc) -> None:
        for h in (self._con, self._db):
            if h is not None:
                try:
                    h.close()
                except Exception:
                    pass
        self._db = self._con = None

    def read(self, sql: str, cols: list[str], short: str = ""):
        try:
            return _normalize(self._adbc(sql), cols, short)
        except Exception:
            pass
        return _sqlite3_chunk(self.profile, sql, cols, short)

    def _adbc(self, sql: str):
        import adbc_driver_manager as adbc
        import pyarrow as pa

        if self._con is None:
            import adbc_driver_sqlite

            self._db = adbc_driver_sqlite.connect(readonly_uri(self.profile))
            self._con = adbc.AdbcConnection(self._db)
        stmt = adbc.AdbcStatement(self._con)
        try:
            stmt.set_options(**{"adbc.sqlite.query.batch_rows": str(ADBC_BATCH_ROWS)})
            stmt.set_sql_query(sql)
            handle, _ = stmt.execute_query()
            return pa.RecordBatchReader._import_from_c(handle.address).read_all()
        finally:
            stmt.close()


def _sqlite3_chunk(profile: Path, sql: str, cols: list[str], short: str = ""):
    """One chunk read row by row with sqlite3, each value converted to its column's kind (None when it cannot be)."""
    import pyarrow as pa

    con = connect_readonly(profile)
    try:
        rows = con.execute(sql).fetchall()
    finally:
        con.close()
    arrays = []
    for i, c in enumerate(cols):
        vals = [r[i] for r in rows]
        kind = column_kind(short, c)
        if kind == "text":
            arrays.append(pa.array([None if v is None else str(v) for v in vals], type=pa.string()))
        elif kind == "float":
            arrays.append(pa.array([_to_float(v) for v in vals], type=pa.float64()))
        else:
            try:
                arrays.append(pa.array(vals, type=pa.int64()))
            except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
                arrays.append(pa.array([_to_int(v) for v in vals], type=pa.int64()))
    return pa.Table.from_arrays(arrays, names=cols)


def _to_float(v):
    try:
        return float(v)
    except (TypeError, ValueError, OverflowError):
        return None


def _to_int(v):
    try:
        return int(v)
    except (TypeError, ValueError, OverflowError):
        return None


def _normalize(t, cols: list[str], short: str = ""):
    """Give every chunk the same Arrow types (int64 / float64 / string, schema.column_kind) whatever the driver
    inferred."""
    import pyarrow as pa

    arrays = []
    for c in cols:
        a = t.column(c)
        want = {"text": pa.string(), "float": pa.float64()}.get(column_kind(short, c), pa.int64())
        if a.type != want:
            a = a.cast(want)
        arrays.append(a)
    return pa.Table.from_arrays(arrays, names=cols)


class _Hook:
    """Progress for a caller's hook: ``hook(done, total)`` at the start and after each step (worker threads)."""

    def __init__(self, hook, total: int) -> None:
        self._hook, self._total, self._done = hook, total, 0
        self._lock = threading.Lock()
        hook(0, total)

    def advance(self) -> None:
        with self._lock:
            self._done += 1
            done = self._done
        self._hook(done, self._total)

    def close(self) -> None:
        pass


class _Progress:
    """A transient progress bar on stderr while the cache is built."""

    def __init__(self, total: int, name: str) -> None:
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

        from dashcam.text.console import make_console

        self._p = Progress(
            TextColumn("[bold]indexing[/] {task.description}"),
            BarColumn(),
            TextColumn("{task.completed}/{task.total} chunks"),
            TimeElapsedColumn(),
            console=make_console(stderr=True),
            transient=True,
        )
        self._p.start()
        self._task = self._p.add_task(name, total=total)
        self._lock = threading.Lock()

    def advance(self) -> None:
        with self._lock:
            self._p.advance(self._task)

    def close(self) -> None:
        self._p.stop()
