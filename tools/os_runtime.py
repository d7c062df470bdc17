"""os_runtime: OS runtime calls by function (``nsys profile --trace=osrt``): how many, how long, on which threads.

What ``nsys stats --report osrt_sum`` reports, and on the same terms: the whole capture, whole call durations
(an OS runtime call is mostly outside the GPU window: start-up file reads, a teardown write), every thread of
every process. Per function: ``calls``, ``total_ns``, ``mean_ns``, ``median_ns`` (of the durations; the mean of
the two middle ones for an even count), ``min_ns``, ``max_ns``, ``pct_of_osrt`` (its share of all OS runtime
time: nsys' "Time (%)"), and beyond nsys:

- ``window_calls`` / ``window_ns``: its calls overlapping dashcam's window, durations clipped to it;
- ``wait``: whether it is a call a thread blocks in, waiting (measure/labels.py ``OS_WAIT_CALLS``: poll,
  sem_wait, futex); a wait costs the program only when the waiting thread is the one that should work;
- ``support_ns``: its time on the threads CUDA, CUPTI and nsys start in the process (measure/labels.py
  ``SUPPORT_THREAD_NAMES``: ``CUPTI worker thread``, ``cuda-EvtHandlr``), which is the tools' waiting, not the
  program's; ``program_ns`` = ``total_ns`` - ``support_ns``;
- ``before_ns`` / ``after_ns``: of its time, the parts before the window's start and after its end (start-up file
  reads; an output write at teardown);
- ``own_ns`` (``own_calls``: the calls with some of it): the program's own time in it: on the program's
  threads, outside the thread's CUDA API calls (a CUDA call's ``ioctl`` and ``mmap`` lie inside the call: the
  driver's work, counted once, as the call's);
- ``top_thread``: the thread with most of its time, and whether it makes CUDA API calls (``cuda_calls``: it
  drives the GPU, so its waits are the run's).

Functions are ranked by ``total_ns`` (as nsys does); ``name`` picks functions (case-insensitive, ``*`` and ``?``
as wildcards). Nested calls count each (as nsys does); the cpu tool's per-thread states count each instant once.
"""
from __future__ import annotations

import numpy as np
from pydantic import BaseModel, Field

from dashcam.measure.labels import is_os_wait, is_support_thread
from dashcam.profile.views import split_global_tid

from .api import name_matcher
from .base import Tool, ToolParams, ToolResult, WindowInfo
from .sync import api_window


class Params(ToolParams):
    name: str | None = Field(None, description="Only functions whose name matches: case-insensitive, * and ? as "
                                               "wildcards (pthread_*); without them the exact name (pwrite64).")


class OsThread(BaseModel):
    pid: int
    tid: int
    thread_name: str | None
    support: bool = Field(description="One of CUDA's, CUPTI's or nsys's own threads, not the program's.")
    cuda_calls: bool = Field(description="The thread makes CUDA API calls (it drives the GPU).")
    calls: int
    total_ns: int


class OsFunction(BaseModel):
    name: str
    calls: int = Field(description="Calls in the whole capture.")
    total_ns: int = Field(description="Their summed (whole) duration.")
    pct_of_osrt: float = Field(description="total_ns as % of all OS runtime time (nsys' Time (%)).")
    mean_ns: float
    median_ns: float
    min_ns: int
    max_ns: int
    threads: int = Field(description="Threads that made these calls.")
    wait: bool = Field(description="A call a thread blocks in, waiting (poll, sem_wait, futex, ...).")
    support_ns: int = Field(description="Of total_ns, the time on CUDA's, CUPTI's or nsys's own threads.")
    program_ns: int = Field(description="total_ns - support_ns: the program's own threads.")
    window_calls: int = Field(description="Calls overlapping the window.")
    window_ns: int = Field(description="Their durations clipped to the window.")
    before_ns: int = Field(description="Of total_ns, the part before the window's start.")
    after_ns: int = Field(description="Of total_ns, the part after the window's end.")
    own_ns: int = Field(description="Of program_ns, the part outside the calling thread's CUDA API calls.")
    own_calls: int = Field(description="The calls with some of own_ns.")
    top_thread: OsThread = Field(description="The thread with the most of this function's time.")


class Result(ToolResult):
    recorded: bool = Field(description="Whether the capture traced OS runtime calls (OSRT_API rows).")
    calls: int = Field(0, description="Matching calls in the capture.")
    total_ns: int = Field(0, description="Their summed duration.")
    program_ns: int = Field(0, description="Of total_ns, on the program's own threads.")
    window_ns: int = Field(0, description="The calls' durations clipped to the window, summed (thread time).")
    program_window_ns: int = Field(0, description="Of window_ns, on the program's own threads.")
    function_count: int = 0
    functions: list[OsFunction] = Field(default_factory=list, description="Most total_ns first (at most `limit`).")


def run(profile, params: Params) -> Result:
    from dashcam.profile.cpu_source import source

    w, window_note = api_window(profile, params)
    notes = [window_note] if window_note else []
    osrt = source(profile)
    if not osrt.has("OSRT_API"):
        return Result(tool="os_runtime", window=WindowInfo.of(w), recorded=False, notes=notes + [
            "No OS runtime calls in this capture: `nsys profile --trace=osrt` records them."])
    rows, name_of = osrt.osrt_all()
    if params.name:
        match = name_matcher(params.name)
        name_of = {i: n for i, n in name_of.items() if match(n)}
        if not name_of:
            notes.append(f"No OS runtime function matches name={params.name!r}.")
    keep = np.isin(rows["name_id"], np.fromiter(name_of, np.int64, len(name_of)))
    gtid, s, e, nid = (rows[k][keep] for k in ("gtid", "start", "end", "name_id"))
    d = e - s
    names = sorted(set(name_of.values()))
    ids = np.array(sorted(name_of), np.int64)  # each call's function as an index into names, vectorized
    code_of_id = np.array([names.index(name_of[int(i)]) for i in ids], np.int64)
    code = code_of_id[np.searchsorted(ids, nid)] if len(nid) else np.zeros(0, np.int64)
    thread_names = {(int(p), int(t)): n for p, t, n in profile.rows(
        "SELECT pid, tid, any_value(name) FROM threads WHERE name IS NOT NULL GROUP BY 1, 2")}
    threads, thread_of = np.unique(gtid, return_inverse=True)
    support_of = {int(g): is_support_thread(thread_names.get(split_global_tid(int(g)))) for g in threads}
    support = np.array([support_of[int(g)] for g in threads], bool)[thread_of] if len(gtid) else np.zeros(0, bool)
    clipped = np.clip(np.minimum(e, w.end_ns) - np.maximum(s, w.start_ns), 0, None)
    in_window = (s < w.end_ns) & (e > w.start_ns)
    before = np.clip(np.minimum(e, w.start_ns) - s, 0, None)
    after = np.clip(e - np.maximum(s, w.end_ns), 0, None)
    all_ns = int(d.sum())
    inside, drivers = _inside_cuda(profile, gtid, s, e)
    own = np.where(support, 0, d - inside)
    functions = []
    for k in np.unique(code).tolist():
        m = code == k
        dk = d[m]
        calls_by = np.bincount(thread_of[m], minlength=len(threads))
        ns_by = np.bincount(thread_of[m], weights=dk, minlength=len(threads)).astype(np.int64)
        top = int(np.lexsort((threads, -ns_by))[0])  # most time, then the lowest thread id
        g, n, ns = int(threads[top]), int(calls_by[top]), int(ns_by[top])
        p, t = split_global_tid(g)
        sup = int(dk[support[m]].sum())
        functions.append(OsFunction(
            name=names[k], calls=int(m.sum()), total_ns=int(dk.sum()),
            pct_of_osrt=round(100.0 * int(dk.sum()) / all_ns, 3) if all_ns else 0.0,
            mean_ns=round(float(dk.mean()), 1), median_ns=round(float(np.median(dk)), 1), min_ns=int(dk.min()),
            max_ns=int(dk.max()), threads=int((calls_by > 0).sum()), wait=is_os_wait(names[k]), support_ns=sup,
            program_ns=int(dk.sum()) - sup, window_calls=int(in_window[m].sum()), window_ns=int(clipped[m].sum()),
            before_ns=int(before[m].sum()), after_ns=int(after[m].sum()), own_ns=int(own[m].sum()),
            own_calls=int((own[m] > 0).sum()),
            top_thread=OsThread(pid=p, tid=t, thread_name=thread_names.get((p, t)), support=support_of[g],
                                cuda_calls=g in drivers, calls=n, total_ns=ns)))
    functions.sort(key=lambda f: (-f.total_ns, f.name))
    if len(functions) > params.limit:
        notes.append(f"functions: showing {params.limit} of {len(functions)}.")
    return Result(tool="os_runtime", window=WindowInfo.of(w), recorded=True, calls=int(len(d)), total_ns=all_ns,
                  program_ns=all_ns - int(d[support].sum()), window_ns=int(clipped.sum()),
                  program_window_ns=int(clipped[~support].sum()), function_count=len(functions),
                  functions=functions[: params.limit], notes=notes)


def _inside_cuda(profile, gtid: np.ndarray, s: np.ndarray, e: np.ndarray) -> tuple[np.ndarray, set[int]]:
    """Per OS runtime call, the part of it inside its thread's CUDA API calls (their union); and the threads
    (global ids, of those calling) that make CUDA API calls."""
    from dashcam.measure.intervals import merge

    out = np.zeros(len(s), np.int64)
    cuda = {(int(p), int(t)) for p, t in profile.rows(
        "SELECT DISTINCT pid, tid FROM api_calls WHERE pid IS NOT NULL AND tid IS NOT NULL")}
    drivers = set()
    for g in np.unique(gtid).tolist():
        p, t = split_global_tid(g)
        if (p, t) not in cuda:
            continue
        drivers.add(g)
        m = gtid == g
        calls = profile.con.execute(
            f"""SELECT start, "end" FROM api_calls WHERE pid = {p} AND tid = {t}
                AND "end" > {int(s[m].min())} AND start < {int(e[m].max())}""").fetchnumpy()
        if len(calls["start"]):
            out[m] = merge(calls["start"], calls["end"]).overlap(s[m], e[m])
    return out, drivers


def render(result: Result, console) -> None:
    """One table of the functions (times in ms/µs), then the notes."""
    from rich.table import Table
    from rich.text import Text

    from dashcam.text.format import fmt_ns
    from dashcam.text.tables import print_notes

    if not result.recorded:
        console.print(Text("os_runtime  the capture traced no OS runtime calls", style="bold"))
        print_notes(result.notes, console)
        return
    console.print(Text(f"os_runtime  the whole capture  ·  {result.calls:,} calls in {result.function_count} "
                       f"functions, {fmt_ns(result.total_ns)} ({fmt_ns(result.program_ns)} on the program's threads)",
                       style="bold"))
    if result.functions:
        t = Table(title="per function (whole calls, like nsys stats osrt_sum)", title_justify="left")
        for c, just in (("function", "left"), ("calls", "right"), ("total", "right"), ("% osrt", "right"),
                        ("median", "right"), ("max", "right"), ("wait", "left"), ("program's", "right"),
                        ("top thread", "left"), ("in window", "right")):
            t.add_column(c, justify=just)
        for f in result.functions:
            th = f.top_thread
            who = f"{th.tid}" + (f" {th.thread_name}" if th.thread_name else "") + (" (support)" if th.support else "")
            t.add_row(Text(f.name), f"{f.calls:,}", fmt_ns(f.total_ns), f"{f.pct_of_osrt:.1f}%", fmt_ns(f.median_ns),
                      fmt_ns(f.max_ns), "yes" if f.wait else "", fmt_ns(f.program_ns), Text(who), fmt_ns(f.window_ns))
        console.print(t)
    print_notes(result.notes, console)


TOOL = Tool(
    name="os_runtime",
    summary=("OS runtime calls per function over the whole capture, like nsys stats osrt_sum: calls, total/median/"
             "max time, share of OS runtime time, whether it is a wait, the time on the program's own threads (not "
             "CUDA's, CUPTI's or nsys's), the thread with most of it, its time inside the window."),
    params=Params, result=Result, run=run,
)
