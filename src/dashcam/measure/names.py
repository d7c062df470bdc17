"""Readable kernel names."""
from __future__ import annotations

import os
import re


def _outside_brackets(name: str) -> str:
    """``name`` without what its <...> and (...) lists enclose (template and argument lists), nesting counted."""
    depth, out = 0, []
    for ch in name:
        if ch in "<(":
            depth += 1
        elif ch in ">)":
            depth = max(0, depth - 1)
        elif depth == 0:
            out.append(ch)
    return "".join(out)


def short_kernel_name(name: str | None, limit: int = 60) -> str:
    """The base name of a (demangled) kernel: no return type, template or argument lists."""
    if not name:
        return "<unnamed kernel>"
    n = _outside_brackets(name).strip() or name
    n = n.split()[-1] if n.split() else n  # drop a return type such as "void"
    n = n.split("::")[-1] or n
    return n if len(n) <= limit else n[: limit - 1] + "…"


# NVTX labels are grouped for ranking: PyTorch's per-call suffixes (", seq = 12, op_id = 990346",
# ", sizes = [...]") are dropped and a trailing number becomes "<n>", so "train_step 7" and
# "train_step 8" are one group "train_step <n>". The raw label stays available.
NVTX_SUFFIX = r",\s*(seq|op_id|sizes|input_op_ids|input_dims|input_types?)\s*=.*$"
NVTX_TRAILING_NUMBER = r"(\d+)$"


def nvtx_group_labels(labels):
    """Group labels (see above) for a pyarrow string array; null stays null."""
    import pyarrow.compute as pc

    out = pc.replace_substring_regex(labels, pattern=NVTX_SUFFIX, replacement="")
    out = pc.utf8_rtrim_whitespace(out)
    return pc.replace_substring_regex(out, pattern=NVTX_TRAILING_NUMBER, replacement="<n>")


def short_function_name(symbol: str | None, limit: int = 80) -> str:
    """A function symbol from a call stack without its return type, template and argument lists, namespaces
    kept: ``void clover::par_ranged2<256ul, ...>(...)`` -> ``clover::par_ranged2``. Addresses and names
    without such parts stay as they are."""
    if not symbol:
        return "?"
    n = " ".join(_outside_brackets(symbol).split()) or symbol
    n = re.sub(r"(\s+(const|volatile|noexcept|&&?))+$", "", n)  # trailing qualifiers of a method
    n = n.split(" ")[-1] if " " in n and not n.endswith("]") else n  # drop a return type such as "void"
    return n if len(n) <= limit else n[: limit - 1] + "…"


def kernel_label(short: str, full: str, shown: list[tuple[str, str]], width: int = 80) -> str:
    """How a kernel is named where others are shown beside it (``shown``: their (short, full) names, this one's
    among them): its short name; when another kernel shown has the same short name and another full name,
    followed by the part of its full name that tells them apart (from 20 characters before the first that
    differs), at most ``width`` characters."""
    alike = [f for s, f in shown if s == short and f != full]
    full = " ".join(full.split())
    if not alike or len(full) <= width:
        return short if not alike else full
    split = max(len(os.path.commonprefix([full, " ".join(x.split())])) for x in alike)  # first that differs
    room = max(30, width - len(short) - 1)
    start = max(0, split - 20)
    if len(full) - start <= room - 1:  # the rest fits: show the whole tail
        return f"{short} …{full[len(full) - room + 1:]}"
    return f"{short} …{full[start: start + room - 2]}…"
