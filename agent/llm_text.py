"""What a model writes as text, read the way dashcam needs it: reasoning blocks, tool calls written as
JSON text, and what may be streamed to the screen.

- ``<think>…</think>`` (and an unclosed ``<think>`` up to the end) is the model's reasoning: never shown,
  never grounding-checked, never an answer.
- A *text call* is a reply that is a tool call written as JSON — ``{"name", "arguments"}``,
  ``{"tool", "parameters"}``, ``{"function": {"name", "arguments"}}`` or a list of them — when the call
  is the reply: inside ``<tool_call>`` tags, or the whole reply, or a ```` ``` ```` block / JSON object
  that ends the reply after at most LEAD_CHARS of lead-in ("Let me look."). JSON inside a prose answer
  (an example, a reproduce snippet) is not a call. A text call is returned even when its tool is unknown
  or its arguments are invalid: the loop sends the error back, as for a native call.
"""
from __future__ import annotations

import json
import re
from collections.abc import Callable

LEAD_CHARS = 200  # prose allowed before a call written as text
_THINK_RE = re.compile(r"<think>.*?(?:</think>|\Z)", re.DOTALL)
_FENCE = re.compile(r"```[A-Za-z_]*\s*(.*?)```", re.DOTALL)
_TAG = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|\Z)", re.DOTALL)
_ARG_KEYS = ("arguments", "parameters", "args")


def strip_think(text: str) -> str:
    """``text`` without its reasoning blocks (an unclosed one runs to the end)."""
    if "<think>" not in text:  # some templates open the block in the prompt: the reply has only its end
        i = text.rfind("</think>")
        return text[i + len("</think>"):] if i >= 0 else text
    return _THINK_RE.sub("", text)


def _call_shape(obj, tool_names) -> tuple[str, object] | None:
    """(name, arguments) when ``obj`` is written as a tool call, else None."""
    if not isinstance(obj, dict):
        return None
    fn = obj.get("function")
    if isinstance(fn, dict):
        obj = {**obj, **fn}
    name = obj.get("name") or obj.get("tool") or (fn if isinstance(fn, str) else None)
    if not isinstance(name, str) or not name.strip():
        return None
    has_args = any(k in obj for k in _ARG_KEYS)
    if not has_args and name not in tool_names:
        return None
    args = next((obj[k] for k in _ARG_KEYS if k in obj), {})
    return name.strip(), args


def _calls_in(text: str, tool_names) -> list[tuple[str, object]]:
    try:
        obj = json.loads(text)
    except ValueError:
        return []
    found = [_call_shape(o, tool_names) for o in (obj if isinstance(obj, list) else [obj])]
    return [c for c in found if c]


def _candidates(text: str):
    """JSON texts that may be the reply's call, each only where a call is the reply (module docstring)."""
    for m in _TAG.finditer(text):
        yield m.group(1).strip()
    stripped = text.strip()
    if stripped.startswith(("{", "[")):
        yield stripped
    fences = list(_FENCE.finditer(stripped))
    last = fences[-1] if fences else None
    if last is not None and not stripped[last.end():].strip() and last.start() <= LEAD_CHARS:
        yield last.group(1).strip()
    i = stripped.find("{")
    if 0 < i <= LEAD_CHARS and "```" not in stripped:
        try:
            obj, end = json.JSONDecoder().raw_decode(stripped[i:])
        except ValueError:
            return
        if not stripped[i + end:].strip():
            yield json.dumps(obj)


def text_calls(content: str | None, tool_names) -> list[dict]:
    """The tool calls a reply wrote as text ({"id", "name", "arguments" as a JSON string}), or []."""
    if not content or "{" not in content:
        return []
    content = strip_think(content)
    for cand in _candidates(content):
        calls = _calls_in(cand, tool_names)
        if calls:
            return [{"id": f"text_call_{i}", "name": n,
                     "arguments": a if isinstance(a, str) else json.dumps(a, ensure_ascii=False)}
                    for i, (n, a) in enumerate(calls)]
    return []


MARKERS = ("```", "<tool_call>")  # where a call written as text may begin
_HELD_PREFIXES = (*MARKERS, "<think>")  # a tail that may begin one of these waits for the next delta


class Live:
    """Passes content deltas to on_token while the reply still looks like an answer.

    Reasoning blocks are never passed on. A reply starting with "{", and everything from a ``` fence or
    <tool_call> on, is held back until the reply is known to hold no tool call (then it is passed on at
    the end); after a tool-call delta nothing more is passed on. Text before such a marker has already
    been shown. ``hold_all``: nothing is passed on until ``finish`` says the reply is kept.
    """

    def __init__(self, on_token: Callable[[str], None], hold_all: bool = False):
        self.on_token = on_token
        self.text = ""
        self.sent = 0  # characters of the visible text passed on
        self.hold = hold_all
        self.off = False

    def visible(self) -> str:
        return strip_think(self.text)

    def content(self, delta: str) -> None:
        self.text += delta
        if self.off or self.hold:
            return
        vis = self.visible()
        if not vis.strip():
            return
        if self.sent == 0 and vis.lstrip().startswith("{"):
            self.hold = True
            return
        pending = vis[self.sent:]
        cut = len(pending)
        for m in MARKERS:
            i = pending.find(m)
            if i >= 0:
                cut, self.hold = min(cut, i), True
        if not self.hold:  # keep back a tail that may be the start of a marker
            for k in range(max(map(len, _HELD_PREFIXES)) - 1, 0, -1):
                if len(pending) >= k and any(m.startswith(pending[-k:]) for m in _HELD_PREFIXES):
                    cut = len(pending) - k
                    break
        if cut > 0:
            self.on_token(pending[:cut])
            self.sent += cut

    def tool_call(self) -> None:
        self.off = True

    def finish(self, is_answer: bool) -> None:
        vis = self.visible()
        if is_answer and not self.off and self.sent < len(vis):
            self.on_token(vis[self.sent:])
            self.sent = len(vis)
