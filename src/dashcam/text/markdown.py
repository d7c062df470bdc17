"""The one markdown escaper: profile text (kernel names, NVTX labels, file names) into GitHub markdown.

Profile text is data: in a PR comment it must not open a table cell (``|``), a code span (a
backtick), an HTML tag or a new line. ``cell(text)`` makes one table cell of it: whitespace runs
(newlines included) become one space, pipes are escaped (``\\|``, which GitHub honours inside code
spans too), and then either the text is put in a code span (``code=True``: shown verbatim, a
double-backtick span when it holds a backtick) or ``&``, ``<`` and ``>`` are escaped as HTML entities.
``inline(text)`` is the same for running text outside tables.
"""
from __future__ import annotations


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def cell(text: str, code: bool = False) -> str:
    """``text`` as one GitHub table cell: one line, pipes escaped, in a code span or HTML-escaped."""
    text = _one_line(text)
    if code:  # backslashes are literal inside a code span; only the pipe needs its escape there
        text = text.replace("|", "\\|")
        return f"`` {text} ``" if "`" in text else f"`{text}`"
    text = text.replace("\\", "\\\\").replace("|", "\\|")
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def inline(text: str, code: bool = False) -> str:
    """``text`` as running markdown text (a heading, a note): one line; a code span or HTML-escaped."""
    text = _one_line(text)
    if code:
        return f"`` {text} ``" if "`" in text else f"`{text}`"
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
