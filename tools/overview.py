"""overview: what this profile is — versions, window, and per GPU its five time shares (kernel-busy, copy-busy,
busy, idle, kernel-idle: measure/definitions.py). A capture without GPU activity is described too: no GPUs, the
window its host rows' span (profile/host_window.py)."""
from __future__ import annotations

from pydantic import BaseModel, Field

from dashcam.profile.coverage import Coverage, coverage
from dashcam.profile.host_window import host_window
from dashcam.profile.recording import ProcessName, Recording, cuda_processes, recording, versions_line
from dashcam.profile.shares import device_shares

from . import workload as workload_tool
from .base import Tool, ToolParams, ToolResult, WindowInfo


class Params(ToolParams):
    pass


class DeviceOverview(BaseModel):
    device_id: int
    gpu_name: str | None = None
    sm_count: int | None = None
    kernel_count: int = Field(description="Kernels overlapping the window.")
    memcpy_count: int
    memset_count: int
    # the five time shares (definitions.md, "time shares"), each in ns and as % of the window
    kernel_busy_ns: int = Field(description="kernel-busy: the union of its kernels in the window.")
    kernel_busy_pct: float = Field(description="kernel-busy as % of the window.")
    copy_busy_ns: int = Field(description="copy-busy: the union of its memcpys and memsets in the window.")
    copy_busy_pct: float = Field(description="copy-busy as % of the window.")
    busy_ns: int = Field(description="busy: the union of its kernels, memcpys and memsets (any activity).")
    busy_pct: float = Field(description="busy as % of the window.")
    idle_ns: int = Field(description="idle: no activity on it at all, window - busy_ns.")
    idle_pct: float = Field(description="idle as % of the window.")
    kernel_idle_ns: int = Field(description="kernel-idle: no kernel running, window - kernel_busy_ns (the sum of "
                                            "its gaps, gpu_gaps).")
    kernel_idle_pct: float = Field(description="kernel-idle as % of the window.")


class Result(ToolResult):
    nsys_version: str | None = Field(description="The nsys that exported the SQLite file (recording.recorded_with: "
                                                  "the one that recorded the capture).")
    recording: Recording = Field(description="The nsys versions that recorded and exported the capture, and the "
                                             "command lines it records (profile/recording.py).")
    schema_version: str | None
    window_ns: int = Field(description="Length of the analysis window (ns).")
    window_start_ns: int
    window_end_ns: int
    gpu_count: int
    devices: list[DeviceOverview]
    process_count: int
    processes: list[ProcessName] = Field(description="The processes with CUDA calls and their names.")
    api_calls: int
    nvtx_ranges: int
    workload: workload_tool.Result = Field(
        description="What program made the capture and its phases (the workload tool).")
    coverage: Coverage = Field(description="Which kinds of data the capture holds and the `nsys profile` options that "
                                           "record the others (docs/input.md, capture coverage).")


def _counts(profile, view: str, w, devices: list[int]) -> dict[int, int]:
    rows = profile.rows(
        f'SELECT device_id, count(*) FROM {view} WHERE "end" > ? AND start < ? GROUP BY 1',
        [w.start_ns, w.end_ns])
    return {int(d): int(n) for d, n in rows if d is not None}


def run(profile, params: Params) -> Result:
    w, window_note = host_window(profile, params.start_ms, params.end_ms)  # a CPU-only capture: its host span
    devices = profile.check_gpu(params.gpu)
    kc = _counts(profile, "kernel_times", w, devices)
    mc = _counts(profile, "memcpy", w, devices)
    sc = _counts(profile, "memset", w, devices)
    shares = device_shares(profile, w, devices)
    out = []
    for d in devices:
        g = profile.gpus.get(d)
        out.append(DeviceOverview(
            device_id=d, gpu_name=g.name if g else None, sm_count=g.sm_count if g else None,
            kernel_count=kc.get(d, 0), memcpy_count=mc.get(d, 0), memset_count=sc.get(d, 0),
            **shares[d].fields(),
        ))
    notes = [window_note] if window_note else []
    if not profile.has_table("runtime"):
        notes.append("No CUDA API rows (CUPTI_ACTIVITY_KIND_RUNTIME): launches and host waits cannot be analysed.")
    if not profile.has_table("kernel"):
        notes.append("No kernels in this profile (no CUPTI_ACTIVITY_KIND_KERNEL rows).")
    if not profile.metadata:
        notes.append("No export metadata table: nsys and schema versions unknown.")
    return Result(
        tool="overview", window=WindowInfo.of(w),
        nsys_version=profile.nsys_version, schema_version=profile.schema_version,
        window_ns=w.length_ns, window_start_ns=w.start_ns, window_end_ns=w.end_ns,
        gpu_count=len(profile.devices), devices=out,
        process_count=int(profile.one("SELECT count(DISTINCT pid) FROM api_calls")[0]),
        processes=cuda_processes(profile), recording=recording(profile),
        api_calls=profile.count("api_calls"),
        nvtx_ranges=int(profile.one("SELECT count(*) FROM nvtx_times WHERE is_range")[0]),
        workload=workload_tool.run(profile, workload_tool.Params(start_ms=params.start_ms, end_ms=params.end_ms)),
        coverage=coverage(profile), notes=notes,
    )


TOOL = Tool(
    name="overview",
    summary=("What the profile is: nsys and schema version, the analysis window, per GPU the kernel count, "
             "kernel-busy, copy-busy, busy (any activity), idle and kernel-idle % of the window, and the workload "
             "(the program's language and framework with the evidence). Start here."),
    params=Params, result=Result, run=run,
)


def render(result: Result, console) -> None:
    """The generic tables, then one line on the workload (``dashcam tool run workload`` has the evidence)."""
    from rich.text import Text

    from dashcam.text.tables import render as tables

    tables(result, console, skip=("recording",))
    rec = result.recording
    console.print(Text(versions_line(rec)))
    for what, line in (("command", rec.command), ("recorded by", rec.nsys_command)):
        if line:
            console.print(Text(f"{what}: {line}"))
    wl = result.workload
    what = (wl.family_label or "unknown") + (" + MPI" if wl.mpi else "") + (" + NCCL" if wl.nccl else "")
    console.print(Text(f"workload: {what} ({wl.why})"))
    console.print(Text("recorded: " + (", ".join(k.name for k in result.coverage.kinds if k.state == "recorded")
                                       or "nothing")))
