"""Turn a tool's result model into rich tables (the default, human output of the CLI).

Conventions: fields ending in ``_ns`` are shown in ms (or s), ``_pct`` with a % sign,
``bytes`` in KB/MB/GB. A tool module may define ``render(result, console)`` to replace
this generic layout.
"""
from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from dashcam.text.format import fmt_ns, fmt_value


def _is_table(v: Any) -> bool:
    return isinstance(v, list) and v and all(isinstance(x, BaseModel) for x in v)


def render(result: BaseModel, console, skip: tuple[str, ...] = ()) -> None:
    """The result's scalars as one grid and each list of rows as a table; ``skip``: fields the caller prints."""
    from rich.table import Table
    from rich.text import Text

    data = result
    title = getattr(result, "tool", "")
    w = getattr(result, "window", None)
    head = f"[bold]{title}[/bold]"
    if w is not None:
        head += f"  window {w.start_ms:.3f}–{w.end_ms:.3f} ms ({fmt_ns(w.length_ns)})"
    console.print(head)
    scalars = Table.grid(padding=(0, 2))
    n_scalar = 0
    tables = []
    for key, v in data:
        if key in ("tool", "window", "notes", *skip) or (isinstance(v, BaseModel) and hasattr(v, "tool")):
            continue  # a nested tool result (overview's workload) is the tool module's to render
        if _is_table(v):
            tables.append((key, v))
        elif isinstance(v, list) and not v:
            tables.append((key, v))
        else:
            scalars.add_row(Text(key, style="dim"), Text(fmt_value(key, v)))
            n_scalar += 1
    if n_scalar:
        console.print(scalars)
    for key, rows in tables:
        if not rows:
            console.print(f"[dim]{key}: none[/dim]")
            continue
        t = Table(title=key, title_justify="left", show_lines=False)
        cols = [k for k, _ in rows[0] if not _is_table(getattr(rows[0], k))]
        for c in cols:
            t.add_column(c, overflow="fold")
        for r in rows:
            t.add_row(*[Text(fmt_value(c, getattr(r, c))) for c in cols])
        console.print(t)
        for r in rows:  # nested tables (e.g. largest gaps per device)
            for k, v in r:
                if _is_table(v):
                    label = ", ".join(f"{c}={getattr(r, c)}" for c in cols[:1])
                    sub = Table(title=Text(f"{key} [{label}] · {k}"), title_justify="left")
                    subcols = [c for c, _ in v[0] if not _is_table(getattr(v[0], c))]
                    for c in subcols:
                        sub.add_column(c, overflow="fold")
                    for x in v:
                        sub.add_row(*[Text(fmt_value(c, getattr(x, c))) for c in subcols])
                    console.print(sub)
    print_notes(getattr(result, "notes", []) or [], console)


def print_notes(notes, console) -> None:
    """Each note on its own line after a yellow "note:"; profile text stays text."""
    from rich.text import Text

    for n in notes:
        console.print(Text("note: ", style="yellow") + Text(str(n)), highlight=False)
