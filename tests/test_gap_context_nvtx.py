"""cpu_work by NVTX range: the all-parts-at-once cut (gap_context._innermost_all) gives, per label group and
per kind, the same nanoseconds as intervals.innermost run gap by gap (the rule's definition); the split the
cache stores (gap_nvtx.py) is the one a query would make."""
import numpy as np
import pytest

from dashcam.measure.intervals import EMPTY, innermost, merge
from dashcam.profile.gap_context import (
    INNERMOST,
    NO_RANGE,
    _innermost_all,
    _sum_by,
    cpu_work_parts,
    split_parts_by_nvtx,
    stored_split,
)
from dashcam.testing.builder import ExportBuilder
from dashcam.tools import get_tool

from .conftest import US

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
    time, inner, inner_kind, _ = _innermost_all(parts, r, c, has_kind)
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


LABELS = ["aten::mm", "nccl:all_reduce", "step", "data_loader", "jit_compile", "forward"]


def _random_export(seed: int) -> ExportBuilder:
    """Two GPUs launched from two threads, gaps with cpu_work, NVTX ranges (nested, crossing, tied with other
    labels) and CUDA calls on the launching threads."""
    rng = np.random.default_rng(seed)
    b = ExportBuilder()
    for d, tid in ((0, 100), (1, 101)):
        b.gpu(d)
        t = 0
        for _ in range(40):
            t += int(rng.integers(1, 60)) * US
            call = t + int(rng.integers(0, 20)) * US
            b.launch(d, call, call + 5 * US, call + 10 * US, call + 30 * US, tid=tid)
            if rng.random() < 0.5:
                s = t - int(rng.integers(0, 40)) * US
                b.api("cudaMemGetInfo", s, s + int(rng.integers(1, 15)) * US, tid=tid)
            t = call + 30 * US
        for _ in range(60):
            s = int(rng.integers(0, t))
            e = s + int(rng.integers(1, 200)) * US
            b.nvtx(LABELS[int(rng.integers(len(LABELS)))], s, e, tid=tid)
            if rng.random() < 0.2:  # the same bounds: the range written later is innermost
                b.nvtx(LABELS[int(rng.integers(len(LABELS)))], s, e, tid=tid)
    return b


@pytest.mark.parametrize("seed", range(3))
def test_split_stored_with_the_cache_matches_the_split_at_query_time(build, seed, monkeypatch):
    profile = build(_random_export(seed))
    w = profile.window()
    checked = 0
    for d in profile.devices:
        parts, examined = cpu_work_parts(profile, w, d, [])
        by_group, by_kind = {}, {}
        assert stored_split(profile, d, parts, by_group, by_kind) == []  # the cache split every one
        want_group, want_kind = {}, {}
        for out, (_, g, ns) in zip((want_group, want_kind), split_parts_by_nvtx(profile, parts)):
            for x, t in zip(g.tolist(), ns.tolist()):
                out[x] = out.get(x, 0) + t
        assert (by_group, by_kind) == (want_group, want_kind)
        checked += len(by_kind) > 0
        # per part, the time in no range and in the innermost ranges adds up to its cpu_work
        got = profile.rows(f"SELECT sum(ns) FILTER (what IN ({NO_RANGE}, {INNERMOST})) FROM gap_nvtx "
                           f"WHERE device_id = {d}")[0][0]
        assert got == examined
    assert checked == 2


def test_windows_mix_stored_and_query_time_splits(build, monkeypatch):
    """With 5 gaps examined per device, windows bring up gaps the cache did not split and cut others: gpu_gaps
    gives the same result as with nothing stored with the cache (no split, no whole-profile sums)."""
    import dashcam.profile.gap_context as gc
    import dashcam.profile.gap_nvtx as gn

    monkeypatch.setattr(gc, "MAX_GAPS", 5)
    monkeypatch.setattr(gn, "MAX_GAPS", 5)
    profile = build(_random_export(7))
    assert profile.manifest["derived"]["gap_nvtx"] == 10
    length = profile.window().length_ns / 1e6
    tool = get_tool("gpu_gaps")
    for start, end in ((None, None), (0.0, length / 2), (length * 0.3, length * 0.9), (length * 0.6, None)):
        params = {k: v for k, v in (("start_ms", start), ("end_ms", end)) if v is not None}
        got = tool(profile, params)
        derived = profile.manifest["derived"]
        monkeypatch.setitem(profile.manifest, "derived", {**derived, "gap_nvtx": None, "gap_totals": None})
        profile.memo.clear()
        want = tool(profile, params)
        monkeypatch.setitem(profile.manifest, "derived", derived)
        profile.memo.clear()
        assert got == want
        assert any(x.cpu_work_nvtx for x in got.devices)
