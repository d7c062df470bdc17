"""Start-up (issue 29): a command imports only what it runs.

`import dashcam.cli` and `dashcam --help` load none of the heavy libraries; the time `python -X importtime`
reports for `import dashcam.cli` stays within a budget. The module checks are exact; the time budget is
generous (this runs on shared, loaded machines): the best of three runs against 2.5x the issue's 0.12 s, times
the machine's load per core where that is over 1 (0.57 s was measured at a load of 10 on 2 cores).
"""
from __future__ import annotations

import os
import re
import subprocess
import sys

# Libraries no command needs at import time: each is imported inside the code that uses it.
HEAVY = ("dask", "distributed", "pyarrow", "adbc_driver_sqlite", "openai", "tiktoken", "jieba", "opencc",
         "rapidfuzz", "snowballstemmer", "duckdb", "numpy", "pydantic", "rich")
IMPORT_BUDGET_S = 0.30  # 2.5x the 0.12 s on a quiet machine; 0.05-0.09 s measured on the 2-core VM
MODULE_BUDGET = 200  # modules in sys.modules after `import dashcam.cli` (152 on 2026-12-03, Python 3.11)


def _env() -> dict:
    return {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "DASHCAM_", "TYPER_"))}


def _loaded_after(code: str) -> tuple[list[str], int]:
    probe = code + f"\nimport sys\nprint('LOADED', sorted(m for m in {HEAVY!r} if m in sys.modules), len(sys.modules))"
    r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=_env(), timeout=120)
    assert r.returncode == 0, r.stderr
    line = [x for x in r.stdout.splitlines() if x.startswith("LOADED")][-1]
    names = re.findall(r"'([^']+)'", line)
    return names, int(line.rsplit(" ", 1)[1])


def test_import_cli_loads_no_heavy_library():
    names, count = _loaded_after("import dashcam.cli")
    assert names == []
    assert count <= MODULE_BUDGET


def test_help_loads_no_heavy_library():
    code = ("import runpy, sys, io, contextlib\nsys.argv = ['dashcam', '--help']\nout = io.StringIO()\n"
            "with contextlib.redirect_stdout(out):\n    try:\n"
            "        runpy.run_module('dashcam.cli', run_name='__main__')\n"
            "    except SystemExit:\n        pass\nassert 'Usage: dashcam' in out.getvalue(), out.getvalue()")
    names, _ = _loaded_after(code)
    assert names == []


def import_seconds(stderr: str) -> float:
    """The total of `-X importtime`: the cumulative times of the top-level imports (no indent), in seconds."""
    total = 0
    for line in stderr.splitlines():
        m = re.match(r"import time:\s+\d+ \|\s+(\d+) \| (\S.*)$", line)  # top level: the name is not indented
        if m:
            total += int(m.group(1))
    return total / 1e6


def test_import_seconds_reads_top_level_lines_only():
    stderr = ("import time: self [us] | cumulative | imported package\n"
              "import time:       100 |        100 |   child\n"
              "import time:       200 |        300 | parent\n"
              "import time:        50 |         50 | other\n")
    assert import_seconds(stderr) == 350e-6


def test_import_time_budget():
    """Without -X importtime's own dashcam-unrelated start-up (site, encodings): only what `import dashcam.cli` adds."""
    best = None
    for _ in range(3):
        r = subprocess.run([sys.executable, "-X", "importtime", "-c", "import dashcam.cli"], capture_output=True,
                           text=True, env=_env(), timeout=120)
        assert r.returncode == 0, r.stderr
        after_site = r.stderr.split("| site\n", 1)[-1]  # what the interpreter imports before `-c` runs is not ours
        seconds = import_seconds(after_site)
        best = seconds if best is None else min(best, seconds)
    load = os.getloadavg()[0] / (os.cpu_count() or 1)
    assert 0 < best <= IMPORT_BUDGET_S * max(1.0, load), (best, load)
