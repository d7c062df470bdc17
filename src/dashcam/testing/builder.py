"""Build small Nsight Systems exports with planted facts, in the real SQLite schema.

Tests, evals and the shipped example are made with this, so every number they assert
is known by construction. Three schema flavours, as real exports have them:

- ``"2024"``: META_DATA_EXPORT, KERNEL with greenContextId and mangledName, TARGET_INFO_GPU
  with cuDevice/smCount (nsys 2023.3 and later);
- ``"2022"``: EXPORT_META_DATA (with its misspelled keys), no greenContextId, and
  backtrace duplicates (eventClass 67) of every runtime call (nsys 2022.x);
- ``"2021"``: no metadata table, KERNEL without mangledName, no TARGET_INFO_GPU.

    b = ExportBuilder()
    b.gpu(0, "NVIDIA H100 80GB HBM3", sm_count=132)
    b.launch(device=0, api_start=1_000, api_end=6_000, start=10_000, end=50_000, name="gemm")
    b.write("x.sqlite")
"""
from __future__ import annotations

import sqlite3
from pathlib import Path

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
NVTX_PUSHPOP = 59


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

SCHEMAS = {
    "2024": {"kernel_drop": set(), "activity_green": True, "meta": "META_DATA_EXPORT",
             "version": ("2024.5.1.113", "3.13.2"), "backtraces": False, "target_gpu": True},
    "2022": {"kernel_drop": {"greenContextId"}, "activity_green": False, "meta": "EXPORT_META_DATA",
             "version": ("2022.2.1.31", "2.9.1"), "backtraces": True, "target_gpu": True},
    "2021": {"kernel_drop": {"greenContextId", "mangledName"}, "activity_green": False, "meta": None,
             "version": (None, None), "backtraces": False, "target_gpu": False},
}


class ExportBuilder:
    """Collects events, then writes them as an ``nsys export --type sqlite`` file."""

    def __init__(self, schema: str = "2024") -> None:
        if schema not in SCHEMAS:
            raise ValueError(f"schema must be one of {sorted(SCHEMAS)}")
        self.schema = schema
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
        self.extra_tables: dict[str, int] = {}  # table name -> rows of a one-column stand-in table
        self._corr: dict[int, int] = {}

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
               short: str | None = None, graph_node: int | None = None) -> int:
        corr = self.next_corr(pid) if corr is None else corr
        short_id = self.sid(short or short_kernel_name(name))
        self.kernels.append((start, end, device, stream, corr, global_pid(pid), self.sid(name), short_id,
                             self.sid("_Z" + name.replace(" ", "")), grid, block, graph_node))
        return corr

    def launch(self, device: int, api_start: int, api_end: int, start: int, end: int, name: str = "gemm_kernel",
               stream: int = 7, pid: int = 100, tid: int | None = None, api_name: str = "cudaLaunchKernel",
               grid: tuple = (256, 1, 1), block: tuple = (128, 1, 1)) -> int:
        """A launch call and the kernel it launched, joined by (pid, correlationId)."""
        corr = self.api(api_name, api_start, api_end, pid=pid, tid=tid, driver=not api_name.startswith("cuda"))
        self.kernel(device, start, end, name=name, stream=stream, pid=pid, corr=corr, grid=grid, block=block)
        return corr

    def memcpy(self, device: int, start: int, end: int, nbytes: int, kind: str = "HtoD", pinned: bool = True,
               stream: int = 7, pid: int = 100, corr: int | None = None) -> int:
        corr = self.next_corr(pid) if corr is None else corr
        host = 1 if pinned else 0
        src, dst = {"HtoD": (host, 2), "DtoH": (2, host), "DtoD": (2, 2), "HtoH": (host, host),
                    "PtoP": (2, 2), "UM_HtoD": (MANAGED, MANAGED), "UM_DtoH": (MANAGED, MANAGED),
                    "UM_DtoD": (MANAGED, MANAGED)}[kind]
        self.memcpys.append((start, end, device, stream, corr, global_pid(pid), nbytes, COPY_KIND[kind], src, dst))
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

    # -- output -------------------------------------------------------------------
    def write(self, path: str | Path, lazy: bool = False) -> Path:
        """Write the export. ``lazy``: leave out the activity and NVTX tables that hold no row, as nsys does
        (its tables are created when something of their kind is recorded); by default they are all there."""
        path = Path(path)
        if path.exists():
            path.unlink()
        con = sqlite3.connect(path)
        try:
            self._write(con)
            if lazy:
                for t in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_MEMCPY",
                          "CUPTI_ACTIVITY_KIND_MEMSET", "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", "NVTX_EVENTS"):
                    if not con.execute(f"SELECT EXISTS (SELECT 1 FROM {t})").fetchone()[0]:
                        con.execute(f"DROP TABLE {t}")
            con.commit()
        finally:
            con.close()
        return path

    def _write(self, con: sqlite3.Connection) -> None:
        cfg = self.cfg
        x = con.execute
        x("CREATE TABLE StringIds (id INTEGER NOT NULL PRIMARY KEY, value TEXT NOT NULL)")
        kcols = [c for c in _KERNEL_COLS_2024.replace("\n", " ").split(",")
                 if c.split()[0] not in cfg["kernel_drop"]]
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
        x("INSERT INTO TARGET_INFO_SESSION_START_TIME VALUES (1764460800000000000, '2025-11-30T00:00:00', "
          "'2025-11-30T00:00:00')")
        if cfg["target_gpu"]:
            x("CREATE TABLE TARGET_INFO_GPU (vmId INTEGER NOT NULL, id INTEGER NOT NULL, name TEXT, "
              "busLocation TEXT, isDiscrete INTEGER, l2CacheSize INTEGER, totalMemory INTEGER, "
              "memoryBandwidth INTEGER, clockRate INTEGER, smCount INTEGER, pwGpuId INTEGER, uuid TEXT, "
              "luid INTEGER, chipName TEXT, cuDevice INTEGER)")
            for nid, name, sms, cu in self.gpus:
                x("INSERT INTO TARGET_INFO_GPU VALUES (?,?,?,?,1,52428800,85899345920,3352320000000,1980000000,"
                  "?,?,?,NULL,'GH100',?)", (GLOBAL_BASE, nid, name, f"0000:{nid:02x}:00.0", sms, nid,
                                           f"uuid-{nid}", cu))
        meta, (nsys_v, schema_v) = cfg["meta"], cfg["version"]
        if meta:
            x(f"CREATE TABLE {meta} (name TEXT NOT NULL, value TEXT)")
            rows = [("EXPORT_PRODUCT_NAME", "NVIDIA Nsight Systems"), ("EXPORT_PRODUCT_VERSION", nsys_v),
                    ("EXPORT_SCHEMA_VERSION", schema_v), ("EXPORT_SCHEMA_VERSION_MAJOR", schema_v.split(".")[0])]
            rows += [("EXPORT_OUTUPT_FILE", "fixture.sqlite")] if meta == "EXPORT_META_DATA" else \
                [("EXPORT_PARAM_OUTPUT_FILE", "fixture.sqlite")]
            con.executemany(f"INSERT INTO {meta} VALUES (?,?)", rows)
        if self.capture and meta == "META_DATA_EXPORT":
            x("CREATE TABLE META_DATA_CAPTURE (name TEXT NOT NULL, value TEXT)")
            con.executemany("INSERT INTO META_DATA_CAPTURE VALUES (?,?)", self.capture)
        for table, n in self.extra_tables.items():
            x(f'CREATE TABLE "{table}" (id INTEGER)')
            con.executemany(f'INSERT INTO "{table}" VALUES (?)', [(i,) for i in range(n)])

        for (start, end, dev, stream, corr, gpid, name_id, short_id, mangled_id, grid, block, gnode) in self.kernels:
            vals = {"start": start, "end": end, "deviceId": dev, "contextId": 1, "greenContextId": None,
                    "streamId": stream, "correlationId": corr, "globalPid": gpid, "demangledName": name_id,
                    "shortName": short_id, "mangledName": mangled_id, "launchType": 0, "cacheConfig": 0,
                    "registersPerThread": 32, "gridX": grid[0], "gridY": grid[1], "gridZ": grid[2],
                    "blockX": block[0], "blockY": block[1], "blockZ": block[2], "staticSharedMemory": 0,
                    "dynamicSharedMemory": 0, "localMemoryPerThread": 0, "localMemoryTotal": 0, "gridId": corr,
                    "sharedMemoryExecuted": 0, "graphNodeId": gnode, "sharedMemoryLimitConfig": 0}
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
        for start, end, dev, stream, corr, gpid, nbytes, kind, src, dst in self.memcpys:
            x(f"INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY VALUES (?,?,?,1,{g}?,?,?,?,?,NULL,?,?,?,1,?,1,NULL,NULL,NULL)",
              (start, end, dev, stream, corr, gpid, nbytes, kind, src, dst, dev, dev))
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
        con.executemany("INSERT INTO StringIds VALUES (?,?)", [(i, v) for v, i in self.strings.items()])
