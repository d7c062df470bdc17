"""`dashcam ask`: pick the profile, read the question's targets, answer in LLM or offline mode.

Both modes return the same Answer (agent/models.py): the text, the tool calls and their
results (evidence), whether every number in the text comes from those results, and the
`dashcam tool run` commands that reproduce each figure.
"""
from __future__ import annotations

import os
from pathlib import Path

from dashcam.errors import BadParameter
from dashcam.profile.source import profiles_in

from .models import Answer


def find_profile(given: str | None) -> str:
    """PROFILE, else $DASHCAM_PROFILE, else the only .sqlite/.nsys-rep/.qdrep in the current folder (a report
    with its .sqlite export beside it counts once, as the .sqlite)."""
    if given:
        return given
    env = os.environ.get("DASHCAM_PROFILE")
    if env:
        return env
    here = [p.name for p in profiles_in(Path.cwd())]
    if len(here) == 1:
        return here[0]
    if not here:
        raise BadParameter("no profile given: pass PROFILE (an `nsys export --type sqlite` file, .nsys-rep or "
                           ".qdrep) or set DASHCAM_PROFILE")
    more = ", ..." if len(here) > 4 else ""
    raise BadParameter(f"{len(here)} profiles in this folder ({', '.join(here[:4])}{more}): "
                       "pass the one to read as PROFILE or set DASHCAM_PROFILE")


def ask(question: str, profile, model: str | None = None, offline: bool = False, history: list | None = None,
        on_token=None, targets=None, intent: str | None = None) -> Answer:
    """Answer ``question`` about an opened Profile; LLM mode when a model is configured and not ``offline``.
    Offline, a question in a language dashcam does not read gets one line saying so, and a Chinese one
    is answered in English, its first line saying so (language.py). ``intent`` (offline): answer as that
    intent instead of classifying (a chat follow-up that goes deeper)."""
    from .planner import answer_offline
    from .targets import parse_targets

    targets = targets or parse_targets(question, profile)

    def answer_here() -> Answer:
        from .language import not_understood, offline_note

        line = not_understood(question)
        if line:
            return Answer(question=question, answer=line, mode="offline", intent="unknown", targets=targets)
        note = offline_note(question)
        if not note:
            return answer_offline(question, profile, targets=targets, history=history, intent=intent)
        from .chinese import to_english  # the answers read the question's English words too ("finished first")

        out = answer_offline(to_english(question), profile, targets=targets, history=history, intent=intent)
        out.question, out.answer = question, note + "\n" + out.answer
        return out

    missing = [g for g in targets.gpus if g not in profile.devices]
    config = None
    if not offline:
        from .llm_config import config_from_env

        config = config_from_env(model)
    if config is not None and missing:  # the offline answer says which GPUs exist; no model call is needed
        answer = answer_offline(question, profile, targets=targets, history=history)
        answer.notes.append(f"GPU {', '.join(map(str, missing))} is not in this profile: answered offline, "
                            "the model was not asked")
        return answer
    if config is None:
        return answer_here()
    from .llm import answer_llm

    return answer_llm(question, profile, targets, config, history=history, on_token=on_token, fallback=answer_here)


def render_answer(answer: Answer, console, profile_path: str, profile=None, shown_notes: set | None = None) -> None:
    """The answer, then the evidence as a compact table, then the commands that reproduce it. Each note once
    (``shown_notes``: those already shown, e.g. earlier in a chat: not again; the shown ones are added)."""
    from rich.table import Table
    from rich.text import Text

    from dashcam.text.figures import evidence_row
    from dashcam.text.tables import print_notes

    console.print(Text(answer.answer))
    if not answer.grounded:
        console.print(Text("warning: numbers not found in any tool result: " + ", ".join(answer.ungrounded_numbers),
                           style="yellow"))
    seen = shown_notes if shown_notes is not None else set()
    notes = [n for n in dict.fromkeys(answer.notes) if n not in seen]
    seen.update(notes)
    print_notes(notes, console)
    if answer.evidence:
        t = Table(title="evidence", title_justify="left", show_lines=False)
        t.add_column("tool", style="bold")
        t.add_column("args")
        t.add_column("key figures", overflow="fold")
        for e in answer.evidence:
            args = ", ".join(f"{k}={v}" for k, v in e.args.items()) or "-"
            t.add_row(Text(e.tool), Text(args), Text(evidence_row(e.result, gpus=answer.gpus)))
        console.print(t)
        console.print(Text("reproduce:", style="dim"))
        seen = set()
        for e in answer.evidence:
            cmd = e.command(profile_path)
            if cmd not in seen:
                seen.add(cmd)
                console.print(Text("  " + cmd, style="dim"), soft_wrap=True)  # a command stays one line to copy
    mode = f"{answer.mode}" + (f" ({answer.model})" if answer.model else "")
    console.print(Text(f"[{mode}]", style="dim"))
    if console.is_terminal:  # a small timeline strip of the largest gap; never with --json or piped
        from dashcam.reports.timeline import small_strip
        small_strip(profile if profile is not None else profile_path, answer, console)
