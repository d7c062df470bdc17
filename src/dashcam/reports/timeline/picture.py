"""The timeline as a picture file: SVG, or one self-contained HTML page."""
from __future__ import annotations

from dashcam.errors import BadParameter
from dashcam.reports.timeline import svg
from dashcam.reports.timeline.model import Timeline, build_timeline, parse_around

PICTURE_EVENTS_PER_ROW = 3000  # a picture keeps every event it draws: rows keep their longest events


def picture_kind(path: str) -> str:
    """"svg" or "html" from the file name; any other name is a BadParameter."""
    kind = str(path).lower().rsplit(".", 1)[-1]
    if kind not in ("svg", "html"):
        raise BadParameter(f"the picture must be a .svg or .html file, not {path!r}")
    return kind


def save_picture(tl: Timeline, path: str) -> str:
    """Write ``tl`` as an SVG or HTML picture, by the file name."""
    (svg.write_svg if picture_kind(path) == "svg" else svg.write_html)(tl, path)
    return str(path)


def write_picture(profile, path: str, around: str = "gap", max_events_per_row: int = PICTURE_EVENTS_PER_ROW) -> str:
    """Write the SVG or HTML picture of the most telling window (by default the largest gap) to ``path``."""
    picture_kind(path)
    tl = build_timeline(profile, around=parse_around(around), max_events_per_row=max_events_per_row)
    return save_picture(tl, path)
