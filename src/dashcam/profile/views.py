"""The normalized model: one set of DuckDB views over the cache, the same for every schema version.

Views (all times integer ns on the profile clock; ``pid``/``tid`` decoded from nsys'
serialized ids: ``pid = (g >> 24) & 0xFFFFFF``, ``tid = g & 0xFFFFFF``):

- ``kernels``   start, end, dur, device_id, stream_id, pid, correlation_id,
                short_name, name (demangled), grid_x..z, block_x..z, blocks,
                threads_per_block, graph_node_id
- ``kernel_times`` the same rows with only start, end, device_id, stream_id, pid,
                correlation_id, short_name_id, name_id (ids into ``strings``), blocks,
                graph_node_id: no name lookups, the cheap view for hot paths
- ``api_calls`` start, end, pid, tid, global_tid, correlation_id, name_id: the rows of ``api``
                without names (cheap)
- ``api``       start, end, dur, pid, tid, global_tid, correlation_id, name (version suffix
                stripped: ``cudaLaunchKernel``), raw_name, kind (runtime | driver). Backtrace
                duplicates (eventClass 67) are dropped.
- ``memcpy``    start, end, dur, device_id, stream_id, pid, correlation_id, bytes,
                kind (HtoD DtoH DtoD HtoH PtoP, Unknown), host_mem (pageable | pinned | NULL),
                src_device_id, dst_device_id, migration (copyKind 11/12/13: a unified-memory page
                migration, not an explicit copy; its kind is the direction)
- ``memset``    start, end, dur, device_id, stream_id, pid, correlation_id, bytes
- ``sync_events`` start, end, dur, device_id, stream_id, pid, correlation_id, sync_type
- ``nvtx``      start, end (NULL for marks), dur, pid, tid, global_tid, label (text or
                textId), event_type, domain_id, is_range, group_id (its label group:
                names.nvtx_group_labels; labels in ``nvtx_groups``)
- ``nvtx_times``  the same rows without strings: start, end, pid, tid, is_range, event_type, group_id, domain_id
- ``nvtx_groups`` group_id, label
- ``launches``, the kernel <-> launch-call table built with the cache: see derived.py
- ``gpu_ops``   kernels, memcpys, memsets and whole-graph executions together: start, end, device_id,
                stream_id, op (kernel | memcpy | memset | graph)
- ``graph_trace`` whole-graph executions (CUPTI_ACTIVITY_KIND_GRAPH_TRACE): start, end, device_id,
                stream_id, pid, correlation_id, graph_id, graph_exec_id; ``graph_events`` graph and node
                creation on the host (CUDA_GRAPH_EVENTS, CUDA_GRAPH_NODE_EVENTS)
- ``gpu_memory_events`` allocations and frees (CUDA_GPU_MEMORY_USAGE_EVENTS): start, pid, device_id,
                address, bytes, mem_kind, op (alloc | free), correlation_id, stream_id;
                ``um_faults`` unified-memory page faults: side (cpu | gpu), start, end, pid, device_id,
                address, faults, access
- ``gpu_metric_samples`` GPU_METRICS: t, type_id, metric_id, value; ``gpu_metric_names``
                TARGET_INFO_GPU_METRICS: type_id, source_id, type_name, metric_id, metric_name
- ``processes`` pid, name (nsys's launcher named by its main thread: the program), recorded_name (PROCESSES's);
                ``threads`` pid, tid, name;  ``gpus`` device_id, name, sm_count (TARGET_INFO_GPU,
                with TARGET_INFO_CUDA_DEVICE's and, in old schemas, TARGET_INFO_CUDA_GPU's SM counts and names)
- ``meta``      key, value (whichever metadata table the export has)
"""
from __future__ import annotations

from pathlib import Path

from dashcam.profile.nvtx_kernels import NVTX_RANGE_TYPES
from dashcam.profile.schema import BIG_TABLES, SMALL_TABLES, column_kind

PID = "((({g}) >> 24) & 16777215)"
TID = "(({g}) & 16777215)"


def split_global_tid(g: int) -> tuple[int, int]:
    """A globalTid's (pid, tid): PID and TID above, in Python."""
    return (int(g) >> 24) & 0xFFFFFF, int(g) & 0xFFFFFF

# The processes nsys records as its launcher rather than the program (reports of nsys 2020-2021): views.processes
LAUNCHER_NAMES = ("nsys-launcher",)

COPY_KIND = """CASE {c}
    WHEN 1 THEN 'HtoD' WHEN 3 THEN 'HtoD' WHEN 11 THEN 'HtoD'
    WHEN 2 THEN 'DtoH' WHEN 4 THEN 'DtoH' WHEN 12 THEN 'DtoH'
    WHEN 8 THEN 'DtoD' WHEN 5 THEN 'DtoD' WHEN 6 THEN 'DtoD' WHEN 7 THEN 'DtoD' WHEN 13 THEN 'DtoD'
    WHEN 9 THEN 'HtoH' WHEN 10 THEN 'PtoP' ELSE 'Unknown' END"""

MEM_KIND = "CASE {c} WHEN 0 THEN 'pageable' WHEN 1 THEN 'pinned' ELSE NULL END"
# ENUM_CUDA_UNIF_MEM_MIGRATION (the same ids in every export that has the enum)
MIGRATION_CAUSE = """CASE {c} WHEN 1 THEN 'prefetch' WHEN 2 THEN 'page_fault' WHEN 3 THEN 'speculative_prefetch'
    WHEN 4 THEN 'eviction' WHEN 5 THEN 'access_counters' ELSE 'unknown' END"""
# ENUM_CUDA_MEM_KIND, the memory an allocation event is about
ALLOC_KIND = """CASE {c} WHEN 0 THEN 'pageable' WHEN 1 THEN 'pinned' WHEN 2 THEN 'device' WHEN 3 THEN 'array'
    WHEN 4 THEN 'managed' WHEN 5 THEN 'device_static' WHEN 6 THEN 'managed_static' ELSE 'unknown' END"""
# ENUM_CUDA_UNIF_MEM_ACCESS_TYPE
ACCESS_TYPE = """CASE {c} WHEN 1 THEN 'read' WHEN 2 THEN 'write' WHEN 3 THEN 'atomic' WHEN 4 THEN 'prefetch'
    ELSE 'unknown' END"""



class _Source:
    """Builds ``SELECT`` expressions over one cached raw table, NULL for absent columns.

    An absent or empty table becomes an empty relation with every wanted column typed,
    so the views need no special case for it.
    """

    def __init__(self, cache: Path, manifest: dict, short: str) -> None:
        info = manifest["tables"].get(short)
        self.has_rows = bool(info and info.get("files"))
        if self.has_rows:
            self.cols = set(info["columns"])
            if short in _SMALL:
                self.rel = f"read_parquet('{_esc(cache)}/{short}.parquet')"
            else:
                self.rel = f"read_parquet('{_esc(cache)}/{short}-*.parquet', union_by_name=true)"
        else:
            wanted = _WANTED[short]
            self.cols = set(wanted)
            sql_type = {"text": "VARCHAR", "float": "DOUBLE", "int": "BIGINT"}
            cols = ", ".join(f'CAST(NULL AS {sql_type[column_kind(short, c)]}) AS "{c}"' for c in wanted)
            self.rel = f"(SELECT {cols} WHERE false)"

    def c(self, name: str, typ: str = "BIGINT") -> str:
        return f'"{name}"' if name in self.cols else f"CAST(NULL AS {typ})"

    def frm(self, alias: str = "") -> str:
        return f"{self.rel} {alias}"


_WANTED = dict((*BIG_TABLES.values(), *SMALL_TABLES.values()))
_SMALL = {short for short, _ in SMALL_TABLES.values()}


def _esc(p: Path) -> str:
    return str(p).replace("'", "''")


def create_views(con, cache: Path, manifest: dict) -> None:
    """Create the normalized views on a DuckDB connection."""
    S = {name: _Source(cache, manifest, name) for name in _WANTED}
    ex = con.execute

    st = S["strings"]
    ex(f"CREATE OR REPLACE VIEW strings AS SELECT {st.c('id')} AS id, {st.c('value', 'VARCHAR')} AS value "
       f"FROM {st.frm()}")

    # Runtime rows: process id for tables that lack globalPid comes from here when there is one process.
    rt = S["runtime"]
    single_pid = "NULL"
    k = S["kernel"]
    if "globalPid" not in k.cols and "globalTid" in rt.cols and rt.has_rows:
        pids = con.execute(
            f"SELECT DISTINCT {PID.format(g='globalTid')} FROM {rt.frm()} WHERE globalTid IS NOT NULL LIMIT 2"
        ).fetchall()
        if len(pids) == 1:
            single_pid = str(int(pids[0][0]))

    def pid_of(src: _Source) -> str:
        return PID.format(g='"globalPid"') if "globalPid" in src.cols else f"CAST({single_pid} AS BIGINT)"

    # Names of API functions, with the version suffix (_v7000, _v2_v11030 keeps _v2) stripped.
    ex("""CREATE OR REPLACE TEMP TABLE api_names AS
          SELECT id, value AS raw_name, regexp_replace(value, '_v[0-9]+$', '') AS name FROM strings
          WHERE id IN (SELECT DISTINCT nameId FROM """
       + (rt.frm() if "nameId" in rt.cols else "(SELECT NULL AS nameId)") + ")")

    ex(f"""CREATE OR REPLACE VIEW kernel_times AS
        SELECT k."start" AS start, k."end" AS "end", {k.c('deviceId')} AS device_id,
               {k.c('streamId')} AS stream_id, {pid_of(k)} AS pid, {k.c('correlationId')} AS correlation_id,
               coalesce({k.c('shortName')}, {k.c('demangledName')}) AS short_name_id,
               coalesce({k.c('demangledName')}, {k.c('shortName')}) AS name_id,
               {k.c('gridX')} * coalesce({k.c('gridY')}, 1) * coalesce({k.c('gridZ')}, 1) AS blocks,
               {k.c('graphNodeId')} AS graph_node_id, {k.c('graphId')} AS graph_id
        FROM {k.frm('k')}""")
    ex(f"""CREATE OR REPLACE VIEW kernels AS
        SELECT k."start" AS start, k."end" AS "end", k."end" - k."start" AS dur,
               {k.c('deviceId')} AS device_id, {k.c('streamId')} AS stream_id,
               {pid_of(k)} AS pid, {k.c('correlationId')} AS correlation_id,
               coalesce(sn.value, dn.value, '<unnamed kernel>') AS short_name,
               coalesce(dn.value, sn.value, '<unnamed kernel>') AS name,
               coalesce({k.c('shortName')}, {k.c('demangledName')}) AS short_name_id,
               coalesce({k.c('demangledName')}, {k.c('shortName')}) AS name_id,
               {k.c('gridX')} AS grid_x, {k.c('gridY')} AS grid_y, {k.c('gridZ')} AS grid_z,
               {k.c('blockX')} AS block_x, {k.c('blockY')} AS block_y, {k.c('blockZ')} AS block_z,
               {k.c('gridX')} * coalesce({k.c('gridY')}, 1) * coalesce({k.c('gridZ')}, 1) AS blocks,
               {k.c('blockX')} * coalesce({k.c('blockY')}, 1) * coalesce({k.c('blockZ')}, 1) AS threads_per_block,
               {k.c('graphNodeId')} AS graph_node_id, {k.c('graphId')} AS graph_id,
               {k.c('registersPerThread')} AS registers_per_thread,
               {k.c('staticSharedMemory')} + coalesce({k.c('dynamicSharedMemory')}, 0) AS shared_mem_per_block
        FROM {k.frm('k')}
        LEFT JOIN strings sn ON sn.id = {k.c('shortName')}
        LEFT JOIN strings dn ON dn.id = {k.c('demangledName')}""")

    drop_bt = "WHERE r.eventClass IS DISTINCT FROM 67" if "eventClass" in rt.cols else ""
    ex(f"""CREATE OR REPLACE VIEW api_calls AS
        SELECT r."start" AS start, r."end" AS "end",
               {PID.format(g='r.globalTid') if 'globalTid' in rt.cols else 'CAST(NULL AS BIGINT)'} AS pid,
               {TID.format(g='r.globalTid') if 'globalTid' in rt.cols else 'CAST(NULL AS BIGINT)'} AS tid,
               {rt.c('globalTid')} AS global_tid, {rt.c('correlationId')} AS correlation_id,
               {rt.c('nameId')} AS name_id
        FROM {rt.frm('r')} {drop_bt}""")
    ex(f"""CREATE OR REPLACE VIEW api AS
        SELECT r."start" AS start, r."end" AS "end", r."end" - r."start" AS dur,
               {PID.format(g='r.globalTid') if 'globalTid' in rt.cols else 'CAST(NULL AS BIGINT)'} AS pid,
               {TID.format(g='r.globalTid') if 'globalTid' in rt.cols else 'CAST(NULL AS BIGINT)'} AS tid,
               {rt.c('globalTid')} AS global_tid, {rt.c('correlationId')} AS correlation_id,
               coalesce(n.name, '<unknown api>') AS name, n.raw_name AS raw_name,
               CASE WHEN {rt.c('eventClass')} = 1 THEN 'driver'
                    WHEN {rt.c('eventClass')} = 0 THEN 'runtime'
                    WHEN n.name LIKE 'cuda%' THEN 'runtime' ELSE 'driver' END AS kind
        FROM {rt.frm('r')} LEFT JOIN api_names n ON n.id = {rt.c('nameId')} {drop_bt}""")

    m = S["memcpy"]
    kind = COPY_KIND.format(c=m.c("copyKind"))
    ex(f"""CREATE OR REPLACE VIEW memcpy AS
        SELECT "start" AS start, "end" AS "end", "end" - "start" AS dur,
               {m.c('deviceId')} AS device_id, {m.c('streamId')} AS stream_id, {pid_of(m)} AS pid,
               {m.c('correlationId')} AS correlation_id, coalesce({m.c('bytes')}, 0) AS bytes,
               {kind} AS kind,
               CASE WHEN ({kind}) = 'HtoD' THEN {MEM_KIND.format(c=m.c('srcKind'))}
                    WHEN ({kind}) = 'DtoH' THEN {MEM_KIND.format(c=m.c('dstKind'))}
                    ELSE NULL END AS host_mem,
               {m.c('srcDeviceId')} AS src_device_id, {m.c('dstDeviceId')} AS dst_device_id,
               coalesce({m.c('copyKind')} IN (11, 12, 13), false) AS migration,
               CASE WHEN {m.c('copyKind')} IN (11, 12, 13) THEN {MIGRATION_CAUSE.format(c=m.c('migrationCause'))}
                    END AS migration_cause
        FROM {m.frm()}""")

    s = S["memset"]
    ex(f"""CREATE OR REPLACE VIEW memset AS
        SELECT "start" AS start, "end" AS "end", "end" - "start" AS dur,
               {s.c('deviceId')} AS device_id, {s.c('streamId')} AS stream_id, {pid_of(s)} AS pid,
               {s.c('correlationId')} AS correlation_id, coalesce({s.c('bytes')}, 0) AS bytes
        FROM {s.frm()}""")

    y = S["sync"]
    ex(f"""CREATE OR REPLACE VIEW sync_events AS
        SELECT "start" AS start, "end" AS "end", "end" - "start" AS dur,
               {y.c('deviceId')} AS device_id, {y.c('streamId')} AS stream_id, {pid_of(y)} AS pid,
               {y.c('correlationId')} AS correlation_id,
               CASE {y.c('syncType')} WHEN 1 THEN 'event_sync' WHEN 2 THEN 'stream_wait_event'
                    WHEN 3 THEN 'stream_sync' WHEN 4 THEN 'context_sync' ELSE 'unknown' END AS sync_type
        FROM {y.frm()}""")

    n = S["nvtx"]
    types = ", ".join(str(t) for t in NVTX_RANGE_TYPES)
    if manifest.get("nvtx_groups") is not None:
        nvtx_group_labels = f"read_parquet('{_esc(cache)}/nvtx_groups.parquet')"
    else:
        nvtx_group_labels = "(SELECT CAST(NULL AS BIGINT) AS group_id, CAST(NULL AS VARCHAR) AS label WHERE false)"
    ex(f"""CREATE OR REPLACE VIEW nvtx AS
        SELECT n."start" AS start, {n.c('end')} AS "end", {n.c('end')} - n."start" AS dur,
               {PID.format(g='n.globalTid') if 'globalTid' in n.cols else 'CAST(NULL AS BIGINT)'} AS pid,
               {TID.format(g='n.globalTid') if 'globalTid' in n.cols else 'CAST(NULL AS BIGINT)'} AS tid,
               {n.c('globalTid')} AS global_tid,
               coalesce({n.c('text', 'VARCHAR')}, ls.value) AS label,
               {n.c('eventType')} AS event_type, {n.c('domainId')} AS domain_id,
               ({n.c('end')} IS NOT NULL AND coalesce({n.c('eventType')}, 59) IN ({types})) AS is_range,
               {n.c('groupId')} AS group_id
        FROM {n.frm('n')} LEFT JOIN strings ls ON ls.id = {n.c('textId')}""")
    ex(f"""CREATE OR REPLACE VIEW nvtx_times AS
        SELECT n."start" AS start, {n.c('end')} AS "end",
               {PID.format(g='n.globalTid') if 'globalTid' in n.cols else 'CAST(NULL AS BIGINT)'} AS pid,
               {TID.format(g='n.globalTid') if 'globalTid' in n.cols else 'CAST(NULL AS BIGINT)'} AS tid,
               ({n.c('end')} IS NOT NULL AND coalesce({n.c('eventType')}, 59) IN ({types})) AS is_range,
               {n.c('eventType')} AS event_type, {n.c('groupId')} AS group_id, {n.c('domainId')} AS domain_id
        FROM {n.frm('n')}""")
    ex(f"CREATE OR REPLACE VIEW nvtx_groups AS SELECT group_id, label FROM {nvtx_group_labels}")

    gt = S["graph_trace"]  # whole-graph executions are GPU activity (definitions.py: window)
    ex(f"""CREATE OR REPLACE VIEW gpu_ops AS
        SELECT start, "end", device_id, stream_id, 'kernel' AS op FROM kernel_times
        UNION ALL SELECT start, "end", device_id, stream_id, 'memcpy' FROM memcpy
        UNION ALL SELECT start, "end", device_id, stream_id, 'memset' FROM memset
        UNION ALL SELECT "start", "end", {gt.c('deviceId')}, {gt.c('streamId')}, 'graph' FROM {gt.frm()}""")

    t = S["thread_names"]
    ex(f"""CREATE OR REPLACE VIEW threads AS
        SELECT {PID.format(g=t.c('globalTid'))} AS pid, {TID.format(g=t.c('globalTid'))} AS tid,
               s.value AS name
        FROM {t.frm('t')} LEFT JOIN strings s ON s.id = {t.c('nameId')}""")
    # A process's name, the one definition every answer shows: PROCESSES's, except for nsys's launcher, which
    # the program replaced (exec) after PROCESSES was read: its main thread's name (tid == pid), else the
    # recorded command's file name.
    p, mc = S["processes"], S["meta_capture"]
    launchers = ", ".join(f"'{n}'" for n in LAUNCHER_NAMES)
    ex(f"""CREATE OR REPLACE VIEW processes AS
        WITH raw AS (SELECT coalesce({p.c('pid')}, {PID.format(g=p.c('globalPid'))}) AS pid,
                            {p.c('name', 'VARCHAR')} AS name FROM {p.frm()}),
        main AS (SELECT pid, any_value(name) AS name FROM threads
                 WHERE tid = pid AND name IS NOT NULL AND name NOT IN ({launchers}) GROUP BY 1),
        cmd AS (SELECT any_value(regexp_extract({mc.c('value', 'VARCHAR')}, '[^/\\\\]+$')) AS name
                FROM {mc.frm()} WHERE {mc.c('name', 'VARCHAR')} = 'PROCESS_0:COMMAND')
        SELECT raw.pid, CASE WHEN raw.name IN ({launchers})
                             THEN coalesce(main.name, nullif((SELECT name FROM cmd), ''), raw.name)
                             ELSE raw.name END AS name,
               raw.name AS recorded_name
        FROM raw LEFT JOIN main ON main.pid = raw.pid""")

    g = S["target_gpu"]
    cd = S["target_cuda_device"]
    og = S["target_cuda_gpu"]  # old schemas
    dev = f"coalesce({g.c('cuDevice')}, {g.c('id')})"
    ex(f"""CREATE OR REPLACE VIEW gpus AS
        WITH tg AS (
            SELECT {dev} AS device_id, {g.c('id')} AS nsys_gpu_id, {g.c('name', 'VARCHAR')} AS name,
                   {g.c('smCount')} AS sm_count, {g.c('busLocation', 'VARCHAR')} AS bus_location,
                   {g.c('totalMemory')} AS total_memory, {g.c('pwGpuId')} AS pw_gpu_id
            FROM {g.frm()}
        ),
        cdv AS (
            SELECT {cd.c('cudaId')} AS device_id, max({cd.c('numMultiprocessors')}) AS sm_count
            FROM {cd.frm()} GROUP BY 1
        ),
        old AS (
            SELECT coalesce({og.c('deviceId')}, {og.c('id')}) AS device_id, max({og.c('name', 'VARCHAR')}) AS name,
                   max({og.c('numMultiprocessors')}) AS sm_count
            FROM {og.frm()} GROUP BY 1
        ),
        new AS (
            SELECT coalesce(tg.device_id, cdv.device_id) AS device_id, tg.nsys_gpu_id, tg.name,
                   coalesce(tg.sm_count, cdv.sm_count) AS sm_count, tg.bus_location, tg.total_memory, tg.pw_gpu_id
            FROM tg FULL OUTER JOIN cdv ON cdv.device_id = tg.device_id
        )
        SELECT coalesce(new.device_id, old.device_id) AS device_id, new.nsys_gpu_id,
               coalesce(new.name, old.name) AS name, coalesce(new.sm_count, old.sm_count) AS sm_count,
               new.bus_location, new.total_memory, new.pw_gpu_id
        FROM new FULL OUTER JOIN old ON old.device_id = new.device_id""")

    _graph_views(S, ex, pid_of)
    _memory_views(S, ex, pid_of)
    _metric_views(S, ex)

    metas = [S[x] for x in ("meta_export", "export_meta", "meta_capture") if S[x].has_rows]
    if metas:
        body = " UNION ALL ".join(
            f"SELECT {x.c('name', 'VARCHAR')} AS key, {x.c('value', 'VARCHAR')} AS value FROM {x.frm()}"
            for x in metas
        )
    else:
        body = "SELECT CAST(NULL AS VARCHAR) AS key, CAST(NULL AS VARCHAR) AS value WHERE false"
    ex(f"CREATE OR REPLACE VIEW meta AS {body}")


def _graph_views(S: dict, ex, pid_of) -> None:
    """graph_trace: whole-graph executions; graph_events: graph and node creation on the host."""
    t = S["graph_trace"]
    ex(f"""CREATE OR REPLACE VIEW graph_trace AS
        SELECT "start" AS start, "end" AS "end", {t.c('deviceId')} AS device_id, {t.c('streamId')} AS stream_id,
               {pid_of(t)} AS pid, {t.c('correlationId')} AS correlation_id, {t.c('graphId')} AS graph_id,
               {t.c('graphExecId')} AS graph_exec_id
        FROM {t.frm()}""")
    parts = []
    for short, kind in (("graph_events", "graph"), ("graph_node_events", "node")):
        e = S[short]
        parts.append(f"""SELECT "start" AS start, {e.c('end')} AS "end",
               {PID.format(g=e.c('globalTid'))} AS pid, {TID.format(g=e.c('globalTid'))} AS tid,
               {e.c('nameId')} AS name_id, {e.c('graphId')} AS graph_id, {e.c('graphExecId')} AS graph_exec_id,
               {e.c('graphNodeId')} AS graph_node_id, '{kind}' AS source
            FROM {e.frm()}""")
    ex("CREATE OR REPLACE VIEW graph_events AS " + " UNION ALL ".join(parts))


def _memory_views(S: dict, ex, pid_of) -> None:
    """gpu_memory_events: allocations and frees; um_faults: unified-memory page faults (CPU and GPU side)."""
    a = S["gpu_memory"]
    ex(f"""CREATE OR REPLACE VIEW gpu_memory_events AS
        SELECT "start" AS start, {pid_of(a)} AS pid, {a.c('deviceId')} AS device_id, {a.c('address')} AS address,
               coalesce({a.c('bytes')}, 0) AS bytes, {ALLOC_KIND.format(c=a.c('memKind'))} AS mem_kind,
               CASE {a.c('memoryOperationType')} WHEN 0 THEN 'alloc' WHEN 1 THEN 'free' ELSE 'unknown' END AS op,
               {a.c('correlationId')} AS correlation_id, {a.c('streamId')} AS stream_id
        FROM {a.frm()}""")
    c, g = S["um_cpu_faults"], S["um_gpu_faults"]
    ex(f"""CREATE OR REPLACE VIEW um_faults AS
        SELECT 'cpu' AS side, "start" AS start, "start" AS "end", {pid_of(c)} AS pid, CAST(NULL AS BIGINT) AS device_id,
               {c.c('address')} AS address, 1 AS faults, 'unknown' AS access
        FROM {c.frm()}
        UNION ALL
        SELECT 'gpu', "start", {g.c('end')}, {pid_of(g)}, {g.c('deviceId')}, {g.c('address')},
               coalesce({g.c('numberOfPageFaults')}, 1), {ACCESS_TYPE.format(c=g.c('faultAccessType'))}
        FROM {g.frm()}""")


def _metric_views(S: dict, ex) -> None:
    """gpu_metric_samples: GPU_METRICS rows; gpu_metric_names: TARGET_INFO_GPU_METRICS."""
    m, n = S["gpu_metrics"], S["gpu_metric_names"]
    ex(f"""CREATE OR REPLACE VIEW gpu_metric_samples AS
        SELECT "timestamp" AS t, {m.c('typeId')} AS type_id, {m.c('metricId')} AS metric_id,
               CAST({m.c('value', 'DOUBLE')} AS DOUBLE) AS value
        FROM {m.frm()}""")
    ex(f"""CREATE OR REPLACE VIEW gpu_metric_names AS
        SELECT {n.c('typeId')} AS type_id, {n.c('sourceId')} AS source_id, {n.c('typeName', 'VARCHAR')} AS type_name,
               {n.c('metricId')} AS metric_id, {n.c('metricName', 'VARCHAR')} AS metric_name
        FROM {n.frm()}""")
