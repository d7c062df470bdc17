#!/usr/bin/env python3
"""Fleet benchmark (not a test: it prints numbers; docs/fleet.md quotes them).

    python bench/bench_fleet.py [--ranks 16 32] [--w1-ranks 16] [--loop-ranks 16] [--warm 1024] [--out bench/out/fleet]

- A rank file of about 120 MB: ../shared/tools/scale_profile.py nsys-ai__mfu_2gpu_before.sqlite rank.sqlite
  --ranks 1 --repeat 50 (2 GPUs, 200,500 kernels), copied to N ranks (report_0000.sqlite ...); rank 5 is
  slowed by SQL (its kernel timeline stretched 1.3x, its NCCL kernels then 0.6x as long: it arrives last).
- Cold: every run starts without dashcam caches (the reports' Parquet caches and the fleet's digests).
- `dashcam fleet DIR --workers 1` (in-process) and `--workers 2` (a LocalCluster of 2 one-thread workers):
  wall time, the client's peak RSS and the largest worker's peak RSS (all processes polled every 0.1 s) and
  peak USS (its own memory, without the shared library pages; polled every 0.5 s); the speed-up of 2
  workers over 1.
- A shell loop of `dashcam summary` over the same reports, cold (the baseline a user has today).
- Every run: wall time and CPU time (the command and the processes it waited for: user + sys), and the CPU
  time the rest of the machine used meanwhile (``others_cpu_s``, from /proc/stat), since other sessions may
  share the machine: a timing is fair when that is near 0.
- Warm at 1,024 ranks: 1,024 small stand-in report files whose digests are stored (synthetic: the real rank's
  digest with its rank and compute varied, one straggler); `dashcam fleet` and `dashcam ask` on them, wall
  time, and whether any report was mapped (a warm run must start no cluster).
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
SHARED = REPO.parent / "shared"
TEMPLATE = SHARED / "profiles" / "nsys-ai__mfu_2gpu_before.sqlite"
SLOW_RANK = 5


def make_rank(out: Path) -> Path:
    rank = out / "rank.sqlite"
    if not rank.exists():
        subprocess.run([sys.executable, str(SHARED / "tools" / "scale_profile.py"), str(TEMPLATE), str(rank),
                        "--ranks", "1", "--repeat", "50"], check=True)
    return rank


def make_fleet(rank: Path, folder: Path, n: int) -> Path:
    if folder.exists() and len(list(folder.glob("report_*.sqlite"))) == n:
        return folder
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    for r in range(n):
        dst = folder / f"report_{r:04d}.sqlite"
        shutil.copyfile(rank, dst)
        if r == SLOW_RANK:
            con = sqlite3.connect(dst)
            nccl = "SELECT id FROM StringIds WHERE lower(value) LIKE '%nccl%'"
            t0 = con.execute("SELECT min(start) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
            # its GPU timeline 1.3x as long (every kernel later and longer: compute per step +30 %), its
            # NCCL kernels then cut to 0.6x of what they were (it arrives last and waits least)
            con.execute(f"UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET start = {t0} + (start - {t0}) * 13 / 10, "
                        f"end = {t0} + (end - {t0}) * 13 / 10")
            con.execute(f"UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET end = start + (end - start) * 6 / 13 "
                        f"WHERE shortName IN ({nccl})")
            con.commit()
            con.close()
    return folder


def cold(folder: Path) -> None:
    for c in folder.glob("*.dashcam"):
        shutil.rmtree(c)
    shutil.rmtree(folder / ".dashcam-fleet", ignore_errors=True)


def machine_busy_s() -> float:
    """CPU seconds the whole machine has been busy (all cores; /proc/stat: user, nice, system, irq, softirq,
    steal); 0 where there is no /proc/stat."""
    try:
        f = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except (OSError, ValueError):
        return 0.0
    return (f[0] + f[1] + f[2] + f[5] + f[6] + f[7]) / os.sysconf("SC_CLK_TCK")


def run(cmd: list[str], env: dict | None = None) -> dict:
    """Wall time, exit code, the command's peak RSS and the largest descendant's (polled)."""
    t0, c0, m0 = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN), machine_busy_s()
    s0 = resource.getrusage(resource.RUSAGE_SELF)
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ, **(env or {})})
    peaks: dict[int, int] = {}
    uss: dict[int, int] = {}  # the memory only that process holds (no shared library pages): every 5th poll
    stop = threading.Event()

    def poll() -> None:
        root = psutil.Process(p.pid)
        n = 0
        while not stop.is_set():
            try:
                for q in [root, *root.children(recursive=True)]:
                    try:
                        peaks[q.pid] = max(peaks.get(q.pid, 0), q.memory_info().rss)
                        if n % 5 == 0:
                            uss[q.pid] = max(uss.get(q.pid, 0), q.memory_full_info().uss)
                    except psutil.Error:
                        pass
            except psutil.Error:
                pass
            n += 1
            time.sleep(0.1)

    th = threading.Thread(target=poll, daemon=True)
    th.start()
    out, err = p.communicate()
    stop.set()
    th.join()
    client = peaks.pop(p.pid, 0)
    uss.pop(p.pid, None)
    c1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (c1.ru_utime + c1.ru_stime) - (c0.ru_utime + c0.ru_stime)  # the command and all it waited for
    s1 = resource.getrusage(resource.RUSAGE_SELF)  # this script's own (the polling)
    others = machine_busy_s() - m0 - cpu - (s1.ru_utime + s1.ru_stime - s0.ru_utime - s0.ru_stime)
    return {"seconds": round(time.perf_counter() - t0, 2), "cpu_s": round(cpu, 2), "rc": p.returncode,
            "others_cpu_s": round(max(others, 0.0), 1),
            "client_rss_mb": round(client / 1e6),
            "worker_rss_mb": round(max(peaks.values(), default=0) / 1e6),
            "worker_uss_mb": round(max(uss.values(), default=0) / 1e6), "stdout": out.decode(),
            "stderr": err.decode()[-2000:]}


def fleet(folder: Path, workers: int) -> dict:
    cold(folder)
    load = os.getloadavg()[0]
    r = run(["dashcam", "fleet", str(folder), "--workers", str(workers), "--format", "json"])
    r["load_avg_before"], r["load_avg_after"] = round(load, 1), round(os.getloadavg()[0], 1)
    if r["rc"] == 0:
        rep = json.loads(r["stdout"])
        r["verdict"] = rep["verdict"]
        r["straggler"] = [f["ranks"] for f in rep["findings"] if f["kind"] == "straggler"]
    r.pop("stdout")
    digests = [json.loads(f.read_text()) for f in (folder / ".dashcam-fleet").glob("*.json")]
    if digests:  # each report's own map step, on its worker: wall time and the CPU time it used
        r["per_report_wall_s"] = round(sum(d["seconds"] for d in digests) / len(digests), 2)
        r["per_report_cpu_s"] = round(sum(d.get("cpu_seconds", 0) for d in digests) / len(digests), 2)
        r["digest_kb_max"] = round(max(len(json.dumps(d)) for d in digests) / 1e3, 1)
    return r


def summary_loop(folder: Path) -> dict:
    cold(folder)
    load = os.getloadavg()[0]
    files = " ".join(f"'{p}'" for p in sorted(folder.glob("report_*.sqlite")))
    r = run(["bash", "-c", f"for f in {files}; do dashcam summary \"$f\" > /dev/null || exit 1; done"])
    r["load_avg_before"], r["load_avg_after"] = round(load, 1), round(os.getloadavg()[0], 1)
    r.pop("stdout")
    return r


def warm(out: Path, rank: Path, n: int) -> dict:
    """1,024 stored digests (synthetic, from the real one) behind small stand-in files."""
    from dashcam.fleet import store
    from dashcam.fleet.digest import DIGEST_VERSION, Digest, digest

    folder = out / f"warm{n}"
    real = out / "digest.json"
    if not real.exists():
        real.write_text(digest(str(rank)).model_dump_json())
    base = Digest.model_validate_json(real.read_bytes())
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    for r in range(n):
        f = folder / f"report_{r:04d}.sqlite"
        f.write_bytes(b"stand-in for a stored digest %d" % r)
        st = f.stat()
        d = base.model_copy(deep=True, update={"version": DIGEST_VERSION, "path": str(f), "size": st.st_size,
                                                   "mtime_ns": st.st_mtime_ns, "fingerprint": f"synthetic-{r}",
                                                   "host": f"node{r // 8}",
                                                   # the real rank's collectives are SendRecv (point-to-point, never
                                                   # compared on the clock): named AllReduce here, so the arrival
                                                   # comparison runs at 1,024 ranks
                                                   "collective_kinds": ["AllReduce"]})
        scale = 1.3 if r == 77 else 1.0 + (r % 7) * 0.005
        for dev in d.devices:
            dev.steps.compute_ns = [round(x * scale) for x in dev.steps.compute_ns]
            c = dev.coll  # on one clock: rank 77 arrives 2 ms late at each collective, the others within 30 us
            late, jitter = 2_000_000, (r % 7) * 5_000  # and wait for it: every rank's collective ends together
            c.start_ns = [s + (late if r == 77 else jitter) for s in c.start_ns]
            c.dur_ns = [d if r == 77 else d + late - jitter for d in c.dur_ns]
            if r == 77:
                dev.steps.collective_ns = [round(x * 0.5) for x in dev.steps.collective_ns]
        store.save(f, d)
    res = {"ranks": n, "digest_bytes": len(base.model_dump_json()),
           "digest_bytes_stored": (folder / ".dashcam-fleet" / "report_0000.sqlite.json").stat().st_size}
    r = run(["dashcam", "fleet", str(folder), "--format", "json"])
    rep = json.loads(r["stdout"]) if r["rc"] == 0 else {}
    res["fleet"] = {"seconds": r["seconds"], "rc": r["rc"], "mapped": rep.get("mapped"), "verdict": rep.get("verdict"),
                    "client_rss_mb": r["client_rss_mb"], "stderr": r["stderr"][-300:]}
    r = run(["dashcam", "fleet", str(folder)])
    res["fleet_text"] = {"seconds": r["seconds"], "lines": len(r["stdout"].splitlines())}
    r = run(["dashcam", "ask", "which rank is the straggler?", str(folder)])
    res["ask"] = {"seconds": r["seconds"], "rc": r["rc"], "answer": r["stdout"][:300]}
    return res


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ranks", type=int, nargs="*", default=[16, 32], help="cold runs (none: only the warm run)")
    ap.add_argument("--w1-ranks", type=int, nargs="*", default=[16])
    ap.add_argument("--loop-ranks", type=int, nargs="*", default=[16])
    ap.add_argument("--warm", type=int, default=1024)
    ap.add_argument("--out", default=str(HERE / "out" / "fleet"))
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    rank = make_rank(out)
    res: dict = {"report_mb": round(rank.stat().st_size / 1e6, 1), "cores": os.cpu_count(), "runs": {}}
    print(json.dumps({"report_mb": res["report_mb"]}), flush=True)
    for n in a.ranks:
        folder = make_fleet(rank, out / f"fleet{n}", n)
        runs = {}
        if n in a.w1_ranks:
            runs["workers1"] = fleet(folder, 1)
            print(n, "workers1", json.dumps(runs["workers1"])[:400], flush=True)
        runs["workers2"] = fleet(folder, 2)
        print(n, "workers2", json.dumps(runs["workers2"])[:400], flush=True)
        if n in a.loop_ranks:
            runs["summary_loop"] = summary_loop(folder)
            print(n, "summary_loop", json.dumps(runs["summary_loop"])[:300], flush=True)
        if "workers1" in runs:
            runs["speedup_2_over_1"] = round(runs["workers1"]["seconds"] / runs["workers2"]["seconds"], 2)
        runs["per_report_s_workers2"] = round(runs["workers2"]["seconds"] / n, 2)
        res["runs"][n] = runs
        (out / "results.json").write_text(json.dumps(res, indent=2))
    if a.warm:
        res["warm"] = warm(out, rank, a.warm)
        print("warm", json.dumps(res["warm"])[:600], flush=True)
    (out / "results.json").write_text(json.dumps(res, indent=2))
    print(json.dumps(res, indent=2))


if __name__ == "__main__":
    main()
