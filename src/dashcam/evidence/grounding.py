"""Grounding: every number in an answer must come from a tool result.

``check(text, evidence, extra_values)`` returns ``(grounded, ungrounded)``; ``ungrounded`` lists
the offending numbers as written (``"73 %"``, ``"GPU 5"``), de-duplicated, in order.
``numbers_in(text)`` is the extraction alone: ``(as written, value, unit)`` per checked number.

Candidates (built once per check, or once with ``Candidates.build`` and reused)
    Every int/float leaf of every evidence ``result`` at any depth (dict values, list items;
    booleans, dict keys and the call's ``args`` are not), the length of every list, numeric
    strings, plus ``extra_values`` (numbers the caller vouches for, e.g. the GPU named in the
    question). Each leaf is also filed by its field name:
    time   ``*_ns``, ``ns`` and the values of ``causes``/``cause``/``cuda_api_calls``/``cpu_work_nvtx``/
           ``cpu_work_kinds``/``jit_ranges``/``states``/``cpu_work_states``/``cpu_work_os_calls``/``host_states``/
           ``host_os_calls`` (ns);
           ``*_ms``; ``*_us``; ``*_s`` (not ``*per_s``)
    bytes  ``bytes``, ``*_bytes``
    %      ``*_pct``, ``pct``, ``pct_*`` and the values of ``*_pct`` dicts (``cause_pct``);
           also any float in 0..1 of an otherwise plain field, times 100
    GB/s   ``gbps``, ``*_gbps``
    ids    GPU (``device_id``, ``gpu``, ``busy_devices``, ``gpu_busy_device``...), step
           (``index``, ``step``), stream (``stream_id``), process (``pid``), thread (``tid``),
           rank (``rank``).
    An sql result's ``rows`` are filed by their ``columns`` names. Numbers in tool-written
    text fields (``notes``, ``verdict_reason``, ``summary``, ``bucket``, ``gpu_name``...) are
    candidates in the unit written there.

Acceptance of a number x written in the answer
    precision  x matches value v when v, converted to x's unit, rounds to x at the decimals
               shown: "12.35 ms" accepts 12.347 ms, "12.3 ms" accepts 12.349 ms, "12.4 ms" does
               not; "12 ms" accepts 12.4 ms. An integer ending in 0 ("1,230,000", "1200") and a
               count with a k/K/M/G, thousand/million/billion suffix ("1.6 M") also accept
               ±0.5 % (rounding to 3 significant figures). No other relative slack.
    units      ns, us/µs/μs/usec, ms/msec, s/sec/seconds, min -> any time field;
               % / percent / pct -> % fields and 0..1 fractions x 100;
               B, KB/MB/GB/TB (1e3 or 1024 base: "GB" is often meant as GiB), KiB/MiB/GiB/TiB
               (1024 only) -> bytes fields; GB/s, MB/s, TB/s, GiB/s... -> gbps fields;
               x / × -> any leaf (a ratio such as ratio_to_median);
               no unit -> any leaf as stored, or a time field in ms.
               In a range ("2–3.5 s", "between 2 and 3 ms", "10-100us") the first number takes
               the second's unit (its unitless reading is accepted too).
    counts     a unitless number said to be a count ("253 kernels", "12 cudaMemcpy calls", "the kernel
               count is 253") needs a count: a leaf with no unit in its field name, a list's length;
               a time, a size or a percentage does not ground it.
    sign       "-450 ns" needs a negative value; "450 ns" accepts +450 or -450 (a magnitude).
    ordinals   an integer after GPU/GPUs/device/devices, step/iteration/epoch, stream, process/pid,
               thread/tid, rank ("GPU 5", "gpu5", "GPU #5", "GPUs 0, 1 and 3", "GPUs 0-3") must
               equal an id of that kind in the evidence (steps: a 0-based index or index + 1) or an
               extra value; anything else, e.g. a kernel count of 5, does not ground "GPU 5".
               Lists continue after plural words or with a range ("GPU 0-3"); "GPU 0, 240 kernels"
               does not make 240 an id.
    extra      extra_values match any number at the precision shown, in any unit, and any ordinal.

Strictness: a number the writer computed (idle % as 100 - busy % when only busy % is in a
result, a sum, a difference, a ratio of two results) is flagged: it is in no tool result. Pass it
in ``extra_values`` if the caller computed it itself, or add it to a tool.

Not checked (part of identifiers, masked before extraction)
    text in `backticks` or ``` fences ```, "double", “curly” or 'single' quotes; any string of
    the evidence written verbatim (kernel names, NVTX labels, "NVIDIA H100 80GB HBM3") when it has
    a letter and a digit; digits glued to letters, ``_``, ``.``, ``:``, ``/``, ``\\``, ``@`` or
    a hyphen-word (sm_90, H100, A100, 128x64, cudaLaunchKernel_v7000, cuda:0, x86_64, fp16,
    3-way, 2nd, 12:30, 2024.5.1); versions after version/nsys/CUDA/driver/schema/... ("CUDA 12.4");
    dates (2024-05-01, 5/1/2024); URLs; list markers ("1." / "2)" at a line start).
    Numbers spelled in words ("three") and leading-dot decimals (".5") are not read.
"""
from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

# --- units -----------------------------------------------------------------------------------

# canonical unit -> (kind, factors to the base unit: ns, B, %, GB/s, 1)
CANON: dict[str, tuple[str, tuple[float, ...]]] = {
    "ns": ("time", (1.0,)), "us": ("time", (1e3,)), "ms": ("time", (1e6,)), "s": ("time", (1e9,)),
    "min": ("time", (6e10,)), "%": ("pct", (1.0,)), "x": ("ratio", (1.0,)), "B": ("bytes", (1.0,)),
}
_WRITTEN: dict[str, str] = {
    "ns": "ns", "nsec": "ns", "nanosecond": "ns", "nanoseconds": "ns",
    "us": "us", "µs": "us", "μs": "us", "usec": "us", "microsecond": "us", "microseconds": "us",
    "ms": "ms", "msec": "ms", "millisecond": "ms", "milliseconds": "ms",
    "s": "s", "sec": "s", "secs": "s", "second": "s", "seconds": "s",
    "min": "min", "mins": "min", "minute": "min", "minutes": "min",
    "%": "%", "percent": "%", "per cent": "%", "pct": "%",
    "x": "x", "×": "x",
    "B": "B", "byte": "B", "bytes": "B",
}
for _i, _p in enumerate("KMGT", start=1):
    CANON[f"{_p}B"] = ("bytes", (1e3 ** _i, 1024.0 ** _i))
    CANON[f"{_p}iB"] = ("bytes", (1024.0 ** _i,))
    CANON[f"{_p}B/s"] = ("bw", (1e3 ** _i / 1e9, 1024.0 ** _i / 1e9))
    CANON[f"{_p}iB/s"] = ("bw", (1024.0 ** _i / 1e9,))
    for _u in (f"{_p}B", f"{_p}iB", f"{_p}B/s", f"{_p}iB/s"):
        _WRITTEN[_u] = _u
_WRITTEN.update({"kB": "KB", "kB/s": "KB/s"})
# count suffixes: a multiplier, the number stays unitless
_MULT = {"k": 1e3, "K": 1e3, "thousand": 1e3, "M": 1e6, "million": 1e6, "G": 1e9, "billion": 1e9, "bn": 1e9}

_UNIT_RE = re.compile(
    r"[ \t\u00a0\u2009\u202f]?("
    + "|".join(re.escape(u) for u in sorted([*_WRITTEN, *_MULT], key=len, reverse=True))
    + r")(?![A-Za-z0-9_µμ])")
_NUM_RE = re.compile(r"(\d{1,3}(?:,\d{3})+(?!\d)|\d+)(?:\.(\d+))?(?:[eE]([-+]?\d+)(?!\w))?")

# --- ordinals --------------------------------------------------------------------------------

_ORDINAL = {
    "gpu": ("gpu", "gpus", "device", "devices", "dev"),
    "step": ("step", "steps", "iteration", "iterations", "iter", "iters", "epoch", "epochs"),
    "stream": ("stream", "streams"),
    "process": ("process", "processes", "pid", "pids"),
    "thread": ("thread", "threads", "tid", "tids"),
    "rank": ("rank", "ranks"),
}
_WORD_FAMILY = {w: fam for fam, words in _ORDINAL.items() for w in words}
_PLURAL = {w for w in _WORD_FAMILY if w.endswith("s") and w != "process"}
# evidence field (lower case, no underscores) -> id family
_ID_FIELDS = {
    "gpu": {"deviceid", "device", "devices", "deviceids", "gpu", "gpus", "gpuid", "gpuids",
            "gpubusydevice", "busydevices"},
    "step": {"index", "step", "steps", "stepindex", "iteration", "iterationindex"},
    "stream": {"streamid", "stream", "streams", "streamids"},
    "process": {"pid", "pids", "processid"},
    "thread": {"tid", "tids", "threadid"},
    "rank": {"rank", "ranks", "globalrank"},
}
_FIELD_FAMILY = {f: fam for fam, fields in _ID_FIELDS.items() for f in fields}
_LOOKBACK_RE = re.compile(r"(?<![\w])([A-Za-z]+)[ \t\u00a0*#]*$")
_GLUED_RE = re.compile(r"(?<![\w])([A-Za-z]+)$")
_LIST_SEP_RE = re.compile(r"^\s*(,|,?\s*and|,?\s*or|&|to|through|thru|-|–|—)\s*$", re.IGNORECASE)
_RANGE_SEP = {"-", "–", "—", "to", "through", "thru"}
_UNIT_RANGE_RE = re.compile(r"^\s*(-|–|—|to|and|or)\s*$", re.IGNORECASE)
_COUNT_NOUNS = (r"(?:kernels?|launch(?:es)?|calls?|copies|memcpys?|memsets?|transfers|events|ranges|"
                r"instances|invocations|times|occurrences|syncs|synchronizations|allocations)")
_COUNT_AFTER_RE = re.compile(r"[ \t\u00a0]+(?:[A-Za-z_][\w-]*[ \t\u00a0]+){0,2}?" + _COUNT_NOUNS + r"\b",
                             re.IGNORECASE)
_COUNT_BEFORE_RE = re.compile(r"(?:\bcount|\bnumber of [A-Za-z_ -]{1,40}?)[ \t]*(?:is|was|of|:|=)?[ \t]*$",
                              re.IGNORECASE)

# --- masks (replaced by spaces before extraction, so positions stay) ---------------------------

_MASKS = [
    re.compile(r"```.*?```", re.DOTALL),
    re.compile(r"`[^`\n]*`"),
    re.compile(r'"[^"\n]{0,300}"'),
    re.compile(r"“[^”\n]{0,300}”"),
    re.compile(r"‘[^’\n]{0,300}’"),
    re.compile(r"(?<!\w)'[^'\n]{1,300}'(?!\w)"),
    re.compile(r"\b(?:https?|file)://\S+"),
    re.compile(r"\b\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2})?)?\b"),
    re.compile(r"\b\d{1,2}/\d{1,2}/\d{2,4}\b"),
    re.compile(r"(?i)\b(?:version|ver\.|release|nsys|nsight(?:\s+systems)?|cuda(?:\s+toolkit)?|driver|schema|"
               r"python|pytorch|torch|cudnn|nccl|capability|cc)\s*v?\d+(?:\.\d+)+(?![\d.])"
               r"(?![ \t]?(?:%|[mµμun]?s\b|[KMGT]i?B\b))"),
    re.compile(r"(?i)\bversion\s+v?\d+\b"),
]
_LIST_MARKER_RE = re.compile(r"(?m)^([ \t]*(?:#+|>|[-*+])?[ \t]*)(\d{1,3}[.)])(?=[ \t])")
_TEXT_FIELDS = {"notes", "note", "verdict_reason", "reason", "summary", "bucket", "gpu_name", "message",
                "description", "verdict"}
_NUMERIC_STR_RE = re.compile(r"[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")
_NS_DICTS = {"causes", "cause", "cuda_api_calls", "cpu_work_nvtx", "cpu_work_kinds", "jit_ranges", "states",
             "cpu_work_states", "cpu_work_os_calls", "host_states", "host_os_calls"}


@dataclass(frozen=True)
class Num:
    """One number read from text: as written, its value (count suffix applied), unit, tolerance."""

    text: str
    value: float
    unit: str | None  # canonical unit, "#<family>" for an ordinal, None for a plain number
    tol: float  # half a unit of the last digit written (or 0.5 % for sig-fig rounding)
    start: int
    end: int
    inherited: bool = False  # unit taken from the other end of a range
    plural: bool = False  # ordinal after a plural word ("GPUs"): a list may follow
    count: bool = False  # said to be a count ("253 kernels"): only a count grounds it

    def as_tuple(self) -> tuple[str, float, str | None]:
        return (self.text, self.value, self.unit)


def _mask(text: str, names: Iterable[str] = ()) -> str:
    blank = lambda m: " " * len(m.group(0))
    out = text
    for rx in _MASKS:
        out = rx.sub(blank, out)
    out = _LIST_MARKER_RE.sub(lambda m: m.group(1) + " " * len(m.group(2)), out)
    for name in names:  # longest first: a name inside a longer one is already gone
        if name not in out:
            continue
        i, n = out.find(name), len(name)
        while i >= 0:
            before = out[i - 1] if i else " "
            after = out[i + n] if i + n < len(out) else " "
            if not (before.isalnum() or before == "_") and not (after.isalnum() or after == "_"):
                out = out[:i] + " " * n + out[i + n:]
            i = out.find(name, i + 1)
    return out


def _is_word(c: str) -> bool:
    return c.isalnum() or c == "_"


def _extract(text: str, names: Iterable[str] = ()) -> list[Num]:
    m_text = _mask(text, names)
    n_len = len(m_text)
    nums: list[Num] = []
    prev_end = -2
    for m in _NUM_RE.finditer(m_text):
        s, e = m.start(), m.end()
        start, negative, p = s, False, s - 1
        # a sign: '-' not glued to a word and not the separator right after the previous number
        glued = p > 0 and (_is_word(m_text[p - 1]) or m_text[p - 1] in ".)]")
        if p >= 0 and m_text[p] in "-−+" and p != prev_end and not glued:
            negative, start, p = m_text[p] != "+", p, p - 1
        family, word = None, None
        if p >= 0:
            c = m_text[p]
            if c.isalpha():
                g = _GLUED_RE.search(m_text, 0, p + 1)
                if not (g and g.group(1).lower() in _WORD_FAMILY):
                    continue  # H100, sm_90's tail, v7000
                word, family = g.group(1), _WORD_FAMILY[g.group(1).lower()]
            elif c in "_.:\\@$^&" or c.isdigit() or c == "/" and p != prev_end:
                continue
            elif c in "-–—" and p != prev_end and p > 0 and _is_word(m_text[p - 1]):
                continue  # x86-64, sm-90
            elif c == "#" and p > 0 and _is_word(m_text[p - 1]):
                continue
        frac, exp = m.group(2) or "", m.group(3)
        unit, mult, inherited = None, 1.0, False
        u = _UNIT_RE.match(m_text, e)
        if u:
            w = u.group(1)
            if w in _MULT:
                mult = _MULT[w]
            else:
                unit = _WRITTEN[w]
            end = u.end()
        else:
            end = e
            c = m_text[e] if e < n_len else " "
            nxt = m_text[e + 1] if e + 1 < n_len else " "
            if _is_word(c) or c in "µμ" or (c in ".:" and nxt.isalnum()) or (c in "-–/" and nxt.isalpha()) or c == "@":
                continue  # 128x64, 3D, 2nd, 12:30, 2024.5.1, 3-way
        if family and (unit or frac or exp or mult != 1 or _is_word(m_text[end] if end < n_len else " ")):
            continue  # "gpu5ms": not an ordinal, an identifier
        digits = m.group(1).replace(",", "")
        value = float(digits + ("." + frac if frac else "")) * (10.0 ** int(exp) if exp else 1.0) * mult
        if negative:
            value = -value
        tol = 0.5 * 10.0 ** (-len(frac)) * (10.0 ** int(exp) if exp else 1.0) * mult
        if mult != 1 or (not frac and not exp and len(digits) > 1 and digits.endswith("0")):
            tol = max(tol, 0.005 * abs(value))
        written = text[start:end]
        plural = False
        if family is None and unit is None and mult == 1 and not frac and not exp and not negative:
            lb = _LOOKBACK_RE.search(m_text, max(0, start - 40), start)
            if lb and lb.group(1).lower() in _WORD_FAMILY:
                word, family = lb.group(1), _WORD_FAMILY[lb.group(1).lower()]
            elif nums and nums[-1].unit and nums[-1].unit.startswith("#"):
                sep = _LIST_SEP_RE.match(m_text[nums[-1].end:start])
                if sep and (nums[-1].plural or sep.group(1).lower() in _RANGE_SEP):
                    family, plural = nums[-1].unit[1:], nums[-1].plural
                    word = nums[-1].text.rsplit(" ", 1)[0] if " " in nums[-1].text else family.upper()
        if family:
            plural = plural or (word or "").lower() in _PLURAL
            glued = text[start - len(word):start] == word if word else False
            written = (word + text[start:end]) if glued else f"{word} {text[start:end]}"
            unit = "#" + family
        count = unit is None and not frac and not exp and bool(
            _COUNT_AFTER_RE.match(m_text, end) or _COUNT_BEFORE_RE.search(m_text, max(0, start - 60), start))
        nums.append(Num(written, value, unit, tol, start, end, inherited, plural, count))
        prev_end = end
    # a range gives its unit to its first number: "2–3 ms", "between 2 and 3.5 s", "10-100us"
    for i in range(len(nums) - 1):
        a, b = nums[i], nums[i + 1]
        if a.unit is None and b.unit and not b.unit.startswith("#") and _UNIT_RANGE_RE.match(m_text[a.end:b.start]):
            nums[i] = Num(a.text, a.value, b.unit, a.tol, a.start, a.end, True, False, False)
    return nums


def numbers_in(text: str) -> list[tuple[str, float, str | None]]:
    """The numbers ``check`` verifies in ``text``: (as written, value, canonical unit or None).

    Units are canonical (``ms``, ``us``, ``%``, ``GB``, ``GiB``, ``GB/s``, ``x``...); an ordinal has
    unit ``#gpu``/``#step``/``#stream``/``#process``/``#thread``/``#rank`` and reads "GPU 5";
    a count suffix is applied to the value ("1.6 M" -> 1600000.0, unit None).
    """
    return [n.as_tuple() for n in _extract(text)]


# --- candidates ------------------------------------------------------------------------------

_KIND_CACHE: dict[str, str | None] = {}


def _kind(key: str) -> str | None:
    """The unit family a field name implies: ns/ms/us/s, bytes, pct, gbps, ratio, #<id family>."""
    k = _KIND_CACHE.get(key, "?")
    if k != "?":
        return k
    low = key.lower()
    if low in _NS_DICTS or low.endswith("_ns") or low == "ns":
        k = "ns"
    elif low.endswith("_ms") or low == "ms":
        k = "ms"
    elif low.endswith("_us") or low == "us":
        k = "us"
    elif (low.endswith("_s") and not low.endswith("per_s")) or low in ("s", "seconds"):
        k = "s"
    elif low == "bytes" or low.endswith("_bytes"):
        k = "bytes"
    elif low.endswith(("_pct", "percent")) or low == "pct" or low.startswith("pct_"):
        k = "pct"
    elif low == "gbps" or low.endswith("_gbps"):
        k = "gbps"
    elif "ratio" in low:
        k = "ratio"
    elif low.replace("_", "") in _FIELD_FAMILY:
        k = "#" + _FIELD_FAMILY[low.replace("_", "")]
    else:
        k = None
    if len(_KIND_CACHE) < 10_000:
        _KIND_CACHE[key] = k
    return k


_TIME_FACTOR = {"ns": 1.0, "ms": 1e6, "us": 1e3, "s": 1e9}


class Candidates:
    """The numbers of some evidence, filed by unit, sorted for bisection."""

    def __init__(self) -> None:
        self.raw: list[float] = []
        self.ns: list[float] = []
        self.bytes: list[float] = []
        self.pct: list[float] = []
        self.gbps: list[float] = []
        self.counts: list[float] = []  # leaves with no unit in their field name, list lengths
        self.extra: list[float] = []
        self.ids: dict[str, list[float]] = {}
        self.names: set[str] = set()  # evidence strings with a letter and a digit, masked in answers

    @classmethod
    def build(cls, evidence: Iterable[Any], extra_values: Iterable[float] = ()) -> Candidates:
        c = cls()
        for ev in evidence:
            c._walk(_result_of(ev))
        c.extra = [float(v) for v in extra_values]
        c._finish()
        return c

    def with_extra(self, extra_values: Iterable[float]) -> Candidates:
        """A copy with more extra values (the pools are shared, not copied)."""
        c = Candidates()
        c.__dict__.update(self.__dict__)
        c.extra = sorted(set(self.extra) | {float(v) for v in extra_values})
        return c

    # filing ----------------------------------------------------------------------------------
    def _add(self, v: float, kind: str | None) -> None:
        self.raw.append(v)
        if kind is None:
            self.counts.append(v)
        if kind is None or kind == "ratio":
            if type(v) is float and 0.0 <= v <= 1.0:
                self.pct.append(v * 100.0)
        elif kind in _TIME_FACTOR:
            self.ns.append(v * _TIME_FACTOR[kind])
        elif kind == "pct":
            self.pct.append(v)
        elif kind == "bytes":
            self.bytes.append(v)
        elif kind == "gbps":
            self.gbps.append(v)
        elif kind[0] == "#":
            self.ids.setdefault(kind[1:], []).append(v)
            if kind == "#step":
                self.ids["step"].append(v + 1)  # "step 6" may count from 1

    def _add_text(self, s: str) -> None:
        for n in _extract(s):
            if n.unit is None or n.unit == "x":
                self.raw.append(n.value)
                self.counts.append(n.value)
            elif n.unit.startswith("#"):
                self.ids.setdefault(n.unit[1:], []).append(n.value)
            else:
                kind, factors = CANON[n.unit]
                pool = {"time": self.ns, "pct": self.pct, "bytes": self.bytes, "bw": self.gbps}[kind]
                pool.extend(n.value * f for f in factors)

    def _string(self, key: str | None, s: str) -> None:
        if not any(ch.isdigit() for ch in s):
            return
        if _NUMERIC_STR_RE.fullmatch(s):
            self.raw.append(float(s))
            self.counts.append(float(s))
            return
        if len(s) >= 3 and any(ch.isalpha() for ch in s):
            self.names.add(s)
        if key in _TEXT_FIELDS:
            self._add_text(s)

    def _walk(self, root: Any) -> None:
        stack: list[tuple[Any, str | None, str | None]] = [(root, None, None)]
        while stack:
            obj, kind, key = stack.pop()
            if type(obj) is dict:
                cols = obj.get("columns")
                sql = (isinstance(cols, list) and isinstance(obj.get("rows"), list)
                       and all(isinstance(x, str) for x in cols))
                inherit = kind if kind and kind[0] != "#" else None  # causes -> ns; an id kind stays on scalars
                for k, v in obj.items():
                    if sql and k == "rows":
                        self._rows(cols, v)
                        continue
                    kind_k = _kind(k) if type(k) is str else None
                    if kind_k == "ns" and type(v) is not dict and k.lower() in _NS_DICTS:
                        kind_k = None  # "cuda_api_calls": 2 is a count; only its dict form holds ns
                    self._value(v, kind_k or inherit, k, stack)
            elif type(obj) is list:
                self.raw.append(len(obj))
                self.counts.append(len(obj))
                for v in obj:
                    self._value(v, kind, key, stack)

    def _value(self, v: Any, kind: str | None, key: str | None, stack: list) -> None:
        """One value met by _walk: a number or string is recorded, a dict or list is walked later."""
        t = type(v)
        if t is int or t is float:
            self._add(v, kind)
        elif t is str:
            self._string(key, v)
        elif t is dict or t is list:
            stack.append((v, kind, key))

    def _rows(self, cols: list[str], rows: list) -> None:
        self.raw.append(len(rows))
        self.counts.append(len(rows))
        kinds = [_kind(c) for c in cols]
        for row in rows:
            if not isinstance(row, list):
                continue
            for kind, col, v in zip(kinds, cols, row):
                t = type(v)
                if t is int or t is float:
                    self._add(v, kind)
                elif t is str:
                    self._string(col, v)
                elif t is dict or t is list:
                    self._walk(v)

    def _finish(self) -> None:
        for name in ("raw", "ns", "bytes", "pct", "gbps", "counts", "extra"):
            setattr(self, name, sorted(set(getattr(self, name))))
        self.ids = {k: sorted(set(v)) for k, v in self.ids.items()}
        self.names = sorted(self.names, key=len, reverse=True)

    # matching --------------------------------------------------------------------------------
    def grounds(self, n: Num) -> bool:
        """Whether some candidate, in ``n``'s unit, rounds to ``n`` at the precision written."""
        if n.unit and n.unit[0] == "#":
            return _hit(self.ids.get(n.unit[1:], ()), n.value, 0.0, 1.0) or _hit(self.extra, n.value, 0.0, 1.0)
        if _hit(self.extra, n.value, n.tol, 1.0):
            return True
        if n.count:
            return _hit(self.counts, n.value, n.tol, 1.0)
        plain = _hit(self.raw, n.value, n.tol, 1.0) or _hit(self.ns, n.value, n.tol, 1e6)
        if n.unit is None:
            return plain
        kind, factors = CANON[n.unit]
        pool = {"time": self.ns, "pct": self.pct, "bytes": self.bytes, "bw": self.gbps, "ratio": self.raw}[kind]
        return any(_hit(pool, n.value, n.tol, f) for f in factors) or (n.inherited and plain)


def _hit(pool, x: float, tol: float, factor: float) -> bool:
    """Is some pool value within [x - tol, x + tol] * factor (or its mirror, for an unsigned x)?"""
    if not pool:
        return False
    tol = tol * (1 + 1e-9) + 1e-9 * abs(x)
    lo, hi = (x - tol) * factor, (x + tol) * factor
    i = bisect_left(pool, lo)
    if i < len(pool) and pool[i] <= hi:
        return True
    if x >= 0:  # "450 ns" may state the size of a negative value
        i = bisect_left(pool, -hi)
        return i < len(pool) and pool[i] <= -lo
    return False


def _result_of(ev: Any) -> Any:
    if hasattr(ev, "result") and not isinstance(ev, dict):
        return ev.result
    if isinstance(ev, dict) and "result" in ev and "tool" in ev:
        return ev["result"]
    if hasattr(ev, "model_dump"):
        return ev.model_dump(mode="json")
    return ev


def check(answer_text: str, evidence: Iterable[Any] | Candidates,
          extra_values: Iterable[float] = ()) -> tuple[bool, list[str]]:
    """``(grounded, ungrounded numbers as written)`` for ``answer_text`` against ``evidence``.

    ``evidence``: Evidence objects, Evidence-shaped dicts, bare result dicts, or a prebuilt
    ``Candidates`` (reuse it when checking several drafts against the same evidence).
    """
    if isinstance(evidence, Candidates):
        cands = evidence.with_extra(extra_values) if extra_values else evidence
    else:
        cands = Candidates.build(evidence, extra_values)
    bad: list[str] = []
    for n in _extract(answer_text, cands.names):
        if not cands.grounds(n) and n.text not in bad:
            bad.append(n.text)
    return (not bad, bad)
