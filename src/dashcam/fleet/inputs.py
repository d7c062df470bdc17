"""Which files a fleet is, and each report's rank from its file name.

``is_fleet(arg)``: a directory, a glob pattern, or several paths. ``discover(args)`` lists the reports:
the ``.sqlite`` / ``.nsys-rep`` files of a directory (not its sub-folders; a ``.nsys-rep`` with a ``.sqlite``
of the same stem beside it counts once, as the ``.sqlite``), the files a glob matches, or the files
given; sorted by name (numbers in names compared as numbers).

Rank from the file name: the last integer of the stem (``report_0077.sqlite`` -> 77), or the first group
of ``--rank-pattern REGEX`` (the whole match without a group). It is the last resort: the rank the capture's
environment records comes first (identity.py, chosen in report.py), since nsys's default ``%h_%p`` names end
in the process id; failing both, ranks follow the sorted order. Each report says which source gave its rank.
"""
from __future__ import annotations

import glob
import os
import re
from pathlib import Path

from dashcam.errors import BadParameter, NoReports
from dashcam.profile.source import profiles_in

GLOB_CHARS = set("*?[")
_LAST_INT = re.compile(r"(\d+)(?!.*\d)")


def is_fleet(args: str | list[str] | None) -> bool:
    """Whether PROFILE argument(s) name a fleet: a directory, a glob pattern or more than one path."""
    if args is None:
        return False
    items = [args] if isinstance(args, str) else list(args)
    return len(items) > 1 or any(Path(a).expanduser().is_dir() or GLOB_CHARS & set(a) for a in items)


def _natural(p: Path) -> list:
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", p.name)]


def discover(args: list[str]) -> list[Path]:
    """The reports the arguments name (see the module docstring); NoReports when there are none."""
    found: list[Path] = []
    for a in args:
        p = Path(a).expanduser()
        if p.is_dir():
            found += profiles_in(p)
        elif GLOB_CHARS & set(a):
            found += [Path(x) for x in glob.glob(os.path.expanduser(a)) if Path(x).is_file()]
        else:
            found.append(p)  # a missing file is reported by its digest, like any unreadable report
    out = sorted(dict.fromkeys(found), key=_natural)
    if not out:
        what = ", ".join(args) or "(nothing)"
        raise NoReports(f"no reports in {what}: expected .sqlite files of `nsys export --type sqlite` "
                        "(or .nsys-rep with nsys on PATH)")
    return out


def ranks_from_names(paths: list[Path], pattern: str | None = None) -> list[int | None]:
    """Each report's rank read from its file name (None where it gives none, and for every report when two
    names give the same rank)."""
    rx = None
    if pattern:
        try:
            rx = re.compile(pattern)
        except re.error as e:
            raise BadParameter(f"--rank-pattern {pattern!r}: not a regular expression ({e})") from None
    out: list[int | None] = []
    for p in paths:
        stem = p.name[: -len(p.suffix)] if p.suffix else p.name
        m = rx.search(stem) if rx else _LAST_INT.search(stem)
        text = (m.group(1) if m and m.groups() else m.group(0)) if m else None
        out.append(int(text) if text and text.isdigit() else None)
    known = [r for r in out if r is not None]
    if len(known) != len(set(known)):
        return [None] * len(paths)
    return out
