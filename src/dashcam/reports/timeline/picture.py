"""The timeline as a picture file: SVG, one self-contained HTML page, or PNG."""
from __future__ import annotations

from pathlib import Path

from dashcam.errors import BadParameter
from dashcam.reports.timeline import svg
from dashcam.reports.timeline.model import Timeline, build_timeline, parse_around
from dashcam.reports.timeline.png import svg_to_png

PICTURE_EVENTS_PER_ROW = 3000  # a picture keeps every event it draws: rows keep their longest events
PICTURE_KINDS = ("svg", "html", "png")


def picture_kind(path: str) -> str:
    """"svg", "html" or "png" from the file name; any other name is a BadParameter."""
    kind = str(path).lower().rsplit(".", 1)[-1]
    if kind not in PICTURE_KINDS:
        raise BadParameter(f"the picture must be a .svg, .html or .png file, not {path!r}")
    return kind


def output_kind(fmt: str | None, path: str | None) -> str:
    """What `dashcam timeline` writes: "text" (the strips) or a picture kind, from ``--format`` and ``-o``'s
    suffix; a picture format needs ``-o``, and a suffix that names another picture kind is refused."""
    if fmt is None:
        return picture_kind(path) if path is not None else "text"
    if fmt not in ("text", *PICTURE_KINDS):
        raise BadParameter(f"--format must be text, svg, html or png, not {fmt!r}")
    if fmt == "text":
        if path is not None:
            raise BadParameter("--format text draws in the terminal: drop -o, or pick svg, html or png")
        return fmt
    if path is None:
        raise BadParameter(f"--format {fmt} writes a file: give it with -o FILE.{fmt}")
    named = str(path).lower().rsplit(".", 1)[-1]
    if named in PICTURE_KINDS and named != fmt:
        raise BadParameter(f"--format {fmt} but -o {path!r} names a .{named} file")
    return fmt


def picture_bytes(tl: Timeline, kind: str) -> bytes:
    """The picture of ``tl`` as the bytes of an SVG, HTML or PNG file."""
    if kind == "png":
        return svg_to_png(svg.svg_string(tl))
    text = svg.html_string(tl) if kind == "html" else svg.svg_document(tl)
    return text.encode("utf-8")


def save_picture(tl: Timeline, path: str, kind: str | None = None) -> str:
    """Write ``tl`` as an SVG, HTML or PNG picture, by ``kind`` or else the file name."""
    Path(path).write_bytes(picture_bytes(tl, kind or picture_kind(path)))
    return str(path)


def write_picture(profile, path: str, around: str = "gap", max_events_per_row: int = PICTURE_EVENTS_PER_ROW) -> str:
    """Write the SVG, HTML or PNG picture of the most telling window (by default the largest gap) to ``path``."""
    picture_kind(path)
    tl = build_timeline(profile, around=parse_around(around), max_events_per_row=max_events_per_row)
    return save_picture(tl, path)
