"""The timeline in the terminal: one line of coloured blocks per row, fitted to the console width."""
from __future__ import annotations

import math

import numpy as np

from dashcam.measure.intervals import gaps, kernel_unions, merge
from dashcam.reports.timeline.model import CATEGORY_COLORS, CATEGORY_ORDER, Event, Timeline, build_timeline
from dashcam.text.shorten import shorten

BLOCK = "█"
# A cell is drawn to scale: by the share of its time the row's events cover (least share, glyph, legend words),
# so a row of rare short events reads light, not busy.
SHADES = [(0.5, BLOCK, "50 % or more"), (0.1, "▒", "10-50 %"), (0.0, "░", "under 10 %")]


# -- binning -------------------------------------------------------------------------

def bin_row(events: list[Event], start: int, end: int, width: int) -> list[str | None]:
    """Per cell of ``width`` equal cells over [start, end): the category covering most of it (see bin_cells)."""
    return [c for c, _ in bin_cells(events, start, end, width)]


def bin_cells(events: list[Event], start: int, end: int, width: int) -> list[tuple[str | None, float]]:
    """Per cell of ``width`` equal cells over [start, end): the category covering most of it, and the share
    of the cell's time that any event of the row covers (0-1).

    Time is counted per category as the union of its events (overlaps count once). An event
    shorter than a cell still shows: it has some time in its cell. A zero-length event claims
    its cell only when nothing else covers it (share 0). Ties go to the earlier category in CATEGORY_ORDER.
    """
    out: list[tuple[str | None, float]] = [(None, 0.0)] * max(0, width)
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
    every = merge(np.array([max(ev.start, start) for ev in events], dtype=np.int64),
                  np.array([min(ev.end, end) for ev in events], dtype=np.int64))
    share = every.overlap(edges[:-1], edges[1:]) / np.maximum(np.diff(edges), 1)
    best = cover.argmax(axis=0)
    has = cover.max(axis=0) > 0
    point_best = points.argmax(axis=0)
    has_point = points.any(axis=0)
    for j in range(width):
        if has[j]:
            out[j] = (cats[best[j]], min(1.0, float(share[j])))
        elif has_point[j]:
            out[j] = (cats[point_best[j]], 0.0)
    return out


def glyph(share: float) -> str:
    """The block drawn for a cell whose time is ``share`` covered: full, half-shaded or light (SHADES)."""
    return next(g for least, g, _ in SHADES if share >= least)


# -- terminal rendering --------------------------------------------------------------

def _ms(t_ns: int, tl: Timeline) -> float:
    return (t_ns - tl.origin_ns) / 1e6


def _tick_fmt(span_ms: float) -> str:
    digits = 0 if span_ms <= 0 else max(0, min(3, 2 - math.floor(math.log10(span_ms))))
    return f"{{:.{digits}f}}"


def render_strips(timeline: Timeline, console, max_label: int = 28) -> None:
    """One line of block characters per row, coloured by category, fitted to ``console.width``;
    a time axis (``tl.axis``), a legend and the highlight's caption below. A cell is shaded by the share of its
    time covered (SHADES); idle cells are blank."""
    from rich.text import Text

    tl = timeline
    labels = [r.label for r in tl.rows] + ["time (ms)"]
    label_w = min(max(len(x) for x in labels), max_label)
    width = max(10, console.width - label_w - 1)
    span_ms = (tl.end_ns - tl.start_ns) / 1e6
    cell_us = (tl.end_ns - tl.start_ns) / width / 1e3
    fmt = _tick_fmt(span_ms)
    console.print(Text(f"window {fmt.format(_ms(tl.start_ns, tl))} to {fmt.format(_ms(tl.end_ns, tl))} ms "
                       f"({span_ms:.3f} ms), one cell = {cell_us:.1f} us; {tl.axis}", style="dim"))
    seen: set[str] = set()
    for row in tl.rows:
        line = Text()
        line.append(_fit(row.label, label_w) + " ", style="bold")
        cells = bin_cells(row.events, tl.start_ns, tl.end_ns, width)
        seen.update(c for c, _ in cells if c)
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
    legend.append("blank = idle; share of a cell's time covered: "
                  + ", ".join(f"{g} {words}" for _, g, words in SHADES), style="dim")
    console.print(legend)
    if tl.caption:
        console.print(Text(tl.caption, style="dim"))


def _fit(label: str, w: int) -> str:
    return shorten(label, w).ljust(w)


def _cells_text(cells: list[tuple[str | None, float]]):
    """The cells as blocks: coloured by category, shaded by the share of the cell covered (glyph)."""
    from rich.text import Text

    drawn = [(c, glyph(share) if c else " ") for c, share in cells]
    t = Text()
    j = 0
    while j < len(drawn):
        k = j
        while k < len(drawn) and drawn[k] == drawn[j]:
            k += 1
        c, g = drawn[j]
        t.append(g * (k - j), style=CATEGORY_COLORS.get(c, "white") if c else None)
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
    """A few rows around the most telling window: the largest kernel gap, inside the answer's window, of the GPU
    the answer is about (or of all GPUs), its kernel and memory rows and the busiest thread. Never raises."""
    try:
        if not hasattr(profile, "con"):  # a path
            from dashcam.profile import Profile

            profile = Profile.open(profile, progress=False)

        targets = getattr(answer_or_none, "targets", None)
        start, end = getattr(targets, "start_ms", None), getattr(targets, "end_ms", None)
        w = profile.window(start, end)  # the answer's window (a question's, chat's /window), else the whole
        gpus = list(getattr(targets, "gpus", None) or [])
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
        tl = build_timeline(profile, start, end, gpus=[best[0]], around="gap", max_events_per_row=5000)
        keep = [r for r in tl.rows if r.kind in ("gpu", "memory")] + [r for r in tl.rows if r.kind == "thread"][:1]
        tl.rows = keep
        from rich.text import Text

        console.print(Text(f"largest gap on GPU {best[0]}: {best[1] / 1e6:.3f} ms", style="dim"))
        render_strips(tl, console)
    except Exception:
        return
