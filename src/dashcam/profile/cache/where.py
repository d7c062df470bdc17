"""Where a profile's cache lives, its version, and its manifest."""
from __future__ import annotations

import hashlib
import json
import os
import stat
from pathlib import Path

from dashcam.profile.source import user_cache_dir

CACHE_VERSION = 28  # 28: kernels' registers per thread and shared memory per block (occupancy)
# 25 twice on two branches (wrapper names; TARGET_INFO_CUDA_GPU, program facts): both merged


def dir_writable(d: Path) -> bool:
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
    if not os.environ.get("DASHCAM_CACHE_DIR") and dir_writable(profile.parent):
        return profile.parent / (profile.name + ".dashcam")
    return user_cache_dir_for(profile)


def read_manifest(cache: Path) -> dict | None:
    try:
        man = json.loads((cache / "manifest.json").read_text())
    except (OSError, ValueError):
        return None
    return man if isinstance(man, dict) else None
