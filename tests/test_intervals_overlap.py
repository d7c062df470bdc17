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


def test_overlapping_rows_in_start_order_match_brute_force():
    """Rows read in start order, many per probe (the path that first drops the rows no probe reaches): the same
    pairs in the same order as brute force, with a few long rows and a few ending before they start."""
    rng = np.random.default_rng(11)
    starts = np.sort(rng.integers(0, 100_000, 6_000))
    ends = starts + rng.integers(0, 30, 6_000)
    ends[::500] += 50_000  # long rows
    ends[7::700] = starts[7::700] - 5  # reversed rows
    a = rng.integers(0, 100_000, 40)
    b = a + rng.integers(1, 100, 40)
    p, r = overlapping(starts, ends, a, b)
    expected = brute(starts, ends, a, b)
    expected.sort(key=lambda pr: (pr[0], starts[pr[1]], pr[1]))  # by probe, then row start
    assert list(zip(p.tolist(), r.tolist())) == expected
    assert len(expected) > 40
    assert (np.diff(p) >= 0).all()  # by probe


def test_innermost_does_not_depend_on_order_when_ranges_span_the_window():
    # parent [0, 100), child [10, 90): both cover [20, 30) entirely; the child started last, so it is innermost
    for order in ([0, 1], [1, 0]):
        s, e = np.array([0, 10])[order], np.array([100, 90])[order]
        time, inner = innermost(20, 30, EMPTY, s, e)
        assert time.tolist() == [10]
        assert inner.tolist() == [order.index(1)]


def test_unique_points_is_np_unique():
    """unique_points (sort and compare) gives np.unique's values, empty and one-element arrays included."""
    import numpy as np

    from dashcam.measure.intervals import unique_points

    rng = np.random.default_rng(7)
    for n in (0, 1, 2, 3, 1000, 50_000):
        x = rng.integers(-40, 40, n).astype(np.int64)
        assert np.array_equal(unique_points(x), np.unique(x)), n
    assert unique_points(np.array([5, 5, 5], np.int64)).tolist() == [5]
