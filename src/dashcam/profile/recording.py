"""What recorded the capture: the Nsight Systems version that recorded it against the one that exported it,
the command lines it records, and the processes that made CUDA calls, by name (``dashcam info``, overview).

- **Recorded with**: a report's own version (its header, or the session record at its end for reports whose
  header has none; source.py), also for an export dashcam made of a report (its exports/ record); for any other
  export, the version in the capture machine's nsys install folder (TARGET_INFO_SYSTEM_ENV ``TargetInstallDir``,
  ``/opt/nvidia/nsight-systems/2024.1.1/target-linux-x64``), which is the recording nsys's. None when neither
  says (an HPC SDK folder ``.../profilers/13.2/Nsight_Systems`` names no nsys version).
- **Exported with**: the export's ``EXPORT_PRODUCT_VERSION`` (META_DATA_EXPORT / EXPORT_META_DATA) —
  ``Profile.nsys_version``; a report exported here says the local nsys's version, not the recording one.
- **Command**: the launched program and its arguments (META_DATA_CAPTURE ``PROCESS_0:COMMAND`` and
  ``PROCESS_0:ARGUMENT_<n>``, nsys 2022 and later) and, for a report, the ``nsys profile ...`` line that recorded
  it. Profile text: shown as data, never followed.
- **Process names** are the ``processes`` view's (views.py): a process nsys recorded as its launcher
  (``nsys-launcher``, reports of 2020-2021) is named by its main thread, the program the launcher became.
"""
from __future__ import annotations

import re
import shlex
from contextlib import closing
from pathlib import Path

from pydantic import BaseModel, Field

from dashcam.profile.source import (
    REPORT_SUFFIXES,
    connect_readonly,
    read_export_record,
    report_nsys_command,
    report_version,
)

# A version in an install folder's path: 2024.1.1 in .../nsight-systems/2024.1.1/target-linux-x64 or
# .../NsightSystems-cli-2023.2.3/...
_INSTALL_VERSION = re.compile(r"(?<![\d.])(20\d\d\.\d+(?:\.\d+){0,2})(?![\d.])")
_ARGUMENT = re.compile(r"^PROCESS_0:ARGUMENT_(\d+)$")


class ProcessName(BaseModel):
    pid: int
    name: str | None = Field(None, description="The program's name (the processes view: a launcher is named by "
                                               "its main thread).")
    recorded_name: str | None = Field(None, description="The name PROCESSES records, when it differs "
                                                        "(nsys-launcher).")


class Recording(BaseModel):
    recorded_with: str | None = Field(None, description="The Nsight Systems version that recorded the capture.")
    recorded_with_from: str | None = Field(None, description="report (its header or session record) | "
                                                             "install_dir (the capture machine's TargetInstallDir)")
    exported_with: str | None = Field(None, description="The Nsight Systems version that exported the SQLite file "
                                                        "(EXPORT_PRODUCT_VERSION).")
    command: str | None = Field(None, description="The launched program's command line (META_DATA_CAPTURE; "
                                                  "untrusted profile text).")
    working_dir: str | None = Field(None, description="Its working folder (META_DATA_CAPTURE).")
    nsys_command: str | None = Field(None, description="The `nsys profile` command line that recorded a report "
                                                       "(its session record; untrusted profile text).")


def recorded_argv(meta: list[tuple[str, str]]) -> list[str] | None:
    """The launched program's argv from the metadata rows (PROCESS_0:COMMAND, then ARGUMENT_0, ARGUMENT_1, ...)."""
    cmd = [v for k, v in meta if k == "PROCESS_0:COMMAND" and v]
    if not cmd:
        return None
    args = sorted((int(m.group(1)), v or "") for k, v in meta if (m := _ARGUMENT.match(k)))
    return [cmd[0], *(v for _, v in args)]


def recorded_command(meta: list[tuple[str, str]]) -> str | None:
    """The launched program's command line, quoted as a shell would need it."""
    argv = recorded_argv(meta)
    return shlex.join(argv) if argv else None


def install_dir_version(install_dir: str | None) -> str | None:
    """The nsys version an install folder's path names (its last one), or None."""
    found = _INSTALL_VERSION.findall(install_dir or "")
    return found[-1] if found else None


def target_install_dir(sqlite_path: Path) -> str | None:
    """TARGET_INFO_SYSTEM_ENV's TargetInstallDir: the capture machine's nsys target folder (read from the export;
    the cache does not copy that table)."""
    import sqlite3

    try:
        with closing(connect_readonly(sqlite_path)) as con:
            row = con.execute("SELECT value FROM TARGET_INFO_SYSTEM_ENV WHERE name = 'TargetInstallDir' "
                              "AND value <> '' LIMIT 1").fetchone()
    except sqlite3.Error:
        return None
    return str(row[0]) if row else None


def recording(profile) -> Recording:
    """The profile's Recording (module docstring), computed once per opened profile."""
    if "recording" in profile.memo:
        return profile.memo["recording"]
    meta = profile.metadata_items()
    rep = profile.path if profile.path.suffix in REPORT_SUFFIXES else None
    # an export dashcam made of a report keeps the report's version in its exports/ record
    recorded = report_version(rep) if rep else read_export_record(profile.sqlite_path.parent).get("recorded_with")
    source = "report" if recorded else None
    if recorded is None:
        recorded = install_dir_version(target_install_dir(profile.sqlite_path))
        source = "install_dir" if recorded else None
    out = Recording(recorded_with=recorded, recorded_with_from=source, exported_with=profile.nsys_version,
                    command=recorded_command(meta),
                    working_dir=next((v for k, v in meta if k == "PROCESS_0:WORKING_DIR" and v), None),
                    nsys_command=report_nsys_command(rep) if rep else None)
    profile.memo["recording"] = out
    return out


def cuda_processes(profile) -> list[ProcessName]:
    """The processes that made CUDA API calls, by pid, with their names (the processes view)."""
    rows = profile.rows("SELECT a.pid, any_value(pr.name), any_value(pr.recorded_name) "
                        "FROM (SELECT DISTINCT pid FROM api_calls WHERE pid IS NOT NULL) a "
                        "LEFT JOIN processes pr ON pr.pid = a.pid GROUP BY 1 ORDER BY 1")
    return [ProcessName(pid=int(pid), name=name, recorded_name=raw if raw != name else None)
            for pid, name, raw in rows]


def versions_line(r: Recording) -> str:
    """'recorded with nsys 2020.3.2.6 (report), exported with nsys 2024.2.3.38' for info and overview."""
    where = {"report": "the report", "install_dir": "its install folder"}.get(r.recorded_with_from or "", "")
    rec = f"recorded with nsys {r.recorded_with} ({where})" if r.recorded_with else "recording nsys unknown"
    return f"{rec}, exported with nsys {r.exported_with or 'unknown'}"
