"""Checking a cache: its files against the manifest, read errors traced to the cache that caused them."""
from __future__ import annotations

import os
import shutil
import zlib
from pathlib import Path

from dashcam.errors import CacheDamaged, CacheUnwritable
from dashcam.profile.cache.lock import OWNER
from dashcam.profile.cache.where import CACHE_VERSION, read_manifest

DAMAGED = "damaged.txt"  # written when reading the cache failed: why the next open rebuilds it
CHECK_BYTES = 16 << 10  # the manifest's CRC covers this much of each file's head and of its tail


def file_check(path: Path) -> list[int]:
    """[size, CRC-32 of the first and last CHECK_BYTES] of a cache file."""
    size = path.stat().st_size
    with open(path, "rb") as f:
        crc = zlib.crc32(f.read(CHECK_BYTES))
        if size > CHECK_BYTES:
            f.seek(max(CHECK_BYTES, size - CHECK_BYTES))
            crc = zlib.crc32(f.read(CHECK_BYTES), crc)
    return [size, crc]


def list_files(out: Path) -> dict[str, list[int]]:
    return {p.name: file_check(p) for p in sorted(out.iterdir())
            if p.is_file() and p.name not in ("manifest.json", OWNER, DAMAGED)}


def check_files(cache: Path, manifest: dict) -> str | None:
    """Why the cache's files do not match its manifest (missing, other size, other content), or None."""
    files = manifest.get("files")
    if not isinstance(files, dict):
        return "its manifest lists no files"
    for name, want in files.items():
        path = cache / name
        try:
            have = file_check(path)
        except FileNotFoundError:
            return f"{name} is missing"
        except OSError as e:
            return f"{name} is unreadable ({e.strerror or e})"
        if have[0] != want[0]:
            return f"{name} has {have[0]:,} bytes instead of {want[0]:,}"
        if have[1] != want[1]:
            return f"{name} was overwritten"
    return None


def usable(cache: Path, fingerprint: str) -> tuple[dict | None, str | None]:
    """(manifest, None) when the cache is complete and current; (None, why) when it is damaged;
    (None, None) when there is none or it is of another version or another profile (rebuilt quietly)."""
    if not cache.exists():
        return None, None
    man = read_manifest(cache)
    if man is None:
        try:
            why = (cache / DAMAGED).read_text().strip()
        except OSError:
            why = ""
        if why:
            return None, why
        return None, ("manifest.json is unreadable" if (cache / "manifest.json").exists()
                      else "manifest.json is missing")
    if man.get("version") != CACHE_VERSION or man.get("fingerprint") != fingerprint:
        return None, None
    why = check_files(cache, man)
    return (None, why) if why else (man, None)


def invalidate(cache: Path, why: str) -> None:
    """Mark a cache damaged (reading it failed): the next open rebuilds it and says ``why``."""
    try:
        (cache / DAMAGED).write_text(why + "\n")
        (cache / "manifest.json").unlink(missing_ok=True)
    except OSError:
        shutil.rmtree(cache, ignore_errors=True)


# Caches opened by this process, the latest last: a read error may be about one of them.
OPENED: list[Path] = []


def first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


def verify_cache(cache: Path) -> str | None:
    """Why ``cache`` cannot be read in full, or None: the manifest's checks (check_files), then every
    Parquet file decoded page by page, each page against the checksum its writer stored (pyarrow's
    writers store one; DuckDB's reader does not check them). Reads the whole cache: for read errors only."""
    man = read_manifest(cache)
    if man is None:
        return "manifest.json is unreadable" if (cache / "manifest.json").exists() else "manifest.json is missing"
    why = check_files(cache, man)
    if why:
        return why
    import pyarrow.parquet as pq

    for name in sorted(man["files"]):
        if not name.endswith(".parquet"):
            continue
        try:
            f = pq.ParquetFile(cache / name, page_checksum_verification=True)
            for i in range(f.num_row_groups):
                f.read_row_group(i)
        except Exception as e:  # whatever the reader says, the file is unreadable
            return f"{name} is unreadable ({first_line(e)})"
    return None


def cache_of_error(exc: BaseException, caches=None) -> tuple[Path, str] | None:
    """``(cache, why)`` when an error of a reader (DuckDB, pyarrow, the OS) comes from a damaged cache
    among ``caches`` (default: those this process opened, the latest last), else None.

    No message is trusted: the caches are checked in full (verify_cache), those the message names
    first. A cache that reads in full did not cause the error (a bug, not a cache problem)."""
    if not isinstance(exc, Exception) or isinstance(exc, (CacheDamaged, CacheUnwritable)):
        return None
    caches = list(OPENED if caches is None else caches)
    module = type(exc).__module__ or ""
    if not caches or type(exc).__name__ == "InterruptException":
        return None
    if isinstance(exc, OSError) and getattr(exc, "filename", None):
        name = os.path.abspath(os.fsdecode(exc.filename))
        caches = [c for c in caches if name.startswith(str(c) + os.sep)]  # another file: not a cache's
    elif not module.startswith(("duckdb", "_duckdb", "pyarrow")) and not isinstance(exc, OSError):
        return None
    text = str(exc)
    for cache in dict.fromkeys([c for c in caches if str(c) in text] + caches[::-1]):
        why = verify_cache(cache)
        if why:
            return cache, why
    return None


def mark_used(cache: Path) -> None:
    """The cache's last use (``dashcam cache list``) is its folder's modification time."""
    if cache in OPENED:
        OPENED.remove(cache)
    OPENED.append(cache)
    try:
        os.utime(cache)
    except OSError:
        pass
