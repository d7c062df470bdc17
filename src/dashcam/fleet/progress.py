"""The fleet's progress bar on stderr: one step per report, and what it is doing before the first one.

Starting a LocalCluster takes seconds (6-9 s for 2 workers on a small machine) before any report is
digested, so the bar says what is happening ("starting 2 Dask workers…", "connecting to the Dask
scheduler at …", "checking the workers…") until the first report is done, then the report last done.
Names keep a fixed column (``NAME_WIDTH``, cut in the middle: rank numbers sit at the end of a name),
and the bar its own fixed width (``BAR_WIDTH``), so a long report name never squeezes the bar.
Nothing is shown when stderr is not a terminal.
"""
from __future__ import annotations

import sys

NAME_WIDTH = 36  # characters of the status or report name
BAR_WIDTH = 30  # characters of the bar itself


def fit_name(text: str, width: int = NAME_WIDTH) -> str:
    """``text`` in at most ``width`` characters: a longer one keeps its start and its end around a '…'."""
    if len(text) <= width:
        return text
    head = (width - 1) // 2
    return text[:head] + "…" + text[len(text) - (width - 1 - head):]


class ReportBar:
    """A rich progress bar, one step per report; ``status`` says what it is doing before the first report."""

    def __init__(self, total: int, show: bool | None, console=None) -> None:
        self.progress = None
        if total and (show if show is not None else sys.stderr.isatty()):
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
            from rich.table import Column

            from dashcam.text.console import make_console

            self.progress = Progress(
                TextColumn("{task.description}", table_column=Column(width=NAME_WIDTH, no_wrap=True)),
                BarColumn(bar_width=BAR_WIDTH), MofNCompleteColumn(), TimeElapsedColumn(),
                console=console or make_console(stderr=True), transient=True)
            self.task = self.progress.add_task(fit_name("starting…"), total=total)
            self.progress.start()

    def status(self, text: str) -> None:
        """What is happening now (shown in the name column until the next report is done)."""
        if self.progress is not None:
            self.progress.update(self.task, description=fit_name(text))

    def advance(self, name: str) -> None:
        if self.progress is not None:
            self.progress.update(self.task, advance=1, description=fit_name(name))

    def close(self) -> None:
        if self.progress is not None:
            self.progress.stop()
