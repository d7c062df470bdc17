"""What ran when: ``model`` builds the rows of a window from a profile, ``strips`` draws them in the
terminal, ``svg`` and ``picture`` write them as an SVG or HTML file."""
from dashcam.reports.timeline.model import Event, Row, Timeline, build_timeline, parse_around
from dashcam.reports.timeline.picture import PICTURE_EVENTS_PER_ROW, picture_kind, save_picture, write_picture
from dashcam.reports.timeline.strips import bin_row, render_strips, small_strip

__all__ = ["Event", "Row", "Timeline", "build_timeline", "parse_around", "PICTURE_EVENTS_PER_ROW", "picture_kind",
           "save_picture", "write_picture", "bin_row", "render_strips", "small_strip"]
