"""Shared test fixtures: a private cache dir, the builder, and the shared real profiles."""
from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from dashcam.fixtures import ExportBuilder
from dashcam.profile import Profile

SHARED = Path(__file__).resolve().parents[2] / "shared" / "profiles"
SHARED_SQLITE = sorted(SHARED.glob("*.sqlite")) if SHARED.is_dir() else []

US = 1_000
MS = 1_000_000


@pytest.fixture(autouse=True)
def _private_cache(tmp_path_factory, monkeypatch):
    """Caches go to a temp dir, never next to ../shared/profiles or the repo."""
    monkeypatch.setenv("DASHCAM_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))


@pytest.fixture
def build(tmp_path):
    """``build(builder) -> Profile``: write an ExportBuilder to a temp file and open it."""
    counter = {"n": 0}

    def _build(b: ExportBuilder, name: str | None = None) -> Profile:
        counter["n"] += 1
        path = b.write(tmp_path / (name or f"fixture{counter['n']}.sqlite"))
        return Profile.open(path, progress=False)

    return _build


def sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def shared_or_skip(name: str) -> Path:
    p = SHARED / name
    if not p.exists():
        pytest.skip(f"{p} not present (../shared/profiles is only in the project workspace)")
    return p


@pytest.fixture(scope="session")
def opened(tmp_path_factory):
    """``opened(path) -> Profile``: each shared real profile opened (and cached) once per test session."""
    cache = tmp_path_factory.mktemp("shared-cache")
    profiles: dict[Path, Profile] = {}

    def get(path: Path) -> Profile:
        if path not in profiles:
            with pytest.MonkeyPatch.context() as mp:
                mp.setenv("DASHCAM_CACHE_DIR", str(cache))
                profiles[path] = Profile.open(path, progress=False)
        return profiles[path]

    return get
