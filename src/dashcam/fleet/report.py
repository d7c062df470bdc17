"""The fleet report: verdict, a grounded paragraph, the findings, the rank table and the drill-down commands.

``analyse(args, ...) -> FleetReport`` discovers the reports (inputs.py), takes the stored digests of those
unchanged since (store.py), maps the others (execute.py: in-process, a LocalCluster or an existing Dask
cluster), sets each report's rank (the capture's recorded environment, else the file name, else the sorted
order) and applies the cross-rank rules (rules.py), the arrivals on one clock among them (arrivals.py).

Verdict: ``incomplete`` when fewer than two (report, device) units could be analysed; else ``straggler``
when a straggler or a node straggler is found; else ``imbalanced`` when an idle outlier, a slow GPU or a
different kernel mix is; else ``incomplete`` when reports failed or differ (steps, versions, models); else
``uniform``.

The paragraph (at most 120 words, like ``summary``'s) is built from the findings' sentences and checked by
``evidence.grounding.check`` against the fleet's evidence (``FleetReport.evidence``: the findings' figures,
the rows of the units they name, the counts); ``grounded`` says whether every number in it is found there.
"""
from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Literal

from pydantic import BaseModel, Field

from dashcam.findings.story import MAX_WORDS
from dashcam.fleet import store
from dashcam.fleet.arrivals import FleetArrivals
from dashcam.fleet.digest import Digest
from dashcam.fleet.execute import map_reports
from dashcam.fleet.identity import RANK_ENV
from dashcam.fleet.inputs import discover, ranks_from_names
from dashcam.fleet.rules import FleetFinding, Unit, apply
from dashcam.text import markdown
from dashcam.text.format import count, duration, percent

Verdict = Literal["straggler", "imbalanced", "uniform", "incomplete"]
TABLE_ALL_UP_TO = 16  # fleets of up to this many units list every unit; larger ones the extremes and quantiles
TABLE_EXTREMES = 3  # units shown at each end of the compute-per-step order


class UnitRow(BaseModel):
    rank: int | None
    host: str | None
    device_id: int
    report: str
    kernel_busy_pct: float
    idle_pct: float
    dominant_cause: str | None
    nccl_ns: int
    exposed_comm_ns: int
    compute_step_ns: int | None = Field(description="Median compute per step (iterations, per_device).")
    collective_step_ns: int | None = Field(description="Median main-collective time per step.")
    last_steps: int = Field(description="Steps in which it arrived last at the collective.")
    voted_steps: int
    late_ns: int | None = Field(None, description="Median lateness at the collectives on one clock (its arrival "
                                                  "- the other units' median).")
    last_arrivals: int = Field(0, description="Collectives at which it arrived last (arrivals.py).")
    arrivals_compared: int = 0
    uuid: str | None = None
    flags: list[str] = Field(default_factory=list)


class FleetReport(BaseModel):
    reports: int = Field(description="Reports in the fleet.")
    analysed: int = Field(description="Reports analysed (the others failed or hold no GPU work).")
    units: int = Field(description="(report, device) pairs compared.")
    hosts: list[str] = Field(default_factory=list)
    verdict: Verdict
    paragraph: str
    grounded: bool
    ungrounded_numbers: list[str] = Field(default_factory=list)
    findings: list[FleetFinding]
    rank_sources: dict[str, int] = Field(description="How many reports got their rank from each source.")
    step_comparison: dict = Field(description="How steps were compared: method (steps | whole_capture), "
                                              "steps_compared, step_counts.")
    mapped: int = Field(description="Reports digested in this run (the rest came from the store).")
    rows: list[UnitRow] = Field(description="Every unit, by rank then device.")
    arrivals: FleetArrivals | None = Field(None, description="Each unit's arrival at each collective on one clock, "
                                                             "the waits and the clock's uncertainty (arrivals.py); "
                                                             "null when the reports share no clock or collective.")
    digests: list[Digest] = Field(default_factory=list, exclude=True)

    def evidence(self) -> list[dict]:
        """What the paragraph's numbers may come from: every finding's figures (read from the digests, and what
        the rules derived from their steps), the rows of the units the findings name, and the counts and the
        range of kernel-busy over all units."""
        named = {(r, d) for f in self.findings for r, d in zip(f.reports, f.devices)}
        busy = [r.kernel_busy_pct for r in self.rows]
        return ([{"figures": f.figures, "ranks": f.ranks} for f in self.findings]
                + [r.model_dump(mode="json") for r in self.rows if (r.report, r.device_id) in named]
                + [{"reports": self.reports, "analysed": self.analysed, "units": self.units,
                    "kernel_busy_pct": [min(busy), max(busy)] if busy else []}])

    def commands(self) -> list[str]:
        return list(dict.fromkeys(c for f in self.findings for c in f.commands))


def analyse(args: list[str], workers: int | None = None, scheduler: str | None = None,
            scheduler_file: str | None = None, rank_pattern: str | None = None, progress: bool | None = None,
            use_store: bool = True, on_mapped: Callable[[int], None] | None = None) -> FleetReport:
    """The fleet report of the reports ``args`` name; see the module docstring."""
    paths = discover(args)
    names = ranks_from_names(paths, rank_pattern)
    got: dict[int, Digest] = {}
    if use_store:
        for i, p in enumerate(paths):
            d = store.load(p)
            if d is not None:
                got[i] = d
    todo = [i for i in range(len(paths)) if i not in got]
    if on_mapped:
        on_mapped(len(todo))
    if todo:
        fresh = map_reports([paths[i] for i in todo], workers=workers, scheduler=scheduler,
                            scheduler_file=scheduler_file, progress=progress,
                            on_done=store.save if use_store else None)
        got.update(zip(todo, fresh))
    digests = [got[i].model_copy(update={"path": str(paths[i])}) for i in range(len(paths))]
    sources = _set_ranks(digests, names)
    return reduce(digests, sources, mapped=len(todo))


def _set_ranks(digests: list[Digest], names: list[int | None]) -> dict[str, int]:
    """Rank from the capture's environment: for the whole fleet, the first of identity.RANK_ENV that every
    report recording one holds with distinct values; else (and for reports that record none) the file name's
    number, when not taken; else the sorted order. The file name is the last resort: with nsys's default
    ``%h_%p`` names it is the process id."""
    recorded = [d for d in digests if d.env_ranks]
    var = next((v for v in RANK_ENV if recorded and all(v in d.env_ranks for d in recorded)
                and len({d.env_ranks[v] for d in recorded}) == len(recorded)), None)
    taken: set[int] = set()
    for d in digests:
        d.rank, d.rank_source = None, "order"
        if var is not None and var in d.env_ranks:
            d.rank, d.rank_source = d.env_ranks[var], f"env:{var}"
            taken.add(d.rank)
    for d, r in zip(digests, names):
        if d.rank is None and r is not None and r not in taken:
            d.rank, d.rank_source = r, "name"
            taken.add(r)
    nxt = 0
    for d in digests:
        if d.rank is None:
            while nxt in taken:
                nxt += 1
            d.rank, d.rank_source = nxt, "order"
            taken.add(nxt)
    out: dict[str, int] = {}
    for d in digests:
        out[d.rank_source] = out.get(d.rank_source, 0) + 1
    return out


def reduce(digests: list[Digest], sources: dict[str, int], mapped: int = 0) -> FleetReport:
    from dashcam.evidence.grounding import check

    units, findings, facts, arrivals = apply(digests)
    rows = sorted((_row(u) for u in units), key=lambda r: (r.rank if r.rank is not None else -1, r.device_id))
    kinds = {f.kind for f in findings}
    if len(units) < 2:
        verdict = "incomplete"
    elif kinds & {"straggler", "node_straggler"}:
        verdict = "straggler"
    elif kinds & {"idle_outlier", "slow_gpu", "kernel_mix"}:
        verdict = "imbalanced"
    elif "incomplete" in kinds:
        verdict = "incomplete"
    else:
        verdict = "uniform"
    r = FleetReport(reports=len(digests), analysed=sum(1 for d in digests if not d.error), units=len(units),
                    hosts=sorted({d.host for d in digests if d.host}), verdict=verdict, paragraph="",
                    grounded=True, findings=findings, rank_sources=sources, step_comparison=facts,
                    mapped=mapped, rows=rows, arrivals=arrivals, digests=digests)
    r.paragraph = _paragraph(r, units)
    r.grounded, r.ungrounded_numbers = check(r.paragraph, r.evidence())
    return r


def _row(u: Unit) -> UnitRow:
    return UnitRow(rank=u.rank, host=u.d.host, device_id=u.device_id, report=u.report,
                   kernel_busy_pct=u.dev.kernel_busy_pct, idle_pct=u.dev.idle_pct, dominant_cause=u.dev.dominant_cause,
                   nccl_ns=u.dev.nccl_ns, exposed_comm_ns=u.dev.exposed_comm_ns, compute_step_ns=u.compute_step_ns,
                   collective_step_ns=u.collective_step_ns, last_steps=u.last_steps, voted_steps=u.voted_steps,
                   late_ns=u.late_ns, last_arrivals=u.last_arrivals, arrivals_compared=u.arrivals_compared,
                   uuid=u.dev.uuid, flags=list(dict.fromkeys(u.flags)))


def _paragraph(r: FleetReport, units: list[Unit]) -> str:
    """The lead finding's sentence, the next findings by their titles, what is incomplete, the first command;
    optional parts dropped from the end past MAX_WORDS words."""
    if not units:
        return (f"None of the {r.reports} reports could be analysed: "
                + " ".join(f.sentence for f in r.findings if f.kind == "incomplete"))
    parts: list[tuple[str, bool]] = []
    lead = [f for f in r.findings if f.kind != "incomplete"]
    if lead:
        parts.append((lead[0].sentence, True))
        parts += [(f"Also: {f.title[0].upper() + f.title[1:]}.", False) for f in lead[1:3]]
    else:
        busy = [u.dev.kernel_busy_pct for u in units]
        low, high = percent(min(busy)), percent(max(busy))
        spread = f"each kernel-busy {low}" if low == high else f"kernel-busy from {low} to {high}"  # no empty range
        parts.append((f"The {len(units)} GPUs of the {r.analysed} analysed reports look alike: {spread}, no rank "
                      "arrives last at the collectives step after step, no GPU runs a kernel clearly slower than "
                      "the others.", True))
    parts += [(f.sentence, not lead) for f in r.findings if f.kind == "incomplete"]
    if lead and lead[0].commands:
        parts.append((f"First, drill in: `{lead[0].commands[0]}`.", False))
    keep = [True] * len(parts)
    for i in range(len(parts) - 1, -1, -1):
        if sum(len(s.split()) for (s, _), k in zip(parts, keep) if k) <= MAX_WORDS:
            break
        keep[i] = parts[i][1] is True and keep[i]
    return " ".join(s for (s, _), k in zip(parts, keep) if k)


# -- rendering ---------------------------------------------------------------------------------------

COLUMNS = ["rank", "host", "GPU", "kernel-busy %", "kernel-idle %",
           "kernel-idle cause", "NCCL", "exposed", "compute/step",
           "collective/step", "last in", "late", "findings"]


def _cells(r: UnitRow) -> list[str]:
    return [str(r.rank), r.host or "-", str(r.device_id), f"{r.kernel_busy_pct:.1f}", f"{r.idle_pct:.1f}",
            r.dominant_cause or "-", duration(r.nccl_ns), duration(r.exposed_comm_ns),
            duration(r.compute_step_ns) if r.compute_step_ns is not None else "-",
            duration(r.collective_step_ns) if r.collective_step_ns is not None else "-",
            f"{r.last_arrivals}/{r.arrivals_compared}" if r.arrivals_compared
            else f"{r.last_steps}/{r.voted_steps}" if r.voted_steps else "-",
            duration(r.late_ns) if r.late_ns is not None else "-", ", ".join(r.flags) or "-"]


def table_rows(report: FleetReport) -> list[list[str]]:
    """The rank table: every unit up to TABLE_ALL_UP_TO, else the flagged units, the TABLE_EXTREMES units at
    each end of the compute-per-step order (idle % without steps) and p10 / median / p90 rows."""
    rows = report.rows
    if len(rows) <= TABLE_ALL_UP_TO:
        return [_cells(r) for r in rows]
    key = (lambda r: r.compute_step_ns or 0) if any(r.compute_step_ns for r in rows) else (lambda r: r.idle_pct)
    order = sorted(rows, key=key)
    keep = {id(r) for r in order[:TABLE_EXTREMES] + order[-TABLE_EXTREMES:]} | {id(r) for r in rows if r.flags}
    out = [_cells(r) for r in rows if id(r) in keep]
    for name, q in (("p10", 0.1), ("median", 0.5), ("p90", 0.9)):
        out.append(_quantile_row(rows, name, q))
    return out


def _quantile_row(rows: list[UnitRow], name: str, q: float) -> list[str]:
    def at(values):
        values = sorted(v for v in values if v is not None)
        if not values:
            return None
        return statistics.quantiles(values, n=100, method="inclusive")[round(q * 100) - 1] if len(values) > 1 \
            else values[0]

    def ns(v):
        return "-" if v is None else duration(v)

    busy, idle = at(r.kernel_busy_pct for r in rows), at(r.idle_pct for r in rows)
    return [name, "", "", f"{busy:.1f}", f"{idle:.1f}", "", ns(at(r.nccl_ns for r in rows)),
            ns(at(r.exposed_comm_ns for r in rows)), ns(at(r.compute_step_ns for r in rows)),
            ns(at(r.collective_step_ns for r in rows)), "", ns(at(r.late_ns for r in rows)), ""]


def _head(report: FleetReport) -> str:
    hosts = f" on {count(len(report.hosts), 'host')}" if report.hosts else ""
    return (f"dashcam fleet: {report.verdict}  ({count(report.reports, 'report')}{hosts}, "
            f"{count(report.units, 'GPU')} compared; ranks from {rank_sources_text(report.rank_sources)})")


def rank_sources_text(sources: dict[str, int]) -> str:
    """``the environment (SLURM_PROCID) 8, the file name 1``: where the ranks came from, the name last."""
    words = {"name": "the file name", "order": "the sorted order"}
    order = sorted(sources, key=lambda k: (k.startswith("name"), k.startswith("order"), k))
    return ", ".join(f"{words.get(k, f'the environment ({k[4:]})')} {sources[k]}" for k in order)


def clock_line(report: FleetReport) -> str | None:
    """How the reports were put on one clock and how far to trust it (None without an arrival table)."""
    a = report.arrivals
    if a is None:
        unclocked = sum(1 for d in report.digests if not d.error and d.collective_kinds and not d.clock.known)
        return (f"no common clock: {count(unclocked, 'report')} record no session start time, so the collectives "
                "are not lined up; stragglers come from the steps") if unclocked > 1 else None
    how = ("each report's recorded session start (UTC)" if a.clock == "utc" else "the one report's own clock")
    left = f"; {len(a.left_out)} GPUs left out (no session start recorded)" if a.left_out else ""
    return (f"one clock: {how}; {a.collectives_compared} collectives compared, clock uncertainty "
            f"{duration(a.clock_uncertainty_ns)} (median spread of their end times), lateness counted from "
            f"{duration(a.threshold_ns)}{left}")


def to_text(report: FleetReport) -> str:
    lines = [_head(report), *filter(None, [clock_line(report)]), "", report.paragraph, ""]
    if report.findings:
        lines.append("findings:")
        for i, f in enumerate(report.findings, 1):
            lines.append(f"  {i}. [{f.severity}] {f.title}")
        lines.append("")
    rows = table_rows(report)
    widths = [max(len(c), *(len(r[i]) for r in rows)) for i, c in enumerate(COLUMNS)]
    lines.append("  ".join(c.ljust(w) for c, w in zip(COLUMNS, widths)).rstrip())
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    if report.commands():
        lines += ["", "drill down:"] + [f"  {c}" for c in report.commands()]
    if not report.grounded:
        lines.append("warning: numbers not found in any digest: " + ", ".join(report.ungrounded_numbers))
    return "\n".join(lines) + "\n"


def to_markdown(report: FleetReport) -> str:
    clock = clock_line(report)
    lines = [f"### {markdown.inline(_head(report))}", *([markdown.inline(clock)] if clock else []), "",
             report.paragraph, ""]
    if report.findings:
        lines += ["| severity | finding |", "|---|---|"]
        lines += [f"| {f.severity} | {markdown.cell(f.title)} |" for f in report.findings]
        lines.append("")
    lines += ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(markdown.cell(c) for c in r) + " |" for r in table_rows(report)]
    if report.commands():
        lines += ["", "<details><summary>Commands that drill into a rank</summary>", "", "```sh",
                  *report.commands(), "```", "", "</details>"]
    if not report.grounded:
        lines.append("> warning: numbers not found in any digest: " + ", ".join(report.ungrounded_numbers))
    return "\n".join(lines).rstrip() + "\n"


def to_json(report: FleetReport) -> str:
    return report.model_dump_json(indent=2) + "\n"


def to_csv(report: FleetReport) -> str:
    """The per-GPU table as CSV (text/formats.py), one row per rank's GPU."""
    from dashcam.text.formats import csv_table

    return csv_table(None, list(COLUMNS), table_rows(report)) + "\n"


__all__ = ["FleetReport", "UnitRow", "analyse", "reduce", "to_csv", "to_json", "to_markdown", "to_text"]
