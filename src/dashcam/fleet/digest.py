"""The map step: one report -> a small ``Digest`` (a few KB; never raw events), computed on a worker.

``digest(path)`` opens the report (building its Parquet cache like any dashcam command),
runs the tools once through a ``ToolRuns`` memo and the single-profile findings engine
(``findings.diagnose``), and keeps per device: busy / idle and the gap causes (gpu_gaps), NCCL and exposed
time (nccl), the steps split into compute, communication and idle with each step's main collective
(iterations with ``per_device``; the first MAX_STEPS), the top kernels with their mean durations
(top_kernels by device), copies (memcpy) and synchronize time (sync); who the report is and its clock (host,
rank variables, GPU UUID and bus, session start and timestamp convention: identity.py) and per device its
collective table (each NCCL kernel's start, duration, launch lag and what came before it: collectives.py),
from which the client lines the ranks up on one clock (arrivals.py). A report that cannot be read
becomes a Digest with ``error`` set, naming why; it never raises a dashcam error.

Each call runs single-threaded (DASHCAM_THREADS=1 for DuckDB and the cache build, one pyarrow thread), so
N worker processes use N cores.
"""
from __future__ import annotations

import contextlib
import os
import sqlite3
import time
from pathlib import Path
from typing import ClassVar

from pydantic import BaseModel, Field

from dashcam.errors import DashcamError
from dashcam.fleet.collectives import Collectives, collectives_of, host_marks
from dashcam.fleet.identity import Clock, read_clock, read_identity
from dashcam.fleet.packed import Packed

DIGEST_VERSION = 5  # bump when Digest or how it is computed changes: cached digests are then recomputed
MAX_STEPS = 200  # steps kept per report: enough to vote on, and a digest stays well under 100 KB
TOP_KERNELS = 10  # kernels kept per device
HOST_DATA = ("os_runtime", "cpu_sampling", "mpi")  # what would show the host side of a late arrival


class KernelStat(BaseModel):
    name: str = Field(description="Short kernel name.")
    count: int
    total_ns: int
    avg_ns: float = Field(description="Mean duration.")


class StepSplit(Packed):
    """One device's steps as parallel lists (index i is step i): compact, and every figure a time; one string
    in JSON (packed.py)."""

    FIELDS: ClassVar[tuple[str, ...]] = ("compute_ns", "comm_ns", "exposed_comm_ns", "idle_ns", "collective_ns",
                                         "collective")
    compute_ns: list[int] = Field(default_factory=list)
    comm_ns: list[int] = Field(default_factory=list)
    exposed_comm_ns: list[int] = Field(default_factory=list)
    idle_ns: list[int] = Field(default_factory=list)
    collective_ns: list[int] = Field(default_factory=list, description="The step's main collective's time.")
    collective: list[int] = Field(default_factory=list, description="Index into Digest.collectives; -1: none.")


STEP_FIELDS = StepSplit.FIELDS


class DeviceDigest(BaseModel):
    device_id: int
    gpu_name: str | None = None
    kernel_count: int = 0
    kernel_busy_pct: float = 0.0
    idle_ns: int = 0
    idle_pct: float = 0.0
    dominant_cause: str | None = None
    causes: dict[str, int] = Field(default_factory=dict)
    nccl_ns: int = 0
    exposed_comm_ns: int = 0
    exposed_comm_pct: float = 0.0
    memory_busy_ns: int = Field(0, description="Union of copies and memsets (memcpy tool).")
    copy_bytes: int = 0
    top: list[KernelStat] = Field(default_factory=list)
    steps: StepSplit = Field(default_factory=StepSplit)
    uuid: str | None = Field(None, description="The GPU's UUID (TARGET_INFO_GPU), where recorded.")
    bus: str | None = Field(None, description="Its PCI bus location, where recorded.")
    coll: Collectives = Field(default_factory=Collectives, description="Its NCCL kernels (collectives.py).")


class FindingDigest(BaseModel):
    kind: str
    severity: str
    gpus: list[int]
    title: str


class Digest(BaseModel):
    """What the fleet keeps of one report."""

    version: int = DIGEST_VERSION
    path: str
    size: int = Field(0, description="The report's size in bytes when it was read (the store's quick check).")
    mtime_ns: int = 0
    fingerprint: str | None = Field(None, description="profile.source.file_fingerprint of the report.")
    rank: int | None = Field(None, description="Set by the client: from the file name, the environment or the order.")
    rank_source: str = Field("order", description="name | env:VAR | order")
    env_ranks: dict[str, int] = Field(default_factory=dict, description="The rank variables the capture's "
                                                                        "environment records (identity.py).")
    host: str | None = None
    clock: Clock = Field(default_factory=Clock, description="How its timestamps map to UTC (identity.py).")
    first_call_ns: int = Field(-1, description="Its first CUDA API call's start (export clock; -1: none).")
    comm_init_end_ns: int = Field(-1, description="Its last ncclCommInit* NVTX range's end (-1: not recorded).")
    host_data: list[str] = Field(default_factory=list, description="Host-side data the capture holds "
                                                                   "(coverage kinds: os_runtime, cpu_sampling, mpi).")
    collective_kinds: list[str] = Field(default_factory=list, description="Kinds named by DeviceDigest.coll.")
    error: str | None = Field(None, description="Why the report could not be analysed (then nothing else is set).")
    error_kind: str | None = Field(None, description="unreadable | empty | failed (an internal error) | worker_died")
    nsys_version: str | None = None
    window_ns: int = 0
    verdict: str | None = Field(None, description="The single-profile verdict (findings.diagnose).")
    findings: list[FindingDigest] = Field(default_factory=list)
    step_method: str | None = None
    step_count: int = 0
    steps_kept: int = 0
    step_median_ns: float | None = None
    sync_ns: int = Field(0, description="Host time blocked in synchronize calls, summed over APIs (sync tool).")
    collectives: list[str] = Field(default_factory=list)
    devices: list[DeviceDigest] = Field(default_factory=list)
    seconds: float = Field(0.0, description="Time the map step took on its worker (wall clock).")
    cpu_seconds: float = Field(0.0, description="CPU time of the worker process during the map step (one thread: "
                                                "the work itself, whatever else ran on the machine).")


@contextlib.contextmanager
def single_threaded():
    """DuckDB, the cache build and pyarrow on one thread for the duration; the previous settings after."""
    import pyarrow as pa

    from dashcam.profile.schema import THREADS_ENV

    before, cpus = os.environ.get(THREADS_ENV), pa.cpu_count()
    os.environ[THREADS_ENV] = "1"
    pa.set_cpu_count(1)
    try:
        yield
    finally:
        pa.set_cpu_count(cpus)
        if before is None:
            os.environ.pop(THREADS_ENV, None)
        else:
            os.environ[THREADS_ENV] = before


def digest(path: str | os.PathLike) -> Digest:
    """The Digest of one report; see the module docstring."""
    from dashcam.profile.source import file_fingerprint

    t0, c0 = time.perf_counter(), time.process_time()
    _test_hook(Path(path))
    out = Digest(path=str(path))
    with single_threaded():
        try:
            st = Path(path).stat()
            out.size, out.mtime_ns, out.fingerprint = st.st_size, st.st_mtime_ns, file_fingerprint(Path(path))
            _fill(out, Path(path))
        except Exception as e:  # one report's failure is a finding, the rest is still analysed
            if isinstance(e, DashcamError):
                kind, why = ("empty" if type(e).__name__ == "NoGpuActivity" else "unreadable"), str(e)
            elif isinstance(e, (sqlite3.Error, OSError)):
                kind, why = "unreadable", f"{path}: unreadable ({type(e).__name__}: {e})"
            else:  # a bug, not the report: not stored, so the next run tries again
                first = (str(e).strip().splitlines() or [""])[0]
                kind, why = "failed", f"{path}: internal error ({type(e).__name__}: {first})"
            out = Digest(path=str(path), size=out.size, mtime_ns=out.mtime_ns, fingerprint=out.fingerprint,
                         host=out.host, env_ranks=out.env_ranks, error=why,
                         error_kind=kind)
    out.seconds = round(time.perf_counter() - t0, 3)
    out.cpu_seconds = round(time.process_time() - c0, 3)
    return out


def _test_hook(path: Path) -> None:
    """DASHCAM_TEST_HOOK=fleet-kill:NAME kills the process digesting the report NAME (a worker that dies;
    tests/test_fleet_dask.py), after appending its pid to NAME.attempts beside the report."""
    kind, _, name = os.environ.get("DASHCAM_TEST_HOOK", "").partition(":")
    if kind == "fleet-kill" and path.name == name:
        import signal

        with open(path.parent / (name + ".attempts"), "a") as f:
            f.write(f"{os.getpid()}\n")
        os.kill(os.getpid(), signal.SIGKILL)


def _fill(out: Digest, path: Path) -> None:
    from dashcam.errors import NoGpuActivity
    from dashcam.evidence import ToolRuns
    from dashcam.findings import diagnose
    from dashcam.profile import Profile
    from dashcam.profile.coverage import holds
    from dashcam.profile.source import resolve_profile

    sqlite_path = resolve_profile(path)
    ident = read_identity(sqlite_path)
    out.host, out.env_ranks = ident.host, ident.env_ranks
    p = Profile.open(path, progress=False)
    try:
        out.nsys_version = p.nsys_version
        if not p.devices:
            raise NoGpuActivity(f"{path}: no GPU activity (no kernels, memcpys or memsets)")
        runs = ToolRuns(p)
        d = diagnose(p, runs)
        out.verdict = d.verdict
        out.findings = [FindingDigest(kind=f.kind, severity=f.severity, gpus=f.gpus, title=f.title)
                        for f in d.findings if f.severity != "info"]
        ov, gaps, nccl = runs.get("overview"), runs.get("gpu_gaps"), runs.get("nccl")
        out.window_ns = ov.window_ns
        devs = {x.device_id: DeviceDigest(device_id=x.device_id, kernel_count=x.kernel_count,
                                          kernel_busy_pct=x.kernel_busy_pct) for x in ov.devices}
        for g in p.gpus.values():
            if g.device_id in devs:
                devs[g.device_id].gpu_name = g.name
        for x in gaps.devices:
            dd = devs[x.device_id]
            dd.idle_ns, dd.idle_pct = x.kernel_idle_ns, x.kernel_idle_pct  # the digest's idle is kernel-idle
            dd.dominant_cause, dd.causes = x.dominant_cause, x.causes
        for x in nccl.devices:
            dd = devs[x.device_id]
            dd.nccl_ns, dd.exposed_comm_ns, dd.exposed_comm_pct = x.comm_ns, x.exposed_comm_ns, x.exposed_comm_pct
        mem = runs.maybe("memcpy")
        for x in mem.devices if mem is not None else []:
            if x.device_id in devs:
                devs[x.device_id].memory_busy_ns, devs[x.device_id].copy_bytes = x.copy_busy_ns, x.copy_bytes
        sync = runs.maybe("sync")
        out.sync_ns = sum(c.total_ns for c in sync.calls) if sync is not None else 0
        top = runs.maybe("top_kernels", by_device=True, limit=TOP_KERNELS)
        for k in top.kernels if top is not None else []:
            if k.device_id in devs:
                devs[k.device_id].top.append(KernelStat(name=k.name, count=k.count, total_ns=k.total_ns,
                                                        avg_ns=round(k.avg_ns, 1)))
        it = runs.maybe("iterations", limit=MAX_STEPS, per_device=True)
        if it is not None:
            out.step_method, out.step_count, out.step_median_ns = it.method, it.step_count, it.median_ns
            out.steps_kept = len(it.steps)
            names: dict[str, int] = {}
            for s in it.step_devices:
                split = devs[s.device_id].steps
                split.compute_ns.append(s.compute_ns)
                split.comm_ns.append(s.comm_ns)
                split.exposed_comm_ns.append(s.exposed_comm_ns)
                split.idle_ns.append(s.kernel_idle_ns)
                split.collective_ns.append(s.collective_ns)
                split.collective.append(names.setdefault(s.collective, len(names)) if s.collective else -1)
            out.collectives = list(names)
        ids = {g.device_id: g for g in ident.gpus}
        for dev, coll in collectives_of(p, out.collective_kinds).items():
            if dev in devs:
                devs[dev].coll = coll
        for dd in devs.values():
            if dd.device_id in ids:
                dd.uuid, dd.bus = ids[dd.device_id].uuid, ids[dd.device_id].bus
        first = min((c.start_ns[0] for c in (d.coll for d in devs.values()) if c.start_ns), default=None)
        out.clock = read_clock(sqlite_path, ov.window_start_ns if first is None else first)
        out.first_call_ns, out.comm_init_end_ns = host_marks(p)
        out.host_data = [k for k in HOST_DATA if holds(p, k)]
        out.devices = [devs[k] for k in sorted(devs) if devs[k].kernel_count]
        if not out.devices:
            raise NoGpuActivity(f"{path}: no kernels (copies or memsets only)")
    finally:
        p.con.close()

