"""``--format`` of the commands that print tables: rich (the default), plain, markdown, json, csv.

A command renders its tables once, for rich; :func:`format_console` returns a console that prints the
same tables in another format instead: it takes every ``rich.table.Table`` it is given apart into its title,
header and cells. ``plain``: aligned columns, no box, no colour; ``markdown``: GitHub tables (cells escaped:
text/markdown.py); ``csv``: the tables only (RFC 4180; a ``# title`` line before a titled one, a blank line
between tables), a column of numbers with units as plain numbers in one unit named in its header. Lines of text
keep their words (no markup, no colour) in plain and markdown. ``json`` is the command's own result model: it
never reaches a console.
"""
from __future__ import annotations

import csv
import io
import re

from dashcam.text import markdown
from dashcam.text.console import make_console

FORMATS = ("rich", "plain", "markdown", "json", "csv")
FORMAT_HELP = "Output: rich (tables for a terminal), plain, markdown, json or csv (the tables only)."


def _plain(cell) -> str:
    """A cell's text: markup read, styles dropped."""
    from rich.text import Text

    if isinstance(cell, Text):
        return cell.plain
    if isinstance(cell, str):
        return Text.from_markup(cell).plain
    return str(cell)


def table_parts(table) -> tuple[str | None, list[str] | None, list[list[str]]]:
    """(title, header or None when the table shows none, rows) of a rich table, as plain text."""
    title = _plain(table.title) if table.title else None
    header = [_plain(c.header) for c in table.columns] if table.show_header else None
    cells = [[_plain(x) for x in c._cells] for c in table.columns]
    rows = [list(r) for r in zip(*cells)] if cells else []
    return title, header, rows


def _one_line(s: str) -> str:
    return " ".join(s.split())


def plain_table(title, header, rows) -> str:
    lines = [title] if title else []
    body = ([header] if header else []) + rows
    body = [[_one_line(c) for c in r] for r in body]
    if body:
        widths = [max(len(r[i]) for r in body) for i in range(len(body[0]))]
        for r in body:
            lines.append("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
    return "\n".join(lines)


def markdown_table(title, header, rows) -> str:
    lines = [f"**{markdown.inline(title)}**", ""] if title else []
    if header is None:  # a grid of label and value: one line each
        lines += ["- " + ": ".join(markdown.inline(c) for c in r if c) for r in rows]
        return "\n".join(lines)
    lines.append("| " + " | ".join(markdown.cell(h) for h in header) + " |")
    lines.append("|" + "---|" * len(header))
    lines += ["| " + " | ".join(markdown.cell(c) for c in r) + " |" for r in rows]
    return "\n".join(lines)


# A cell that is a number with a unit (text/format.py writes them: "36.000 ms", "400.00 µs", "1,519", "25.0%",
# "1.2 GB", "18.4 GB/s"): in CSV a column whose cells all are one kind becomes plain numbers in one unit, the unit in
# its header ("total (ms)"), so a spreadsheet reads them; any other column stays as it is.
_NUMBER_CELL = re.compile(r"^([-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?)\s*"
                          r"(ns|µs|μs|us|ms|s|%|bytes?|B|KB|MB|GB|TB|KiB|MiB|GiB|GB/s|MB/s)?$")
_UNITS = {"ns": ("ms", 1e-6), "µs": ("ms", 1e-3), "μs": ("ms", 1e-3), "us": ("ms", 1e-3), "ms": ("ms", 1.0),
          "s": ("ms", 1e3), "%": ("%", 1.0), "byte": ("bytes", 1.0), "bytes": ("bytes", 1.0), "B": ("bytes", 1.0),
          "KB": ("bytes", 1e3), "MB": ("bytes", 1e6), "GB": ("bytes", 1e9), "TB": ("bytes", 1e12),
          "KiB": ("bytes", 1024.0), "MiB": ("bytes", 1024.0 ** 2), "GiB": ("bytes", 1024.0 ** 3),
          "GB/s": ("GB/s", 1.0), "MB/s": ("GB/s", 1e-3), None: ("", 1.0)}


def _number(value: float) -> str:
    text = f"{value:.6f}".rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def _numeric_column(cells: list[str]) -> tuple[str, list[str]] | None:
    """(the unit, the cells as numbers in it) when every non-empty cell is a number of one unit kind, else None."""
    unit, out = None, []
    for c in cells:
        if c in ("", "-"):
            out.append("")
            continue
        m = _NUMBER_CELL.match(c)
        if m is None:
            return None
        kind, scale = _UNITS[m.group(2)]
        if unit is not None and kind != unit:
            return None
        unit = kind
        out.append(_number(float(m.group(1).replace(",", "")) * scale))
    return (unit, out) if unit is not None else None


def csv_table(title, header, rows) -> str:
    out = io.StringIO()
    if title:
        out.write(f"# {_one_line(title)}\n")
    w = csv.writer(out, lineterminator="\n")
    rows = [[_one_line(c) for c in r] for r in rows]
    header = [_one_line(h) for h in header] if header else None
    for i in range(len(rows[0]) if rows else 0):
        numeric = _numeric_column([r[i] for r in rows])
        if numeric is None:
            continue
        unit, cells = numeric
        for r, c in zip(rows, cells):
            r[i] = c
        if header and unit and unit not in header[i]:
            header[i] = f"{header[i]} ({unit})"
    if header:
        w.writerow(header)
    w.writerows(rows)
    return out.getvalue().rstrip("\n")


RENDERERS = {"plain": plain_table, "markdown": markdown_table, "csv": csv_table}


def format_console(fmt: str):
    """The console a command prints to for ``fmt`` (one of FORMATS): rich's (text/console.py) for rich and json,
    else one that writes its tables (and, but in csv, its lines of text) in ``fmt``."""
    if fmt in ("rich", "json"):
        return make_console()
    from rich.table import Table

    from dashcam.text.console import console_class

    class FormatConsole(console_class()):
        """Writes tables as ``fmt``; one blank line between blocks (in plain, not between lines of text)."""

        def __init__(self) -> None:
            super().__init__(width=10_000, soft_wrap=True, no_color=True, highlight=False, force_terminal=False,
                             force_interactive=False)
            self._blocks, self._last_table = 0, False

        def print(self, *objects, **kwargs) -> None:
            for obj in objects:
                if isinstance(obj, Table):
                    block = RENDERERS[fmt](*table_parts(obj))
                elif fmt == "csv":
                    continue
                else:
                    block = _plain(obj)
                    block = markdown.inline(block) if fmt == "markdown" else block
                if self._blocks and (fmt != "plain" or isinstance(obj, Table) or self._last_table):
                    self.file.write("\n")
                self.file.write(block + "\n")
                self._blocks += 1
                self._last_table = isinstance(obj, Table)

    return FormatConsole()
