"""Readable kernel names."""
from __future__ import annotations


def short_kernel_name(name: str | None, limit: int = 60) -> str:
    """The base name of a (demangled) kernel: no return type, template or argument lists."""
    if not name:
        return "<unnamed kernel>"
    depth, out = 0, []
    for ch in name:
        if ch in "<(":
            depth += 1
        elif ch in ">)":
            depth = max(0, depth - 1)
        elif depth == 0:
            out.append(ch)
    n = "".join(out).strip() or name
    n = n.split()[-1] if n.split() else n  # drop a return type such as "void"
    n = n.split("::")[-1] or n
    return n if len(n) <= limit else n[: limit - 1] + "…"
