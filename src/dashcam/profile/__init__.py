"""The loader: an export file -> its Parquet cache -> normalized DuckDB views -> ``Profile``.

Read in this order: ``source`` (checks the file, exports a .nsys-rep), ``schema`` (what is read and
the DuckDB settings), ``cache`` (copies the event tables into Parquet once), ``views`` (one model over
every schema version), ``derived`` (the tables computed with the cache: kernel <-> launch call,
``gap_causes``, ``nvtx_kernels``) and ``profile`` (the ``Profile`` the tools query).
This layer imports nothing above it (the tools, reports, agent and CLI).
"""
from dashcam.profile.profile import GpuInfo, Profile

__all__ = ["GpuInfo", "Profile"]
