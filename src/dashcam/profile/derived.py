"""Joins and unions computed once when the cache is built, so tool queries stay fast.

- ``launches``: every kernel with the API call that launched it (same pid and
  correlationId; the earliest call when a capture repeats a pair), sorted by device,
  start and launch-call end. Columns: device_id, stream_id, start, end, pid,
  correlation_id, short_name_id, graph_node_id (NULL unless launched from a CUDA graph), api_tid,
  api_global_tid, api_start, api_end, api_name_id (the api_* columns are NULL when the capture has
  no launch call for the kernel; names via the ``api_names`` table).
- ``gap_table``: every gap of every device in the whole-profile window with its causes, and
  ``gap_api``: per gap, the launching thread's time in each CUDA API during its CPU-side part
  (gap_causes.py); their sums per device over that window in the manifest (``gap_totals``).
- in the manifest, ``program_facts``: names and counts that say what program made the profile
  (program_facts.py; the workload tool).
- ``gap_nvtx``: the cpu_work of each device's gaps with the most cpu_work, by NVTX range (gap_nvtx.py;
  built during extraction, in cache/build.py).
- ``nvtx_kernels``: per NVTX label group, the kernels launched inside its ranges over the
  whole-profile window, every device (nvtx_kernels.py; built during extraction, in cache/build.py).
"""
from __future__ import annotations

from pathlib import Path

from dashcam.measure.definitions import Window
from dashcam.measure.intervals import arrow_batches
from dashcam.profile.gap_causes import build_gap_table
from dashcam.profile.gap_nvtx import TABLE as GAP_NVTX
from dashcam.profile.nvtx_kernels import TABLE
from dashcam.profile.program_facts import host_facts, startup_calls

# Per device with any kernel, memcpy or memset: (first start, last end); the window is their hull.
DEVICE_SPANS = 'SELECT device_id, min(start), max("end") FROM gpu_ops WHERE device_id IS NOT NULL GROUP BY 1'


LAUNCH_BATCH = 32_768  # rows per Arrow batch from DuckDB, and per row group of launches.parquet
# launches columns with few distinct values: dictionary-encoded, they take a byte or two per row
FEW_VALUES = ["device_id", "stream_id", "pid", "short_name_id", "api_tid", "api_global_tid", "api_name_id"]


def build_launches(con, out: Path, per_device: bool = False) -> int:
    """Write ``launches.parquet`` (the module docstring). ``per_device``: joined and sorted one device after
    another, so the join and the sort hold one device's kernels, not all of them: on a 120 MB export of two
    devices the step peaked 33 MB above its start instead of 56. It costs time where there are many devices
    (each device's join hashes every API call: 1.1 s against 0.9 s on the 8-GPU benchmark), so only the
    one-thread builds of the fleet's digests, where memory comes first, join per device."""
    import pyarrow.parquet as pq

    target = out / "launches.parquet"
    n_kernels = int(con.execute("SELECT count(*) FROM kernel_times").fetchall()[0][0])
    # one query over every device, or one per device (a NULL device last, as ORDER BY puts it)
    parts = ["WHERE k.device_id " + ("IS NULL" if d is None else f"= {int(d)}") for (d,) in
             con.execute("SELECT DISTINCT device_id FROM kernel_times ORDER BY 1").fetchall()] if per_device else []
    # (pid, correlationId) is unique per launch call in every export seen, so the plain join
    # is enough; should a capture repeat a pair, the join would duplicate kernels: then dedupe.
    for calls in ("api_calls", "(SELECT pid, correlation_id, arg_min(tid, start) AS tid, min(start) AS start, "
                               "arg_min(\"end\", start) AS \"end\", arg_min(name_id, start) AS name_id, "
                               "arg_min(global_tid, start) AS global_tid "
                               "FROM api_calls GROUP BY pid, correlation_id)"):
        n = 0
        writer = None
        try:
            for on in parts or [""]:
                rel = con.sql(f"""
                    SELECT k.device_id, k.stream_id, k.start, k."end", k.pid, k.correlation_id, k.short_name_id,
                           k.graph_node_id, c.tid AS api_tid, c.global_tid AS api_global_tid, c.start AS api_start,
                           c."end" AS api_end, c.name_id AS api_name_id
                    FROM kernel_times k LEFT JOIN {calls} c ON c.pid = k.pid AND c.correlation_id = k.correlation_id
                    {on} ORDER BY k.device_id, k.start, c."end" NULLS LAST""")
                reader = arrow_batches(rel, LAUNCH_BATCH)
                if writer is None:
                    # Streamed out of DuckDB and written by pyarrow: on the benchmark's 1.6 M kernels that takes
                    # 0.1 s where DuckDB's COPY took 0.38 s. Row groups of LAUNCH_BATCH rows keep per-device
                    # and time filters selective.
                    writer = pq.ParquetWriter(target, reader.schema, compression="none", use_dictionary=FEW_VALUES,
                                              write_page_checksum=True)
                for batch in reader:
                    writer.write_batch(batch)
                    n += batch.num_rows
                del reader, rel
            if n == 0:
                writer.write_table(writer.schema.empty_table())
        finally:
            if writer is not None:
                writer.close()
        if n == n_kernels:
            return n
    return n


def build_derived(con, out: Path, examined=None, per_device: bool = False) -> dict[str, int]:
    """Write the derived Parquet files into ``out`` using the views on ``con``.

    Returns their row counts, the whole-profile window (definitions.py; None without GPU activity)
    and each device's span (first start, last end). ``examined``: a gap_nvtx.GapNvtx (build_gap_table);
    ``per_device``: build_launches joins one device at a time.
    """

    n = build_launches(con, out, per_device)
    _view(con, "launches", out / "launches.parquet")
    spans = {str(int(d)): [int(a), int(b)] for d, a, b in con.execute(DEVICE_SPANS).fetchall()}
    window = [min(a for a, _ in spans.values()), max(b for _, b in spans.values())] if spans else None
    totals: dict = {}
    n_gaps = build_gap_table(con, out, window, sorted(int(d) for d in spans), examined, totals)
    facts = {**host_facts(con), "nvtx": [], "nvtx_domain": []}  # NVTX facts: counted as its chunks come in
    if window is not None:
        facts["startup"] = startup_calls(con, Window(window[0], window[1], window[0]))
    return {"launches": n, "gaps": n_gaps, "window": window, "device_spans": spans, "gap_totals": totals,
            "program_facts": facts}


def _view(con, name: str, path: Path) -> None:
    esc = str(path).replace("'", "''")
    con.execute(f"CREATE OR REPLACE VIEW {name} AS SELECT * FROM read_parquet('{esc}')")


def create_derived_views(con, cache: Path) -> None:

    _view(con, "launches", cache / "launches.parquet")
    _view(con, "gap_table", cache / "gaps.parquet")
    _view(con, "gap_api", cache / "gap_api.parquet")
    if (cache / GAP_NVTX).exists():  # written when the profile has NVTX ranges and gaps with cpu_work
        _view(con, "gap_nvtx", cache / GAP_NVTX)
    if (cache / TABLE).exists():  # written when the profile has NVTX ranges and kernel launches
        _view(con, "nvtx_kernels", cache / TABLE)
