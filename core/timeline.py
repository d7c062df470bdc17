"""Timeline (issue 6): rows of events over a window, binned into strips for the terminal.

The data model (Event, Row, Timeline) is shared with ``dashcam.timeline_svg``.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .render import fmt_bytes


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


CATEGORY_COLORS = {
    "kernel": "green", "memcpy": "dark_orange", "memset": "yellow",
    "sync": "red", "api": "blue", "nvtx": "purple",
}
CATEGORY_ORDER = ["kernel", "memcpy", "memset", "sync", "api", "nvtx"]  # tie-break and legend order
MAX_THREADS = 6
GAP_MARGIN = 0.5  # `around`: the chosen interval +- this fraction of its length
BLOCK = "█"


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
    from .definitions import Window

    w = profile.window(start_ms, end_ms)
    devices = _devices(profile, gpus)
    highlight = None
    if around is not None:
        a, b = _around(profile, w, devices, around)
        highlight = (a, b)
        m = round((b - a) * GAP_MARGIN)
        full0, full1 = profile.full_window
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
    for pid, tid, name, _ in threads:
        label = f"pid {pid} tid {tid}" + (f" ({name})" if name else "")
        rows.append(Row(label, "thread", _events(profile, f"""
            SELECT a.start, a."end", coalesce(n.name, '<unknown api>') AS name,
                   CASE WHEN n.name LIKE '%Synchronize' THEN 'sync' ELSE 'api' END AS category
            FROM (SELECT start, "end", name_id FROM api_calls
                  WHERE pid = {pid} AND tid = {tid} AND "end" > {s} AND start < {e}
                  ORDER BY "end" - start DESC, start LIMIT {cap}) a
            LEFT JOIN api_names n ON n.id = a.name_id""", s, e)))
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
    return Timeline(s, e, int(w.profile_start_ns), rows, highlight)


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
    from .errors import BadParameter
    from .intervals import gaps, kernel_unions

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
    from .errors import BadParameter

    if text is None:
        return None
    if text.strip() == "gap":
        return "gap"
    for sep in (":", " "):
        kind, found, name = text.strip().partition(sep)
        if found and kind in ("kernel", "nvtx") and name.strip():
            return (kind, name.strip())
    raise BadParameter(f"--around must be gap, kernel:NAME or nvtx:NAME, not {text!r}")


# -- binning -------------------------------------------------------------------------

def bin_row(events: list[Event], start: int, end: int, width: int) -> list[str | None]:
    """Per cell of ``width`` equal cells over [start, end): the category covering most of it.

    Time is counted per category as the union of its events (overlaps count once). An event
    shorter than a cell still shows: it has some time in its cell. A zero-length event claims
    its cell only when nothing else covers it. Ties go to the earlier category in CATEGORY_ORDER.
    """
    import numpy as np

    from .intervals import merge

    out: list[str | None] = [None] * max(0, width)
    if width <= 0 or end <= start or not events:
        return out
    edges = start + (np.arange(width + 1, dtype=np.int64) * (end - start)) // width
    cats = sorted({ev.category for ev in events},
                  key=lambda c: (CATEGORY_ORDER.index(c) if c in CATEGORY_ORDER else len(CATEGORY_ORDER), c))
    cover = np.zeros((len(cats), width), dtype=np.int64)
    points = np.zeros((len(cats), width), dtype=bool)
    for i, c in enumerate(cats):
        s = np.array([ev.start for ev in events if ev.category == c], dtype=np.int64)
        e = np.array([ev.end for ev in events if ev.category == c], dtype=np.int64)
        u = merge(np.maximum(s, start), np.minimum(e, end))
        cover[i] = u.overlap(edges[:-1], edges[1:])
        zero = (e <= s) & (s >= start) & (s < end)
        if zero.any():
            cells = np.clip(np.searchsorted(edges, s[zero], side="right") - 1, 0, width - 1)
            points[i, cells] = True
    best = cover.argmax(axis=0)
    has = cover.max(axis=0) > 0
    point_best = points.argmax(axis=0)
    has_point = points.any(axis=0)
    for j in range(width):
        if has[j]:
            out[j] = cats[best[j]]
        elif has_point[j]:
            out[j] = cats[point_best[j]]
    return out


# -- terminal rendering --------------------------------------------------------------

def _ms(t_ns: int, tl: Timeline) -> float:
    return (t_ns - tl.origin_ns) / 1e6


def _tick_fmt(span_ms: float) -> str:
    import math

    digits = 0 if span_ms <= 0 else max(0, min(3, 2 - math.floor(math.log10(span_ms))))
    return f"{{:.{digits}f}}"


def render_strips(timeline: Timeline, console, max_label: int = 28) -> None:
    """One line of block characters per row, coloured by category, fitted to ``console.width``;
    a time axis (ms from the profile window start) and a legend below. Idle cells are blank."""
    from rich.text import Text

    tl = timeline
    labels = [r.label for r in tl.rows] + ["time (ms)"]
    label_w = min(max(len(x) for x in labels), max_label)
    width = max(10, console.width - label_w - 1)
    span_ms = (tl.end_ns - tl.start_ns) / 1e6
    cell_us = (tl.end_ns - tl.start_ns) / width / 1e3
    fmt = _tick_fmt(span_ms)
    console.print(Text(f"window {fmt.format(_ms(tl.start_ns, tl))} to {fmt.format(_ms(tl.end_ns, tl))} ms "
                       f"({span_ms:.3f} ms), one cell = {cell_us:.1f} us", style="dim"))
    seen: set[str] = set()
    for row in tl.rows:
        line = Text()
        line.append(_fit(row.label, label_w) + " ", style="bold")
        cells = bin_row(row.events, tl.start_ns, tl.end_ns, width)
        seen.update(c for c in cells if c)
        line.append_text(_cells_text(cells))
        console.print(line, no_wrap=True, overflow="crop")
    if tl.highlight:
        a, b = tl.highlight
        mark = bin_row([Event(a, b, "highlight", "mark")], tl.start_ns, tl.end_ns, width)
        line = Text()
        line.append(_fit("highlight", label_w) + " ", style="dim")
        line.append("".join("▔" if c else " " for c in mark), style="bold magenta")
        console.print(line, no_wrap=True, overflow="crop")
    ticks, numbers = _axis(tl, width, fmt)
    console.print(Text(" " * (label_w + 1) + ticks, style="dim"), no_wrap=True, overflow="crop")
    console.print(Text(_fit("time (ms)", label_w) + " " + numbers, style="dim"), no_wrap=True, overflow="crop")
    legend = Text()
    legend.append("legend: ", style="dim")
    for c in CATEGORY_ORDER:
        if c in seen:
            legend.append(BLOCK, style=CATEGORY_COLORS[c])
            legend.append(f" {c}  ")
    legend.append("blank = idle", style="dim")
    console.print(legend)


def _fit(label: str, w: int) -> str:
    return label.ljust(w) if len(label) <= w else label[: w - 1] + "…"


def _cells_text(cells: list[str | None]):
    from rich.text import Text

    t = Text()
    j = 0
    while j < len(cells):
        k = j
        while k < len(cells) and cells[k] == cells[j]:
            k += 1
        c = cells[j]
        if c is None:
            t.append(" " * (k - j))
        else:
            t.append(BLOCK * (k - j), style=CATEGORY_COLORS.get(c, "white"))
        j = k
    return t


def _axis(tl: Timeline, width: int, fmt: str) -> tuple[str, str]:
    """A tick line and a line of tick labels (ms from the origin) under ``width`` cells."""
    n = max(1, min(6, width // 14))
    ticks = [" "] * width
    numbers = [" "] * width
    for i in range(n + 1):
        pos = min(width - 1, round(i * (width - 1) / n))
        ticks[pos] = "┬" if 0 < i < n else ("┌" if i == 0 else "┐")
        label = fmt.format(_ms(tl.start_ns + (tl.end_ns - tl.start_ns) * i // n, tl))
        at = pos - len(label) + 1 if i == n else max(0, pos - len(label) // 2) if i else 0
        if all(ch == " " for ch in numbers[max(0, at - 1): at + len(label) + 1]):
            numbers[at: at + len(label)] = list(label)
    tick_line = "".join(ticks).replace(" ", "─")
    return tick_line, "".join(numbers)


# -- the small strip under `ask` / `summary` -------------------------------------------

def small_strip(profile, answer_or_none, console, width: int | None = None) -> None:
    """A few rows around the most telling window: the largest kernel gap of the GPU the answer is
    about (or of all GPUs), its kernel and memory rows and the busiest thread. Never raises."""
    try:
        from .intervals import gaps, kernel_unions

        if not hasattr(profile, "con"):  # a path
            from .profile import Profile

            profile = Profile.open(profile, progress=False)

        w = profile.window()
        gpus = list(getattr(getattr(answer_or_none, "targets", None), "gpus", None) or [])
        devices = [d for d in gpus if d in profile.devices] or profile.devices
        best = None
        for d, u in kernel_unions(profile, w, devices).items():
            g = gaps(u, w)
            if len(g):
                i = int((g.ends - g.starts).argmax())
                if best is None or g.ends[i] - g.starts[i] > best[1]:
                    best = (d, int(g.ends[i] - g.starts[i]))
        if best is None:
            return
        tl = build_timeline(profile, gpus=[best[0]], around="gap", max_events_per_row=5000)
        keep = [r for r in tl.rows if r.kind in ("gpu", "memory")] + [r for r in tl.rows if r.kind == "thread"][:1]
        tl.rows = keep
        from rich.text import Text

        console.print(Text(f"largest gap on GPU {best[0]}: {best[1] / 1e6:.3f} ms", style="dim"))
        render_strips(tl, console)
    except Exception:  # noqa: BLE001 - a picture is a bonus; never break the answer
        return


PICTURE_EVENTS_PER_ROW = 3000  # a picture keeps every event it draws: rows keep their longest events


def picture_kind(path: str) -> str:
    """"svg" or "html" from the file name; any other name is a BadParameter."""
    from .errors import BadParameter

    kind = str(path).lower().rsplit(".", 1)[-1]
    if kind not in ("svg", "html"):
        raise BadParameter(f"the picture must be a .svg or .html file, not {path!r}")
    return kind


def save_picture(tl: Timeline, path: str) -> str:
    """Write ``tl`` as an SVG or HTML picture, by the file name."""
    from . import timeline_svg

    (timeline_svg.write_svg if picture_kind(path) == "svg" else timeline_svg.write_html)(tl, path)
    return str(path)


def write_picture(profile, path: str, around: str = "gap", max_events_per_row: int = PICTURE_EVENTS_PER_ROW) -> str:
    """Write the SVG or HTML picture of the most telling window (by default the largest gap) to ``path``."""
    picture_kind(path)
    tl = build_timeline(profile, around=parse_around(around), max_events_per_row=max_events_per_row)
    return save_picture(tl, path)
