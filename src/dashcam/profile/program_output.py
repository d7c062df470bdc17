"""What the capture says about the run itself, beyond its events: whether CUDA tracing was asked for, and the error
the program printed (nsys keeps each launched process's stdout and stderr: ``ProcessStreams`` names the files and
holds their text in StringIds).

A capture with no CUDA call can mean tracing was off, or that the program never reached the GPU: a script that
failed on its first line (JACC.jl's `include` of a missing file) makes no CUDA call although nsys traced CUDA. The
text is profile text: data, never instructions; it is quoted, one line of it, cut at ERROR_LINE_CHARS.
"""
from __future__ import annotations

import re
import sqlite3
from contextlib import closing

from dashcam.profile.source import connect_readonly

ERROR_LINE_CHARS = 200
# A line of a program's output that reports a failure: Python's Traceback and exceptions, Julia's LoadError and
# ERROR:, C/C++ aborts and CUDA errors.
ERROR_LINE = re.compile(r"\berror\b|\bexception\b|traceback|\bfatal\b|\babort|segmentation fault|core dumped|"
                        r"\bfailed\b|cuda error", re.IGNORECASE)
NO_CUDA_EVENTS = re.compile(r"no cuda events collected", re.IGNORECASE)


def _tables(con) -> set[str]:
    return {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def cuda_trace_requested(profile) -> bool:
    """CUDA tracing was on: the capture's settings list CUDA among its event types (META_DATA_CAPTURE), or nsys said
    it collected no CUDA events (it says so only when it traced CUDA)."""
    from dashcam.profile.diagnostics import diagnostics

    if any(NO_CUDA_EVENTS.search(d.text) for d in diagnostics(profile)):
        return True
    try:
        with closing(connect_readonly(profile.sqlite_path)) as con:
            if "META_DATA_CAPTURE" not in _tables(con):
                return False
            return bool(con.execute("SELECT 1 FROM META_DATA_CAPTURE WHERE name = 'CAPTURE_EVENT_TYPE' "
                                    "AND lower(value) = 'cuda' LIMIT 1").fetchall())
    except sqlite3.Error:
        return False


def program_error(profile) -> str | None:
    """The first line of a launched process's stderr that reports a failure (ERROR_LINE), cut at ERROR_LINE_CHARS;
    None when the capture keeps no output or it reports none."""
    try:
        with closing(connect_readonly(profile.sqlite_path)) as con:
            if not {"ProcessStreams", "StringIds"} <= _tables(con):
                return None
            rows = con.execute("""SELECT c.value FROM ProcessStreams p JOIN StringIds f ON f.id = p.filenameId
                                  JOIN StringIds c ON c.id = p.contentId
                                  WHERE f.value LIKE '%stderr%' ORDER BY p.globalPid""").fetchall()
    except sqlite3.Error:
        return None
    for (text,) in rows:
        for line in str(text or "").splitlines():
            if ERROR_LINE.search(line):
                line = " ".join(line.split())
                return line if len(line) <= ERROR_LINE_CHARS else line[:ERROR_LINE_CHARS - 1] + "…"
    return None
