"""``Profile``: an opened export — its cache, its normalized views and the window."""
from __future__ import annotations

import os
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from dashcam.errors import BadParameter, CacheDamaged, NoGpuActivity, UnknownGpu
from dashcam.measure.definitions import NS_PER_MS, Window
from dashcam.profile.cache import cache_of_error, ensure_cache, invalidate
from dashcam.profile.derived import create_derived_views
from dashcam.profile.schema import duckdb_config
from dashcam.profile.source import check_sqlite_file, resolve_profile
from dashcam.profile.views import create_views


@dataclass(frozen=True)
class GpuInfo:
    device_id: int
    name: str | None
    sm_count: int | None


def window_in_span(w0: int, w1: int, start_ms: float | None, end_ms: float | None, span: str) -> Window:
    """The window --start/--end select inside the span ``[w0, w1)``: ms from ``w0``, clipped to the span (the
    whole span without them); BadParameter naming ``span`` when nothing is left. The whole-profile window's
    rule (Profile.window), also used where a tool falls back to another span without GPU activity."""
    length = f"0 to {(w1 - w0) / NS_PER_MS:.3f} ms"
    if start_ms is not None and end_ms is not None and start_ms >= end_ms:
        raise BadParameter(f"--start {start_ms:g} is {'after' if start_ms > end_ms else 'at'} --end {end_ms:g}: "
                           f"the window's start must come before its end ({span}: {length})")
    s = w0 if start_ms is None else w0 + round(start_ms * NS_PER_MS)
    e = w1 if end_ms is None else w0 + round(end_ms * NS_PER_MS)
    if s >= w1:
        raise BadParameter(f"--start {start_ms:g} ms is past the end of {span} ({length})")
    if e <= w0:
        raise BadParameter(f"--end {end_ms:g} ms is not after the start of {span} ({length})")
    s, e = max(s, w0), min(e, w1)
    if e <= s:
        raise BadParameter(f"empty window: --start/--end select nothing inside {span} "
                           f"(0 to {(w1 - w0) / NS_PER_MS:.3f} ms)")
    return Window(int(s), int(e), int(w0))


class Profile:
    """A read-only view of one Nsight Systems export.

    ``Profile.open(path)`` checks the file, builds or reuses the columnar cache and
    creates the normalized views (see ``model.py``). Tools query it with ``rows()``.
    """

    def __init__(self, path: Path, sqlite_path: Path, con, manifest: dict, cache: Path | None = None) -> None:
        self.path = path
        self.sqlite_path = sqlite_path
        self.cache = cache
        self.con = con
        self.manifest = manifest
        self.memo: dict = {}  # whole-profile facts a tool computes once per opened profile (workload)

    @classmethod
    def open(cls, path: str | os.PathLike, progress: bool | None = None) -> Profile:
        import duckdb

        given = Path(path).expanduser()
        sqlite_path = resolve_profile(given)
        tables = check_sqlite_file(sqlite_path)
        for attempt in (1, 2):
            cache, manifest = ensure_cache(sqlite_path, tables, progress=progress)
            con = duckdb.connect(":memory:", config=duckdb_config())
            # Keep each cache file's Parquet footer once read (create_views reads them all): a query then plans
            # without re-reading it, which was a third of a small query on a 200-row-group file. DuckDB
            # re-reads a footer whose file changed since.
            con.execute("SET parquet_metadata_cache = true")
            manifest = dict(manifest, source_tables=sorted(tables))
            try:
                create_views(con, cache, manifest)  # reads the footers of the cache's files
                create_derived_views(con, cache)
            except Exception as e:
                con.close()
                found = cache_of_error(e, [cache])
                if found is None:
                    raise
                why = f"reading it failed: {found[1]}"
                if attempt == 2:
                    raise CacheDamaged(f"the cache of {sqlite_path.name} in {cache} is unreadable even after a "
                                       f"rebuild ({why}); delete that folder or set DASHCAM_CACHE_DIR elsewhere",
                                       cache) from None
                invalidate(cache, why)
                continue
            return cls(given, sqlite_path, con, manifest, cache)
        raise AssertionError("unreachable")

    # -- querying -------------------------------------------------------------------
    def rows(self, sql: str, params: list | None = None) -> list[tuple]:
        return self.con.execute(sql, params or []).fetchall()

    def one(self, sql: str, params: list | None = None) -> tuple | None:
        rows = self.con.execute(sql, params or []).fetchall()  # fetchall closes the result
        return rows[0] if rows else None

    def dicts(self, sql: str, params: list | None = None) -> list[dict]:
        cur = self.con.execute(sql, params or [])
        names = [d[0] for d in cur.description]
        return [dict(zip(names, r)) for r in cur.fetchall()]

    def count(self, view: str) -> int:
        return int(self.one(f"SELECT count(*) FROM {view}")[0])

    # -- metadata ------------------------------------------------------------------
    @cached_property
    def _meta_rows(self) -> list[tuple[str, str]]:
        return [(k, v) for k, v in self.rows("SELECT key, value FROM meta") if k]

    @cached_property
    def metadata(self) -> dict[str, str]:
        return dict(self._meta_rows)

    def metadata_items(self) -> list[tuple[str, str]]:
        """Every (key, value) of the metadata tables, repeated keys included (capture environment, arguments)."""
        return list(self._meta_rows)

    @property
    def nsys_version(self) -> str | None:
        return self.metadata.get("EXPORT_PRODUCT_VERSION")

    @property
    def schema_version(self) -> str | None:
        return self.metadata.get("EXPORT_SCHEMA_VERSION")

    def has_table(self, short: str) -> bool:
        t = self.manifest["tables"].get(short)
        return bool(t and t.get("rows"))

    @cached_property
    def has_migrations(self) -> bool:
        """Whether any memcpy row is a unified-memory migration (views.py: ``memcpy.migration``)."""
        return bool(self.one("SELECT count(*) FROM memcpy WHERE migration")[0])

    def has_view(self, name: str) -> bool:
        return name in self._views

    @cached_property
    def _views(self) -> frozenset[str]:
        """The connection's views (create_views and create_derived_views make them all at open)."""
        return frozenset(r[0] for r in self.rows("SELECT view_name FROM duckdb_views() WHERE NOT internal"))

    # -- devices --------------------------------------------------------------------
    @cached_property
    def _device_spans(self) -> dict[int, tuple[int, int]]:
        """Per device with any kernel, memcpy or memset: (first start, last end), stored with the cache."""
        return {int(d): (s, e) for d, (s, e) in self.manifest["derived"]["device_spans"].items()}

    @property
    def devices(self) -> list[int]:
        """Devices with at least one kernel, memcpy or memset, ascending."""
        return sorted(self._device_spans)

    @cached_property
    def gpus(self) -> dict[int, GpuInfo]:
        info = {int(r[0]): GpuInfo(int(r[0]), r[1], None if r[2] is None else int(r[2]))
                for r in self.rows("SELECT device_id, name, sm_count FROM gpus WHERE device_id IS NOT NULL")}
        return {d: info.get(d, GpuInfo(d, None, None)) for d in self.devices} | {
            d: g for d, g in info.items() if d not in self.devices}

    def check_gpu(self, gpu: int | None) -> list[int]:
        """The devices a tool should report on: all of them, or ``gpu`` if it exists."""
        if gpu is None:
            return list(self.devices)
        if gpu not in self.devices:
            have = ", ".join(str(d) for d in self.devices) or "none"
            raise UnknownGpu(f"GPU {gpu} is not in this profile; GPUs with activity: {have}")
        return [gpu]

    # -- the window -----------------------------------------------------------------
    @property
    def full_window(self) -> tuple[int, int] | None:
        """[first start, last end] over all kernels, memcpys and memsets (definitions.py)."""
        spans = self._device_spans.values()
        if not spans:
            return None
        return min(s for s, _ in spans), max(e for _, e in spans)

    def window(self, start_ms: float | None = None, end_ms: float | None = None) -> Window:
        """The analysis window (see definitions.py): whole profile, or --start/--end ms from its start."""
        full = self.full_window
        if full is None:
            raise NoGpuActivity(f"{self.path}: no GPU activity (no kernels, memcpys or memsets) in this profile")
        if start_ms is not None and start_ms < 0:
            raise BadParameter(f"--start {start_ms} is negative; times are ms from the window start")
        return window_in_span(*full, start_ms, end_ms, "the profile window")
