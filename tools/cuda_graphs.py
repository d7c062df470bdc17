"""cuda_graphs: are CUDA graphs used, how much of the GPU's work runs inside them, and would they help.

The rules (measure/definitions.py, "CUDA graphs"):

- A *graph kernel* has a graphNodeId (the graph was traced node by node); every other kernel is *eager*.
- A *graph launch* is one launch call that started graph kernels or a whole-graph execution on the device,
  counted once however many kernels it started. ``graphs``: the distinct graph ids (KERNEL.graphId, from
  the 2026 exports; CUPTI_ACTIVITY_KIND_GRAPH_TRACE.graphId), null when the export does not say.
- A *whole-graph execution* (CUPTI_ACTIVITY_KIND_GRAPH_TRACE, ``--cuda-graph-trace=graph``, nsys' default)
  is one graph launch as one range: its kernels are not recorded. ``whole_graph_ns`` is their union in the
  window and ``whole_graph_outside_kernels_ns`` the part of it no recorded kernel covers: time a kernel-only
  reading (kernel busy, gpu_gaps) counts as idle although the GPU ran the graph.
- ``trace_mode``: ``node`` (graph kernels, no whole-graph execution), ``graph`` (whole-graph executions
  only), ``both``, or ``none``; ``capture_mode`` is the capture option the export records
  (META_DATA_CAPTURE ``CUDA_GRAPH_TRACE_OPTIONS:MODE``).
- Per device, ``graph_kernel_pct`` = graph kernels' time / all kernels' time (durations clipped to the
  window), and per step (the iterations tool's steps) the same share inside the step.

Would graphs help? A graph replaces many launch calls by one, so it helps where the GPU waits on eager
launches. Per device the eager kernels (with their launch calls) get launch_latency's launch-bound verdict
(its five conditions, on the eager launch calls only; the busy condition on the device's kernel busy): a
launch-bound eager phase is a *candidate*. ``would_help`` is true with a candidate, false when there are
eager launches and none is launch-bound, null without eager launch calls. The findings engine's remedies
that suggest graphs ask ``graphs_fit`` (below), so they never suggest them for work already in graphs.
"""
from __future__ import annotations

import re

import numpy as np
from pydantic import BaseModel, Field

from dashcam.measure.definitions import pct
from dashcam.measure.intervals import kernel_unions, merge
from dashcam.text.format import duration

from .base import Tool, ToolParams, ToolResult, WindowInfo
from .launch_latency import _percentiles, _verdict, call_ids, call_time, first_launch_spans

GRAPH_LAUNCH_API = r"^cu(da)?GraphLaunch"
CAPTURE_MODE_KEY = r"^(PROCESS_\d+:)?CUDA_GRAPH_TRACE_OPTIONS:MODE$"
NODE_TRACE = "nsys profile --cuda-graph-trace=node"


class Params(ToolParams):
    pass


class EagerLaunches(BaseModel):
    kernels: int = Field(description="Eager kernels (no graphNodeId) overlapping the window.")
    launch_calls: int = Field(description="Their launch calls (each once).")
    median_kernel_ns: float | None = None
    api_p50_ns: float | None = Field(None, description="Median launch-call duration.")
    queue_p50_ns: float | None = Field(None, description="Median queue delay per launch call.")
    launch_call_pct: float = Field(description="The eager launch calls, each once, clipped to the window, as % of "
                                               "it.")
    launch_bound: bool | None = Field(None, description="launch_latency's verdict on the eager launches (null "
                                                        "without eager launch calls).")
    verdict_reason: str


class DeviceGraphs(BaseModel):
    device_id: int
    kernels: int = Field(description="Kernels overlapping the window.")
    graph_kernels: int = Field(description="Of them, kernels launched from CUDA graphs (graphNodeId set).")
    kernel_time_ns: int = Field(description="Kernel durations clipped to the window, summed.")
    graph_kernel_time_ns: int = Field(description="The same over graph kernels.")
    graph_kernel_pct: float = Field(description="graph_kernel_time_ns as % of kernel_time_ns.")
    graph_launches: int = Field(description="Launch calls that started graph kernels or whole-graph executions on "
                                            "this device (each once).")
    kernels_per_graph_launch: float | None = Field(None, description="Graph kernels / graph launches (node "
                                                                     "tracing).")
    graph_launch_api_p50_ns: float | None = Field(None, description="Median duration of those launch calls.")
    graphs: int | None = Field(None, description="Distinct graph ids launched; null when the export has no graph "
                                                 "ids.")
    whole_graph_executions: int = Field(description="Whole-graph executions overlapping the window.")
    whole_graph_ns: int = Field(description="Their union inside the window.")
    whole_graph_pct: float = Field(description="whole_graph_ns as % of the window.")
    whole_graph_outside_kernels_ns: int = Field(description="The part of whole_graph_ns no recorded kernel covers: "
                                                            "counted as idle by kernel busy and gpu_gaps.")
    eager: EagerLaunches
    candidate: bool = Field(description="Its eager launches are launch-bound: a CUDA graph would cut the launch "
                                        "calls.")


class GraphRow(BaseModel):
    graph_id: int
    device_id: int
    launches: int = Field(description="Launches of this graph overlapping the window.")
    kernels: int = Field(description="Its kernels traced node by node (0 when traced as whole graphs).")
    time_ns: int = Field(description="Its kernels' durations, or its whole-graph executions', clipped, summed.")
    mean_launch_span_ns: float = Field(description="Mean time from a launch's first kernel start to its last "
                                                   "kernel end (or one whole-graph execution).")


class StepGraphs(BaseModel):
    index: int = Field(description="The step (iterations tool).")
    start_ns: int
    end_ns: int
    kernel_time_ns: int = Field(description="Kernel durations clipped to the step (every device).")
    graph_kernel_time_ns: int
    graph_kernel_pct: float = Field(description="graph_kernel_time_ns as % of kernel_time_ns.")
    whole_graph_ns: int = Field(description="Whole-graph executions inside the step (union per device, summed).")


class Result(ToolResult):
    used: bool = Field(description="Graph kernels, whole-graph executions or graph launch calls in the window.")
    trace_mode: str = Field(description="node, graph, both or none (module docstring).")
    capture_mode: str | None = Field(None, description="The capture's --cuda-graph-trace option as the export "
                                                       "records it (META_DATA_CAPTURE), when it does.")
    graph_launch_calls: int = Field(description="cudaGraphLaunch / cuGraphLaunch calls overlapping the window.")
    graphs_created: int = Field(description="Graphs created or instantiated in the capture (CUDA_GRAPH_EVENTS "
                                            "rows with a graphId; host side).")
    graph_nodes_created: int = Field(description="Graph nodes created in the capture (CUDA_GRAPH_NODE_EVENTS, or "
                                                 "CUDA_GRAPH_EVENTS with graphNodeId in 2.x exports).")
    devices: list[DeviceGraphs]
    graphs: list[GraphRow] = Field(default_factory=list, description="Per graph id and device, most time first "
                                                                     "(at most `limit`).")
    steps: list[StepGraphs] = Field(default_factory=list, description="Per step (iterations tool), the first "
                                                                      "`limit`.")
    step_method: str | None = Field(None, description="How the iterations tool found the steps.")
    would_help: bool | None = Field(None, description="A device's eager launches are launch-bound (a candidate); "
                                                      "null without eager launch calls.")
    candidates: list[int] = Field(default_factory=list, description="Devices whose eager launches are "
                                                                    "launch-bound.")
    hidden: str | None = Field(None, description="With whole-graph executions: what that trace mode hides and how "
                                                 "to capture per node.")


def capture_mode(profile) -> str | None:
    """The --cuda-graph-trace option the export records, lower case (node | graph), or None."""
    for k, v in profile.metadata_items():
        if re.search(CAPTURE_MODE_KEY, k) and v:
            return str(v).strip().lower()
    return None


def _clip_sum(s: np.ndarray, e: np.ndarray, a: int, b: int) -> int:
    return int(np.maximum(np.minimum(e, b) - np.maximum(s, a), 0).sum()) if len(s) else 0


def _kernels(profile, w, devices: list[int]) -> dict[str, np.ndarray]:
    dev_list = ", ".join(str(int(d)) for d in devices) or "NULL"
    d = profile.con.execute(f"""
        SELECT l.device_id, l.start, l."end", CAST(l.graph_node_id IS NOT NULL AS BIGINT) AS graph,
               coalesce(k.graph_id, -1) AS graph_id, coalesce(l.api_end - l.api_start, -1) AS api_dur,
               coalesce(l.start - l.api_end, 0) AS queue, coalesce(l.api_global_tid, -1) AS call_thread,
               coalesce(l.api_start, -1) AS call_start, coalesce(l.api_end, -1) AS call_end,
               coalesce(l.pid, -1) AS pid, coalesce(l.short_name_id, -1) AS name,
               coalesce(l.correlation_id, -1) AS corr
        FROM launches l LEFT JOIN (SELECT pid, correlation_id, device_id, start, graph_id FROM kernel_times
                                   WHERE graph_id IS NOT NULL) k
          ON k.pid = l.pid AND k.correlation_id = l.correlation_id AND k.device_id = l.device_id AND k.start = l.start
        WHERE l."end" > {int(w.start_ns)} AND l.start < {int(w.end_ns)} AND l.device_id IN ({dev_list})
        ORDER BY l.device_id, l.start""").fetchnumpy()
    return {c: np.asarray(np.ma.getdata(v), np.int64) for c, v in d.items()}


def _eager(profile, w, device: int, k: dict[str, np.ndarray], busy_pct: float) -> EagerLaunches:
    eager = k["graph"] == 0
    matched = eager & (k["api_dur"] >= 0)
    call = call_ids(k["pid"], k["call_thread"], k["call_start"], k["call_end"], matched)
    calls, first = np.unique(call[matched], return_index=True)
    idx = np.flatnonzero(matched)[first]
    a50 = _percentiles(k["api_dur"][idx])[0]
    q50 = _percentiles(k["queue"][idx])[0]
    median_kernel = float(np.median(k["end"][eager] - k["start"][eager])) if eager.any() else None
    c = call_time(w, k["call_start"][idx], k["call_end"][idx],
                  first_launch_spans(profile, w, [device], eager_only=True).get(device, set()))
    steady = pct(c["launch_call_ns"] - c["first_launch_ns"], w)
    if len(calls):
        bound, reason = _verdict(busy_pct, q50, median_kernel, a50, len(calls), steady)
    else:
        bound, reason = None, "no verdict: no eager kernel on this device has a launch call in the capture"
    return EagerLaunches(kernels=int(eager.sum()), launch_calls=len(calls), median_kernel_ns=median_kernel,
                         api_p50_ns=a50, queue_p50_ns=q50, launch_call_pct=round(pct(c["launch_call_ns"], w), 3),
                         launch_bound=bound, verdict_reason=reason)


def _whole(profile, w, devices: list[int]) -> dict[str, np.ndarray]:
    dev_list = ", ".join(str(int(d)) for d in devices) or "NULL"
    d = profile.con.execute(f"""
        SELECT device_id, start, "end", coalesce(graph_id, -1) AS graph_id, coalesce(pid, -1) AS pid,
               coalesce(correlation_id, -1) AS corr
        FROM graph_trace WHERE "end" > {int(w.start_ns)} AND start < {int(w.end_ns)} AND device_id IN ({dev_list})
        ORDER BY device_id, start""").fetchnumpy()
    return {c: np.asarray(np.ma.getdata(v), np.int64) for c, v in d.items()}


def _graph_rows(w, device: int, k: dict[str, np.ndarray], g: dict[str, np.ndarray]) -> list[GraphRow]:
    rows = []
    gk = (k["graph"] == 1) & (k["graph_id"] >= 0)
    for gid in np.unique(np.r_[k["graph_id"][gk], g["graph_id"][g["graph_id"] >= 0]]):
        sel = gk & (k["graph_id"] == gid)
        keys = np.stack([k["pid"][sel], k["corr"][sel]], axis=1)
        spans = []
        if sel.any():
            inv = np.unique(keys, axis=0, return_inverse=True)[1].reshape(-1)
            for i in range(int(inv.max()) + 1):
                m = inv == i
                spans.append(int(k["end"][sel][m].max() - k["start"][sel][m].min()))
        gs = g["graph_id"] == gid
        spans += [int(x) for x in (g["end"][gs] - g["start"][gs])]
        time = _clip_sum(k["start"][sel], k["end"][sel], w.start_ns, w.end_ns) + \
            _clip_sum(g["start"][gs], g["end"][gs], w.start_ns, w.end_ns)
        rows.append(GraphRow(graph_id=int(gid), device_id=device, launches=len(spans), kernels=int(sel.sum()),
                             time_ns=time, mean_launch_span_ns=round(float(np.mean(spans)), 3)))
    return rows


def _steps(profile, w, params: Params, k: dict[str, np.ndarray], g: dict[str, np.ndarray]):
    from .iterations import Params as StepParams
    from .iterations import run as steps_run

    r = steps_run(profile, StepParams(gpu=params.gpu, start_ms=params.start_ms, end_ms=params.end_ms,
                                      limit=params.limit))
    out = []
    graph = k["graph"] == 1
    for s in r.steps:
        a, b = max(s.start_ns, w.start_ns), min(s.end_ns, w.end_ns)
        total = _clip_sum(k["start"], k["end"], a, b)
        in_graph = _clip_sum(k["start"][graph], k["end"][graph], a, b)
        whole = 0
        for d in np.unique(g["device_id"]):
            m = g["device_id"] == d
            whole += merge(g["start"][m], g["end"][m]).overlap(a, b) if m.any() else 0
        out.append(StepGraphs(index=s.index, start_ns=s.start_ns, end_ns=s.end_ns, kernel_time_ns=total,
                              graph_kernel_time_ns=in_graph,
                              graph_kernel_pct=round(100.0 * in_graph / total, 3) if total else 0.0,
                              whole_graph_ns=int(whole)))
    return out, r.method


def run(profile, params: Params) -> Result:
    w = profile.window(params.start_ms, params.end_ms)
    devices = profile.check_gpu(params.gpu)
    k_all, g_all = _kernels(profile, w, devices), _whole(profile, w, devices)
    unions = kernel_unions(profile, w, devices)
    out, rows = [], []
    for device in devices:
        km = k_all["device_id"] == device
        k = {c: v[km] for c, v in k_all.items()}
        gm = g_all["device_id"] == device
        g = {c: v[gm] for c, v in g_all.items()}
        graph = k["graph"] == 1
        total = _clip_sum(k["start"], k["end"], w.start_ns, w.end_ns)
        in_graph = _clip_sum(k["start"][graph], k["end"][graph], w.start_ns, w.end_ns)
        launched = graph & (k["api_dur"] >= 0)
        call = call_ids(k["pid"], k["call_thread"], k["call_start"], k["call_end"], launched)
        calls, first = np.unique(call[launched], return_index=True)
        launch_api = k["api_dur"][np.flatnonzero(launched)[first]]
        whole_calls = {(int(p), int(c)) for p, c in zip(g["pid"], g["corr"]) if c >= 0}
        whole = merge(g["start"], g["end"], w) if len(g["start"]) else None
        whole_ns = whole.total if whole is not None else 0
        outside = whole_ns - (int(whole.overlap(unions[device].starts, unions[device].ends).sum())
                              if whole is not None and len(unions[device]) else 0)
        ids = set(k["graph_id"][graph & (k["graph_id"] >= 0)].tolist()) | \
            set(g["graph_id"][g["graph_id"] >= 0].tolist())
        eager = _eager(profile, w, device, k, pct(unions[device].total, w))
        n_launches = len(calls) + len(whole_calls) + int((g["corr"] < 0).sum())
        out.append(DeviceGraphs(
            device_id=device, kernels=len(k["start"]), graph_kernels=int(graph.sum()), kernel_time_ns=total,
            graph_kernel_time_ns=in_graph, graph_kernel_pct=round(100.0 * in_graph / total, 3) if total else 0.0,
            graph_launches=n_launches,
            kernels_per_graph_launch=round(int(launched.sum()) / len(calls), 3) if len(calls) else None,
            graph_launch_api_p50_ns=_percentiles(launch_api)[0],
            graphs=len(ids) or None,
            whole_graph_executions=len(g["start"]), whole_graph_ns=whole_ns,
            whole_graph_pct=round(pct(whole_ns, w), 3), whole_graph_outside_kernels_ns=int(outside),
            eager=eager, candidate=bool(eager.launch_bound)))
        rows += _graph_rows(w, device, k, g)
    rows.sort(key=lambda r: (-r.time_ns, r.graph_id, r.device_id))
    n_calls = int(profile.one(f"""SELECT count(*) FROM api_calls WHERE "end" > {w.start_ns} AND start < {w.end_ns}
        AND name_id IN (SELECT id FROM api_names WHERE regexp_matches(name, '{GRAPH_LAUNCH_API}'))""")[0])
    created = profile.one("SELECT count(*) FILTER (WHERE graph_id IS NOT NULL), "
                          "count(*) FILTER (WHERE graph_node_id IS NOT NULL) FROM graph_events")
    has_nodes = any(d.graph_kernels for d in out)
    has_whole = any(d.whole_graph_executions for d in out)
    mode = {(True, True): "both", (True, False): "node", (False, True): "graph"}.get((has_nodes, has_whole), "none")
    used = has_nodes or has_whole or n_calls > 0
    notes, steps, method = [], [], None
    if has_nodes or has_whole:
        steps, method = _steps(profile, w, params, k_all, g_all)
    hidden = None
    if has_whole:
        lost = sum(d.whole_graph_outside_kernels_ns for d in out)
        hidden = (f"Traced as whole graphs (--cuda-graph-trace=graph, nsys' default): each graph launch is one range, "
                  f"so its kernels, their names and durations and the gaps between them are not recorded; kernel busy, "
                  f"gpu_gaps and top_kernels leave out {duration(lost)} of graph execution no recorded kernel "
                  f"covers. `{NODE_TRACE}` records every kernel of every graph launch.")
    if n_calls and not used:
        notes.append("Graph launch calls in the window but no graph kernels nor whole-graph executions: the graphs' "
                     "GPU work was not traced (CUDA trace off for that process, or the rows fell outside the window).")
    if has_nodes and not any(d.graphs for d in out):
        notes.append("Graph ids are not in this export (KERNEL.graphId exists from nsys 2026): graphs are not told "
                     "apart, only graph launches.")
    eager_calls = [d for d in out if d.eager.launch_calls]
    would = None if not eager_calls else any(d.candidate for d in eager_calls)
    if len(rows) > params.limit:
        notes.append(f"graphs: showing {params.limit} of {len(rows)} (graph, GPU) rows.")
    return Result(tool="cuda_graphs", window=WindowInfo.of(w), used=used, trace_mode=mode,
                  capture_mode=capture_mode(profile), graph_launch_calls=n_calls,
                  graphs_created=int(created[0] or 0), graph_nodes_created=int(created[1] or 0), devices=out,
                  graphs=rows[: params.limit], steps=steps, step_method=method, would_help=would,
                  candidates=[d.device_id for d in out if d.candidate], hidden=hidden, notes=notes)


def graphs_fit(result: Result, gpu: int | None = None) -> bool:
    """Whether "capture it in a CUDA graph" fits ``gpu`` (or any GPU): the one rule every remedy that suggests
    graphs asks (findings/advice/). It fits where the eager launches are launch-bound (a candidate), or where
    graphs hold less than half of the kernel and whole-graph time; not where the work already runs in graphs
    and what is left eager is not launch-bound."""
    for d in result.devices:
        if gpu is not None and d.device_id != gpu:
            continue
        in_graphs = d.graph_kernel_time_ns + d.whole_graph_ns
        if d.candidate or 2 * in_graphs < d.kernel_time_ns + d.whole_graph_ns:
            return True
    return False


TOOL = Tool(
    name="cuda_graphs",
    summary=("Are CUDA graphs used and would they help? Per GPU: kernels launched from graphs and their share of "
             "kernel time, graph launches (each charged once), distinct graphs, whole-graph executions (what that "
             "trace mode hides), per step the share of kernel time inside graphs, and whether the eager "
             "(non-graph) launches are launch-bound: the candidates for a graph."),
    params=Params, result=Result, run=run,
)
