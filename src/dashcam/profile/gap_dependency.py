"""The dependency split: what a GPU's ``dependency`` time was (gap_causes.py defines ``dependency``).

A gap's ``dependency`` time is the part after the closing kernel's launch call returned (or after the gap
started, when the call returned earlier) with nothing on the device. Gap by gap it is split into

    ``turnaround``      the gap is shorter than TURNAROUND_MAX_NS and has a kernel on each side: the device's
                        own turnaround between back-to-back kernels, not a dependency;
    ``wait``            a real wait the capture shows: the launching thread made a stream-wait call (WAIT_CALLS:
                        ``cudaStreamWaitEvent``, ``cuStreamWaitEvent``, ``cu(da)StreamWaitValue``, external
                        semaphore waits) after its previous launch call to that device and before the closing
                        kernel's launch call (in stream order the wait sits just before that kernel), or the
                        closing kernel is a later node of a graph launch (it waits for the nodes before it);
                        all of such a gap's dependency time. Otherwise the part other GPUs' kernels overlap
                        (the GPU waits on another GPU's work), at most the gap's dependency time;
    ``launch_latency``  the rest: the device empty after the launch call returned and no wait in the capture;
                        the GPU's launch-to-start latency, or what the trace cannot see (another process or
                        context sharing the GPU, a device-side wait).

The three add up to the gap's ``dependency`` time. Host-side waits (``cudaEventSynchronize``...) are not here:
the host blocked in them before the launch, which is ``sync_wait``. Computed at query time from the gap table
(the gaps' split points and launch calls); a window's cut gaps from their recomputed causes (gpu_gaps).
"""
from __future__ import annotations

import numpy as np

from dashcam.measure.definitions import Window
from dashcam.measure.intervals import kernel_unions, merge
from dashcam.profile.gap_causes import NONE, split_points

# A gap shorter than 3 us between two kernels is the GPU retiring one kernel and starting the next (about 1-2 us
# on current GPUs, back to back on one stream), not a wait: no remedy but fewer kernels removes it.
TURNAROUND_MAX_NS = 3_000
# The stream-wait calls: the kernel launched after one on that stream waits, on the device, for what it names.
WAIT_CALLS = ("StreamWaitEvent", "StreamWaitValue", "WaitExternalSemaphores")
WAIT_NAMES = "SELECT id, name FROM api_names WHERE " + " OR ".join(f"name LIKE '%{w}%'" for w in WAIT_CALLS)
PARTS = ("launch_latency", "wait", "turnaround")
# the gap columns the split reads (gap_table and gpu_gaps' cut rows)
COLUMNS = ("device_id", "start", "end", "key", "api_start", "api_end", "node_wait", "before_id", "after_id")


def gap_rows(profile, condition: str) -> dict[str, np.ndarray]:
    """The stored gaps matching ``condition`` that hold dependency time or may be turnaround (columns COLUMNS and
    ``dependency``)."""
    cols = ", ".join(f'"{c}"' for c in COLUMNS)
    return {k: np.asarray(v, np.int64) for k, v in profile.con.execute(
        f"""SELECT {cols}, dependency FROM gap_table WHERE {condition}
              AND (dependency > 0 OR "end" - start < {TURNAROUND_MAX_NS})""").fetchnumpy().items()}


def split_gaps(profile, w: Window, g: dict[str, np.ndarray]) -> dict[str, object]:
    """Per gap of ``g`` (one device's, COLUMNS and ``dependency``): the three PARTS (ns), ``short`` (a turnaround
    gap), ``call_wait`` (the wait of the gaps behind a stream-wait call), ``other_wait`` (the wait other GPUs'
    kernels overlap, in gaps with no call and no graph wait) and ``calls`` (the calls, name -> count).
    Other GPUs: every other device of the profile, its kernels inside ``w``."""
    a, b, dep = g["start"], g["end"], g["dependency"]
    n = len(a)
    short = (b - a < TURNAROUND_MAX_NS) & (g["before_id"] >= 0) & (g["after_id"] >= 0)
    turnaround = np.where(short, dep, 0)
    rest = dep - turnaround
    known = (g["key"] >= 0) & (g["api_end"] != NONE)
    split, _ = split_points(a, b, known, g["api_start"], g["api_end"], g["node_wait"])
    hit, calls = np.zeros(n, bool), {}
    if n and (rest > 0).any():
        hit, calls = _wait_calls(profile, int(g["device_id"][0]), g["key"], g["api_start"], known & (rest > 0))
    whole = (rest > 0) & (hit | (g["node_wait"] != 0))
    other = np.zeros(n, np.int64)
    others = [x for x in profile.devices if n and x != int(g["device_id"][0])]
    if others and (rest > 0).any():
        u = kernel_unions(profile, w, others)
        busy = merge(np.concatenate([u[x].starts for x in others]), np.concatenate([u[x].ends for x in others]))
        other = np.where(whole, 0, np.minimum(busy.overlap(split, b), rest))
    wait = np.where(whole, rest, other)
    return {"turnaround": turnaround, "wait": wait, "launch_latency": rest - wait, "short": short,
            "call_wait": np.where(hit, rest, 0), "other_wait": other, "calls": calls}


def _wait_calls(profile, device: int, key: np.ndarray, api_start: np.ndarray,
                probe: np.ndarray) -> tuple[np.ndarray, dict[str, int]]:
    """Per gap: a stream-wait call on the launching thread (``key``) since that thread's previous launch call to
    ``device`` and before the closing kernel's (``api_start``), for the gaps ``probe``; the calls by name."""
    hit = np.zeros(len(key), bool)
    names = dict(profile.rows(WAIT_NAMES))
    if not names or not probe.any():
        return hit, {}
    threads = np.unique(key[probe])
    ids, tids = ",".join(map(str, names)), ",".join(map(str, threads.tolist()))
    waits = profile.con.execute(f"""SELECT global_tid, start, name_id FROM api_calls WHERE name_id IN ({ids})
                                    AND global_tid IN ({tids}) ORDER BY 1, 2""").fetchnumpy()
    if not len(waits["start"]):
        return hit, {}
    launches = profile.con.execute(f"""SELECT DISTINCT api_global_tid AS k, api_start FROM launches
        WHERE device_id = {int(device)} AND api_global_tid IN ({tids}) AND api_start IS NOT NULL
        ORDER BY 1, 2""").fetchnumpy()
    counts: dict[str, int] = {}
    wk, ws, wn = (np.asarray(waits[c], np.int64) for c in ("global_tid", "start", "name_id"))
    lk, ls = np.asarray(launches["k"], np.int64), np.asarray(launches["api_start"], np.int64)
    for t in threads.tolist():
        sel = np.flatnonzero(probe & (key == t))
        starts, w_start, w_name = ls[lk == t], ws[wk == t], wn[wk == t]
        s = api_start[sel]
        i = np.searchsorted(starts, s, side="left")
        prev = np.where(i > 0, starts[np.maximum(i - 1, 0)], np.iinfo(np.int64).min)
        lo, hi = np.searchsorted(w_start, prev, side="left"), np.searchsorted(w_start, s, side="left")
        hit[sel] = hi > lo
        for x, y in zip(lo[hi > lo].tolist(), hi[hi > lo].tolist()):
            for nid in w_name[x:y].tolist():
                counts[names[nid]] = counts.get(names[nid], 0) + 1
    return hit, dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def latency_spread(latency: np.ndarray) -> tuple[float, float, float] | None:
    """(p10, p50, p90) of the gaps' launch_latency ns (those with some), or None: linear interpolation between
    closest ranks (numpy.percentile's default)."""
    x = latency[latency > 0]
    if not len(x):
        return None
    p10, p50, p90 = np.percentile(x, [10, 50, 90])
    return float(p10), float(p50), float(p90)
