import sqlite3

import numpy as np
import pyarrow as pa
import pytest

from dashcam.measure.names import nvtx_group_labels
from dashcam.profile import Profile
from dashcam.testing.builder import ExportBuilder
from dashcam.tools import get_tool

from .conftest import MS, SHARED_GPU, US

RANGE_TYPES = "(59, 60, 70, 71)"


def _nested() -> ExportBuilder:
    """Window [0, 20 ms] (two unlaunched kernels mark its ends). Thread 100 of pid 100:

    step [2, 12) ms
      forward [3, 7) ms, with another forward [3.5, 4.5) ms nested inside it
      backward [7, 11) ms
    Launches from thread 100: at 4 ms (in step, both forwards) -> kernel 1 ms on device 0,
    at 8 ms (step, backward) -> 2 ms on device 1, at 11.5 ms (step only) -> 0.5 ms on device 0,
    at 13 ms (no range) -> 0.25 ms, and at exactly 7 ms (forward's end, backward's start: in backward only)
    -> 0.125 ms. One launch at 5 ms from thread 101: in no range of thread 100.
    """
    b = ExportBuilder()
    b.kernel(0, 0, 10 * US, name="edge")
    b.kernel(0, 20 * MS - 10 * US, 20 * MS, name="edge")
    b.nvtx("step", 2 * MS, 12 * MS)
    b.nvtx("forward", 3 * MS, 7 * MS)
    b.nvtx("forward", 3500 * US, 4500 * US)
    b.nvtx("backward", 7 * MS, 11 * MS)
    b.launch(0, 4 * MS, 4 * MS + 5 * US, 14 * MS, 15 * MS, name="fwd_gemm")
    b.launch(1, 8 * MS, 8 * MS + 5 * US, 15 * MS, 17 * MS, name="bwd_gemm")
    b.launch(0, 11500 * US, 11505 * US, 17 * MS, 17500 * US, name="opt")
    b.launch(0, 13 * MS, 13005 * US, 18 * MS, 18250 * US, name="late")
    b.launch(0, 5 * MS, 5005 * US, 16 * MS, 16100 * US, name="other_thread", tid=101)
    b.launch(0, 7 * MS, 7005 * US, 19 * MS, 19125 * US, name="boundary")
    return b


def _rows(r):
    return {g.label: (g.count, g.total_ns, g.max_ns, g.kernel_count, g.gpu_ns) for g in r.groups}


def test_nested_ranges_attribute_kernels_to_every_enclosing_group_once(build):
    r = get_tool("nvtx")(build(_nested()))
    assert r.range_count == 4 and r.mark_count == 0 and r.group_count == 3
    assert _rows(r) == {
        "step": (1, 10 * MS, 10 * MS, 4, 3625 * US),
        "forward": (2, 5 * MS, 4 * MS, 1, 1 * MS),  # nested forwards: the 4 ms launch counts once
        "backward": (1, 4 * MS, 4 * MS, 2, 2125 * US),
    }
    assert [g.label for g in r.groups] == ["step", "forward", "backward"]  # by total_ns
    assert r.groups[1].avg_ns == 2.5 * MS


def test_gpu_param_counts_only_that_devices_kernels(build):
    r = get_tool("nvtx")(build(_nested()), {"gpu": 1})
    assert _rows(r)["step"] == (1, 10 * MS, 10 * MS, 1, 2 * MS)  # bwd_gemm only
    assert _rows(r)["forward"][3:] == (0, 0)


def test_user_window_clips_ranges_and_kernels(build):
    # window [2.5, 15.5] ms: step clipped to [2.5, 12) = 9.5 ms; of its kernels fwd_gemm [14, 15] (1 ms)
    # and bwd_gemm [15, 17] (clipped to 0.5 ms) overlap the window, opt [17, 17.5] does not
    r = get_tool("nvtx")(build(_nested()), {"start_ms": 2.5, "end_ms": 15.5})
    assert _rows(r)["step"] == (1, 9500 * US, 9500 * US, 2, 1500 * US)


def test_pytorch_suffixes_are_stripped_and_filter_matches_groups(build):
    b = ExportBuilder()
    b.kernel(0, 0, 10 * MS)
    b.nvtx("aten::mm, seq = 12, op_id = 990346", 1 * MS, 2 * MS)
    b.nvtx("aten::mm, op_id = 990350", 3 * MS, 5 * MS)
    b.nvtx("aten::mm, seq = 13, op_id = 990351, sizes = [[2, 3], [3, 4]], input_op_ids = [(1, 0)]", 6 * MS, 7 * MS)
    b.nvtx("my, label", 1 * MS, 9 * MS)
    b.nvtx("Aten::seq = 1", 1 * MS, 1100 * US)  # no ", seq = " suffix; the trailing number becomes <n>
    b.nvtx("tick", 4 * MS, None, event_type=34)  # a mark (NvtxMark)
    b.nvtx("my domain", 4 * MS, None, event_type=75)  # a domain create: neither range nor mark
    r = get_tool("nvtx")(build(b))
    assert (r.range_count, r.mark_count, r.group_count) == (5, 1, 3)
    got = {g.label: (g.count, g.total_ns, g.max_ns) for g in r.groups}
    assert got == {"my, label": (1, 8 * MS, 8 * MS), "aten::mm": (3, 4 * MS, 2 * MS),
                   "Aten::seq = <n>": (1, 100 * US, 100 * US)}
    f = get_tool("nvtx")(build(b), {"label": "ATEN::"})
    assert [g.label for g in f.groups] == ["aten::mm", "Aten::seq = <n>"]
    assert f.matched_groups == 2 and f.range_count == 5  # counts stay those of the whole window
    none = get_tool("nvtx")(build(b), {"label": "nothing"})
    assert none.groups == [] and none.matched_groups == 0 and any("nothing" in n for n in none.notes)


def test_trailing_numbers_group_and_nested_members_count_a_kernel_once(build):
    """ "layer 1" [1, 9) ms holds "layer 2" [2, 6) ms (stored first: rows need not come sorted): one group
    "layer <n>"; the launch at 3 ms (inside both) counts once for it. "epoch 7" is its own group "epoch <n>";
    "layer" (no number) is a third group. "layer 3" on thread 102, which launches nothing, adds a range and no
    kernel."""
    b = ExportBuilder()
    b.kernel(0, 0, 10 * US)
    b.nvtx("layer 2", 2 * MS, 6 * MS)
    b.nvtx("layer 1", 1 * MS, 9 * MS)
    b.nvtx("epoch 7", 0, 10 * MS)
    b.nvtx("layer", 7 * MS, 8 * MS)
    b.nvtx("layer 3", 2 * MS, 8 * MS, tid=102)
    b.launch(0, 3 * MS, 3010 * US, 11 * MS, 12 * MS)  # 1 ms kernel: layer 1, layer 2, epoch 7
    b.launch(1, 7500 * US, 7510 * US, 12 * MS, 12250 * US)  # 0.25 ms kernel: layer 1, layer, epoch 7
    b.launch(1, 1500 * US, 1510 * US, 13 * MS, 13125 * US)  # 0.125 ms kernel: layer 1, epoch 7
    r = get_tool("nvtx")(build(b))
    assert (r.range_count, r.group_count) == (5, 3)
    assert _rows(r) == {"epoch <n>": (1, 10 * MS, 10 * MS, 3, 1375 * US),
                        "layer <n>": (3, 18 * MS, 8 * MS, 3, 1375 * US),
                        "layer": (1, 1 * MS, 1 * MS, 1, 250 * US)}


def test_text_and_registered_labels_are_one_group(build, tmp_path):
    b = ExportBuilder()
    b.nvtx("forward", 1 * MS, 2 * MS)
    b.nvtx("forward", 3 * MS, 6 * MS, registered=True)
    b.nvtx("lost", 4 * MS, 5 * MS, registered=True)  # textId made dangling below: no label
    b.launch(0, 3500 * US, 3600 * US, 7 * MS, 8 * MS)
    b.launch(0, 4500 * US, 4600 * US, 8 * MS, 8500 * US)
    b.kernel(0, 0, 10 * US)
    path = b.write(tmp_path / "labels.sqlite")
    con = sqlite3.connect(path)
    con.execute("DELETE FROM StringIds WHERE value = 'lost'")
    con.commit()
    con.close()
    r = get_tool("nvtx")(Profile.open(path, progress=False))
    assert _rows(r) == {"forward": (2, 4 * MS, 3 * MS, 2, 1500 * US), "<no label>": (1, 1 * MS, 1 * MS, 1, 500 * US)}


def test_limit_keeps_top_groups_and_says_so(build):
    b = ExportBuilder()
    b.kernel(0, 0, 10 * MS)
    for i, name in enumerate(["a", "b", "c"]):
        b.nvtx(name, 0, (i + 1) * MS)
    b.launch(0, 100 * US, 200 * US, 1 * MS, 2 * MS)  # inside all three
    r = get_tool("nvtx")(build(b), {"limit": 2})
    assert [(g.label, g.kernel_count, g.gpu_ns) for g in r.groups] == [("c", 1, 1 * MS), ("b", 1, 1 * MS)]
    assert r.matched_groups == 3 and any("top 2 of 3" in n for n in r.notes)


def test_profile_without_nvtx_or_api(build):
    b = ExportBuilder()
    b.kernel(0, 0, 1 * MS)
    r = get_tool("nvtx")(build(b))
    assert (r.range_count, r.groups) == (0, [])
    assert r.notes


@pytest.mark.parametrize("chunk_rows", [1, 2, 300_000])
def test_attribution_computed_with_the_cache_is_the_same_for_any_chunking(build, monkeypatch, chunk_rows):
    """The whole-window table is built chunk by chunk; one row per chunk puts the nested "forward" ranges
    in different chunks that overlap in time, so their group is recomputed as one."""
    from dashcam.profile.cache import build as cache

    monkeypatch.setattr(cache, "CHUNK_ROWS", chunk_rows)
    monkeypatch.setattr(cache, "NVTX_CHUNK_ROWS", chunk_rows)
    p = build(_nested())
    assert p.has_view("nvtx_kernels")
    assert _rows(get_tool("nvtx")(p)) == {
        "step": (1, 10 * MS, 10 * MS, 4, 3625 * US),
        "forward": (2, 5 * MS, 4 * MS, 1, 1 * MS),
        "backward": (1, 4 * MS, 4 * MS, 2, 2125 * US),
    }


def test_nvtx_chunks_are_smaller_on_one_thread(monkeypatch):
    """Two threads (a first open): 150,000 NVTX rows a chunk; one (the fleet's digests): 75,000."""
    from dashcam.profile.cache import build as cache
    from dashcam.profile.schema import THREADS_ENV

    monkeypatch.delenv(THREADS_ENV, raising=False)
    assert cache.nvtx_chunk_rows() == 150_000
    monkeypatch.setenv(THREADS_ENV, "1")
    assert cache.nvtx_chunk_rows() == 75_000


@pytest.mark.parametrize("batch", [1, 2, 1_000_000])
def test_window_computed_on_the_spot_is_the_same_for_any_batch_size(build, monkeypatch, batch):
    """A --start/--end query attributes the ranges batch by batch; with 1-range batches the nested
    "forward" ranges land in batches that overlap in time, and their keys are recomputed in pieces
    of whole keys."""
    import dashcam.tools.nvtx as nvtx_tool

    monkeypatch.setattr(nvtx_tool, "RANGE_BATCH", batch)
    r = get_tool("nvtx")(build(_nested()), {"start_ms": 0, "end_ms": 19.5})  # not the whole window: live
    assert _rows(r) == {
        "step": (1, 10 * MS, 10 * MS, 4, 3625 * US),
        "forward": (2, 5 * MS, 4 * MS, 1, 1 * MS),
        "backward": (1, 4 * MS, 4 * MS, 2, 2125 * US),
    }


def test_tangled_keys_are_those_whose_batches_overlap_in_time():
    from dashcam.profile.nvtx_kernels import KeyTotals, tangled

    # key (1, 7): batches [0, 100] and [10, 20] overlap; key (2, 7): [0, 10], [10, 20], [30, 40] are apart;
    # key (1, 8): one batch
    t = KeyTotals(group=np.array([1, 2, 1, 2, 1, 2]), thread=np.array([7, 7, 7, 7, 8, 7]),
                  count=np.ones(6, np.int64), ns=np.ones(6, np.int64),
                  first=np.array([10, 30, 0, 10, 5, 0]), last=np.array([20, 40, 100, 20, 6, 10]))
    assert tangled(t).tolist() == [True, False, True, False, False, False]


def test_gpu_query_uses_the_stored_counts_when_each_thread_launches_on_one_gpu(build, monkeypatch):
    """Rank 100 drives GPU 0 and rank 200 GPU 1, each from its main thread: "step" on both (clipped to the
    window [0, 7] ms)."""
    import dashcam.tools.nvtx as nvtx_tool

    b = ExportBuilder()
    b.kernel(0, 0, 10 * US, name="edge")
    for pid, dev, ms in ((100, 0, 1), (200, 1, 2)):
        b.nvtx("step", 1 * MS, 9 * MS, pid=pid)
        b.launch(dev, 2 * MS, 2 * MS + 5 * US, 3 * MS, 3 * MS + ms * MS, pid=pid)
        b.launch(dev, 4 * MS, 4 * MS + 5 * US, 5 * MS, 5 * MS + ms * MS, pid=pid)
    p = build(b)

    def live(*a, **k):
        raise AssertionError("computed on the spot")

    monkeypatch.setattr(nvtx_tool, "_kernels_by_group", live)
    assert _rows(get_tool("nvtx")(p, {"gpu": 1}))["step"] == (2, 12 * MS, 6 * MS, 2, 4 * MS)
    assert _rows(get_tool("nvtx")(p, {"gpu": 0}))["step"] == (2, 12 * MS, 6 * MS, 2, 2 * MS)
    assert _rows(get_tool("nvtx")(p))["step"] == (2, 12 * MS, 6 * MS, 4, 6 * MS)


@pytest.mark.parametrize("path", SHARED_GPU, ids=lambda x: x.name)
def test_real_exports_per_gpu_counts_equal_the_computation_on_the_spot(path, opened):
    import dashcam.tools.nvtx as nvtx_tool

    p = opened(path)
    if not p.has_view("nvtx_kernels"):
        pytest.skip("no NVTX ranges with kernel launches")
    w = p.window()
    for d in p.devices:
        r = get_tool("nvtx")(p, {"gpu": d, "limit": 20})
        groups = [(g, n) for g, n in p.rows(
            "SELECT group_id, count(*) FROM nvtx_times n JOIN nvtx_groups USING (group_id) WHERE label IN "
            f"({', '.join(repr(g.label) for g in r.groups)}) AND is_range GROUP BY 1")] if r.groups else []
        counts, ns = nvtx_tool._kernels_by_group(p, w, [d], groups)
        labels = dict(p.rows("SELECT group_id, label FROM nvtx_groups"))
        live = {labels[g]: (int(c), int(x)) for (g, _), c, x in zip(groups, counts, ns)}
        assert {g.label: (g.kernel_count, g.gpu_ns) for g in r.groups if g.label in live} == live


# -- real exports -------------------------------------------------------------------------------------------

def _plain(path, sql, params=()):
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        if not con.execute("SELECT 1 FROM sqlite_master WHERE name = 'NVTX_EVENTS'").fetchone():
            return None
        return con.execute(sql, params).fetchone()[0]
    finally:
        con.close()


def _raw_ranges(path, w) -> list[tuple]:
    """(pid, tid, start, end, label group) of the ranges overlapping the window (not ending before they start),
    read from the SQLite file with plain sqlite3; the group computed here from the raw label with
    names.nvtx_group_labels."""
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        if not con.execute("SELECT 1 FROM sqlite_master WHERE name = 'NVTX_EVENTS'").fetchone():
            return []
        has_ids = con.execute("SELECT 1 FROM sqlite_master WHERE name = 'StringIds'").fetchone()
        label = "COALESCE(n.text, s.value)" if has_ids else "n.text"
        join = "LEFT JOIN StringIds s ON s.id = n.textId" if has_ids else ""
        rows = con.execute(f"""SELECT (n.globalTid >> 24) & 16777215, n.globalTid & 16777215, n.start, n."end", {label}
                               FROM NVTX_EVENTS n {join} WHERE n."end" IS NOT NULL AND n.eventType IN {RANGE_TYPES}
                               AND n."end" > ? AND n.start < ? AND n."end" >= n.start""",
                           (w.start_ns, w.end_ns)).fetchall()
    finally:
        con.close()
    groups = nvtx_group_labels(pa.array([r[4] for r in rows], pa.string())).to_pylist()
    return [(*r[:4], g if g is not None else "<no label>") for r, g in zip(rows, groups)]


def _brute_force(p: Profile, ranges: list[tuple], r) -> dict:
    """(count, kernel_count, gpu_ns) per shown group by checking every launch against every range (numpy)."""
    w = r.window
    launches = p.rows(f'SELECT pid, api_tid, api_start, least("end", {w.end_ns}) - greatest(start, {w.start_ns}) '
                      f'FROM launches WHERE "end" > {w.start_ns} AND start < {w.end_ns} AND api_start IS NOT NULL')
    out = {}
    for g in r.groups:
        mine = [x for x in ranges if x[4] == g.label]
        kc = gpu = 0
        for th in {(x[0], x[1]) for x in mine}:
            s = np.array([x[2] for x in mine if (x[0], x[1]) == th])[:, None]
            e = np.array([x[3] for x in mine if (x[0], x[1]) == th])[:, None]
            ls = [x for x in launches if (x[0], x[1]) == th]
            if not ls:
                continue
            t = np.array([x[2] for x in ls])[None, :]
            inside = ((s <= t) & (t < e)).any(axis=0)
            kc += int(inside.sum())
            gpu += int(np.array([x[3] for x in ls])[inside].sum())
        out[g.label] = (len(mine), kc, gpu)
    return out


@pytest.mark.parametrize("path", SHARED_GPU, ids=[p.name for p in SHARED_GPU])
def test_real_exports_counts_match_sql_and_brute_force(path):
    p = Profile.open(path, progress=False)
    r = get_tool("nvtx")(p, {"limit": 15})
    w = r.window
    ranges = _raw_ranges(path, w)
    marks = _plain(path, 'SELECT count(*) FROM NVTX_EVENTS WHERE "end" IS NULL AND eventType IN (34, 65) '
                         'AND start >= ? AND start < ?', (w.start_ns, w.end_ns))
    assert r.range_count == len(ranges)
    assert r.mark_count == (marks or 0)
    assert r.group_count == len({x[4] for x in ranges}) <= r.range_count
    assert r.matched_groups == r.group_count and len(r.groups) == min(15, r.group_count)
    assert sum(g.count for g in r.groups) <= r.range_count
    kernel_ns = p.one(f'SELECT coalesce(sum(least("end", {w.end_ns}) - greatest(start, {w.start_ns})), 0) '
                      f'FROM kernels WHERE "end" > {w.start_ns} AND start < {w.end_ns}')[0]
    for g in r.groups:
        assert 0 <= g.max_ns <= w.length_ns and g.max_ns <= g.total_ns and 0 <= g.gpu_ns <= kernel_ns
    assert [g.total_ns for g in r.groups] == sorted((g.total_ns for g in r.groups), reverse=True)
    assert {g.label: (g.count, g.kernel_count, g.gpu_ns) for g in r.groups} == _brute_force(p, ranges, r)


def test_a_range_ending_before_it_starts_is_no_range(build):
    b = _nested()
    b.nvtx("broken", 9 * MS, 3 * MS)  # end before start: corrupt, dropped everywhere
    r = get_tool("nvtx")(build(b))
    assert "broken" not in _rows(r) and r.range_count == 4


def test_attribute_counts_each_kernel_once_per_group_and_survives_a_huge_axis():
    """Launches of thread 5 at 0 (10 ns) and 2**61 (20 ns): two keys on an axis that long would overflow
    int64 together, so they are attributed in halves."""
    from dashcam.profile.nvtx_kernels import LaunchAxis, attribute

    far = 2 ** 61
    axis = LaunchAxis.build(np.array([5, 5]), np.array([0, far]), np.array([10, 20]))
    t = attribute(axis, start=np.array([0, 0, far, 3]), end=np.array([far + 1, 1, far + 1, 4]),
                  thread=np.array([5, 5, 5, 6]), group=np.array([1, 1, 2, 1]))
    count, ns = t.by_group(np.array([1, 2]))
    assert count.tolist() == [2, 1] and ns.tolist() == [30, 20]  # the nested group-1 range adds nothing
