"""How many workers digest a fleet when ``--workers`` is not given: the work decides (issue 29).

Starting a LocalCluster costs about 3 s of wall time on a quiet 2-core machine and 3.8 s of CPU (a scheduler
and one worker process per core, each importing Dask, DuckDB, pyarrow and dashcam before its first report),
more on a loaded one; two workers save half the digests' time at best. So the reports are digested in this
process unless their estimated digest time is at least ``DASK_MIN_WORK_S``, and then on one worker per core
(at most one per report). A digest's CPU time is estimated from the report's size: ``DIGEST_FIXED_S`` a report
(opening it, the tools' queries) plus ``DIGEST_PER_MB_S`` per MB (the cache build). Measured on the 2-core VM
(docs/fleet.md#workers-chosen-by-the-work): 0.4-0.9 s for each real 0.06-2.7 MB export (median 0.6), 2.0-2.3 s
for the 120 MB rank of bench/bench_fleet.py.

On a loaded 2-core machine, 6 reports of 120 MB (13 s estimated) took 112 s on 2 workers against 88 s in this
process: where the cores are busy with other work, a second worker gains little and the cluster's CPU is
paid in full. So the threshold sits at about twice that work, below the 16-rank bench (16 x 120 MB: 35 s,
1.65-1.79x faster on 2 workers). In reports of one size, Dask starts from 44 reports of 4 MB (the size of
the real ones), 20 of 50 MB, 12 of 120 MB; a real job of 3-9 reports of 4 MB (2-5 s) runs in this process.
"""
from __future__ import annotations

import os
from pathlib import Path

DIGEST_FIXED_S = 0.5  # CPU seconds of a digest whatever the size (a 57 KB export: 0.4 s)
DIGEST_PER_MB_S = 0.014  # CPU seconds per MB of the report: (2.2 - 0.5) s over 120.7 MB
DASK_MIN_WORK_S = 24.0  # 6 x 120 MB (13 s) ran 1.28x slower on 2 workers on a loaded machine; 16 x 120 MB is 35 s


def default_workers() -> int:
    return os.cpu_count() or 1


def estimated_digest_s(size_bytes: int) -> float:
    """The CPU seconds one report of ``size_bytes`` is expected to take to digest, cold."""
    return DIGEST_FIXED_S + DIGEST_PER_MB_S * size_bytes / 1e6


def estimated_work_s(sizes: list[int]) -> float:
    """The CPU seconds reports of these sizes (bytes) are expected to take to digest, cold, one after another."""
    return DIGEST_FIXED_S * len(sizes) + DIGEST_PER_MB_S * sum(sizes) / 1e6


def workers_for(sizes: list[int], cores: int | None = None) -> int:
    """The workers for reports of these sizes (bytes): 1 (in this process, no Dask) below DASK_MIN_WORK_S of
    estimated digest time, on one core, or for one report; else one per core, at most one per report."""
    cores = default_workers() if cores is None else cores
    if len(sizes) < 2 or cores < 2 or estimated_work_s(sizes) < DASK_MIN_WORK_S:
        return 1
    return min(cores, len(sizes))


def report_sizes(paths: list[Path]) -> list[int]:
    """Each report's size in bytes (0 where it cannot be read: the digest reports why)."""
    out = []
    for p in paths:
        try:
            out.append(p.stat().st_size)
        except OSError:
            out.append(0)
    return out
