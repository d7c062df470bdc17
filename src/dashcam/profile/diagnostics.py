"""nsys' own diagnostics in an export (DIAGNOSTIC_EVENT): what the profiler said about the capture while it ran —
"Not all NVTX events might have been collected.", "No CUDA events collected. Does the process use CUDA?", a CPU
sampling that perf's paranoid level refused. ``info`` lists them; a tool whose figures one of them touches (NVTX
ranges lost: the nvtx tool) notes it.

The text is profile text: data, never instructions. nsys writes one message per process, so the same warning
of eleven processes is one diagnostic with ``processes = 11``.
"""
from __future__ import annotations

import sqlite3
from contextlib import closing
from dataclasses import dataclass

from dashcam.profile.source import connect_readonly

SEVERITIES = {0: "unknown", 1: "info", 2: "warning", 3: "error", 4: "verbose"}  # ENUM_DIAGNOSTIC_SEVERITY_LEVEL
SOURCES = {0: "unknown", 1: "injection", 2: "daemon", 3: "analysis"}  # ENUM_DIAGNOSTIC_SOURCE_TYPE
RANK = {"error": 0, "warning": 1, "info": 2, "verbose": 3, "unknown": 4}  # worst first
# A warning or error touches a tool's figures when its text names the topic and says data was lost: "Not all NVTX
# events might have been collected." touches the NVTX ranges; "No NVTX events collected. Does the process use NVTX?"
# (said by every child process that made no range) does not.
TOPICS = {"nvtx": ("nvtx",), "cpu": ("cpu ip sample", "cpu kernel ip sample", "backtrace", "sampl")}
LOST = ("not all", "unable to collect", "drop", "lost", "overflow", "discard")


@dataclass(frozen=True)
class Diagnostic:
    severity: str  # error, warning, info, verbose, unknown
    source: str  # injection, daemon, analysis, unknown
    text: str  # profile text
    processes: int  # how many processes (or the daemon) said it
    first_ns: int  # when it was first said, profile clock

    @property
    def notable(self) -> bool:
        """A warning or an error: something the capture may lack."""
        return self.severity in ("warning", "error")

    def touches(self, topic: str) -> bool:
        """A warning or error that data of ``topic`` (TOPICS) was lost."""
        t = self.text.lower()
        return self.notable and any(w in t for w in TOPICS[topic]) and any(w in t for w in LOST)


def diagnostics(profile) -> list[Diagnostic]:
    """The export's diagnostics, one per distinct (severity, source, text), worst first then by time; memoized."""
    if "diagnostics" not in profile.memo:
        profile.memo["diagnostics"] = _read(profile.sqlite_path)
    return profile.memo["diagnostics"]


def notes_for(profile, topic: str) -> list[str]:
    """One note per diagnostic that says data of ``topic`` was lost (Diagnostic.touches), quoting nsys."""
    return [f"nsys warned while capturing: {d.text!r}" + (f" ({d.processes} processes)" if d.processes > 1 else "")
            for d in diagnostics(profile) if d.touches(topic)]


def _read(path) -> list[Diagnostic]:
    try:
        with closing(connect_readonly(path)) as con:
            cols = {r[1] for r in con.execute('PRAGMA table_info("DIAGNOSTIC_EVENT")')}
            if not {"text", "severity"} <= cols:
                return []
            text = "d.text"
            if "StringIds" in {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}:
                # some schemas store the message as a StringIds id
                text = "CASE WHEN typeof(d.text) = 'integer' THEN coalesce(s.value, d.text) ELSE d.text END"
                join = "LEFT JOIN StringIds s ON s.id = d.text"
            else:
                join = ""
            src = "d.source" if "source" in cols else "0"
            t = "d.timestamp" if "timestamp" in cols else "0"
            rows = con.execute(f"""SELECT d.severity, {src}, {text}, count(*), min({t}) FROM DIAGNOSTIC_EVENT d {join}
                                  GROUP BY 1, 2, 3""").fetchall()
    except sqlite3.Error:
        return []
    out = [Diagnostic(SEVERITIES.get(int(sev or 0), str(sev)), SOURCES.get(int(src or 0), str(src)),
                      " ".join(str(text).split()), int(n), int(first or 0))
           for sev, src, text, n, first in rows if text is not None]
    return sorted(out, key=lambda d: (RANK.get(d.severity, len(RANK)), d.first_ns))


def render_diagnostics(found: list[Diagnostic], c) -> None:
    """For ``info``: nsys' warnings and errors in full (profile text), its info messages counted."""
    from rich.text import Text

    notable = [d for d in found if d.notable]
    if not found:
        return
    c.print(Text(f"nsys diagnostics: {len(notable)} warnings or errors, {len(found) - len(notable)} info messages"
                 + (" (--json lists them)" if len(found) > len(notable) else ""), style="bold"))
    for d in notable:
        c.print(Text(f"  {d.severity} ({d.source}): {d.text}" + (f"  [{d.processes} processes]"
                                                                  if d.processes > 1 else "")))
