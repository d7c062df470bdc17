"""Whose number it is: a figure an answer states for a GPU must come from a tool result for that GPU.

grounding.check asks whether a number is in *some* tool result; this asks whether it is in one that is about
the GPU the sentence names. ``check_gpus(text, evidence, extra_values)`` returns ``Attribution``:

- ``misattributed``: numbers written for GPU g ("GPU 1 was idle 61 %") that no result for g holds, as
  ``"61 % (GPU 1)"`` — e.g. GPU 0's figures given to GPU 1 when only GPU 0 was queried;
- ``uncovered``: GPUs of the profile the answer gives a figure for that no tool result is about at all
  (the tools were never asked for them; naming a GPU without a figure is fine).

The same holds for a named thing — a kernel, an NVTX range, a CUDA function: a row of a result with a
``name``/``short_name``/``label``/``api``/``family`` string is about that thing. Because a sentence about a kernel
often quotes other figures (the gap before it, the window), the rule for names is narrower: a number
written after a name is flagged only when it is held by rows of *other* names and by nothing else —
neither the name's own rows nor any part of a result that is no name's row ("`gemm` took 36 ms" when
36 ms is only `softmax`'s total).

Which results are about GPU g: a call made with ``gpu=g`` (all of its result), and, in any result, a dict
with a GPU-id field (``device_id``, ``gpu``, ``gpu_id``, ``device``) equal to g (that dict and everything
in it). What is left of each result outside such dicts — window length, totals — is about no GPU and
grounds a figure for any GPU, as do ``extra_values``.

Which GPU a number is written for: the sentence is the unit (split at . ! ? ; and line breaks, not
inside decimals); a number belongs to the GPU mention before it in the sentence (the first one after it
when none comes before). A mention of several GPUs ("GPUs 0 and 1", "GPU 0-3") grounds a number in a
result of any of them. Ordinals themselves (GPU 1, step 3) are grounding.check's business.
"""
from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from .grounding import Candidates, Num, _extract, _result_of

GPU_FIELDS = ("device_id", "gpu", "gpu_id", "device")
NAME_FIELDS = ("name", "short_name", "label", "api", "family")
MIN_NAME = 4  # shorter names are not looked for in the answer
_SENTENCE_END = re.compile(r"(?<=[.!?;])\s+|\n+")


@dataclass
class Attribution:
    misattributed: list[str] = field(default_factory=list)
    uncovered: list[int] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.misattributed and not self.uncovered


def _gpu_of(obj: dict) -> int | None:
    for k in GPU_FIELDS:
        v = obj.get(k)
        if type(v) is int:
            return v
    return None


def _split(obj: Any, scoped: dict, key_of=_gpu_of, top: bool = True) -> Any:
    """``obj`` without the dicts ``key_of`` gives a key (a GPU, a name): those go to ``scoped[key]``; None when
    all of it is scoped. The top level is never scoped itself."""
    if type(obj) is dict:
        key = None if top else key_of(obj)
        if key is not None:
            scoped.setdefault(key, []).append(obj)
            return None
        return {k: _split(v, scoped, key_of, False) for k, v in obj.items()}
    if type(obj) is list:
        return [_split(v, scoped, key_of, False) for v in obj]
    return obj


def scope_evidence(evidence: Iterable[Any]) -> tuple[dict[int, list], list]:
    """(GPU -> the results or parts of results about it, the parts about no GPU)."""
    scoped: dict[int, list] = {}
    rest: list = []
    for ev in evidence:
        result = _result_of(ev)
        args = getattr(ev, "args", None) or (ev.get("args") if isinstance(ev, dict) else None) or {}
        gpu = args.get("gpu") if isinstance(args, dict) else None
        if type(gpu) is int:
            scoped.setdefault(gpu, []).append(result)
            continue
        if isinstance(result, dict):
            g = _gpu_of(result)
            if g is not None:
                scoped.setdefault(g, []).append(result)
                continue
        rest.append(_split(result, scoped))
    return scoped, rest


def _name_of(obj: dict) -> str | None:
    for k in NAME_FIELDS:
        v = obj.get(k)
        if isinstance(v, str) and len(v) >= MIN_NAME:
            return v
    return None


def _names_check(text: str, evidence: list, extra: list[float], names_mask, out: Attribution) -> None:
    rows: dict[str, list] = {}
    rest = [_split(_result_of(ev), rows, _name_of) for ev in evidence]
    if len(rows) < 2:
        return
    own = {n: Candidates.build([*r], extra) for n, r in rows.items()}
    base = Candidates.build(rest, extra)
    by_len = sorted(rows, key=len, reverse=True)
    for a, b in _sentences(text):
        sentence = text[a:b]
        mentions = sorted((sentence.find(n), n) for n in by_len if n in sentence)
        if not mentions:
            continue
        for num in _extract(sentence, names_mask):
            if num.unit and num.unit.startswith("#"):
                continue
            before = [n for pos, n in mentions if pos < num.start]
            name = before[-1] if before else None
            if name is None or base.grounds(num) or own[name].grounds(num):
                continue
            if any(other != name and c.grounds(num) for other, c in own.items()):
                label = f"{num.text} (`{name}`)"
                if label not in out.misattributed:
                    out.misattributed.append(label)


def _sentences(text: str) -> list[tuple[int, int]]:
    out, start = [], 0
    for m in _SENTENCE_END.finditer(text):
        out.append((start, m.start()))
        start = m.end()
    out.append((start, len(text)))
    return [(a, b) for a, b in out if b > a]


def _gpu_groups(nums: list[Num]) -> list[tuple[int, set[int]]]:
    """(position, GPUs) of each GPU mention; consecutive ordinals of one list are one mention."""
    groups: list[tuple[int, set[int]]] = []
    prev: Num | None = None
    for n in nums:
        if n.unit == "#gpu":
            if prev is not None and prev.unit == "#gpu" and n.start - prev.end <= 7:  # ", ", " and ", "-"
                groups[-1][1].add(int(n.value))
            else:
                groups.append((n.start, {int(n.value)}))
        prev = n
    return groups


def check_gpus(text: str, evidence: Iterable[Any], extra_values: Iterable[float] = (),
               devices: Iterable[int] | None = None) -> Attribution:
    """See the module docstring; ``devices``: the profile's GPUs (one it lacks is never "uncovered")."""
    evidence = list(evidence)
    known = None if devices is None else set(devices)
    scoped, rest = scope_evidence(evidence)
    extra = [float(v) for v in extra_values]
    names = Candidates.build(evidence).names
    pools: dict[frozenset, Candidates] = {}

    def pool(gpus: set[int]) -> Candidates:
        key = frozenset(gpus)
        if key not in pools:
            parts = [p for g in gpus for p in scoped.get(g, [])]
            pools[key] = Candidates.build([*parts, *rest], extra)
        return pools[key]

    out = Attribution()
    everything = Candidates.build(evidence, extra)
    for a, b in _sentences(text):
        nums = _extract(text[a:b], names)
        groups = _gpu_groups(nums)
        if not groups:
            continue
        for n in nums:
            if n.unit and n.unit.startswith("#"):
                continue
            before = [gs for pos, gs in groups if pos < n.start]
            gpus = before[-1] if before else groups[0][1]
            if not any(g in scoped for g in gpus):
                out.uncovered += [g for g in sorted(gpus) if g not in out.uncovered and (known is None or g in known)]
                continue
            if everything.grounds(n) and not pool(gpus).grounds(n):
                label = f"{n.text} (GPU {', '.join(map(str, sorted(gpus)))})"
                if label not in out.misattributed:
                    out.misattributed.append(label)
    _names_check(text, evidence, extra, names, out)
    return out
