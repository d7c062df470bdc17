"""`dashcam chat`: ask a profile one question after another.

``ChatSession`` is the conversation without a terminal: ``handle(line)`` answers a question
(an Answer), runs a slash command (a line of text, or a ToolOutput for /run and /sql), and
keeps the turns, the history sent to ``ask`` and the default targets. ``run_repl`` is the
terminal loop around it: readline history, multi-line entries, Ctrl-C / Ctrl-D, streaming.

Follow-ups: a line that names targets but asks nothing new ("and GPU 3?", "what about gpu 3",
"same for GPU 2") is the previous question again with the targets merged (new GPUs replace the
old ones, a new window the old one); a line that starts like a follow-up ("and the copies?")
but has a topic of its own keeps the previous targets under the new topic, and so does a line that points
back at the last answer's time ("which kernels run then?", "during that window"). "The other one" /
"the other GPU" is the GPU the last answer did not talk about (``other_gpus``); after an answer about a
GPU, "the first / second / last one" is that GPU of the profile.
"""
from __future__ import annotations

import json
import os
import re
import shlex
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from dashcam.errors import BadParameter, DashcamError
from dashcam.evidence.runs import run_tool
from dashcam.text.figures import evidence_row

from .ask import ask, render_answer
from .models import Answer, Evidence, Targets

COMMANDS = {
    "/help": "this help and example questions",
    "/tools": "the analysis tools, one line each",
    "/run": "/run TOOL [--gpu N] [--start MS] [--end MS] [--limit N] [-a KEY=VALUE]: run one tool",
    "/sql": "/sql QUERY: one read-only SELECT over the profile's views (the sql tool)",
    "/gpu": "/gpu N [M ...] | all: GPUs every following question is about, unless it names its own",
    "/window": "/window A B | off: window (ms from the start of GPU activity) for every following question",
    "/clear": "forget the conversation: the next question is not a follow-up (typing clear does the same)",
    "/summary": "the profile in a few lines: window, and per GPU how busy it was and why it idled",
    "/save": "/save FILE.md: write the conversation (answers, evidence, reproduce commands) as markdown",
    "/model": "/model [NAME | offline]: show the answer mode, or switch to a model or to offline",
    "/exit": "leave (Ctrl-D works too)",
}
ALIASES = {"/quit": "/exit", "/q": "/exit", "/?": "/help"}
ENTRY_HELP = ('A line ending in "\\" continues on the next line; lines between """ and """ are one question. '
              "Ctrl-C cancels an answer; Ctrl-D leaves.")
FOLLOW_UP = re.compile(
    r"^\W*(?:and|also|now|then|but|what\s+about|how\s+about|same\s+(?:for|on|with|in|but)|"
    r"ok(?:ay)?\W+(?:and|now|what\s+about))\b", re.IGNORECASE)
# A line that points back at the last answer's time ("which kernels run then?", "what happened during that
# window?") and names no window of its own keeps the last question's targets (its window and GPUs).
SAME_TIME = re.compile(
    r"\b(?:runs?|running|ran|happen(?:s|ed|ing)?|do(?:es|ing)?|did|going\s+on|busy|idle|active|launched)\s+"
    r"(?:right\s+)?then\b|\b(?:during|in|at|inside|over)\s+(?:that|this|the\s+same)\s+"
    r"(?:time|window|range|period|stretch|interval|gap|span)\b|\bat\s+that\s+(?:point|moment)\b", re.IGNORECASE)
# A line that asks only to go deeper on the last answer ("why?", "how?", "and then?", "tell me more"): its lead —
# the cause of the idle time it reported, the kernel or range it ranked first — is answered next (``deeper``).
DEEPER = re.compile(
    r"^\W*(?:and\s+)?(?:why|how|how\s+so|how\s+come|why\s+is\s+that|why\s+so|then\s+what|what\s+then|then|"
    r"what\s+next|next|tell\s+me\s+more|more|go\s+on|go\s+deeper|deeper|explain|details?|because\s+of\s+what)"
    r"\W*$", re.IGNORECASE)
# A line that clears the conversation: the next question starts fresh (no follow-up of the last answer).
CLEAR = re.compile(r"^\W*(?:clear|reset|start\s+over|new\s+topic|forget\s+(?:that|it|everything))\W*$",
                   re.IGNORECASE)
# The intent that explains an idle cause (gpu_gaps' causes, profile/gap_causes.py).
CAUSE_INTENT = {"sync_wait": "sync", "cuda_api": "api", "launch_overhead": "launch", "cpu_work": "cpu",
                "memcpy": "memcpy", "dependency": "streams", "transfer": "memcpy", "unknown": "cpu"}
# Intents whose answer leads with where a GPU's time went (a deeper question asks for the cause of its idle time).
IDLE_LEADS = {"idle", "healthy", "slow", "compare_gpus", "overview", "unknown"}
# Test hook: seconds run_repl waits (after printing "(test delay N s)") before answering each question,
# so a test can press Ctrl-C during an answer. Nothing else reads it.
TEST_DELAY_ENV = "DASHCAM_CHAT_TEST_DELAY"


@dataclass
class Turn:
    """One answered question: the line typed, the question answered and the targets asked."""

    line: str
    question: str   # the line, or for a follow-up "LINE (follow-up to: BASE)"
    base: str       # the question a chain of follow-ups refers to
    asked: Targets  # the question's targets before the session defaults
    answer: Answer


@dataclass
class ToolOutput:
    """A tool run by /run or /sql: the result model (rendered like `dashcam tool run`) and its evidence."""

    line: str
    result: object
    evidence: Evidence


def merge_targets(old: Targets, new: Targets) -> Targets:
    """``old`` with what ``new`` names: its GPUs (or all/which GPUs) replace old ones, its window
    replaces the old window, its kernel / NVTX range / step / API or OS function / streams / ranks replace the old
    ones."""
    out = old.model_copy(deep=True)
    if new.gpus or new.all_gpus or new.which_gpu:
        out.gpus, out.all_gpus, out.which_gpu = list(new.gpus), new.all_gpus, new.which_gpu
    if new.start_ms is not None or new.end_ms is not None:
        out.start_ms, out.end_ms = new.start_ms, new.end_ms
    for k in ("nvtx", "kernel", "step", "api", "osrt"):
        if getattr(new, k) is not None:
            setattr(out, k, getattr(new, k))
    for k in ("streams", "ranks"):  # "stream 8", "rank 3": named ones replace the old ones
        if getattr(new, k):
            setattr(out, k, list(getattr(new, k)))
    out.other_gpu = new.other_gpu
    return out


def names_something(t: Targets) -> bool:
    return bool(t.gpus or t.all_gpus or t.which_gpu or t.window_args() or t.nvtx or t.kernel
                or t.step is not None or t.api or t.osrt or t.streams or t.ranks)


def describe_targets(t: Targets) -> str:
    parts = []
    if t.gpus:
        parts.append(("GPU " if len(t.gpus) == 1 else "GPUs ") + ", ".join(map(str, t.gpus)))
    if t.all_gpus or t.which_gpu:
        parts.append("all GPUs")
    if t.window_args():
        a = "start" if t.start_ms is None else f"{t.start_ms:g}"
        b = "end" if t.end_ms is None else f"{t.end_ms:g}"
        parts.append(f"window {a}-{b} ms")
    if t.step is not None:
        parts.append(f"step {t.step}")
    if t.kernel:
        parts.append(f"kernel {t.kernel}")
    if t.nvtx:
        parts.append(f"NVTX {t.nvtx}")
    return ", ".join(parts) or "whole profile"


def example_questions() -> list[str]:
    from .answers import EXAMPLE_QUESTIONS

    return list(EXAMPLE_QUESTIONS)


class ChatSession:
    """A conversation about one opened profile; see the module docstring."""

    def __init__(self, profile, profile_path: str, model: str | None = None, offline: bool = False) -> None:
        self.profile = profile
        self.path = str(profile_path)
        self.model = model
        self.offline = offline
        self.turns: list[Turn] = []
        self.log: list[Turn | ToolOutput] = []  # what /save writes, in order
        self.default_gpus: list[int] = []
        self.default_window: tuple[float, float] | None = None
        self.on_token = None  # set by the terminal loop: streams LLM tokens
        self.done = False
        self.shown_notes: set[str] = set()  # notes printed under an earlier answer: each once per session

    # -- mode ----------------------------------------------------------------------------------
    def config(self):
        if self.offline:
            return None
        from .llm_config import config_from_env

        return config_from_env(self.model)

    def mode(self) -> str:
        config = self.config()
        return f"LLM {config.model}" if config else "offline"

    def banner(self) -> str:
        devices = list(self.profile.devices)
        gpus = ("GPUs " + ", ".join(map(str, devices))) if devices else "no GPU activity"
        return f"dashcam chat · {Path(self.path).name} · {gpus} · {self.mode()} · /help for commands"

    # -- conversation --------------------------------------------------------------------------
    def history(self) -> list[dict]:
        """Earlier turns as chat messages (the assistant's carry the intent for offline follow-ups)."""
        out = []
        for t in self.turns:
            out.append({"role": "user", "content": t.question})
            out.append({"role": "assistant", "content": t.answer.answer, "intent": t.answer.intent})
        return out

    def default_targets(self) -> Targets:
        start, end = self.default_window or (None, None)
        return Targets(gpus=list(self.default_gpus), start_ms=start, end_ms=end)

    def deeper(self, prev: Turn) -> tuple[str, str, Targets, str | None]:
        """(question, base, targets, intent) going deeper on ``prev``'s lead: the dominant cause of the idle time of
        the GPU it was about (its cause's intent, same GPU and window); the kernel or NVTX range it ranked first
        (that entity's analysis); else the same question again."""
        a, asked = prev.answer, prev.asked
        question = f"why? (follow-up to: {prev.base})"
        results = {e.tool: e.result for e in a.evidence}
        gpu = (asked.gpus or a.gpus or [None])[0]
        if a.intent in IDLE_LEADS and "gpu_gaps" in results:
            devs = results["gpu_gaps"].get("devices") or []
            dev = next((d for d in devs if d.get("device_id") == gpu), devs[0] if devs else None)
            cause = dev and dev.get("dominant_cause")
            if cause in CAUSE_INTENT:
                t = asked.model_copy(update={"gpus": [dev["device_id"]], "all_gpus": False, "which_gpu": False})
                return question, prev.base, t, CAUSE_INTENT[cause]
        if a.intent == "top_kernels" and not asked.kernel and (results.get("top_kernels") or {}).get("kernels"):
            top = results["top_kernels"]["kernels"][0]
            return question, prev.base, asked.model_copy(update={"kernel": top["name"]}), "top_kernels"
        if a.intent == "nvtx" and not asked.nvtx and (results.get("nvtx") or {}).get("groups"):
            label = results["nvtx"]["groups"][0]["label"].removesuffix(" <n>")
            return question, prev.base, asked.model_copy(update={"nvtx": label}), "nvtx"
        return prev.question, prev.base, asked, a.intent if a.intent != "unknown" else None

    def resolve(self, line: str) -> tuple[str, str, Targets]:
        """(question to answer, its base question, targets asked) for a typed line."""
        from .intents import classify
        from .targets import parse_targets

        new = parse_targets(line, self.profile)
        prev = self.turns[-1] if self.turns else None
        if new.other_gpu and not new.gpus:
            new.gpus = self.other_gpus()
        if not new.gpus and prev is not None and (prev.answer.gpus or prev.asked.gpus):
            from .targets import ordinal_one

            new.gpus = ordinal_one(line, sorted(self.profile.devices))  # "and the last one?" after a GPU question
        intent = classify(line, new)
        follow_up = prev is not None and (FOLLOW_UP.match(line) is not None
                                          or (intent == "unknown" and names_something(new))
                                          or (SAME_TIME.search(line) is not None and not new.window_args()))
        if not follow_up:
            return line, line, new
        asked = merge_targets(prev.asked, new)
        if new.step is not None and not new.gpus and not prev.asked.gpus and prev.answer.gpus \
                and len(self.profile.devices) > 1:  # "and step 4?": the GPU the last answer was about
            asked.gpus = prev.answer.gpus[:1]
        if intent == "unknown":
            return f"{line} (follow-up to: {prev.base})", prev.base, asked
        return line, line, asked

    def other_gpus(self) -> list[int]:
        """ "the other one / the other GPU": the profile's GPU the last turn was not about (its named GPUs, else
        the answer's main GPU); of several, the first no turn was about yet. [] without an earlier answer or
        with one GPU."""
        devices = sorted(self.profile.devices)
        if not self.turns or len(devices) < 2:
            return []
        last = self.turns[-1].asked.gpus or self.turns[-1].answer.gpus[:1]  # the named GPUs, else the main one
        rest = [d for d in devices if d not in last]
        if len(rest) <= 1:
            return rest
        seen = {g for t in self.turns for g in (t.asked.gpus or t.answer.gpus[:1])}
        return [next((d for d in rest if d not in seen), rest[0])]

    def answer(self, line: str) -> Answer:
        intent = None
        if self.turns and DEEPER.match(line):
            question, base, asked, intent = self.deeper(self.turns[-1])
        else:
            question, base, asked = self.resolve(line)
        targets = merge_targets(self.default_targets(), asked)
        config = self.config()
        answer = ask(question, self.profile, model=config.model if config else None, offline=config is None,
                     history=self.history(), on_token=self.on_token, targets=targets, intent=intent)
        turn = Turn(line=line, question=question, base=base, asked=asked, answer=answer)
        self.turns.append(turn)
        self.log.append(turn)
        return answer

    def handle(self, line: str) -> str | Answer | ToolOutput:
        """Answer a question or run a slash command; dashcam errors and bad arguments become one line."""
        from pydantic import ValidationError

        line = line.strip()
        if not line:
            return ""
        try:
            if line.startswith("/"):
                return self.command(line)
            if CLEAR.match(line):
                return self.cmd_clear("")
            return self.answer(line)
        except DashcamError as e:
            return f"error: {e}"
        except ValidationError as e:
            errs = "; ".join(f"{'.'.join(str(x) for x in err['loc']) or 'value'}: {err['msg']}" for err in e.errors())
            return f"error: bad parameter: {errs}"

    # -- slash commands ------------------------------------------------------------------------
    def command(self, line: str) -> str | ToolOutput:
        name, _, rest = line.partition(" ")
        name = ALIASES.get(name.lower(), name.lower())
        rest = rest.strip()
        if name not in COMMANDS:
            return f"unknown command {name}; commands: {' '.join(COMMANDS)}"
        return getattr(self, "cmd_" + name[1:])(rest)

    def cmd_help(self, rest: str) -> str:
        width = max(len(c) for c in COMMANDS)
        lines = ["Ask a question in plain words, or use a command:"]
        lines += [f"  {c.ljust(width)}  {d}" for c, d in COMMANDS.items()]
        lines += [ENTRY_HELP, 'Follow-ups reuse the last question: "and GPU 0?", "same between 2 s and 3 s".',
                  "Examples:"]
        lines += [f"  {q}" for q in example_questions()]
        return "\n".join(lines)

    def cmd_tools(self, rest: str) -> str:
        from dashcam.tools import available_tools

        tools = available_tools()
        width = max(len(t.name) for t in tools)
        return "\n".join(f"{t.name.ljust(width)}  {first_sentence(t.summary)}" for t in tools)

    def cmd_run(self, rest: str) -> ToolOutput:
        words = _split(rest)
        if not words:
            raise BadParameter("usage: /run TOOL [--gpu N] [--start MS] [--end MS] [--limit N] [-a KEY=VALUE]")
        return self.run_tool(f"/run {rest}", words[0], parse_run_args(words[1:]))

    def cmd_sql(self, rest: str) -> ToolOutput:
        if not rest:
            raise BadParameter("usage: /sql SELECT ... (views: kernels, api, memcpy, memset, nvtx, gpus, ...)")
        return self.run_tool(f"/sql {rest}", "sql", {"query": rest})

    def run_tool(self, line: str, name: str, values: dict) -> ToolOutput:
        result, evidence = run_tool(self.profile, name, values)
        out = ToolOutput(line=line, result=result, evidence=evidence)
        self.log.append(out)
        return out

    def cmd_gpu(self, rest: str) -> str:
        words = rest.replace(",", " ").split()
        if not words:
            return "default GPUs: " + (", ".join(map(str, self.default_gpus)) or "none (questions name their own)")
        if words == ["all"] or words == ["off"]:
            self.default_gpus = []
            return "default GPUs cleared: questions are about every GPU unless they name one"
        try:
            gpus = sorted({int(w) for w in words})
        except ValueError:
            raise BadParameter("usage: /gpu N [M ...] | all") from None
        have = list(self.profile.devices)
        missing = [g for g in gpus if g not in have]
        if missing:
            raise BadParameter(f"GPU {', '.join(map(str, missing))} is not in this profile "
                               f"(GPUs with activity: {', '.join(map(str, have)) or 'none'})")
        self.default_gpus = gpus
        return f"questions are now about GPU {', '.join(map(str, gpus))} unless they name another (/gpu all clears)"

    def cmd_window(self, rest: str) -> str:
        words = rest.split()
        if not words:
            if self.default_window is None:
                return "default window: none (the whole profile)"
            return "default window: {:g}-{:g} ms".format(*self.default_window)
        if words == ["off"] or words == ["all"]:
            self.default_window = None
            return "default window cleared: questions cover the whole profile unless they name a window"
        usage = "usage: /window A B (ms from the start of GPU activity, A < B) | off"
        try:
            a, b = (float(w.removesuffix("ms")) for w in words)
        except ValueError:
            raise BadParameter(usage) from None
        if not (0 <= a < b) or b == float("inf"):
            raise BadParameter(usage)
        self.default_window = (a, b)
        return f"questions now cover {a:g}-{b:g} ms unless they name another window (/window off clears)"

    def cmd_clear(self, rest: str) -> str:
        self.turns = []
        return "conversation cleared: the next question starts fresh (the /gpu and /window defaults stay)"

    def cmd_summary(self, rest: str) -> str:
        from dashcam.text.format import fmt_ns

        args = dict(self.default_targets().window_args().items())
        if len(self.default_gpus) == 1:
            args["gpu"] = self.default_gpus[0]
        ov = run_tool(self.profile, "overview", args)[1].result
        gaps = {d["device_id"]: d for d in run_tool(self.profile, "gpu_gaps", args)[1].result["devices"]}
        head = (f"{Path(self.path).name}: nsys {ov['nsys_version'] or '?'} · window {fmt_ns(ov['window_ns'])} · "
                f"{ov['gpu_count']} GPUs · {ov['process_count']} processes · {ov['api_calls']:,} API calls · "
                f"{ov['nvtx_ranges']:,} NVTX ranges")
        lines = [head]
        for d in ov["devices"]:
            if self.default_gpus and d["device_id"] not in self.default_gpus:
                continue
            line = (f"GPU {d['device_id']}" + (f" ({d['gpu_name']})" if d["gpu_name"] else "") +
                    f": {d['kernel_count']:,} kernels, "
                    f"kernel-busy {d['kernel_busy_pct']:.1f} %, kernel-idle {fmt_ns(d['kernel_idle_ns'])}")
            g = gaps.get(d["device_id"])
            if g and g["gap_count"]:
                line += f" in {g['gap_count']:,} gaps"
                if g["dominant_cause"]:
                    main = g["dominant_cause"]
                    line += f", mostly {main} ({g['cause_pct'].get(main, 0):.1f} % of kernel-idle)"
            lines.append(line)
        return "\n".join(lines)

    def cmd_save(self, rest: str) -> str:
        if not rest:
            raise BadParameter("usage: /save FILE.md")
        path = Path(os.path.expanduser(rest))
        try:
            path.write_text(self.transcript(), encoding="utf-8")
        except OSError as e:
            raise BadParameter(f"cannot write {path}: {e.strerror or e}") from None
        n = sum(isinstance(x, Turn) for x in self.log)
        return f"saved {n} question{'s' if n != 1 else ''} and {len(self.log) - n} tool run(s) to {path}"

    def cmd_model(self, rest: str) -> str:
        if rest == "offline":
            self.offline = True
            return "mode: offline (deterministic planner)"
        if rest:
            self.model, self.offline = rest, False
            if self.config() is None:
                return (f"model set to {rest}, but no endpoint is configured (set OPENAI_API_KEY or OPENAI_BASE_URL); "
                        "mode: offline")
        config = self.config()
        if config is None:
            return "mode: offline" + ("" if self.offline else " (no OPENAI_API_KEY / OPENAI_BASE_URL set)")
        return f"mode: LLM {config.model}" + (f" at {config.base_url}" if config.base_url else "")

    def cmd_exit(self, rest: str) -> str:
        self.done = True
        return "bye"

    # -- transcript ------------------------------------------------------------------------------
    def transcript(self) -> str:
        """The conversation as markdown: each question, its answer, evidence table and reproduce commands."""
        out = [f"# dashcam chat: {Path(self.path).name}", "",
               f"Profile `{self.path}` · GPUs {', '.join(map(str, self.profile.devices)) or 'none'}", ""]
        n = 0
        for item in self.log:
            n += 1
            if isinstance(item, ToolOutput):
                out += [f"## {n}. `{_one_line(item.line)}`", ""]
                out += evidence_markdown([item.evidence], self.path)
                continue
            a = item.answer
            out += [f"## {n}. {_one_line(item.line)}", ""]
            mode = a.mode + (f" {a.model}" if a.model else "")
            meta = f"_{mode} · intent {a.intent or '-'} · {describe_targets(a.targets)}_"
            if item.question != item.line:
                meta = f"_answered as: {_one_line(item.question)}_  \n" + meta
            out += [meta, "", (a.shown or a.answer).strip(), ""]  # what the screen showed, marks included
            if not a.grounded:
                out += [f"> warning: numbers not found in any tool result: {', '.join(a.ungrounded_numbers)}", ""]
            out += [f"> note: {x}" for x in a.notes] + ([""] if a.notes else [])
            out += evidence_markdown(a.evidence, self.path, a.gpus)
        return "\n".join(out).rstrip("\n") + "\n"


def evidence_markdown(evidence: list[Evidence], profile_path: str, gpus: list[int] | None = None) -> list[str]:
    if not evidence:
        return []
    out = ["| tool | args | key figures |", "| --- | --- | --- |"]
    for e in evidence:
        args = ", ".join(f"{k}={v}" for k, v in e.args.items()) or "-"
        out.append(f"| {_cell(e.tool)} | {_cell(args)} | {_cell(evidence_row(e.result, gpus=gpus))} |")
    out += ["", "Reproduce:", "", "```sh"]
    out += list(dict.fromkeys(e.command(profile_path) for e in evidence))
    out += ["```", ""]
    return out


def _one_line(s: str) -> str:
    return " ".join(s.split())


def _cell(s: str) -> str:
    return s.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def first_sentence(text: str) -> str:
    m = re.match(r"(.+?\.)(?:\s|$)", text.strip())
    return m.group(1) if m else text.strip()


def _split(rest: str) -> list[str]:
    try:
        return shlex.split(rest)
    except ValueError as e:
        raise BadParameter(f"cannot read the arguments: {e}") from None


RUN_FLAGS = {"--gpu": "gpu", "--start": "start_ms", "--end": "end_ms", "--limit": "limit"}


def parse_run_args(words: list[str]) -> dict:
    """``--gpu 1 --start 2 -a k=v`` -> {"gpu": 1, "start_ms": 2, "k": v} (values read as JSON when they parse)."""
    out: dict = {}
    i = 0
    while i < len(words):
        w = words[i]
        key, eq, val = w.partition("=")
        if key in RUN_FLAGS or key in ("-a", "--arg"):
            if not eq:
                if i + 1 >= len(words):
                    raise BadParameter(f"{key} needs a value")
                val, i = words[i + 1], i + 1
            if key in RUN_FLAGS:
                out[RUN_FLAGS[key]] = _value(val)
            else:
                if "=" not in val:
                    raise BadParameter(f"-a expects KEY=VALUE, got {val!r}")
                k, v = val.split("=", 1)
                out[k.strip()] = _value(v)
        else:
            raise BadParameter(f"unexpected argument {w!r}; use --gpu, --start, --end, --limit or -a KEY=VALUE")
        i += 1
    return out


def _value(v: str):
    try:
        return json.loads(v)
    except ValueError:
        return v


# -- the terminal ----------------------------------------------------------------------------------

def read_entry(read=input, prompt: str = "dashcam> ", more: str = "   ...> ") -> str:
    """One entry: a line; lines joined while one ends in "\\"; or everything between triple quotes.
    A line that already holds newlines (a bracketed paste) is one entry."""
    line = read(prompt)
    if line.lstrip().startswith('"""'):
        body = line.lstrip()[3:]
        parts = []
        while True:
            if body.rstrip().endswith('"""'):
                parts.append(body.rstrip()[:-3])
                break
            parts.append(body)
            body = read(more)
        return "\n".join(parts).strip()
    parts = []
    while line.endswith("\\"):
        parts.append(line[:-1])
        line = read(more)
    parts.append(line)
    return "\n".join(parts).strip()


def history_path() -> Path:
    from dashcam.profile.source import user_cache_dir

    return user_cache_dir() / "chat_history"


def _readline(path: Path):
    """readline with the history file loaded, or None when readline is not importable."""
    try:
        import readline
    except ImportError:
        return None
    try:
        readline.set_history_length(1000)
        if path.exists():
            readline.read_history_file(str(path))
    except OSError:
        pass
    return readline


def _save_history(readline, path: Path) -> None:
    if readline is None:
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        readline.write_history_file(str(path))
    except OSError:
        pass


def show(out, session: ChatSession, console, streamed: bool = False) -> None:
    """Print what ``handle`` returned: text, a tool result like `dashcam tool run`, or an answer."""
    from rich.text import Text

    if isinstance(out, Answer):
        if streamed:  # the text is on the screen already: end its line, then the evidence
            console.print()
            render_answer(out.model_copy(update={"answer": ""}), console, session.path, session.profile,
                          session.shown_notes)
        else:
            render_answer(out, console, session.path, session.profile, session.shown_notes)
    elif isinstance(out, ToolOutput):
        from dashcam.tools import get_tool

        get_tool(out.evidence.tool).render(out.result, console)
        console.print(Text("  " + out.evidence.command(session.path), style="dim"))
    elif out:
        console.print(Text(out, style="red" if out.startswith(("error:", "unknown command")) else ""))


def _reopen_damaged(session: ChatSession, e: BaseException) -> bool:
    """When ``e`` came from a damaged cache (profile/cache/check.py): mark it and reopen the profile, which
    rebuilds the cache with a one-line note; False for any other error."""
    from dashcam.profile import Profile
    from dashcam.profile.cache import cache_of_error, invalidate

    found = cache_of_error(e, [session.profile.cache]) if session.profile.cache else None
    if found is None:
        return False
    invalidate(found[0], f"reading it failed: {found[1]}")
    session.profile = Profile.open(session.path)
    return True


def _interrupted(e: BaseException) -> bool:
    return type(e).__name__ == "InterruptException" or str(e).strip().lower() == "query interrupted"


def run_repl(session: ChatSession, console=None, read=input) -> int:
    """The terminal loop; returns the exit code (0 on /exit or Ctrl-D)."""
    from rich.text import Text

    from dashcam.text.console import make_console

    console = console or make_console()
    path = history_path()
    rl = _readline(path) if read is input else None
    console.print(Text(session.banner(), style="bold"))
    delay = float(os.environ.get(TEST_DELAY_ENV) or 0)
    streamed: list[bool] = []  # tokens of the current answer already on the screen

    def on_token(tok: str) -> None:
        streamed.append(True)
        sys.stdout.write(tok)
        sys.stdout.flush()

    session.on_token = on_token
    try:
        while not session.done:
            try:
                line = read_entry(read)
            except KeyboardInterrupt:  # at the prompt: drop the line
                console.print()
                continue
            except EOFError:
                console.print()
                break
            if not line:
                continue
            streamed.clear()
            try:
                if delay and not line.startswith("/"):
                    console.print(Text(f"(test delay {delay:g} s)", style="dim"))
                    time.sleep(delay)
                out = session.handle(line)
                show(out, session, console, streamed=bool(streamed))
            except KeyboardInterrupt:
                if streamed:
                    console.print()
                console.print(Text("cancelled", style="yellow"))
            except Exception as e:
                if os.environ.get("DASHCAM_DEBUG"):
                    raise
                if _interrupted(e):  # Ctrl-C inside a DuckDB query comes back as its error
                    console.print(Text("cancelled", style="yellow"))
                    continue
                if _reopen_damaged(session, e):  # the cache is rebuilt: the same line once more
                    try:
                        show(session.handle(line), session, console, streamed=bool(streamed))
                        continue
                    except Exception as again:  # reported below
                        e = again
                first = str(e).strip().splitlines()[0] if str(e).strip() else ""
                console.print(Text(f"internal error ({type(e).__name__}: {first})", style="red"))
    finally:
        _save_history(rl, path)
    return 0
