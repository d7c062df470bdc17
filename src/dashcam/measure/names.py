"""Readable kernel names."""
from __future__ import annotations

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


def _base_name(name: str) -> str:
    """The last ``::`` part of a name outside its template and argument lists, with no return type."""
    n = _outside_brackets(name).strip() or name
    n = n.split()[-1] if n.split() else n  # drop a return type such as "void"
    return n.split("::")[-1] or n


# Generic wrapper templates: kernels (and the Kokkos/thrust launch types inside them) that run whatever functor
# or lambda their template argument names, so one base name covers many different kernels (CloverLeaf's
# clover::par_ranged2d_kernel<F> ran ~30 physics kernels, the largest 6.6 % of kernel time, under one name
# that took 90.7 %). Matched on the base name (``_base_name``); their distinguishing template argument stays
# in the short name.
GENERIC_WRAPPER_NAMES = (r"par_\w*kernel|for_each_kernel|for_each|parallel_for_kernel|transform_kernel|kernel|"
                         r"static_kernel|dynamic_kernel|"
                         r"ParallelFor|ParallelReduce|ParallelScan|cuda_parallel_launch_\w+|_kernel_agent|"
                         r"ParallelForAgent|RAJA_\w*kernel\w*|forall_\w*kernel\w*|launch_kernel")
GENERIC_WRAPPERS = rf"^(?:{GENERIC_WRAPPER_NAMES})$"
_WRAPPER_HINT = re.compile(rf"(?:^|[\s:])(?:{GENERIC_WRAPPER_NAMES})<")  # a cheap first test on a whole name
# Template arguments that never tell wrapper instantiations apart: numbers, built-in types, execution policies.
# Tested on the argument without its own template list.
_NOT_AN_ARGUMENT = (r"^(?:[-+]?\(?\d[\w.)]*|true|false|(?:(?:un)?signed |const |volatile )*"
                    r"(?:void|bool|char|short|int|long|long long|float|double|size_t|\w+_t)\s*[*&]*|"
                    r".*(?:Policy|Kokkos::Cuda|Kokkos::Device|LaunchBounds|IndexType|Schedule|Tag)\w*)$")
# Functor type names that say nothing by themselves: their enclosing namespace or class is kept with them.
_GENERIC_FUNCTOR_NAMES = {"functor", "f", "op", "fn", "func", "function", "lambda", "body"}


def _template_arguments(name: str) -> list[str]:
    """The top-level arguments of the first template list of ``name`` (nesting of <>, (), [] counted)."""
    open_at = name.find("<")
    if open_at < 0:
        return []
    depth, args, cur = 0, [], []
    for ch in name[open_at + 1:]:
        if ch in "<([{":
            depth += 1
        elif ch in ">)]}":
            if depth == 0:
                break
            depth -= 1
        elif ch == "," and depth == 0:
            args.append("".join(cur).strip())
            cur = []
            continue
        cur.append(ch)
    return [a for a in (*args, "".join(cur).strip()) if a]


def _argument_name(arg: str) -> str | None:
    """The name a wrapper's template argument stands for: a lambda's enclosing function (``PdV_kernel(...)::
    [lambda(int, int) (instance 2)]`` -> ``PdV_kernel``), an nvcc extended lambda's function
    (``__nv_dl_wrapper_t<__nv_dl_tag<..., &PdV_kernel, 1u>>``), a nested wrapper's own argument
    (``ParallelFor<Functor, ...>``), else the functor type's base name; None for one that tells nothing."""
    tag = re.search(r"__nv_h?dl_tag<[^&]*&([\w:]+)", arg)
    if tag:
        return tag.group(1).split("::")[-1]
    lam = re.search(r"::\s*[\[{]lambda", arg)
    if lam:
        return _base_name(arg[: lam.start()]) or None
    arg = re.sub(r"^(?:(?:struct|class|const|volatile)\s+)+|(?:\s*[*&]|\s+const)+$", "", arg.strip())
    head = arg.split("<")[0].strip()
    base = head.split("::")[-1]
    if "<" in arg and re.match(GENERIC_WRAPPERS, base):
        return wrapper_argument(arg)
    if not base or re.match(_NOT_AN_ARGUMENT, head, re.IGNORECASE):
        return None
    if base.lower() in _GENERIC_FUNCTOR_NAMES and "::" in head:  # thrust's __fill::functor: name its namespace
        return "::".join(head.split("::")[-2:])
    return base


def wrapper_argument(name: str | None) -> str | None:
    """For a kernel (demangled name) of a generic wrapper template (``GENERIC_WRAPPERS``): the name of its first
    template argument that tells its instantiations apart (``_argument_name``); None for any other kernel."""
    if not name or "<" not in name or not _WRAPPER_HINT.search(name):
        return None
    base = _base_name(name)
    if not re.match(GENERIC_WRAPPERS, base):
        return None
    at = name.find(base + "<")  # the kernel's own template list: right after its base name
    if at < 0:
        return None
    for arg in _template_arguments(name[at:]):
        named = _argument_name(arg)
        if named:
            return named
    return None


def short_kernel_name(name: str | None, limit: int = 60) -> str:
    """The base name of a (demangled) kernel: no return type, template or argument lists; a generic wrapper
    template keeps its distinguishing argument (``wrapper_argument``): ``par_ranged2d_kernel<PdV_kernel>``."""
    if not name:
        return "<unnamed kernel>"
    n = _base_name(name)
    arg = wrapper_argument(name)
    if arg:
        n = f"{n}<{arg}>"
    return n if len(n) <= limit else n[: limit - 1] + "…"


def wrapper_parts(short: str) -> tuple[str, str] | None:
    """(wrapper base name, distinguishing argument) of a short name short_kernel_name gave a generic wrapper's
    instantiation (``par_ranged2d_kernel<PdV_kernel>`` -> ("par_ranged2d_kernel", "PdV_kernel")); None for any
    other (or a cut) name."""
    m = re.match(r"^([\w:]+)<(\w[\w:]*)>$", short)
    return (m.group(1).split("::")[-1], m.group(2)) if m else None


def kernel_short_name(short: str | None, full: str | None) -> str | None:
    """A kernel's short name from the export's own (nsys' ``shortName``, which drops every template argument)
    and its demangled name: ``short_kernel_name`` of the demangled name for a generic wrapper, else the
    export's. The one rule where short names come from (the cache applies it when it is built)."""
    if full and wrapper_argument(full):
        return short_kernel_name(full)
    return short


# NVTX labels are grouped for ranking: PyTorch's per-call suffixes (", seq = 12, op_id = 990346",
# ", sizes = [...]") are dropped and a trailing number becomes "<n>", so "train_step 7" and
# "train_step 8" are one group "train_step <n>". The raw label stays available.
NVTX_SUFFIX = r",\s*(seq|op_id|sizes|input_op_ids|input_dims|input_types?)\s*=.*$"
NVTX_TRAILING_NUMBER = r"(\d+)$"


def nvtx_group_label(label: str) -> str:
    """The group label (see above) of one label: "train_step 7" -> "train_step <n>"."""
    out = re.sub(NVTX_SUFFIX, "", label).rstrip()
    return re.sub(NVTX_TRAILING_NUMBER, "<n>", out)


def nvtx_group_labels(labels):
    """Group labels (see above) for a pyarrow string array; null stays null."""
    import pyarrow.compute as pc

    out = pc.replace_substring_regex(labels, pattern=NVTX_SUFFIX, replacement="")
    out = pc.utf8_rtrim_whitespace(out)
    return pc.replace_substring_regex(out, pattern=NVTX_TRAILING_NUMBER, replacement="<n>")


def short_function_name(symbol: str | None) -> str:
    """A function symbol from a call stack without its return type, template and argument lists, namespaces
    kept: ``void clover::par_ranged2<256ul, ...>(...)`` -> ``clover::par_ranged2``. Addresses and names
    without such parts stay as they are; uncut (where it is shown, text/shorten.py cuts it)."""
    if not symbol:
        return "?"
    n = " ".join(_outside_brackets(symbol).split()) or symbol
    n = re.sub(r"(\s+(const|volatile|noexcept|&&?))+$", "", n)  # trailing qualifiers of a method
    n = n.split(" ")[-1] if " " in n and not n.endswith("]") else n  # drop a return type such as "void"
    return n
