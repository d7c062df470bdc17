"""Planted programs for what fills a GPU's time: unified-memory migrations tied to the kernel that paid for them,
and tails and gaps named by what fills most of them (tests/test_fillers.py asserts the figures).

Every figure in a docstring is known by construction; times are ns, "X ms" from the profile start.
"""
from __future__ import annotations

from pathlib import Path

from dashcam.testing.builder import ExportBuilder

US = 1_000
MS = 1_000_000
MB = 1_000_000
A100 = "NVIDIA A100-SXM4-80GB"
H100 = "NVIDIA H100 80GB HBM3"


def _program(pid: int, exe: str, gpu: str, sms: int) -> ExportBuilder:
    """A one-GPU capture (2024 layout) of process ``exe`` (pid ``pid``)."""
    b = ExportBuilder("2024")
    b.gpu(0, gpu, sms)
    b.process(pid, exe)
    return b


def um_one_kernel(path: str | Path) -> Path:
    """The only kernel pays for 536 MB of page faults: 113 ms where resident data would take well under 1 ms.

    Process `./um_add` (pid 8100), A100. `add(int, float *, float *)` launched by a call [0.9, 0.91] ms runs
    [1, 114] ms (113 ms, 4096 blocks). While it runs the driver migrates the managed pages it faults on: 536 HtoD
    migrations of 1 MB (copyKind 11, cause page_fault), 200 us each back to back from 1.5 ms ([1.5, 108.7] ms:
    107.2 ms, 536 MB), each behind one GPU page-fault record [t, t + 50 us] of 4 faults (2144 faults). Window
    [1, 114] ms = 113 ms, kernel busy 100 %: no gap holds a migration. The kernel's time overlapping migrations:
    107.2 ms = 94.867 % of its 113 ms; that is the saving (with resident data those migrations would not
    happen), 94.9 % of the window: high.
    """
    pid = 8100
    b = _program(pid, "./um_add", A100, 108)
    b.launch(0, 900 * US, 910 * US, 1 * MS, 114 * MS, name="add(int, float *, float *)", pid=pid,
             grid=(4096, 1, 1))
    for j in range(536):
        t = 1_500 * US + j * 200 * US
        b.memcpy(0, t, t + 200 * US, 1 * MB, "UM_HtoD", pid=pid, cause=2)
        b.gpu_fault(0, t, t + 50 * US, 0x7E0000000000 + j * 0x1000, faults=4, pid=pid)
    return b.write(path)


def um_before_next_kernel(path: str | Path) -> Path:
    """Migrations under kernel A, with kernel B already queued behind it: A paid for them, not B.

    Process `./um_gather` (pid 8200), A100. 5 iterations of 25 ms from 1 ms (s = 1 + 25 i ms): `gather_kernel`
    [s, s + 20] ms launched [s - 0.1, s - 0.09] ms, `scatter_kernel` [s + 20, s + 22] ms launched right after
    it ([s - 0.08, s - 0.07] ms: queued 20.07 ms behind A); during A, 15 HtoD migrations of 2 MB, 1 ms each,
    [s + 2, s + 17] ms (page faults). Window [1, 123] ms = 122 ms; kernels 110 ms; 4 gaps of 3 ms (12 ms idle,
    no migration in them). Per kernel: `gather_kernel` 5 launches, 100 ms, 75 ms of it overlapping migrations
    (75 %, 150 MB); `scatter_kernel` none: its wait for the launch is under A, when no migration is its own.
    """
    pid = 8200
    b = _program(pid, "./um_gather", A100, 108)
    for i in range(5):
        s = 1 * MS + i * 25 * MS
        b.launch(0, s - 100 * US, s - 90 * US, s, s + 20 * MS, name="gather_kernel(const int *, float *)", pid=pid,
                 grid=(2048, 1, 1))
        b.launch(0, s - 80 * US, s - 70 * US, s + 20 * MS, s + 22 * MS, name="scatter_kernel(const int *, float *)",
                 pid=pid, grid=(2048, 1, 1))
        for j in range(15):
            t = s + 2 * MS + j * MS
            b.memcpy(0, t, t + MS, 2 * MB, "UM_HtoD", pid=pid, cause=2)
    return b.write(path)


def um_sparse_tail(path: str | Path) -> Path:
    """A 605 ms tail that migrations cover 2 % of: not "filled by migrations".

    Process `./um_post` (pid 8300), H100. 20 `step_kernel` of 5 ms back to back from 1 ms ([1, 101] ms, launched
    20 us ahead of each). The host then reads the results on managed memory: 11 DtoH migrations of 1.1 ms back
    to back at the end, [693.9, 706] ms (12.1 ms, 11 x 2 MB, cause page_fault). Window [1, 706] ms = 705 ms;
    kernel busy 100 ms; idle 605 ms, all of it the tail [101, 706] ms (`unknown`: no kernel after it), 12.1 ms of
    it migrations = 2 %; the rest of the tail nothing on the GPU (no host trace).
    """
    pid = 8300
    b = _program(pid, "./um_post", H100, 132)
    for i in range(20):
        k = 1 * MS + i * 5 * MS
        b.launch(0, k - 30 * US, k - 20 * US, k, k + 5 * MS, name="step_kernel(float *, int)", pid=pid,
                 grid=(2048, 1, 1))
    for j in range(11):
        t = 693_900 * US + j * 1_100 * US
        b.memcpy(0, t, t + 1_100 * US, 2 * MB, "UM_DtoH", pid=pid, cause=2)
    return b.write(path)


FORMAT = [("format_rows(Table const&)", "/opt/sim/bin/sim"), ("main", "/opt/sim/bin/sim")]


def pwrite_tail(path: str | Path) -> Path:
    """An 89 ms tail that is 70.6 ms of `pwrite64`: the program writing its output at teardown.

    Process `./sim` (pid 8400, one thread `sim`, on its CPU the whole capture: one context switch in at 0).
    20 `sim_step_kernel` of 2 ms back to back from 1 ms ([1, 41] ms), launched at 0.5 ms + 10 us x i (5 us
    calls). Then the tail [41, 130] ms = 89 ms, on the launching thread: three synchronous DtoH copies of the
    results (`cudaMemcpy`, pageable; the call spans the copy) [41, 45.6], [83.1, 87.9], [125.4, 130] ms (14 ms:
    its own copies), between them formatting (`format_rows`, running: [45.6, 47.8] and [87.9, 90.1] ms, 4.4 ms,
    one CPU sample in each: 2 samples) and `pwrite64` [47.8, 83.1] and [90.1, 125.4] ms (70.6 ms, 79.326 % of the
    tail). Window [1, 130] ms = 129 ms; kernel busy 40 ms; idle 89 ms = 68.992 %, all of it the tail.
    """
    pid = 8400
    b = _program(pid, "./sim", H100, 132)
    b.thread(pid, pid, "sim")
    b.sched(0, True, pid=pid)
    for i in range(20):
        c = 500 * US + i * 10 * US
        k = 1 * MS + i * 2 * MS
        b.launch(0, c, c + 5 * US, k, k + 2 * MS, name="sim_step_kernel(double *, int)", pid=pid, grid=(4096, 1, 1))
    t = 41 * MS
    for copy, fmt, write in ((4_600, 2_200, 35_300), (4_800, 2_200, 35_300), (4_600, 0, 0)):
        c = b.api("cudaMemcpy", t, t + copy * US, pid=pid)
        b.memcpy(0, t, t + copy * US, 200 * MB, "DtoH", pinned=False, pid=pid, corr=c)
        t += copy * US
        if fmt:
            b.sample(t + 1_100 * US, FORMAT, pid=pid)
            t += fmt * US
            b.osrt("pwrite64", t, t + write * US, pid=pid)
            t += write * US
    return b.write(path)


def camera_paced(path: str | Path) -> Path:
    """A 25 fps camera paces the loop: the launching thread sleeps until each frame, every 40 ms.

    Process `./detect` (pid 8500) on a 6-core machine (TARGET_INFO_SYSTEM_ENV CpuCores 6). Thread `capture`
    (tid 8500): 25 frames, s = 1 + 40 k ms: `ioctl` on the camera [s, s + 0.2] ms (dequeues the frame),
    preprocessing [s + 0.2, s + 3.2] ms (running), `detect_kernel` launched [s + 3.2, s + 3.21] ms runs
    [s + 3.3, s + 8.3] ms, `cudaStreamSynchronize` [s + 3.21, s + 8.31] ms, then the thread is switched off its
    CPU from s + 8.4 ms to the next frame (s + 40 ms: it sleeps until the camera has one). Threads `encoder`
    (tid 8501) and `uploader` (tid 8502) run the whole capture (one context switch in at 0 each): 2 busy threads
    on 6 cores, no OpenMP or BLAS thread (the capture thread is on a CPU 8.4 ms of every 40: not busy). Window
    [4.3, 969.3] ms = 965 ms; kernels 125 ms; 24 gaps of 35 ms (840 ms idle), each with cpu_work 34.89 ms =
    descheduled 31.6 ms + ioctl 0.2 ms + running 3.09 ms (cpu_work 837.36 ms, descheduled 758.4 ms); the 24
    ioctl calls in the window come every 40 ms (the first frame's, at 1 ms, is before it).
    """
    pid = 8500
    b = _program(pid, "./detect", "NVIDIA RTX A2000", 26)
    b.thread(pid, pid, "capture")
    b.system_env.append(("CpuCores", "6"))
    b.sched(0, True, pid=pid)
    for cpu, (tid, worker) in enumerate(((8501, "encoder"), (8502, "uploader")), start=1):
        b.thread(pid, tid, worker)
        b.sched(0, True, pid=pid, tid=tid, cpu=cpu)
    for k in range(25):
        s = 1 * MS + k * 40 * MS
        b.osrt("ioctl", s, s + 200 * US, pid=pid)
        if k:
            b.sched(s, True, pid=pid)
        b.launch(0, s + 3_200 * US, s + 3_210 * US, s + 3_300 * US, s + 8_300 * US,
                 name="detect_kernel(const uchar4 *, float *)", pid=pid, grid=(512, 1, 1))
        b.api("cudaStreamSynchronize", s + 3_210 * US, s + 8_310 * US, pid=pid)
        b.sched(s + 8_400 * US, False, pid=pid)
    return b.write(path)


def oversubscribed(path: str | Path, cores: int = 4) -> Path:
    """The launching thread loses its core to busy workers: 6 busy threads on a 4-core machine.

    Process `./render` (pid 8600, CpuCores 4). Thread `render` (tid 8600): 20 steps of 5 ms from 1 ms (s = 1 +
    5 i ms), each a 2 ms `shade_kernel` [s + 3, s + 5] ms launched [s + 2.9, s + 2.905] ms; the thread is switched
    off its CPU [s + 0.2, s + 2.8] ms of each step (no OS runtime call: it waits for a core). Threads `worker-1`
    to `worker-6` (tids 8601-8606) are on a CPU the whole capture: 6 busy threads on 4 cores. Window [4, 101] ms
    = 97 ms; 19 gaps of 3 ms (57 ms idle), each with cpu_work 2.9 ms = descheduled 2.6 ms + running 0.3 ms.
    With ``cores=16`` (descheduled_spare_cores) the same program has 10 cores to spare: no sign of competing.
    """
    pid = 8600
    b = _program(pid, "./render", H100, 132)
    b.thread(pid, pid, "render")
    b.system_env.append(("CpuCores", str(cores)))
    b.sched(0, True, pid=pid)
    for w in range(1, 7):
        b.thread(pid, pid + w, f"worker-{w}")
        b.sched(0, True, pid=pid, tid=pid + w, cpu=w % 4)
    for i in range(20):
        s = 1 * MS + i * 5 * MS
        b.sched(s + 200 * US, False, pid=pid)
        b.sched(s + 2_800 * US, True, pid=pid)
        b.launch(0, s + 2_900 * US, s + 2_905 * US, s + 3 * MS, s + 5 * MS, name="shade_kernel(float4 *, int)",
                 pid=pid, grid=(4096, 1, 1))
    return b.write(path)


def descheduled_spare_cores(path: str | Path) -> Path:
    """``oversubscribed`` on a 16-core machine (CpuCores 16): cores to spare, so no sign of competing for them.

    The launching thread is off its CPU 2.6 ms of each 3 ms gap (19 gaps: cpu_work 55.1 ms, descheduled 49.4 ms),
    with 6 busy threads and 10 cores to spare, and it makes no steady device call: nothing says why it sleeps.
    """
    return oversubscribed(path, cores=16)


FILLERS = {
    "um_one_kernel": um_one_kernel,
    "um_before_next_kernel": um_before_next_kernel,
    "um_sparse_tail": um_sparse_tail,
    "pwrite_tail": pwrite_tail,
    "camera_paced": camera_paced,
    "oversubscribed": oversubscribed,
    "descheduled_spare_cores": descheduled_spare_cores,
}
# Those whose captures hold the CPU side (OS runtime calls, context switches, CPU samples)
WITH_HOST_DATA = frozenset({"pwrite_tail", "camera_paced", "oversubscribed",
                            "descheduled_spare_cores"})
