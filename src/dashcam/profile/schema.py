"""What dashcam reads from an export, and how DuckDB is set up to query it.

The first layer of the loader: the source tables and columns the cache copies (``cache.py``), the
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
         "blockX", "blockY", "blockZ", "graphNodeId"],
    ),
    "CUPTI_ACTIVITY_KIND_RUNTIME": (
        "runtime",
        ["start", "end", "eventClass", "globalTid", "correlationId", "nameId"],
    ),
    "CUPTI_ACTIVITY_KIND_MEMCPY": (
        "memcpy",
        ["start", "end", "deviceId", "streamId", "correlationId", "globalPid",
         "bytes", "copyKind", "srcKind", "dstKind", "srcDeviceId", "dstDeviceId"],
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
}

SMALL_TABLES: dict[str, tuple[str, list[str]]] = {
    "StringIds": ("strings", ["id", "value"]),
    "PROCESSES": ("processes", ["globalPid", "pid", "name"]),
    "ThreadNames": ("thread_names", ["nameId", "priority", "globalTid"]),
    "TARGET_INFO_GPU": ("target_gpu", ["id", "name", "smCount", "cuDevice", "busLocation",
                                       "totalMemory", "chipName", "memoryBandwidth", "clockRate"]),
    "TARGET_INFO_CUDA_DEVICE": ("target_cuda_device", ["gpuId", "cudaId", "pid", "numMultiprocessors"]),
    "META_DATA_EXPORT": ("meta_export", ["name", "value"]),
    "EXPORT_META_DATA": ("export_meta", ["name", "value"]),
    "META_DATA_CAPTURE": ("meta_capture", ["name", "value"]),
    "TARGET_INFO_SESSION_START_TIME": ("session_start", ["utcEpochNs"]),
}

TEXT_COLUMNS = {"text", "value", "name", "busLocation", "chipName"}


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
