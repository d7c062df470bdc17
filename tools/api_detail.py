"""api_detail: one CUDA API or OS runtime function's analysis — its calls per thread, where it is called from, when
in the run, and what the GPU was doing while it ran (for a synchronize call: what it waited for).

The function is matched by name, case-insensitive, version suffix ignored (``cudaMemcpy`` is ``cudaMemcpy_v3020``);
a name no CUDA API call has is looked for among the OS runtime calls (``pwrite64``, ``sem_wait``: ``source``
says which). ``before_gpu_ns`` / ``after_gpu_ns``: the calls' union before the first / after the last kernel of
the calling processes' GPUs in the window (an output write at teardown is all ``after_gpu_ns``).
Definitions (docs/definitions.md, "API detail"): calls overlapping the window, durations clipped to it; where
called: the innermost NVTX range open on the calling thread when the call started; while it ran: the kernels of
the calling process's GPUs overlapping the union of its calls, by short name, with the time they overlap it.
"""
from __future__ import annotations

import numpy as np
from pydantic import BaseModel, Field

from dashcam.errors import BadParameter
from dashcam.measure.intervals import merge

from .base import Tool, ToolParams, ToolResult, WindowInfo
from .enclosing import enclosing_ranges


class Params(ToolParams):
    name: str = Field("cudaDeviceSynchronize", description="The function's name (case-insensitive, version suffix "
                                                           "ignored), e.g. cudaDeviceSynchronize, or an OS runtime "
                                                           "function's (pwrite64).")


class Caller(BaseModel):
    nvtx_range: str | None = Field(description="Group label of the innermost NVTX range open on the thread at the "
                                               "call ('train_step <n>'); null: none.")
    calls: int


class ThreadCalls(BaseModel):
    pid: int
    tid: int
    calls: int
    total_ns: int


class DuringKernel(BaseModel):
    name: str = Field(description="Kernel short name.")
    count: int = Field(description="Its kernels overlapping the calls.")
    overlap_ns: int = Field(description="Time they overlap the union of the calls.")


class Result(ToolResult):
    function: str
    source: str = Field("cuda_api", description="cuda_api or os_runtime: where the function's calls are.")
    calls: int
    total_ns: int = 0
    median_ns: float | None = None
    max_ns: int | None = None
    union_ns: int = Field(0, description="Union of the calls over all threads.")
    threads: list[ThreadCalls] = Field(default_factory=list, description="Most time first.")
    called_from: list[Caller] = Field(default_factory=list, description="Most calls first.")
    gpu_busy_ns: int = Field(0, description="Kernel time (union) of the calling processes' GPUs during the calls.")
    gpu_busy_pct: float | None = Field(None, description="gpu_busy_ns as % of union_ns.")
    during: list[DuringKernel] = Field(default_factory=list, description="Kernels running during the calls, most "
                                                                         "overlap first (at most 5).")
    before_gpu_ns: int = Field(0, description="Of union_ns, the time before the first kernel of the calling "
                                              "processes' GPUs in the window.")
    after_gpu_ns: int = Field(0, description="Of union_ns, the time after their last kernel in the window (the "
                                             "run's tail).")
    outside_calls: int = Field(0, description="Calls of the function that do not overlap the window.")
    outside_ns: int = Field(0, description="Their time.")
    capture_calls: int = Field(0, description="Calls in the whole capture: calls + outside_calls.")
    capture_ns: int = Field(0, description="Their time (calls in the window counted whole).")


def run(profile, params: Params) -> Result:
    fn = params.name.strip()
    if not fn:
        raise BadParameter("name must name a CUDA API function")
    w = profile.window(params.start_ms, params.end_ms)
    rows = profile.rows(
        f"""SELECT pid, tid, greatest(start, {w.start_ns}), least("end", {w.end_ns}), name FROM api
            WHERE lower(name) = lower(regexp_replace($1, '_v[0-9]+$', '')) AND "end" > {w.start_ns}
              AND start < {w.end_ns} ORDER BY start""", [fn])
    where = "cuda_api"
    everywhere = profile.rows(f"""SELECT count(*), coalesce(sum("end" - start), 0) FROM api WHERE lower(name) =
        lower(regexp_replace($1, '_v[0-9]+$', '')) AND NOT ("end" > {w.start_ns} AND start < {w.end_ns})""", [fn])[0]
    if not rows and not profile.rows("SELECT 1 FROM api_names WHERE lower(name) = lower(regexp_replace($1, "
                                     "'_v[0-9]+$', '')) LIMIT 1", [fn]):
        from dashcam.profile.cpu_source import source

        osrt = source(profile)
        rows = osrt.osrt_named(fn, w.start_ns, w.end_ns)
        if rows or any(n.lower() == fn.lower() for n in osrt.osrt_functions()):
            where = "os_runtime"
            out = [r for r in osrt.osrt_named(fn, -2**62, 2**62) if r[3] <= w.start_ns or r[2] >= w.end_ns]
            everywhere = (len(out), sum(r[3] - r[2] for r in out))
    base = {"tool": "api_detail", "window": WindowInfo.of(w), "function": rows[0][4] if rows else fn,
            "source": where, "outside_calls": int(everywhere[0]), "outside_ns": int(everywhere[1])}
    if where == "cuda_api":
        whole = profile.rows("""SELECT count(*), coalesce(sum("end" - start), 0) FROM api WHERE lower(name) =
            lower(regexp_replace($1, '_v[0-9]+$', ''))""", [fn])[0]
    else:
        every = osrt.osrt_named(fn, -2**62, 2**62)
        whole = (len(every), sum(r[3] - r[2] for r in every))
    base.update(capture_calls=int(whole[0]), capture_ns=int(whole[1]))
    if not rows:
        return Result(**base, calls=0, notes=[f"No call of {fn!r} in this window."])
    s = np.array([r[2] for r in rows], np.int64)
    e = np.array([r[3] for r in rows], np.int64)
    d = e - s
    union = merge(s, e)
    per: dict[tuple, list[int]] = {}
    for p, t, a, b, _ in rows:
        x = per.setdefault((int(p), int(t)), [0, 0])
        x[0] += 1
        x[1] += int(b - a)
    threads = [ThreadCalls(pid=p, tid=t, calls=v[0], total_ns=v[1])
               for (p, t), v in sorted(per.items(), key=lambda kv: -kv[1][1])]
    pids = ", ".join(str(p) for p in sorted({k[0] for k in per}))
    lo, hi = int(union.starts[0]), int(union.ends[-1])
    kernels = profile.rows(f"""SELECT start, "end", short_name FROM kernels WHERE pid IN ({pids})
                               AND "end" > {lo} AND start < {hi}""")
    busy_ns, during, before, after = 0, [], 0, 0
    first, last = profile.rows(f"""SELECT min(start), max("end") FROM kernels WHERE pid IN ({pids})
                                   AND "end" > {w.start_ns} AND start < {w.end_ns}""")[0]
    if first is not None:
        before = int(union.overlap(np.array([w.start_ns]), np.array([int(first)])).sum())
        after = int(union.overlap(np.array([int(last)]), np.array([w.end_ns])).sum())
    if kernels:
        ks = np.array([k[0] for k in kernels], np.int64)
        ke = np.array([k[1] for k in kernels], np.int64)
        ov = union.overlap(ks, ke)
        kunion = merge(ks, ke)
        busy_ns = int(kunion.overlap(union.starts, union.ends).sum())
        by: dict[str, list[int]] = {}
        for k, o in zip(kernels, ov):
            if o > 0:
                x = by.setdefault(k[2], [0, 0])
                x[0] += 1
                x[1] += int(o)
        during = [DuringKernel(name=k, count=v[0], overlap_ns=v[1])
                  for k, v in sorted(by.items(), key=lambda kv: (-kv[1][1], kv[0]))][:5]
    return Result(**base, calls=len(rows), total_ns=int(d.sum()), median_ns=round(float(np.median(d)), 1),
                  max_ns=int(d.max()), union_ns=union.total, threads=threads[: params.limit],
                  called_from=[Caller(nvtx_range=k, calls=v)
                               for k, v in enclosing_ranges(profile, [(r[0], r[1], r[2]) for r in rows])],
                  gpu_busy_ns=busy_ns,
                  gpu_busy_pct=round(100.0 * busy_ns / union.total, 3) if union.total else None, during=during,
                  before_gpu_ns=before, after_gpu_ns=after)


TOOL = Tool(
    name="api_detail",
    summary=("One CUDA API or OS runtime function's analysis: calls and time per thread, the NVTX range it is called "
             "from, how much of it falls before the first or after the last kernel, and the kernels the GPU ran while "
             "it ran (what a synchronize call waited for)."),
    params=Params, result=Result, run=run,
)
