"""The caches this user has (``dashcam cache list|clear|info``)."""
from __future__ import annotations

import os
from pathlib import Path

from dashcam.profile.cache.lock import BUILD_PREFIX, TRASH_PREFIX, discard
from dashcam.profile.cache.where import CACHE_VERSION, read_manifest, user_cache_dir_for
from dashcam.profile.source import file_fingerprint, user_cache_dir

# The user cache dir holds the caches built there, and REGISTRY lists the caches built beside their
# profiles (one folder a line, appended by each build): ``dashcam cache`` reads both, and looks for
# ``*.dashcam`` folders in the folders it is given (those of older dashcams, or unlisted).

REGISTRY = "caches-beside-profiles.txt"
SEARCH_DEPTH = 4  # how deep ``dashcam cache`` looks below each folder it is given


def dir_size(d: Path, on_disk: bool = False) -> int:
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


def register(cache: Path) -> None:
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
        out.append({"cache": str(cache), "profile": str(profile) if profile else None, "size_bytes": dir_size(cache),
                    "last_used": last, "profile_exists": exists, "current": bool(current)})
    return sorted(out, key=lambda c: -c["last_used"])


def caches_of(profile: Path) -> list[Path]:
    """The existing cache folders of ``profile``: beside it, in the user cache dir."""
    profile = Path(profile).expanduser().resolve()
    beside = profile.parent / (profile.name + ".dashcam")
    return [c for c in dict.fromkeys([beside, user_cache_dir_for(profile)]) if c.is_dir()]


def remove_cache(cache: Path) -> int:
    """Delete one cache folder; return the bytes it took."""
    size = dir_size(cache)
    discard(cache)
    return size
