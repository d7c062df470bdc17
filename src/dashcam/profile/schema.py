"""What dashcam reads from an export, and how DuckDB is set up to query it.

The first layer of the loader: the source tables and columns the cache copies (``cache/build.py``), the
columns that hold text, and the DuckDB settings every connection uses (the cache build's and the
opened profile's). Nothing here touches a file.
"""
from __future__ import annotations

import os
import tempfile

# Source table -> (short name, wanted columns). Only columns present are read; the
# views (views.py) fills the rest with NULL.
BIG_TABLES: dict[str, tuple[str, list[str]]] = {
    "CUPTI_ACTIVITY_KIND_KERNEL": (
        "kernel",
        ["start", "end", "deviceId", "streamId", "correlationId", "globalPid",
         "demangledName", "shortName", "gridX", "gridY", "gridZ",
         "blockX", "blockY", "blockZ", "graphNodeId", "graphId", "registersPerThread", "staticSharedMemory",
         "dynamicSharedMemory"],
    ),
    "CUPTI_ACTIVITY_KIND_RUNTIME": (
        "runtime",
        ["start", "end", "eventClass", "globalTid", "correlationId", "nameId"],
    ),
    "CUPTI_ACTIVITY_KIND_MEMCPY": (
        "memcpy",
        ["start", "end", "deviceId", "streamId", "correlationId", "globalPid",
         "bytes", "copyKind", "srcKind", "dstKind", "srcDeviceId", "dstDeviceId", "migrationCause"],
    ),
    "CUPTI_ACTIVITY_KIND_MEMSET": (
        "memset",
        ["start", "end", "deviceId", "streamId", "correlationId", "globalPid", "bytes"],
    ),
    "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION": (
        "sync",
        ["start", "end", "deviceId", "streamId", "correlationId", "globalPid", "syncType"],
    ),
    "NVTX_EVENTS": (
        "nvtx",
        ["start", "end", "eventType", "text", "globalTid", "textId", "domainId"],
    ),
    # CUDA graphs: whole-graph executions (--cuda-graph-trace=graph: one row per graph launch instead of its
    # kernels), and the host-side graph and node creation events (graphNodeId lived in CUDA_GRAPH_EVENTS
    # in schema 2.x, in CUDA_GRAPH_NODE_EVENTS from 3.x).
    "CUPTI_ACTIVITY_KIND_GRAPH_TRACE": (
        "graph_trace",
        ["start", "end", "deviceId", "streamId", "correlationId", "globalPid", "graphId", "graphExecId"],
    ),
    "CUDA_GRAPH_EVENTS": (
        "graph_events",
        ["start", "end", "globalTid", "nameId", "graphId", "originalGraphId", "graphExecId", "graphNodeId"],
    ),
    "CUDA_GRAPH_NODE_EVENTS": (
        "graph_node_events",
        ["start", "end", "globalTid", "nameId", "graphNodeId", "originalGraphNodeId"],
    ),
    # GPU metric samples (--gpu-metrics-devices): the time column is `timestamp`, not `start`.
    "GPU_METRICS": ("gpu_metrics", ["timestamp", "typeId", "metricId", "value"]),
    # Allocations and frees (--cuda-memory-usage=true) and unified-memory page faults.
    "CUDA_GPU_MEMORY_USAGE_EVENTS": (
        "gpu_memory",
        ["start", "globalPid", "deviceId", "address", "bytes", "memKind", "memoryOperationType",
         "correlationId", "streamId"],
    ),
    "CUDA_UM_CPU_PAGE_FAULT_EVENTS": ("um_cpu_faults", ["start", "globalPid", "address"]),
    "CUDA_UM_GPU_PAGE_FAULT_EVENTS": (
        "um_gpu_faults",
        ["start", "end", "globalPid", "deviceId", "address", "numberOfPageFaults", "faultAccessType"],
    ),
}
# A big table's first wanted column is its time column: a table without it is not read.

SMALL_TABLES: dict[str, tuple[str, list[str]]] = {
    "StringIds": ("strings", ["id", "value"]),
    "PROCESSES": ("processes", ["globalPid", "pid", "name"]),
    "ThreadNames": ("thread_names", ["nameId", "priority", "globalTid"]),
    "TARGET_INFO_GPU": ("target_gpu", ["id", "name", "smCount", "cuDevice", "busLocation",
                                       "totalMemory", "chipName", "memoryBandwidth", "clockRate", "pwGpuId"]),
    "TARGET_INFO_GPU_METRICS": ("gpu_metric_names", ["typeId", "sourceId", "typeName", "metricId", "metricName"]),
    "TARGET_INFO_CUDA_DEVICE": ("target_cuda_device", ["gpuId", "cudaId", "pid", "numMultiprocessors"]),
    # The GPUs of the old (nsys 2021.1 and earlier) schemas, before TARGET_INFO_GPU: CUPTI's device record, its
    # CUDA device id (deviceId, as the kernels'; id in some), name and SM count (numMultiprocessors).
    "TARGET_INFO_CUDA_GPU": ("target_cuda_gpu", ["id", "deviceId", "name", "numMultiprocessors",
                                                 "computeCapabilityMajor", "computeCapabilityMinor"]),
    "META_DATA_EXPORT": ("meta_export", ["name", "value"]),
    "EXPORT_META_DATA": ("export_meta", ["name", "value"]),
    "META_DATA_CAPTURE": ("meta_capture", ["name", "value"]),
    "TARGET_INFO_SESSION_START_TIME": ("session_start", ["utcEpochNs"]),
}

TEXT_COLUMNS = {"text", "value", "name", "busLocation", "chipName", "typeName", "metricName"}
# Columns whose type differs from what their name means elsewhere: (short table name, column) -> kind.
COLUMN_KINDS = {("gpu_metrics", "value"): "float"}


def column_kind(short: str, column: str) -> str:
    """``text``, ``float`` or ``int``: how the cache stores ``column`` of table ``short``."""
    return COLUMN_KINDS.get((short, column)) or ("text" if column in TEXT_COLUMNS else "int")


# DuckDB keeps freed buffers up to its memory limit (80 % of RAM by default); a lower cap
# keeps a query's peak memory near what it needs. Sorts and joins past it spill to temp.
QUERY_MEMORY = "256MB"


# DASHCAM_THREADS caps the threads one process uses (DuckDB's, and the cache build's extraction workers):
# the fleet's workers set it to 1, so N worker processes use N cores (docs/fleet.md). Unset: the defaults.
THREADS_ENV = "DASHCAM_THREADS"


def thread_count(default: int = 2) -> int:
    """``default`` threads, or fewer when DASHCAM_THREADS (a positive integer) says so."""
    try:
        cap = int(os.environ.get(THREADS_ENV, ""))
    except ValueError:
        return default
    return max(1, min(default, cap))


def duckdb_config(memory: str = QUERY_MEMORY) -> dict:
    return {"threads": thread_count(), "memory_limit": memory,
            "temp_directory": os.path.join(tempfile.gettempdir(), f"dashcam-duckdb-{os.getuid()}")}
