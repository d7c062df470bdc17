"""The timeline as SVG / HTML: structure, escaping, self-containment, and a headless Chromium check."""
from __future__ import annotations

import re
import shutil
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from dashcam.reports.timeline import Event, Row, Timeline, build_timeline
from dashcam.reports.timeline.caption import AXIS_LABEL
from dashcam.reports.timeline.svg import (
    COLORS,
    PLOT_W,
    html_string,
    nice_ticks,
    svg_string,
    write_html,
    write_svg,
)
from dashcam.testing.scenarios import demo
from dashcam.text.format import duration_label

from .conftest import MS, US

NS = "{http://www.w3.org/2000/svg}"
HOSTILE = "<script>document.body.setAttribute('data-pwned','1')</script> & \"q\" 'a'"
ORIGIN = 5 * MS


def planted() -> Timeline:
    """3 rows, 5 events; times relative to ORIGIN are whole numbers of us."""
    return Timeline(ORIGIN, ORIGIN + 10 * MS, ORIGIN, [
        Row("GPU 0 kernels", "gpu", [Event(ORIGIN + 2 * MS, ORIGIN + 2 * MS + 400 * US, HOSTILE, "kernel"),
                                     Event(ORIGIN + 3 * MS, ORIGIN + 3 * MS + 850, "tiny", "kernel")]),
        Row("GPU 0 memory", "memory", [Event(ORIGIN, ORIGIN + 8 * MS, "HtoD 512 MB", "memcpy")]),
        Row("pid 7 tid 7 (<b>a&b</b>)", "thread", [Event(ORIGIN + 1 * MS, ORIGIN + 2 * MS, "cudaMemcpy", "api"),
                                                  Event(ORIGIN + 8 * MS, ORIGIN + 9500 * US,
                                                        "cudaStreamSynchronize", "sync")]),
    ], highlight=(ORIGIN + 4 * MS, ORIGIN + 6 * MS))


def parse(text: str) -> ET.Element:
    return ET.fromstring(text)


def rows_of(root: ET.Element) -> list[ET.Element]:
    return [g for g in root.iter(f"{NS}g") if g.get("class") == "row"]


def test_svg_structure_rows_rects_titles(tmp_path):
    tl = planted()
    path = write_svg(tl, tmp_path / "t.svg")
    root = ET.parse(path).getroot()
    assert root.tag == f"{NS}svg"
    rows = rows_of(root)
    assert [g.get("data-label") for g in rows] == ["GPU 0 kernels", "GPU 0 memory", "pid 7 tid 7 (<b>a&b</b>)"]
    assert len(list(root.iter(f"{NS}rect"))) == 5
    assert [len(list(g.iter(f"{NS}rect"))) for g in rows] == [2, 1, 2]
    titles = [r.find(f"{NS}title").text for r in root.iter(f"{NS}rect")]
    assert titles == [f"{HOSTILE} · 400.0 µs", "tiny · 850 ns", "HtoD 512 MB · 8.000 ms",
                      "cudaMemcpy · 1.000 ms", "cudaStreamSynchronize · 1.500 ms"]
    raw = path.read_text()
    assert "<script>" not in raw and "<b>" not in raw
    assert "&lt;script&gt;" in raw


def test_svg_geometry_and_colours():
    root = parse(svg_string(planted()))
    lanes = [s for s in root.iter(f"{NS}svg") if "lane" in (s.get("class") or "").split()]
    assert len(lanes) == 3
    assert {s.get("viewBox") for s in lanes} == {"0 0 10 1"}  # ms from origin, window 0..10 ms
    first = next(root.iter(f"{NS}rect"))
    assert (first.get("x"), first.get("width")) == ("2", "0.4")
    fills = [r.get("fill") for r in root.iter(f"{NS}rect")]
    assert fills == [COLORS["kernel"], COLORS["kernel"], COLORS["memcpy"], COLORS["api"], COLORS["sync"]]
    legend = [t.text for g in root.iter(f"{NS}g") if g.get("class") == "legend" for t in g.iter(f"{NS}text")]
    assert legend[:6] == ["kernel", "memcpy", "memset", "sync", "api", "nvtx"]
    hl = [s for s in root.iter(f"{NS}svg") if "highlight" in (s.get("class") or "")]
    assert len(hl) == 1 and hl[0].find(f"{NS}path").get("d") == "M4 0H6V1H4Z"
    axis = [t.text for g in root.iter(f"{NS}g") if g.get("class") == "axis" for t in g.iter(f"{NS}text")]
    assert axis == ["0", "2", "4", "6", "8", "10", AXIS_LABEL]  # 10 ms / 8 -> step 2


def test_origin_offsets_window():
    """Times are ms from origin_ns, so a window starting after the origin has a shifted viewBox."""
    tl = Timeline(ORIGIN + 20 * MS, ORIGIN + 25 * MS, ORIGIN,
                  [Row("r", "gpu", [Event(ORIGIN + 21 * MS, ORIGIN + 21 * MS + 1, "k", "kernel")])])
    root = parse(svg_string(tl, interactive=True))
    lane = next(s for s in root.iter(f"{NS}svg") if "lane" in (s.get("class") or ""))
    assert lane.get("viewBox") == "20 0 5 1"
    rect = next(root.iter(f"{NS}rect"))
    assert (rect.get("x"), rect.get("width")) == ("21", "0.000001")
    # the static picture (file, PNG) draws it one pixel wide: 5 ms over PLOT_W pixels, no vector-effect
    static = svg_string(tl)
    rect = next(parse(static).iter(f"{NS}rect"))
    assert (rect.get("x"), rect.get("width")) == ("21", f"{5 / PLOT_W:.6f}")
    assert "vector-effect" not in static and "vector-effect" in svg_string(tl, interactive=True)


def test_empty_and_control_characters():
    empty = Timeline(0, 0, 0, [])
    root = parse(svg_string(empty))
    assert rows_of(root) == [] and list(root.iter(f"{NS}rect")) == []
    assert "<svg" in html_string(empty)
    odd = Timeline(0, MS, 0, [Row("bell\x07row", "nvtx", [Event(0, MS, "nul\x00 name\x1b", "weird")])])
    root = parse(svg_string(odd))
    assert rows_of(root)[0].get("data-label") == "bellrow"
    rect = next(root.iter(f"{NS}rect"))
    assert rect.find(f"{NS}title").text == "nul name · 1.000 ms"
    assert rect.get("fill") == "#7f7f7f"  # unknown category: grey


def test_format_duration_and_ticks():
    assert [duration_label(v) for v in (850, 400 * US, 8 * MS + 20 * US, 1500 * MS)] == \
        ["850 ns", "400.0 µs", "8.020 ms", "1.500 s"]
    assert nice_ticks(0, 117.59) == [0, 20, 40, 60, 80, 100]
    assert nice_ticks(2.05, 2.5) == [2.1, 2.2, 2.3, 2.4, 2.5]
    assert nice_ticks(3, 3) == [3]


def test_html_self_contained(tmp_path):
    page = write_html(planted(), tmp_path / "t.html").read_text()
    urls = re.findall(r"https?://[^\s\"'<>)]*", page)
    assert urls and set(urls) == {"http://www.w3.org/2000/svg"}
    assert "<link" not in page and " src=" not in page and "@import" not in page and "url(" not in page
    assert page.count("<script>") == 1  # ours; the hostile name is escaped
    assert "&lt;script&gt;document.body" in page
    assert page.count('<g class="row"') == 3 and page.count("<rect") == 5


def test_demo_timeline_renders(tmp_path):
    p = demo(tmp_path / "demo.sqlite")
    from dashcam.profile import Profile

    tl = build_timeline(Profile.open(p, progress=False))
    root = ET.parse(write_svg(tl, tmp_path / "demo.svg")).getroot()
    assert len(rows_of(root)) == len(tl.rows) == 8
    assert len(list(root.iter(f"{NS}rect"))) == sum(len(r.events) for r in tl.rows)


# -- headless Chromium ---------------------------------------------------------------

CHROMIUM = "/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else shutil.which("chromium")
needs_chromium = pytest.mark.skipif(not CHROMIUM, reason="chromium not installed")


def chromium(tmp_path: Path, url: str, *extra: str) -> tuple[str, str]:
    """Run headless Chromium on ``url``; returns (stdout, stderr)."""
    ud = tmp_path / f"ud{len(list(tmp_path.glob('ud*')))}"
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           f"--user-data-dir={ud}", "--enable-logging=stderr", "--v=0", "--window-size=1200,600", *extra, url]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    assert r.returncode == 0, r.stderr[-2000:]
    return r.stdout, r.stderr


def page_errors(stderr: str) -> list[str]:
    return [ln for ln in stderr.splitlines()
            if "Uncaught" in ln or ("CONSOLE" in ln and ("ERROR" in ln or "error" in ln.split("CONSOLE", 1)[1]))]


def demo_page(tmp_path) -> tuple[Timeline, Path]:
    from dashcam.profile import Profile

    tl = build_timeline(Profile.open(demo(tmp_path / "demo.sqlite"), progress=False))
    return tl, write_html(tl, tmp_path / "demo.html")


@needs_chromium
def test_chromium_detects_page_errors(tmp_path):
    """The stderr check can fail: a broken page is reported."""
    bad = tmp_path / "bad.html"
    bad.write_text("<html><body><script>notDefined();</script></body></html>")
    _, err = chromium(tmp_path, bad.as_uri(), "--dump-dom")
    assert page_errors(err)


@needs_chromium
def test_chromium_dom_screenshot_and_zoom(tmp_path):
    tl, page = demo_page(tmp_path)
    dom, err = chromium(tmp_path, page.as_uri(), "--dump-dom")
    assert page_errors(err) == []
    assert dom.count('<g class="row"') == len(tl.rows) == 8
    assert dom.count("<rect") == sum(len(r.events) for r in tl.rows)
    assert 'data-ready="1"' in dom  # the inline script ran to its end

    # zoom: #t=a,b (ms) goes through the same code path as a drag
    dom, err = chromium(tmp_path, page.as_uri() + "#t=20,40", "--dump-dom")
    assert page_errors(err) == []
    assert dom.count('viewBox="20 0 20 1"') == len(tl.rows)

    png = tmp_path / "demo.png"
    _, err = chromium(tmp_path, page.as_uri(), f"--screenshot={png}")
    assert page_errors(err) == []
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000


@needs_chromium
def test_chromium_hostile_names_stay_text(tmp_path):
    page = write_html(planted(), tmp_path / "t.html")
    dom, err = chromium(tmp_path, page.as_uri(), "--dump-dom")
    assert page_errors(err) == []
    assert 'data-ready="1"' in dom and 'data-pwned="1"' not in dom
    assert dom.count('<g class="row"') == 3


@needs_chromium
def test_chromium_hides_bar_labels_while_zoomed(tmp_path):
    """Bar names are in page pixels: shown at the whole view, hidden once the lanes are zoomed."""
    tl, page = demo_page(tmp_path)
    dom, err = chromium(tmp_path, page.as_uri(), "--dump-dom")
    assert page_errors(err) == [] and dom.count('<g class="bar-labels"') > 0
    assert '<g class="bar-labels" font-size="10" pointer-events="none" style=' not in dom
    dom, err = chromium(tmp_path, page.as_uri() + "#t=20,40", "--dump-dom")
    assert page_errors(err) == []
    hidden = '<g class="bar-labels" font-size="10" pointer-events="none" style="display: none;"'
    assert dom.count('<g class="bar-labels"') == dom.count(hidden) > 0
