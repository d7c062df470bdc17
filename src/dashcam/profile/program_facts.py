"""Names and counts of the whole profile that say what program made it (the workload tool reads them): its
processes, threads, kernels, CUDA API calls and NVTX ranges by name, counted once when the cache is built and
kept in the manifest (``derived.program_facts``), so a query does not scan millions of rows for them.

The host-side facts come from the model views in the derive step, with the start-up calls of the whole-profile
window (``startup_calls``: module loads, each kernel's first launch call); the NVTX ones (ranges per label group,
domain names) from each NVTX chunk as it is extracted (``NvtxFacts``); ``nvtx_facts`` states the same NVTX
counts in SQL over the views, the definition the chunk counts are checked against (tests/test_program_facts.py).
"""
from __future__ import annotations

import threading

import numpy as np

from dashcam.measure.definitions import Window
from dashcam.measure.intervals import merge
from dashcam.measure.labels import MODULE_LOAD_API
from dashcam.profile.nvtx_kernels import NVTX_RANGE_TYPES

NVTX_DOMAIN_CREATE = 75  # NVTX event type of a domain's creation: its label is the domain's name


def _rows(con, sql: str) -> list[list]:
    return [list(r) for r in con.execute(sql).fetchall()]


# A shared library the capture names (a CPU sample's or backtrace's module path): its file name, version dropped.
LIBRARY = r"([^/]+\.so)(\.[0-9.]+)?$"


def host_facts(con) -> dict:
    """pids (launching or running CUDA work), process and thread names among them, kernels by (short, full)
    name, API calls by name, kernels launched from graphs, and the shared libraries the capture's strings name
    (call-stack modules: ``libnvomp.so``), each with count 1."""
    pids = [int(r[0]) for r in con.execute(
        "SELECT pid FROM (SELECT DISTINCT pid FROM api_calls UNION SELECT DISTINCT pid FROM kernel_times) "
        "WHERE pid IS NOT NULL ORDER BY 1").fetchall()]
    ids = ",".join(map(str, pids)) or "NULL"
    return {
        "pids": pids,
        "process": _rows(con, f"SELECT name, count(*) FROM processes WHERE pid IN ({ids}) AND name IS NOT NULL "
                              "GROUP BY 1"),
        "thread": _rows(con, f"SELECT name, count(*) FROM threads WHERE pid IN ({ids}) AND name IS NOT NULL "
                             "GROUP BY 1"),
        "kernel": _rows(con, "SELECT coalesce(s.value, f.value), f.value, k.n FROM (SELECT short_name_id, name_id, "
                             "count(*) AS n FROM kernel_times GROUP BY 1, 2) k "
                             "LEFT JOIN strings s ON s.id = k.short_name_id "
                             "LEFT JOIN strings f ON f.id = k.name_id"),
        "api": _rows(con, "SELECT n.name, c.n FROM (SELECT name_id, count(*) AS n FROM api_calls GROUP BY 1) c "
                          "JOIN api_names n ON n.id = c.name_id"),
        "library": _rows(con, f"SELECT regexp_extract(value, '{LIBRARY}', 1), 1 FROM strings "
                              f"WHERE regexp_matches(value, '{LIBRARY}') GROUP BY 1"),
        "graph_kernels": int(con.execute("SELECT count(*) FROM kernel_times WHERE graph_node_id IS NOT NULL")
                             .fetchall()[0][0]),
    }


def nvtx_facts(con) -> dict:
    """NVTX domain names (label -> count) and ranges per label group (label -> count)."""
    return {
        "nvtx_domain": _rows(con, f"SELECT label, count(*) FROM nvtx WHERE event_type = {NVTX_DOMAIN_CREATE} "
                                  "AND label IS NOT NULL GROUP BY 1"),
        "nvtx": _rows(con, "SELECT g.label, c.n FROM (SELECT group_id, count(*) AS n FROM nvtx_times "
                           "WHERE is_range GROUP BY 1) c JOIN nvtx_groups g USING (group_id) "
                           "WHERE g.label IS NOT NULL"),
    }


class NvtxFacts:
    """``nvtx_facts`` counted chunk by chunk during the build (worker threads)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.ranges: dict[int, int] = {}  # group id -> ranges
        self.domains: list[tuple[str | None, int | None]] = []  # (text, textId) of domain creations

    def add_chunk(self, table) -> None:
        """A raw NVTX chunk (Arrow) with its groupId column (cache/build.py)."""
        names = table.column_names
        n = table.num_rows

        def col(name, fill):
            if name not in names:
                return np.full(n, fill, np.int64)
            return np.asarray(table.column(name).fill_null(fill).to_numpy(), np.int64)

        etype = col("eventType", 59)
        has_end = table.column("end").is_valid().to_numpy(zero_copy_only=False) if "end" in names \
            else np.zeros(n, bool)
        is_range = has_end & np.isin(etype, NVTX_RANGE_TYPES)
        gid = table.column("groupId").is_valid().to_numpy(zero_copy_only=False) if "groupId" in names \
            else np.zeros(n, bool)
        g, c = np.unique(col("groupId", -1)[is_range & gid], return_counts=True)
        dom = np.flatnonzero(etype == NVTX_DOMAIN_CREATE) if "eventType" in names else np.zeros(0, np.int64)
        text = table.column("text").take(dom).to_pylist() if "text" in names and len(dom) else [None] * len(dom)
        tid = table.column("textId").take(dom).to_pylist() if "textId" in names and len(dom) else [None] * len(dom)
        with self.lock:
            for x, k in zip(g.tolist(), c.tolist()):
                self.ranges[x] = self.ranges.get(x, 0) + k
            self.domains += list(zip(text, tid))

    def facts(self, labels: dict[str, int], strings: dict[int, str]) -> dict:
        """``nvtx_facts`` from the counts: ``labels`` label group -> id (the groups written), ``strings`` id ->
        text (the registered strings)."""
        by_id = {gid: label for label, gid in labels.items()}
        domains: dict[str, int] = {}
        for text, tid in self.domains:
            label = text if text is not None else strings.get(tid) if tid is not None else None
            if label is not None:
                domains[label] = domains.get(label, 0) + 1
        return {"nvtx_domain": [[k, v] for k, v in domains.items()],
                "nvtx": [[by_id[g], n] for g, n in self.ranges.items() if by_id.get(g) is not None]}


def clipped(w: Window) -> tuple[str, str]:
    """SQL: (start and end clipped to the window, the condition that a row overlaps it)."""
    return (f'greatest(start, {w.start_ns}) AS start, least("end", {w.end_ns}) AS "end"',
            f'"end" > {w.start_ns} AND start < {w.end_ns}')


def module_loads_sql(w: Window) -> str:
    """Module and library load calls (labels.MODULE_LOAD_API) overlapping the window, clipped."""
    clip, inside = clipped(w)
    return f"""SELECT {clip} FROM api_calls WHERE {inside} AND name_id IN
        (SELECT id FROM api_names WHERE regexp_matches(name, '{MODULE_LOAD_API}'))"""


def first_launches_sql(w: Window) -> str:
    """Each kernel's first launch call per process, GPU and kernel name, overlapping the window, clipped."""
    clip, inside = clipped(w)
    return f"""SELECT {clip} FROM (SELECT min(api_start) AS start, arg_min(api_end, api_start) AS "end"
        FROM launches WHERE api_start IS NOT NULL GROUP BY pid, device_id, short_name_id) WHERE {inside}"""


def union_of(con, sql: str, w: Window) -> tuple[int, np.ndarray, np.ndarray, int]:
    """The union of the rows of ``sql`` (start, end) inside the window: its length and intervals, and the rows."""
    d = con.execute(sql).fetchnumpy()
    if not len(d["start"]):
        return 0, np.zeros(0, np.int64), np.zeros(0, np.int64), 0
    u = merge(np.asarray(d["start"], np.int64), np.asarray(d["end"], np.int64), w)
    return u.total, u.starts, u.ends, len(d["start"])


def startup_calls(con, w: Window) -> dict:
    """Over the whole-profile window ``w``: the union (ns, starts, ends) and row count of the module loads and
    of the first launch calls."""
    out = {}
    for name, sql in (("module_loads", module_loads_sql(w)), ("first_launches", first_launches_sql(w))):
        ns, starts, ends, rows = union_of(con, sql, w)
        out[name] = {"ns": int(ns), "starts": starts.tolist(), "ends": ends.tolist(), "rows": rows}
    return out
