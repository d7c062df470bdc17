"""The report of a run: its JSON, the one-line failure, and the score table per intent with the failures listed."""
from __future__ import annotations

from dataclasses import dataclass, field

from .gate import GATES, THRESHOLDS_FILE
from .results import CaseResult


@dataclass
class Report:
    mode: str
    section: str
    model: str | None
    sources: list[str]
    results: list[CaseResult]
    summary: dict
    thresholds_file: str | None
    gates: list[dict]
    failures: list[str]
    recorded_to: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.failures

    def to_json(self) -> dict:
        return {"mode": self.mode, "thresholds_section": self.section, "model": self.model, "sources": self.sources,
                "summary": self.summary, "thresholds_file": self.thresholds_file, "gates": self.gates,
                "failures": self.failures, "ok": self.ok, "recorded_to": self.recorded_to,
                "cases": [r.to_json() for r in self.results]}

    def failure_line(self) -> str:
        return f"eval below thresholds ({self.section}): " + "; ".join(self.failures)


def _fmt(v, suffix: str = "") -> str:
    return "-" if v is None else f"{v:g}{suffix}"


def render_report(report: Report, console) -> None:
    """The score table per intent and overall, the cases that failed and why, the thresholds."""
    from rich.table import Table  # third-party, imported when a table is printed
    from rich.text import Text

    s = report.summary
    designed = any(r.case.expect_fail for r in report.results)
    mode = report.mode + (f" · {report.model}" if report.model else "")
    t = Table(title=f"dashcam eval · {mode}", title_justify="left")
    for col, just in (("intent", "left"), ("cases", "right"), ("routed %", "right"), ("passed", "right"),
                      ("%", "right"), ("mean latency s", "right")):
        t.add_column(col, justify=just)
    if designed:
        t.add_column("as designed", justify="right")

    def row(name: str, g: dict, style: str | None = None, end: bool = False) -> None:
        cells = [Text(name), str(g["cases"]), _fmt(g["routed_pct"]), str(g["passed"]), _fmt(g["pct"]),
                 _fmt(g["mean_latency_s"])]
        if designed:
            cells.append(str(g["as_designed"]))
        t.add_row(*cells, style=style, end_section=end)

    items = list(s["by_intent"].items())
    for i, (intent, g) in enumerate(items):
        row(intent, g, end=(i == len(items) - 1))
    row("overall", s["overall"], style="bold")
    console.print(t)
    sets = s.get("by_set") or {}
    if len(sets) > 1 or set(sets) - {"curated"}:
        console.print(Text("by set: " + "; ".join(
            f"{name} {g['cases']} cases, routed {_fmt(g['routed_pct'], ' %')}, passed {_fmt(g['pct'], ' %')}"
            for name, g in sets.items())))
    skipped = [r for r in report.results if r.status == "skipped"]
    if skipped:
        console.print(Text(f"skipped {len(skipped)}: " + ", ".join(r.case.id for r in skipped)
                           + " (profile not present)", style="dim"))
    for r in report.results:
        if r.status in ("passed", "skipped"):
            continue
        mark = "as designed" if r.as_designed else "FAIL"
        line = Text(f"{mark} ", style="yellow" if r.as_designed else "red bold")
        line.append(Text(f"{r.case.id} ({r.case.intent}): "))
        if r.status == "error":
            line.append(Text(f"error: {r.detail}"))
        else:
            line.append(Text("; ".join(f"{c.name}: {c.detail}" for c in r.checks if not c.ok)))
        console.print(line)
    for r in report.results:
        if r.status == "passed" and r.as_designed is False:
            console.print(Text(f"FAIL {r.case.id} ({r.case.intent}): passed, but expected to fail "
                               f"{r.case.expect_fail}", style="red bold"))
    console.print(Text(f"ungrounded numbers: {s['ungrounded_numbers']} (not flagged by the agent: "
                       f"{s['unflagged_ungrounded']})"))
    if report.thresholds_file:
        parts = [f"{g['what']} {_fmt(g['value'])} (need {'≥' if GATES[g['threshold']][2] else '≤'} {g['limit']:g}: "
                 f"{'ok' if g['ok'] else 'BELOW'})" for g in report.gates]
        console.print(Text(f"thresholds ({report.section}, {report.thresholds_file}): " + "; ".join(parts),
                           style="green" if report.ok else "red"))
    else:
        console.print(Text(f"no thresholds file ({THRESHOLDS_FILE}): not gated", style="dim"))
    for f in report.recorded_to:
        console.print(Text(f"recorded: {f}", style="dim"))
