"""Timeline (issue 6) as a self-contained SVG, and an HTML page around it with tooltips and zoom.

Every event is one ``<rect>`` (full resolution, no binning). Each row is a
``<g class="row" data-label=...>`` holding its label and a nested ``<svg class="lane zoom">``
whose viewBox is in ms from ``timeline.origin_ns``; zooming only changes those viewBoxes.
Nothing else in the SVG is a ``<rect>`` (swatches and bands are paths), so rects == events.
No external fonts, scripts or URLs; all profile text is XML-escaped.
"""
from __future__ import annotations

import math
import re
import textwrap
from pathlib import Path
from xml.sax.saxutils import escape, quoteattr

from dashcam.reports.timeline.model import Timeline
from dashcam.text.format import duration_label
from dashcam.text.shorten import shorten

COLORS = {
    "kernel": "#2ca02c", "memcpy": "#ff7f0e", "memset": "#e6c229",
    "sync": "#d62728", "api": "#1f77b4", "nvtx": "#9467bd",
}
OTHER_COLOR = "#7f7f7f"
# the first installed family is used: rasterisers (resvg) map a bare "sans-serif" to Arial, missing on Linux
FONTS = "DejaVu Sans, Helvetica, Arial, sans-serif"
SVG_NS = "http://www.w3.org/2000/svg"

LABEL_W = 300      # px, label column
PLOT_W = 1200      # px, time axis
LANE_H = 18        # px per row
LANE_GAP = 4
LEGEND_Y = 30      # px, top of the legend's swatches (the title above)
TOP = 52           # px above the first lane (title and legend)
AXIS_H = 42        # px below the last lane (ticks, tick labels and the axis label)
CAPTION_CHARS = 200  # the caption is wrapped at this many characters a line
CAPTION_LINE = 16  # px per caption line
LANE_SHADE = 0.05  # the lanes' grey: translucent, so the highlight band under them shows
HIGHLIGHT_COLOR = "#ffd9a0"
BAR_CHAR_W = 6.2   # px per character of a bar label (font-size 10), an upper bound for sans-serif
BAR_PAD = 3        # px between a bar's edge and its label
BAR_MIN_CHARS = 10  # a bar with room for fewer letters of a longer name has no label
LABEL_CHARS = 46   # longer labels are cut in the picture (data-label keeps them whole)

_BAD_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def _text(s: object) -> str:
    """Profile text as XML character data: control chars dropped, <>& escaped."""
    return escape(_BAD_XML.sub("", str(s)))


def _attr(s: object) -> str:
    """Profile text as a quoted XML attribute value."""
    return quoteattr(_BAD_XML.sub("", str(s)))


def _num(v: float) -> str:
    """Compact float for coordinates (ns precision when in ms)."""
    s = f"{v:.6f}".rstrip("0").rstrip(".")
    return "0" if s in ("", "-0") else s


def nice_ticks(lo: float, hi: float, target: int = 8) -> list[float]:
    """Round tick positions (1/2/5 x 10^k) covering [lo, hi]; same rule as the page's JS."""
    span = hi - lo
    if not span > 0:
        return [lo]
    raw = span / target
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)
    first = math.ceil(lo / step)
    return [round(k * step, 12) for k in range(first, math.floor(hi / step) + 1)]


def _tick_label(v: float, ticks: list[float]) -> str:
    step = ticks[1] - ticks[0] if len(ticks) > 1 else 1.0
    decimals = max(0, -math.floor(math.log10(step))) if step > 0 else 0
    return f"{v:.{decimals}f}"


def _view(tl: Timeline) -> tuple[float, float]:
    """(x0, width) of the time range in ms from origin."""
    x0 = (tl.start_ns - tl.origin_ns) / 1e6
    width = max((tl.end_ns - tl.start_ns) / 1e6, 1e-6)
    return x0, width


def svg_string(tl: Timeline, interactive: bool = False) -> str:
    """The timeline as one SVG document (string, no XML declaration): the title, the legend, one lane per row
    with its events (short names written on the bars wide enough), the axis (``tl.axis``) and the caption.

    Static (the .svg file, the PNG): an event narrower than a pixel is drawn one pixel wide, nothing relies on
    ``vector-effect`` (which rasterisers such as resvg ignore). ``interactive`` (the HTML page, which zooms):
    events keep their true width and a non-scaling 1 px outline keeps the narrow ones visible at any zoom.
    """
    x0, width = _view(tl)
    n = len(tl.rows)
    lanes_h = n * (LANE_H + LANE_GAP)
    total_w = LABEL_W + PLOT_W + 20
    caption = textwrap.wrap(tl.caption or "", CAPTION_CHARS)
    ay = TOP + lanes_h
    total_h = ay + AXIS_H + len(caption) * CAPTION_LINE + (8 if caption else 0)
    vb = f"{_num(x0)} 0 {_num(width)} 1"
    # width 100 % of the page and a height from the viewBox: fits any page, nothing blank around it
    out: list[str] = [
        (f'<svg xmlns="{SVG_NS}" class="timeline" width="100%" viewBox="0 0 {total_w} {total_h}" '
         f'preserveAspectRatio="xMinYMin meet" font-family="{FONTS}" font-size="11" '
         f'data-x0="{_num(x0)}" data-width="{_num(width)}" data-plot-x="{LABEL_W}" data-plot-w="{PLOT_W}">'),
        f'<path class="bg" d="M0 0H{total_w}V{total_h}H0Z" fill="#ffffff"/>',
        # a non-scaling 1 px stroke in the event's colour keeps sub-pixel events visible at any zoom
        (f"<style>rect.ev{{stroke:{OTHER_COLOR};stroke-width:1px;vector-effect:non-scaling-stroke}}"
         + "".join(f"rect.{cat}{{stroke:{color}}}" for cat, color in COLORS.items()) + "</style>")
        if interactive else "",
        f'<text class="title" x="8" y="20" font-size="15" font-weight="bold">{_text(tl.title or "timeline")}</text>',
        f'<text class="range" x="{LABEL_W + PLOT_W}" y="20" text-anchor="end" fill="#555">'
        f'{x0:.3f} – {x0 + width:.3f} ms</text>',
    ]
    out.append(_legend(tl.highlight is not None))
    # the highlight band under the lanes (which are translucent): the bars keep the legend's colours
    if tl.highlight is not None:
        a, b = ((t - tl.origin_ns) / 1e6 for t in tl.highlight)
        out.append(f'<svg class="zoom highlight" x="{LABEL_W}" y="{TOP}" width="{PLOT_W}" height="{max(lanes_h, 1)}" '
                   f'viewBox="{vb}" preserveAspectRatio="none" pointer-events="none">'
                   f'<path d="M{_num(a)} 0H{_num(b)}V1H{_num(a)}Z" fill="{HIGHLIGHT_COLOR}"/></svg>')

    for i, row in enumerate(tl.rows):
        y = TOP + i * (LANE_H + LANE_GAP)
        shown = shorten(row.label, LABEL_CHARS, [r.label for r in tl.rows])
        out.append(f'<g class="row" data-label={_attr(row.label)} data-kind={_attr(row.kind)}>')
        out.append(f'<text class="label" x="{LABEL_W - 8}" y="{y + LANE_H - 5}" '
                   f'text-anchor="end">{_text(shown)}</text>')
        out.append(f'<path class="lane-bg" d="M{LABEL_W} {y}h{PLOT_W}v{LANE_H}h-{PLOT_W}Z" fill="#000000" '
                   f'fill-opacity="{LANE_SHADE}"/>')
        out.append(f'<svg class="lane zoom" x="{LABEL_W}" y="{y}" width="{PLOT_W}" height="{LANE_H}" '
                   f'viewBox="{vb}" preserveAspectRatio="none">')
        for ev in row.events:
            color = COLORS.get(ev.category, OTHER_COLOR)
            s = (ev.start - tl.origin_ns) / 1e6
            w = max(ev.end - ev.start, 0) / 1e6
            if not interactive:
                w = max(w, width / PLOT_W)  # one pixel at least
            out.append(
                f'<rect class="ev {_text(ev.category)}" x="{_num(s)}" y="0.1" width="{_num(w)}" height="0.8" '
                f'fill="{color}">'
                f'<title>{_text(ev.name)} · {duration_label(ev.end - ev.start)}</title></rect>')
        out.append("</svg>")
        out.append(_bar_labels(row, y, x0, width, tl.origin_ns))
        out.append("</g>")

    # time axis (tick labels are redrawn by the page's JS when zooming)
    ticks = nice_ticks(x0, x0 + width)
    out.append(f'<g class="axis"><path d="M{LABEL_W} {ay}h{PLOT_W}" stroke="#333" fill="none"/>')
    for t in ticks:
        px = LABEL_W + (t - x0) / width * PLOT_W
        out.append(f'<path d="M{px:.2f} {TOP}V{ay + 5}" stroke="#999" stroke-opacity="0.4" fill="none"/>'
                   f'<text x="{px:.2f}" y="{ay + 17}" text-anchor="middle">{_tick_label(t, ticks)}</text>')
    out.append(f'<text class="unit" x="{LABEL_W + PLOT_W / 2:.0f}" y="{ay + 32}" text-anchor="middle" '
               f'fill="#555">{_text(tl.axis)}</text></g>')
    if caption:
        out.append('<g class="caption">' + "".join(
            f'<text x="8" y="{ay + AXIS_H + 6 + k * CAPTION_LINE}">{_text(line)}</text>'
            for k, line in enumerate(caption)) + "</g>")
    out.append("</svg>")
    return "\n".join(out)


def _legend(highlighted: bool) -> str:
    """The swatches (paths, not rects): one per category, and the highlight's band when there is one."""
    lx = LABEL_W
    out = ['<g class="legend">']
    entries = list(COLORS.items()) + ([("highlight", HIGHLIGHT_COLOR)] if highlighted else [])
    for cat, color in entries:
        out.append(f'<path d="M{lx} {LEGEND_Y}h12v12h-12Z" fill="{color}"/>'
                   f'<text x="{lx + 16}" y="{LEGEND_Y + 10}">{cat}</text>')
        lx += 24 + 7 * len(cat) + 18
    out.append("</g>")
    return "".join(out)


def _bar_labels(row, y: int, x0: float, width: float, origin_ns: int) -> str:
    """The events' names written on their bars, where a bar is wide enough for a few letters (cut with "…");
    in page pixels, so the page's JS hides them while zoomed."""
    out = []
    free_from = -math.inf  # px where the last label ends: nested or overlapping bars get one label
    for ev in sorted(row.events, key=lambda e: (e.start, -e.end)):
        px = LABEL_W + ((ev.start - origin_ns) / 1e6 - x0) / width * PLOT_W
        pw = (ev.end - ev.start) / 1e6 / width * PLOT_W
        fits = int((pw - 2 * BAR_PAD) // BAR_CHAR_W)
        if px < free_from or fits < min(len(ev.name), BAR_MIN_CHARS):
            continue
        shown = ev.name if len(ev.name) <= fits else ev.name[:fits - 1] + "…"
        ink = "#222222" if ev.category == "memset" else "#ffffff"
        out.append(f'<text x="{px + BAR_PAD:.1f}" y="{y + LANE_H - 5}" fill="{ink}">{_text(shown)}</text>')
        free_from = px + pw
    return f'<g class="bar-labels" font-size="10" pointer-events="none">{"".join(out)}</g>' if out else ""


def svg_document(timeline: Timeline) -> str:
    """The standalone SVG file's text: the XML declaration and the static SVG."""
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + svg_string(timeline) + "\n"


def write_svg(timeline: Timeline, path: str | Path) -> Path:
    """Write the timeline as a standalone SVG file."""
    path = Path(path)
    path.write_text(svg_document(timeline), encoding="utf-8")
    return path


_CSS = """
body { margin: 8px; font-family: sans-serif; font-size: 13px; background: #fff; color: #222; }
#wrap { position: relative; user-select: none; }
#wrap svg.timeline { width: 100%; height: auto; display: block; }
#tip { position: fixed; pointer-events: none; background: #222; color: #fff; padding: 3px 6px;
       border-radius: 3px; font: 12px monospace; white-space: pre; display: none; z-index: 2; max-width: 80ch;
       overflow: hidden; text-overflow: ellipsis; }
#sel { position: absolute; top: 0; bottom: 0; background: rgba(30,120,255,0.18);
       border: 1px solid rgba(30,120,255,0.6); display: none; pointer-events: none; }
rect.ev:hover { fill-opacity: 0.6; }
.help { color: #666; margin: 4px 0 8px; }
"""

# Inline JS: tooltips by delegation on the SVG's mouseover, drag-to-zoom on the time range
# (sets every lane's viewBox x-range), double-click resets, ``#t=a,b`` (ms) opens zoomed.
_JS = r"""
(function () {
  var svg = document.querySelector('svg.timeline');
  var wrap = document.getElementById('wrap'), tip = document.getElementById('tip');
  var sel = document.getElementById('sel');
  var X0 = parseFloat(svg.dataset.x0), W = parseFloat(svg.dataset.width);
  var PX = parseFloat(svg.dataset.plotX), PW = parseFloat(svg.dataset.plotW);
  var NS = 'http://www.w3.org/2000/svg';
  var view = [X0, W];

  function ticks(lo, hi) {
    var raw = (hi - lo) / 8, mag = Math.pow(10, Math.floor(Math.log10(raw))), step = 10 * mag;
    [1, 2, 5, 10].some(function (m) { if (m * mag >= raw) { step = m * mag; return true; } return false; });
    var out = [];
    for (var k = Math.ceil(lo / step); k <= Math.floor(hi / step); k++) out.push(k * step);
    return {list: out, decimals: Math.max(0, -Math.floor(Math.log10(step)))};
  }
  function drawAxis() {
    var axis = svg.querySelector('g.axis'), base = axis.firstElementChild, unit = axis.lastElementChild;
    while (axis.children.length > 2) axis.removeChild(axis.children[1]);
    var d = base.getAttribute('d').match(/M([\d.]+) ([\d.]+)/), ay = parseFloat(d[2]);
    var firstLane = svg.querySelector('svg.lane'), y0 = firstLane ? parseFloat(firstLane.getAttribute('y')) : ay;
    var t = ticks(view[0], view[0] + view[1]);
    t.list.forEach(function (v) {
      var px = PX + (v - view[0]) / view[1] * PW;
      var line = document.createElementNS(NS, 'path');
      line.setAttribute('d', 'M' + px.toFixed(2) + ' ' + y0 + 'V' + (ay + 5));
      line.setAttribute('stroke', '#999'); line.setAttribute('stroke-opacity', '0.4');
      line.setAttribute('fill', 'none');
      var txt = document.createElementNS(NS, 'text');
      txt.setAttribute('x', px.toFixed(2)); txt.setAttribute('y', ay + 17); txt.setAttribute('text-anchor', 'middle');
      txt.textContent = v.toFixed(t.decimals);
      axis.insertBefore(line, unit); axis.insertBefore(txt, unit);
    });
    var range = svg.querySelector('text.range');
    if (range) range.textContent = (+view[0].toFixed(6)) + ' – ' + (+(view[0] + view[1]).toFixed(6))
      + ' ms';
  }
  function setView(a, w) {
    if (!(w > 0)) return;
    view = [a, w];
    var vb = a + ' 0 ' + w + ' 1';
    svg.querySelectorAll('svg.zoom').forEach(function (s) { s.setAttribute('viewBox', vb); });
    var whole = a === X0 && w === W;  // bar labels are in page pixels: shown at the whole view only
    svg.querySelectorAll('g.bar-labels').forEach(function (g) { g.style.display = whole ? '' : 'none'; });
    drawAxis();
  }
  window.timelineZoom = function (a, b) { setView(Math.min(a, b), Math.abs(b - a)); };

  function msAt(clientX) {
    var r = svg.getBoundingClientRect(), scale = r.width / svg.viewBox.baseVal.width;
    var frac = (clientX - r.left - PX * scale) / (PW * scale);
    return view[0] + Math.min(1, Math.max(0, frac)) * view[1];
  }
  svg.addEventListener('mouseover', function (e) {
    var r = e.target;
    if (r.tagName !== 'rect') return;
    var title = r.querySelector('title');
    var row = r.closest('g.row');
    tip.textContent = (title ? title.textContent : '') + '\n' + (row ? row.dataset.label : '') +
      '\nstart ' + (+parseFloat(r.getAttribute('x')).toFixed(4)) + ' ms';
    tip.style.display = 'block';
  });
  svg.addEventListener('mousemove', function (e) {
    tip.style.left = (e.clientX + 14) + 'px'; tip.style.top = (e.clientY + 14) + 'px';
  });
  svg.addEventListener('mouseout', function (e) { if (e.target.tagName === 'rect') tip.style.display = 'none'; });

  var dragStart = null;
  svg.addEventListener('mousedown', function (e) {
    if (e.button !== 0) return;
    dragStart = e.clientX; e.preventDefault();
  });
  window.addEventListener('mousemove', function (e) {
    if (dragStart === null) return;
    var w = wrap.getBoundingClientRect(), a = Math.min(dragStart, e.clientX), b = Math.max(dragStart, e.clientX);
    sel.style.display = 'block'; sel.style.left = (a - w.left) + 'px'; sel.style.width = (b - a) + 'px';
  });
  window.addEventListener('mouseup', function (e) {
    if (dragStart === null) return;
    var moved = Math.abs(e.clientX - dragStart), a = msAt(dragStart), b = msAt(e.clientX);
    dragStart = null; sel.style.display = 'none';
    if (moved >= 3 && b !== a) window.timelineZoom(a, b);
  });
  svg.addEventListener('dblclick', function () { setView(X0, W); });

  var m = /^#t=(-?[\d.]+),(-?[\d.]+)$/.exec(location.hash);
  if (m) window.timelineZoom(parseFloat(m[1]), parseFloat(m[2]));
  document.body.setAttribute('data-ready', '1');
})();
"""


def html_string(tl: Timeline, title: str | None = None) -> str:
    """One self-contained HTML page embedding the SVG (inline CSS/JS, no network)."""
    title = title or (f"{tl.title} — dashcam timeline" if tl.title else "dashcam timeline")
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<title>{_text(title)}</title><style>{_CSS}</style></head>\n<body>\n"
        f'<div class="help">{len(tl.rows)} rows, {sum(len(r.events) for r in tl.rows)} events. '
        "Hover an event for its name and duration; drag across the timeline to zoom; double-click to reset.</div>\n"
        f'<div id="wrap">\n{svg_string(tl, interactive=True)}\n<div id="sel"></div></div>\n<div id="tip"></div>\n'
        f"<script>{_JS}</script>\n</body></html>\n"
    )


def write_html(timeline: Timeline, path: str | Path, title: str | None = None) -> Path:
    """Write the interactive HTML page (self-contained)."""
    path = Path(path)
    path.write_text(html_string(timeline, title), encoding="utf-8")
    return path
