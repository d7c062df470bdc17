"""The columnar cache: the profile's event tables copied once into Parquet files.

DuckDB's sqlite extension is a download, unavailable on air-gapped machines, so the
tables are read with connectorx (Rust, straight into Arrow) in row-id chunks on two
threads and written as Parquet. DuckDB then queries the Parquet files. The cache
lives in ``<profile>.dashcam/`` when the profile's folder is writable, otherwise (or
when ``DASHCAM_CACHE_DIR`` is set) in the user cache dir. It is reused while the
profile's fingerprint is unchanged and rebuilt when it changes; it is never written
inside the profile.

It survives faults (docs/input.md, "Cache"):

- the manifest lists every file with its size and a CRC of its head and tail; a file that is
  missing, truncated or rewritten, or a read error on it, gets the cache rebuilt once with a
  note on stderr (``CacheDamaged`` when it happens again);
- one process builds at a time: a lock file beside the cache names the builder (pid, machine) and
  is touched every few seconds; others wait for it, and break it when its process is dead (a
  builder of this machine) or it has not been touched for ``STALE_S`` seconds (another machine's);
- a build works in a ``.build-*`` folder that names its builder; the next build removes those
  of dead builders, judged the same way;
- no room or no write access is ``CacheUnwritable``, naming the folder, the room the cache
  needs and ``DASHCAM_CACHE_DIR``; nothing half-written stays.
"""
from __future__ import annotations

import errno
import hashlib
import json
import os
import queue
import shutil
import signal
import socket
import sqlite3
import stat
import sys
import tempfile
import threading
import time
import zlib
from pathlib import Path
from urllib.parse import quote

from dashcam.errors import CacheDamaged, CacheUnwritable, CorruptProfile
from dashcam.profile.derived import build_derived
from dashcam.profile.nvtx_kernels import attribute, chunk_ranges, finish, read_ranges, window_axis
from dashcam.profile.schema import (
    BIG_TABLES,
    SMALL_TABLES,
    TEXT_COLUMNS,
    column_kind,
    duckdb_config,
    thread_count,
)
from dashcam.profile.source import connect_readonly, file_fingerprint, user_cache_dir
from dashcam.profile.views import create_views

CACHE_VERSION = 18
CHUNK_ROWS = 300_000
NVTX_CHUNK_ROWS = 150_000  # NVTX rows carry label text: smaller chunks keep the workers lean
WORKERS = 2
DERIVE_MEMORY = "160MB"  # DuckDB spills past this while joining: keeps the first open lean

# Room a cache needs, as a share of the profile's size: the benchmarks' caches are 0.2x their
# profile (docs/performance.md); small exports carry more per-file overhead.
NEED_RATIO = 0.35
LOCK_SUFFIX = ".lock"
BUILD_PREFIX = ".build-"
TRASH_PREFIX = ".trash-"  # a replaced cache, renamed aside before it is deleted: anyone may delete it
OWNER = "owner.json"  # in a build folder (and the cache it becomes): who built it
DAMAGED = "damaged.txt"  # written when reading the cache failed: why the next open rebuilds it
HEARTBEAT_S = 5.0  # the builder touches its lock and build folder this often
STALE_S = 60.0  # another machine's lock or build folder nobody touched for this long: a dead builder's
OWNERLESS_STALE_S = 3600.0  # build folders of older dashcams, without an owner file
POLL_S = 0.2
CHECK_BYTES = 16 << 10  # the manifest's CRC covers this much of each file's head and of its tail


# -- encodings -------------------------------------------------------------------------------------
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


# -- test hooks ------------------------------------------------------------------------------------
# DASHCAM_TEST_HOOK makes a build stop at its Nth checkpoint, so the fault-injection tests
# (tests/test_cache_faults.py) are deterministic: ``kill:N`` (SIGKILL, as kill -9 would),
# ``fail:N:ENOSPC`` (an OSError with that errno, as a full disk would), ``wait:PATH`` (a process that
# starts a build appends its pid to PATH.builders and waits until PATH exists) and
# ``log:PATH`` (append each checkpoint's name to PATH).
HOOK_ENV = "DASHCAM_TEST_HOOK"


class _Checkpoints:
    def __init__(self) -> None:
        self.n = 0
        self.lock = threading.Lock()

    def __call__(self, name: str) -> None:
        hook = os.environ.get(HOOK_ENV)
        if not hook:
            return
        with self.lock:
            self.n += 1
            n = self.n
        kind, _, arg = hook.partition(":")
        if kind == "log":
            with open(arg, "a") as f:
                f.write(name + "\n")
        elif kind == "kill" and n == int(arg):
            os.kill(os.getpid(), signal.SIGKILL)
        elif kind == "fail" and n == int(arg.split(":")[0]):
            code = getattr(errno, arg.split(":")[1])
            raise OSError(code, os.strerror(code))
        elif kind == "wait" and name == "started":
            with open(arg + ".builders", "a") as f:
                f.write(f"{os.getpid()}\n")
            while not os.path.exists(arg):
                time.sleep(0.05)


checkpoint = _Checkpoints()


def _note(message: str) -> None:
    """One line on stderr: what the cache is doing when it is not the usual (rebuilding, waiting)."""
    sys.stderr.write(f"dashcam: {message}\n")
    sys.stderr.flush()


# -- where -----------------------------------------------------------------------------------------

def _dir_writable(d: Path) -> bool:
    try:
        st = d.stat()
    except OSError:
        return False
    # Root passes os.access everywhere; also respect the folder's own write bits.
    return os.access(d, os.W_OK) and bool(st.st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))


def user_cache_dir_for(profile: Path) -> Path:
    """The profile's cache folder under the user cache dir (used when its own folder is not writable)."""
    profile = profile.resolve()
    key = hashlib.sha256(str(profile).encode()).hexdigest()[:24]
    return user_cache_dir() / "profiles" / f"{profile.stem}-{key}"


def cache_dir_for(profile: Path) -> Path:
    profile = profile.resolve()
    if not os.environ.get("DASHCAM_CACHE_DIR") and _dir_writable(profile.parent):
        return profile.parent / (profile.name + ".dashcam")
    return user_cache_dir_for(profile)


def read_manifest(cache: Path) -> dict | None:
    try:
        man = json.loads((cache / "manifest.json").read_text())
    except (OSError, ValueError):
        return None
    return man if isinstance(man, dict) else None


# -- checking a cache ------------------------------------------------------------------------------

def _file_check(path: Path) -> list[int]:
    """[size, CRC-32 of the first and last CHECK_BYTES] of a cache file."""
    size = path.stat().st_size
    with open(path, "rb") as f:
        crc = zlib.crc32(f.read(CHECK_BYTES))
        if size > CHECK_BYTES:
            f.seek(max(CHECK_BYTES, size - CHECK_BYTES))
            crc = zlib.crc32(f.read(CHECK_BYTES), crc)
    return [size, crc]


def _list_files(out: Path) -> dict[str, list[int]]:
    return {p.name: _file_check(p) for p in sorted(out.iterdir())
            if p.is_file() and p.name not in ("manifest.json", OWNER, DAMAGED)}


def check_files(cache: Path, manifest: dict) -> str | None:
    """Why the cache's files do not match its manifest (missing, other size, other content), or None."""
    files = manifest.get("files")
    if not isinstance(files, dict):
        return "its manifest lists no files"
    for name, want in files.items():
        path = cache / name
        try:
            have = _file_check(path)
        except FileNotFoundError:
            return f"{name} is missing"
        except OSError as e:
            return f"{name} is unreadable ({e.strerror or e})"
        if have[0] != want[0]:
            return f"{name} has {have[0]:,} bytes instead of {want[0]:,}"
        if have[1] != want[1]:
            return f"{name} was overwritten"
    return None


def _usable(cache: Path, fingerprint: str) -> tuple[dict | None, str | None]:
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


def _first_line(e: BaseException) -> str:
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
            return f"{name} is unreadable ({_first_line(e)})"
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


# -- building, one process at a time ---------------------------------------------------------------

def ensure_cache(profile: Path, tables: list[str], progress: bool | None = None) -> tuple[Path, dict]:
    """Return ``(cache_dir, manifest)`` for ``profile``, building the cache if needed.

    A damaged cache (check_files) is rebuilt with a note; while another process builds it, this one
    waits (with a note) and then uses that build.
    """
    cache = cache_dir_for(profile)
    fp = file_fingerprint(profile)
    man, why = _usable(cache, fp)
    if man is not None:
        lock = cache.with_name(cache.name + LOCK_SUFFIX)
        if lock.exists() and _dead_here(_read_json(lock)):  # its builder was killed once the cache was in place
            _Lock(lock, profile)._break(_read_json(lock))
        mark_used(cache)
        return cache, man
    if why:
        _note(f"the cache of {profile.name} is damaged ({why}); rebuilding it in {cache}")
    man = _build_locked(profile, tables, cache, fp, progress)
    checkpoint("released")
    mark_used(cache)
    return cache, man


def _human(n: float) -> str:
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
    need = f"about {_human(estimate)}" if written <= estimate else f"more than {_human(written)}"
    hint = "set DASHCAM_CACHE_DIR to a folder with room"
    spill = duckdb_config()["temp_directory"]  # where the build's joins spill: not the cache's folder
    if e is not None and _is_no_room(e) and spill in str(e):
        return CacheUnwritable(f"no room for DuckDB's temporary files in {spill} while building the cache of "
                               f"{profile.name}; free some space there or set TMPDIR to a folder with room")
    if e is None or _is_no_room(e):
        have = f", {_human(free)} free" if free is not None else ""
        return CacheUnwritable(f"no room for the cache of {profile.name} in {folder}: it needs {need}{have}; "
                               f"free some space or {hint}")
    why = getattr(e, "strerror", None) or _first_line(e)
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
    lock = _Lock(folder / (cache.name + LOCK_SUFFIX), profile)
    try:
        lock.acquire()
    except OSError as e:
        raise _unwritable(profile, folder, e) from None
    tmp = None
    try:
        checkpoint("locked")
        man, why = _usable(cache, fp)  # built by the process this one waited for
        if man is not None:
            return man
        if why and lock.waited:
            _note(f"the cache of {profile.name} is damaged ({why}); rebuilding it in {cache}")
        _sweep(folder, lock)
        _discard(cache)  # the old (stale or damaged) cache: its room is needed now
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
        man["files"] = _list_files(tmp)
        checkpoint("listed")
        (tmp / "manifest.json").write_text(json.dumps(man, indent=1))
        checkpoint("manifest")
        _discard(cache)
        tmp.rename(cache)
        tmp = None
        checkpoint("renamed")
        _register(cache)
        return man
    except CacheUnwritable:
        raise
    except BaseException as e:
        if _is_write_error(e):
            written = _dir_size(tmp, on_disk=True) if tmp is not None else 0
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


def _discard(cache: Path) -> None:
    """Remove a cache folder: renamed aside first (atomic), so no reader sees half of one."""
    if not cache.exists():
        return
    trash = cache.parent / f"{TRASH_PREFIX}{cache.name}-{os.getpid()}-{time.monotonic_ns()}"
    try:
        cache.rename(trash)
    except OSError:
        trash = cache
    shutil.rmtree(trash, ignore_errors=True)


def _machine() -> str:
    """Where a pid names one process: this host, this boot, this pid namespace (containers sharing a
    host name or a file system have pids of their own)."""
    parts = [socket.gethostname()]
    for read in (lambda: Path("/proc/sys/kernel/random/boot_id").read_text().strip(),
                 lambda: os.readlink("/proc/self/ns/pid")):
        try:
            parts.append(read())
        except OSError:
            pass
    return "|".join(parts)


def _proc_stat(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name (state first), or None (gone, or not Linux)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def _start_ticks(pid: int) -> int | None:
    """When process ``pid`` started (clock ticks since boot; Linux), or None: a reused pid starts later."""
    fields = _proc_stat(pid)
    try:
        return int(fields[19]) if fields else None
    except (ValueError, IndexError):
        return None


def _owner() -> dict:
    return {"pid": os.getpid(), "host": socket.gethostname(), "machine": _machine(),
            "pid_start": _start_ticks(os.getpid()), "started": time.time(), "nonce": os.urandom(8).hex()}


def _alive(pid: int, start: int | None = None) -> bool:
    """Whether process ``pid`` runs: it exists, is no zombie (killed, not yet reaped) and, when ``start``
    is given, is the process that started then (not a later one given the same pid)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        pass
    fields = _proc_stat(pid)
    if not fields:
        return True
    if fields[0] in ("Z", "X"):
        return False
    return start is None or _start_ticks(pid) in (None, start)


def _here(owner: dict | None) -> bool:
    """Whether ``owner``'s pid is a process of this machine (so its liveness can be asked)."""
    if not owner or not isinstance(owner.get("pid"), int):
        return False
    if "machine" in owner:
        return owner["machine"] == _machine()
    return owner.get("host") == socket.gethostname()


def _dead_here(owner: dict | None) -> bool:
    """Whether ``owner`` (pid, machine) is a process of this machine that no longer runs."""
    return _here(owner) and owner["pid"] != os.getpid() and not _alive(owner["pid"], owner.get("pid_start"))


def _gone(owner: dict | None, untouched_s: float) -> bool:
    """Whether the builder ``owner`` is gone: asked directly when it is of this machine (a live one may
    be stopped, Ctrl-Z, for any time), else judged by its heartbeat: untouched for STALE_S."""
    if _here(owner):
        return _dead_here(owner)
    return untouched_s > STALE_S


def _read_json(path: Path) -> dict | None:
    try:
        d = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return d if isinstance(d, dict) else None


class _Lock:
    """``<cache>.lock`` beside the cache: created exclusively, naming its holder, touched every
    HEARTBEAT_S seconds while held. A waiter breaks it when its holder is a dead process of this
    machine (_gone), or, held from another machine, when nobody touched it for STALE_S seconds of
    the waiter's own clock (no clock is compared across machines)."""

    def __init__(self, path: Path, profile: Path) -> None:
        self.path = path
        self.profile = profile
        self.owner = _owner()
        self.waited = False
        self._touch = [path]
        self._stop = threading.Event()
        self._beat: threading.Thread | None = None

    def acquire(self) -> None:
        seen, since, said = None, time.monotonic(), False
        while True:
            try:
                fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                pass
            else:
                try:
                    with os.fdopen(fd, "w") as f:
                        f.write(json.dumps(self.owner))
                except BaseException:  # a full disk: no empty lock stays behind to be waited for
                    self.path.unlink(missing_ok=True)
                    raise
                self._beat = threading.Thread(target=self._heartbeat, daemon=True)
                self._beat.start()
                return
            try:
                st = self.path.stat()
            except FileNotFoundError:
                continue
            holder = _read_json(self.path)
            state = (st.st_mtime_ns, st.st_ino, json.dumps(holder, sort_keys=True))
            if state != seen:
                seen, since = state, time.monotonic()
            if _gone(holder, time.monotonic() - since):
                self._break(holder)
                continue
            if not said:
                who = (f"pid {holder['pid']} on {holder.get('host')}" if holder and "pid" in holder
                       else "another process")
                _note(f"waiting for {who}, which is building the cache of {self.profile.name} ({self.path})")
                said = True
            self.waited = True
            time.sleep(POLL_S)

    def _break(self, holder: dict | None) -> None:
        """Remove a stale lock; renamed aside first, so a lock someone took meanwhile is put back."""
        aside = self.path.with_name(f"{self.path.name}.broken-{self.owner['nonce']}")
        try:
            self.path.rename(aside)
        except FileNotFoundError:
            return
        if _read_json(aside) != holder:  # not the stale lock: a live one, taken meanwhile
            try:
                os.link(aside, self.path)
            except OSError:
                pass
        aside.unlink(missing_ok=True)

    def also_touch(self, path: Path) -> None:
        self._touch.append(path)

    def _heartbeat(self) -> None:
        while not self._stop.wait(HEARTBEAT_S):
            for p in self._touch:
                try:
                    os.utime(p)
                except OSError:
                    pass

    def release(self) -> None:
        self._stop.set()
        if self._beat is None:
            return
        if _read_json(self.path) == self.owner:
            self.path.unlink(missing_ok=True)
        self._beat = None


def _sweep(folder: Path, lock: _Lock) -> None:
    """Remove the build folders of dead builders, and replaced caches, from ``folder``.

    A build folder names its builder (OWNER) and is touched every HEARTBEAT_S seconds: it is dead when
    that process of this machine is gone, or, built from another machine, when its owner file is
    STALE_S older than the lock this process just took (both times come from the same file system,
    so no two clocks are compared).
    Folders of older dashcams without an owner file go after OWNERLESS_STALE_S untouched."""
    try:
        now = lock.path.stat().st_mtime
        entries = list(folder.iterdir())
    except OSError:
        return
    for d in entries:
        if not d.is_dir():
            continue
        if d.name.startswith(TRASH_PREFIX):
            shutil.rmtree(d, ignore_errors=True)
            continue
        if not d.name.startswith(BUILD_PREFIX):
            continue
        try:
            owner = _read_json(d / OWNER)
            if owner is not None:
                stale = _gone(owner, now - (d / OWNER).stat().st_mtime)
            else:
                newest = max([d.stat().st_mtime] + [p.stat().st_mtime for p in d.iterdir()])
                stale = now - newest > OWNERLESS_STALE_S
        except OSError:
            continue
        if stale:
            shutil.rmtree(d, ignore_errors=True)


# -- the caches this user has (dashcam cache) ------------------------------------------------------
# The user cache dir holds the caches built there, and REGISTRY lists the caches built beside their
# profiles (one folder a line, appended by each build): ``dashcam cache`` reads both, and looks for
# ``*.dashcam`` folders in the folders it is given (those of older dashcams, or unlisted).

REGISTRY = "caches-beside-profiles.txt"
SEARCH_DEPTH = 4  # how deep ``dashcam cache`` looks below each folder it is given


def _dir_size(d: Path, on_disk: bool = False) -> int:
    """Bytes of the files in ``d``: their sizes, or (``on_disk``) the blocks they take."""
    total = 0
    for p in d.rglob("*"):
        try:
            if p.is_file():
                st = p.stat()
                total += st.st_blocks * 512 if on_disk else st.st_size
        except OSError:
            pass
    return total


def _beside_profiles(folder: Path) -> list[Path]:
    """``*.dashcam`` cache folders in ``folder`` and its sub-folders (SEARCH_DEPTH deep, hidden ones skipped)."""
    found = []
    base = len(folder.resolve().parts)
    for root, dirs, _ in os.walk(folder.resolve()):
        keep = []
        for d in dirs:
            if d.endswith(".dashcam"):
                found.append(Path(root) / d)
            elif not d.startswith(".") and len(Path(root).parts) - base < SEARCH_DEPTH:
                keep.append(d)
        dirs[:] = keep
    return found


def _register(cache: Path) -> None:
    """List a cache built beside its profile in the user cache dir's REGISTRY (best effort)."""
    home = user_cache_dir()
    if cache.parent == home / "profiles":
        return
    try:
        home.mkdir(parents=True, exist_ok=True)
        with open(home / REGISTRY, "a") as f:  # one short append: whole lines even with other writers
            f.write(f"{cache}\n")
    except OSError:
        pass


def _registered() -> list[Path]:
    try:
        lines = (user_cache_dir() / REGISTRY).read_text().splitlines()
    except OSError:
        return []
    return [Path(x) for x in dict.fromkeys(lines) if x.strip()]


def forget_missing() -> None:
    """Drop the REGISTRY's lines of cache folders that are gone (after ``dashcam cache clear``)."""
    path = user_cache_dir() / REGISTRY
    keep = [str(c) for c in _registered() if c.is_dir()]
    try:
        tmp = path.with_name(f"{path.name}.{os.getpid()}")
        tmp.write_text("".join(f"{c}\n" for c in keep))
        os.replace(tmp, path)
    except OSError:
        pass


def known_caches(folders: list[Path] = ()) -> list[dict]:
    """The caches in the user cache dir and beside profiles in ``folders``, most recently used first.

    Each: cache, profile, size_bytes, last_used (epoch s: the folder's modification time, see
    mark_used), profile_exists, current (built by this version from the profile as it is now).
    """
    caches = [c for c in _registered() if c.is_dir()] + [c for f in folders for c in _beside_profiles(Path(f))]
    profiles = user_cache_dir() / "profiles"
    if profiles.is_dir():
        caches += [c for c in sorted(profiles.iterdir())
                   if c.is_dir() and not c.name.startswith((BUILD_PREFIX, TRASH_PREFIX))]
    out = []
    for cache in dict.fromkeys(c.resolve() for c in caches):
        man = read_manifest(cache) or {}
        profile = Path(man["source"]) if man.get("source") else (
            cache.with_name(cache.name[: -len(".dashcam")]) if cache.name.endswith(".dashcam") else None)
        try:
            last = cache.stat().st_mtime
        except OSError:
            continue
        exists = bool(profile and profile.is_file())
        try:
            current = (exists and man.get("version") == CACHE_VERSION
                       and man.get("fingerprint") == file_fingerprint(profile))
        except OSError:
            current = False
        out.append({"cache": str(cache), "profile": str(profile) if profile else None, "size_bytes": _dir_size(cache),
                    "last_used": last, "profile_exists": exists, "current": bool(current)})
    return sorted(out, key=lambda c: -c["last_used"])


def caches_of(profile: Path) -> list[Path]:
    """The existing cache folders of ``profile``: beside it, in the user cache dir."""
    profile = Path(profile).expanduser().resolve()
    beside = profile.parent / (profile.name + ".dashcam")
    return [c for c in dict.fromkeys([beside, user_cache_dir_for(profile)]) if c.is_dir()]


def remove_cache(cache: Path) -> int:
    """Delete one cache folder; return the bytes it took."""
    size = _dir_size(cache)
    _discard(cache)
    return size


def _derive(out: Path, manifest: dict):
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
        derived = build_derived(con, out)
        axis = window_axis(con, derived["window"]) if derived["window"] else None
        return derived, axis
    finally:
        con.close()


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
            sel = ", ".join(f'"{c}"' for c in cols)
            step = NVTX_CHUNK_ROWS if short == "nvtx" else CHUNK_ROWS
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

    def attribute_nvtx(ranges) -> None:
        part = attribute(nvtx_state["axis"], *ranges)
        with lock:
            nvtx_state["parts"].append(part)

    def derive() -> None:
        big = {short for short, _ in BIG_TABLES.values()}
        tables = {short: (dict(info, rows=sum(results.get(short, [])), files=len(results.get(short, [])))
                          if short in big else info)
                  for short, info in manifest["tables"].items() if short != "nvtx"}
        manifest["derived"], axis = _derive(out, {**manifest, "tables": tables})
        checkpoint("derived")
        if bar:
            bar.advance()
        if axis is None:
            return
        with lock:
            nvtx_state["axis"], nvtx_state["window"] = axis, manifest["derived"]["window"]
            early, nvtx_state["early"] = nvtx_state["early"], []
        for path in early:
            attribute_nvtx(read_ranges(path, nvtx_state["window"]))

    def work() -> None:
        while not errors:
            try:
                short, src, i, sql = q.get_nowait()
            except queue.Empty:
                return
            try:
                table = _read_chunk(profile, sql, manifest["tables"][short]["columns"], short)
                if short == "nvtx":
                    table = groups.add_column(table)
                path = out / f"{short}-{i:05d}.parquet"
                pq.write_table(table, path, **chunk_write_options(table.column_names))
                checkpoint(f"chunk {path.name}")
                rows = table.num_rows
                if short == "nvtx":
                    with lock:
                        ready = nvtx_state["axis"] is not None
                        if not ready:
                            nvtx_state["early"].append(path)
                    if ready:
                        attribute_nvtx(chunk_ranges(table, nvtx_state["window"]))
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
    threads = [threading.Thread(target=work, daemon=True) for _ in range(min(thread_count(WORKERS), max(1, len(jobs))))]
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
    for short, counts in results.items():
        manifest["tables"][short]["rows"] = sum(counts)
        manifest["tables"][short]["files"] = len(counts)
    if "nvtx" in results:
        manifest["tables"]["nvtx"]["columns"].append("groupId")
        manifest["nvtx_groups"] = groups.write(out)
        checkpoint("nvtx groups")
        if nvtx_state["axis"] is not None:
            files = sorted(out.glob("nvtx-*.parquet"))
            manifest["derived"]["nvtx_kernels"] = finish(nvtx_state["parts"], nvtx_state["axis"],
                                                         nvtx_state["window"], files, out)
            checkpoint("nvtx kernels")
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

    def _text_id_groups(self, text_ids):
        """Group ids for registered-string ids (-1 where the id has no string)."""
        import numpy as np
        import pyarrow as pa
        import pyarrow.parquet as pq

        with self.lock:
            if self._strings is None:
                path = self.out / "strings.parquet"
                t = pq.read_table(path) if path.exists() else None
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


def _read_chunk(profile: Path, sql: str, cols: list[str], short: str = ""):
    """One chunk of a table as an Arrow table: connectorx when it can, plain sqlite3 when it cannot."""
    import pyarrow as pa

    try:
        import connectorx as cx

        t = cx.read_sql(f"sqlite://{quote(str(profile.resolve()))}", sql, return_type="arrow")
        return _normalize(t, cols, short)
    except Exception:
        pass
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
    """Give every chunk the same Arrow types (int64 / float64 / string, schema.column_kind) whatever connectorx
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
        from rich.console import Console
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

        self._p = Progress(
            TextColumn("[bold]indexing[/] {task.description}"),
            BarColumn(),
            TextColumn("{task.completed}/{task.total} chunks"),
            TimeElapsedColumn(),
            console=Console(stderr=True),
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
