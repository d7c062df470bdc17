"""Arguments a tool's schema refuses, said the way dashcam says bad input: one line per field
("start_ms: must be a number"), no pydantic error dump or documentation URL."""
from __future__ import annotations

from pydantic import ValidationError

_TYPES = {"int": "an integer", "float": "a number", "string": "a string", "bool": "true or false",
          "list": "a list", "dict": "an object", "literal": None}


def _where(loc: tuple) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "arguments"


def _what(err: dict, fields: list[str]) -> str:
    kind, ctx = err["type"], err.get("ctx") or {}
    if kind == "missing":
        return "required"
    if kind == "extra_forbidden":
        return f"not an argument of this tool (it takes {', '.join(fields)})" if fields else "not an argument"
    if kind == "literal_error":
        return f"must be one of {ctx.get('expected', '')}"
    for bound, word in (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<")):
        if bound in ctx:
            value = ctx[bound]
            return f"must be {word} {value:g}" if isinstance(value, (int, float)) else f"must be {word} {value}"
    base = kind.split("_")[0]
    if _TYPES.get(base):
        return f"must be {_TYPES[base]}"
    msg = str(err.get("msg", kind))
    msg = msg.removeprefix("Value error, ").removeprefix("Assertion failed, ")
    return msg[:1].lower() + msg[1:]


def field_errors(exc: ValidationError, fields: list[str] | None = None) -> str:
    """One line per refused field: ``name: what is wrong``. ``fields``: the tool's argument names, which an
    unknown argument's line lists."""
    lines = [f"{_where(e['loc'])}: {_what(e, fields or [])}" for e in exc.errors(include_url=False)]
    return "\n".join(dict.fromkeys(lines))
