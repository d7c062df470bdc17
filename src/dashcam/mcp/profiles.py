"""Which profiles the MCP server may open, and the ones it keeps open between calls.

Roots: a profile is opened only when its real path (symlinks followed) lies under one of the
allowed folders: the folder the server started in, each ``--root`` folder, and the ``file://``
roots the client declares. A relative path is looked up under each root in turn. Anything else is
refused with ``OutsideRoots`` before the file is touched.

``OpenProfiles``: a small LRU of opened ``Profile`` objects keyed by the file's real path and its
size and modification time (a re-exported file is opened afresh). A second call on the same
profile costs a query, not an open. Each profile is used by one call at a time (a DuckDB
connection is not shared between threads at once); the least recently used one is closed once
more than ``keep`` are open.

``list_profiles``: the profiles under the roots an agent may open (what the ``list_profiles`` tool
returns): .sqlite files that are Nsight Systems exports, .nsys-rep and .qdrep reports, at most
``LIST_DEPTH`` folders down, hidden folders and dashcam's own caches left out.
"""
from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import TypeVar
from urllib.parse import unquote, urlparse
from urllib.request import url2pathname

from dashcam.errors import BadParameter, DashcamError
from dashcam.profile import Profile
from dashcam.profile.source import PROFILE_SUFFIXES, check_sqlite_file

DEFAULT_KEEP_OPEN = 4
LIST_DEPTH = 4  # folders below a root that list_profiles looks into
LIST_MAX_FILES = 50_000  # files list_profiles looks at before it stops (a root such as a home folder is vast)
SKIP_FOLDERS = {"node_modules", "__pycache__", "site-packages"}
T = TypeVar("T")


class OutsideRoots(BadParameter):
    """A profile path outside every allowed root (the server's --root folders and the client's roots)."""


def root_paths(folders: Iterable[str | os.PathLike]) -> list[Path]:
    """``--root`` folders (and the start folder) as real paths, each once; each must be an existing folder."""
    out = []
    for f in folders:
        p = Path(f).expanduser().resolve()
        if not p.is_dir():
            raise BadParameter(f"--root {f}: not a folder")
        if p not in out:
            out.append(p)
    return out


def file_uri_paths(uris: Iterable[str]) -> list[Path]:
    """The local folders of ``file://`` root URIs (other schemes are not folders here, and are skipped)."""
    out = []
    for uri in uris:
        parsed = urlparse(str(uri))
        if parsed.scheme != "file" or parsed.netloc not in ("", "localhost"):
            continue
        out.append(Path(url2pathname(unquote(parsed.path))).resolve())
    return out


def _under(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def resolve_in_roots(path: str, roots: list[Path]) -> Path:
    """The real path of ``path`` if it lies under one of ``roots``; else ``OutsideRoots``.

    A relative path is tried under each root in order and the first that exists is taken (the first
    root's when none does, so the open reports the missing file).
    """
    if not str(path).strip():
        raise BadParameter("profile: give the path of a .sqlite export (or .nsys-rep)")
    given = Path(path).expanduser()
    if given.is_absolute():
        candidates = [given]
    else:
        candidates = [r / given for r in roots] or [given]
    real = next((c.resolve() for c in candidates if c.exists()), candidates[0].resolve())
    if not any(_under(real, r) for r in roots):
        where = ", ".join(str(r) for r in roots) or "none"
        raise OutsideRoots(f"{path}: outside the folders this server may read ({where}); start it with "
                           "--root FOLDER, or add the folder as a root in the client")
    return real


def _stamp(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_size, st.st_mtime_ns


class _Entry:
    def __init__(self, stamp) -> None:
        self.stamp = stamp
        self.lock = threading.Lock()
        self.profile: Profile | None = None
        self.retired = False

    def retire(self) -> None:
        """Close the profile now, or, when a call is using it, as soon as that call is done."""
        self.retired = True
        if self.lock.acquire(blocking=False):
            try:
                self.close_profile()
            finally:
                self.lock.release()

    def close_profile(self) -> None:
        if self.profile is not None:
            _close(self.profile)
            self.profile = None


def _close(profile: Profile) -> None:
    try:
        profile.con.close()
    except Exception:
        pass


Progress = Callable[[int, int], None]


class OpenProfiles:
    """The profiles kept open between calls: at most ``keep``, least recently used closed first."""

    def __init__(self, keep: int = DEFAULT_KEEP_OPEN) -> None:
        if keep < 1:
            raise BadParameter(f"--keep-open {keep}: keep at least 1 profile open")
        self.keep = keep
        self._lock = threading.Lock()
        self._entries: OrderedDict[Path, _Entry] = OrderedDict()
        self.opens = 0  # profiles opened so far (a second call on an open profile opens none)

    def __len__(self) -> int:
        return len(self._entries)

    def _entry(self, path: Path) -> _Entry:
        stamp = _stamp(path)
        stale: list[_Entry] = []
        with self._lock:
            entry = self._entries.get(path)
            if entry is None or entry.stamp != stamp:
                if entry is not None:
                    stale.append(entry)
                entry = self._entries[path] = _Entry(stamp)
            self._entries.move_to_end(path)
            while len(self._entries) > self.keep:
                stale.append(self._entries.popitem(last=False)[1])
        for old in stale:
            old.retire()
        return entry

    def forget(self, path: Path) -> None:
        with self._lock:
            entry = self._entries.pop(path, None)
        if entry is not None:
            entry.retire()

    def close(self) -> None:
        with self._lock:
            entries, self._entries = list(self._entries.values()), OrderedDict()
        for e in entries:
            e.retire()

    def _open(self, path: Path, progress: Progress | None) -> Profile:
        self.opens += 1
        return Profile.open(path, progress=progress if progress is not None else False)

    @contextmanager
    def use(self, path: Path, progress: Progress | None = None) -> Iterator[Profile]:
        """The open profile of ``path`` (opened now if needed), for this caller alone while the block runs."""
        entry = self._entry(path)
        with entry.lock:
            if entry.retired:  # retired by newer calls between lookup and lock: a profile for this call alone
                profile = self._open(path, progress)
                try:
                    yield profile
                finally:
                    _close(profile)
                return
            if entry.profile is None:
                try:
                    entry.profile = self._open(path, progress)
                except BaseException:
                    with self._lock:
                        if self._entries.get(path) is entry:
                            del self._entries[path]
                    raise
            try:
                yield entry.profile
            finally:
                if entry.retired:
                    entry.close_profile()

    def run(self, paths: list[Path], fn: Callable[..., T], progress: Progress | None = None) -> T:
        """``fn(*profiles)`` on the open profiles of ``paths`` (a path given twice is one profile). A read
        error from a damaged cache rebuilds that cache and runs ``fn`` once more, as the command line does."""
        from dashcam.profile.cache import cache_of_error, invalidate

        distinct = list(dict.fromkeys(paths))
        for attempt in (1, 2):
            with ExitStack() as stack:
                opened = {p: stack.enter_context(self.use(p, progress)) for p in distinct}
                try:
                    return fn(*(opened[p] for p in paths))
                except DashcamError:
                    raise
                except Exception as e:
                    found = cache_of_error(e, [p.cache for p in opened.values() if p.cache is not None])
                    if found is None or attempt == 2:
                        raise
                    first = (str(e).strip().splitlines() or [""])[0]
                    cache, why = found if isinstance(found, tuple) else (found, first)  # (cache, why), or a cache
                    damaged = next(p for p, prof in opened.items() if prof.cache == cache)
            self.forget(damaged)
            invalidate(cache, f"reading it failed: {why}")
        raise AssertionError("unreachable")


def _is_profile(path: Path) -> bool:
    if path.suffix.lower() != ".sqlite":
        return True
    try:
        check_sqlite_file(path)
    except DashcamError:
        return False
    return True


def _walk(base: Path) -> Iterator[Path]:
    """The files under ``base`` with a profile's suffix, LIST_DEPTH folders down, hidden and cache folders out."""
    seen = 0
    for folder, subfolders, names in os.walk(base):
        depth = len(Path(folder).relative_to(base).parts)
        subfolders[:] = sorted(d for d in subfolders if not d.startswith(".") and d not in SKIP_FOLDERS
                               and not d.endswith(".dashcam")) if depth < LIST_DEPTH else []
        for name in sorted(names):
            seen += 1
            if seen > LIST_MAX_FILES:
                return
            if not name.startswith(".") and Path(name).suffix.lower() in PROFILE_SUFFIXES:
                yield Path(folder) / name


def list_profiles(roots: list[Path], folder: str | None = None, limit: int = 200) -> dict:
    """The profiles under ``roots`` (or under ``folder``, which must lie under one) that may be opened: each
    with its real path, the root it lies under, its kind (sqlite, nsys-rep, qdrep), size and modification
    time (UTC); the first ``limit`` by path."""
    from datetime import datetime, timezone

    bases = [resolve_in_roots(folder, roots)] if folder else roots
    if folder and not bases[0].is_dir():
        raise BadParameter(f"folder {folder}: not a folder")
    found: dict[Path, Path] = {}
    for base in bases:
        for f in _walk(base):
            real = f.resolve()
            root = next((r for r in roots if _under(real, r)), None)  # a link out of the roots cannot be opened
            if root is not None and real not in found and real.is_file() and _is_profile(real):
                found[real] = root
    rows = []
    for real in sorted(found)[:limit]:
        st = real.stat()
        rows.append({"path": str(real), "root": str(found[real]), "kind": real.suffix.lower().lstrip("."),
                     "size_bytes": st.st_size,
                     "modified": datetime.fromtimestamp(st.st_mtime, timezone.utc).isoformat(timespec="seconds")})
    out = {"tool": "list_profiles", "roots": [str(r) for r in roots], "profile_count": len(found), "profiles": rows}
    if len(found) > limit:
        out["notes"] = [f"showing {limit} of {len(found)} profiles (raise limit, or pass folder)"]
    return out
