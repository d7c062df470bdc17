"""`dashcam eval`: score the agent on questions whose right answers are known.

One concern per module: ``cases`` (the YAML case schema and loading it), ``checks`` (each check of an
answer), ``profiles`` (planted, shared and file profiles, opened once per run), ``runner`` (a case in
offline / replay / model / record mode, and a whole run), ``results`` (per-case outcome and the
summary), ``gate`` (the thresholds file and exit 14), ``report`` (JSON and the score table),
``recording`` (``--record``: answered cases written out as replay cases).

The package exports what the CLI calls.
"""
from .gate import EXIT_BELOW
from .report import Report, render_report
from .runner import choose_mode, run_eval

__all__ = ["EXIT_BELOW", "Report", "choose_mode", "render_report", "run_eval"]
