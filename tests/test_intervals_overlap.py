"""measure.intervals.overlapping (probe x row pairs without a probes x rows join) and innermost's rank on the
ranges' own bounds: numbers known by construction and a brute-force check on random intervals."""
from __future__ import annotations

import numpy as np

from dashcam.measure.intervals import EMPTY, innermost, overlapping


def brute(starts, ends, a, b):
    return sorted((p, r) for p in range(len(a)) for r in range(len(starts)) if starts[r] < b[p] and ends[r] > a[p])


def test_overlapping_known_pairs():
    starts = np.array([0, 5, 10, 2, 100])
    ends = np.array([1000, 6, 20, 3, 101])  # one long row, short ones
    a, b = np.array([4, 15, 200]), np.array([7, 16, 300])
    p, r = overlapping(starts, ends, a, b)
    # probe 0 [4, 7): rows 0 and 5..6; probe 1 [15, 16): rows 0 and 10..20; probe 2 [200, 300): row 0 only
    assert list(zip(p.tolist(), r.tolist())) == [(0, 0), (0, 1), (1, 0), (1, 2), (2, 0)]


def test_overlapping_matches_brute_force():
    rng = np.random.default_rng(7)
    starts = rng.integers(0, 10_000, 3_000)
    ends = starts + np.where(rng.random(3_000) < 0.02, rng.integers(0, 5_000, 3_000), rng.integers(0, 40, 3_000))
    a = rng.integers(0, 10_000, 300)
    b = a + rng.integers(1, 200, 300)
    p, r = overlapping(starts, ends, a, b)
    assert sorted(zip(p.tolist(), r.tolist())) == brute(starts, ends, a, b)
    assert (np.diff(p) >= 0).all()  # by probe


def test_innermost_does_not_depend_on_order_when_ranges_span_the_window():
    # parent [0, 100), child [10, 90): both cover [20, 30) entirely; the child started last, so it is innermost
    for order in ([0, 1], [1, 0]):
        s, e = np.array([0, 10])[order], np.array([100, 90])[order]
        time, inner = innermost(20, 30, EMPTY, s, e)
        assert time.tolist() == [10]
        assert inner.tolist() == [order.index(1)]
