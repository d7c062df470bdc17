"""The real NVIDIA nsys for the tests that record and export for real: $DASHCAM_NSYS (a file or its folder), else
the one on PATH, else the one .ci/install-nsys unpacked (``.ci/install-nsys --where``). ``REAL_NSYS`` is None when
none runs; ``needs_nsys`` skips a test then, with the reason. Read once at import: the tests themselves run
without DASHCAM_NSYS (conftest), so that a fake nsys on PATH is the one the loader finds."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def runs(path: str | None) -> str | None:
    if not path:
        return None
    p = Path(path).expanduser()
    p = p / "nsys" if p.is_dir() else p
    if not (p.is_file() and os.access(p, os.X_OK)):
        return None
    try:
        out = subprocess.run([str(p), "--version"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    return str(p) if "Nsight Systems" in out else None


def _ci_folder() -> str | None:
    try:
        return subprocess.run(["bash", str(ROOT / ".ci" / "install-nsys"), "--where"], capture_output=True,
                              text=True, timeout=30).stdout.strip() or None
    except (OSError, subprocess.TimeoutExpired):
        return None


def find_real_nsys() -> str | None:
    for candidate in (lambda: os.environ.get("DASHCAM_NSYS"), lambda: shutil.which("nsys"), _ci_folder):
        found = runs(candidate())
        if found:
            return found
    return None


REAL_NSYS = find_real_nsys()
NO_NSYS = "no real nsys: set DASHCAM_NSYS, put nsys on PATH, or run .ci/install-nsys"
needs_nsys = pytest.mark.skipif(REAL_NSYS is None, reason=NO_NSYS)
