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
        if ref.fleet:
            from dashcam.testing.fleets import FLEETS

            return self._built("fleet", ref.fleet, FLEETS, f"fleet-{ref.fleet}")
        if ref.scenario:
            return self._built("scenario", ref.scenario, scenarios(), f"{ref.scenario}.sqlite")
        if ref.shared:
            return repo_root(case.file.parent).parent / "shared" / "profiles" / ref.shared
        p = Path(ref.path)
        return p if p.is_absolute() else case.file.parent / p

    def _built(self, what: str, name: str, table: dict[str, Callable], out_name: str) -> Path:
        """The planted profile (or fleet folder) ``name`` of ``table``, built into ``tmp`` on first use."""
        if name not in table:
            raise BadParameter(f"unknown {what} {name!r}; {what}s: {', '.join(sorted(table))}")
        out = self.tmp / out_name
        if not out.exists():
            table[name](out)
        return out

    def get(self, case: Case):
        """(Profile, path) — for a fleet (FleetReport, folder) — or None when a shared profile is absent."""
        path = self.path_for(case)
        key = str(path)
        if key not in self.opened:
            if case.profile.shared and not path.exists():
                return None
            if case.profile.fleet:
                from dashcam.fleet import analyse

                self.opened[key] = (analyse([key], workers=1), key)
            else:
                self.opened[key] = (Profile.open(path, progress=False), key)
        return self.opened[key]
