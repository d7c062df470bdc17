"""The SQLite exports of .nsys-rep/.qdrep reports in the user cache dir (``dashcam cache list|clear|info``).

Each export is a folder ``exports/<fingerprint of the report>/`` (source.py) holding ``<stem>.sqlite``, the
record ``report.json`` naming the report it came from, and, when the folder is writable and DASHCAM_CACHE_DIR
is unset, the export's own cache ``<stem>.sqlite.dashcam`` (listed with the caches). An export is *current*
while its report is unchanged (same fingerprint), *stale* once the report changed (a new export replaces it),
*report gone* when the report is no longer there. Exports of older dashcams have no record: their report is
the input path the export's metadata names (EXPORT_PARAM_INPUT_PATH_ABS).
"""
from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

from dashcam.profile.cache.listing import caches_of, dir_size, remove_cache
from dashcam.profile.cache.lock import discard
from dashcam.profile.source import (
    EXPORTS,
    REPORT_SUFFIXES,
    connect_readonly,
    export_path_for,
    file_fingerprint,
    read_export_record,
    user_cache_dir,
)


def _files_size(folder: Path) -> int:
    """Bytes of the files directly in ``folder`` (the export and its record; its cache folder is a cache's)."""
    total = 0
    for p in folder.iterdir():
        try:
            if p.is_file():
                total += p.stat().st_size
        except OSError:
            pass
    return total


def _input_path(sqlite_path: Path) -> str | None:
    """The report an export's metadata names (nsys writes EXPORT_PARAM_INPUT_PATH_ABS), or None."""
    try:
        with closing(connect_readonly(sqlite_path)) as con:
            row = con.execute("SELECT value FROM META_DATA_EXPORT WHERE name = 'EXPORT_PARAM_INPUT_PATH_ABS'"
                              ).fetchone()
    except sqlite3.Error:
        return None
    return str(row[0]) if row and row[0] else None


def export_state(folder: Path, report: Path | None) -> str:
    """current | stale | report gone | report unknown (see the module docstring)."""
    if report is None:
        return "report unknown"
    if not report.is_file():
        return "report gone"
    try:
        return "current" if file_fingerprint(report) == folder.name else "stale"
    except OSError:
        return "report gone"


def known_exports() -> list[dict]:
    """Every export folder, most recently used first: export (folder), sqlite, report, size_bytes (the export's
    files), last_used (epoch s: the folder's modification time, touched at each reuse), state."""
    base = user_cache_dir() / EXPORTS
    if not base.is_dir():
        return []
    out = []
    for folder in sorted(base.iterdir()):
        if not folder.is_dir() or folder.name.startswith("."):
            continue  # a folder being discarded (.trash-*)
        sqlite = next((f for f in sorted(folder.glob("*.sqlite")) if not f.name.endswith(".partial.sqlite")), None)
        named = read_export_record(folder).get("report") or (_input_path(sqlite) if sqlite else None)
        report = Path(named) if named else None
        try:
            last = folder.stat().st_mtime
            size = _files_size(folder)
        except OSError:
            continue
        out.append({"export": str(folder), "sqlite": str(sqlite) if sqlite else None,
                    "report": str(report) if report else None, "size_bytes": size, "last_used": last,
                    "state": export_state(folder, report) if sqlite else "incomplete"})
    return sorted(out, key=lambda e: -e["last_used"])


def exports_of(report: Path) -> list[dict]:
    """The exports made of ``report``: its current one and older ones of the same path."""
    report = Path(report).expanduser().resolve()
    try:
        current = str(export_path_for(report).parent) if report.is_file() else None
    except OSError:
        current = None
    return [e for e in known_exports() if e["export"] == current or e["report"] == str(report)]


def remove_export(entry: dict) -> int:
    """Delete one export folder and the caches of its SQLite file; return the bytes they took."""
    freed = 0
    if entry.get("sqlite"):
        freed += sum(remove_cache(c) for c in caches_of(Path(entry["sqlite"])))
    folder = Path(entry["export"])
    if folder.is_dir():
        freed += dir_size(folder)
        discard(folder)
    return freed


def is_report(path: Path) -> bool:
    return path.suffix in REPORT_SUFFIXES
