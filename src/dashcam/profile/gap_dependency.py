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
the host blocked in them before the launch, which is ``sync_wait``. Summed per device for the whole-profile
window when the cache is built (``device_totals`` in the manifest's gap_totals); any other window (or a cache
without them) is split at query time from the gap table, its cut gaps from their recomputed causes (gpu_gaps).
"""
from __future__ import annotations

import numpy as np

from dashcam.measure.definitions import Window
from dashcam.measure.intervals import Union, int_columns, merge
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


def all_kernels(con, w: Window, devices: list[int]) -> Union | None:
    """The union of every device's kernels inside ``w`` (None with one device): inside a device's gap its own
    kernels never run, so there it is the other GPUs' kernels."""
    if len(devices) < 2:
        return None
    k = int_columns(con, f"""SELECT start, "end" FROM launches WHERE device_id IN ({",".join(map(str, devices))})
                             AND "end" > {w.start_ns} AND start < {w.end_ns}""")
    return merge(k["start"], k["end"], w)


def split_gaps(con, g: dict[str, np.ndarray], busy: Union | None) -> dict[str, object]:
    """Per gap of ``g`` (COLUMNS and ``dependency``, any devices): the three PARTS (ns), ``short`` (a turnaround
    gap), ``call_wait`` (the wait of the gaps behind a stream-wait call), ``other_wait`` (the wait other GPUs'
    kernels overlap, in gaps with no call and no graph wait); ``calls``: device -> the stream-wait calls behind
    its waits (name -> count). ``busy``: all_kernels (None: one GPU). ``con``: a connection with the model views."""
    a, b, dep, dev = g["start"], g["end"], g["dependency"], g["device_id"]
    n = len(a)
    short = (b - a < TURNAROUND_MAX_NS) & (g["before_id"] >= 0) & (g["after_id"] >= 0)
    turnaround = np.where(short, dep, 0)
    rest = dep - turnaround
    known = (g["key"] >= 0) & (g["api_end"] != NONE)
    hit, calls = _wait_calls(con, dev, g["key"], g["api_start"], known & (rest > 0))
    whole = (rest > 0) & (hit | (g["node_wait"] != 0))
    other = np.zeros(n, np.int64)
    if busy is not None and (rest > 0).any():
        split, _ = split_points(a, b, known, g["api_start"], g["api_end"], g["node_wait"])
        other = np.where(whole, 0, np.minimum(busy.overlap(split, b), rest))
    wait = np.where(whole, rest, other)
    return {"turnaround": turnaround, "wait": wait, "launch_latency": rest - wait, "short": short,
            "call_wait": np.where(hit, rest, 0), "other_wait": other, "calls": calls}


def device_totals(g: dict[str, np.ndarray], s: dict[str, object], d: int) -> dict:
    """Device ``d``'s split summed (gpu_gaps' DependencySplit, less turnaround_pct), from ``split_gaps``'s ``s``
    over the gaps ``g``; kept in the manifest's gap_totals for the whole-profile window."""
    at = g["device_id"] == d
    lat = s["launch_latency"][at]
    short = at & s["short"]
    spread = latency_spread(lat)
    return {"launch_latency_ns": int(lat.sum()), "wait_ns": int(s["wait"][at].sum()),
            "turnaround_ns": int(s["turnaround"][at].sum()), "wait_call_ns": int(s["call_wait"][at].sum()),
            "wait_other_gpus_ns": int(s["other_wait"][at].sum()), "wait_calls": s["calls"].get(d, {}),
            "latency_gaps": int((lat > 0).sum()),
            **(dict(zip(("latency_p10_ns", "latency_p50_ns", "latency_p90_ns"), (round(x, 3) for x in spread)))
               if spread else {}),
            "turnaround_gaps": int(short.sum()), "turnaround_gap_ns": int((g["end"] - g["start"])[short].sum())}


def _wait_calls(con, dev: np.ndarray, key: np.ndarray, api_start: np.ndarray,
                probe: np.ndarray) -> tuple[np.ndarray, dict[int, dict[str, int]]]:
    """Per gap (closing kernel on ``dev``, launched by thread ``key`` with a call starting at ``api_start``), for
    the gaps ``probe``: a stream-wait call on that thread since its previous launch call to that device and before
    this one; per device, those calls by name (most first)."""
    hit = np.zeros(len(key), bool)
    names = dict(con.execute(WAIT_NAMES).fetchall()) if probe.any() else {}
    if not names:
        return hit, {}
    tids = ",".join(map(str, np.unique(key[probe]).tolist()))
    waits = int_columns(con, f"""SELECT global_tid AS k, start, name_id FROM api_calls
        WHERE name_id IN ({",".join(map(str, names))}) AND global_tid IN ({tids}) ORDER BY 1, 2""")
    if not len(waits["start"]):
        return hit, {}
    threads = np.unique(waits["k"])
    launches = int_columns(con, f"""SELECT DISTINCT device_id AS d, api_global_tid AS k, api_start FROM launches
        WHERE api_global_tid IN ({",".join(map(str, threads.tolist()))}) AND api_start IS NOT NULL
          AND device_id IS NOT NULL ORDER BY 1, 2, 3""")
    counts: dict[int, dict[str, int]] = {}
    for t in threads.tolist():
        on_t = probe & (key == t)
        mine = waits["k"] == t
        w_start, w_name = waits["start"][mine], waits["name_id"][mine]
        for d in np.unique(dev[on_t]).tolist():
            sel = np.flatnonzero(on_t & (dev == d))
            starts = launches["api_start"][(launches["k"] == t) & (launches["d"] == d)]
            s = api_start[sel]
            i = np.searchsorted(starts, s, side="left")
            prev = np.where(i > 0, starts[np.maximum(i - 1, 0)], np.iinfo(np.int64).min)
            lo, hi = np.searchsorted(w_start, prev, side="left"), np.searchsorted(w_start, s, side="left")
            hit[sel] = hi > lo
            per = counts.setdefault(int(d), {})
            for x, y in zip(lo[hi > lo].tolist(), hi[hi > lo].tolist()):
                for nid in w_name[x:y].tolist():
                    per[names[nid]] = per.get(names[nid], 0) + 1
    return hit, {d: dict(sorted(c.items(), key=lambda kv: (-kv[1], kv[0]))) for d, c in counts.items() if c}


def latency_spread(latency: np.ndarray) -> tuple[float, float, float] | None:
    """(p10, p50, p90) of the gaps' launch_latency ns (those with some), or None: linear interpolation between
    closest ranks (numpy.percentile's default)."""
    x = latency[latency > 0]
    if not len(x):
        return None
    p10, p50, p90 = np.percentile(x, [10, 50, 90])
    return float(p10), float(p50), float(p90)
