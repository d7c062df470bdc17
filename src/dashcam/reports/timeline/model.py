"""Timeline (issue 6): rows of events over a window, binned into strips for the terminal.

The data model (Event, Row, Timeline) is shared with ``dashcam.reports.timeline.svg``.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from dashcam.errors import BadParameter
from dashcam.measure.definitions import Window
from dashcam.measure.intervals import gaps, kernel_unions
from dashcam.profile.host_window import host_window
from dashcam.reports.timeline.caption import AXIS_LABEL, HOST_AXIS_LABEL, NOTHING_DRAWN, highlight_caption, title
from dashcam.text.format import fmt_bytes


@dataclass
class Event:
    """One interval on a row (ns, profile clock)."""

    start: int
    end: int
    name: str      # kernel short name, API name, copy kind ("HtoD 64 MB"), NVTX label
    category: str  # "kernel" | "memcpy" | "memset" | "sync" | "api" | "nvtx"


@dataclass
class Row:
    label: str     # "GPU 0 kernels", "GPU 0 memory", "pid 1001 tid 1001 (python)", "NVTX pid 1001 tid 1001"
    kind: str      # "gpu" | "memory" | "thread" | "nvtx"
    events: list[Event] = field(default_factory=list)


@dataclass
class Timeline:
    start_ns: int
    end_ns: int
    origin_ns: int  # profile window start; times are shown in ms from it
    rows: list[Row]
    highlight: tuple[int, int] | None = None  # e.g. the gap that `--around gap` chose
    title: str = ""                # what the picture is of: the profile's file name
    caption: str | None = None     # what the highlight is, its figures and (a gap) its causes
    axis: str = AXIS_LABEL         # what the times count from


CATEGORY_COLORS = {
    "kernel": "green", "memcpy": "dark_orange", "memset": "yellow",
    "sync": "red", "api": "blue", "nvtx": "purple",
}
CATEGORY_ORDER = ["kernel", "memcpy", "memset", "sync", "api", "nvtx"]  # tie-break and legend order
MAX_THREADS = 6
GAP_MARGIN = 0.5  # `around`: the chosen interval +- this fraction of its length


# -- building ------------------------------------------------------------------------

def build_timeline(profile, start_ms=None, end_ms=None, gpus=None, around=None,
                   max_events_per_row: int = 20000) -> Timeline:
    """Rows of events over the window: per GPU its kernels and its copies/memsets, the busiest
    CPU threads' CUDA API calls (top 6 by API time in the window) and their NVTX ranges.

    ``around``: ``"gap"`` (largest kernel gap of the first chosen GPU), ``("kernel", NAME)`` or
    ``("nvtx", NAME)`` (first match, case-insensitive substring); the window becomes that
    interval +- 50 % of its length (clamped to the profile window), and it is the highlight.
    Each row keeps at most ``max_events_per_row`` events (the longest).
    """
    w, no_gpu = host_window(profile, start_ms, end_ms)  # a CPU-only capture: its host rows' span, host rows only
    devices = _devices(profile, gpus)
    highlight = None
    if around is not None:
        a, b = _around(profile, w, devices, around)
        highlight = (a, b)
        m = round((b - a) * GAP_MARGIN)
        full0, full1 = profile.full_window or (w.start_ns, w.end_ns)
        w = Window(max(full0, a - m), min(full1, b + m), w.profile_start_ns)
    s, e, cap = int(w.start_ns), int(w.end_ns), int(max_events_per_row)
    rows: list[Row] = []
    for d in devices:
        rows.append(Row(f"GPU {d} kernels", "gpu", _events(profile, f"""
            SELECT k.start, k."end", coalesce(st.value, '<unnamed kernel>') AS name, 'kernel' AS category
            FROM (SELECT start, "end", short_name_id FROM kernel_times
                  WHERE device_id = {d} AND "end" > {s} AND start < {e}
                  ORDER BY "end" - start DESC, start LIMIT {cap}) k
            LEFT JOIN strings st ON st.id = k.short_name_id""", s, e)))
        rows.append(Row(f"GPU {d} memory", "memory", _events(profile, f"""
            SELECT start, "end", name, category FROM (
                SELECT start, "end", kind || ' ' || bytes AS name, 'memcpy' AS category FROM memcpy
                WHERE device_id = {d} AND "end" > {s} AND start < {e}
                UNION ALL
                SELECT start, "end", 'memset ' || bytes, 'memset' FROM memset
                WHERE device_id = {d} AND "end" > {s} AND start < {e})
            ORDER BY "end" - start DESC, start LIMIT {cap}""", s, e)))
    pid_filter = ""
    if gpus is not None:
        ids = ",".join(str(d) for d in devices)
        pid_filter = (f"AND a.pid IN (SELECT pid FROM kernel_times WHERE device_id IN ({ids}) "
                      f"UNION SELECT pid FROM memcpy WHERE device_id IN ({ids}))")
    threads = profile.rows(f"""
        SELECT a.pid, a.tid, any_value(coalesce(t.name, p.name)) AS name,
               sum(least(a."end", {e}) - greatest(a.start, {s})) AS busy
        FROM api_calls a
        LEFT JOIN (SELECT pid, tid, any_value(name) AS name FROM threads GROUP BY 1, 2) t
               ON t.pid = a.pid AND t.tid = a.tid
        LEFT JOIN (SELECT pid, any_value(name) AS name FROM processes GROUP BY 1) p ON p.pid = a.pid
        WHERE a."end" > {s} AND a.start < {e} AND a.pid IS NOT NULL {pid_filter}
        GROUP BY a.pid, a.tid ORDER BY busy DESC, a.pid, a.tid LIMIT {MAX_THREADS}""")
    if not threads and profile.has_table("nvtx"):  # no CUDA calls (a CPU-only capture): the threads with ranges
        threads = profile.rows(f"""
            SELECT pid, tid, NULL, sum(least("end", {e}) - greatest(start, {s})) AS busy FROM nvtx_times
            WHERE is_range AND "end" > {s} AND start < {e} AND pid IS NOT NULL
            GROUP BY 1, 2 ORDER BY busy DESC, 1, 2 LIMIT {MAX_THREADS}""")
    for pid, tid, name, _ in threads:
        label = f"pid {pid} tid {tid}" + (f" ({name})" if name else "")
        ev = _events(profile, f"""
            SELECT a.start, a."end", coalesce(n.name, '<unknown api>') AS name,
                   CASE WHEN n.name LIKE '%Synchronize' THEN 'sync' ELSE 'api' END AS category
            FROM (SELECT start, "end", name_id FROM api_calls
                  WHERE pid = {pid} AND tid = {tid} AND "end" > {s} AND start < {e}
                  ORDER BY "end" - start DESC, start LIMIT {cap}) a
            LEFT JOIN api_names n ON n.id = a.name_id""", s, e)
        if ev:  # a thread found by its NVTX ranges may make no CUDA call
            rows.append(Row(label, "thread", ev))
    for pid, tid, _, _ in threads:
        # the longest ranges on the string-free view first; labels for those rows only
        ev = _events(profile, f"""
            SELECT n.start, n."end", coalesce(n.label, '<unnamed range>') AS name, 'nvtx' AS category
            FROM nvtx n JOIN (SELECT DISTINCT start, "end" FROM (
                    SELECT start, "end" FROM nvtx_times
                    WHERE is_range AND pid = {pid} AND tid = {tid} AND "end" > {s} AND start < {e}
                    ORDER BY "end" - start DESC, start LIMIT {cap})) top
              ON n.start = top.start AND n."end" = top."end"
            WHERE n.is_range AND n.pid = {pid} AND n.tid = {tid}""", s, e)
        if ev:
            rows.append(Row(f"NVTX pid {pid} tid {tid}", "nvtx", ev))
    caption = highlight_caption(profile, around, highlight, devices[0] if devices else None, start_ms, end_ms)
    if not rows and caption is None:
        caption = NOTHING_DRAWN
    return Timeline(s, e, int(w.profile_start_ns), rows, highlight, title=title(profile), caption=caption,
                    axis=HOST_AXIS_LABEL if no_gpu else AXIS_LABEL)


def _devices(profile, gpus) -> list[int]:
    if gpus is None:
        return profile.check_gpu(None)
    out: list[int] = []
    for g in gpus:
        for d in profile.check_gpu(int(g)):
            if d not in out:
                out.append(d)
    return out


def _events(profile, sql: str, s: int, e: int) -> list[Event]:
    """Events from rows (start, end, name, category), clipped to [s, e), sorted by start."""
    rows = profile.rows(f'SELECT greatest(start, {s}), least("end", {e}), name, category FROM ({sql}) '
                        'ORDER BY 1, 2')
    out = []
    for a, b, name, cat in rows:
        if cat == "memcpy" or cat == "memset":
            kind, _, nbytes = name.rpartition(" ")
            name = f"{kind} {fmt_bytes(int(nbytes))}" if nbytes.isdigit() else name
        out.append(Event(int(a), int(b), name, cat))
    return out


def _around(profile, w, devices: list[int], around) -> tuple[int, int]:
    """The interval ``around`` points at, inside window ``w``."""
    if around == "gap":
        if not devices:
            raise BadParameter("--around gap: no GPU with activity")
        d = devices[0]
        g = gaps(kernel_unions(profile, w, [d])[d], w)
        if not len(g):
            raise BadParameter(f"--around gap: GPU {d} has no gap in the window")
        i = int(((g.ends - g.starts)).argmax())
        return int(g.starts[i]), int(g.ends[i])
    kind, name = around if isinstance(around, tuple) else (None, None)
    pattern = "%" + str(name).replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
    if kind == "kernel":
        ids = ",".join(str(d) for d in devices) or "NULL"
        hit = profile.one(f"""SELECT start, "end" FROM kernels WHERE device_id IN ({ids})
            AND "end" > {w.start_ns} AND start < {w.end_ns}
            AND (short_name ILIKE ? ESCAPE '\\' OR name ILIKE ? ESCAPE '\\') ORDER BY start LIMIT 1""",
                          [pattern, pattern])
    elif kind == "nvtx":
        hit = profile.one(f"""SELECT start, "end" FROM nvtx WHERE is_range
            AND "end" > {w.start_ns} AND start < {w.end_ns} AND label ILIKE ? ESCAPE '\\'
            ORDER BY start LIMIT 1""", [pattern])
    else:
        raise BadParameter(f"--around must be gap, kernel:NAME or nvtx:NAME, not {around!r}")
    if hit is None:
        raise BadParameter(f"--around {kind}:{name}: no {kind} matching {name!r} in the window")
    a, b = int(hit[0]), int(hit[1])
    return a, max(b, a + 1)


def parse_around(text: str | None):
    """``gap`` | ``kernel:NAME`` | ``nvtx:NAME`` (or ``"kernel NAME"``) -> the ``around`` of build_timeline."""
    if text is None:
        return None
    if text.strip() == "gap":
        return "gap"
    for sep in (":", " "):
        kind, found, name = text.strip().partition(sep)
        if found and kind in ("kernel", "nvtx") and name.strip():
            return (kind, name.strip())
    raise BadParameter(f"--around must be gap, kernel:NAME or nvtx:NAME, not {text!r}")
