"""The timeline picture reads at a glance (issue 28 item 9): title, bar labels, the highlight's caption from
gpu_gaps, the window's axis, a page that fits its width, legend colours kept under the highlight, strips drawn
to scale, PNG output."""
from __future__ import annotations

import io
import struct
import xml.etree.ElementTree as ET

import pytest
from rich.console import Console

from dashcam.reports.timeline import Event, Row, Timeline, bin_row, build_timeline, render_strips, svg_to_png
from dashcam.reports.timeline.caption import AXIS_LABEL
from dashcam.reports.timeline.strips import SHADES, bin_cells
from dashcam.reports.timeline.svg import COLORS, LANE_GAP, LANE_H, PLOT_W, TOP, svg_string
from dashcam.testing.builder import ExportBuilder
from dashcam.text.format import fmt_ns
from dashcam.tools import gpu_gaps

from .conftest import MS, SHARED_SQLITE, US, run_cli

NS = "{http://www.w3.org/2000/svg}"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def sync_wait_export() -> ExportBuilder:
    """GPU 0: kernel "producer" to 1 ms, the thread waits 4 ms in cudaDeviceSynchronize, launches "consumer"
    at 5.1 ms (10 us call), which starts at 5.11 ms: one gap of 4.11 ms, sync_wait 4 ms, cpu_work 100 us,
    launch_overhead 10 us."""
    b = ExportBuilder()
    b.launch(0, 0, 5 * US, 10 * US, 1 * MS, name="producer")
    b.api("cudaDeviceSynchronize", 1 * MS, 5 * MS)
    b.launch(0, 5 * MS + 100 * US, 5 * MS + 110 * US, 5 * MS + 110 * US, 6 * MS, name="consumer")
    return b


def texts(root, cls: str) -> list[str]:
    return [t.text for g in root.iter(f"{NS}g") if g.get("class") == cls for t in g.iter(f"{NS}text")]


# -- title and caption -------------------------------------------------------------------------

def test_title_is_the_profile_and_the_caption_gives_the_gap_tools_cause_and_ns(build):
    p = build(sync_wait_export(), name="train_run.sqlite")
    tl = build_timeline(p, around="gap")
    assert tl.title == "train_run.sqlite"
    assert tl.highlight == (1 * MS, 5 * MS + 110 * US)
    g = gpu_gaps.run(p, gpu_gaps.Params(gpu=0)).devices[0].largest_gaps[0]
    assert (g.start_ns, g.duration_ns) == (1 * MS, 4 * MS + 110 * US)
    assert gpu_gaps.causes_text(g) in tl.caption  # the gap tool's own words
    assert f"sync_wait {fmt_ns(4 * MS)}" in tl.caption and f"cpu_work {fmt_ns(100 * US)}" in tl.caption
    assert f"{fmt_ns(4 * MS + 110 * US)} from {(1 * MS - 10 * US) / MS:.3f} ms" in tl.caption  # origin: 10 us
    assert "GPU 0" in tl.caption and "producer → consumer" in tl.caption
    root = ET.fromstring(svg_string(tl))
    assert next(t for t in root.iter(f"{NS}text") if t.get("class") == "title").text == "train_run.sqlite"
    assert " ".join(texts(root, "caption")) == tl.caption
    con = Console(file=io.StringIO(), width=400)
    render_strips(tl, con)
    assert tl.caption in con.file.getvalue()


def test_caption_of_the_gaps_at_the_window_edges(build):
    b = ExportBuilder()
    b.copy_call(0, 0, 10 * US, 0, 1 * MS, 1 << 20)  # the window starts with a copy; the first kernel at 6 ms
    b.launch(0, 5 * MS, 5 * MS + 10 * US, 6 * MS, 7 * MS, name="first")
    b.launch(0, 7 * MS, 7 * MS + 10 * US, 7 * MS + 500 * US, 8 * MS, name="second")
    tl = build_timeline(build(b), around="gap")
    assert tl.highlight == (0, 6 * MS)
    assert f"{fmt_ns(6 * MS)} from 0.000 ms (window start → first)" in tl.caption
    b = ExportBuilder()
    b.launch(0, 0, 10 * US, 10 * US, 1 * MS, name="first")
    b.copy_call(0, 1 * MS, 1 * MS + 10 * US, 1 * MS, 9 * MS, 1 << 20)  # the window ends with a copy
    p = build(b)
    tl = build_timeline(p, around="gap")
    g = gpu_gaps.run(p, gpu_gaps.Params(gpu=0)).devices[0].largest_gaps[0]
    assert tl.highlight == (1 * MS, 9 * MS) and (g.start_ns, g.end_ns) == tl.highlight
    assert f"(first → window end); gpu_gaps causes: {gpu_gaps.causes_text(g)}." in tl.caption


def test_no_highlight_no_caption_and_a_named_interval(build):
    p = build(sync_wait_export())
    assert build_timeline(p).caption is None
    tl = build_timeline(p, around=("kernel", "consumer"))
    assert tl.caption == f"Highlighted: the first kernel matching 'consumer', {fmt_ns(890 * US)} from 5.100 ms."
    assert texts(ET.fromstring(svg_string(build_timeline(p))), "caption") == []


def test_axis_says_the_window(build):
    tl = build_timeline(build(sync_wait_export()))
    root = ET.fromstring(svg_string(tl))
    assert texts(root, "axis")[-1] == AXIS_LABEL == "ms from the start of the window (first GPU activity)"
    assert "profile start" not in svg_string(tl)
    con = Console(file=io.StringIO(), width=120)
    render_strips(tl, con)
    assert AXIS_LABEL in con.file.getvalue().splitlines()[0]


# -- the page ---------------------------------------------------------------------------------

def planted(highlight=None, caption=None) -> Timeline:
    """10 ms, two rows: a 4 ms kernel with a long name, a 2 us one, and nested NVTX ranges."""
    return Timeline(0, 10 * MS, 0, [
        Row("GPU 0 kernels", "gpu", [Event(1 * MS, 5 * MS, "flash_fwd_kernel", "kernel"),
                                     Event(6 * MS, 6 * MS + 2 * US, "tiny_kernel_with_a_name", "kernel")]),
        Row("NVTX", "nvtx", [Event(0, 9 * MS, "train_step 0", "nvtx"), Event(1 * MS, 4 * MS, "forward", "nvtx")]),
    ], highlight=highlight, title="run.sqlite", caption=caption)


def test_page_fits_its_width_and_its_height_is_the_content():
    for caption, lines in ((None, 0), ("Highlighted: a gap", 1)):
        root = ET.fromstring(svg_string(planted(caption=caption)))
        assert root.get("width") == "100%" and root.get("height") is None
        assert root.get("preserveAspectRatio") == "xMinYMin meet"
        _, _, w, h = (float(v) for v in root.get("viewBox").split())
        lanes_end = TOP + 2 * (LANE_H + LANE_GAP)
        lowest = max(float(t.get("y")) for t in root.iter(f"{NS}text"))
        assert lowest > lanes_end and h - lowest < 20  # nothing blank under the last line
        assert w == 300 + PLOT_W + 20
        assert len(texts(root, "caption")) == lines


def test_legend_colours_are_the_same_with_and_without_the_highlight():
    def swatches(tl):
        g = next(g for g in ET.fromstring(svg_string(tl)).iter(f"{NS}g") if g.get("class") == "legend")
        return [(t.text, p.get("fill")) for p, t in zip(g.iter(f"{NS}path"), g.iter(f"{NS}text"))]

    plain, lit = swatches(planted()), swatches(planted(highlight=(5 * MS, 6 * MS)))
    assert plain == list(COLORS.items())
    assert lit[:len(plain)] == plain and lit[len(plain):] == [("highlight", lit[-1][1])]
    # the band lies under the lanes, so no event is tinted: nothing drawn after the first event is translucent
    text = svg_string(planted(highlight=(5 * MS, 6 * MS)))
    assert text.index('class="zoom highlight"') < text.index('class="lane zoom"')
    root = ET.fromstring(text)
    translucent = [e for e in root.iter() if e.get("fill-opacity") is not None]
    assert translucent and all(e.get("class") == "lane-bg" for e in translucent)
    for row in (g for g in root.iter(f"{NS}g") if g.get("class") == "row"):  # each lane's grey is under its bars
        kids = [c.get("class") for c in row]
        assert kids.index("lane-bg") < kids.index("lane zoom")
    assert [r.get("fill") for r in root.iter(f"{NS}rect")] == [COLORS["kernel"]] * 2 + [COLORS["nvtx"]] * 2


def test_bar_labels_where_they_fit_one_per_overlap():
    root = ET.fromstring(svg_string(planted()))
    labels = [[t.text for t in g.iter(f"{NS}text")] for g in root.iter(f"{NS}g") if g.get("class") == "bar-labels"]
    # 4 ms = 480 px holds the kernel's name; 2 us is under a pixel; "forward" is nested in "train_step 0"
    assert labels == [["flash_fwd_kernel"], ["train_step 0"]]
    narrow = Timeline(0, 100 * MS, 0, [Row("r", "gpu", [Event(0, 10 * MS, "a_rather_long_kernel_name", "kernel")])])
    cut = [t.text for g in ET.fromstring(svg_string(narrow)).iter(f"{NS}g") if g.get("class") == "bar-labels"
           for t in g.iter(f"{NS}text")]
    assert len(cut) == 1 and cut[0].endswith("…") and "a_rather_long_kernel_name".startswith(cut[0][:-1])


# -- the terminal strip, to scale ----------------------------------------------------------------

def test_rare_short_copies_do_not_fill_cells():
    # 10 cells of 100 us; a 1 us copy every 100 us (1 % of each cell), a copy over half of cell 9 and a kernel
    # over all of cell 0
    copies = [Event(i * 100 * US, i * 100 * US + 1 * US, "HtoD 4 KB", "memcpy") for i in range(9)]
    copies.append(Event(900 * US, 950 * US, "HtoD 4 MB", "memcpy"))
    cells = bin_cells(copies, 0, 1 * MS, 10)
    assert cells[:9] == [("memcpy", 0.01)] * 9 and cells[9] == ("memcpy", 0.5)
    assert bin_row(copies, 0, 1 * MS, 10) == ["memcpy"] * 10  # still shown, but ...
    tl = Timeline(0, 1 * MS, 0, [Row("GPU 0 memory", "memory", copies),
                                 Row("GPU 0 kernels", "gpu", [Event(0, 100 * US, "k", "kernel")])])
    label_w = len("GPU 0 kernels") + 1  # the longest label and a space
    con = Console(file=io.StringIO(), width=label_w + 10)
    render_strips(tl, con)
    lines = con.file.getvalue().splitlines()
    memory = next(ln for ln in lines if ln.startswith("GPU 0 memory"))[label_w:]
    kernels = next(ln for ln in lines if ln.startswith("GPU 0 kernels"))[label_w:]
    light, full = SHADES[-1][1], SHADES[0][1]
    assert memory == light * 9 + full  # ... light, not busy; half a cell is drawn full
    assert kernels == full + " " * 9


# -- PNG ----------------------------------------------------------------------------------------

def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == PNG_MAGIC and data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def test_svg_to_png_has_the_svgs_size():
    svg = svg_string(planted(caption="Highlighted: x"))
    _, _, w, h = (float(v) for v in ET.fromstring(svg).get("viewBox").split())
    assert png_size(svg_to_png(svg)) == (round(w), round(h))


def test_cli_png_by_suffix_and_by_format(tmp_path, build):
    path = sync_wait_export().write(tmp_path / "run.sqlite")
    by_suffix = run_cli("timeline", path, "--around", "gap", "-o", tmp_path / "t.png", cache=tmp_path / "c")
    assert by_suffix.returncode == 0, by_suffix.stderr
    by_format = run_cli("timeline", path, "--around", "gap", "--format", "png", "-o", tmp_path / "t",
                        cache=tmp_path / "c")
    assert by_format.returncode == 0, by_format.stderr
    a, b = (tmp_path / "t.png").read_bytes(), (tmp_path / "t").read_bytes()
    assert a == b and png_size(a)[0] == 300 + PLOT_W + 20 and len(a) > 5000
    for args, words in ((["--format", "png"], "-o FILE.png"), (["--format", "png", "-o", tmp_path / "x.svg"],
                                                                 "names a .svg file"),
                        (["--format", "gif", "-o", tmp_path / "x"], "--format must be")):
        bad = run_cli("timeline", path, *args, cache=tmp_path / "c")
        assert bad.returncode == 11 and words in bad.stderr and bad.stderr.count("\n") == 1, bad.stderr


def test_summary_picture_png(tmp_path):
    path = sync_wait_export().write(tmp_path / "run.sqlite")
    out = run_cli("summary", path, "--format", "markdown", "--picture", tmp_path / "gap.png", cache=tmp_path / "c")
    assert out.returncode == 0, out.stderr
    assert f"![Timeline of the largest gap]({tmp_path / 'gap.png'})" in out.stdout  # shown in place
    assert png_size((tmp_path / "gap.png").read_bytes())[0] == 300 + PLOT_W + 20


@pytest.mark.skipif(not SHARED_SQLITE, reason="no shared profiles")
def test_real_profile_png_with_caption():
    from dashcam.profile import Profile

    path = next((p for p in SHARED_SQLITE if p.name == "nsys-ai__mfu_2gpu_before.sqlite"), None)
    if path is None:
        pytest.skip("nsys-ai__mfu_2gpu_before.sqlite not in the shared profiles")
    p = Profile.open(path, progress=False)
    tl = build_timeline(p, around="gap", max_events_per_row=3000)
    g = gpu_gaps.run(p, gpu_gaps.Params(gpu=0)).devices[0].largest_gaps[0]
    assert tl.highlight == (g.start_ns, g.end_ns) and gpu_gaps.causes_text(g) in tl.caption
    w, h = png_size(svg_to_png(svg_string(tl)))
    assert w == 300 + PLOT_W + 20 and h > TOP + len(tl.rows) * (LANE_H + LANE_GAP)
