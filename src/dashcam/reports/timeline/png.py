"""The timeline as a PNG: the SVG rasterised by resvg (resvg-py: a Rust renderer in a wheel, no browser, no
system library; text in the system's sans-serif font)."""
from __future__ import annotations

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def svg_to_png(svg_text: str) -> bytes:
    """The PNG bytes of an SVG document, on white, at the SVG's own size (its viewBox, one px per unit)."""
    import resvg_py

    return bytes(resvg_py.svg_to_bytes(svg_string=svg_text, background="#ffffff"))
