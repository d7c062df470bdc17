"""The profiles the cases ask about: planted scenarios built once per run, shared exports, files; each opened once."""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from dashcam.errors import BadParameter
from dashcam.profile import Profile
from dashcam.testing import scenarios as sc

from .cases import Case


def scenarios() -> dict[str, Callable]:
    return {"demo": sc.demo, **(getattr(sc, "SCENARIOS", None) or {})}


def repo_root(start: Path) -> Path:
    """The folder holding pyproject.toml above ``start`` (the case file), else the current folder."""
    for d in [start.resolve(), *start.resolve().parents]:
        if (d / "pyproject.toml").is_file():
            return d
    return Path.cwd()


class Profiles:
    """Opened profiles by case reference; planted ones built once per scenario into ``tmp``."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.opened: dict[str, tuple[Any, str]] = {}

    def path_for(self, case: Case) -> Path:
        ref = case.profile
        if ref.scenario:
            table = scenarios()
            if ref.scenario not in table:
                raise BadParameter(f"unknown scenario {ref.scenario!r}; scenarios: {', '.join(sorted(table))}")
            out = self.tmp / f"{ref.scenario}.sqlite"
            if not out.exists():
                table[ref.scenario](out)
            return out
        if ref.shared:
            return repo_root(case.file.parent).parent / "shared" / "profiles" / ref.shared
        p = Path(ref.path)
        return p if p.is_absolute() else case.file.parent / p

    def get(self, case: Case):
        """(Profile, path) or None when a shared profile is absent."""
        path = self.path_for(case)
        key = str(path)
        if key not in self.opened:
            if case.profile.shared and not path.exists():
                return None
            self.opened[key] = (Profile.open(path, progress=False), key)
        return self.opened[key]
