"""`ask` and `chat` on a fleet (a directory, a glob or several reports): fleet questions are answered from the
fleet report (fleet/report.py); a question that names a rank, a node or "GPU 5 on node X" drills into that
report with today's single-profile ``ask`` (its tools, its LLM mode when one is configured). A fleet
question about one kind of finding (failed reports, a slow GPU, an idle rank, the kernel mix, a node) gets
those findings first, or a line saying there are none, then the fleet's paragraph.

Targets (``fleet_targets``): "rank 77" / "rank #77" (the report's rank, fleet/inputs.py), "node X" /
"host X" or a host name of the fleet written in the question; "GPU 5" goes with them to the report (a node
report holds several GPUs). A node with several reports: the report on it whose GPUs the findings name
first, else its lowest rank. A drilled answer starts with the fleet's findings about that report (a
straggler's own profile shows short collectives, not that the others wait for it), then the report's
answer. Otherwise the fleet answers: the straggler (or what else was found), the
verdict and the commands that drill into a rank. Fleet answers are deterministic (no model).
"""
from __future__ import annotations

import re

from pydantic import BaseModel, Field

from dashcam.errors import BadParameter
from dashcam.fleet.report import FleetReport

from .models import Answer

_RANK = re.compile(r"\brank\s*#?\s*(\d+)\b", re.IGNORECASE)
_NODE = re.compile(r"\b(?:node|host)\s+[`'\"]?([A-Za-z0-9][\w.-]*)", re.IGNORECASE)
_GPU = re.compile(r"\b(?:gpu|device)\s*#?\s*(\d+)\b", re.IGNORECASE)


class FleetTarget(BaseModel):
    rank: int | None = None
    host: str | None = None
    gpu: int | None = None
    report: str | None = Field(None, description="The report the question drills into.")


class FleetAnswer(BaseModel):
    question: str
    answer: str
    mode: str = "offline"
    verdict: str
    target: FleetTarget = Field(default_factory=FleetTarget)
    grounded: bool
    ungrounded_numbers: list[str] = Field(default_factory=list)
    findings: list[str] = Field(default_factory=list, description="The fleet findings' titles.")
    commands: list[str] = Field(default_factory=list)
    drill: Answer | None = Field(None, description="The single-report answer when the question names a rank, a "
                                                   "node or a GPU on a node.")
    in_fleet: str | None = Field(None, description="With a drill: the fleet's findings about that report.")


def fleet_targets(question: str, report: FleetReport) -> FleetTarget:
    """The rank, host and GPU the question names, and the report they point to (None: the fleet)."""
    t = FleetTarget()
    m = _RANK.search(question)
    if m:
        t.rank = int(m.group(1))
    hosts = {h.lower(): h for h in report.hosts}
    m = _NODE.search(question)
    if m and m.group(1).lower() in hosts:
        t.host = hosts[m.group(1).lower()]
    else:
        t.host = next((h for low, h in hosts.items() if re.search(rf"(?<![\w.-]){re.escape(low)}(?![\w-])",
                                                                  question.lower())), None)
    m = _GPU.search(question)
    if m:
        t.gpu = int(m.group(1))
    rows = report.rows
    if t.rank is not None:
        known = {r.rank for r in report.digests if r.rank is not None} if report.digests else set()
        hit = next((d.path for d in report.digests if d.rank == t.rank), None)
        if hit is None:
            have = sorted(known)
            raise BadParameter(f"no rank {t.rank} in this fleet (ranks {have[0]}-{have[-1]})" if have
                               else f"no rank {t.rank} in this fleet")
        t.report = hit
    elif t.host is not None:
        on = [r for r in rows if r.host == t.host and (t.gpu is None or r.device_id == t.gpu)]
        flagged = [r.report for f in report.findings for r in on if r.report in f.reports]
        t.report = (flagged or [r.report for r in sorted(on, key=lambda r: (r.rank or 0, r.device_id))] or [None])[0]
    return t


def ask_fleet(question: str, report: FleetReport, model: str | None = None, offline: bool = False) -> FleetAnswer:
    """Answer ``question`` about an analysed fleet: from the fleet report, or drilled into one report. A Chinese
    question is read as its English words, and answered in English (a line says so); one in a language dashcam
    does not read gets the line that says so (agent/language.py)."""
    from .chinese import to_english
    from .language import not_understood, offline_note

    words = to_english(question)
    t = fleet_targets(words, report)
    base = {"question": question, "verdict": report.verdict, "target": t,
            "findings": [f.title for f in report.findings], "commands": report.commands()}
    unread = not_understood(question)
    if unread:
        return FleetAnswer(**{**base, "commands": []}, answer=unread, grounded=True, ungrounded_numbers=[])
    if t.report is not None:
        from dashcam.evidence.grounding import check
        from dashcam.profile import Profile

        from .ask import ask

        p = Profile.open(t.report)
        drill = ask(question, p, model=model, offline=offline)
        where = (f"rank {t.rank}" if t.rank is not None else f"node `{t.host}`") + f" ({t.report})"
        # what the fleet found about this report first: the report alone cannot tell that its rank is the one
        # the others wait for (a straggler's own profile shows short collectives, not why the fleet is slow)
        about = " ".join(f.sentence for f in report.findings if t.report in f.reports)
        grounded, ungrounded = check(about, report.evidence()) if about else (True, [])
        text = f"On {where}: " + (f"In the fleet: {about} In its own report: " if about else "") + drill.answer
        return FleetAnswer(**{**base, "commands": []}, answer=text, mode=drill.mode,
                           grounded=grounded and drill.grounded,
                           ungrounded_numbers=[*ungrounded, *drill.ungrounded_numbers], drill=drill,
                           in_fleet=about or None)
    from dashcam.evidence.grounding import check

    text = _fleet_text(words, report)
    grounded, ungrounded = check(text, report.evidence())
    note = offline_note(question)
    text = f"{note}\n{text}" if note else text
    return FleetAnswer(**base, answer=text, grounded=grounded, ungrounded_numbers=ungrounded)


# What a fleet question asks about, by finding kind: the findings of that kind lead the answer, or a line
# says there are none, then the fleet's paragraph.
ASKS = {
    "incomplete": re.compile(r"\bfail|\bbroken|\bcorrupt|\bmissing|\bincomplete|\bunreadable|\bempty\s+report|"
                             r"\bcrash", re.I),
    "slow_gpu": re.compile(r"\bsame\s+kernel|\bslow(?:er)?\s+(?:gpu|card|device)|\bfaulty|\bthermal|\bthrottl|"
                           r"\bkernel\b.*\bslower", re.I),
    "idle_outlier": re.compile(r"\bidle|\bstarv|\bwaits?\s+(?:on|for)\s+(?:the\s+)?(?:cpu|host|data)", re.I),
    "kernel_mix": re.compile(r"\bkernel\s+mix|\bdifferent\s+kernels|\bsame\s+(?:work|kernels|code)", re.I),
    "node_straggler": re.compile(r"\b(?:node|host|machine)s?\b", re.I),
}
NONE_FOUND = {"incomplete": "Every report was read and analysed.",
              "slow_gpu": "No GPU runs a kernel clearly slower than the others.",
              "idle_outlier": "No rank is idle far more than the others.",
              "kernel_mix": "The ranks run the same kernels.",
              "node_straggler": "No node holds the others back."}
STRAGGLER = re.compile(r"straggl|slow(est)?\s+(rank|node|gpu)|holds?\b.*\bback|last|\bnccl\b|\bwait|balanc", re.I)


def _fleet_text(question: str, report: FleetReport) -> str:
    """The findings the question asks about first (or that there are none), then the fleet's paragraph."""
    lead: list[str] = []
    for kind, words in ASKS.items():
        if words.search(question):
            found = [f.sentence for f in report.findings if f.kind == kind]
            lead += found if found else [NONE_FOUND[kind]]
            break
    else:
        if STRAGGLER.search(question) and report.verdict != "straggler":
            lead = ["No rank or node is a straggler."]
    lead = [s for s in lead if not report.paragraph.startswith(s)]
    return " ".join([*lead, report.paragraph])


def render_fleet_answer(a: FleetAnswer, console) -> None:
    from rich.text import Text

    if a.drill is not None:
        from .ask import render_answer

        console.print(Text(f"rank {a.target.rank}" if a.target.rank is not None else f"node {a.target.host}",
                           style="bold"))
        if a.in_fleet:
            console.print(Text("In the fleet: " + a.in_fleet))
            console.print(Text("In its own report:", style="dim"))
        render_answer(a.drill, console, a.target.report)
        return
    console.print(Text(a.answer))
    if not a.grounded:
        console.print(Text("warning: numbers not found in any digest: " + ", ".join(a.ungrounded_numbers),
                           style="yellow"))
    if a.findings:
        console.print(Text("findings:", style="dim"))
        for f in a.findings:
            console.print(Text("  " + f))
    if a.commands:
        console.print(Text("drill down:", style="dim"))
        for c in a.commands:
            console.print(Text("  " + c, style="dim"), soft_wrap=True)  # a command stays one line to copy
    console.print(Text(f"[fleet · {a.verdict} · {a.mode}]", style="dim"))


def run_fleet_chat(report: FleetReport, console, model: str | None = None, offline: bool = False,
                   read=input) -> int:
    """A conversation about a fleet: each line is asked of the fleet (drilling into a rank or node when it
    names one); /fleet shows the report again, /exit (or Ctrl-D) leaves."""
    from rich.text import Text

    from dashcam.errors import DashcamError
    from dashcam.fleet import to_text

    from .chat import read_entry

    console.print(Text(f"dashcam chat · fleet of {report.reports} reports · {report.verdict} · "
                       "/fleet, /exit", style="bold"))
    while True:
        try:
            line = read_entry(read).strip()
        except EOFError:
            console.print()
            return 0
        except KeyboardInterrupt:
            console.print()
            continue
        if not line:
            continue
        if line in ("/exit", "/quit", "/q"):
            return 0
        if line == "/fleet":
            console.print(Text(to_text(report)))
            continue
        if line.startswith("/"):
            console.print(Text("fleet chat commands: /fleet, /exit", style="red"))
            continue
        try:
            render_fleet_answer(ask_fleet(line, report, model=model, offline=offline), console)
        except DashcamError as e:
            console.print(Text(f"error: {e}", style="red"))
