"""api: CUDA API calls by function (runtime and driver): how many, how long, on which threads.

What ``nsys stats --report cuda_api_sum`` reports, on dashcam's window, plus the kernels each launch
function launched. Names have their version suffix stripped (``cudaLaunchKernel_v7000`` is
``cudaLaunchKernel``); backtrace duplicates of old exports are not counted (the ``api_calls`` view).

Rules (the terms are measure/definitions.py's: "API call time"):

- A call counts in the window when it overlaps it; every duration is its part inside the window
  (clipped), so ``total_ns`` of a function never exceeds the window times its threads.
- Per function: ``calls``, ``total_ns`` (sum of the clipped durations: thread time, can exceed the window
  when threads call it at once), ``mean_ns`` (total / calls, rounded), ``median_ns`` (of the clipped
  durations; the mean of the two middle ones for an even count, rounded), ``max_ns``, ``threads``, and
  ``pct_of_window``: the union over threads of its calls as % of the window (the time at least one
  thread was inside it), never over 100; ``calls_per_s`` = calls / window length.
- ``outside_calls`` / ``outside_ns``: calls of the function that do not overlap the window (full
  durations): with the whole profile, calls before the first or after the last GPU activity (start-up
  allocations, the first launch). A function called only outside the window is listed last with
  ``calls`` 0.
- Launch functions (``measure.labels.LAUNCH_API``: cudaLaunchKernel, cuLaunchKernel(Ex),
  cudaGraphLaunch, ...): ``launched`` lists the kernels overlapping the window whose launch call (same
  process and correlationId: the ``launches`` table) is of this function, by kernel name: count and
  kernel time inside the window, most first (at most 5), and ``launched_kernels`` counts them all.
- ``name``: a pattern on the function name, case-insensitive: ``*`` and ``?`` are wildcards
  (``cudaMemcpy*``); without them the name itself (a version suffix in it is ignored) and, when no
  function has that name, its variants (the name followed by more: ``cudaMemcpy`` finds cudaMemcpyAsync
  and cudaMemcpy2D when only those were called), with ``variants_of`` set to the name asked.
- ``gpu``: the calls of the processes with activity on that GPU (a host call carries no device).
- ``per_thread``: also each host thread's calls, clipped time, busy time (the union of its calls) and
  its costliest function.
- Without GPU activity (an API-only or CPU-only capture) the window is the span of the host rows
  (profile/host_window.py, as in ``sync``, ``nvtx`` and ``cpu``).
"""
from __future__ import annotations

import fnmatch
import re

import numpy as np
from pydantic import BaseModel, Field

from dashcam.measure.definitions import pct
from dashcam.measure.intervals import merge
from dashcam.measure.labels import LAUNCH_API

from .base import Tool, ToolParams, ToolResult, WindowInfo
from .sync import api_window

LAUNCHED_SHOWN = 5
VERSION_SUFFIX = re.compile(r"_v\d+$")


class Params(ToolParams):
    name: str | None = Field(None, description="Only functions whose name matches: case-insensitive, * and ? as "
                                               "wildcards (cudaMemcpy*); without them the exact name, e.g. cudaFree, "
                                               "or its variants when no function has it (variants_of).")
    per_thread: bool = Field(False, description="Also list each host thread's API time.")


class LaunchedKernel(BaseModel):
    kernel: str = Field(description="Kernel short name.")
    count: int = Field(description="Kernels of this name in the window launched by this function.")
    kernel_ns: int = Field(description="Their summed duration inside the window.")


class ApiFunction(BaseModel):
    name: str = Field(description="CUDA function, version suffix stripped.")
    kind: str = Field(description="runtime (cuda*) or driver (cu*).")
    calls: int = Field(description="Calls overlapping the window.")
    total_ns: int = Field(description="Sum of the calls' durations clipped to the window (thread time).")
    mean_ns: int = Field(description="total_ns / calls, rounded.")
    median_ns: int = Field(description="Median clipped call duration, rounded.")
    max_ns: int = Field(description="Longest call, clipped to the window.")
    calls_per_s: float = Field(description="calls / the window length in seconds.")
    threads: int = Field(description="Host threads that made these calls.")
    pct_of_window: float = Field(description="Union over threads of these calls (time at least one thread was "
                                             "inside the function) as % of the window.")
    outside_calls: int = Field(description="Calls of this function that do not overlap the window.")
    outside_ns: int = Field(description="Their summed (full) duration.")
    launched_kernels: int | None = Field(None, description="Launch functions: kernels in the window they launched "
                                                          "(joined on process and correlationId); None otherwise.")
    launched: list[LaunchedKernel] = Field(default_factory=list, description="Launch functions: those kernels by "
                                                                               "name, most first (at most 5).")


class ApiThread(BaseModel):
    pid: int
    tid: int
    thread_name: str | None
    calls: int = Field(description="Matching calls of this thread overlapping the window.")
    total_ns: int = Field(description="Sum of their clipped durations.")
    busy_ns: int = Field(description="Union of its calls inside the window (nested calls count once).")
    pct_of_window: float = Field(description="busy_ns as % of the window.")
    top_function: str = Field(description="Its function with the most total_ns.")


class Result(ToolResult):
    api_calls: int = Field(description="Matching calls overlapping the window, all functions and threads.")
    function_count: int = Field(description="Functions with calls overlapping the window.")
    busy_ns: int = Field(description="Union of all matching calls over all threads inside the window.")
    pct_of_window: float = Field(description="busy_ns as % of the window: when any thread was in a matching call.")
    outside_calls: int = Field(description="Matching calls that do not overlap the window.")
    variants_of: str | None = Field(None, description="The name asked when no function has it and its variants "
                                                       "(the name followed by more) are reported instead.")
    functions: list[ApiFunction] = Field(description="Per function, most total_ns first (at most `limit`); functions "
                                                     "called only outside the window last, with calls = 0.")
    threads: list[ApiThread] = Field(default_factory=list, description="With per_thread: per host thread, most "
                                                                        "busy_ns first (at most `limit`).")


def name_matcher(name: str | None):
    """A predicate on function names (module docstring, ``name``; os_runtime.py uses it too)."""
    if not name:
        return lambda n: True
    pat = name.strip().lower()
    if any(c in pat for c in "*?["):
        return lambda n: fnmatch.fnmatchcase(n.lower(), pat)
    pat = VERSION_SUFFIX.sub("", pat)
    return lambda n: n.lower() == pat


def _median(d: np.ndarray) -> int:
    return int(np.floor(np.median(d) + 0.5)) if len(d) else 0


def _gpu_pids(profile, gpu: int) -> list[int]:
    return [int(r[0]) for r in profile.rows(
        "SELECT DISTINCT pid FROM (SELECT pid, device_id FROM kernel_times UNION ALL SELECT pid, device_id "
        "FROM memcpy UNION ALL SELECT pid, device_id FROM memset) WHERE device_id = ? AND pid IS NOT NULL", [gpu])]


def _launched(profile, w, ids_by_name: dict[str, list[int]], gpu: int | None) -> dict[str, tuple[int, list]]:
    """Per launch function: (kernels launched in the window, [(kernel, count, kernel_ns)] most first)."""
    launch = {n: ids for n, ids in ids_by_name.items() if re.search(LAUNCH_API, n)}
    if not launch:
        return {}
    name_of = {i: n for n, ids in launch.items() for i in ids}
    device = f"AND device_id = {int(gpu)}" if gpu is not None else ""
    rows = profile.rows(f"""
        SELECT l.api_name_id, s.value, count(*), sum(least(l."end", {w.end_ns}) - greatest(l.start, {w.start_ns}))
        FROM launches l LEFT JOIN strings s ON s.id = l.short_name_id
        WHERE l."end" > {w.start_ns} AND l.start < {w.end_ns} {device}
          AND l.api_name_id IN ({', '.join(str(i) for i in name_of)})
        GROUP BY 1, 2""")
    out: dict[str, dict[str, list[int]]] = {}
    for name_id, kernel, n, ns in rows:
        per = out.setdefault(name_of[int(name_id)], {})
        k = per.setdefault(kernel or "<unnamed kernel>", [0, 0])
        k[0] += int(n)
        k[1] += int(ns or 0)
    return {fn: (sum(c for c, _ in per.values()),
                 sorted(((k, c, ns) for k, (c, ns) in per.items()), key=lambda x: (-x[1], -x[2], x[0])))
            for fn, per in out.items()}


def run(profile, params: Params) -> Result:
    w, window_note = api_window(profile, params)
    notes = [window_note] if window_note else []
    if not profile.has_table("runtime"):
        notes.append("No CUDA API rows (CUPTI_ACTIVITY_KIND_RUNTIME): the capture did not trace the CUDA API.")
    named = profile.rows("SELECT id, name FROM api_names")

    def ids_matching(pattern: str | None) -> dict[str, list[int]]:
        match, out = name_matcher(pattern), {}
        for i, n in named:
            if n is not None and match(n):
                out.setdefault(n, []).append(int(i))
        return out

    ids_by_name = ids_matching(params.name)
    variants_of = None
    if params.name and not ids_by_name and not any(c in params.name for c in "*?["):
        asked = VERSION_SUFFIX.sub("", params.name.strip())
        ids_by_name = ids_matching(asked + "*")
        if ids_by_name:
            variants_of = asked
            notes.append(f"No CUDA API function is named {asked!r}; its variants are reported: "
                         f"{', '.join(sorted(ids_by_name))}.")
    process_filter = ""
    if params.gpu is not None:
        profile.check_gpu(params.gpu)
        pids = _gpu_pids(profile, params.gpu)
        process_filter = f"AND pid IN ({', '.join(map(str, pids))})" if pids else "AND false"
        notes.append(f"gpu={params.gpu}: the calls of the processes with activity on GPU {params.gpu} "
                     "(a host call carries no device).")
    name_of = {i: n for n, ids in ids_by_name.items() for i in ids}
    if params.name and not name_of:
        top = [r[0] for r in profile.rows(
            "SELECT n.name FROM api_calls c JOIN api_names n ON n.id = c.name_id GROUP BY 1 ORDER BY count(*) DESC, 1 "
            "LIMIT 5")]
        notes.append(f"No CUDA API function matches name={params.name!r}"
                     + (f"; the most called are {', '.join(top)}." if top else "."))
    id_list = ", ".join(str(i) for i in name_of) or "NULL"
    in_window = f'"end" > {int(w.start_ns)} AND start < {int(w.end_ns)}'
    d = profile.con.execute(f"""
        SELECT name_id, coalesce(pid, -1) AS pid, coalesce(tid, -1) AS tid,
               greatest(start, {int(w.start_ns)}) AS s, least("end", {int(w.end_ns)}) AS e
        FROM api_calls WHERE name_id IN ({id_list}) AND {in_window} {process_filter}""").fetchnumpy()
    # each call's function as an index into fn_names (sorted): integer codes, not 3 M name strings
    fn_names = sorted(set(name_of.values()))
    ids = np.asarray(sorted(name_of), np.int64)
    code_of_id = np.asarray([fn_names.index(name_of[int(i)]) for i in ids], np.int64)
    codes = code_of_id[np.searchsorted(ids, np.asarray(d["name_id"], np.int64))] if len(ids) else \
        np.zeros(0, np.int64)
    pid, tid = np.asarray(d["pid"], np.int64), np.asarray(d["tid"], np.int64)
    s, e = np.asarray(d["s"], np.int64), np.asarray(d["e"], np.int64)
    dur = e - s
    outside = {name_of[int(i)]: (int(n), int(ns or 0)) for i, n, ns in profile.rows(f"""
        SELECT name_id, count(*), sum("end" - start) FROM api_calls
        WHERE name_id IN ({id_list}) AND NOT ({in_window}) {process_filter} GROUP BY 1""")}
    outside_by_name: dict[str, tuple[int, int]] = {}
    for n, (c, ns) in outside.items():  # several raw names (suffixes) may share a stripped name
        a, b = outside_by_name.get(n, (0, 0))
        outside_by_name[n] = (a + c, b + ns)
    launched = _launched(profile, w, ids_by_name, params.gpu)

    functions = []
    present = np.unique(codes).tolist()  # the functions called in the window, by name
    thread_key = pid * (1 << 32) + tid  # one value per (pid, tid): a tid has 24 bits (views.py TID), or is -1
    for k in present:
        n = fn_names[k]
        m = codes == k
        dn = dur[m]
        threads = len(np.unique(thread_key[m]))
        out_c, out_ns = outside_by_name.get(n, (0, 0))
        lk = launched.get(n)
        functions.append(ApiFunction(
            name=n, kind="runtime" if n.startswith("cuda") else "driver", calls=int(m.sum()),
            total_ns=int(dn.sum()), mean_ns=int(np.floor(dn.sum() / len(dn) + 0.5)), median_ns=_median(dn),
            max_ns=int(dn.max()), calls_per_s=round(int(m.sum()) * 1e9 / w.length_ns, 3) if w.length_ns else 0.0,
            threads=threads, pct_of_window=round(pct(merge(s[m], e[m]).total, w), 3),
            outside_calls=out_c, outside_ns=out_ns,
            launched_kernels=(lk[0] if lk else 0) if re.search(LAUNCH_API, n) else None,
            launched=[LaunchedKernel(kernel=k, count=c, kernel_ns=ns) for k, c, ns in (lk[1] if lk else [])]
            [:LAUNCHED_SHOWN]))
    inside = {fn_names[k] for k in present}
    functions += [ApiFunction(name=n, kind="runtime" if n.startswith("cuda") else "driver", calls=0, total_ns=0,
                              mean_ns=0, median_ns=0, max_ns=0, calls_per_s=0.0, threads=0, pct_of_window=0.0,
                              outside_calls=c, outside_ns=ns,
                              launched_kernels=0 if re.search(LAUNCH_API, n) else None)
                  for n, (c, ns) in sorted(outside_by_name.items()) if n not in inside]
    functions.sort(key=lambda f: (-f.total_ns, -f.outside_ns, f.name))
    if len(functions) > params.limit:
        notes.append(f"functions: showing {params.limit} of {len(functions)}.")

    threads = []
    if params.per_thread and len(s):
        thread_names = {(int(p), int(x)): tn for p, x, tn in profile.rows(
            "SELECT pid, tid, any_value(name) FROM threads WHERE name IS NOT NULL GROUP BY 1, 2")}
        for k in np.unique(thread_key):
            m = thread_key == k
            mine = codes[m]
            ns_of = np.zeros(len(fn_names), np.int64)
            np.add.at(ns_of, mine, dur[m])
            per_fn = {fn_names[k]: int(ns_of[k]) for k in np.unique(mine).tolist()}
            busy = merge(s[m], e[m]).total
            p, t = int(pid[m][0]), int(tid[m][0])
            threads.append(ApiThread(pid=p, tid=t, thread_name=thread_names.get((p, t)), calls=int(m.sum()),
                                     total_ns=int(dur[m].sum()), busy_ns=busy, pct_of_window=round(pct(busy, w), 3),
                                     top_function=max(per_fn, key=lambda f: (per_fn[f], f))))
        threads.sort(key=lambda x: (-x.busy_ns, x.pid, x.tid))
        if len(threads) > params.limit:
            notes.append(f"threads: showing {params.limit} of {len(threads)}.")
    busy_all = merge(s, e).total
    return Result(tool="api", window=WindowInfo.of(w), api_calls=int(len(s)), function_count=len(inside),
                  variants_of=variants_of,
                  busy_ns=busy_all, pct_of_window=round(pct(busy_all, w), 3),
                  outside_calls=sum(c for c, _ in outside_by_name.values()),
                  functions=functions[: params.limit], threads=threads[: params.limit], notes=notes)


def render(result: Result, console) -> None:
    """Functions as one table (times in ms/µs), then the kernels of each launch function, then threads."""
    from rich.table import Table
    from rich.text import Text

    from dashcam.text.format import fmt_ns
    from dashcam.text.tables import print_notes

    w = result.window
    console.print(Text(f"api  window {w.start_ms:.3f}–{w.end_ms:.3f} ms ({fmt_ns(w.length_ns)})  ·  "
                       f"{result.api_calls:,} calls in {result.function_count} functions, a thread inside one "
                       f"{result.pct_of_window:.1f}% of the window  ·  {result.outside_calls:,} calls outside it",
                       style="bold"))
    t = Table(title="per function (times clipped to the window)", title_justify="left")
    for c, just in (("function", "left"), ("kind", "left"), ("calls", "right"), ("total", "right"),
                    ("mean", "right"), ("median", "right"), ("max", "right"), ("threads", "right"),
                    ("% window", "right"), ("outside", "right")):
        t.add_column(c, justify=just)
    for f in result.functions:
        t.add_row(Text(f.name), Text(f.kind), f"{f.calls:,}", fmt_ns(f.total_ns), fmt_ns(f.mean_ns),
                  fmt_ns(f.median_ns), fmt_ns(f.max_ns), str(f.threads), f"{f.pct_of_window:.1f}%",
                  f"{f.outside_calls:,}")
    console.print(t)
    for f in result.functions:
        if f.launched:
            t = Table(title=f"{f.name} launched {f.launched_kernels:,} kernels in the window", title_justify="left")
            for c, just in (("kernel", "left"), ("count", "right"), ("kernel time", "right")):
                t.add_column(c, justify=just)
            for k in f.launched:
                t.add_row(Text(k.kernel), f"{k.count:,}", fmt_ns(k.kernel_ns))
            console.print(t)
    if result.threads:
        t = Table(title="per host thread", title_justify="left")
        for c, just in (("pid", "right"), ("tid", "right"), ("name", "left"), ("calls", "right"),
                        ("total", "right"), ("busy", "right"), ("% window", "right"), ("top function", "left")):
            t.add_column(c, justify=just)
        for x in result.threads:
            t.add_row(str(x.pid), str(x.tid), Text(x.thread_name or "-"), f"{x.calls:,}", fmt_ns(x.total_ns),
                      fmt_ns(x.busy_ns), f"{x.pct_of_window:.1f}%", Text(x.top_function))
        console.print(t)
    print_notes(result.notes, console)


TOOL = Tool(
    name="api",
    summary=("CUDA API calls per function (runtime and driver, version suffix stripped), like nsys stats "
             "cuda_api_sum: calls, total/mean/median/max time, % of the window when any thread was inside it, "
             "calls outside the window, the kernels each launch function launched; per_thread for host threads; "
             "name= to pick functions (cudaMemcpy*, cudaFree)."),
    params=Params, result=Result, run=run,
)
