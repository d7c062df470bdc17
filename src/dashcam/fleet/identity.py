"""Who a report is: its rank, node, GPUs and clock, as the capture records them (read on the worker).

Rank: the launcher's variables in the recorded environment, in RANK_ENV order: the launched process's
(META_DATA_CAPTURE ``PROCESS_n:ENVIRONMENT_VARIABLE`` rows, ``K="V"``) over nsys's own (TARGET_INFO_SYSTEM_ENV
``DeviceEnvironment``, ``K=V;K=V``: under ``srun nsys profile`` it holds SLURM_PROCID and PMI_RANK). Every
integer one is kept; the client picks, for the whole fleet, the first variable whose values are distinct across
the reports (report.py), so a SLURM_PROCID shared by the ranks of one torchrun node never names a rank.
Node: TARGET_INFO_SYSTEM_ENV ``Hostname``. GPUs: TARGET_INFO_GPU's UUID and PCI bus per CUDA device.

Clock (``read_clock``): the export's timestamps are either relative to the session start (the default) or
UTC epoch ns (``nsys export --ts-normalize=true``: EXPORT_PARAM_TIME_NORMALIZE = true); EXPORT_PARAM_TIME_SHIFT
is added to either. ``Clock.to_utc_ns`` = the export's time - shift + (0 when normalized, else the session's
TARGET_INFO_SESSION_START_TIME.utcEpochNs). Exports without the parameter (before nsys 2023.3) are taken as
normalized when their first kernel starts after EPOCH_FLOOR_NS (no capture is 30 years long), else relative.
"""
from __future__ import annotations

import sqlite3
from pathlib import Path

from pydantic import BaseModel, Field

# The launchers' rank variables, in the order they are tried (docs/definitions.md, "fleet rank"): Slurm, Open MPI,
# MPICH / Intel MPI (PMI), PMIx, MVAPICH2, torchrun's global RANK, and LOCAL_RANK last (unique only on one node).
RANK_ENV = ("SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "MV2_COMM_WORLD_RANK", "RANK",
            "LOCAL_RANK")
# 2001-09-09 in UTC epoch ns: a timestamp above it is an absolute time, not an offset from the session start.
EPOCH_FLOOR_NS = 1_000_000_000_000_000_000


class GpuId(BaseModel):
    device_id: int
    uuid: str | None = None
    bus: str | None = Field(None, description="PCI bus location, e.g. 0000:17:00.0.")


class Clock(BaseModel):
    """How this export's timestamps map to UTC epoch ns."""

    session_start_utc_ns: int | None = Field(None, description="TARGET_INFO_SESSION_START_TIME.utcEpochNs.")
    normalized: bool = Field(False, description="Timestamps are UTC epoch ns already (--ts-normalize=true).")
    shift_ns: int = Field(0, description="EXPORT_PARAM_TIME_SHIFT, added by the export.")
    source: str = Field("none", description="param (EXPORT_PARAM_TIME_NORMALIZE) | magnitude | none")

    @property
    def known(self) -> bool:
        return self.normalized or self.session_start_utc_ns is not None

    @property
    def offset_ns(self) -> int:
        """What to add to an export timestamp for UTC epoch ns (0 when the clock is unknown)."""
        return (0 if self.normalized else (self.session_start_utc_ns or 0)) - self.shift_ns


class Identity(BaseModel):
    host: str | None = None
    env_ranks: dict[str, int] = Field(default_factory=dict, description="RANK_ENV variable -> its integer value.")
    gpus: list[GpuId] = Field(default_factory=list)


def _read(sqlite_path: Path, out, fill):
    """``fill(con, tables, out)`` on the export, read-only; ``out`` as far as it got when SQLite fails."""
    from dashcam.profile.source import connect_readonly

    try:
        con = connect_readonly(sqlite_path)
    except sqlite3.Error:
        return out
    try:
        fill(con, _tables(con), out)
    except sqlite3.Error:
        pass
    finally:
        con.close()
    return out


def read_identity(sqlite_path: Path) -> Identity:
    """The host, rank variables and GPU ids the export records (each absent when not recorded)."""
    return _read(sqlite_path, Identity(), _fill_identity)


def _fill_identity(con, tables: set[str], out: Identity) -> None:
    device_env: dict[str, str] = {}
    process_env: dict[str, str] = {}
    if "TARGET_INFO_SYSTEM_ENV" in tables:
        for name, value in con.execute("SELECT name, value FROM TARGET_INFO_SYSTEM_ENV "
                                       "WHERE name IN ('Hostname', 'DeviceEnvironment')"):
            if name == "Hostname" and value:
                out.host = str(value)
            elif name == "DeviceEnvironment" and value:
                device_env.update(_pairs(str(value).split(";")))
    if "META_DATA_CAPTURE" in tables:
        rows = con.execute("SELECT value FROM META_DATA_CAPTURE WHERE name LIKE '%ENVIRONMENT_VARIABLE'")
        process_env.update(_pairs(str(v) for (v,) in rows if v))
    env = {**device_env, **process_env}  # the launched process's own environment wins
    out.env_ranks = {k: int(env[k].strip()) for k in RANK_ENV if env.get(k, "").strip().isdigit()}
    if "TARGET_INFO_GPU" in tables:
        cols = _columns(con, "TARGET_INFO_GPU")
        dev = "cuDevice" if "cuDevice" in cols else "id"
        uuid = "uuid" if "uuid" in cols else "NULL"
        bus = "busLocation" if "busLocation" in cols else "NULL"
        out.gpus = [GpuId(device_id=int(d), uuid=u or None, bus=b or None)
                    for d, u, b in con.execute(f"SELECT {dev}, {uuid}, {bus} FROM TARGET_INFO_GPU "
                                               f"WHERE {dev} IS NOT NULL ORDER BY {dev}")]


def read_clock(sqlite_path: Path, first_ns: int | None) -> Clock:
    """The export's clock (module docstring); ``first_ns``: its first kernel's start, for old exports."""
    return _read(sqlite_path, Clock(), lambda con, tables, out: _fill_clock(con, tables, out, first_ns))


def _fill_clock(con, tables: set[str], out: Clock, first_ns: int | None) -> None:
    if "TARGET_INFO_SESSION_START_TIME" in tables:
        row = con.execute("SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME LIMIT 1").fetchone()
        if row and row[0] is not None:
            out.session_start_utc_ns = int(row[0])
    params: dict[str, str] = {}
    for t in ("META_DATA_EXPORT", "EXPORT_META_DATA"):
        if t in tables:
            params.update({str(k): str(v) for k, v in con.execute(
                f"SELECT name, value FROM {t} WHERE name IN ('EXPORT_PARAM_TIME_NORMALIZE', "
                "'EXPORT_PARAM_TIME_SHIFT')") if v is not None})
    norm = params.get("EXPORT_PARAM_TIME_NORMALIZE", "").strip().lower()
    if norm in ("true", "false"):
        out.normalized, out.source = norm == "true", "param"
    elif first_ns is not None:
        out.normalized, out.source = first_ns > EPOCH_FLOOR_NS, "magnitude"
    shift = params.get("EXPORT_PARAM_TIME_SHIFT", "0").strip()
    out.shift_ns = int(shift) if shift.lstrip("-").isdigit() else 0


def _tables(con) -> set[str]:
    return {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}


def _columns(con, table: str) -> set[str]:
    return {r[1] for r in con.execute(f"PRAGMA table_info({table})")}


def _pairs(items) -> dict[str, str]:
    out = {}
    for item in items:
        k, sep, v = item.partition("=")
        if sep and k.strip():
            out[k.strip()] = v.strip().strip('"')
    return out
