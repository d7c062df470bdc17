"""Shared test fixtures: a private cache dir, the builder, and the shared real profiles."""
from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from dashcam.testing.builder import ExportBuilder
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


GPU_ACTIVITY_TABLES = ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET")


def plain_window(con) -> tuple[int, int]:
    """The window by plain SQL on an export: [first start, last end] over kernels, memcpys and memsets."""
    tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    gpu = [t for t in GPU_ACTIVITY_TABLES if t in tables]
    return con.execute("SELECT min(s), max(e) FROM (" + " UNION ALL ".join(
        f"SELECT start AS s, end AS e FROM {t}" for t in gpu) + ")").fetchone()


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
