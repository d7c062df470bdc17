"""Keep what the model reads inside its context: count tokens, cut tool results, summarize old turns.

Token counts use tiktoken when its encoding can be loaded. tiktoken downloads its BPE files on
first use and caches them (``TIKTOKEN_CACHE_DIR``); where that is impossible (no network, as in
this sandbox) the failure is remembered and every count falls back to a conservative estimate,
``ceil(len(text) / 3)`` — real tokenizers average about 4 characters a token on English and
3.5 on JSON, so the estimate over-counts and a budget it approves is never exceeded.
"""
from __future__ import annotations

import json
import math
import re

ENCODINGS = ("o200k_base", "cl100k_base")
CHARS_PER_TOKEN = 3  # conservative: real tokens are longer, so this over-counts
LONG_STRING = 200    # strings longer than this are shortened once every list is cut to one row

_encoding = None
_encoding_failed = False


def _get_encoding():
    """The tiktoken encoding, or None when it cannot be loaded (the failure is cached)."""
    global _encoding, _encoding_failed
    if _encoding is not None or _encoding_failed:
        return _encoding
    try:
        import tiktoken

        for name in ENCODINGS:
            try:
                _encoding = tiktoken.get_encoding(name)
                break
            except Exception:
                continue
    except Exception:
        pass
    _encoding_failed = _encoding is None
    return _encoding


def count_tokens(text: str) -> int:
    """Tokens in ``text``: tiktoken's count, else ``ceil(len(text) / 3)``."""
    if not text:
        return 0
    enc = _get_encoding()
    if enc is not None:
        return len(enc.encode(text, disallowed_special=()))
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def message_tokens(messages: list[dict]) -> int:
    """Tokens of chat messages: their content and tool calls, plus a few per message for the framing."""
    total = 0
    for m in messages:
        total += 4 + count_tokens(m.get("content") or "")
        for call in m.get("tool_calls") or []:
            fn = call.get("function", {})
            total += 4 + count_tokens(fn.get("name", "")) + count_tokens(fn.get("arguments", ""))
    return total


# -- tool results ------------------------------------------------------------------------------

def _dumps(value) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _lists(value, path: str = ""):
    """(path, list, is_inner) for every list of rows inside ``value``.

    A list of rows is a field's list of objects or of lists (a sql row is a list); lists of plain
    values (column names, notes) and the values inside a row are never cut. An inner list holds
    no other list of rows.
    """
    if isinstance(value, dict):
        for k, v in value.items():
            p = f"{path}.{k}" if path else str(k)
            if isinstance(v, list) and v and all(isinstance(x, (dict, list)) for x in v):
                yield p, v, not any(True for x in v for _ in _lists(x))
            yield from _lists(v, p)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _lists(v, f"{path}[{i}]")


def _shorten_strings(value):
    if isinstance(value, str) and len(value) > LONG_STRING:
        return value[:LONG_STRING] + "…"
    if isinstance(value, dict):
        return {k: _shorten_strings(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_shorten_strings(v) for v in value]
    return value


def fit_tool_result(result: dict, budget_tokens: int) -> tuple[str, str | None]:
    """``result`` as compact JSON within ``budget_tokens``, and a note of what was cut (None if nothing).

    Over budget, the longest list of rows (in characters) is halved, keeping its first rows (the
    tools rank them), until the text fits; a list holding other lists of rows (``devices``) is cut
    only once every list inside it is down to one row. Lists of plain values (column names, notes)
    are not cut. Last, strings over 200 characters are shortened.
    """
    text = _dumps(result)
    if count_tokens(text) <= budget_tokens:
        return text, None
    data = json.loads(text)  # a private copy to cut
    original: dict[str, int] = {}
    while count_tokens(text) > budget_tokens:
        found = [(path, items, leaf) for path, items, leaf in _lists(data) if len(items) > 1]
        if not found:
            break
        inner = [f for f in found if f[2]]
        path, items, _ = max(inner or found, key=lambda f: len(_dumps(f[1])))
        original.setdefault(path, len(items))
        del items[math.ceil(len(items) / 2):]
        text = _dumps(data)
    notes = []
    for path, n in sorted(original.items()):
        kept = _kept(data, path)
        if kept is not None:  # an outer cut may have dropped the row this list was in
            notes.append(f"{path} kept {kept} of {n} rows")
    if count_tokens(text) > budget_tokens:
        data = _shorten_strings(data)
        text = _dumps(data)
        notes.append(f"strings over {LONG_STRING} characters shortened")
    if count_tokens(text) > budget_tokens:
        notes.append(f"still about {count_tokens(text)} tokens, over the {budget_tokens} budget")
    return text, "cut: " + "; ".join(notes)


def _kept(data, path: str) -> int | None:
    node = data
    for part in re.findall(r"[^.\[\]]+|\[\d+\]", path):
        try:
            node = node[int(part[1:-1])] if part.startswith("[") else node[part]
        except (KeyError, IndexError, TypeError):
            return None
    return len(node) if isinstance(node, list) else None


# -- chat history ------------------------------------------------------------------------------

SUMMARY_HEAD = "Summary of the earlier conversation (older turns shortened to fit the context):"
MAX_LINE = 200


def first_sentence(text: str) -> str:
    """The first sentence of ``text`` (up to . ! or ? followed by a space or the end), at most 200 chars."""
    text = " ".join((text or "").split())
    m = re.search(r"(?<=[.!?])\s", text)
    s = text[:m.start()] if m else text
    return s if len(s) <= MAX_LINE else s[:MAX_LINE - 1] + "…"


def _turns(messages: list[dict]) -> list[list[dict]]:
    """Messages grouped into turns, a new turn at each user message."""
    turns: list[list[dict]] = []
    for m in messages:
        if m.get("role") == "user" or not turns:
            turns.append([])
        turns[-1].append(m)
    return turns


def _summary_lines(turns: list[list[dict]]) -> list[list[str]]:
    """Per turn: its question and the first sentence of its answer."""
    out = []
    for turn in turns:
        lines = []
        for m in turn:
            if m.get("role") == "user":
                q = " ".join((m.get("content") or "").split())
                lines.append("- Q: " + (q if len(q) <= MAX_LINE else q[:MAX_LINE - 1] + "…"))
            elif m.get("role") == "assistant" and m.get("content"):
                lines.append("  A: " + first_sentence(m["content"]))
        out.append(lines)
    return out


def _summary(per_turn: list[list[str]]) -> dict:
    return {"role": "user", "content": "\n".join([SUMMARY_HEAD, *(line for lines in per_turn for line in lines)])}


def summarize_turns(messages: list[dict], budget: int) -> list[dict]:
    """Chat history within ``budget`` tokens: the newest turns kept whole, older ones in one summary.

    Deterministic: the summary (a user message) keeps each old question and the first sentence of
    each old answer. If even the summary alone is over budget, its oldest turns go first.
    """
    messages = list(messages)
    if message_tokens(messages) <= budget:
        return messages
    turns = _turns(messages)
    for k in range(1, len(turns)):
        kept = [m for t in turns[k:] for m in t]
        summary = _summary(_summary_lines(turns[:k]))
        if message_tokens([summary, *kept]) <= budget:
            return [summary, *kept]
    per_turn = _summary_lines(turns)
    while per_turn and message_tokens([_summary(per_turn)]) > budget:
        per_turn.pop(0)
    return [_summary(per_turn)] if per_turn else []
