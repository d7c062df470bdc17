"""A question as normalized words: what the intent classifier (intents.py) scores.

``tokens(question, known) -> list[str]`` applies, in order:

1. Quoted names are blanked (a kernel called 'memcpy_kernel' says nothing), the text is lower-cased.
2. Forms that are not plain words are rewritten: CUDA API names (``cudaMemcpy``, ``cuLaunchKernelEx``,
   any case) become the token ``@api`` followed by tokens of their kind (``@api_sync``, ``@api_memcpy``,
   ``@api_launch``, ``@api_memory`` for malloc/free, ``@api_event``); ``->`` and ``2`` between
   host/device words become "to" ("h2d" -> htod);
   "/s" and "/sec" become "per second"; ``.item()`` and ``torch.compile`` become one word each;
   "w/", "b/w", "w/o" become with, between, without; hyphens split words ("launch-bound");
   an identifier (``layer_norm_kernel``, ``ncclDevKernel_AllReduce``) is followed by its parts;
   a word glued to a number ("gpu0", "iter3") is split.
3. Words: letters (with ``_``) or digits. Chat shorthand and abbreviations are expanded (ABBREVIATIONS:
   util, perf, mem, comms, h2d, bwd, r, u, pls, ...).
4. A word not in ``known`` (the classifier's vocabulary plus COMMON_WORDS) and whose stem is no
   vocabulary stem (so "lagging" stays an inflection of "lag") is corrected to the known word at
   optimal-string-alignment distance 1 (one letter added, dropped or changed, or two neighbours swapped;
   rapidfuzz's ``OSA`` scorer through ``process.extractOne``) when it has at least 5 letters (or 4 letters
   and two neighbours swapped: "idel"), and that known word is the only one so close, or the first in
   ``known``'s order.
5. Synonyms map to one canonical word (SYNONYMS: cpu -> host, device -> gpu, hog/eat/consume -> consume,
   priciest/costliest/heaviest -> costly, ...).
6. Stemming (``stem``): British -ise/-isation spelt -ize, then the Snowball English (Porter2) stemmer
   (snowballstemmer). Vocabulary and questions go through the same function, so only agreement matters,
   not linguistic accuracy; where Porter2 merges words the intents keep apart, a synonym separates them
   ("manager" -> boss, not the stem of "managed").

Chinese text is put into English words at the start of step 2 (chinese.py, called by ``rewrite``).
Deterministic; the classifier compiles its vocabulary with ``stem`` once at import.
"""
from __future__ import annotations

import re
from collections.abc import Container
from functools import lru_cache

from rapidfuzz import process
from rapidfuzz.distance import OSA

from .han import to_english

# Chat shorthand and abbreviations -> words (applied to whole words, before typo correction).
ABBREVIATIONS = {
    "util": "utilization", "utils": "utilization", "utilisation": "utilization", "perf": "performance",
    "mem": "memory", "comm": "communication", "comms": "communication", "h2d": "htod", "d2h": "dtoh",
    "d2d": "dtod", "bwd": "backward", "fwd": "forward", "backprop": "backward", "iter": "iteration",
    "iters": "iterations", "avg": "average", "sync": "synchronize", "syncs": "synchronize",
    "synch": "synchronize", "synced": "synchronized", "syncing": "synchronizing", "r": "are", "u": "you",
    "ur": "your", "pls": "please", "plz": "please", "thx": "thanks", "y": "why", "wat": "what", "wht": "what",
    "wich": "which", "shud": "should", "shld": "should", "cud": "could", "wud": "would", "abt": "about", "b4": "before",
    "bc": "because", "cuz": "because", "tbh": "", "imo": "", "lol": "", "pct": "percent", "approx": "about",
    "info": "information", "mins": "minutes", "secs": "seconds", "sec": "second", "ms": "milliseconds",
    "nah": "no", "yep": "yes", "gonna": "going", "wanna": "want", "dunno": "know", "im": "i", "ive": "i",
    "whats": "what", "wheres": "where", "hows": "how", "whys": "why", "isnt": "is not", "arent": "are not",
    "doesnt": "does not", "dont": "do not", "cant": "can not", "wont": "will not", "theres": "there",
    "memcopy": "memcpy", "memcopies": "memcpy", "memcopys": "memcpy", "memcpys": "memcpy", "memcpy's": "memcpy",
    "dataloader": "data loader", "dataloaders": "data loader", "gpus": "gpu", "nvtxs": "nvtx",
    "allreduce": "allreduce", "allreduces": "allreduce", "tldr": "summary", "sm": "sm", "sms": "sm",
    "1st": "first", "2nd": "second", "3rd": "third", "4th": "fourth", "5th": "fifth", "6th": "sixth",
    "7th": "seventh", "8th": "eighth",
}

# Word -> canonical word (after abbreviations and typo correction, before stemming).
SYNONYMS = {
    # the parts of the machine
    "cpu": "host", "cpus": "host", "python": "host", "device": "gpu", "devices": "gpu", "card": "gpu",
    "cards": "gpu", "accelerator": "gpu", "rank": "gpu", "ranks": "gpu",
    # using up the time
    "hog": "consume", "hogs": "consume", "hogging": "consume", "eat": "consume", "eats": "consume",
    "eating": "consume", "consumes": "consume", "consuming": "consume", "dominate": "consume",
    "dominates": "consume", "dominating": "consume", "dominant": "consume", "burn": "consume",
    "burns": "consume", "burning": "consume", "spend": "consume", "spends": "consume", "spending": "consume",
    "spent": "consume",
    "expensive": "costly", "costliest": "costly", "priciest": "costly", "pricey": "costly", "pricy": "costly",
    "heavy": "costly", "heaviest": "costly", "heavier": "costly", "hottest": "costly", "hot": "costly",
    "biggest": "costly", "bigger": "costly", "big": "costly", "largest": "costly",
    "cost": "costly", "costs": "costly", "costing": "costly",
    # irregular verbs
    "going": "go", "goes": "go", "went": "go", "gone": "go", "doing": "do", "does": "do", "did": "do",
    "took": "take", "taking": "take", "takes": "take", "taken": "take", "ran": "run", "running": "run",
    "runs": "run",
    # speed
    "slower": "slow", "slowest": "slow", "slowly": "slow", "sluggish": "slow", "laggy": "slow",
    "slowpoke": "straggler", "laggard": "straggler", "faster": "fast", "fastest": "fast", "quicker": "fast",
    "quickest": "fast", "quick": "fast", "speedup": "fast", "longer": "long", "longest": "long",
    "lengthy": "long", "ages": "long", "shorter": "short", "shortest": "short",
    # idleness
    "lazy": "idle", "idling": "idle", "idles": "idle", "idled": "idle", "unused": "idle", "underused": "idle",
    "slacking": "idle", "starving": "starve", "starved": "starve", "starves": "starve", "hungry": "starve",
    "underfed": "starve", "underfeed": "starve", "unfed": "starve",
    "bubble": "gap", "bubbles": "gap", "hole": "gap", "holes": "gap", "empty": "gap", "whitespace": "gap",
    "spaces": "gap", "pause": "gap", "pauses": "gap",
    "underutilized": "underutilization", "underutilised": "underutilization",
    "utilisation": "utilization", "usage": "utilization", "utilized": "utilization", "utilised": "utilization",
    "saturate": "saturated", "saturating": "saturated", "terrible": "poor", "awful": "poor", "bad": "poor",
    # waiting
    "waits": "wait", "waiting": "wait", "waited": "wait", "stuck": "block", "blocked": "block",
    "blocking": "block", "blocks": "blocks", "hang": "block", "hangs": "block", "hanging": "block",
    "stall": "stall", "stalls": "stall", "stalled": "stall", "stalling": "stall",
    "synchronise": "synchronize", "synchronization": "synchronize", "synchronisation": "synchronize",
    # trouble
    "weird": "problem", "odd": "problem", "fishy": "problem", "suspicious": "problem", "strange": "problem",
    "wrong": "problem", "problems": "problem", "issue": "problem", "issues": "problem",
    "broken": "problem", "concerning": "problem", "unusual": "problem", "flags": "flag",
    "healthy": "health", "sane": "health", "sanity": "health", "okay": "ok", "alright": "ok", "fine": "ok",
    "fix": "improve", "improve": "improve", "optimise": "improve", "optimize": "improve",
    "optimization": "improve", "optimisation": "improve", "tune": "improve", "tuning": "improve",
    # copies
    "copies": "copy", "copys": "copy", "copying": "copy", "copied": "copy", "transfers": "transfer",
    "transferring": "transfer", "memcpy": "memcpy", "movement": "transfer", "moves": "transfer",
    "move": "transfer", "moving": "transfer", "upload": "htod", "uploads": "htod", "download": "dtoh",
    # kernels and calls
    "kernals": "kernel", "kernal": "kernel", "op": "kernel", "ops": "kernel", "function": "call",
    "functions": "call", "routine": "call", "routines": "call",
    # steps
    "iterations": "iteration", "steps": "step", "batches": "batch", "epochs": "epoch", "timestep": "step",
    "timesteps": "step",
    # comms
    "communications": "communication", "communicating": "communication", "collective": "collectives",
    "hidden": "overlap", "hide": "overlap", "hiding": "overlap", "overlapped": "overlap",
    "overlapping": "overlap", "overlaps": "overlap", "exposed": "expose",
    # parallelism
    "concurrently": "concurrent", "concurrency": "concurrent", "simultaneously": "concurrent",
    "parallelism": "parallel", "serialised": "serialized", "serialize": "serialized",
    # people (the Snowball stem of "manager" is that of "managed", as in managed memory)
    "manager": "boss", "managers": "boss",
    # summaries
    "summarize": "summary", "summarise": "summary", "overall": "overall", "verdict": "summary",
    "describe": "describe", "explain": "explain",
}

# Words that are never typo-corrected (common English and profiling words outside the vocabulary).
COMMON_WORDS = frozenset("""
a about above after again against all also am an and any anything are around as ask at away back be because
been before being below between both but by can come could did do does doing done down during each either
else enough even ever every everything few file files first for from further get gets getting give go goes
going gone good got had has have having he her here him his how however i if in into is it its itself just
know last least less let like look looks looking made make makes making many may me might mine more most
much must my myself need needs never new next no nor not now of on once one only or other others our out
over own part parts please put quite rather really right run runs same say see seem seems seen she should
show since so some something still such sure take taken takes taking tell than thanks that the their them
then there these they thing things think this those though through thus to too under until up us use used
uses using very want was way we well were what when where whether which while who whole why will with within
without would yes yet you your yours model models training train trained trace traces file profile profiles
report capture run job program code script thing stuff data tell show give list find mean means meaning
life hello hi hey yo thanks thank okay zero two three four five six seven eight nine ten hundred thousand
total number numbers count much many lot lots time times per second seconds minute minutes hour milliseconds
microseconds percent share fraction half quarter whole entire overall actually basically really honestly
pretty super very quite kind sort type types name names named called manager boss friday monday week today
wondering guess maybe probably think feel feels felt seems looks figure understand happen happens happened
happening going gone went while since until during before after later earlier begin beginning end ending
""".split())


def one_edit(a: str, b: str) -> bool:
    """``a`` and ``b`` differ by exactly one insertion, deletion, substitution or swap of two neighbours
    (optimal string alignment distance 1, rapidfuzz)."""
    return OSA.distance(a, b, score_cutoff=1) == 1


def swapped(a: str, b: str) -> bool:
    """``a`` is ``b`` with two neighbouring letters swapped."""
    return len(a) == len(b) and one_edit(a, b) and sorted(a) == sorted(b)


# -- stemming ------------------------------------------------------------------------------------
_BRITISH = re.compile(r"(?<=.{3})(is|ys)(e|ed|es|ing|ation|ations|er|ers)$")


@lru_cache(maxsize=1)
def _snowball():
    """The Snowball English (Porter2) stemmer (snowballstemmer; it uses PyStemmer's C code when installed)."""
    import snowballstemmer

    return snowballstemmer.stemmer("english")


@lru_cache(maxsize=4096)
def stem(word: str) -> str:
    """The word's stem (module docstring, step 6); short words (up to 3 letters) and tokens such as
    ``@api`` as they are."""
    w = word.lower()
    if len(w) <= 3 or not w.isalpha():
        return w
    w = _BRITISH.sub(lambda m: ("iz" if m.group(1) == "is" else "yz") + m.group(2), w)
    return _snowball().stemWord(w)


# -- rewriting the text ----------------------------------------------------------------------------
# CUDA API names: cudaX (runtime) and cuX (driver: cuLaunchKernel, cuMemcpyHtoD, cuCtxSynchronize, ...),
# any case; not the plain word "cuda".
API_NAME = re.compile(r"(?<![\w.])(cuda(?!graphs?\b)[a-z]\w*|cu(?:launch|mem|ctx|stream|event|module|library|graph|"
                      r"device|init|func|link|array|tex|surf|occupancy|pointer|profiler)\w*)(?![\w(])", re.IGNORECASE)
_CUDA_GRAPHS = re.compile(r"\bcuda[\s-]*graphs?\b", re.IGNORECASE)
_API_KINDS = (("synchroniz", "@api_sync"), ("memcpy", "@api_memcpy"), ("memset", "@api_memcpy"),
              ("launch", "@api_launch"), ("malloc", "@api_memory"), ("free", "@api_memory"), ("event", "@api_event"))
_REWRITES = [
    (re.compile(r"\.item\(\)"), " itemcall "),
    (re.compile(r"\btl\s*;\s*dr\b"), " tldr "),
    (re.compile(r"\btorch\.compile\b"), " torchcompile "),
    (re.compile(r"\bw/o\b"), " without "),
    (re.compile(r"\bb/w\b"), " between "),
    (re.compile(r"\bw/"), " with "),
    (re.compile(r"\bsend\s*/\s*recv\b"), " sendrecv "),
    (re.compile(r"\ball[\s-]+(reduce|gather|to[\s-]*all)s?\b"),
     lambda m: " all" + re.sub(r"[\s-]", "", m.group(1)) + " "),  # all-to-all -> alltoall
    (re.compile(r"\breduce[\s-]+scatters?\b"), " reducescatter "),
    (re.compile(r"\btime[\s-]+steps?\b"), " step "),  # a simulation's time step is a step of the run
    (re.compile(r"\s*(?:->|→|=>)\s*"), " to "),
    (re.compile(r"\b(host|cpu|device|gpu)2(host|cpu|device|gpu)\b"), r"\1 to \2"),
    (re.compile(r"\b(\w+)\s*/\s*(?:s|sec|second)\b"), r"\1 per second"),
    (re.compile(r"\bper\s+sec\b"), "per second"),
    (re.compile(r"\bcuda\s*:\s*(\d)"), r"gpu \1"),
    (re.compile(r"\b(gpu|rank|card|node|step|iter|iteration|device|cuda)(\d)"), r"\1 \2"),  # gpu0 -> gpu 0
    (re.compile(r"(\d)([a-z]{3,})"), r"\1 \2"),  # 20msec -> 20 msec
    (re.compile(r"[-–—]"), " "),
]
_WORD = re.compile(r"@api(?:_[a-z]+)?|[a-z_][a-z0-9_]*(?:'[a-z]+)?|\d+(?:st|nd|rd|th)?")


def _api_words(name: str) -> str:
    low = name.lower()
    kinds = [k for part, k in _API_KINDS if part in low]
    return " @api " + " ".join(dict.fromkeys(kinds)) + " "


_IDENT = re.compile(r"\b[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)+\b|\b[a-z]+(?:[A-Z][a-z0-9]+)+\b")


def _subwords(m: re.Match) -> str:
    """An identifier, then its parts ("ncclDevKernel_AllReduce nccl dev kernel all reduce")."""
    parts = re.findall(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+", m.group(0))
    return m.group(0) + " " + " ".join(p.lower() for p in parts if not p.isdigit()) + " "


def rewrite(text: str) -> str:
    """Steps 1-2 of the module docstring on text whose quotes are already blanked (Chinese text first put
    into English words: chinese.py)."""
    text = to_english(text)
    text = _CUDA_GRAPHS.sub(" cudagraph ", text)
    text = API_NAME.sub(lambda m: _api_words(m.group(1)), text)
    text = _IDENT.sub(_subwords, text)
    text = text.lower()
    for rx, repl in _REWRITES:
        text = rx.sub(repl, text)
    return text


def raw_words(text: str) -> list[str]:
    """Steps 1-3: the words of a (quote-blanked) question, shorthand expanded, apostrophes dropped."""
    out = []
    for w in _WORD.findall(rewrite(text)):
        w = ABBREVIATIONS.get(w, w)
        if "'" in w:
            base, _, tail = w.partition("'")
            w = ABBREVIATIONS.get(base + tail, base) if tail in ("s", "re", "ve", "ll", "d", "t", "m") else w
        out.extend(w.split())
    return out


def correct(word: str, known: dict[str, int], stems: Container[str] = frozenset()) -> str:
    """Step 4: ``word`` itself when known, short, or an inflection of a known word (its stem is in
    ``stems``: "lagging" of "lag"), else the one known word one edit away (the first in ``known``'s order
    when several are)."""
    if word in known or word in COMMON_WORDS or not word.isalpha() or len(word) < 4 or stem(word) in stems:
        return word
    choices = _candidates(tuple(known))
    if len(word) >= 5:
        hit = process.extractOne(word, choices, scorer=OSA.distance, score_cutoff=1)
        return hit[0] if hit else word
    return next((c for c in choices if swapped(word, c)), word)


@lru_cache(maxsize=8)
def _candidates(known: tuple[str, ...]) -> list[str]:
    """The known words a typo may be corrected to (4 letters or more), in order."""
    return [c for c in known if len(c) >= 4]


def tokens(text: str, known: dict[str, int], stems: Container[str] = frozenset()) -> list[str]:
    """The question as canonical stems (module docstring); ``known``: the vocabulary's raw words, in order;
    ``stems``: the vocabulary's stems (a word with one of them is never corrected)."""
    out = []
    for w in raw_words(text):
        w = correct(w, known, stems)
        w = SYNONYMS.get(w, w)
        out.extend(stem(x) for x in w.split())
    return out
