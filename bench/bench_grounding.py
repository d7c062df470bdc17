"""How long the grounding check takes on a 200-word answer against 10,000 number leaves (not in CI).

The bar (docs/performance.md): under 50 ms, so every answer can be checked before it is shown.
Run: python bench/bench_grounding.py
"""
from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dashcam.evidence.grounding import check
from tests.test_grounding import ten_thousand_leaves


def main() -> None:
    text, evidence = ten_thousand_leaves()
    times = []
    for _ in range(20):
        t = time.perf_counter()
        check(text, evidence)
        times.append(time.perf_counter() - t)
    print(f"check: 200 words, 10,000 leaves: median {statistics.median(times) * 1000:.1f} ms, "
          f"min {min(times) * 1000:.1f} ms over 20 runs (bar 50 ms)")


if __name__ == "__main__":
    main()
