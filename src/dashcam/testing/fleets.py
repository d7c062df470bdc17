"""Planted fleets: folders of reports (one per rank, or one per node) whose cross-rank answers are known
by construction (tests/test_fleet.py checks them; docs/fleet.md shows the output).

Every rank runs STEPS steps of STEP = 10 ms in lock-step: from the step start T_i it computes (the three
COMPUTE kernels back to back: 3 + 2 + 1 = 6 ms on a normal GPU), then enters the step's all-reduce
(`ncclDevKernel_AllReduce_Sum_f32_RING_LL`, stream 20) when its compute ends; the all-reduce ends on every
rank TRANSFER = 2 ms after the last rank arrived, and the next step starts BETWEEN = 200 us later. Each
kernel is launched 50 us before it starts by a 10 us call; each step is an NVTX range `train_step <i>`.
With the slowest rank arriving at 7.8 ms, a step is 7.8 + 2 + 0.2 = 10 ms, the window 59.8 ms.

``straggler_fleet(folder)`` — report_0..report_7.sqlite (rank in the name; RANK and SLURM_PROCID in the
capture too), hosts node-a (ranks 0-3, GPUs 0-3) and node-b (ranks 4-7, GPUs 0-3), H100s, and
report_8.sqlite, a truncated copy (unreadable):
- rank 3, the straggler: every compute kernel 1.3x as long (7.8 ms per step): it arrives last in all 6 steps,
  its all-reduce lasts 2 ms, the others' median 3.8 ms; compute +30 % over the median 6 ms.
- rank 5, a slow GPU for one kernel: `flash_fwd_kernel` 3 ms instead of 2 (1.5x); compute 7 ms, all-reduce
  2.8 ms; never last.
- rank 6, idle on cpu_work: after its first kernel the thread runs Python for 1.5 ms (NVTX `collate_batch`,
  no CUDA call) before launching the next; compute 6 ms, arrival 7.5 ms, all-reduce 2.3 ms; idle 10 ms =
  16.722 % of the window (median 1 ms = 1.672 %).
- the others: compute 6 ms, all-reduce 3.8 ms, idle 1 ms (the 200 us between steps).

``node_fleet(folder)`` — node_0.sqlite (host node-a) and node_1.sqlite (host node-b), each one report of
8 GPUs (processes 2000 + GPU, rank 8 * node + GPU); every GPU of node-b computes 1.3x as long: node-b is
the node straggler.

``uniform_fleet(folder, ranks=4)`` — report_0..report_<ranks-1>.sqlite, every rank the same: uniform.

``node_report(path, slow_gpu=5)`` — one report of an 8-GPU node (host node-a) whose GPU ``slow_gpu``
computes 1.3x as long: the straggler among the report's GPUs.
"""
from __future__ import annotations

from pathlib import Path

from dashcam.testing.builder import ExportBuilder

US = 1_000
MS = 1_000_000
T0 = 1 * MS
STEPS = 6
STEP = 10 * MS
TRANSFER = 2 * MS
BETWEEN = 200 * US
IDLE_GAP = 1500 * US
H100 = "NVIDIA H100 80GB HBM3"
ALLREDUCE = "ncclDevKernel_AllReduce_Sum_f32_RING_LL"
COMPUTE = [("sm90_gemm_bf16_kernel", 3 * MS), ("flash_fwd_kernel", 2 * MS), ("layer_norm_fwd_kernel", 1 * MS)]
SLOW = 1.3  # the straggler's factor on every compute kernel
SLOW_KERNEL = ("flash_fwd_kernel", 1.5)  # the slow GPU's one kernel


class Rank:
    """How one GPU behaves: a factor per compute kernel and an idle gap after its first kernel."""

    def __init__(self, factor: float = 1.0, kernel_factor: tuple[str, float] | None = None,
                 idle_gap: int = 0) -> None:
        self.factor, self.kernel_factor, self.idle_gap = factor, kernel_factor, idle_gap

    def kernels(self) -> list[tuple[str, int]]:
        out = []
        for name, dur in COMPUTE:
            f = self.factor * (self.kernel_factor[1] if self.kernel_factor and self.kernel_factor[0] == name else 1)
            out.append((name, round(dur * f)))
        return out

    def arrival(self) -> int:
        return sum(d for _, d in self.kernels()) + self.idle_gap


def _launch(b: ExportBuilder, device: int, pid: int, start: int, end: int, name: str, stream: int = 7) -> None:
    b.launch(device, start - 50 * US, start - 40 * US, start, end, name=name, pid=pid, stream=stream)


def _plant(b: ExportBuilder, device: int, pid: int, rank: Rank, last_arrival: int) -> None:
    """One GPU's STEPS steps (see the module docstring); ``last_arrival``: the slowest GPU's, from the step start."""
    for i in range(STEPS):
        t = T0 + i * STEP
        b.nvtx(f"train_step {i}", t, t + STEP, pid=pid)
        k = t
        for j, (name, dur) in enumerate(rank.kernels()):
            _launch(b, device, pid, k, k + dur, name)
            k += dur
            if j == 0 and rank.idle_gap:
                b.nvtx("collate_batch", k, k + rank.idle_gap - 60 * US, pid=pid)
                k += rank.idle_gap
        _launch(b, device, pid, k, t + last_arrival + TRANSFER, ALLREDUCE, stream=20)


def _report(path: Path, host: str, gpus: dict[int, tuple[int, int, Rank]], last_arrival: int) -> Path:
    """A report of ``gpus``: device -> (pid, rank, behaviour)."""
    b = ExportBuilder("2024")
    first_rank = min(r for _, r, _ in gpus.values())
    b.host(host, {"SLURM_PROCID": str(first_rank), "SLURM_JOB_ID": "4242"}, {"RANK": str(first_rank)})
    for device, (pid, rank_id, rank) in sorted(gpus.items()):
        b.gpu(device, H100, 132)
        b.process(pid, f"python train.py --rank {rank_id}")
        _plant(b, device, pid, rank, last_arrival)
    return b.write(path)


def straggler_fleet(folder: str | Path) -> Path:
    """8 ranks and a truncated report (see the module docstring); returns the folder."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    ranks = {r: Rank() for r in range(8)}
    ranks[3] = Rank(factor=SLOW)
    ranks[5] = Rank(kernel_factor=SLOW_KERNEL)
    ranks[6] = Rank(idle_gap=IDLE_GAP)
    last = max(r.arrival() for r in ranks.values())
    for r, rank in ranks.items():
        _report(folder / f"report_{r}.sqlite", "node-a" if r < 4 else "node-b", {r % 4: (1000 + r, r, rank)}, last)
    data = (folder / "report_0.sqlite").read_bytes()
    (folder / "report_8.sqlite").write_bytes(data[:4096])  # truncated: its header promises more pages
    return folder


def node_fleet(folder: str | Path) -> Path:
    """Two 8-GPU node reports, node-b slower on every GPU (see the module docstring); returns the folder."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    last = Rank(factor=SLOW).arrival()
    for node, host in enumerate(("node-a", "node-b")):
        rank = Rank(factor=SLOW if node == 1 else 1.0)
        _report(folder / f"node_{node}.sqlite", host, {d: (2000 + d, 8 * node + d, rank) for d in range(8)}, last)
    return folder


def node_report(path: str | Path, slow_gpu: int = 5) -> Path:
    """One 8-GPU node report whose GPU ``slow_gpu`` computes 1.3x as long (see the module docstring)."""
    last = Rank(factor=SLOW).arrival()
    gpus = {d: (2000 + d, d, Rank(factor=SLOW if d == slow_gpu else 1.0)) for d in range(8)}
    return _report(Path(path), "node-a", gpus, last)


def uniform_fleet(folder: str | Path, ranks: int = 4) -> Path:
    """``ranks`` equal ranks on one host (see the module docstring); returns the folder."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    last = Rank().arrival()
    for r in range(ranks):
        _report(folder / f"report_{r}.sqlite", "node-a", {r: (1000 + r, r, Rank())}, last)
    return folder


# -- on one clock: pure-NCCL fleets (no compute kernel), nsys's `%h_%p` file names -------------------------------
# Every rank: a first CUDA call at T0, an `ncclCommInitRank` NVTX range from T0 for COMM_INIT, then COLLECTIVES
# all-reduces. An on-time rank arrives at the first FIRST_AT after T0 and at each later one GAP after the
# previous one ended (host time: no kernel runs in between); a late one LATE later each time, and at the first
# LATE_INIT later when its communicator init ends LATE_INIT late. Every all-reduce ends TRANSFER after the last
# arrival, on every rank. A late rank also runs one kernel of NOISE_US[k] microseconds 100 us before each
# arrival: the rounding-sized "compute" that must never be called a cause. Times are planted in UTC; each
# host's report records its own session start (HOST_START) and one host writes UTC timestamps
# (--ts-normalize=true); one host's recorded start is CLOCK_ERROR off (its clock runs ahead), so the
# collectives' ends spread by CLOCK_ERROR on the common clock.
SESSION = 1_764_460_800_000_000_000
COLLECTIVES = 8
COMM_INIT = 2 * MS
FIRST_AT = 10 * MS
GAP = 3 * MS
LATE = 12 * MS
LATE_INIT = 20 * MS
NOISE_US = (3, 9, 17)
NOISE_KERNEL = "elementwise_kernel"
CLOCK_ERROR = 200 * US
PID0 = 998_630  # rank r's process id: PID0 + 7 r (the number in its file name)
DOMAIN_CREATE, MPI_DOMAIN = 75, 1  # NVTX_EVENTS eventType of a domain's creation; the MPI domain's id


def pid_of(rank: int) -> int:
    return PID0 + 7 * rank


def nccl_arrivals(late: dict[int, tuple[int, int]], ranks: int,
                  on_time: dict[int, set[int]] | None = None) -> dict[int, list[int]]:
    """Rank -> its arrival at each collective, ns after SESSION + T0 (the module's rules; ``late``: rank ->
    (extra host time per collective, extra communicator-init time); ``on_time``: rank -> the collectives at
    which it has no extra host time)."""
    out: dict[int, list[int]] = {r: [] for r in range(ranks)}
    end = None
    for i in range(COLLECTIVES):
        for r in range(ranks):
            x, li = late.get(r, (0, 0))
            x = 0 if i in (on_time or {}).get(r, ()) else x
            out[r].append(FIRST_AT + (li or x) if i == 0 else end + GAP + x)
        end = max(out[r][i] for r in range(ranks)) + TRANSFER
    return out


def _nccl_report(path: Path, host: str, rank: int, device: int, arrivals: list[int], ends: list[int],
                 start_utc: int, normalized: bool | None, noise_us: int, init_end: int, env: bool,
                 error: int = 0, host_calls: int = 0, start_at: int = 0, stream: int = 20) -> Path:
    """One rank's pure-NCCL report: planted times are ns after SESSION + T0 (UTC), written on its own clock,
    which runs ``error`` ns ahead (its recorded session start, or its UTC timestamps, that much late);
    ``host_calls``: before each later collective's launch, that long in `MPI_Wait` (an NVTX range of the MPI
    domain, as --trace=mpi records it) inside an OS runtime `poll` call; ``start_at``: its first CUDA call and
    its communicator init begin that much after T0 (a process that started late); ``stream``: its all-reduces'
    stream (its communicator's)."""
    b = ExportBuilder("2024")
    b.session_clock(start_utc + (0 if normalized else error), normalized)
    shift = SESSION + T0 - (0 if normalized else start_utc) + (error if normalized else 0)  # planted + shift =
    # the export's timestamp
    pid = pid_of(rank)
    b.host(host, {"SLURM_PROCID": str(rank), "PMI_RANK": str(rank), "SLURM_JOB_ID": "4242"} if env else None)
    b.gpu(device, H100, 132)
    b.process(pid, "python train.py")
    b.api("cudaSetDevice", shift + start_at, shift + start_at + 10 * US, pid=pid)
    b.nvtx("ncclCommInitRank", shift + start_at, shift + init_end, pid=pid)
    if host_calls:
        b.nvtx("MPI", shift, None, pid=pid, event_type=DOMAIN_CREATE, domain=MPI_DOMAIN)  # --trace=mpi's domain
    for i, (a, e) in enumerate(zip(arrivals, ends)):
        if host_calls and i:
            b.nvtx("MPI_Wait", shift + a - 60 * US - host_calls, shift + a - 60 * US, pid=pid, domain=MPI_DOMAIN)
            b.osrt("poll", shift + a - 60 * US - host_calls, shift + a - 60 * US, pid=pid)
        if noise_us:
            k = a - 100 * US - noise_us * US
            _launch(b, device, pid, shift + k, shift + k + noise_us * US, NOISE_KERNEL)
        _launch(b, device, pid, shift + a, shift + e, ALLREDUCE, stream=stream)
    return b.write(path)


def nccl_fleet(folder: str | Path, hosts: dict[str, list[int]], late: dict[int, tuple[int, int]],
               clocks: dict[str, tuple[int, bool | None]] | None = None, env: bool = True,
               name: str = "pid", clock_error: dict[str, int] | None = None, host_calls: bool = False,
               late_start: bool = False, on_time: dict[int, set[int]] | None = None) -> Path:
    """Pure-NCCL reports of ``hosts`` (host -> its ranks; the GPUs 0.. in that order), ``late`` as in
    nccl_arrivals, ``clocks`` host -> (session start - SESSION, normalized) (default: SESSION, None), ``clock_error``
    host -> how far its clock runs ahead, ``host_calls``: a late rank's extra host time is in MPI_Wait / poll,
    ``late_start``: a rank whose communicator init ends late started that much late, ``on_time`` as in
    nccl_arrivals;
    files ``<host>_<pid>.sqlite`` (name="pid") or ``report_<rank>.sqlite`` (name="rank")."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    ranks = sum(len(v) for v in hosts.values())
    arr = nccl_arrivals(late, ranks, on_time)
    ends = [max(arr[r][i] for r in range(ranks)) + TRANSFER for i in range(COLLECTIVES)]
    for host, members in hosts.items():
        off, normalized = (clocks or {}).get(host, (0, None))
        for device, r in enumerate(members):
            x, li = late.get(r, (0, 0))
            noise = NOISE_US[device % len(NOISE_US)] if x else 0
            fname = f"{host}_{pid_of(r)}.sqlite" if name == "pid" else f"report_{r}.sqlite"
            _nccl_report(folder / fname, host, r, device, arr[r], ends, SESSION + off, normalized, noise,
                         COMM_INIT + li, env, (clock_error or {}).get(host, 0), x if host_calls else 0,
                         li if late_start else 0)
    return folder


def late_node_fleet(folder: str | Path) -> Path:
    """node-a (ranks 0-2), node-b (3-5, late: LATE per collective, communicator init LATE_INIT late), node-c
    (6-8): node-b's recorded session start is 5 ms after SESSION, node-c's timestamps are UTC (normalized) and its
    recorded start CLOCK_ERROR early (its clock ahead); env SLURM_PROCID / PMI_RANK; files `<host>_<pid>`."""
    hosts = {"node-a": [0, 1, 2], "node-b": [3, 4, 5], "node-c": [6, 7, 8]}
    return nccl_fleet(folder, hosts, dict.fromkeys(hosts["node-b"], (LATE, LATE_INIT)),
                      clocks={"node-b": (5 * MS, False), "node-c": (0, True)}, clock_error={"node-c": CLOCK_ERROR})


def late_rank_fleet(folder: str | Path, env: bool = True) -> Path:
    """node-a (ranks 0-2) and node-b (3-5); rank 4 spends LATE more host time before every collective (its first
    included; its communicator init on time). ``env``: the capture records SLURM_PROCID / PMI_RANK and the files
    are `<host>_<pid>`; without, the files are `report_<rank>` and record no rank."""
    hosts = {"node-a": [0, 1, 2], "node-b": [3, 4, 5]}
    return nccl_fleet(folder, hosts, {4: (LATE, 0)}, env=env, name="pid" if env else "rank")


SUBGROUPS = {20: [0, 1, 2], 24: [3, 4, 5]}  # stream -> the ranks of its communicator
SUBGROUP_SHIFT = 1500 * US  # the second communicator's schedule starts this much after the first's
SUBGROUP_LATE = 4  # the late rank of the second communicator


def subgroup_arrivals() -> dict[int, tuple[int, list[int], list[int]]]:
    """Rank -> (its stream, its arrivals, its collectives' ends), ns after SESSION + T0: each communicator of
    SUBGROUPS runs COLLECTIVES all-reduces by the rules of nccl_arrivals, the second SUBGROUP_SHIFT later, and in
    it rank SUBGROUP_LATE LATE late at every one."""
    out = {}
    for i, (stream, members) in enumerate(SUBGROUPS.items()):
        late = {members.index(SUBGROUP_LATE): (LATE, 0)} if SUBGROUP_LATE in members else {}
        arr = nccl_arrivals(late, len(members))
        shift = i * SUBGROUP_SHIFT
        ends = [max(arr[k][j] for k in arr) + TRANSFER + shift for j in range(COLLECTIVES)]
        for k, r in enumerate(members):
            out[r] = (stream, [a + shift for a in arr[k]], ends)
    return out


def subgroup_fleet(folder: str | Path) -> Path:
    """Six pure-NCCL reports on node-a (GPU = rank, files `<host>_<pid>`, SLURM_PROCID recorded): two
    communicators of three ranks each on streams of their own, running all-reduces at different times
    (subgroup_arrivals); matched by order across all six ranks, their collectives would be mixed."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    for r, (stream, arr, ends) in subgroup_arrivals().items():
        _nccl_report(folder / f"node-a_{pid_of(r)}.sqlite", "node-a", r, r, arr, ends, SESSION, None, 0, COMM_INIT,
                     True, stream=stream)
    return folder


# The planted fleets by name: an eval case's ``profile: {fleet: NAME}`` builds one into a folder (agent/eval).
FLEETS = {"straggler": straggler_fleet, "uniform": uniform_fleet, "late_node": late_node_fleet,
          "late_rank": late_rank_fleet, "subgroups": subgroup_fleet}
