"""The timeline picture as PNG: the static SVG (``svg.svg_string``, no ``vector-effect``, narrow events drawn a
pixel wide) rendered by resvg (the ``resvg-py`` wheels: a maintained SVG renderer, no browser and no system
library needed). Agents (MCP) and PR comments show PNG where they do not show SVG.

resvg maps the generic ``sans-serif`` family to Arial, missing on most Linux machines (then no text is drawn), so
the first installed family of ``SANS_FAMILIES`` is used for it.
"""
from __future__ import annotations

from functools import cache

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
SANS_FAMILIES = ("DejaVu Sans", "Helvetica", "Arial", "Liberation Sans", "Noto Sans", "Segoe UI")
_PROBE = '<svg xmlns="http://www.w3.org/2000/svg" width="40" height="20"><text x="2" y="16" font-size="16" ' \
         'font-family="sans-serif">Hg</text></svg>'


def _render(svg_text: str, **options) -> bytes:
    import resvg_py

    return bytes(resvg_py.svg_to_bytes(svg_string=svg_text, background="#ffffff", **options))


@cache
def sans_family() -> str | None:
    """The first of SANS_FAMILIES this machine has (a probe draws text with it), else None (resvg's default)."""
    blank = _render(_PROBE.replace("Hg", ""))
    return next((f for f in SANS_FAMILIES if _render(_PROBE, sans_serif_family=f) != blank), None)


def svg_to_png(svg_text: str) -> bytes:
    """The PNG bytes of an SVG document, on a white background, at the SVG's own size (its viewBox)."""
    family = sans_family()
    return _render(svg_text, **({"sans_serif_family": family} if family else {}))
