"""What a question asks for: a deterministic scored classifier over normalized words.

``classify_question(question, targets=None) -> Classification``: the best intent, its score, the
runner-up and its score, every intent's score and the features that counted, and, for a line that asks
two things ("which kernels take the most time, and are my copies pinned?"), the intent of each part.
``classify(question) -> str`` is the best intent alone.

How (the intents, their words and weights are data: intent_table.py):

1. The question becomes canonical stems (words.py: quotes blanked, lower case, abbreviations, typo
   correction against the table's vocabulary, synonyms, stemming).
2. Each intent scores the sum of the weights of its words present (each once), of its phrases present
   (the words in order, at most PHRASE_GAP apart; each once), and of its target bonuses (targets.py
   found a kernel, an NVTX range, a step, several GPUs, ...).
3. The highest score wins when it is at least MIN_SCORE; ties go to the earlier intent of the table.
   Otherwise the intent is "unknown" (the planner then answers with the health summary).
4. Several questions in one line: the line is cut at "?", ";" and at "and" / "also" / "plus" / "then" /
   "after that" before a question word (is, are, how, what, which, why, ...) or a request (tell, show, give,
   list, explain, compare); when two or more parts each score at least
   MULTI_SCORE for different intents, ``intents`` lists them in the order asked (the first is ``intent``).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache

from .han import to_english
from .intent_table import INTENT_TABLE, MIN_SCORE, ORDER, PHRASE_GAP, Intent
from .targets import mask_quotes
from .words import ABBREVIATIONS, SYNONYMS, raw_words, stem, tokens

INTENTS = [*ORDER, "unknown"]
MULTI_SCORE = 3  # a part of a line counts as its own question from this score
QUESTION_WORDS = r"(?:is|are|was|were|do|does|did|how|what|what's|whats|which|why|where|when|who|can|could|should|" \
                 r"would|will|any|am|has|have)"
REQUEST_WORDS = r"(?:tell|show|give|list|explain|compare)"  # "... then tell me whether ..."
_CLAUSE_CUT = re.compile(r"[?;]+|(?:,\s*|\s+)(?:and\s+also|and\s+then|(?:and\s+)?after\s+that|then|and|also|plus|but)"
                         r"\s+(?=(?:" + QUESTION_WORDS + "|" + REQUEST_WORDS + r")\b)"
                         r"|,\s*(?=(?:also|plus)\b)", re.IGNORECASE)


@dataclass
class Classification:
    """The classifier's choice and the evidence for it (what ``ask --json`` records)."""

    intent: str
    score: float
    runner_up: str | None
    runner_up_score: float
    scores: dict[str, float]
    features: dict[str, list[str]] = field(default_factory=dict)  # per scored intent: what counted
    intents: list[str] = field(default_factory=list)              # one per part asked (2+ parts) else [intent]
    parts: list[str] = field(default_factory=list)                # the part each of ``intents`` was read from


@dataclass(frozen=True)
class _Compiled:
    name: str
    words: dict[str, float]
    phrases: tuple[tuple[tuple[str, ...], float, str], ...]
    targets: dict[str, float]


def _known_words() -> dict[str, int]:
    """The raw words the typo correction may turn a word into: the table's words and phrase words, the
    synonyms and abbreviations, each with its plain inflections; in table order."""
    base: list[str] = []
    for i in INTENT_TABLE:
        for text in [*i.words, *i.phrases]:
            base += [w for w in re.findall(r"[a-z_]+", text.lower()) if len(w) >= 4]
    base += [w for w in [*SYNONYMS, *SYNONYMS.values(), *ABBREVIATIONS.values()] if w.isalpha() and len(w) >= 4]
    base += ["first", "second", "third", "fourth", "fifth", "last", "other", "terrible", "happened", "should",
             "which", "where", "there", "their", "average", "actually", "profile", "kernels", "calls"]
    out: dict[str, int] = {}
    for w in base:
        forms = [w, w + "s", w + "es", w + "ed", w + "ing", w + "ly"]
        if w.endswith("e"):
            forms += [w[:-1] + "ing", w + "d"]
        if w.endswith("y"):
            forms += [w[:-1] + "ies", w[:-1] + "ied"]
        for f in forms:
            out.setdefault(f, len(out))
    return out


KNOWN = _known_words()


def _compile(i: Intent) -> _Compiled:
    """An intent's words and phrases as stems. Entries that normalize alike ("pinned" and "pin", "doing
    nothing" and "do nothing") are one feature: it counts once, with the highest of their weights."""
    words: dict[str, float] = {}
    phrases: dict[tuple[tuple[str, ...], bool], tuple[float, str]] = {}

    def add_phrase(toks: list[str], weight: float, label: str) -> None:
        key = (tuple(toks), label.startswith("="))
        if key not in phrases or weight > phrases[key][0]:
            phrases[key] = (weight, label)

    for w, weight in i.words.items():
        toks = tokens(w, {})
        if len(toks) == 1:
            words[toks[0]] = max(weight, words.get(toks[0], weight))
        elif toks:
            add_phrase(toks, weight, w)
    for p, weight in i.phrases.items():
        toks = tokens(p.lstrip("="), {})
        if toks:
            add_phrase(toks, weight, p)
    return _Compiled(i.name, words, tuple((k[0], w, label) for k, (w, label) in phrases.items()), dict(i.targets))


COMPILED = [_compile(i) for i in INTENT_TABLE]


@lru_cache(maxsize=1)
def vocabulary_stems() -> frozenset[str]:
    """The vocabulary's stems: a question's word with one of them is an inflection, never a typo
    (words.correct). Made on first use: most questions have no word to correct, and stemming the
    ~3,000 known words was a third of loading this module."""
    return frozenset({t for c in COMPILED for t in c.words} | {t for c in COMPILED for p, _, _ in c.phrases for t in p}
                     | {stem(w) for w in KNOWN})


class _Stems:
    """``word in STEMS``, with the set made on the first such test."""

    def __contains__(self, word: object) -> bool:
        return word in vocabulary_stems()


STEMS = _Stems()


def _has_phrase(toks: list[str], phrase: tuple[str, ...], gap: int = PHRASE_GAP) -> bool:
    """The phrase's words in order, each at most ``gap`` words after the previous one."""
    def match(word: str, tok: str) -> bool:
        return tok == word or (word == "#n" and tok.isdigit())

    for start, tok in enumerate(toks):
        if not match(phrase[0], tok):
            continue
        pos, ok = start, True
        for word in phrase[1:]:
            nxt = next((j for j in range(pos + 1, min(len(toks), pos + 2 + gap)) if match(word, toks[j])), None)
            if nxt is None:
                ok = False
                break
            pos = nxt
        if ok:
            return True
    return False


def _target_flags(targets) -> set[str]:
    if targets is None:
        return set()
    flags = set()
    if targets.kernel:
        flags.add("kernel")
    if targets.nvtx:
        flags.add("nvtx")
    if targets.step is not None:
        flags.add("step")
    if targets.window_args():
        flags.add("window")
    if len(set(targets.gpus)) >= 2:
        flags.add("gpus2")
    elif targets.gpus:
        flags.add("gpu")
    if targets.all_gpus:
        flags.add("all_gpus")
    if targets.which_gpu:
        flags.add("which_gpu")
    return flags


CLAUSE_MARKS = re.compile(r"[,;!?，；！？。]|\.(?=\s|$)")


@lru_cache(maxsize=1024)
def _score_text(text: str) -> tuple[tuple[str, float, tuple[str, ...]], ...]:
    """(intent, score without target bonuses, features) for every intent, on quote-blanked text."""
    toks = tokens(text, KNOWN, STEMS)
    present = set(toks)
    # a phrase lies inside one clause: "feels slow, the GPU idles between steps" is no "slow step"
    clauses = [t for c in CLAUSE_MARKS.split(text) if (t := tokens(c, KNOWN, STEMS))] if CLAUSE_MARKS.search(text) \
        else [toks]
    out = []
    for c in COMPILED:
        feats, total = [], 0.0
        for w, weight in c.words.items():
            if w in present:
                total += weight
                feats.append(w)
        for phrase, weight, label in c.phrases:
            if any(_has_phrase(t, phrase, 0 if label.startswith("=") else PHRASE_GAP) for t in clauses):
                total += weight
                feats.append(f'"{label}"')
        out.append((c.name, total, tuple(feats)))
    return tuple(out)


def scores(question: str, targets=None) -> dict[str, float]:
    """Every intent's score (0 when nothing of it occurs)."""
    return {name: s for name, s, _ in _scored(question, targets)}


def _scored(question: str, targets=None) -> list[tuple[str, float, list[str]]]:
    flags = _target_flags(targets)
    out = []
    for (name, s, feats), c in zip(_score_text(mask_quotes(question or "")), COMPILED):
        feats = list(feats)
        for flag, weight in c.targets.items():
            if flag in flags:
                s += weight
                feats.append(f"target:{flag}")
        out.append((name, s, feats))
    return out


def _best(scored: list[tuple[str, float, list[str]]]) -> list[tuple[str, float, list[str]]]:
    """Intents with a positive score, best first (ties in table order)."""
    return sorted((x for x in scored if x[1] > 0), key=lambda x: (-x[1], ORDER.index(x[0])))


def parts(question: str) -> list[str]:
    """The parts of a line that may each be a question (module docstring, step 4); a Chinese line is cut
    as its English words (chinese.py)."""
    text = to_english(mask_quotes(question or ""))
    return [p.strip(" ,.") for p in _CLAUSE_CUT.split(text) if p and p.strip(" ,.")]


def classify_question(question: str, targets=None) -> Classification:
    """The intent of ``question`` with its score, the runner-up and the features (module docstring)."""
    if targets is None:
        from .targets import parse_targets

        targets = parse_targets(question or "")
    ranked = _best(_scored(question, targets))
    all_scores = {name: s for name, s, _ in _scored(question, targets)}
    if not ranked or ranked[0][1] < MIN_SCORE:
        top = ranked[0] if ranked else None
        return Classification("unknown", 0.0, top[0] if top else None, top[1] if top else 0.0, all_scores,
                              {n: f for n, _, f in ranked[:2]}, ["unknown"])
    intent, score, _ = ranked[0]
    runner = ranked[1] if len(ranked) > 1 else None
    intents, from_parts = [intent], [question]
    pieces = parts(question)
    if len(pieces) > 1:
        per_part, texts = [], []
        for p in pieces:
            best = _best(_scored(p, None))
            if best and best[0][1] >= MULTI_SCORE and best[0][0] not in per_part:
                per_part.append(best[0][0])
                texts.append(p)
        if len(per_part) > 1:
            intents, from_parts = per_part, texts
            intent = per_part[0]
            score = all_scores[intent]
            others = [x for x in ranked if x[0] != intent]
            runner = others[0] if others else None
    return Classification(intent, score, runner[0] if runner else None, runner[1] if runner else 0.0, all_scores,
                          {n: f for n, _, f in ranked[:3]}, intents, from_parts)


def classify_all(question: str, targets=None) -> list[str]:
    """Intents with a positive score, best first (ties in table order); [] when none."""
    return [name for name, _, _ in _best(_scored(question, targets))]


def classify(question: str, targets=None) -> str:
    """The best intent of ``question``, or "unknown" (module docstring)."""
    return classify_question(question, targets).intent


def about_lines() -> list[str]:
    """One line per intent on what it answers (the fallback's "I can also answer" line, docs)."""
    return [i.about for i in INTENT_TABLE]


__all__ = ["INTENTS", "Classification", "classify", "classify_all", "classify_question", "scores", "parts",
           "raw_words"]
