"""The one place the command line's rich consoles are made: output fitted to where it goes.

At a terminal: rich's own console (the terminal's width, colours unless ``NO_COLOR`` is set). Anywhere else
(a pipe, a file, a CI log): no colour codes, and nothing wrapped at rich's 80-column default: tables are as
wide as their content (or ``COLUMNS``, when set), and lines of text (commands, paths) are never broken, so
a ``reproduce`` command can be copied from a log. rich itself honours ``NO_COLOR`` and ``FORCE_COLOR`` (which
makes a pipe a terminal: colours, the timeline strip, ``COLUMNS`` or 80 columns).
"""
from __future__ import annotations

import os
import sys

# The width of a console that is not a terminal (without COLUMNS): wide enough that no table of ours wraps;
# tables take their content's width, not this.
WIDE = 1000
# The width of a drawing (the timeline's strips) that is not on a terminal (without COLUMNS): one it fills.
DRAWING = 120


def columns() -> int | None:
    """``COLUMNS`` as a width, when it is set to a positive number."""
    raw = os.environ.get("COLUMNS", "").strip()
    return int(raw) if raw.isdigit() and int(raw) > 0 else None


def console_class():
    """rich's Console, but a reader that closes the pipe (``dashcam ask … | head``) ends the command with exit
    status 0, not rich's 1: the reader has what it wanted, and a script under ``set -o pipefail`` goes on."""
    global _CONSOLE
    if _CONSOLE is None:
        from rich.console import Console

        class PipeConsole(Console):
            def on_broken_pipe(self) -> None:
                devnull = os.open(os.devnull, os.O_WRONLY)  # so the interpreter's flush at exit cannot fail
                os.dup2(devnull, sys.stdout.fileno())
                os.close(devnull)
                raise SystemExit(0)

        _CONSOLE = PipeConsole
    return _CONSOLE


_CONSOLE = None


def make_console(stderr: bool = False, drawing: bool = False, **kwargs):
    """The console of a command's output (``stderr``: of its progress and messages; ``drawing``: of a picture
    fitted to the width, which is DRAWING off a terminal); see the module docstring."""
    Console = console_class()
    console = Console(stderr=stderr, **kwargs)
    if console.is_terminal:
        return console
    return Console(stderr=stderr, width=columns() or (DRAWING if drawing else WIDE), soft_wrap=True, **kwargs)
