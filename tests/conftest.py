"""Shared test fixtures: a private cache dir, the builder, the real CLI in a subprocess, the shared real profiles."""
from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dashcam.profile import Profile
from dashcam.testing.builder import ExportBuilder

SHARED = Path(__file__).resolve().parents[2] / "shared" / "profiles"
SHARED_SQLITE = sorted(SHARED.glob("*.sqlite")) if SHARED.is_dir() else []


def has_gpu_activity(path: Path) -> bool:
    """Whether an export holds any kernel, memcpy or memset row (plain SQLite, read-only)."""
    import sqlite3

    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        return any(con.execute(f'SELECT EXISTS (SELECT 1 FROM "{t}")').fetchone()[0]
                   for t in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET")
                   if t in tables)
    finally:
        con.close()


# The shared real exports with GPU activity (every tool measures them) and without (a CPU-only capture:
# the tools that need a window say so, with exit 8; test_shared_profiles checks that).
SHARED_GPU = [p for p in SHARED_SQLITE if has_gpu_activity(p)]
SHARED_NO_GPU = [p for p in SHARED_SQLITE if p not in SHARED_GPU]

US = 1_000
MS = 1_000_000


@pytest.fixture(autouse=True)
def _private_cache(tmp_path_factory, monkeypatch):
    """Caches go to a temp dir, never next to ../shared/profiles or the repo."""
    monkeypatch.setenv("DASHCAM_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
    # the real nsys CI names is for the real-nsys tests (tests/real_nsys.py read it at import); elsewhere a
    # test's fake nsys on PATH must be the one the loader finds
    monkeypatch.delenv("DASHCAM_NSYS", raising=False)


@pytest.fixture
def build(tmp_path):
    """``build(builder) -> Profile``: write an ExportBuilder to a temp file and open it."""
    counter = {"n": 0}

    def _build(b: ExportBuilder, name: str | None = None) -> Profile:
        counter["n"] += 1
        path = b.write(tmp_path / (name or f"fixture{counter['n']}.sqlite"))
        return Profile.open(path, progress=False)

    return _build


# Variables that steer the CLI, kept out of its child environment unless a test sets them: the
# cache dir, debug mode and the default profile (DASHCAM_*), a model endpoint (OPENAI_*), the GitHub
# API (GITHUB_*), rich's width and colour, and HTTP proxies (the fake servers are on 127.0.0.1).
CLI_ENV_PREFIXES = ("DASHCAM_", "OPENAI_", "GITHUB_")
CLI_ENV_NAMES = ("COLUMNS", "FORCE_COLOR")


def _steers_the_cli(name: str) -> bool:
    return name.startswith(CLI_ENV_PREFIXES) or name in CLI_ENV_NAMES or name.lower().endswith("_proxy")


def run_cli(*args, cache: Path, cwd: Path | None = None, env: dict[str, str | None] | None = None,
            input: str | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    """Run the real CLI, ``python -m dashcam.cli ARGS`` (each str()-ed), output captured as text.

    The child gets this environment without the variables that steer the CLI (see CLI_ENV_PREFIXES),
    the private cache dir ``cache``, then ``env`` (None unsets a variable).
    """
    full = {k: v for k, v in os.environ.items() if not _steers_the_cli(k)}
    full["DASHCAM_CACHE_DIR"] = str(cache)
    for k, v in (env or {}).items():
        if v is None:
            full.pop(k, None)
        else:
            full[k] = v
    return subprocess.run([sys.executable, "-m", "dashcam.cli", *map(str, args)], capture_output=True, text=True,
                          env=full, cwd=cwd, input=input, timeout=timeout, check=False)


@pytest.fixture
def cli(tmp_path):
    """``cli(*args, **run_cli_options) -> CompletedProcess``: run_cli in ``tmp_path``, caching in ``tmp_path/cache``."""
    return lambda *args, **kw: run_cli(*args, **{"cache": tmp_path / "cache", "cwd": tmp_path, **kw})


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
def planted(tmp_path_factory):
    """``get(name) -> Profile``: each planted scenario (testing/scenarios.py) built and opened once per session."""
    from dashcam.testing.scenarios import build as build_scenario

    folder = tmp_path_factory.mktemp("scenarios")
    profiles: dict[str, Profile] = {}

    def get(name: str) -> Profile:
        if name not in profiles:
            profiles[name] = Profile.open(build_scenario(name, folder / f"{name}.sqlite"), progress=False)
        return profiles[name]

    return get


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
