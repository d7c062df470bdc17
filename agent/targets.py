"""Read what a question points at: GPUs, a time window, a step, a kernel, an NVTX range.

``parse_targets(question, profile=None) -> Targets``. Rules, applied in this order; each
part found is blanked out of the text so later rules do not read its numbers again:

1. Quoted names ('x', "x", `x`, “x”, ‘x’; an apostrophe inside a word such as "what's"
   does not open a quote). Each is a kernel when a kernel (short or full) name of the
   profile contains it; an NVTX name when the question calls it a range/region/NVTX and a
   label group matches; else a kernel when a kernel name contains it; else an NVTX name when
   a label group (``nvtx_groups.label``) contains it or its group form ("train_step 7" ->
   "train_step <n>", which is then what is kept); else by the nearest context word:
   "kernel" -> kernel, "range"/"region"/"NVTX"/"annotation" -> NVTX; else ignored.
   Case-insensitive. Without a profile only the context word decides.
2. GPU ids: "GPU 5", "gpu5", "GPU #5", "GPU-5", "GPU id 5", "device 5", "cuda:5"; lists
   "GPUs 0 and 3", "GPU 0, 1 and 2", "GPU 0 vs 1"; ranges "GPU 0-3", "GPUs 0 to 3" (at most
   1024 ids). A number followed by a time unit or "%" is not an id, nor one with a decimal
   part ("GPU 0.5"); sentence punctuation after a number does not hide it ("Compare GPU 0 and
   GPU 1." -> [0, 1]). "rank 3", "cuda 12" and counts ("8 GPUs") are not ids. Sorted, without
   duplicates.
   all_gpus: "all/every/each (of the) GPU(s)", "across/between/among the GPUs", "per GPU",
   "both GPUs", "compare the GPUs", or plural "GPUs" without ids in a comparison (compare,
   differ, vs, imbalance, balanced, straggler, skew, uneven, outlier).
   which_gpu: "which/what GPU(s)/device(s)", "which of the GPUs", "which one of the GPUs".
   Ordinals and number words: "the first/second/third/last GPU", "my 2nd gpu", "the 4th device", and
   lists of them ("the first and last GPU", "1st vs 3rd gpus") are the GPUs in the profile's order of
   device ids (the second of GPUs 0 and 1 is GPU 1; an ordinal past the
   last GPU is the id it would have, which the answer says is missing); without a profile the n-th is
   id n-1 and "last" says nothing. "GPU one", "gpu number two", "device zero" are ids (1, 2, 0).
   other_gpu: "the other one", "the other GPU/device/card" (chat resolves it: the GPU not discussed).
   ranks: "rank 3", "ranks 0 and 2" (for fleets; a single profile's GPUs are not ranks).
   streams: "stream 7", "streams 7 and 13" (stream ids, per process as nsys records them).
3. Step: "iteration 3", "iter 3", "step 3", "train_step 3" (an NVTX step label's own word), "step #3"
   (the number as said: the iterations tool's index, from 0; sentence punctuation after it allowed; the first
   one wins); an ordinal counts from one: "the 3rd iteration", "the third step" are index 2, "the first step"
   index 0. Plural "steps 3", counts ("10 steps") and decimals ("step 4.5") are not.
4. Window, in ms from the start of GPU activity; units s/sec/second(s), ms/msec/millisecond(s),
   us/µs/usec/microsecond(s), ns/nanosecond(s), min/minute(s); a number needs a unit (the first number of a
   pair borrows the second's): "between 2 s and 3.5 s", "from 1s to 2s", "2-3.5 s" ->
   (start, end); "in the first 2 seconds" -> (0, 2000); "in the last 2 s" -> start = window
   length - 2000 when a profile is given (else nothing); "after/since/past/beyond/starting
   at 1.2s" -> start; "before/until/till/up to/prior to 500 ms" -> end. "at 1.5 s", "for 2 s",
   "longer than 1 ms" are not windows. A reversed pair is swapped.
5. Unquoted names (never a common English or profiling word, see COMMON_WORDS). A word is
   "identifier-like" when it has "_", "::", a digit or an inner capital (camelCase).
   - After "kernel"/"range"/"region"/"NVTX" ("kernel sgemm_128x64", "range forward",
     "kernels named foo"): without a profile, kept after the singular word, or after the plural
     when identifier-like or introduced by named/called/labelled; with a profile, kept when it
     matches a name of that kind (case-insensitive substring; exact under 3 letters; NVTX
     names by their group form too) or is identifier-like / introduced by named/called.
   - Before "kernel(s)"/"range(s)"/"region(s)" ("the gemm kernel", "the forward range"): with
     a profile only, kept when it matches a name of that kind.
   - Any other word, with a profile only: a kernel when it equals a kernel short name
     (identifier-like words: when a kernel name contains it), else NVTX when it equals a label
     group (identifier-like: when a group contains it).
   - With a profile, when nothing above named one: a code name with "kernel" inside it
     ("broadcast_kernel", "myKernel") is a kernel, in the profile or not; the X of "how long does one
     X take" is a kernel when a kernel has that name, else an NVTX range (in the profile or not: the
     answer then says no range has that name).
   The first kernel and the first NVTX name found win: quoted, then word forms left to right,
   then other words.

6. A CUDA API function: the first name like cudaMemcpy / cuLaunchKernelEx (any case, words.API_NAME), with
   a trailing "*" kept as a pattern ("cudaMemcpy*"); with a profile, spelt as the profile spells it when
   it has that function (case-insensitive, version suffix ignored).

Names of the profile are read once per profile (kernel short and full names, NVTX label
groups) and cached.

``part_targets(line, parts, profile)``: a line that asks several things (intents.parts) is answered part
by part, each with its own targets. A part's scope (its GPUs, window, step, ranks) is the one it names,
else the nearest earlier part's, else none: "which kernels take the most time, then why is GPU 1 idle"
asks the first part of the whole profile, "for GPU 1 the top kernels and the gaps" both parts of GPU 1.
Its subject (kernel, NVTX range, API function) is its own, else the line's. When the line has a scope
none of its parts names (a chat follow-up resolved it from the conversation), every part keeps the
line's targets.
"""
from __future__ import annotations

import contextlib
import re
import weakref
from dataclasses import dataclass, field
from decimal import Decimal

from .models import Targets

F = re.IGNORECASE

# -- quotes ------------------------------------------------------------------------------
QUOTE = re.compile(
    r"`([^`\n]+)`"
    r"|(?<![\w'])'([^'\n]+?)'(?![\w])"
    r'|"([^"\n]+)"'
    r"|“([^”\n]+)”"
    r"|‘([^’\n]+)’"
)


def quoted_spans(text: str) -> list[tuple[int, int, str]]:
    """(start, end, inner text stripped) of each quoted name, in order."""
    out = []
    for m in QUOTE.finditer(text):
        inner = next(g for g in m.groups() if g is not None).strip()
        if inner:
            out.append((m.start(), m.end(), inner))
    return out


def mask_quotes(text: str) -> str:
    """The text with every quoted span blanked (same length, so offsets still hold)."""
    return _blank(text, [(s, e) for s, e, _ in quoted_spans(text)])


def _blank(text: str, spans) -> str:
    chars = list(text)
    for s, e in spans:
        chars[s:e] = " " * (e - s)
    return "".join(chars)


# -- numbers and units -------------------------------------------------------------------
NUM = r"(?<![\w.])(\d+(?:\.\d+)?|\.\d+)"
UNIT = (r"(milliseconds?|millisecs?|msecs?|ms|microseconds?|microsecs?|usecs?|us|µs|μs|"
        r"nanoseconds?|nsecs?|ns|minutes?|mins?|seconds?|secs?|s)\b")
UNIT_MS = {"ms": Decimal(1), "us": Decimal("0.001"), "ns": Decimal("0.000001"), "s": Decimal(1000),
           "min": Decimal(60000)}
AFTER_NUMBER_NOT_ID = re.compile(r"\s*(?:" + UNIT + r"|%)", F)


def _unit_ms(unit: str) -> Decimal:
    u = unit.lower()
    if u.startswith(("µ", "μ", "mic")) or u in ("us", "usec", "usecs"):
        return UNIT_MS["us"]
    if u.startswith("n"):
        return UNIT_MS["ns"]
    if u.startswith("min"):
        return UNIT_MS["min"]
    if u.startswith("m"):
        return UNIT_MS["ms"]
    return UNIT_MS["s"]


def _ms(number: str, unit: str) -> float:
    return float(Decimal(number) * _unit_ms(unit))


# -- GPUs --------------------------------------------------------------------------------
GPU_WORD = r"(?:gpus?|devices?)"
# A number ends where no word character follows; a period ends it only as sentence punctuation
# ("GPU 1." is GPU 1, "GPU 0.5" and "GPU 1.5 s" are not ids; "GPU 1..3" is a range).
END_OF_NUMBER = r"(?!\w|\.\w)"
ID = r"#?\s*(\d+)" + END_OF_NUMBER
GPU_IDS = re.compile(
    r"(?:\b" + GPU_WORD + r"[\s#_\-]*(?:(?:no\.?|number|ids?)\s*)?|\bcuda\s*:\s*)" + ID
    + r"(?P<rest>(?:\s*(?:,\s*and|,\s*or|,|and|or|&|/|\+|vs\.?|versus|-|–|\.\.|to|through)\s*"
    + r"(?:" + GPU_WORD + r"\s*)?#?\s*\d+" + END_OF_NUMBER + r")*)", F)
GPU_REST_ITEM = re.compile(
    r"\s*(,\s*and|,\s*or|,|and|or|&|/|\+|vs\.?|versus|-|–|\.\.|to|through)\s*(" + GPU_WORD
    + r"\s*)?#?\s*(\d+)", F)
MAX_RANGE = 1024

PLURAL_NO_ID = r"(?:gpus|devices)\b(?!\s*[#:]?\s*\d)"
ALL_GPUS = re.compile(
    r"\b(?:all|every|each)\s+(?:of\s+)?(?:the\s+|my\s+|our\s+|these\s+|those\s+)?(?:\d+\s+)?(?:gpus?|devices?)\b"
    r"|\b(?:across|between|among|amongst)\s+(?:all\s+)?(?:the\s+|my\s+|our\s+)?(?:\d+\s+)?" + PLURAL_NO_ID +
    r"|\bper[\s-](?:gpu|device)\b"
    r"|\bboth\s+(?:of\s+the\s+)?" + PLURAL_NO_ID +
    r"|\bcompar(?:e|ing|ison\s+of)\s+(?:all\s+)?(?:the\s+|my\s+)?(?:\d+\s+)?" + PLURAL_NO_ID, F)
PLURAL_GPUS = re.compile(r"\b" + PLURAL_NO_ID, F)
COMPARISON = re.compile(
    r"\b(?:compar\w*|differ\w*|vs\.?|versus|imbalance\w*|unbalanced|balanced?|straggl\w*|skew\w*|uneven\w*|"
    r"outliers?)(?!\w)", F)
WHICH_GPU = re.compile(
    r"\b(?:which|what)\s+(?:one\s+)?(?:of\s+(?:the|my|our|these)\s+)?(?:gpus?|devices?)\b", F)


NUMBER_WORDS = {"zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
                "nine": 9, "ten": 10}
GPU_ORDINALS = {"first": 1, "second": 2, "third": 3, "fourth": 4, "fifth": 5, "sixth": 6, "seventh": 7, "eighth": 8,
                "ninth": 9, "tenth": 10, "last": -1, "final": -1}
_ORD = r"(?:(?:" + "|".join(GPU_ORDINALS) + r")|\d+(?:st|nd|rd|th))"
ORDINAL_WORD = re.compile(r"\b(?:(" + "|".join(GPU_ORDINALS) + r")|(\d+)(?:st|nd|rd|th))\b", F)
# one ordinal or a list of them before the noun: "the second GPU", "the first and last GPU", "1st vs 3rd gpus"
GPU_ORDINAL = re.compile(
    r"\b(" + _ORD + r"(?:\s*(?:,|and|&|or|vs\.?|versus)\s*(?:the\s+|my\s+)?" + _ORD + r")*)\s+"
    r"(?:(?:one\s+)?of\s+(?:the|my|our)\s+)?(?:gpu|device|card)s?\b", F)
GPU_NUMBER_WORD = re.compile(r"\b(?:gpu|device|card)[\s#_\-]*(?:(?:number|no\.?)\s*)?(" + "|".join(NUMBER_WORDS)
                             + r")\b(?!\s+(?:of|or|and\s+(?:only|the)))", F)
ORDINAL_ONE = re.compile(r"\b(?:the\s+)?(" + "|".join(GPU_ORDINALS) + r")\s+one\b", F)
OTHER_GPU = re.compile(r"\b(?:the\s+|that\s+)?other\s+(?:one|gpu|device|card)\b", F)
RANKS = re.compile(r"\branks?\s*#?\s*(\d+)" + END_OF_NUMBER
                   + r"(?:\s*(?:,|and|&|or)\s*(\d+)" + END_OF_NUMBER + r")*", F)
RANK_ID = re.compile(r"\d+")
STREAMS = re.compile(r"\bstreams?\s*#?\s*(\d+)" + END_OF_NUMBER
                     + r"(?:\s*(?:,|and|&|or|vs\.?|versus)\s*(\d+)" + END_OF_NUMBER + r")*", F)


def _gpu_words(text: str, devices: list[int] | None) -> tuple[list[int], list[tuple[int, int]]]:
    """GPUs named by ordinals ("the second GPU") and number words ("GPU two"), and their spans."""
    ids, spans = [], []
    for m in GPU_ORDINAL.finditer(text):
        named = False
        for o in ORDINAL_WORD.finditer(m.group(1)):
            k = GPU_ORDINALS[o.group(1).lower()] if o.group(1) else int(o.group(2))
            if k == -1:
                if not devices:
                    continue
                ids.append(devices[-1])
            elif k >= 1:
                ids.append(devices[k - 1] if devices and k <= len(devices) else
                           (devices[-1] + k - len(devices) if devices else k - 1))
            else:
                continue
            named = True
        if named:
            spans.append(m.span())
    for m in GPU_NUMBER_WORD.finditer(text):
        ids.append(NUMBER_WORDS[m.group(1).lower()])
        spans.append(m.span())
    return ids, spans


def ordinal_one(text: str, devices: list[int]) -> list[int]:
    """ "the last one", "the second one": in a chat about GPUs, that GPU of ``devices`` (else [])."""
    m = ORDINAL_ONE.search(mask_quotes(text))
    if not m or not devices:
        return []
    k = GPU_ORDINALS[m.group(1).lower()]
    return [devices[-1]] if k == -1 else [devices[k - 1]] if k <= len(devices) else []


def _ranks(text: str, rx: re.Pattern = RANKS) -> list[int]:
    out: set[int] = set()
    for m in rx.finditer(text):
        out.update(int(x) for x in RANK_ID.findall(m.group(0)))
    return sorted(out)


def _api(text: str, names) -> tuple[str | None, list[tuple[int, int]]]:
    from .words import API_NAME

    m = API_NAME.search(text)
    if not m:
        return None, []
    found = m.group(1)
    star = text[m.end(1):m.end(1) + 1] == "*"
    if names is not None and not star:
        found = names.api_spelling(found)
    return found + ("*" if star else ""), [(m.start(1), m.end(1) + star)]


def _gpu_ids(text: str) -> tuple[list[int], list[tuple[int, int]]]:
    ids: set[int] = set()
    spans = []
    for m in GPU_IDS.finditer(text):
        first = int(m.group(1))
        if AFTER_NUMBER_NOT_ID.match(text, m.end(1)):
            continue
        ids.add(first)
        end = m.end(1)
        prev = first
        rest_start = m.start("rest")
        pos = rest_start
        for item in GPU_REST_ITEM.finditer(text, rest_start, m.end("rest")):
            if item.start() != pos or AFTER_NUMBER_NOT_ID.match(text, item.end(3)):
                break
            n = int(item.group(3))
            sep = item.group(1).lower()
            if sep in ("-", "–", "..", "to", "through") and not item.group(2):  # "GPU 0 to GPU 3": two GPUs
                lo, hi = min(prev, n), max(prev, n)
                ids.update(range(lo, hi + 1) if hi - lo < MAX_RANGE else (lo, hi))
            else:
                ids.add(n)
            prev, pos, end = n, item.end(), item.end()
        spans.append((m.start(), end))
    return sorted(ids), spans


# -- steps -------------------------------------------------------------------------------
STEP_WORD = r"(?:iteration|iter|step)"
# "how long does one timestep take?": a step of the run, unless an NVTX range has that name
STEP_LIKE = re.compile(r"(?:time[\s-]?)?steps?|iterations?|iters?|epochs?|batch(?:es)?", re.I)
ORDINALS = {"first": 1, "second": 2, "third": 3, "fourth": 4, "fifth": 5, "sixth": 6, "seventh": 7,
            "eighth": 8, "ninth": 9, "tenth": 10}
STEP = re.compile(
    r"(?:\b|(?<=_))" + STEP_WORD + r"\s*(?:#|no\.?|number)?\s*(\d+)" + END_OF_NUMBER +
    r"|(?<![\w.])(\d+)(?:st|nd|rd|th)\s+" + STEP_WORD + r"\b"
    r"|\b(" + "|".join(ORDINALS) + r")\s+" + STEP_WORD + r"\b", F)


def _step(text: str) -> tuple[int | None, list[tuple[int, int]]]:
    for m in STEP.finditer(text):
        if m.group(1) is not None and AFTER_NUMBER_NOT_ID.match(text, m.end(1)):
            continue
        if m.group(3):  # an ordinal counts from one; the steps' index from 0
            return ORDINALS[m.group(3).lower()] - 1, [m.span()]
        if m.group(2):
            return max(0, int(m.group(2)) - 1), [m.span()]
        return int(m.group(1)), [m.span()]
    return None, []


# -- window ------------------------------------------------------------------------------
T = r"(?:t\s*=\s*)?"
PAIR = re.compile(
    r"(?:\b(?:between|from)\s+" + T + NUM + r"\s*(?:" + UNIT + r")?\s*(?:and|to|until|till|-|–)\s*" + T
    + NUM + r"\s*" + UNIT + r")"
    r"|(?:" + NUM + r"\s*(?:" + UNIT + r")?\s*(?:-|–|to)\s*" + NUM + r"\s*" + UNIT + ")", F)
FIRST = re.compile(r"\bfirst\s+" + NUM + r"\s*" + UNIT, F)
LAST = re.compile(r"\b(?:last|final)\s+" + NUM + r"\s*" + UNIT, F)
START = re.compile(
    r"\b(?:after|since|past|beyond|later\s+than|starting\s+(?:at|from)|from)\s+(?:the\s+first\s+)?" + T
    + NUM + r"\s*" + UNIT, F)
END = re.compile(r"\b(?:before|until|till|up\s+to|prior\s+to|earlier\s+than)\s+" + T + NUM + r"\s*" + UNIT, F)


def _window(text: str, span_ms: float | None) -> tuple[float | None, float | None]:
    start = end = None
    m = PAIR.search(text)
    if m:
        g = m.groups()
        a, ua, b, ub = (g[0], g[1], g[2], g[3]) if g[0] is not None else (g[4], g[5], g[6], g[7])
        start, end = _ms(a, ua or ub), _ms(b, ub)
        if start > end:
            start, end = end, start
        return start, end
    if (m := FIRST.search(text)) and not re.search(r"\bafter\s+the\s+$", text[: m.start()], F):
        return 0.0, _ms(m.group(1), m.group(2))  # "after the first 2 s" is a start: below
    if (m := LAST.search(text)) and span_ms is not None:
        return max(0.0, float(Decimal(str(span_ms)) - Decimal(str(_ms(m.group(1), m.group(2)))))), None
    if m := START.search(text):
        start = _ms(m.group(1), m.group(2))
    if m := END.search(text):
        end = _ms(m.group(1), m.group(2))
    return start, end


# -- names -------------------------------------------------------------------------------
IDENT = r"(?P<w>[A-Za-z_][\w:]*\w|[A-Za-z_])"
KERNEL_CTX = re.compile(r"\bkernels?\b", F)
RANGE_CTX = re.compile(r"\b(?:nvtx|ranges?|regions?|annotations?|annotated)\b", F)
NAMED = r"(?P<named>named\s+|called\s+|labell?ed\s+)?"
KERNEL_AFTER = re.compile(r"\bkernel(?P<plural>s)?\s+" + NAMED + IDENT, F)
KERNEL_BEFORE = re.compile(r"(?<![\w:])" + IDENT + r"\s+kernels?\b", F)
RANGE_AFTER = re.compile(r"\b(?:nvtx\s+)?(?:nvtx|range|region)(?P<plural>s)?\s+" + NAMED + IDENT, F)
RANGE_BEFORE = re.compile(r"(?<![\w:])" + IDENT + r"\s+(?:nvtx\s+)?(?:ranges?|regions?)\b", F)
TOKEN = re.compile(r"(?<![\w:])" + IDENT, F)
ONE_X = re.compile(r"\bhow\s+long\s+(?:does|do|did|will|would)\s+(?:one|a|an|each|every|a\s+single|one\s+single)\s+"
                   r"(?:single\s+)?(?P<w>[A-Za-z_][\w:#]*\w)(?:\s+pass)?\s+(?:take|last|run)s?\b", F)
MY = re.compile(r"\bmy\s+$", F)
# words before "kernel" in "my … kernel" that describe a kernel rather than name one
NOT_A_NAME = {"slowest", "fastest", "longest", "shortest", "biggest", "largest", "smallest", "main", "first", "last",
              "top", "own", "custom", "cuda", "gpu", "new", "old", "hot", "heavy", "slow", "fast", "only", "single",
              "best", "worst", "other", "second", "third", "next", "current", "triton", "compute", "costliest",
              # kinds of kernel (the families of measure/labels.py), not names
              "attention", "gemm", "matmul", "conv", "convolution", "reduction", "reduce", "elementwise", "softmax",
              "norm", "layernorm", "nccl", "communication", "copy", "memcpy", "fused", "backward", "forward"}
KERNEL_WORD = re.compile(r"(?:_kernel|kernel_)|[a-z0-9]Kernel", 0)  # a code name with "kernel" inside it
CONTEXT_CHARS = 30  # how near a context word must be to a quoted name

COMMON_WORDS = set("""
a an the this that these those is are was were be been being it its of in on at to for from by with as and or
nor not no any all each every some many much more most less few which what who whom whose why how when where
there here do does did done doing has have had take takes took taking time times run runs ran running launch
launches launched launching overhead overheads duration durations name names named called count counts level
execution executions activity stats statistics summary busy idle gap gaps trace calls call breakdown list
distribution type types size sizes grid grids block blocks stream streams gpu gpus device devices cpu host
memory copies copy usage utilization performance slow slower slowest fast faster fastest long longer longest
short shorter top heaviest biggest largest small smaller tiny occupancy so too very than then also just only
same other others spent spend spends latency latencies queue queued overlap overlaps overlapping cuda nvtx range
ranges region regions kernel kernels step steps iteration iterations iter one two three first last between
after before during within inside outside about like they them their i me my we our you your can could should
would will may might must show tell give find get compare vs versus per over under up down out into onto
across itself look looks seem seems happen happens happened happening wait waits waiting waited use used uses
using code part parts profile profiles total average avg mean median max min most least percent share sum
lot lots why whole entire main another annotation annotations labelled labeled label labels if but yet else
sync synchronize nccl memcpy memset api apis thread threads process processes rank ranks window seconds ms us
ns sec secs second s ok okay fine doing done does work works working wrong problem problem issue issues
dominate dominates consume consumes eat eats hog hogs cost costs fill fills finish finishes start starts end
ends begin begins stall stalls stalled block blocked blocks hurt hurts matter matters account accounts execute
executes executed ran ends taken need needs needed make makes made cause causes caused get gets got
""".split())


@dataclass
class _Names:
    kernels: list[str] = field(default_factory=list)       # distinct short names
    kernel_full: list[str] = field(default_factory=list)   # distinct demangled names
    labels: list[str] = field(default_factory=list)        # NVTX label groups
    span_ms: float | None = None                           # window length
    apis: list[str] = field(default_factory=list)          # CUDA API function names, suffix stripped
    devices: list[int] = field(default_factory=list)       # GPU ids with activity, in order

    def __post_init__(self) -> None:
        self._k = [k.lower() for k in self.kernels]
        self._kf = [k.lower() for k in self.kernel_full]
        self._l = [x.lower() for x in self.labels]
        self._lbase = {x.removesuffix(" <n>") for x in self._l}
        # the namespaces of labels ("FSDP" of `FSDP::pre_forward (…)`): a word naming one names those ranges
        self._lns = {x.split("::", 1)[0].strip() for x in self._l if "::" in x}
        # every name between "::" of a label (`NVRTC` of `executor_utils::NVRTC`, `Nvrtc` of `…::Nvrtc::LoadPTX`):
        # a word that is one names those ranges
        self._lseg = {seg.strip() for x in self._l if "::" in x for seg in x.split("::") if seg.strip()}

    def api_spelling(self, text: str) -> str:
        """``text`` as the profile spells that API function (case-insensitive, version suffix ignored)."""
        t = re.sub(r"_v\d+$", "", text.lower())
        return next((a for a in self.apis if a.lower() == t), text)

    def kernel_has(self, text: str, exact: bool = False) -> bool:
        t = text.lower()
        if exact:
            return t in self._k
        return any(t in k for k in self._k) or any(t in k for k in self._kf)

    def kernel_close(self, text: str) -> str | None:
        """The kernel short name ``text`` misspells (one or two typos: rapidfuzz ratio >= FUZZY_NAME_SCORE),
        for words of at least FUZZY_NAME_MIN letters; None when none is that close."""
        return _closest(text, self.kernels)

    def label_close(self, text: str) -> str | None:
        """The NVTX label group ``text`` misspells, as kernel_close."""
        return _closest(text, [x.removesuffix(" <n>") for x in self.labels])

    def label_form(self, text: str, exact: bool = False) -> str | None:
        """``text`` if a label group contains it, its group form if that matches, else None."""
        t = text.lower()
        if exact:
            return text if t in self._l or t in self._lbase or t in self._lns or t in self._lseg else None
        if any(t in x for x in self._l):
            return text
        group = _group_form(text)
        if group.lower() != t and any(group.lower() in x for x in self._l):
            return group
        return None


_CACHE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
FUZZY_NAME_SCORE = 85  # rapidfuzz ratio (0-100) a misspelled kernel or range name needs to be read as the name
FUZZY_NAME_MIN = 5     # shorter words are never matched loosely (too many near neighbours)


def _closest(text: str, names: list[str]) -> str | None:
    """The name, or the word of a name (split at _ : < > and spaces), that ``text`` misspells, or None."""
    if len(text) < FUZZY_NAME_MIN or not names:
        return None
    from rapidfuzz import fuzz, process, utils

    words = {w for n in names for w in re.split(r"[_:<>\s]+", n) if len(w) >= FUZZY_NAME_MIN}
    found = process.extractOne(text, [*names, *sorted(words - set(names))], scorer=fuzz.ratio,
                               processor=utils.default_process, score_cutoff=FUZZY_NAME_SCORE)
    return found[0] if found else None


def _group_form(label: str) -> str:
    from dashcam.measure.names import nvtx_group_label

    return nvtx_group_label(label)


def profile_names(profile) -> _Names:
    """Kernel names, NVTX label groups and window length of ``profile``, read once and cached."""
    try:
        return _CACHE[profile]
    except (KeyError, TypeError):
        pass

    def col(sql: str) -> list[str]:
        try:
            return [r[0] for r in profile.rows(sql) if r[0] is not None]
        except Exception:  # a profile without the view or table: no names of that kind
            return []

    span = None
    with contextlib.suppress(Exception):  # no GPU activity, or not a Profile: no window length
        full = profile.full_window
        span = None if full is None else (full[1] - full[0]) / 1e6
    devices: list[int] = []
    with contextlib.suppress(Exception):  # not a Profile
        devices = sorted(int(d) for d in profile.devices)
    names = _Names(
        apis=col("SELECT DISTINCT name FROM api_names"),
        devices=devices,
        kernels=col("SELECT DISTINCT s.value FROM (SELECT DISTINCT short_name_id FROM kernel_times) k "
                    "JOIN strings s ON s.id = k.short_name_id"),
        kernel_full=col("SELECT DISTINCT s.value FROM (SELECT DISTINCT name_id FROM kernel_times) k "
                        "JOIN strings s ON s.id = k.name_id"),
        labels=col("SELECT DISTINCT label FROM nvtx_groups"),
        span_ms=span,
    )
    with contextlib.suppress(TypeError):  # not weak-referenceable: no cache
        _CACHE[profile] = names
    return names


def _near(pattern: re.Pattern, text: str, start: int, end: int) -> int | None:
    """Distance in characters from [start, end) to the nearest match of ``pattern`` close by."""
    best = None
    lo, hi = max(0, start - CONTEXT_CHARS), min(len(text), end + CONTEXT_CHARS)
    for m in pattern.finditer(text, lo, hi):
        d = start - m.end() if m.end() <= start else m.start() - end
        d = max(d, 0)
        best = d if best is None or d < best else best
    return best


def _identifier_like(word: str) -> bool:
    """Looks like a code name: has "_", "::", a digit or an inner capital (camelCase)."""
    return "_" in word or "::" in word or any(c.isdigit() for c in word) or bool(re.search(r"[a-z][A-Z]", word))


def _word_ok(word: str) -> bool:
    return word.lower() not in COMMON_WORDS


# The program's framework or language named as such ("my CuPy program", "the PyTorch side") is no kernel name, even
# where the kernels carry it (`cupy_subtract`): a bare word of these filters no kernels. "CuPy kernels" still does.
FRAMEWORK_NAMES = frozenset("""pytorch torch jax xla tensorflow cupy numba tensorrt julia openacc openmp stdpar triton
cuda python nvfuser libtorch""".split())


def _names(question: str, masked: str, names: _Names | None) -> tuple[str | None, str | None]:
    kernel = nvtx = None
    ctx_text = mask_quotes(question)
    for s, e, q in quoted_spans(question):
        k_dist = _near(KERNEL_CTX, ctx_text, s, e)
        r_dist = _near(RANGE_CTX, ctx_text, s, e)
        says_range = r_dist is not None and (k_dist is None or r_dist < k_dist)
        says_kernel = k_dist is not None and not says_range
        kind, value = None, q
        if names is not None:
            label = names.label_form(q)
            if says_range and label:
                kind, value = "nvtx", label
            elif names.kernel_has(q):
                kind = "kernel"
            elif label:
                kind, value = "nvtx", label
        if kind is None:
            kind = "nvtx" if says_range else "kernel" if says_kernel else None
        if kind == "kernel" and kernel is None:
            kernel = value
        elif kind == "nvtx" and nvtx is None:
            nvtx = value

    def candidate(m: re.Match, after: bool) -> tuple[str | None, bool]:
        """(the word, whether the phrasing alone makes it a name); None when it cannot be one or, without
        the profile's names to check against, when the phrasing does not settle it."""
        w = m.group("w")
        if not _word_ok(w):
            return None, False
        sure = after and (bool(m.group("named")) or _identifier_like(w))
        if names is None:
            return (w if sure or (after and not m.group("plural")) else None), True
        return w, sure

    def kernel_value(m: re.Match, after: bool) -> str | None:
        w, sure = candidate(m, after)
        if w is None or names is None:
            return w
        if names.kernel_has(w, exact=len(w) < 3):
            return w
        # "my saxpy kernel": the user names their kernel, in this profile or not (the answer says which ran)
        mine = not after and MY.search(masked[:m.start()]) is not None and w.lower() not in NOT_A_NAME
        return names.kernel_close(w) or (w if sure or mine else None)  # "my histgram kernel": the histogram

    def range_value(m: re.Match, after: bool) -> str | None:
        w, sure = candidate(m, after)
        if w is None or names is None:
            return w
        return names.label_form(w, exact=len(w) < 3) or names.label_close(w) or (w if sure else None)

    if kernel is None:
        kernel = _first(masked, KERNEL_AFTER, KERNEL_BEFORE if names is not None else None, kernel_value)
    if nvtx is None:
        nvtx = _first(masked, RANGE_AFTER, RANGE_BEFORE if names is not None else None, range_value)
    if names is not None and (kernel is None or nvtx is None):
        scanned: list[str] = []  # range names found as bare words
        for m in TOKEN.finditer(masked):
            w = m.group("w")
            if len(w) < 3 or not _word_ok(w):
                continue
            loose = _identifier_like(w)
            if kernel is None and w.lower() not in FRAMEWORK_NAMES and names.kernel_has(w, exact=not loose):
                kernel = w
                continue
            if nvtx is None and (v := names.label_form(w, exact=not loose)) is not None:
                scanned.append(v)
        # one range named: filter on it; several ("forward vs backward"): leave the filter off so the
        # answer ranks them all side by side
        if len(set(scanned)) == 1:
            nvtx = scanned[0]
        if kernel is None:  # a code name that says it is a kernel ("broadcast_kernel"): a kernel, matched or not
            kernel = next((m.group("w") for m in TOKEN.finditer(masked) if KERNEL_WORD.search(m.group("w"))), None)
            kernel = kernel and (names.kernel_close(kernel) or kernel)
        one = ONE_X.search(masked)
        if (kernel is None and nvtx is None and one and _word_ok(one.group("w")) and len(one.group("w")) >= 3
                and not (STEP_LIKE.fullmatch(one.group("w")) and names.label_form(one.group("w")) is None)):
            # "how long does one inference take?": the thing one of which is timed is a range (or a kernel), named
            # in the profile or not (the answer then says no range has that name)
            w = one.group("w")
            if names.kernel_has(w, exact=not _identifier_like(w)):
                kernel = w
            else:
                nvtx = names.label_form(w) or names.label_close(w) or w
    return kernel, nvtx


def _first(text: str, after: re.Pattern, before: re.Pattern | None, value) -> str | None:
    """The first (leftmost) word form whose ``value`` is not None."""
    found = [(m.start(), True, m) for m in after.finditer(text)]
    if before is not None:
        found += [(m.start(), False, m) for m in before.finditer(text)]
    for _, is_after, m in sorted(found, key=lambda x: x[0]):
        if (v := value(m, is_after)) is not None:
            return v
    return None


# -- OS runtime functions ----------------------------------------------------------------
# A plain word is an OS runtime function's name only when the phrasing says it is code: "the read calls",
# "`poll`", "fopen()"; a code-shaped word (pwrite64, sem_wait) needs no such word.
CALL_CTX = re.compile(r"\s*(?:\(\)|\(|\s+(?:calls?|function|syscalls?|system\s+calls?)\b)", F)
IN_CTX = re.compile(r"\b(?:time|spent|spends?|stuck|blocked|blocks|waiting|waits?)\s+(?:in|on|inside)\s+$", F)


def _osrt(question: str, masked: str, profile) -> str | None:
    """The OS runtime function of ``profile`` the question names (the profile's spelling), else None. The
    profile's OS runtime names are read only when a word could be one."""
    found = [(q, True) for _, _, q in quoted_spans(question)]
    for m in TOKEN.finditer(masked):
        w = m.group("w")
        if len(w) >= 3 and _word_ok(w):
            code = _identifier_like(w) or bool(CALL_CTX.match(masked, m.end()))
            found.append((w, code or bool(IN_CTX.search(masked, max(0, m.start() - 20), m.start()))))
    wanted = [w for w, code in found if code]
    if not wanted:
        return None
    try:
        from dashcam.profile.cpu_source import source

        functions = source(profile).osrt_functions()
    except (AttributeError, TypeError):  # not a Profile: no OS runtime names
        return None
    spelled = {n.lower(): n for n in functions}
    return next((spelled[w.lower()] for w in wanted if w.lower() in spelled), None)


# -- entry point -------------------------------------------------------------------------
def parse_targets(question: str, profile=None) -> Targets:
    """The GPUs, window, step, kernel and NVTX range a question names (rules: module docstring)."""
    from .han import to_english  # a Chinese question: read as its English words (chinese.py)

    question = to_english(question)
    names = profile_names(profile) if profile is not None else None
    text = mask_quotes(question)
    api, api_spans = _api(text, names)
    worded, word_spans = _gpu_words(text, names.devices if names is not None else None)
    other_gpu = bool(OTHER_GPU.search(text))
    ranks = _ranks(text)
    streams = _ranks(text, STREAMS)
    text = _blank(text, word_spans + api_spans + [m.span() for m in STREAMS.finditer(text)])
    gpus, gpu_spans = _gpu_ids(text)
    gpus = sorted(set(gpus) | set(worded))
    all_gpus = bool(ALL_GPUS.search(text)) or bool(
        not gpus and PLURAL_GPUS.search(text) and COMPARISON.search(text))
    which_gpu = bool(WHICH_GPU.search(text))
    text = _blank(text, gpu_spans)
    step, step_spans = _step(text)
    text = _blank(text, step_spans)
    start_ms, end_ms = _window(text, names.span_ms if names else None)
    kernel, nvtx = _names(question, text, names)
    osrt = _osrt(question, text, profile) if profile is not None and api is None else None
    if osrt is not None and kernel is not None and kernel.lower() == osrt.lower() and not (
            names is not None and names.kernel_has(kernel, exact=True)):
        kernel = None  # "pwrite64" is no kernel of this profile: the OS runtime function
    return Targets(gpus=gpus, all_gpus=all_gpus, which_gpu=which_gpu, start_ms=start_ms, end_ms=end_ms,
                   nvtx=nvtx, kernel=kernel, step=step, api=api, osrt=osrt, other_gpu=other_gpu, ranks=ranks,
                   streams=streams)


SCOPE = ("gpus", "all_gpus", "which_gpu", "other_gpu", "start_ms", "end_ms", "step", "ranks")
SUBJECT = ("kernel", "nvtx", "api", "osrt")


def part_targets(line: Targets, parts: list[str], profile=None) -> list[Targets]:
    """The targets of each part of a line that asks several things (module docstring, last paragraph)."""
    own = [parse_targets(p, profile) for p in parts]
    none = Targets()
    from_context = set(line.gpus) - {g for t in own for g in t.gpus} or any(
        getattr(line, f) not in (getattr(none, f), *(getattr(t, f) for t in own)) for f in SCOPE if f != "gpus")
    if from_context:  # a scope no part names: the conversation gave it, and it holds for the whole line
        return [line for _ in parts]
    scope = {f: getattr(none, f) for f in SCOPE}
    out = []
    for t in own:
        if any(getattr(t, f) != getattr(none, f) for f in SCOPE):
            scope = {f: getattr(t, f) for f in SCOPE}
        subject = {f: getattr(line, f) if getattr(t, f) is None else getattr(t, f) for f in SUBJECT}
        out.append(line.model_copy(update={**scope, **subject}))
    return out
