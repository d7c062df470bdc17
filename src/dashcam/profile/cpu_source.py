"""The export's CPU-side tables, read from the SQLite file itself (read-only): OS runtime calls, context
switches, CPU samples with their call stacks, and CUDA backtraces.

They are not copied into the cache: only the cpu tool, gpu_gaps' split of ``cpu_work`` and the
calling-function lookups read them, each for a few threads over a time range, and SQLite answers the
call-stack lookups from those tables' primary keys (id, stackDepth). So opening a profile costs nothing
more, whatever the capture holds.

Tables and the columns read (every nsys version seen has them; newer columns such as SCHED_EVENTS'
threadState are not needed):

- ``OSRT_API`` start, end, globalTid, nameId, callchainId (0: no backtrace). Marker rows (start = end,
  "OS runtime libraries profiling started") are dropped.
- ``SCHED_EVENTS`` start, isSchedIn, globalTid: the thread was switched onto (isSchedIn != 0) or off a CPU.
- ``COMPOSITE_EVENTS`` id, start, globalTid: one CPU sample; its stack in ``SAMPLING_CALLCHAINS``.
- ``SAMPLING_CALLCHAINS``, ``OSRT_CALLCHAINS``, ``CUDA_CALLCHAINS`` id, stackDepth (0: the innermost
  frame), symbol, module (StringIds), unresolved.
- ``CUPTI_ACTIVITY_KIND_RUNTIME`` globalTid, correlationId, callchainId: the CUDA backtrace of a call (in
  2.x exports on the eventClass-67 duplicate row).

A call's ``callchainId`` is the id of its stack in the nsys 3.x exports; the 2.x exports seen number them
from 0 while the stacks are numbered from 1. ``chain_offset`` finds which holds in an export: the one under
which more stacks contain the call's own function name (an OS call's stack starts in it, a CUDA call's
stack passes through it).
"""
from __future__ import annotations

import re
import sqlite3
from contextlib import closing

import numpy as np

from dashcam.measure.labels import CUDA_FRAME_MODULE, CUDA_FRAME_SYMBOL, SYSTEM_FRAME_MODULE
from dashcam.profile.source import connect_readonly

RUNTIME = "CUPTI_ACTIVITY_KIND_RUNTIME"
CHAIN_TABLES = ("SAMPLING_CALLCHAINS", "OSRT_CALLCHAINS", "CUDA_CALLCHAINS")
BATCH = 900  # ids per IN list
PERIOD_SAMPLES = 200_000  # sample times read to estimate the sampling period


def source(profile) -> CpuSource:
    """The CpuSource of an opened Profile (one per profile)."""
    if "cpu_source" not in profile.memo:
        profile.memo["cpu_source"] = CpuSource(profile)
    return profile.memo["cpu_source"]


class CpuSource:
    def __init__(self, profile) -> None:
        self.profile = profile
        self.path = profile.sqlite_path
        self.nonempty = set(profile.manifest.get("nonempty_tables", []))
        self._offsets: dict[str, int] = {}
        self._period: tuple | None = None
        self._runtime_chains: dict | None = None
        self._names: dict[int, str] = {}
        self._columns: dict[str, set[str]] = {}

    def has(self, table: str) -> bool:
        return table in self.nonempty

    def columns(self, table: str) -> set[str]:
        if table not in self._columns:
            self._columns[table] = {r[1] for r in self._rows(f'PRAGMA table_info("{table}")')}
        return self._columns[table]

    def span(self) -> tuple[int, int] | None:
        """(first, last + 1) ns of the CPU data: samples and context switches by their times, OS runtime calls
        by start and end; None when the capture has none."""
        spans = [r for t in ("COMPOSITE_EVENTS", "SCHED_EVENTS") if self.has(t)
                 for r in self._rows(f"SELECT min(start), max(start) FROM {t}") if r[0] is not None]
        if self.has("OSRT_API"):
            spans += [r for r in self._rows('SELECT min(start), max("end") FROM OSRT_API') if r[0] is not None]
        if not spans:
            return None
        return min(int(a) for a, _ in spans), max(int(b) for _, b in spans) + 1

    def _rows(self, sql: str) -> list[tuple]:
        try:
            with closing(connect_readonly(self.path)) as con:
                return con.execute(sql).fetchall()
        except sqlite3.OperationalError:  # a column this export does not have
            return []

    # -- events of threads over a time range ------------------------------------------------------------
    def osrt_calls(self, gtids: list[int], lo: int, hi: int) -> dict[str, np.ndarray]:
        """OS runtime calls of the threads overlapping [lo, hi): gtid, start, end, name_id, chain."""
        rows = self._rows(f"""SELECT globalTid, start, "end", nameId, coalesce(callchainId, 0) FROM OSRT_API
            WHERE globalTid IN ({_ids(gtids)}) AND start < {int(hi)} AND "end" > {int(lo)} AND "end" > start
            ORDER BY globalTid, start, "end" DESC""") if self.has("OSRT_API") and gtids else []
        return _arrays(rows, ("gtid", "start", "end", "name_id", "chain"))

    def osrt_matching(self, lo: int, hi: int, pattern: str) -> list[tuple[str, int, int]]:
        """OS runtime calls of every thread overlapping [lo, hi) whose function name matches ``pattern``
        (``re.search``, case-insensitive): (name, start, end) clipped to [lo, hi); [] without OSRT_API."""
        if not self.has("OSRT_API"):
            return []
        ids = [int(r[0]) for r in self._rows(f"""SELECT DISTINCT nameId FROM OSRT_API
            WHERE start < {int(hi)} AND "end" > {int(lo)}""")]
        rx = re.compile(pattern, re.IGNORECASE)
        wanted = {i: n for i, n in self.names(ids).items() if rx.search(n)}
        if not wanted:
            return []
        rows = self._rows(f"""SELECT nameId, max(start, {int(lo)}), min("end", {int(hi)}) FROM OSRT_API
            WHERE nameId IN ({_ids(wanted)}) AND start < {int(hi)} AND "end" > {int(lo)}""")
        return [(wanted[int(i)], int(a), int(b)) for i, a, b in rows]

    def osrt_functions(self) -> dict[str, list[int]]:
        """The OS runtime functions the capture holds: name -> its StringIds ids (one scan; remembered)."""
        if "osrt_functions" not in self.profile.memo:
            ids = [int(r[0]) for r in self._rows("SELECT DISTINCT nameId FROM OSRT_API")] \
                if self.has("OSRT_API") else []
            out: dict[str, list[int]] = {}
            for i, n in self.names(ids).items():
                if n != "?" and not n.startswith("OS runtime libraries"):
                    out.setdefault(n, []).append(i)
            self.profile.memo["osrt_functions"] = out
        return self.profile.memo["osrt_functions"]

    def osrt_named(self, function: str, lo: int, hi: int) -> list[tuple[int, int, int, int, str]]:
        """Calls of the OS runtime function ``function`` (exact name, case-insensitive) by any thread overlapping
        [lo, hi): (pid, tid, start, end, name) clipped to [lo, hi), by start."""
        ids = {i: n for n, found in self.osrt_functions().items() if n.lower() == function.lower() for i in found}
        if not ids:
            return []
        rows = self._rows(f"""SELECT (globalTid >> 24) & 16777215, globalTid & 16777215, max(start, {int(lo)}),
            min("end", {int(hi)}), nameId FROM OSRT_API WHERE nameId IN ({_ids(ids)}) AND start < {int(hi)}
            AND "end" > {int(lo)} AND "end" >= start ORDER BY start""")
        return [(int(p), int(t), int(a), int(b), ids[int(i)]) for p, t, a, b, i in rows]

    def osrt_all(self) -> tuple[dict[str, np.ndarray], dict[int, str]]:
        """Every OS runtime call of the capture, whole (marker rows and unnamed calls dropped): gtid, start, end,
        name_id; and the function name of each name id (the osrt_functions names)."""
        name_of = {i: n for n, ids in self.osrt_functions().items() for i in ids}
        rows = self._rows(f"""SELECT globalTid, start, "end", nameId FROM OSRT_API
            WHERE nameId IN ({_ids(name_of)}) AND "end" >= start""") if name_of else []
        return _arrays(rows, ("gtid", "start", "end", "name_id")), name_of

    def osrt_of_process(self, pid: int, lo: int, hi: int) -> dict[str, np.ndarray]:
        """OS runtime calls of any thread of process ``pid`` overlapping [lo, hi): start, end (by start)."""
        rows = self._rows(f"""SELECT start, "end" FROM OSRT_API WHERE ((globalTid >> 24) & 16777215) = {int(pid)}
            AND start < {int(hi)} AND "end" > {int(lo)} AND "end" > start ORDER BY start""") \
            if self.has("OSRT_API") else []
        return _arrays(rows, ("start", "end"))

    def sched(self, gtids: list[int], lo: int, hi: int) -> dict[str, np.ndarray]:
        """Context switches of the threads in [lo, hi), and each thread's last one before ``lo`` (the state it
        was in at ``lo``): gtid, start, is_in (sorted; at equal times a switch-in after a switch-out)."""
        if not self.has("SCHED_EVENTS") or not gtids:
            return _arrays([], ("gtid", "start", "is_in"))
        rows = self._rows(f"""
            WITH t AS (SELECT globalTid AS g, max(start) AS before FROM SCHED_EVENTS
                       WHERE globalTid IN ({_ids(gtids)}) AND start < {int(lo)} GROUP BY 1)
            SELECT s.globalTid, s.start, CASE WHEN s.isSchedIn != 0 THEN 1 ELSE 0 END AS is_in
            FROM SCHED_EVENTS s LEFT JOIN t ON t.g = s.globalTid
            WHERE s.globalTid IN ({_ids(gtids)}) AND s.start < {int(hi)}
              AND (s.start >= {int(lo)} OR s.start = t.before)
            ORDER BY s.globalTid, s.start, is_in""")
        return _arrays(rows, ("gtid", "start", "is_in"))

    def samples(self, gtids: list[int], lo: int, hi: int) -> dict[str, np.ndarray]:
        """CPU samples of the threads in [lo, hi): id, gtid, start."""
        rows = self._rows(f"""SELECT id, globalTid, start FROM COMPOSITE_EVENTS
            WHERE globalTid IN ({_ids(gtids)}) AND start >= {int(lo)} AND start < {int(hi)}
            ORDER BY globalTid, start""") if self.has("COMPOSITE_EVENTS") and gtids else []
        return _arrays(rows, ("id", "gtid", "start"))

    def sample_threads(self, lo: int, hi: int) -> dict[int, int]:
        """Threads with CPU samples in [lo, hi): gtid -> sample count."""
        if not self.has("COMPOSITE_EVENTS"):
            return {}
        return {int(g): int(n) for g, n in self._rows(
            f"""SELECT globalTid, count(*) FROM COMPOSITE_EVENTS WHERE start >= {int(lo)} AND start < {int(hi)}
                AND globalTid IS NOT NULL GROUP BY 1""")}

    def cpu_cores(self) -> int | None:
        """The capture machine's CPU cores (TARGET_INFO_SYSTEM_ENV ``CpuCores``); None when not recorded."""
        rows = self._rows("SELECT value FROM TARGET_INFO_SYSTEM_ENV WHERE name = 'CpuCores'") \
            if self.has("TARGET_INFO_SYSTEM_ENV") else []
        values = [int(v) for (v,) in rows if str(v).strip().isdigit()]
        return max(values) if values else None

    def running_by_thread(self, lo: int, hi: int) -> dict[int, int]:
        """Per thread with context switches: its time on a CPU inside [lo, hi), from each switch-in to that
        thread's next context switch (or ``hi``)."""
        if not self.has("SCHED_EVENTS"):
            return {}
        return {int(g): int(ns) for g, ns in self._rows(f"""
            WITH s AS (SELECT globalTid AS g, start AS t, isSchedIn AS i,
                              lead(start) OVER (PARTITION BY globalTid ORDER BY start, isSchedIn) AS nxt
                       FROM SCHED_EVENTS WHERE start < {int(hi)} AND globalTid IS NOT NULL)
            SELECT g, sum(max(0, min(coalesce(nxt, {int(hi)}), {int(hi)}) - max(t, {int(lo)}))) FROM s
            WHERE i != 0 GROUP BY g""")}

    def event_threads(self, lo: int, hi: int) -> set[int]:
        """Threads with OS runtime calls or context switches in [lo, hi)."""
        out: set[int] = set()
        for table, cond in (("OSRT_API", f'start < {int(hi)} AND "end" > {int(lo)}'),
                            ("SCHED_EVENTS", f"start >= {int(lo)} AND start < {int(hi)}")):
            if self.has(table):
                out |= {int(r[0]) for r in self._rows(
                    f"SELECT DISTINCT globalTid FROM {table} WHERE {cond} AND globalTid IS NOT NULL")}
        return out

    # -- call stacks ---------------------------------------------------------------------------------------
    def stacks(self, table: str, ids) -> dict[int, list[tuple[int, int, bool]]]:
        """Stack id -> its frames, innermost first: (symbol id, module id, unresolved)."""
        out: dict[int, list] = {}
        ids = sorted({int(i) for i in ids})
        if table not in CHAIN_TABLES or not self.has(table) or not ids:
            return out
        unresolved = "coalesce(unresolved, 0)" if "unresolved" in self.columns(table) else "0"
        for k in range(0, len(ids), BATCH):
            chunk = ids[k:k + BATCH]
            for i, _, sym, mod, unres in self._rows(
                    f"""SELECT id, stackDepth, symbol, module, {unresolved} FROM {table}
                        WHERE id IN ({_ids(chunk)}) ORDER BY id, stackDepth"""):
                out.setdefault(int(i), []).append((int(sym), int(mod), bool(unres)))
        return out

    def names(self, ids) -> dict[int, str]:
        """StringIds values (read through the cache's ``strings``; remembered)."""
        want = sorted({int(i) for i in ids} - set(self._names))
        for k in range(0, len(want), 5000):
            chunk = want[k:k + 5000]
            self._names.update({int(i): v for i, v in self.profile.rows(
                f"SELECT id, value FROM strings WHERE id IN ({_ids(chunk)})")})
        return {int(i): self._names.get(int(i), "?") for i in ids}

    def chain_offset(self, table: str, calls: list[tuple[int, str]]) -> int:
        """0 or 1: what to add to a call's callchainId to get its stack id in ``table`` (module docstring).
        ``calls``: (callchainId, the call's function name) pairs to test with."""
        if table in self._offsets:
            return self._offsets[table]
        calls = calls[:200]
        score = {}
        for off in (0, 1):
            stacks = self.stacks(table, [c + off for c, _ in calls])
            names = self.names({s for st in stacks.values() for s, _, _ in st})
            score[off] = sum(1 for c, fn in calls if any(_base(fn) in names[s] for s, _, _ in stacks.get(c + off, [])))
        self._offsets[table] = 1 if score[1] > score[0] else 0
        return self._offsets[table]

    def runtime_chains(self) -> dict[tuple[int, int], int]:
        """(globalTid, correlationId) -> CUDA_CALLCHAINS stack id of the CUDA calls that have a backtrace."""
        if self._runtime_chains is None:
            self._runtime_chains = {}
            if self.has("CUDA_CALLCHAINS") and self.has(RUNTIME):
                rows = self._rows(f"""SELECT r.globalTid, r.correlationId, r.callchainId, s.value
                    FROM {RUNTIME} r JOIN StringIds s ON s.id = r.nameId
                    WHERE r.callchainId IS NOT NULL AND r.globalTid IS NOT NULL""")
                off = self.chain_offset("CUDA_CALLCHAINS", [(int(c), re.sub(r"_v\d+$", "", n)) for _, _, c, n in rows])
                self._runtime_chains = {(int(g), int(k)): int(c) + off for g, k, c, _ in rows}
        return self._runtime_chains

    # -- the sampling period -----------------------------------------------------------------------------
    def sampling_period(self) -> tuple[float, int] | None:
        """(period ns, intervals measured): the median interval between consecutive samples of the thread with
        the most samples (definitions.py, "Samples and time"); None without two samples on one thread."""
        if self._period is None:
            self._period = (None,)
            if self.has("COMPOSITE_EVENTS"):
                top = self._rows("""SELECT globalTid, count(*) AS n FROM COMPOSITE_EVENTS WHERE globalTid IS NOT NULL
                                    GROUP BY 1 ORDER BY n DESC, globalTid LIMIT 1""")
                if top and top[0][1] >= 2:
                    t = np.sort(np.array([r[0] for r in self._rows(
                        f"SELECT start FROM COMPOSITE_EVENTS WHERE globalTid = {int(top[0][0])} "
                        f"LIMIT {PERIOD_SAMPLES}")], np.int64))
                    d = np.diff(t)
                    d = d[d > 0]
                    if len(d):
                        self._period = (float(np.median(d)), int(len(d)))
        return None if self._period[0] is None else self._period


def _ids(ids) -> str:
    return ",".join(str(int(i)) for i in ids) or "NULL"


def _arrays(rows: list[tuple], names: tuple[str, ...]) -> dict[str, np.ndarray]:
    if not rows:
        return {n: np.zeros(0, np.int64) for n in names}
    cols = list(zip(*rows))
    return {n: np.array([0 if v is None else int(v) for v in c], np.int64) for n, c in zip(names, cols)}


def _base(fn: str) -> str:
    """A call's function name as stack symbols spell it: no version suffix (cudaMalloc_v3020), no 64 suffix."""
    return re.sub(r"(_v\d+|64)$", "", fn)


# -- the calling function of a CUDA call -------------------------------------------------------------------

def is_cuda_frame(symbol: str, module: str) -> bool:
    return bool(re.search(CUDA_FRAME_MODULE, module or "") or re.search(CUDA_FRAME_SYMBOL, symbol or ""))


def caller(frames: list[tuple[str, str, bool]], skip: set[str] = frozenset()) -> str | None:
    """The calling function of the CUDA call a stack passes through: the first resolved frame above the
    outermost CUDA runtime/driver/profiler frame (measure/labels.py), skipping frames whose base name is in
    ``skip`` (a kernel's own host-side launch stub). ``frames``: (symbol, module, unresolved), innermost first.
    None when the stack holds no CUDA frame or nothing resolved above it."""
    from dashcam.measure.names import short_kernel_name

    cuda = [k for k, (s, m, _) in enumerate(frames) if is_cuda_frame(s, m)]
    if not cuda:
        return None
    for sym, _, unresolved in frames[cuda[-1] + 1:]:
        if unresolved or not sym or sym.startswith(("0x", "[")):
            continue
        if short_kernel_name(sym, limit=10_000) in skip:
            continue
        return sym
    return None


def os_caller(frames: list[tuple[str, str, bool]]) -> str | None:
    """The function that made an OS runtime call, from the call's backtrace (innermost first): the first
    resolved frame above the call itself that is not in the C library, the loader, the kernel, a language
    runtime (labels.SYSTEM_FRAME_MODULE) or CUDA (a CUDA call's OS calls belong to the CUDA call); None when
    no frame qualifies."""
    for sym, mod, unresolved in frames[1:]:
        if unresolved or not sym or sym.startswith(("0x", "[")):
            continue
        if re.search(SYSTEM_FRAME_MODULE, mod or "") or is_cuda_frame(sym, mod):
            continue
        return sym
    return None
