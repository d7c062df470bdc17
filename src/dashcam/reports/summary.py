"""`dashcam summary`: the findings engine's diagnosis as one paragraph and a ranked list, for a terminal,
a PR comment (markdown) or JSON.

``summarize(profile) -> Summary`` is ``findings.diagnose`` plus the grounding check of its paragraph
(every number comes from a tool result: ``Summary.grounded``). The verdict, the findings, their
ranking and the remedies are the engine's (findings/); this module only renders them:
``to_text`` and ``to_markdown``. ``ask "is it healthy?"`` answers from the same diagnosis.
"""
from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from dashcam.evidence import Evidence, ToolRuns
from dashcam.evidence.grounding import check
from dashcam.evidence.models import IMPACT
from dashcam.findings import VERDICTS, Finding, diagnose, verdict_label
from dashcam.findings.story import MAX_WORDS
from dashcam.findings.thresholds import THRESHOLDS as ENGINE_THRESHOLDS
from dashcam.profile.gap_dependency import TURNAROUND_MAX_NS
from dashcam.text import markdown
from dashcam.text.figures import figures
from dashcam.tools.launch_latency import LAUNCH_BOUND_MAX_BUSY_PCT, LAUNCH_BOUND_MIN_CALL_PCT, LAUNCH_BOUND_MIN_LAUNCHES
from dashcam.tools.memcpy import TRANSFER_BOUND_MIN_PCT
from dashcam.tools.nccl import NOT_OVERLAPPED_EXPOSED_PCT
from dashcam.tools.small_kernels import SMALL_TIME_SHARE_PCT, UNDER_PARALLEL_MIN_AVG_NS

# Every threshold a verdict depends on: the engine's and the tools' own flags (docs/definitions.md).
THRESHOLDS = {
    **ENGINE_THRESHOLDS,
    "launch_latency.LAUNCH_BOUND_MAX_BUSY_PCT": LAUNCH_BOUND_MAX_BUSY_PCT,
    "launch_latency.LAUNCH_BOUND_MIN_LAUNCHES": LAUNCH_BOUND_MIN_LAUNCHES,
    "launch_latency.LAUNCH_BOUND_MIN_CALL_PCT": LAUNCH_BOUND_MIN_CALL_PCT,
    "memcpy.TRANSFER_BOUND_MIN_PCT": TRANSFER_BOUND_MIN_PCT,
    "nccl.NOT_OVERLAPPED_EXPOSED_PCT": NOT_OVERLAPPED_EXPOSED_PCT,
    "small_kernels.SMALL_TIME_SHARE_PCT": SMALL_TIME_SHARE_PCT,
    "small_kernels.UNDER_PARALLEL_MIN_AVG_NS": UNDER_PARALLEL_MIN_AVG_NS,
    "gap_dependency.TURNAROUND_MAX_NS": TURNAROUND_MAX_NS,
}


class Summary(BaseModel):
    profile: str
    verdict: str = Field(description=", ".join(VERDICTS))
    workload: str | None = Field(None, description="The program's family (the workload tool).")
    paragraph: str
    findings: list[Finding] = Field(description="Ranked: severity, then precedence, then time a fix would save.")
    notes: list[str] = Field(default_factory=list)
    grounded: bool = Field(description="Every number in the paragraph comes from the findings' tool results.")
    ungrounded_numbers: list[str] = Field(default_factory=list)
    mode: Literal["deterministic", "llm"] = "deterministic"
    model: str | None = None
    llm_reply: str | None = Field(None, description="--llm: the model's reply as written, kept or not (the notes "
                                  "say which and why).")

    @property
    def evidence(self) -> list[Evidence]:
        """Every tool run behind the findings, once each, in order."""
        seen, out = set(), []
        for f in self.findings:
            for e in f.evidence:
                key = (e.tool, repr(sorted(e.args.items())))
                if key not in seen:
                    seen.add(key)
                    out.append(e)
        return out

    def commands(self) -> list[str]:
        """The `dashcam tool run` commands that reproduce every figure (the savings the engine computes are this
        summary's own: no command of their own)."""
        return list(dict.fromkeys(e.command(self.profile) for e in self.evidence if e.tool != IMPACT))


def summarize(profile, runs: ToolRuns | None = None) -> Summary:
    """The diagnosis of ``profile`` (findings.diagnose) with its paragraph checked for grounding."""
    d = diagnose(profile, runs)
    s = Summary(profile=d.profile, verdict=d.verdict, workload=d.workload, paragraph=d.paragraph,
                findings=d.findings, notes=d.notes, grounded=True)
    s.grounded, s.ungrounded_numbers = check(s.paragraph, s.evidence)
    return s


# -- rendering ------------------------------------------------------------------------------------

def key_figures(f: Finding, limit: int = 5) -> str:
    """The first figures of a finding in words (text/figures.py, as the evidence rows of an answer): 'kernel-idle
    69.59 ms (59.2 %), kernel-busy 40.8 %, mostly cuda_api'."""
    return ", ".join(figures({k: v for k, v in f.figures.items() if k != "gpu"}, limit)) or "-"


def label(summary: Summary) -> str:
    """The heading's verdict, in the words of the paragraph's lead (findings.verdict_label)."""
    return verdict_label(summary.verdict, summary.findings[0] if summary.findings else None)


def to_markdown(summary: Summary) -> str:
    """A heading line, the paragraph, the findings table and the commands that reproduce them."""
    name = markdown.inline(Path(summary.profile).name, code=True)
    lines = [f"### dashcam summary: {label(summary)} ({name})",
             "", summary.paragraph, ""]
    if summary.findings:
        lines += ["| severity | finding | GPUs | key figures |", "|---|---|---|---|"]
        for f in summary.findings:
            lines.append(f"| {f.severity} | {markdown.cell(f.title)} | {', '.join(map(str, f.gpus)) or '-'} | "
                         f"{markdown.cell(key_figures(f))} |")
        lines.append("")
    cmds = summary.commands()
    if cmds:
        lines += ["<details><summary>Commands that reproduce these figures</summary>", "", "```sh", *cmds, "```",
                  "", "</details>", ""]
    for n in summary.notes:
        lines.append(f"> note: {markdown.inline(n)}")
    if not summary.grounded:
        lines.append("> warning: numbers not found in any tool result: " + ", ".join(summary.ungrounded_numbers))
    return "\n".join(lines).rstrip() + "\n"


def to_text(summary: Summary) -> str:
    """Plain text for a terminal: verdict, paragraph, findings with their figures, commands, notes."""
    lines = [f"dashcam summary: {label(summary)}  ({summary.profile})", "", summary.paragraph, ""]
    if summary.findings:
        lines.append("findings:")
        for i, f in enumerate(summary.findings, 1):
            gpus = ", ".join(map(str, f.gpus)) or "-"
            lines.append(f"  {i}. [{f.severity}] {f.title}  (GPUs {gpus})")
            lines.append(f"     {key_figures(f)}")
        lines.append("")
    cmds = summary.commands()
    if cmds:
        lines.append("reproduce:")
        lines += [f"  {c}" for c in cmds]
    for n in summary.notes:
        lines.append(f"note: {n}")
    if not summary.grounded:
        lines.append("warning: numbers not found in any tool result: " + ", ".join(summary.ungrounded_numbers))
    mode = summary.mode + (f" ({summary.model})" if summary.model else "")
    lines.append(f"[{mode}]")
    return "\n".join(lines) + "\n"


__all__ = ["MAX_WORDS", "THRESHOLDS", "Summary", "key_figures", "summarize", "to_markdown", "to_text"]
