"""Build small Nsight Systems exports with planted facts, in the real SQLite schema.

Tests, evals and the shipped example are made with this, so every number they assert
is known by construction. Three schema flavours, as real exports have them:

- ``"2024"``: META_DATA_EXPORT, KERNEL with greenContextId and mangledName, TARGET_INFO_GPU
  with cuDevice/smCount (nsys 2023.3 and later);
- ``"2022"``: EXPORT_META_DATA (with its misspelled keys), no greenContextId, and
  backtrace duplicates (eventClass 67) of every runtime call (nsys 2022.x);
- ``"2021"``: no metadata table, KERNEL without mangledName, no TARGET_INFO_GPU (``cuda_gpu_info=True``: the
  GPUs in TARGET_INFO_CUDA_GPU instead, as nsys 2021.1 and earlier wrote them: CUPTI's device record with
  deviceId, name, numMultiprocessors and the compute capability);
- ``"2026"``: the 2026 layout: KERNEL with graphId, QMD and cluster columns (as in the real nsys 2026.2.1 /
  3.25.0 exports), labelled nsys 2026.4 / schema 3.28.1 after the schema reference whose GPU_METRICS has
  rawTimestamp, whose CUDA_GPU_MEMORY_USAGE_EVENTS has streamId and the memory-pool columns, and whose
  CUDA_UM_CPU_PAGE_FAULT_EVENTS has sourceFile/sourceLine.

CUDA graphs, GPU metrics, memory usage and unified-memory faults follow the layout of each flavour
(``graph_launch``, ``gpu_metric``, ``alloc``/``free``, ``cpu_fault``/``gpu_fault``; see ``_write_extras``):

- graph creation events: ``"2022"`` CUDA_GRAPH_EVENTS with graphNodeId (schema 2.9.1, read off the real
  2022.2.1 export); later flavours CUDA_GRAPH_EVENTS (graphId, graphExecId) and CUDA_GRAPH_NODE_EVENTS;
- whole-graph executions (``--cuda-graph-trace=graph``): CUPTI_ACTIVITY_KIND_GRAPH_TRACE, every flavour but
  ``"2021"``; the kernels' graphId column only in ``"2026"``;
- GPU metrics: ``"2024"`` GPU_METRICS(timestamp, typeId, metricId, value) with TARGET_INFO_GPU_METRICS(typeId,
  sourceId, typeName, metricId, metricName) (the schema reference before rawTimestamp); ``"2026"`` adds
  GPU_METRICS.rawTimestamp; the 2.x schema has no GPU_METRICS table (``gpu_metric`` refuses it);
- CUDA_GPU_MEMORY_USAGE_EVENTS and the UM fault tables: ``"2022"`` as in the real 2022.2.1 export (no
  streamId, no pool columns), ``"2024"`` with the memory-pool columns, ``"2026"`` with streamId too.

    b = ExportBuilder()
    b.gpu(0, "NVIDIA H100 80GB HBM3", sm_count=132)
    b.launch(device=0, api_start=1_000, api_end=6_000, start=10_000, end=50_000, name="gemm")
    b.write("x.sqlite")
"""
from __future__ import annotations

import sqlite3
from datetime import datetime, timezone
from pathlib import Path

from dashcam.measure.gpu_models import model_of
from dashcam.measure.names import short_kernel_name

GLOBAL_BASE = 1 << 48
RUNTIME_SUFFIX = {
    "cudaLaunchKernel": "_v7000", "cudaLaunchCooperativeKernel": "_v9000", "cudaGraphLaunch": "_v10000",
    "cudaStreamSynchronize": "_v3020", "cudaDeviceSynchronize": "_v3020", "cudaEventSynchronize": "_v3020",
    "cudaMemcpy": "_v3020", "cudaMemcpyAsync": "_v3020", "cudaMalloc": "_v3020", "cudaFree": "_v3020",
    "cudaMemsetAsync": "_v3020", "cudaEventRecord": "_v3020", "cudaStreamWaitEvent": "_v3020",
    "cudaHostAlloc": "_v3020", "cudaMallocHost": "_v3020", "cudaEventQuery": "_v3020",
}
# copyKind of CUPTI_ACTIVITY_KIND_MEMCPY; UM_* are unified-memory page migrations (ENUM_CUDA_MEMCPY_OPER 11-13)
COPY_KIND = {"HtoD": 1, "DtoH": 2, "DtoD": 8, "HtoH": 9, "PtoP": 10, "UM_HtoD": 11, "UM_DtoH": 12, "UM_DtoD": 13}
MANAGED = 4  # ENUM_CUDA_MEM_KIND: managed memory, the host side of a migration
# ENUM_CUDA_MEMCPY_OPER as real exports hold it (id, name, label): `nsys stats` names copies by its labels
# (cuda_gpu_mem_time_sum / cuda_gpu_mem_size_sum refuse an export without it)
MEMCPY_OPER = [(0, "UNKNOWN", "Unknown"), (1, "HTOD", "Host-to-Device"), (2, "DTOH", "Device-to-Host"),
               (3, "HTOA", "Host-to-Array"), (4, "ATOH", "Array-to-Host"), (5, "ATOA", "Array-to-Array"),
               (6, "ATOD", "Array-to-Device"), (7, "DTOA", "Device-to-Array"), (8, "DTOD", "Device-to-Device"),
               (9, "HTOH", "Host-to-Host"), (10, "PTOP", "Peer-to-Peer"), (11, "UVM_HTOD", "Unified Host-to-Device"),
               (12, "UVM_DTOH", "Unified Device-to-Host"), (13, "UVM_DTOD", "Unified Device-to-Device")]
NVTX_PUSHPOP = 59


# GPU metrics: TARGET_INFO_GPU_METRICS.typeId per GPU is this base plus the GPU's TARGET_INFO_GPU.pwGpuId (what
# third-party readers of real exports join on); the sourceId is shared.
METRIC_TYPE_BASE = 0x1000100000000
METRIC_SOURCE = 0x1000100000000


def metric_type_id(pw_gpu_id: int) -> int:
    return METRIC_TYPE_BASE + pw_gpu_id


def global_pid(pid: int) -> int:
    return GLOBAL_BASE + (pid << 24)


def global_tid(pid: int, tid: int) -> int:
    return global_pid(pid) + tid


_KERNEL_COLS_2024 = """start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL,
    contextId INTEGER NOT NULL, greenContextId INTEGER, streamId INTEGER NOT NULL, correlationId INTEGER,
    globalPid INTEGER, demangledName INTEGER NOT NULL, shortName INTEGER NOT NULL, mangledName INTEGER,
    launchType INTEGER, cacheConfig INTEGER, registersPerThread INTEGER NOT NULL, gridX INTEGER NOT NULL,
    gridY INTEGER NOT NULL, gridZ INTEGER NOT NULL, blockX INTEGER NOT NULL, blockY INTEGER NOT NULL,
    blockZ INTEGER NOT NULL, staticSharedMemory INTEGER NOT NULL, dynamicSharedMemory INTEGER NOT NULL,
    localMemoryPerThread INTEGER NOT NULL, localMemoryTotal INTEGER NOT NULL, gridId INTEGER NOT NULL,
    sharedMemoryExecuted INTEGER, graphNodeId INTEGER, sharedMemoryLimitConfig INTEGER"""

# Columns the 2026 KERNEL table adds after sharedMemoryLimitConfig (real 2026.2.1 exports).
_KERNEL_COLS_2026 = """qmdBulkReleaseDone INTEGER, qmdPreexitDone INTEGER, qmdLastCtaDone INTEGER, graphId INTEGER,
    clusterX INTEGER, clusterY INTEGER, clusterZ INTEGER, clusterSchedulingPolicy INTEGER,
    maxPotentialClusterSize INTEGER, maxActiveClusters INTEGER, sharedMemoryRequestedPercentage INTEGER,
    tensorSizeMinusOneElements TEXT NOT NULL"""

SCHEMAS = {
    "2026": {"kernel_drop": set(), "kernel_extra": True, "activity_green": True, "meta": "META_DATA_EXPORT",
             "version": ("2026.4.1", "3.28.1"), "backtraces": False, "target_gpu": True},
    "2024": {"kernel_drop": set(), "activity_green": True, "meta": "META_DATA_EXPORT",
             "version": ("2024.5.1.113", "3.13.2"), "backtraces": False, "target_gpu": True},
    "2022": {"kernel_drop": {"greenContextId"}, "activity_green": False, "meta": "EXPORT_META_DATA",
             "version": ("2022.2.1.31", "2.9.1"), "backtraces": True, "target_gpu": True},
    "2021": {"kernel_drop": {"greenContextId", "mangledName"}, "activity_green": False, "meta": None,
             "version": (None, None), "backtraces": False, "target_gpu": False},
}


class ExportBuilder:
    """Collects events, then writes them as an ``nsys export --type sqlite`` file."""

    def __init__(self, schema: str = "2024", cuda_gpu_info: bool = False) -> None:
        if schema not in SCHEMAS:
            raise ValueError(f"schema must be one of {sorted(SCHEMAS)}")
        self.schema = schema
        self.cuda_gpu_info = cuda_gpu_info  # TARGET_INFO_CUDA_GPU (the old schemas' GPU table)
        self.cfg = SCHEMAS[schema]
        self.strings: dict[str, int] = {}
        self.kernels: list[tuple] = []
        self.runtime: list[tuple] = []
        self.memcpys: list[tuple] = []
        self.memsets: list[tuple] = []
        self.syncs: list[tuple] = []
        self.nvtx_rows: list[tuple] = []
        self.gpus: list[tuple] = []
        self.processes: dict[int, str] = {}
        self.threads: dict[tuple[int, int], str] = {}
        self.capture: list[tuple[str, str]] = []  # META_DATA_CAPTURE rows (2024 schema)
        self.streams: list[tuple[int, int, int]] = []  # ProcessStreams rows (globalPid, filenameId, contentId)
        self.system_env: list[tuple[str, str]] = []  # TARGET_INFO_SYSTEM_ENV (name, value) rows
        self.extra_tables: dict[str, int] = {}  # table name -> rows of a one-column stand-in table
        self.graph_traces: list[tuple] = []  # CUPTI_ACTIVITY_KIND_GRAPH_TRACE rows
        self.graph_creations: list[tuple] = []  # (start, end, gtid, name, graph_id, exec_id, node_id)
        self.metric_names: dict[tuple[int, str], int] = {}  # (device, metric name) -> metricId
        self.metric_samples: list[tuple[int, int, int, float]] = []  # (timestamp, device, metricId, value)
        self.memory_events: list[tuple] = []  # CUDA_GPU_MEMORY_USAGE_EVENTS rows
        self.cpu_faults: list[tuple] = []
        self.gpu_faults: list[tuple] = []
        self.diagnostics: list[tuple] = []  # DIAGNOSTIC_EVENT rows (timestamp, source, severity, text, globalPid)
        self._corr: dict[int, int] = {}
        self.session_start_utc_ns = 1764460800000000000  # TARGET_INFO_SESSION_START_TIME.utcEpochNs
        self.time_normalize: bool | None = None  # EXPORT_PARAM_TIME_NORMALIZE, written when set

    # -- ids ----------------------------------------------------------------------
    def sid(self, value: str) -> int:
        if value not in self.strings:
            self.strings[value] = len(self.strings) + 1
        return self.strings[value]

    def next_corr(self, pid: int) -> int:
        self._corr[pid] = self._corr.get(pid, 0) + 1
        return self._corr[pid]

    # -- entities -----------------------------------------------------------------
    def gpu(self, device_id: int, name: str = "NVIDIA H100 80GB HBM3", sm_count: int = 132,
            nsys_id: int | None = None) -> ExportBuilder:
        """A GPU. ``nsys_id`` is TARGET_INFO_GPU.id, which may differ from the CUDA device id."""
        self.gpus.append((device_id if nsys_id is None else nsys_id, name, sm_count, device_id))
        return self

    def process(self, pid: int, name: str = "python") -> ExportBuilder:
        self.processes[pid] = name
        return self

    def command(self, command: str, *args: str) -> ExportBuilder:
        """The launch command the capture records (META_DATA_CAPTURE PROCESS_0:COMMAND / ARGUMENT_n)."""
        self.capture = [("PROCESS_0:COMMAND", command)] + [(f"PROCESS_0:ARGUMENT_{i}", a) for i, a in enumerate(args)]
        return self

    def host(self, hostname: str, environment: dict[str, str] | None = None,
             process_environment: dict[str, str] | None = None) -> ExportBuilder:
        """The capture's machine as nsys records it: TARGET_INFO_SYSTEM_ENV Hostname and DeviceEnvironment
        (nsys's own environment, ``K=V;K=V``), and the launched process's environment variables
        (META_DATA_CAPTURE PROCESS_0:ENVIRONMENT_VARIABLE rows ``K="V"``, 2024 schema)."""
        self.system_env.append(("Hostname", hostname))
        if environment:
            self.system_env.append(("DeviceEnvironment", ";".join(f"{k}={v}" for k, v in environment.items())))
        for k, v in (process_environment or {}).items():
            self.capture.append(("PROCESS_0:ENVIRONMENT_VARIABLE", f'{k}="{v}"'))
        return self

    def install_dir(self, path: str) -> ExportBuilder:
        """The capture machine's nsys target folder (TARGET_INFO_SYSTEM_ENV TargetInstallDir), which names the
        recording nsys's version: ``/opt/nvidia/nsight-systems/2024.1.1/target-linux-x64``."""
        self.system_env.append(("TargetInstallDir", path))
        return self

    def session_clock(self, start_utc_ns: int, normalized: bool | None = None) -> ExportBuilder:
        """The session's start in UTC epoch ns (TARGET_INFO_SESSION_START_TIME) and, when ``normalized`` is given,
        the export's EXPORT_PARAM_TIME_NORMALIZE (true: the caller writes every timestamp as UTC epoch ns, as
        ``nsys export --ts-normalize=true`` does; false: relative to the session start, nsys's default)."""
        self.session_start_utc_ns, self.time_normalize = int(start_utc_ns), normalized
        return self

    def table(self, name: str, rows: int = 1) -> ExportBuilder:
        """An extra table with ``rows`` rows (e.g. CUPTI_ACTIVITY_KIND_OPENACC_LAUNCH): what the capture
        recorded besides CUDA; its columns do not matter to dashcam, which only asks whether it has rows."""
        self.extra_tables[name] = rows
        return self

    def thread(self, pid: int, tid: int, name: str = "python") -> ExportBuilder:
        self.threads[(pid, tid)] = name
        self.processes.setdefault(pid, name)
        return self

    # -- events -------------------------------------------------------------------
    def api(self, name: str, start: int, end: int, pid: int = 100, tid: int | None = None,
            corr: int | None = None, driver: bool = False) -> int:
        """A CUDA API call on thread ``tid`` (default: the process's main thread, tid == pid)."""
        tid = pid if tid is None else tid
        self.processes.setdefault(pid, "python")
        self.threads.setdefault((pid, tid), "python")
        corr = self.next_corr(pid) if corr is None else corr
        raw = name if driver or not name.startswith("cuda") else name + RUNTIME_SUFFIX.get(name, "_v3020")
        self.runtime.append((start, end, 1 if driver else 0, global_tid(pid, tid), corr, self.sid(raw), name))
        return corr

    def kernel(self, device: int, start: int, end: int, name: str = "gemm_kernel", stream: int = 7,
               pid: int = 100, corr: int | None = None, grid: tuple = (256, 1, 1), block: tuple = (128, 1, 1),
               short: str | None = None, graph_node: int | None = None, graph_id: int | None = None,
               registers: int = 32, shared: tuple[int, int] = (0, 0)) -> int:
        """A kernel; ``graph_node``/``graph_id`` when a CUDA graph launched it (graphId is written by the
        ``"2026"`` flavour only: older KERNEL tables have no such column); ``registers`` per thread and ``shared``
        memory per block (static, dynamic bytes)."""
        corr = self.next_corr(pid) if corr is None else corr
        short_id = self.sid(short or short_kernel_name(name))
        self.kernels.append((start, end, device, stream, corr, global_pid(pid), self.sid(name), short_id,
                             self.sid("_Z" + name.replace(" ", "")), grid, block, graph_node, graph_id, registers,
                             shared))
        return corr

    def graph_launch(self, device: int, api_start: int, api_end: int, kernels: list[tuple[int, int, str]],
                     graph_id: int = 1, exec_id: int | None = None, stream: int = 7, pid: int = 100,
                     tid: int | None = None, node_base: int | None = None, trace: str = "node",
                     api_name: str = "cudaGraphLaunch", grid: tuple = (256, 1, 1)) -> int:
        """One launch of a CUDA graph: the ``cudaGraphLaunch`` call and its kernels ``(start, end, name)``.

        ``trace="node"`` (``--cuda-graph-trace=node``): every kernel is a KERNEL row with the call's
        correlationId, graphNodeId ``node_base + i`` (graphId in the ``"2026"`` flavour);
        ``trace="graph"`` (nsys' default): no KERNEL rows, one CUPTI_ACTIVITY_KIND_GRAPH_TRACE row from the
        first kernel's start to the last one's end.
        """
        if trace not in ("node", "graph"):
            raise ValueError("trace is 'node' or 'graph'")
        corr = self.api(api_name, api_start, api_end, pid=pid, tid=tid, driver=not api_name.startswith("cuda"))
        base = graph_id * 1000 if node_base is None else node_base
        if trace == "node":
            for i, (s0, e0, name) in enumerate(kernels):
                self.kernel(device, s0, e0, name=name, stream=stream, pid=pid, corr=corr, grid=grid,
                            graph_node=base + i, graph_id=graph_id)
        else:
            if self.schema == "2021":
                raise ValueError("the 2021 flavour has no CUPTI_ACTIVITY_KIND_GRAPH_TRACE table")
            self.graph_traces.append((min(k[0] for k in kernels), max(k[1] for k in kernels), device, stream, corr,
                                      global_pid(pid), graph_id, graph_id if exec_id is None else exec_id))
        return corr

    def graph_created(self, start: int, end: int, graph_id: int, nodes: int = 0, pid: int = 100,
                      tid: int | None = None, exec_id: int | None = None) -> ExportBuilder:
        """Host-side graph creation events: the graph (cudaGraphInstantiate, graphId/graphExecId) and ``nodes``
        node creations (cudaGraphAddKernelNode, graphNodeId graph_id * 1000 + i), as the flavour stores them."""
        tid = pid if tid is None else tid
        self.threads.setdefault((pid, tid), "python")
        gtid = global_tid(pid, tid)
        self.graph_creations.append((start, end, gtid, "cudaGraphInstantiate", graph_id,
                                     graph_id if exec_id is None else exec_id, None))
        for i in range(nodes):
            self.graph_creations.append((start, end, gtid, "cudaGraphAddKernelNode", None, None, graph_id * 1000 + i))
        return self

    def diagnostic(self, text: str, t: int = 0, severity: int = 2, source: int = 3, pid: int = 100) -> ExportBuilder:
        """One of nsys' own messages (DIAGNOSTIC_EVENT): severity 1 info, 2 warning, 3 error; source 1 injection,
        2 daemon, 3 analysis; its text inline, as nsys 2024-2026 write it."""
        self.diagnostics.append((t, source, severity, text, global_pid(pid)))
        return self

    def program_output(self, stream: str, text: str, pid: int = 100) -> ExportBuilder:
        """What a launched process printed (ProcessStreams: nsys' stdout/stderr file name and its text in
        StringIds); ``stream`` is ``stdout`` or ``stderr``."""
        self.streams.append((global_pid(pid), self.sid(f"/tmp/nvidia/nsight_systems/streams/pid_{pid}_{stream}.log"),
                             self.sid(text)))
        return self

    def capture_option(self, key: str, value: str) -> ExportBuilder:
        """A META_DATA_CAPTURE row (``CUDA_GRAPH_TRACE_OPTIONS:MODE``, ``COLLECT_GPU_MEMORY_USAGE``, ...)."""
        self.capture.append((key, value))
        return self

    def gpu_metric(self, device: int, name: str, samples: list[tuple[int, float]]) -> ExportBuilder:
        """GPU metric samples ``(timestamp, value)`` of metric ``name`` on ``device`` (GPU_METRICS, with the
        metric named in TARGET_INFO_GPU_METRICS under the device's typeId)."""
        if self.schema in ("2022", "2021"):
            raise ValueError("GPU_METRICS is not in the 2.x schema")
        key = (device, name)
        if key not in self.metric_names:
            self.metric_names[key] = len([k for k in self.metric_names if k[0] == device])
        self.metric_samples += [(t, device, self.metric_names[key], v) for t, v in samples]
        return self

    def alloc(self, device: int, t: int, nbytes: int, address: int, pid: int = 100, kind: int = 2,
              corr: int | None = None, free: bool = False) -> ExportBuilder:
        """A CUDA_GPU_MEMORY_USAGE_EVENTS row: an allocation (or with ``free`` a deallocation) of ``nbytes`` at
        ``address``; ``kind`` is ENUM_CUDA_MEM_KIND (2 device, 4 managed)."""
        self.memory_events.append((t, global_pid(pid), device, address, nbytes, kind, 1 if free else 0, corr))
        return self

    def free(self, device: int, t: int, nbytes: int, address: int, pid: int = 100, kind: int = 2,
             corr: int | None = None) -> ExportBuilder:
        return self.alloc(device, t, nbytes, address, pid=pid, kind=kind, corr=corr, free=True)

    def cpu_fault(self, t: int, address: int, pid: int = 100) -> ExportBuilder:
        """A unified-memory page fault on the CPU (CUDA_UM_CPU_PAGE_FAULT_EVENTS)."""
        self.cpu_faults.append((t, global_pid(pid), address))
        return self

    def gpu_fault(self, device: int, start: int, end: int, address: int, faults: int = 1, pid: int = 100,
                  access: int = 1) -> ExportBuilder:
        """Unified-memory page faults of a GPU on one page (CUDA_UM_GPU_PAGE_FAULT_EVENTS; ``access`` is
        ENUM_CUDA_UNIF_MEM_ACCESS_TYPE: 1 read, 2 write)."""
        self.gpu_faults.append((start, end, global_pid(pid), device, address, faults, access))
        return self

    def launch(self, device: int, api_start: int, api_end: int, start: int, end: int, name: str = "gemm_kernel",
               stream: int = 7, pid: int = 100, tid: int | None = None, api_name: str = "cudaLaunchKernel",
               grid: tuple = (256, 1, 1), block: tuple = (128, 1, 1), registers: int = 32,
               shared: tuple[int, int] = (0, 0)) -> int:
        """A launch call and the kernel it launched, joined by (pid, correlationId)."""
        corr = self.api(api_name, api_start, api_end, pid=pid, tid=tid, driver=not api_name.startswith("cuda"))
        self.kernel(device, start, end, name=name, stream=stream, pid=pid, corr=corr, grid=grid, block=block,
                    registers=registers, shared=shared)
        return corr

    def memcpy(self, device: int, start: int, end: int, nbytes: int, kind: str = "HtoD", pinned: bool = True,
               stream: int = 7, pid: int = 100, corr: int | None = None, cause: int | None = None) -> int:
        """A copy; for a unified-memory migration (``UM_*``) ``cause`` is its migrationCause
        (ENUM_CUDA_UNIF_MEM_MIGRATION: 1 prefetch, 2 page fault, 3 speculative prefetch, 4 eviction)."""
        corr = self.next_corr(pid) if corr is None else corr
        host = 1 if pinned else 0
        src, dst = {"HtoD": (host, 2), "DtoH": (2, host), "DtoD": (2, 2), "HtoH": (host, host),
                    "PtoP": (2, 2), "UM_HtoD": (MANAGED, MANAGED), "UM_DtoH": (MANAGED, MANAGED),
                    "UM_DtoD": (MANAGED, MANAGED)}[kind]
        self.memcpys.append((start, end, device, stream, corr, global_pid(pid), nbytes, COPY_KIND[kind], src, dst,
                             cause))
        return corr

    def copy_call(self, device: int, api_start: int, api_end: int, start: int, end: int, nbytes: int,
                  kind: str = "HtoD", pinned: bool = True, stream: int = 7, pid: int = 100,
                  tid: int | None = None, api_name: str = "cudaMemcpyAsync") -> int:
        corr = self.api(api_name, api_start, api_end, pid=pid, tid=tid)
        self.memcpy(device, start, end, nbytes, kind=kind, pinned=pinned, stream=stream, pid=pid, corr=corr)
        return corr

    def memset(self, device: int, start: int, end: int, nbytes: int, stream: int = 7, pid: int = 100,
               corr: int | None = None) -> int:
        corr = self.next_corr(pid) if corr is None else corr
        self.memsets.append((start, end, device, stream, corr, global_pid(pid), nbytes))
        return corr

    def sync_event(self, device: int, start: int, end: int, corr: int, sync_type: int = 3, stream: int = 7,
                   pid: int = 100) -> None:
        """A CUPTI synchronization record (3 = stream sync, 4 = context sync, 1 = event sync)."""
        self.syncs.append((start, end, device, stream, corr, global_pid(pid), sync_type))

    def nvtx(self, label: str, start: int, end: int | None, pid: int = 100, tid: int | None = None,
             registered: bool = False, event_type: int = NVTX_PUSHPOP, domain: int = 0) -> None:
        """An NVTX range (or a mark with end=None); ``registered`` puts the label in textId."""
        tid = pid if tid is None else tid
        self.threads.setdefault((pid, tid), "python")
        self.processes.setdefault(pid, "python")
        text, text_id = (None, self.sid(label)) if registered else (label, None)
        self.nvtx_rows.append((start, end, event_type, text, global_tid(pid, tid), text_id, domain))

    # -- the CPU side: OS runtime calls, context switches, CPU samples, CUDA backtraces -------------------------
    # Written (by _write_cpu) only when they have rows, as nsys creates them. A stack is a list of frames,
    # innermost first: (symbol, module) or (symbol, module, unresolved).
    def _cpu(self) -> dict:
        return self.__dict__.setdefault("_cpu_rows", {"osrt": [], "osrt_chains": [], "sched": [], "samples": [],
                                                      "cuda_chains": [], "backtraces": {}})

    def _stack(self, stack) -> list[tuple[int, int, int]]:
        return [(self.sid(f[0]), self.sid(f[1]), int(len(f) > 2 and bool(f[2]))) for f in stack]

    def osrt(self, name: str, start: int, end: int, pid: int = 100, tid: int | None = None, stack=None,
             nesting: int = 0) -> None:
        """An OS runtime call (OSRT_API) on thread ``tid``; ``stack``: its backtrace (OSRT_CALLCHAINS)."""
        tid = pid if tid is None else tid
        self.threads.setdefault((pid, tid), "python")
        self.processes.setdefault(pid, "python")
        rows = self._cpu()
        chain = 0
        if stack:
            rows["osrt_chains"].append(self._stack(stack))
            chain = len(rows["osrt_chains"])  # ids from 1; 0 is "no backtrace"
        rows["osrt"].append((start, end, global_tid(pid, tid), self.sid(name), nesting, chain))

    def sched(self, start: int, running: bool, pid: int = 100, tid: int | None = None, cpu: int = 0) -> None:
        """A context switch (SCHED_EVENTS): the thread goes onto (``running``) or off a CPU at ``start``."""
        tid = pid if tid is None else tid
        self.threads.setdefault((pid, tid), "python")
        self.processes.setdefault(pid, "python")
        self._cpu()["sched"].append((start, cpu, 1 if running else 0, global_tid(pid, tid)))

    def sample(self, start: int, stack, pid: int = 100, tid: int | None = None, cpu: int = 0) -> None:
        """A CPU sample of the thread (COMPOSITE_EVENTS) with its call stack (SAMPLING_CALLCHAINS)."""
        tid = pid if tid is None else tid
        self.threads.setdefault((pid, tid), "python")
        self.processes.setdefault(pid, "python")
        self._cpu()["samples"].append((start, cpu, global_tid(pid, tid), self._stack(stack)))

    def backtrace(self, corr: int, stack, pid: int = 100) -> None:
        """The CUDA backtrace (CUDA_CALLCHAINS) of the runtime call with correlationId ``corr`` of ``pid``: on the
        call's own row in the 2024 flavour; in the 2022 flavour on its eventClass-67 duplicate, numbered from 0
        while the stacks are numbered from 1 (as the 2.x exports have it)."""
        rows = self._cpu()
        rows["cuda_chains"].append(self._stack(stack))
        rows["backtraces"][(pid, corr)] = len(rows["cuda_chains"])

    def _write_cpu(self, con: sqlite3.Connection) -> None:
        rows = self.__dict__.get("_cpu_rows")
        if not rows:
            return
        x = con.execute
        frame_cols = ("id INTEGER NOT NULL, symbol INTEGER NOT NULL, module INTEGER NOT NULL, kernelMode INTEGER, "
                      "thumbCode INTEGER, unresolved INTEGER, specialEntry INTEGER, originalIP INTEGER, "
                      "unwindMethod INTEGER, stackDepth INTEGER NOT NULL, PRIMARY KEY (id, stackDepth)")

        def frames(table: str, stacks: list[tuple[int, list]], cuda: bool = False) -> None:
            cuda_cols = ("id INTEGER NOT NULL, symbol INTEGER NOT NULL, module INTEGER NOT NULL, unresolved INTEGER, "
                         "originalIP INTEGER, stackDepth INTEGER NOT NULL, PRIMARY KEY (id, stackDepth)")
            cols = cuda_cols if cuda else frame_cols
            x(f"CREATE TABLE {table} ({cols})")
            for i, st in stacks:
                for depth, (sym, mod, unres) in enumerate(st):
                    x(f"INSERT INTO {table} (id, symbol, module, unresolved, originalIP, stackDepth) "
                      "VALUES (?,?,?,?,?,?)", (i, sym, mod, unres or None, 4096 + depth, depth))

        if rows["osrt"]:
            x("CREATE TABLE OSRT_API (start INTEGER NOT NULL, end INTEGER NOT NULL, eventClass INTEGER NOT NULL, "
              "globalTid INTEGER, nameId INTEGER NOT NULL, returnValue INTEGER NOT NULL, nestingLevel INTEGER, "
              "callchainId INTEGER NOT NULL)")
            con.executemany("INSERT INTO OSRT_API VALUES (?,?,27,?,?,0,?,?)", rows["osrt"])
        if rows["osrt_chains"]:
            frames("OSRT_CALLCHAINS", list(enumerate(rows["osrt_chains"], start=1)))
        if rows["sched"]:
            new = self.schema == "2024"
            x("CREATE TABLE SCHED_EVENTS (start INTEGER NOT NULL, cpu INTEGER NOT NULL, isSchedIn INTEGER NOT NULL, "
              "globalTid INTEGER" + (", threadState INTEGER, threadBlock INTEGER)" if new else ")"))
            con.executemany("INSERT INTO SCHED_EVENTS (start, cpu, isSchedIn, globalTid) VALUES (?,?,?,?)",
                            rows["sched"])
        if rows["samples"]:
            x("CREATE TABLE COMPOSITE_EVENTS (id INTEGER NOT NULL PRIMARY KEY, start INTEGER NOT NULL, cpu INTEGER, "
              "threadState INTEGER, globalTid INTEGER, cpuCycles INTEGER NOT NULL)")
            con.executemany("INSERT INTO COMPOSITE_EVENTS VALUES (?,?,?,1,?,1)",
                            [(i, t, cpu, g) for i, (t, cpu, g, _) in enumerate(rows["samples"], start=1)])
            frames("SAMPLING_CALLCHAINS", [(i, st) for i, (_, _, _, st) in enumerate(rows["samples"], start=1)])
        if rows["cuda_chains"]:
            frames("CUDA_CALLCHAINS", list(enumerate(rows["cuda_chains"], start=1)), cuda=True)
            old = self.cfg["backtraces"]  # the 2022 flavour: on the eventClass-67 rows, from 0
            x("UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET callchainId = NULL")
            for (pid, corr), chain in rows["backtraces"].items():
                x("UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET callchainId = ? WHERE correlationId = ? "
                  f"AND (globalTid >> 24) & 16777215 = ? AND eventClass {'=' if old else '<>'} 67",
                  (chain - 1 if old else chain, corr, pid))

    # -- output -------------------------------------------------------------------
    def write(self, path: str | Path, lazy: bool = False, shuffle_seed: int | None = None) -> Path:
        """Write the export. ``lazy``: leave out the activity and NVTX tables that hold no row, as nsys does
        (its tables are created when something of their kind is recorded); by default they are all there.
        ``shuffle_seed``: every table's rows in an order shuffled with that seed, not in time order (nsys 2025.6
        warns exported rows may no longer come out sorted by timestamp); the same facts otherwise."""
        path = Path(path)
        if path.exists():
            path.unlink()
        con = sqlite3.connect(path)
        try:
            self._write(con)
            self._write_cpu(con)
            if lazy:
                for t in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_MEMCPY",
                          "CUPTI_ACTIVITY_KIND_MEMSET", "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", "NVTX_EVENTS"):
                    if not con.execute(f"SELECT EXISTS (SELECT 1 FROM {t})").fetchone()[0]:
                        con.execute(f"DROP TABLE {t}")
            if shuffle_seed is not None:
                _shuffle_rows(con, shuffle_seed)
            con.commit()
        finally:
            con.close()
        return path

    def _write(self, con: sqlite3.Connection) -> None:
        cfg = self.cfg
        x = con.execute
        x("CREATE TABLE StringIds (id INTEGER NOT NULL PRIMARY KEY, value TEXT NOT NULL)")
        kernel_cols = _KERNEL_COLS_2024 + (", " + _KERNEL_COLS_2026 if cfg.get("kernel_extra") else "")
        kcols = [c for c in kernel_cols.replace("\n", " ").split(",") if c.split()[0] not in cfg["kernel_drop"]]
        x(f"CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL ({', '.join(c.strip() for c in kcols)})")
        green = "greenContextId INTEGER, " if cfg["activity_green"] else ""
        x("CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INTEGER NOT NULL, end INTEGER NOT NULL, "
          "eventClass INTEGER NOT NULL, globalTid INTEGER, correlationId INTEGER, nameId INTEGER NOT NULL, "
          "returnValue INTEGER NOT NULL, callchainId INTEGER)")
        x(f"CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY (start INTEGER NOT NULL, end INTEGER NOT NULL, "
          f"deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, {green}streamId INTEGER NOT NULL, "
          "correlationId INTEGER, globalPid INTEGER, bytes INTEGER NOT NULL, copyKind INTEGER NOT NULL, "
          "deprecatedSrcId INTEGER, srcKind INTEGER, dstKind INTEGER, srcDeviceId INTEGER, srcContextId INTEGER, "
          "dstDeviceId INTEGER, dstContextId INTEGER, migrationCause INTEGER, graphNodeId INTEGER, "
          "virtualAddress INTEGER)")
        x(f"CREATE TABLE CUPTI_ACTIVITY_KIND_MEMSET (start INTEGER NOT NULL, end INTEGER NOT NULL, "
          f"deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, {green}streamId INTEGER NOT NULL, "
          "correlationId INTEGER, globalPid INTEGER, value INTEGER NOT NULL, bytes INTEGER NOT NULL, "
          "graphNodeId INTEGER, memKind INTEGER)")
        x(f"CREATE TABLE CUPTI_ACTIVITY_KIND_SYNCHRONIZATION (start INTEGER NOT NULL, end INTEGER NOT NULL, "
          f"deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, {green}streamId INTEGER NOT NULL, "
          "correlationId INTEGER, globalPid INTEGER, syncType INTEGER NOT NULL, eventId INTEGER NOT NULL)")
        x("CREATE TABLE NVTX_EVENTS (start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL, "
          "rangeId INTEGER, category INTEGER, color INTEGER, text TEXT, globalTid INTEGER, endGlobalTid INTEGER, "
          "textId INTEGER, domainId INTEGER, uint64Value INTEGER, int64Value INTEGER, doubleValue REAL, "
          "uint32Value INTEGER, int32Value INTEGER, floatValue REAL, jsonTextId INTEGER, jsonText TEXT)")
        x("CREATE TABLE PROCESSES (globalPid INTEGER, pid INTEGER, name TEXT)")
        x("CREATE TABLE ThreadNames (nameId INTEGER NOT NULL, priority INTEGER, globalTid INTEGER)")
        x("CREATE TABLE TARGET_INFO_SESSION_START_TIME (utcEpochNs INTEGER, utcTime TEXT, localTime TEXT)")
        utc = datetime.fromtimestamp(self.session_start_utc_ns // 10**9, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
        x("INSERT INTO TARGET_INFO_SESSION_START_TIME VALUES (?, ?, ?)", (self.session_start_utc_ns, utc, utc))
        if cfg["target_gpu"]:
            x("CREATE TABLE TARGET_INFO_GPU (vmId INTEGER NOT NULL, id INTEGER NOT NULL, name TEXT, "
              "busLocation TEXT, isDiscrete INTEGER, l2CacheSize INTEGER, totalMemory INTEGER, "
              "memoryBandwidth INTEGER, clockRate INTEGER, smCount INTEGER, pwGpuId INTEGER, uuid TEXT, "
              "luid INTEGER, chipName TEXT, cuDevice INTEGER)")
            for nid, name, sms, cu in self.gpus:
                x("INSERT INTO TARGET_INFO_GPU VALUES (?,?,?,?,1,52428800,85899345920,3352320000000,1980000000,"
                  "?,?,?,NULL,'GH100',?)", (GLOBAL_BASE, nid, name, f"0000:{nid:02x}:00.0", sms, nid,
                                           f"uuid-{nid}", cu))
        if self.cuda_gpu_info:
            x("CREATE TABLE TARGET_INFO_CUDA_GPU (id INTEGER NOT NULL, deviceId INTEGER NOT NULL, name TEXT, "
              "computeCapabilityMajor INTEGER, computeCapabilityMinor INTEGER, numMultiprocessors INTEGER, "
              "numThreadsPerWarp INTEGER, maxWarpsPerMultiprocessor INTEGER, globalMemorySize INTEGER)")
            for nid, name, sms, cu in self.gpus:
                model = model_of(name)
                major, minor = model.compute if model else (0, 0)
                x("INSERT INTO TARGET_INFO_CUDA_GPU VALUES (?,?,?,?,?,?,32,48,10737418240)",
                  (nid, cu, name, major, minor, sms))
        meta, (nsys_v, schema_v) = cfg["meta"], cfg["version"]
        if meta:
            x(f"CREATE TABLE {meta} (name TEXT NOT NULL, value TEXT)")
            rows = [("EXPORT_PRODUCT_NAME", "NVIDIA Nsight Systems"), ("EXPORT_PRODUCT_VERSION", nsys_v),
                    ("EXPORT_SCHEMA_VERSION", schema_v), ("EXPORT_SCHEMA_VERSION_MAJOR", schema_v.split(".")[0])]
            rows += [("EXPORT_OUTUPT_FILE", "fixture.sqlite")] if meta == "EXPORT_META_DATA" else \
                [("EXPORT_PARAM_OUTPUT_FILE", "fixture.sqlite")]
            if self.time_normalize is not None:
                rows.append(("EXPORT_PARAM_TIME_NORMALIZE", "true" if self.time_normalize else "false"))
            con.executemany(f"INSERT INTO {meta} VALUES (?,?)", rows)
        if self.streams:
            x("CREATE TABLE ProcessStreams (globalPid INTEGER NOT NULL, filenameId INTEGER NOT NULL, "
              "contentId INTEGER NOT NULL)")
            con.executemany("INSERT INTO ProcessStreams VALUES (?,?,?)", self.streams)
        if self.capture and meta == "META_DATA_EXPORT":
            x("CREATE TABLE META_DATA_CAPTURE (name TEXT NOT NULL, value TEXT)")
            con.executemany("INSERT INTO META_DATA_CAPTURE VALUES (?,?)", self.capture)
        if self.system_env:
            x("CREATE TABLE TARGET_INFO_SYSTEM_ENV (globalVid INTEGER, devStateName TEXT NOT NULL, name TEXT NOT NULL, "
              "nameEnum INTEGER NOT NULL, value TEXT NOT NULL)")
            con.executemany("INSERT INTO TARGET_INFO_SYSTEM_ENV VALUES (?, 'Local (CLI)', ?, ?, ?)",
                            [(GLOBAL_BASE, k, {"Hostname": 619, "DeviceEnvironment": 610}.get(k, 0), v)
                             for k, v in self.system_env])
        for table, n in self.extra_tables.items():
            x(f'CREATE TABLE "{table}" (id INTEGER)')
            con.executemany(f'INSERT INTO "{table}" VALUES (?)', [(i,) for i in range(n)])

        for (start, end, dev, stream, corr, gpid, name_id, short_id, mangled_id, grid, block, gnode,
             gid, registers, shared) in self.kernels:
            vals = {"start": start, "end": end, "deviceId": dev, "contextId": 1, "greenContextId": None,
                    "streamId": stream, "correlationId": corr, "globalPid": gpid, "demangledName": name_id,
                    "shortName": short_id, "mangledName": mangled_id, "launchType": 0, "cacheConfig": 0,
                    "registersPerThread": registers, "gridX": grid[0], "gridY": grid[1], "gridZ": grid[2],
                    "blockX": block[0], "blockY": block[1], "blockZ": block[2], "staticSharedMemory": shared[0],
                    "dynamicSharedMemory": shared[1], "localMemoryPerThread": 0, "localMemoryTotal": 0, "gridId": corr,
                    "sharedMemoryExecuted": 0, "graphNodeId": gnode, "sharedMemoryLimitConfig": 0,
                    "qmdBulkReleaseDone": None, "qmdPreexitDone": None, "qmdLastCtaDone": None, "graphId": gid,
                    "clusterX": 0, "clusterY": 0, "clusterZ": 0, "clusterSchedulingPolicy": 0,
                    "maxPotentialClusterSize": 0, "maxActiveClusters": 0, "sharedMemoryRequestedPercentage": 0,
                    "tensorSizeMinusOneElements": "[]"}
            cols = [c.split()[0] for c in kcols]
            x(f"INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
              [vals[c] for c in cols])
        for start, end, cls, gtid, corr, name_id, plain in self.runtime:
            if cfg["backtraces"] and cls == 0:
                x("INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?,?,67,?,?,?,0,?)",
                  (start - 100, end + 100, gtid, corr, self.sid(plain), corr))
            x("INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?,?,?,?,?,?,0,NULL)",
              (start, end, cls, gtid, corr, name_id))
        g = "NULL, " if cfg["activity_green"] else ""
        for start, end, dev, stream, corr, gpid, nbytes, kind, src, dst, cause in self.memcpys:
            x(f"INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY VALUES (?,?,?,1,{g}?,?,?,?,?,NULL,?,?,?,1,?,1,?,NULL,NULL)",
              (start, end, dev, stream, corr, gpid, nbytes, kind, src, dst, dev, dev, cause))
        for start, end, dev, stream, corr, gpid, nbytes in self.memsets:
            x(f"INSERT INTO CUPTI_ACTIVITY_KIND_MEMSET VALUES (?,?,?,1,{g}?,?,?,0,?,NULL,2)",
              (start, end, dev, stream, corr, gpid, nbytes))
        for start, end, dev, stream, corr, gpid, stype in self.syncs:
            x(f"INSERT INTO CUPTI_ACTIVITY_KIND_SYNCHRONIZATION VALUES (?,?,?,1,{g}?,?,?,?,0)",
              (start, end, dev, stream, corr, gpid, stype))
        for row in self.nvtx_rows:
            start, end, etype, text, gtid, text_id, domain = row
            x("INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid, textId, domainId) "
              "VALUES (?,?,?,?,?,?,?)", (start, end, etype, text, gtid, text_id, domain))
        for pid, name in sorted(self.processes.items()):
            x("INSERT INTO PROCESSES VALUES (?,?,?)", (global_pid(pid), pid, name))
        for (pid, tid), name in sorted(self.threads.items()):
            x("INSERT INTO ThreadNames VALUES (?,?,?)", (self.sid(name), 20, global_tid(pid, tid)))
        self._write_extras(con)
        con.executemany("INSERT INTO StringIds VALUES (?,?)", [(i, v) for v, i in self.strings.items()])
        x("CREATE TABLE ENUM_CUDA_MEMCPY_OPER (id INTEGER NOT NULL PRIMARY KEY, name TEXT, label TEXT)")
        con.executemany("INSERT INTO ENUM_CUDA_MEMCPY_OPER VALUES (?,?,?)",
                        [(i, f"CUDA_MEMCPY_KIND_{n}", label) for i, n, label in MEMCPY_OPER])

    def _write_extras(self, con: sqlite3.Connection) -> None:
        """Graph, GPU metric, memory usage and UM fault tables, in the flavour's layout (module docstring).
        Like nsys, a table is written only when it has rows."""
        x = con.execute
        if self.diagnostics:
            x("CREATE TABLE DIAGNOSTIC_EVENT (timestamp INTEGER NOT NULL, timestampType INTEGER NOT NULL, "
              "source INTEGER NOT NULL, severity INTEGER NOT NULL, text TEXT NOT NULL, globalPid INTEGER)")
            con.executemany("INSERT INTO DIAGNOSTIC_EVENT VALUES (?,1,?,?,?,?)", self.diagnostics)
        green = "greenContextId INTEGER, " if self.cfg["activity_green"] else ""
        if self.graph_traces:
            x(f"CREATE TABLE CUPTI_ACTIVITY_KIND_GRAPH_TRACE (start INTEGER NOT NULL, end INTEGER NOT NULL, "
              f"deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, {green}streamId INTEGER NOT NULL, "
              "correlationId INTEGER, globalPid INTEGER, graphId INTEGER NOT NULL, graphExecId INTEGER NOT NULL)")
            g = "NULL, " if green else ""
            con.executemany(f"INSERT INTO CUPTI_ACTIVITY_KIND_GRAPH_TRACE VALUES (?,?,?,1,{g}?,?,?,?,?)",
                            self.graph_traces)
        if self.graph_creations:
            if self.schema == "2022":  # schema 2.9.1: one table of node creations (graphNodeId NOT NULL)
                x("CREATE TABLE CUDA_GRAPH_EVENTS (start INTEGER NOT NULL, end INTEGER NOT NULL, "
                  "eventClass INTEGER NOT NULL, globalTid INTEGER, nameId INTEGER NOT NULL, "
                  "graphNodeId INTEGER NOT NULL, originalGraphNodeId INTEGER)")
                con.executemany("INSERT INTO CUDA_GRAPH_EVENTS VALUES (?,?,0,?,?,?,NULL)",
                                [(a, b, t, self.sid(n + "_v10000"), node)
                                 for a, b, t, n, _, _, node in self.graph_creations if node is not None])
            else:
                x("CREATE TABLE CUDA_GRAPH_EVENTS (start INTEGER NOT NULL, end INTEGER NOT NULL, "
                  "eventClass INTEGER NOT NULL, globalTid INTEGER, nameId INTEGER NOT NULL, graphId INTEGER, "
                  "originalGraphId INTEGER, graphExecId INTEGER)")
                x("CREATE TABLE CUDA_GRAPH_NODE_EVENTS (start INTEGER NOT NULL, end INTEGER NOT NULL, "
                  "eventClass INTEGER NOT NULL, globalTid INTEGER, nameId INTEGER NOT NULL, "
                  "graphNodeId INTEGER NOT NULL, originalGraphNodeId INTEGER)")
                for a, b, t, n, gid, eid, node in self.graph_creations:
                    if node is None:
                        x("INSERT INTO CUDA_GRAPH_EVENTS VALUES (?,?,0,?,?,?,NULL,?)",
                          (a, b, t, self.sid(n + "_v10000"), gid, eid))
                    else:
                        x("INSERT INTO CUDA_GRAPH_NODE_EVENTS VALUES (?,?,0,?,?,?,NULL)",
                          (a, b, t, self.sid(n + "_v10000"), node))
        if self.metric_samples:
            raw = "rawTimestamp INTEGER NOT NULL, " if self.schema == "2026" else ""
            x("CREATE TABLE TARGET_INFO_GPU_METRICS (typeId INTEGER NOT NULL, sourceId INTEGER NOT NULL, "
              "typeName TEXT NOT NULL, metricId INTEGER NOT NULL, metricName TEXT NOT NULL)")
            x(f"CREATE TABLE GPU_METRICS ({raw}timestamp INTEGER, typeId INTEGER NOT NULL, "
              "metricId INTEGER NOT NULL, value INTEGER NOT NULL)")
            nsys_id = {cu: nid for nid, _, _, cu in self.gpus}
            type_of = {d: metric_type_id(nsys_id.get(d, d)) for d, _ in self.metric_names}
            con.executemany("INSERT INTO TARGET_INFO_GPU_METRICS VALUES (?,?,?,?,?)",
                            [(type_of[d], METRIC_SOURCE, f"GPU {nsys_id.get(d, d)} Metrics", mid, name)
                             for (d, name), mid in sorted(self.metric_names.items(), key=lambda kv: (kv[0][0], kv[1]))])
            rows = [(t, type_of[d], mid, v) for t, d, mid, v in self.metric_samples]
            if raw:
                # rawTimestamp: the same clock here
                con.executemany("INSERT INTO GPU_METRICS VALUES (?,?,?,?,?)", [(r[0], *r) for r in rows])
            else:
                con.executemany("INSERT INTO GPU_METRICS VALUES (?,?,?,?)", rows)
        if self.memory_events:
            cols = ("start INTEGER NOT NULL, globalPid INTEGER NOT NULL, deviceId INTEGER NOT NULL, "
                    "contextId INTEGER NOT NULL, address INTEGER NOT NULL, pc INTEGER NOT NULL, "
                    "bytes INTEGER NOT NULL, memKind INTEGER NOT NULL, memoryOperationType INTEGER NOT NULL, "
                    "name TEXT, correlationId INTEGER")
            if self.schema == "2026":
                cols += ", streamId INTEGER"
            if self.schema != "2022":
                cols += (", localMemoryPoolAddress INTEGER, localMemoryPoolReleaseThreshold INTEGER, "
                         "localMemoryPoolSize INTEGER, localMemoryPoolUtilizedSize INTEGER, "
                         "importedMemoryPoolAddress INTEGER, importedMemoryPoolProcessId INTEGER")
            x(f"CREATE TABLE CUDA_GPU_MEMORY_USAGE_EVENTS ({cols})")
            for t, gpid, dev, addr, nbytes, kind, op, corr in self.memory_events:
                x("INSERT INTO CUDA_GPU_MEMORY_USAGE_EVENTS (start, globalPid, deviceId, contextId, address, pc, "
                  "bytes, memKind, memoryOperationType, correlationId) VALUES (?,?,?,1,?,0,?,?,?,?)",
                  (t, gpid, dev, addr, nbytes, kind, op, corr))
        if self.cpu_faults:
            src = ", sourceFile INTEGER, sourceLine INTEGER" if self.schema == "2026" else ""
            x("CREATE TABLE CUDA_UM_CPU_PAGE_FAULT_EVENTS (start INTEGER NOT NULL, globalPid INTEGER NOT NULL, "
              "address INTEGER NOT NULL, originalFaultPc INTEGER, CpuInstruction INTEGER NOT NULL, "
              f"module INTEGER NOT NULL, unresolvedFaultPc INTEGER{src})")
            unknown = self.sid("[Unknown]")
            con.executemany("INSERT INTO CUDA_UM_CPU_PAGE_FAULT_EVENTS (start, globalPid, address, originalFaultPc, "
                            "CpuInstruction, module, unresolvedFaultPc) VALUES (?,?,?,0,?,?,1)",
                            [(t, gpid, addr, unknown, unknown) for t, gpid, addr in self.cpu_faults])
        if self.gpu_faults:
            x("CREATE TABLE CUDA_UM_GPU_PAGE_FAULT_EVENTS (start INTEGER NOT NULL, end INTEGER NOT NULL, "
              "globalPid INTEGER NOT NULL, deviceId INTEGER NOT NULL, address INTEGER NOT NULL, "
              "numberOfPageFaults INTEGER NOT NULL, faultAccessType INTEGER NOT NULL)")
            con.executemany("INSERT INTO CUDA_UM_GPU_PAGE_FAULT_EVENTS VALUES (?,?,?,?,?,?,?)", self.gpu_faults)


def _shuffle_rows(con: sqlite3.Connection, seed: int) -> None:
    """Rewrite every table's rows in a seeded random order. The rows move inside SQLite, so every value keeps its
    storage class (real exports hold text that is not UTF-8); a table with an INTEGER PRIMARY KEY keeps its key
    order (SQLite stores rows by it)."""
    import random

    rng = random.Random(seed)
    tables = [r[0] for r in con.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' "
        "AND sql NOT LIKE '%WITHOUT ROWID%' ORDER BY name")]
    for table in tables:
        rowids = [r[0] for r in con.execute(f'SELECT rowid FROM "{table}"')]
        rng.shuffle(rowids)
        con.execute("CREATE TEMP TABLE _order (pos INTEGER PRIMARY KEY, r INTEGER)")
        con.executemany("INSERT INTO _order VALUES (?, ?)", enumerate(rowids))
        con.execute(f'CREATE TEMP TABLE _rows AS SELECT t.* FROM _order o JOIN "{table}" t ON t.rowid = o.r '
                    "ORDER BY o.pos")
        con.execute(f'DELETE FROM "{table}"')
        con.execute(f'INSERT INTO "{table}" SELECT * FROM _rows ORDER BY rowid')
        con.execute("DROP TABLE _order")
        con.execute("DROP TABLE _rows")


def shuffled_copy(src: str | Path, dst: str | Path, seed: int) -> Path:
    """A copy of the export ``src`` at ``dst`` with every table's rows in a seeded random order (``write``'s
    ``shuffle_seed`` for an export already written, such as a scenario)."""
    import shutil

    dst = Path(dst)
    shutil.copyfile(src, dst)
    con = sqlite3.connect(dst)
    try:
        _shuffle_rows(con, seed)
        con.commit()
    finally:
        con.close()
    return dst
