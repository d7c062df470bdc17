"""One builder at a time: the lock beside a cache, who holds it, and the build folders of dead builders.

A lock file ``<cache>.lock`` names its builder (pid, the process's start time, this machine: host, boot and
pid namespace) and is touched every HEARTBEAT_S seconds. Another process that wants the same cache waits
for it (saying so once), and breaks it when the builder is gone: a process of this machine that is dead,
a zombie or a reused pid at once; another machine's when nobody touched the lock for STALE_S seconds. A
build writes into a ``.build-*`` folder that names its builder the same way; the next build sweeps those
of gone builders (OWNERLESS_STALE_S for folders of older versions without an owner file).
"""
from __future__ import annotations

import json
import os
import shutil
import socket
import threading
import time
from pathlib import Path

from dashcam.profile.cache.hooks import note

LOCK_SUFFIX = ".lock"
BUILD_PREFIX = ".build-"
TRASH_PREFIX = ".trash-"  # a replaced cache, renamed aside before it is deleted: anyone may delete it
OWNER = "owner.json"  # in a build folder (and the cache it becomes): who built it
HEARTBEAT_S = 5.0  # the builder touches its lock and build folder this often
STALE_S = 60.0  # another machine's lock or build folder nobody touched for this long: a dead builder's
OWNERLESS_STALE_S = 3600.0  # build folders of older dashcams, without an owner file
POLL_S = 0.2


def discard(cache: Path) -> None:
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


def start_ticks(pid: int) -> int | None:
    """When process ``pid`` started (clock ticks since boot; Linux), or None: a reused pid starts later."""
    fields = _proc_stat(pid)
    try:
        return int(fields[19]) if fields else None
    except (ValueError, IndexError):
        return None


def this_builder() -> dict:
    return {"pid": os.getpid(), "host": socket.gethostname(), "machine": _machine(),
            "pid_start": start_ticks(os.getpid()), "started": time.time(), "nonce": os.urandom(8).hex()}


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
    return start is None or start_ticks(pid) in (None, start)


def _here(owner: dict | None) -> bool:
    """Whether ``owner``'s pid is a process of this machine (so its liveness can be asked)."""
    if not owner or not isinstance(owner.get("pid"), int):
        return False
    if "machine" in owner:
        return owner["machine"] == _machine()
    return owner.get("host") == socket.gethostname()


def dead_here(owner: dict | None) -> bool:
    """Whether ``owner`` (pid, machine) is a process of this machine that no longer runs."""
    return _here(owner) and owner["pid"] != os.getpid() and not _alive(owner["pid"], owner.get("pid_start"))


def _gone(owner: dict | None, untouched_s: float) -> bool:
    """Whether the builder ``owner`` is gone: asked directly when it is of this machine (a live one may
    be stopped, Ctrl-Z, for any time), else judged by its heartbeat: untouched for STALE_S."""
    if _here(owner):
        return dead_here(owner)
    return untouched_s > STALE_S


def read_json(path: Path) -> dict | None:
    try:
        d = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return d if isinstance(d, dict) else None


class BuildLock:
    """``<cache>.lock`` beside the cache: created exclusively, naming its holder, touched every
    HEARTBEAT_S seconds while held. A waiter breaks it when its holder is a dead process of this
    machine (_gone), or, held from another machine, when nobody touched it for STALE_S seconds of
    the waiter's own clock (no clock is compared across machines)."""

    def __init__(self, path: Path, profile: Path) -> None:
        self.path = path
        self.profile = profile
        self.owner = this_builder()
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
            holder = read_json(self.path)
            state = (st.st_mtime_ns, st.st_ino, json.dumps(holder, sort_keys=True))
            if state != seen:
                seen, since = state, time.monotonic()
            if _gone(holder, time.monotonic() - since):
                self._break(holder)
                continue
            if not said:
                who = (f"pid {holder['pid']} on {holder.get('host')}" if holder and "pid" in holder
                       else "another process")
                note(f"waiting for {who}, which is building the cache of {self.profile.name} ({self.path})")
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
        if read_json(aside) != holder:  # not the stale lock: a live one, taken meanwhile
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
        if read_json(self.path) == self.owner:
            self.path.unlink(missing_ok=True)
        self._beat = None


def sweep(folder: Path, lock: BuildLock) -> None:
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
            owner = read_json(d / OWNER)
            if owner is not None:
                stale = _gone(owner, now - (d / OWNER).stat().st_mtime)
            else:
                newest = max([d.stat().st_mtime] + [p.stat().st_mtime for p in d.iterdir()])
                stale = now - newest > OWNERLESS_STALE_S
        except OSError:
            continue
        if stale:
            shutil.rmtree(d, ignore_errors=True)
