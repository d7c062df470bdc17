"""cpu_work by NVTX range: the all-parts-at-once cut (gap_context._innermost_all) gives, per label group and
per kind, the same nanoseconds as intervals.innermost run gap by gap (the rule's definition)."""
import numpy as np
import pytest

from dashcam.measure.intervals import EMPTY, innermost, merge
from dashcam.profile.gap_context import _innermost_all, _sum_by

KIND_GROUPS = {0, 2}  # the groups whose label has a kind, in these cases


def _per_gap(parts, ranges, calls):
    by_group, by_kind = {}, {}
    for i, r in ranges.items():
        a, b, _ = parts[i]
        busy = merge(calls[i]["start"], calls[i]["end"]) if i in calls else EMPTY
        time, inner = innermost(a, b, busy, r["start"], r["end"])
        for t, j in zip(time.tolist(), inner.tolist()):
            if t > 0 and j >= 0 and r["grp"][j] >= 0:
                by_group[int(r["grp"][j])] = by_group.get(int(r["grp"][j]), 0) + t
        idx = np.flatnonzero([g in KIND_GROUPS for g in r["grp"].tolist()])
        if len(idx):
            time, inner = innermost(a, b, busy, r["start"][idx], r["end"][idx])
            for t, j in zip(time.tolist(), inner.tolist()):
                if t > 0 and j >= 0:
                    g = int(r["grp"][idx[j]])
                    by_kind[g] = by_kind.get(g, 0) + t
    return by_group, by_kind


def _all_at_once(parts, ranges, calls):
    cat = lambda d, c: np.concatenate([d[k][c] for k in sorted(d)] or [np.zeros(0, np.int64)])
    part = lambda d: np.concatenate([np.full(len(d[k]["start"]), k, np.int64) for k in sorted(d)]
                                    or [np.zeros(0, np.int64)])
    r = {c: cat(ranges, c) for c in ("start", "end", "grp")} | {"i": part(ranges)}
    c = {x: cat(calls, x) for x in ("start", "end")} | {"i": part(calls)}
    has_kind = np.array([g in KIND_GROUPS for g in r["grp"].tolist()], bool)
    time, inner, inner_kind = _innermost_all(parts, r, c, has_kind)
    by_group, by_kind = {}, {}
    for j, t in _sum_by(inner, time).items():
        if r["grp"][j] >= 0:
            by_group[int(r["grp"][j])] = by_group.get(int(r["grp"][j]), 0) + t
    for j, t in _sum_by(inner_kind, time).items():
        by_kind[int(r["grp"][j])] = by_kind.get(int(r["grp"][j]), 0) + t
    return by_group, by_kind


@pytest.mark.parametrize("seed", range(4))
def test_all_parts_at_once_match_gap_by_gap(seed):
    rng = np.random.default_rng(seed)
    checked = 0
    for _ in range(250):
        parts = [(a, a + int(rng.integers(1, 30)), 0) for a in rng.integers(0, 50, rng.integers(1, 6)).tolist()]
        ranges, calls = {}, {}
        for i in range(len(parts)):
            if rng.random() < 0.8:
                n = rng.integers(1, 8)
                s = rng.integers(-5, 80, n)
                e = s + rng.integers(0, 30, n)
                if rng.random() < 0.3:  # ranges with the same bounds: the tie-break decides
                    s[:], e[:] = s[0], e[0]
                ranges[i] = {"start": s, "end": e, "grp": rng.integers(-1, 4, n)}
            if rng.random() < 0.6:
                s = rng.integers(0, 80, rng.integers(1, 5))
                calls[i] = {"start": s, "end": s + rng.integers(0, 10, len(s))}
        if ranges:
            expected = _per_gap(parts, ranges, calls)
            assert _all_at_once(parts, ranges, calls) == expected
            checked += bool(expected[0])
    assert checked > 100  # most cases attribute some time to a group
