"""How long an offline `dashcam ask` takes as a user sees it: a new process each time, start-up included
(not in CI).

The bar (issue 14, docs/performance.md): the median offline ask under 1 s on the example, cache warm.
Each run is a fresh `dashcam ask QUESTION PROFILE` with no model configured; one untimed run first
builds the cache (in a temporary DASHCAM_CACHE_DIR, so the user's caches are untouched). Wall time is
what the bar is about; CPU time (the process and its threads, DuckDB's included) is printed beside it
because it moves less when the machine is shared. The load average is printed: measure on a quiet
machine.

Run: python bench/bench_ask.py [--runs 20] [--question "why is GPU 1 idle?"] [--profile examples/demo.sqlite]
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BAR_S = 1.0


def timed_run(cmd: list[str], env: dict) -> tuple[float, float]:
    """(wall s, CPU s) of one command in a new process."""
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t
    if status != 0:
        raise SystemExit(f"{' '.join(cmd)} failed: {proc.stderr.read().decode()[-400:]}")
    return wall, usage.ru_utime + usage.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--question", default="why is GPU 1 idle?")
    ap.add_argument("--profile", default=str(ROOT / "examples" / "demo.sqlite"))
    args = ap.parse_args()
    exe = shutil.which("dashcam") or sys.exit("dashcam is not on PATH: pip install -e . first")
    with tempfile.TemporaryDirectory() as cache:
        env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL")}
        env["DASHCAM_CACHE_DIR"] = cache
        cmd = [exe, "ask", args.question, args.profile]
        timed_run(cmd, env)  # builds the cache
        runs = [timed_run(cmd, env) for _ in range(args.runs)]
    walls = [w for w, _ in runs]
    cpus = [c for _, c in runs]
    median = statistics.median(walls)
    load = os.getloadavg()[0]
    print(f"ask {args.question!r} on {Path(args.profile).name}, {args.runs} runs: median {median:.3f} s wall "
          f"(min {min(walls):.3f}, max {max(walls):.3f}), median {statistics.median(cpus):.3f} s CPU; "
          f"bytecode caches {'not written' if os.environ.get('PYTHONDONTWRITEBYTECODE') else 'written'}; "
          f"load average {load:.2f}; bar {BAR_S:.1f} s: {'met' if median < BAR_S else 'NOT met'}")


if __name__ == "__main__":
    main()
