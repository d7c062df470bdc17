#!/usr/bin/env python3
"""Where a cold cache build spends its time, and the cold first answers against NVIDIA's CLI (issue 29).

    python bench/bench_cold_cache.py [--profile PATH] [--runs 3] [--nsys PATH] [--skip-breakdown]

Not a test: it prints JSON. The profile defaults to bench_speed.py's benchmark export (made with its
recipe when missing). Each run, back to back so that the machine's load is the same for both sides:

- the SQLite pass reading the columns dashcam extracts (bench_speed.sqlite_pass "extracted");
- ``nsys stats --report cuda_gpu_kern_sum``, then a cold ``dashcam tool run top_kernels`` (empty cache);
- ``nsys analyze -r gpu_gaps``, then a cold ``dashcam tool run gpu_gaps``;
- per run the ratios, dashcam over nsys and the cold build over the extracted pass, in wall time and in CPU
  time (user + system: what a loaded machine stretches least); the medians of those.

Then one build in this process (``--skip-breakdown`` leaves it out) with each step timed in the CPU time of
the thread that ran it (time.thread_time: a loaded machine stretches wall time, not CPU time): each raw
table's chunk reads and writes, each derived table, the NVTX steps, with the process' CPU time, wall time,
peak RSS and the cache's footprint per part.
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import bench_speed  # noqa: E402  (the passes, the recipe and the measured runs live there)

NSYS_DEFAULT = HERE.parent.parent / "nsys" / "2024.2" / "nsys"


def nsys_path(given: str | None) -> str | None:
    for cand in (given, os.environ.get("NSYS"), str(NSYS_DEFAULT), shutil.which("nsys")):
        if cand and Path(cand).is_file():
            return cand
    return None


# Runs a command and prints its wall time, its CPU time (user + system, its own children included) and its
# peak RSS: CPU time is what a loaded machine stretches least, so the ratios are given in both.
PROBE = ("import resource, subprocess, sys, time; t = time.perf_counter(); "
         "p = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL); "
         "dt = time.perf_counter() - t; u = resource.getrusage(resource.RUSAGE_CHILDREN); "
         "print(dt, u.ru_utime + u.ru_stime, u.ru_maxrss, p.returncode)")


def measured(args: list[str], env: dict | None = None) -> tuple[float, float, int]:
    """(wall s, CPU s, peak RSS KB) of one command; exits when it fails."""
    p = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True, env=env)
    wall, cpu, rss, code = p.stdout.split()
    if code != "0":
        raise SystemExit(f"{' '.join(args)} failed ({code})")
    return float(wall), float(cpu), int(rss)


def cold(cmd: list[str], tool: str, profile: Path) -> tuple[float, float, int]:
    """``measured`` of ``dashcam tool run TOOL`` on an empty cache, earlier writes flushed."""
    os.sync()
    c = Path(tempfile.mkdtemp(prefix="dashcam-bench-cold-"))
    try:
        return measured([*cmd, "tool", "run", tool, str(profile), "--json"], dict(os.environ, DASHCAM_CACHE_DIR=str(c)))
    finally:
        shutil.rmtree(c, ignore_errors=True)


def side_by_side(profile: Path, runs: int, nsys: str | None) -> dict:
    cmd = bench_speed.dashcam_cmd()
    bench_speed.sqlite_pass(profile, "times")  # the file in the page cache for every side
    rows: list[dict] = []
    for _ in range(runs):
        cpu = time.process_time()
        r: dict = {"extracted_pass_s": bench_speed.sqlite_pass(profile, "extracted")}
        r["extracted_pass_cpu_s"] = time.process_time() - cpu
        steps = [("cold_top_kernels", None), ("cold_gpu_gaps", None)]
        if nsys:
            steps = [("nsys_stats", [nsys, "stats", "--report", "cuda_gpu_kern_sum", "--format", "csv", "--output", "-",
                                     str(profile)]), steps[0],
                     ("nsys_gpu_gaps", [nsys, "analyze", "-r", "gpu_gaps", "--format", "csv", "--output", "-",
                                        str(profile)]), steps[1]]
        for name, args in steps:
            wall, cpu, rss = measured(args) if args else cold(cmd, name.removeprefix("cold_"), profile)
            r[f"{name}_s"], r[f"{name}_cpu_s"], r[f"{name}_kb"] = wall, cpu, rss
        for unit in ("_s", "_cpu_s"):
            r[f"cold_cache_over_extracted{unit}"] = r[f"cold_top_kernels{unit}"] / r[f"extracted_pass{unit}"]
            if nsys:
                r[f"top_kernels_over_nsys_stats{unit}"] = r[f"cold_top_kernels{unit}"] / r[f"nsys_stats{unit}"]
                r[f"gpu_gaps_over_nsys_analyze{unit}"] = r[f"cold_gpu_gaps{unit}"] / r[f"nsys_gpu_gaps{unit}"]
        rows.append(r)
    out: dict = {"runs": [{k: round(v, 3) for k, v in r.items() if not k.endswith("_kb")} for r in rows]}
    for k in rows[0]:
        if not k.endswith("_kb"):
            out[f"median_{k}"] = round(statistics.median(r[k] for r in rows), 3)
    peak = max(max(r["cold_top_kernels_kb"], r["cold_gpu_gaps_kb"]) for r in rows) * 1024
    out["peak_mb"] = round(peak / 2**20, 1)
    out["peak_over_profile"] = round(peak / profile.stat().st_size, 3)
    return out


class _Steps:
    """Thread CPU time and calls per named step, from wrappers put around the build's functions."""

    def __init__(self) -> None:
        self.cpu: dict[str, float] = collections.defaultdict(float)
        self.calls: collections.Counter = collections.Counter()
        self.lock = threading.Lock()

    def wrap(self, owner, name: str, key=None) -> None:
        f = getattr(owner, name)

        def timed_call(*a, **k):
            t = time.thread_time()
            try:
                return f(*a, **k)
            finally:
                step = key(a) if key else name
                with self.lock:
                    self.cpu[step] += time.thread_time() - t
                    self.calls[step] += 1
        setattr(owner, name, timed_call)


def breakdown(profile: Path) -> dict:
    """One cold build here, each step timed (the module docstring)."""
    import pyarrow.parquet as pq

    import dashcam.profile.cache.build as build
    import dashcam.profile.derived as derived
    from dashcam.profile.gap_nvtx import GapNvtx

    s = _Steps()
    s.wrap(build._ChunkReader, "read", key=lambda a: f"read {a[3] or 'other'}")
    s.wrap(pq, "write_table", key=lambda a: f"write {Path(a[1]).name.split('-')[0].removesuffix('.parquet')}")
    for name in ("_derive", "finish", "attribute", "chunk_ranges", "window_axis"):
        s.wrap(build, name, key=lambda a, n=name: {"_derive": "derive (all derived tables)", "finish": "nvtx_kernels",
                                                   "attribute": "nvtx_kernels per chunk"}.get(n, n))
    s.wrap(build._NvtxGroups, "add_column", key=lambda a: "nvtx group ids per chunk")
    s.wrap(build.NvtxFacts, "add_chunk", key=lambda a: "nvtx facts per chunk")
    for name in ("build_launches", "build_gap_table", "host_facts", "startup_calls"):
        s.wrap(derived, name, key=lambda a, n=name: f"derive: {n}")
    s.wrap(GapNvtx, "add_chunk", key=lambda a: "gap_nvtx per chunk")
    s.wrap(GapNvtx, "write", key=lambda a: "gap_nvtx (after the last chunk)")
    from dashcam.profile.profile import Profile

    cache = Path(tempfile.mkdtemp(prefix="dashcam-bench-breakdown-"))
    os.environ["DASHCAM_CACHE_DIR"] = str(cache)
    cpu0, t = time.process_time(), time.perf_counter()
    try:
        Profile.open(profile, progress=False).con.close()
        wall, cpu = time.perf_counter() - t, time.process_time() - cpu0
        out = {"wall_s": round(wall, 2), "process_cpu_s": round(cpu, 2),
               "peak_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
               "steps_cpu_s": {k: [round(v, 3), s.calls[k]] for k, v in sorted(s.cpu.items(), key=lambda kv: -kv[1])}}
        out.update(bench_speed.footprint(cache, profile))
        return out
    finally:
        shutil.rmtree(cache, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--profile", type=Path, help="default: bench_speed.py's export (made when missing)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--nsys", help="the nsys CLI (default: $NSYS, ../nsys/2024.2/nsys, nsys on PATH)")
    ap.add_argument("--skip-breakdown", action="store_true")
    a = ap.parse_args()
    profile = a.profile or bench_speed.make_profile(bench_speed.SHARED / "profiles" / "nsys-ai__mfu_2gpu_before.sqlite",
                                                    HERE / "out" / "big-r4x100.sqlite", 4, 100)
    nsys = nsys_path(a.nsys)
    result: dict = {"profile": str(profile), "size_mb": round(profile.stat().st_size / 1e6, 1), "nsys": nsys,
                    "load_before": os.getloadavg()[0]}
    result.update(side_by_side(profile, a.runs, nsys))
    if not a.skip_breakdown:
        result["breakdown"] = breakdown(profile)
    result["load_after"] = os.getloadavg()[0]
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
