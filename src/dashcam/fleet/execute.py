"""The map step's execution: in-process, on a LocalCluster, or on an existing Dask cluster (futures API).

- No ``workers`` and no scheduler: as many as the work gains from (``workers.workers_for``: 1 for few or
  small reports, else one per core).
- ``workers == 1`` and no scheduler: the reports are digested one after another in this process; Dask is
  not started (not even imported).
- Otherwise, with a scheduler (``--scheduler ADDRESS``, ``--scheduler-file F``, else DASK_SCHEDULER_ADDRESS):
  join that cluster; without one: a LocalCluster of ``workers`` one-thread worker processes (at most one per
  report), no dashboard.
- One task per report (``digest``), the largest reports first (``biggest_first``), retried once when it
  raises; a worker that dies while digesting is retried once on another worker (the LocalCluster's
  ``allowed-failures`` is 1; an existing cluster's scheduler applies its own setting), then the report is
  reported as failed. Only digests come back.
- Before mapping, every worker must import dashcam (``WorkersLackDashcam`` names those that cannot); an
  address that does not answer within CONNECT_TIMEOUT_S is ``SchedulerUnreachable``.
- A progress bar on stderr (one step per report; what it is doing while the cluster starts) when stderr is a
  terminal (``progress.ReportBar``).
"""
from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable
from pathlib import Path

from dashcam.errors import BadParameter, SchedulerUnreachable, WorkersLackDashcam
from dashcam.fleet.digest import Digest, digest
from dashcam.fleet.progress import ReportBar
from dashcam.fleet.workers import report_sizes, workers_for

# The map step's processes hand freed memory back at once: DuckDB's allocator (its own jemalloc) keeps freed
# pages for seconds by default, and glibc keeps one arena per thread the cache build ran. On a 120 MB rank a
# digest's peak fell from 315-333 MB to 269-281 MB in one process (three reports in a row), its CPU time the
# same within the noise. Arrow's C++ default pool (mimalloc in the wheels; the Parquet writer and reader use
# it whatever pyarrow.set_memory_pool says) keeps a 1 GiB arena whose freed pages stay resident: with the
# system allocator instead a digest peaked 20-25 MB lower (245 against 266 MB, one process), its CPU time the
# same or lower. The LocalCluster's workers start with all three; in this process (--workers 1) those a
# library reads when it loads are set if it has not loaded yet. An existing cluster's workers are started
# by the user (docs/fleet.md says how).
LEAN_MEMORY_ENV = {"MALLOC_ARENA_MAX": "1", "DUCKDB_JE_MALLOC_CONF": "dirty_decay_ms:0,muzzy_decay_ms:0",
                   "ARROW_DEFAULT_MEMORY_POOL": "system"}
_READ_AT_LOAD = {"DUCKDB_JE_MALLOC_CONF": "duckdb", "ARROW_DEFAULT_MEMORY_POOL": "pyarrow"}  # variable: module
CONNECT_TIMEOUT_S = 10  # an address that does not answer in this time is unreachable
WORKER_WAIT_S = 60  # an existing cluster must show at least one worker within this time
SCHEDULER_ENV = "DASK_SCHEDULER_ADDRESS"


def map_reports(paths: list[Path], workers: int | None = None, scheduler: str | None = None,
                scheduler_file: str | None = None, progress: bool | None = None,
                on_done: Callable[[Path, Digest], None] | None = None) -> list[Digest]:
    """The digests of ``paths`` in their order; see the module docstring. ``on_done`` is called on the client
    for each digest as it arrives (the store saves it)."""
    if workers is not None and workers < 1:
        raise BadParameter(f"--workers {workers}: at least 1")
    scheduler = scheduler or (None if scheduler_file else os.environ.get(SCHEDULER_ENV) or None)
    if workers is None and not scheduler and not scheduler_file:
        workers = workers_for(report_sizes(paths))
    bar = ReportBar(len(paths), progress)
    out: dict[int, Digest] = {}

    def done(i: int, d: Digest) -> None:
        out[i] = d
        if on_done:
            on_done(paths[i], d)
        bar.advance(paths[i].name)

    try:
        if not paths:
            return []
        if workers == 1 and not scheduler and not scheduler_file:
            for var, module in _READ_AT_LOAD.items():
                if module not in sys.modules:
                    os.environ.setdefault(var, LEAN_MEMORY_ENV[var])
            bar.status(f"digesting {len(paths)} reports in this process")
            for i in biggest_first(paths):
                done(i, digest(str(paths[i])))
        else:
            _on_dask(paths, workers, scheduler, scheduler_file, done, bar.status)
    finally:
        bar.close()
    return [out[i] for i in range(len(paths))]


def biggest_first(paths: list[Path]) -> list[int]:
    """The order reports are digested in: the largest file first (a digest's cost grows with the report), so
    no big report is left to run alone at the end while the other workers idle; ties (and missing files) in
    the given order."""
    def size(i: int) -> int:
        try:
            return paths[i].stat().st_size
        except OSError:
            return 0

    return sorted(range(len(paths)), key=lambda i: -size(i))


def _on_dask(paths: list[Path], workers: int | None, scheduler: str | None, scheduler_file: str | None,
             done: Callable[[int, Digest], None], say: Callable[[str], None] = lambda _: None) -> None:
    import dask
    from distributed import Client, LocalCluster, as_completed

    cluster = None
    # allowed-failures 1: a task whose worker dies is retried once; worker-saturation 1.0: a one-thread worker
    # holds one task at a time, so a death takes only the report being digested with it (the LocalCluster's
    # scheduler; an existing cluster's keeps its own settings). The LocalCluster's workers start with
    # LEAN_MEMORY_ENV and without Dask's MALLOC_TRIM_THRESHOLD_: setting it turns off glibc's sliding mmap
    # threshold, so every array over 128 KB is mapped and faulted in afresh; a digest took 6.0 s of CPU on
    # such a worker against 4.8 s without it (4 reports on 2 workers, twice), for about 20 MB more at the peak.
    # Their statistical profiler is off: it samples the running task's stack every 10 ms for the dashboard
    # (none is started) and keeps the samples: a worker digesting 120 MB ranks peaked 8-15 MB lower without it.
    environ = {**{k: v for k, v in dask.config.get("distributed.nanny.pre-spawn-environ", {}).items()
                  if k != "MALLOC_TRIM_THRESHOLD_"}, **LEAN_MEMORY_ENV}
    with dask.config.set({"distributed.scheduler.allowed-failures": 1,
                          "distributed.scheduler.worker-saturation": 1.0, "distributed.admin.tick.limit": "1h",
                          "distributed.worker.profile.enabled": False,
                          "distributed.nanny.pre-spawn-environ": environ}):
        if scheduler or scheduler_file:
            say(f"connecting to the Dask scheduler at {scheduler_file or scheduler}…")
            client = _connect(Client, scheduler, scheduler_file)
        else:
            n = min(workers or 1, len(paths))
            say(f"starting {n} Dask worker{'s' if n != 1 else ''}…")
            # No dashboard; the scheduler's HTTP endpoints (health, metrics), which it serves even without
            # one, on a free loopback port rather than 8787: a user's own Dask dashboard may hold 8787
            cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True, dashboard_address=None,
                                   scheduler_kwargs={"dashboard": False, "dashboard_address": "127.0.0.1:0"},
                                   silence_logs=logging.ERROR)
            client = Client(cluster)
        try:
            say("checking the Dask workers…")
            _check_workers(client, scheduler or scheduler_file)
            k = len(client.nthreads())
            say(f"digesting {len(paths)} reports on {k} worker{'s' if k != 1 else ''}")
            futures = {client.submit(digest, str(paths[i].resolve()), key=f"dashcam-digest-{i}-{paths[i].name}",
                                     pure=False, retries=1, priority=len(paths) - n): i
                       for n, i in enumerate(biggest_first(paths))}
            for f in as_completed(futures):
                i = futures[f]
                try:
                    d = f.result()
                except Exception as e:
                    d = _failed(paths[i], e)
                done(i, d)
        finally:
            client.close()
            if cluster is not None:
                cluster.close()


def _connect(Client, scheduler: str | None, scheduler_file: str | None):
    where = scheduler_file or scheduler
    if scheduler_file and not Path(scheduler_file).is_file():
        raise SchedulerUnreachable(f"--scheduler-file {scheduler_file}: no such file")
    try:
        if scheduler_file:
            return Client(scheduler_file=scheduler_file, timeout=CONNECT_TIMEOUT_S)
        return Client(scheduler, timeout=CONNECT_TIMEOUT_S)
    except (OSError, TimeoutError, ValueError) as e:
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise SchedulerUnreachable(f"the Dask scheduler at {where} does not answer ({first})") from None


def _check_workers(client, where: str | None) -> None:
    """Every worker imports dashcam; an existing cluster has at least one worker."""
    try:
        client.wait_for_workers(1, timeout=WORKER_WAIT_S)
    except TimeoutError:
        raise SchedulerUnreachable(f"the Dask scheduler at {where} has no workers (waited {WORKER_WAIT_S} s)") \
            from None
    def probe() -> bool:  # nested, so cloudpickle sends it by value: it must run where dashcam does not import
        import importlib.util

        try:
            return importlib.util.find_spec("dashcam") is not None
        except (ImportError, ValueError):
            return False

    versions = client.run(probe)
    missing = sorted(addr for addr, ok in versions.items() if not ok)
    if missing:
        raise WorkersLackDashcam(f"{len(missing)} of {len(versions)} Dask workers cannot import dashcam "
                                 f"({', '.join(missing[:3])}{', ...' if len(missing) > 3 else ''}): install it "
                                 "in the workers' environment (pip install dashcam) and start them again")


def _failed(path: Path, e: BaseException) -> Digest:
    died = type(e).__name__ == "KilledWorker"
    why = ("the worker digesting it died twice (out of memory, or killed)" if died
           else f"digesting it failed twice ({type(e).__name__}: {(str(e).strip().splitlines() or [''])[0]})")
    return Digest(path=str(path), error=f"{path}: {why}", error_kind="worker_died" if died else "unreadable")
