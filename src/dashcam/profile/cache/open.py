"""Opening a profile's cache: reuse it when current and sound, else build it under the lock; no room or no write
access is one clear error."""
from __future__ import annotations

import errno
import json
import shutil
import tempfile
from pathlib import Path

from dashcam.errors import CacheUnwritable
from dashcam.profile.cache.check import first_line, list_files, mark_used, usable
from dashcam.profile.cache.hooks import checkpoint, note
from dashcam.profile.cache.listing import dir_size, register
from dashcam.profile.cache.lock import BUILD_PREFIX, LOCK_SUFFIX, OWNER, BuildLock, dead_here, discard, read_json, sweep
from dashcam.profile.cache.where import cache_dir_for
from dashcam.profile.schema import duckdb_config
from dashcam.profile.source import file_fingerprint

# Room a cache needs, as a share of the profile's size: the benchmarks' caches are 0.2x their
# profile (docs/performance.md); small exports carry more per-file overhead.
NEED_RATIO = 0.35


def build_cache(profile: Path, tables: list[str], out: Path, progress: bool | None) -> dict:
    """The build (cache/build.py), loaded only when a cache is built: opening a current cache never imports it."""
    from dashcam.profile.cache.build import build_cache as build

    return build(profile, tables, out, progress)


def ensure_cache(profile: Path, tables: list[str], progress: bool | None = None) -> tuple[Path, dict]:
    """Return ``(cache_dir, manifest)`` for ``profile``, building the cache if needed.

    A damaged cache (check_files) is rebuilt with a note; while another process builds it, this one
    waits (with a note) and then uses that build.
    """
    cache = cache_dir_for(profile)
    fp = file_fingerprint(profile)
    man, why = usable(cache, fp)
    if man is not None:
        lock = cache.with_name(cache.name + LOCK_SUFFIX)
        if lock.exists() and dead_here(read_json(lock)):  # its builder was killed once the cache was in place
            BuildLock(lock, profile)._break(read_json(lock))
        mark_used(cache)
        return cache, man
    if why:
        note(f"the cache of {profile.name} is damaged ({why}); rebuilding it in {cache}")
    man = _build_locked(profile, tables, cache, fp, progress)
    checkpoint("released")
    mark_used(cache)
    return cache, man


def human(n: float) -> str:
    for unit in ("bytes", "KB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:,.0f} {unit}" if unit == "bytes" else f"{n:,.1f} {unit}"
        n /= 1000
    return f"{n:.1f} TB"


def needed_bytes(profile: Path) -> int:
    """The room a cache of ``profile`` needs: NEED_RATIO of its size."""
    try:
        return int(profile.stat().st_size * NEED_RATIO)
    except OSError:
        return 0


def _unwritable(profile: Path, folder: Path, e: BaseException | None = None, free: int | None = None,
                written: int = 0) -> CacheUnwritable:
    """The one line for a cache that cannot be written: the folder, the room it needs (estimated from the
    profile's size, or more than what it had written when the folder filled up) and DASHCAM_CACHE_DIR."""
    estimate = needed_bytes(profile)
    need = f"about {human(estimate)}" if written <= estimate else f"more than {human(written)}"
    hint = "set DASHCAM_CACHE_DIR to a folder with room"
    spill = duckdb_config()["temp_directory"]  # where the build's joins spill: not the cache's folder
    if e is not None and _is_no_room(e) and spill in str(e):
        return CacheUnwritable(f"no room for DuckDB's temporary files in {spill} while building the cache of "
                               f"{profile.name}; free some space there or set TMPDIR to a folder with room")
    if e is None or _is_no_room(e):
        have = f", {human(free)} free" if free is not None else ""
        return CacheUnwritable(f"no room for the cache of {profile.name} in {folder}: it needs {need}{have}; "
                               f"free some space or {hint}")
    why = getattr(e, "strerror", None) or first_line(e)
    return CacheUnwritable(f"cannot write the cache of {profile.name} in {folder} ({why}); it needs {need}; "
                           f"{hint} you can write")


NO_ROOM = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
NO_WRITE = (errno.EROFS, errno.EACCES, errno.EPERM)


def _is_no_room(e: BaseException) -> bool:
    text = str(e)
    return getattr(e, "errno", None) in NO_ROOM or any(
        w in text for w in ("No space left", "Disk quota exceeded", "File too large", "[Errno 28]", "[Errno 122]"))


def _is_write_error(e: BaseException) -> bool:
    """Whether an error while writing the cache means its folder has no room or cannot be written."""
    if not isinstance(e, OSError):  # pyarrow raises OSError; some errors come through as Arrow ones
        return _is_no_room(e)
    text = str(e)
    return _is_no_room(e) or e.errno in NO_WRITE or any(
        w in text for w in ("Read-only file system", "Permission denied", "[Errno 30]", "[Errno 13]"))


def _build_locked(profile: Path, tables: list[str], cache: Path, fp: str, progress: bool | None) -> dict:
    folder = cache.parent
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise _unwritable(profile, folder, e) from None
    lock = BuildLock(folder / (cache.name + LOCK_SUFFIX), profile)
    try:
        lock.acquire()
    except OSError as e:
        raise _unwritable(profile, folder, e) from None
    tmp = None
    try:
        checkpoint("locked")
        man, why = usable(cache, fp)  # built by the process this one waited for
        if man is not None:
            return man
        if why and lock.waited:
            note(f"the cache of {profile.name} is damaged ({why}); rebuilding it in {cache}")
        sweep(folder, lock)
        discard(cache)  # the old (stale or damaged) cache: its room is needed now
        checkpoint("swept")
        free = shutil.disk_usage(folder).free
        if free < needed_bytes(profile):
            raise _unwritable(profile, folder, free=free)
        tmp = Path(tempfile.mkdtemp(prefix=BUILD_PREFIX, dir=folder))
        (tmp / OWNER).write_text(json.dumps(lock.owner))
        lock.also_touch(tmp / OWNER)
        checkpoint("started")
        man = build_cache(profile, tables, tmp, progress)
        man["fingerprint"] = fp
        man["files"] = list_files(tmp)
        checkpoint("listed")
        (tmp / "manifest.json").write_text(json.dumps(man, indent=1))
        checkpoint("manifest")
        discard(cache)
        tmp.rename(cache)
        tmp = None
        checkpoint("renamed")
        register(cache)
        return man
    except CacheUnwritable:
        raise
    except BaseException as e:
        if _is_write_error(e):
            written = dir_size(tmp, on_disk=True) if tmp is not None else 0
            if tmp is not None:  # the room it took is free again: say how much there is
                shutil.rmtree(tmp, ignore_errors=True)
                tmp = None
            raise _unwritable(profile, folder, e, free=_free(folder), written=written) from None
        raise
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
        lock.release()


def _free(folder: Path) -> int | None:
    try:
        return shutil.disk_usage(folder).free
    except OSError:
        return None
