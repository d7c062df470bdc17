"""What ran when: ``model`` builds the rows of a window from a profile, ``strips`` draws them in the
terminal, ``svg``, ``png`` and ``picture`` write them as an SVG, HTML or PNG file; ``caption`` holds the words
around a picture (title, axis, the highlight's caption)."""
from dashcam.reports.timeline.model import Event, Row, Timeline, build_timeline, parse_around
from dashcam.reports.timeline.picture import (
    PICTURE_EVENTS_PER_ROW,
    output_kind,
    picture_bytes,
    picture_kind,
    save_picture,
    write_picture,
)
from dashcam.reports.timeline.png import svg_to_png
from dashcam.reports.timeline.strips import bin_row, render_strips, small_strip

__all__ = ["Event", "Row", "Timeline", "build_timeline", "parse_around", "PICTURE_EVENTS_PER_ROW", "output_kind",
           "picture_bytes", "picture_kind", "save_picture", "write_picture", "svg_to_png", "bin_row", "render_strips",
           "small_strip"]
