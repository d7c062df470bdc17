"""The fleet's cache of digests: one small JSON file per report, so a re-run maps only new or changed reports.

Where: ``.dashcam-fleet/`` beside the reports when their folder is writable (and DASHCAM_CACHE_DIR is not
set), else ``fleet/<hash of the folder>/`` in the user cache folder (as the profile caches: input.md).
An entry is used while the report's fingerprint is the one it was digested at (``file_fingerprint``, the
profile cache's: size, modification time and its first and last MiB) and the digest version is current.
The size and mtime are compared first, without reading the report: a warm run over 1,024 reports reads
only their digests; the head and tail are read only when those differ. Only the client reads and writes
here; workers never do.
Reports that could not be read are kept too (an unchanged broken file is not re-read); a worker that died,
or an internal error, is not.
"""
from __future__ import annotations

import functools
import hashlib
import os
from pathlib import Path

from dashcam.fleet.digest import DIGEST_VERSION, Digest

FOLDER = ".dashcam-fleet"


def store_dir(report: Path) -> Path:
    report = report.expanduser()
    # the folder resolved once per folder (a warm fleet asks for 1,024 reports in one); a linked report
    # resolves itself: its store is beside the file it points to
    parent = str(report.resolve().parent) if report.is_symlink() else _resolved(str(report.parent))
    return _store_for(parent, os.environ.get("DASHCAM_CACHE_DIR"))


@functools.lru_cache(maxsize=64)
def _resolved(folder: str) -> str:
    return str(Path(folder).resolve())


@functools.lru_cache(maxsize=64)
def _store_for(parent: str, cache_env: str | None) -> Path:
    """The store of the reports in ``parent`` (one answer per folder: a fleet's reports share one)."""
    from dashcam.profile.cache import dir_writable
    from dashcam.profile.source import user_cache_dir

    if not cache_env and dir_writable(Path(parent)):
        return Path(parent) / FOLDER
    return user_cache_dir() / "fleet" / hashlib.sha256(parent.encode()).hexdigest()[:24]


def entry_path(report: Path) -> Path:
    return store_dir(report) / (report.name + ".json")


def load(report: Path) -> Digest | None:
    """The stored digest of ``report`` while it is current (see the module docstring), else None."""
    try:
        st = report.stat()
        d = Digest.model_validate_json(entry_path(report).read_bytes())
    except (OSError, ValueError):
        return None
    if d.version != DIGEST_VERSION:
        return None
    if (d.size, d.mtime_ns) != (st.st_size, st.st_mtime_ns):
        from dashcam.profile.source import file_fingerprint

        if d.fingerprint is None or file_fingerprint(report) != d.fingerprint:
            return None
    return d.model_copy(update={"path": str(report)})


def save(report: Path, d: Digest) -> None:
    """Keep ``d`` (not a worker's death, not a report that was never read); silently skipped when the
    folder cannot be written."""
    if d.error_kind in ("worker_died", "failed") or d.fingerprint is None:
        return
    path = entry_path(report)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(d.model_dump_json())
        tmp.replace(path)
    except OSError:
        return


def forget(report: Path) -> None:
    try:
        entry_path(report).unlink()
    except OSError:
        pass


__all__ = ["FOLDER", "entry_path", "forget", "load", "save", "store_dir"]
