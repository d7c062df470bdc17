"""The one shortener of profile text (kernel names, NVTX labels, thread names) on every surface: tables, the
summary, answers, the PR comment, the timeline's labels, the diff.

A cut keeps names apart. A name that fits is shown whole. A longer one keeps its start, and then:

- when names shown beside it (``others``) share its first ``width`` characters or more, the part from
  ``CONTEXT`` characters before the first character where it differs from them: two names that differ only in
  the middle (``…execute_kernel<…`` and ``…execute_split_k_kernel<…``) stay two names;
- otherwise its end (``start…end``): where a name differs from others early, the start already tells.

One ``…`` marks each cut; the result has at most ``width`` characters (``MAX_NAME`` unless told).
"""
from __future__ import annotations

import os

MAX_NAME = 80  # profile text longer than this is cut (prose and tables)
CONTEXT = 20  # characters kept before the first one that differs from a name shown beside it
ELLIPSIS = "…"


def _flat(text: str) -> str:
    return " ".join(str(text).split())


def first_difference(text: str, others) -> int:
    """The index of the first character where ``text`` differs from the most alike of ``others`` (those that are
    not ``text``); 0 when there is none."""
    alike = [o for o in (_flat(x) for x in others) if o != text]
    return max((len(os.path.commonprefix([text, o])) for o in alike), default=0)


def _from(text: str, split: int, room: int) -> str:
    """``room`` characters of ``text`` showing its character ``split``: from CONTEXT before it, "…" where cut."""
    start = max(0, split - CONTEXT)
    if len(text) - start <= room - 1:  # the rest fits: the whole end
        return ELLIPSIS + text[len(text) - room + 1:]
    return ELLIPSIS + text[start: start + room - 2] + ELLIPSIS


def shorten(text: str | None, width: int = MAX_NAME, others=(), head: str | None = None) -> str:
    """``text`` (whitespace runs as one space) in at most ``width`` characters, told apart from ``others``: see
    the module docstring. ``head``: what to show before the differing part instead of the start of ``text`` (a
    kernel's short name, for its full name)."""
    text = _flat(text or "")
    width = max(width, 8)
    if len(text) <= width:
        return text
    split = first_difference(text, others)
    if head is not None or split >= width - 1:  # the start does not tell it apart: show where it differs
        sep = "" if head is None else " "  # a short name is a word of its own; the start runs on
        head = text[: width // 3] if head is None else _flat(head)
        head = head if len(head) <= width // 2 else head[: width // 2 - 1] + ELLIPSIS
        return head + sep + _from(text, split, width - len(head) - len(sep))
    tail = (width - 1) // 3
    return text[: width - 1 - tail] + ELLIPSIS + text[len(text) - tail:]


def shorten_all(texts, width: int = MAX_NAME) -> list[str]:
    """Each of ``texts`` shortened apart from the others (names listed together)."""
    texts = list(texts)
    return [shorten(t, width, texts) for t in texts]


def kernel_label(short: str, full: str, shown: list[tuple[str, str]], width: int = MAX_NAME) -> str:
    """How a kernel is named where others are shown beside it (``shown``: their (short, full) names, this one's
    among them): its short name; when another kernel shown has the same short name and another full name, its
    full name when that fits, else its short name followed by the part of its full name that tells them apart
    (``shorten`` with ``head``)."""
    alike = [f for s, f in shown if s == short and f != full]
    if not alike:
        return shorten(short, width)
    full = _flat(full)
    if len(full) <= width:
        return full
    return shorten(full, width, alike, head=short)
