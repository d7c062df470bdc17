"""The package list in pyproject.toml names every folder of the import root and of the mapped folders, so a
plain (non-editable) install ships them all."""
from __future__ import annotations

from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib")  # Python 3.11+
ROOT = Path(__file__).resolve().parents[1]


def folders_with_init() -> set[str]:
    """Every package on disk, by its import name (dashcam.*), from the package-dir mapping."""
    conf = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    found = set()
    for name, folder in conf["package-dir"].items():
        base = ROOT / folder
        for init in base.rglob("__init__.py"):
            rel = init.parent.relative_to(base)
            found.add(".".join([name, *rel.parts]) if rel.parts else name)
    return found


def test_every_package_folder_is_listed_and_every_listed_package_exists():
    conf = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(conf["packages"])
    on_disk = folders_with_init()
    assert on_disk - listed == set(), "folders with __init__.py missing from pyproject's packages"
    assert listed - on_disk == set(), "packages listed in pyproject without a folder"
    assert "dashcam.profile.cache" in listed
