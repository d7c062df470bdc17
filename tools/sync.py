"""sync: how long host threads sat blocked in CUDA synchronize calls.

Sync calls are API calls whose name contains ``Synchronize`` (cudaStreamSynchronize,
cudaDeviceSynchronize, cudaEventSynchronize, cuStreamSynchronize, cuCtxSynchronize, ...).
``cudaStreamWaitEvent`` is not one: it makes a stream wait on the GPU and returns at once,
so it is left out (and counted in a note). Blocking copies (cudaMemcpy) are not counted here.

Calls are clipped to the window; every duration below is a clipped one.

- per API name: ``count`` calls overlapping the window; ``total_ns`` = sum over threads of
  the union of that thread's calls of that name (a thread never counts twice, but several
  threads blocked at once all count, so ``total_ns`` can exceed the window: thread time);
  ``pct_of_window`` = the union of those calls over all threads (the time at least one
  thread was blocked in it) as % of the window, so it never exceeds 100.
- per thread: ``total_ns`` = union of all its sync calls (a runtime call and the driver
  call nested in it count once), ``pct_of_window`` of it.

Without GPU activity (an API-only capture) the window is the span of the API calls.
"""
from __future__ import annotations

import numpy as np
from pydantic import BaseModel, Field

from dashcam.measure.definitions import Window, pct
from dashcam.measure.intervals import merge
from dashcam.profile.host_window import host_window

from .base import OmitNone, Tool, ToolParams, ToolResult, WindowInfo

# Ids of the API names (version suffix stripped) of sync calls and of stream-wait-event calls.
SYNC_NAME_IDS = "SELECT id FROM api_names WHERE name LIKE '%Synchronize%'"
TOP_CALLERS = 10  # calling functions listed per API
WAIT_EVENT_NAME_IDS = "SELECT id FROM api_names WHERE name LIKE '%StreamWaitEvent%'"


class Params(ToolParams):
    pass


class SyncCall(OmitNone):
    OMIT_NONE = frozenset({"callers"})

    name: str
    count: int = Field(description="Calls of this API overlapping the window.")
    threads: int = Field(description="Threads that made these calls.")
    total_ns: int = Field(description="Sum over threads of the union of that thread's calls, clipped to the window.")
    max_ns: int = Field(description="Longest single call, clipped to the window.")
    mean_ns: float = Field(description="Mean call: the calls' durations clipped to the window, summed, over count "
                                       "(to 0.1 ns).")
    pct_of_window: float = Field(description="Time at least one thread was blocked in this API (the union over "
                                             "threads) as % of the window; with one thread, total_ns / window.")
    callers: dict[str, int] | None = Field(None, description=(
        "Where the capture has call stacks (CUDA backtraces, OS runtime backtraces, CPU samples): the functions "
        "that made these calls -> calls named so, most first, top 10 (profile text); absent without stacks."))


class SyncThread(BaseModel):
    pid: int
    tid: int
    thread_name: str | None
    count: int = Field(description="Sync calls of this thread overlapping the window.")
    total_ns: int = Field(description="Union of the thread's sync calls inside the window: time it was blocked.")
    pct_of_window: float = Field(description="total_ns as % of the window.")
    top_call: str = Field(description="The API name with the most blocked time on this thread.")


class Result(ToolResult):
    sync_calls: int = Field(description="Sync calls overlapping the window, all threads.")
    excluded_wait_event_calls: int = Field(
        description="cudaStreamWaitEvent / cuStreamWaitEvent calls in the window: not host-blocking, not counted.")
    calls: list[SyncCall] = Field(description="Per API name, most blocked time first.")
    threads: list[SyncThread] = Field(description="Per host thread, most blocked time first (at most `limit`).")


def api_window(profile, params: Params) -> tuple[Window, str | None]:
    """The usual window, or the span of the host rows when the profile has no GPU activity (host_window.py)."""
    return host_window(profile, params.start_ms, params.end_ms)


def run(profile, params: Params) -> Result:
    w, window_note = api_window(profile, params)
    notes = [window_note] if window_note else []
    in_window = f'"end" > {int(w.start_ns)} AND start < {int(w.end_ns)}'
    process_filter = ""
    if params.gpu is not None:
        profile.check_gpu(params.gpu)
        # Host calls carry no device: keep the processes that drove this GPU (CUPTI sync records' deviceId is
        # not reliable for this: real exports record device 0 for every process).
        pids = [int(r[0]) for r in profile.rows(
            "SELECT DISTINCT pid FROM (SELECT pid, device_id FROM kernel_times UNION ALL SELECT pid, device_id "
            "FROM memcpy UNION ALL SELECT pid, device_id FROM memset) WHERE device_id = ? AND pid IS NOT NULL",
            [params.gpu])]
        process_filter = f"AND pid IN ({', '.join(map(str, pids))})" if pids else "AND false"
        notes.append(f"gpu={params.gpu}: sync calls of the processes with activity on GPU {params.gpu} "
                     "(a host call carries no device).")
    d, waits = _sync_calls(profile, w, in_window, process_filter)
    names = np.asarray(d["name"], dtype=object)
    pid = np.asarray(np.ma.filled(d["pid"], -1), np.int64)
    tid = np.asarray(np.ma.filled(d["tid"], -1), np.int64)
    s, e = np.asarray(d["s"], np.int64), np.asarray(d["e"], np.int64)

    per_name: dict[str, dict] = {}
    per_thread: dict[tuple[int, int], dict] = {}
    union_ns = {str(n): merge(s[names == n], e[names == n]).total for n in set(names.tolist())}
    thread_cuts = np.flatnonzero((pid[1:] != pid[:-1]) | (tid[1:] != tid[:-1])) + 1
    for a, b in zip(np.r_[0, thread_cuts], np.r_[thread_cuts, len(s)]):
        if b <= a:
            continue
        by_name = {}
        name_cuts = np.flatnonzero(names[a + 1:b] != names[a:b - 1]) + 1 + a
        for x, y in zip(np.r_[a, name_cuts], np.r_[name_cuts, b]):
            n = str(names[x])
            blocked = merge(s[x:y], e[x:y]).total
            by_name[n] = blocked
            row = per_name.setdefault(n, {"count": 0, "threads": 0, "total_ns": 0, "max_ns": 0, "sum_ns": 0})
            row["count"] += y - x
            row["sum_ns"] += int((e[x:y] - s[x:y]).sum())
            row["threads"] += 1
            row["total_ns"] += blocked
            row["max_ns"] = max(row["max_ns"], int((e[x:y] - s[x:y]).max()))
        per_thread[(int(pid[a]), int(tid[a]))] = {
            "count": b - a, "total_ns": merge(s[a:b], e[a:b]).total,
            "top_call": max(by_name, key=lambda k: (by_name[k], k))}

    thread_names = {(int(p), int(x)): n for p, x, n in profile.rows(
        "SELECT pid, tid, any_value(name) FROM threads WHERE name IS NOT NULL GROUP BY 1, 2")}
    calls = sorted((SyncCall(name=n, pct_of_window=round(pct(union_ns[n], w), 3),
                             mean_ns=round(r.pop("sum_ns") / r["count"], 1), **r)
                    for n, r in per_name.items()), key=lambda c: (-c.total_ns, c.name))
    threads = sorted((SyncThread(pid=p, tid=x, thread_name=thread_names.get((p, x)),
                                 pct_of_window=round(pct(r["total_ns"], w), 3), **r)
                      for (p, x), r in per_thread.items()), key=lambda t: (-t.total_ns, t.pid, t.tid))
    _callers(profile, calls, in_window, process_filter)
    if not profile.has_table("runtime"):
        notes.append("No CUDA API rows (CUPTI_ACTIVITY_KIND_RUNTIME): host synchronization cannot be measured.")
    if waits:
        notes.append(f"{waits} cudaStreamWaitEvent/cuStreamWaitEvent calls are not counted: they make a stream "
                     "wait on the GPU and do not block the host.")
    if len(threads) > params.limit:
        notes.append(f"threads: showing {params.limit} of {len(threads)} threads with sync calls.")
    return Result(tool="sync", window=WindowInfo.of(w), sync_calls=len(s), excluded_wait_event_calls=waits,
                  calls=calls, threads=threads[: params.limit], notes=notes)


def _ids(profile, sql: str) -> str:
    """The ids ``sql`` selects, as a literal list for IN (NULL: none)."""
    return ", ".join(str(int(r[0])) for r in profile.rows(sql)) or "NULL"


def _sync_calls(profile, w: Window, in_window: str, process_filter: str) -> tuple[dict, int]:
    """The sync calls overlapping the window, clipped to it (columns name, pid, tid, s, e; by thread, then name),
    and how many stream-wait-event calls overlap it.

    Both from one scan of the API calls, kept in memory (a materialized CTE) for the two answers: a second scan
    cost as much as the first on the 3.9 GB benchmark, whose call start and end are delta-encoded in the cache,
    so they are decoded whatever the filter keeps. The name ids are given as literals, so the filter reaches the
    Parquet reader; the few rows left are named by a join."""
    sync, wait = _ids(profile, SYNC_NAME_IDS), _ids(profile, WAIT_EVENT_NAME_IDS)
    d = profile.con.execute(f"""
        WITH c AS MATERIALIZED (
            SELECT name_id, pid, tid, greatest(start, {int(w.start_ns)}) AS s, least("end", {int(w.end_ns)}) AS e
            FROM api_calls WHERE name_id IN ({sync}, {wait}) AND {in_window} {process_filter})
        SELECT n.name, c.pid, c.tid, c.s, c.e, (SELECT count(*) FROM c WHERE name_id IN ({wait})) AS waits
        FROM c JOIN api_names n ON n.id = c.name_id WHERE c.name_id IN ({sync})
        ORDER BY c.pid, c.tid, n.name""").fetchnumpy()
    if len(d["waits"]):
        return d, int(d["waits"][0])
    # no sync call: no row to carry the count
    return d, int(profile.one(f"SELECT count(*) FROM api_calls WHERE name_id IN ({wait}) AND {in_window} "
                              f"{process_filter}")[0])


def _callers(profile, calls: list[SyncCall], in_window: str, process_filter: str) -> None:
    """Each API's calling functions (profile/host_activity.call_callers), where the capture has call stacks."""
    from dashcam.profile.gap_cpu import has_stacks
    from dashcam.profile.host_activity import call_callers

    if not calls or not has_stacks(profile):
        return
    rows = profile.rows(f"""SELECT n.name, c.global_tid, c.correlation_id, c.start, c."end" FROM api_calls c
        JOIN api_names n ON n.id = c.name_id
        WHERE c.name_id IN ({SYNC_NAME_IDS}) AND {in_window} {process_filter} AND c.global_tid IS NOT NULL""")
    found = call_callers(profile, [(g, k if k is not None else -1, s, e) for _, g, k, s, e in rows])
    per: dict[str, dict[str, int]] = {}
    for (n, *_), fn in zip(rows, found):
        if fn:
            per.setdefault(n, {})[fn] = per.setdefault(n, {}).get(fn, 0) + 1
    for c in calls:
        if c.name in per:
            c.callers = dict(sorted(per[c.name].items(), key=lambda kv: (-kv[1], kv[0]))[:TOP_CALLERS])


TOOL = Tool(
    name="sync",
    summary=("How long host threads were blocked in CUDA *Synchronize calls (stream, device, event, context): "
             "per API name count, blocked time and % of the window, and per thread its blocked time."),
    params=Params, result=Result, run=run,
)
