"""The ``dashcam`` command line.

Heavy modules (duckdb, pyarrow, openai) are imported inside the commands that use them,
so ``dashcam --help`` and a cached ``tool run`` start fast.
"""
from __future__ import annotations

import gc
import json
import os
import sys
from typing import List, Optional

import typer

# A command's start-up loads ~400 modules and builds the pydantic schemas: hundreds of thousands of objects
# that live as long as the process, none of them garbage. With the collector's default first threshold
# (700 allocations) that is ~130 young and one full collection, ~5 % of an `ask`; every 5,000 is ~30.
GC_THRESHOLD = (5000, 20, 20)
gc.set_threshold(*GC_THRESHOLD)

app = typer.Typer(
    name="dashcam",
    help="Ask an NVIDIA Nsight Systems profile what went wrong.\n\n"
         "PROFILE is the SQLite file of `nsys export --type sqlite`, or a .nsys-rep / .qdrep (exported once with "
         "the nsys of --nsys / $DASHCAM_NSYS, else the one on PATH).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # plain click help and usage errors: typer's rich help costs ~80 ms of imports a run
)
tool_app = typer.Typer(help="Run one deterministic analysis tool.", no_args_is_help=True, rich_markup_mode=None)
app.add_typer(tool_app, name="tool")
cache_app = typer.Typer(help="The Parquet caches of opened profiles: where, how big, clear them.",
                        no_args_is_help=True, rich_markup_mode=None)
app.add_typer(cache_app, name="cache")


def _print_version(value: bool) -> None:
    if value:
        from dashcam import __version__

        typer.echo(f"dashcam {__version__}")
        raise typer.Exit()


@app.callback()
def _global(nsys: Optional[str] = typer.Option(None, "--nsys", help="The nsys that exports .nsys-rep/.qdrep "
                                               "reports (a file or its folder; also $DASHCAM_NSYS; default: the "
                                               "one on PATH)."),
            version: bool = typer.Option(False, "--version", is_eager=True, callback=_print_version,
                                         help="Print dashcam's version and exit.")):
    """Ask an NVIDIA Nsight Systems profile what went wrong."""
    if nsys:
        from dashcam.profile.source import name_nsys

        name_nsys(nsys)  # $DASHCAM_NSYS for this process (profile/source.py's find_nsys reads it)




def fail(message: str, code: int) -> None:
    typer.echo(f"dashcam: error: {message}", err=True)
    raise typer.Exit(code)


def guarded(fn):
    """Run a command body, turning every expected failure into one line on stderr and an exit code."""
    from functools import wraps

    @wraps(fn)
    def wrapper(*args, **kwargs):
        from pydantic import ValidationError

        from dashcam.errors import BadParameter, DashcamError

        for attempt in (1, 2):
            _forget_opened()
            try:
                return fn(*args, **kwargs)
            except typer.Exit:
                raise
            except BrokenPipeError:  # a write past rich (text/console.py: console_class): the reader closed the pipe
                _stdout_closed()
                raise typer.Exit(0) from None
            except DashcamError as e:
                fail(str(e), e.exit_code)
            except ValidationError as e:
                errs = "; ".join(f"{'.'.join(str(x) for x in err['loc']) or 'value'}: {err['msg']}"
                                 for err in e.errors())
                fail(f"bad parameter: {errs}", BadParameter.exit_code)
            except KeyboardInterrupt:
                fail("interrupted", 130)
            except Exception as e:
                first = str(e).strip().splitlines()[0] if str(e).strip() else ""
                found = _damaged_cache(e)
                if found is not None and attempt == 1:  # run again on a rebuilt cache (Profile.open notes it)
                    _invalidate(found[0], f"reading it failed: {found[1]}")
                    continue
                if found is not None:
                    from dashcam.errors import CacheDamaged

                    fail(f"the cache in {found[0]} is unreadable even after a rebuild ({found[1]}); delete that "
                         "folder or set DASHCAM_CACHE_DIR elsewhere", CacheDamaged.exit_code)
                if os.environ.get("DASHCAM_DEBUG"):
                    raise
                fail(f"internal error ({type(e).__name__}: {first}); set DASHCAM_DEBUG=1 for the traceback", 1)

    return wrapper


def _stdout_closed() -> None:
    """Point stdout at /dev/null so that the interpreter's flush at exit does not fail on the closed pipe."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def _damaged_cache(e: Exception):
    """(cache, why) when a read error comes from a damaged cache of a profile this process opened
    (profile/cache/check.py: cache_of_error), else None."""
    cache_mod = sys.modules.get("dashcam.profile.cache")
    return cache_mod.cache_of_error(e) if cache_mod else None


def _forget_opened() -> None:
    """A command's read errors are about the caches it opens: forget those of earlier commands (tests, eval)."""
    cache_mod = sys.modules.get("dashcam.profile.cache")
    if cache_mod:
        cache_mod.OPENED.clear()


def _invalidate(cache, why: str) -> None:
    from dashcam.profile.cache import invalidate

    invalidate(cache, why)


def _console(fmt: str = "rich"):
    """The console of a command's output: text/formats.py (rich at a terminal or wide elsewhere: text/console.py)."""
    from dashcam.text.formats import format_console

    return format_console(fmt)


def _format(fmt: str, as_json: bool) -> str:
    """--format (text/formats.py's FORMATS), with --json its alias for json; BadParameter for anything else."""
    from dashcam.errors import BadParameter
    from dashcam.text.formats import FORMATS

    if fmt not in FORMATS:
        raise BadParameter(f"--format must be one of {', '.join(FORMATS)}, not {fmt!r}")
    if as_json and fmt not in ("rich", "json"):
        raise BadParameter(f"--json is --format json: it cannot be combined with --format {fmt}")
    return "json" if as_json else fmt


def _report_format(fmt: str) -> str:
    """--format of the diff and the fleet: text (rich and plain name the same plain text), markdown, json or csv."""
    from dashcam.errors import BadParameter

    fmt = "text" if fmt in ("rich", "plain") else fmt
    if fmt not in ("text", "markdown", "json", "csv"):
        raise BadParameter(f"--format must be text, markdown, json or csv, not {fmt!r}")
    return fmt


def _format_option():
    from dashcam.text.formats import FORMAT_HELP

    return typer.Option("rich", "--format", "-f", help=FORMAT_HELP)


def _print_json(obj) -> None:
    from pydantic import BaseModel

    if isinstance(obj, BaseModel):
        sys.stdout.write(obj.model_dump_json(indent=2) + "\n")
    else:
        sys.stdout.write(json.dumps(obj, indent=2, default=str) + "\n")


def _parse_args(items: list[str]) -> dict:
    from dashcam.errors import BadParameter

    out = {}
    for it in items or []:
        if "=" not in it:
            raise BadParameter(f"--arg expects KEY=VALUE, got {it!r}")
        k, v = it.split("=", 1)
        try:
            out[k.strip()] = json.loads(v)
        except ValueError:
            out[k.strip()] = v
    return out


@app.command()
@guarded
def info(
    profile: str = typer.Argument(..., help="The .sqlite export (or .nsys-rep)."),
    fmt: str = _format_option(),
    as_json: bool = typer.Option(False, "--json", help="Print JSON (--format json)."),
):
    """What is in a profile: versions, tables and row counts, GPUs, processes, capture coverage, cache location."""
    from dashcam.profile import Profile
    from dashcam.profile.coverage import coverage
    from dashcam.profile.diagnostics import diagnostics, render_diagnostics
    from dashcam.profile.recording import cuda_processes, recording, versions_line

    fmt = _format(fmt, as_json)
    p = Profile.open(profile)
    tables = {k: v["rows"] for k, v in p.manifest["tables"].items()}
    fw = p.full_window
    rec = recording(p)
    data = {
        "profile": str(p.path),
        "sqlite": str(p.sqlite_path),
        "nsys_version": p.nsys_version,
        "recording": rec.model_dump(),
        "schema_version": p.schema_version,
        "window_ns": (fw[1] - fw[0]) if fw else None,
        "window_start_ns": fw[0] if fw else None,
        "window_end_ns": fw[1] if fw else None,
        "gpus": [{"device_id": g.device_id, "name": g.name, "sm_count": g.sm_count,
                  "has_activity": g.device_id in p.devices} for g in p.gpus.values()],
        "processes": [x.model_dump() for x in cuda_processes(p)],
        "rows": {
            "kernels": p.count("kernels"), "api_calls": p.count("api"), "memcpys": p.count("memcpy"),
            "memsets": p.count("memset"), "sync_events": p.count("sync_events"),
            "nvtx_events": p.count("nvtx"),
        },
        "cached_tables": tables,
        "coverage": coverage(p).model_dump(),
        "diagnostics": [vars(d) for d in diagnostics(p)],
        "cache": {"path": str(p.cache), "size_bytes": _cache_size(p.cache)},
    }
    if fmt == "json":
        _print_json(data)
        return
    from rich.table import Table
    from rich.text import Text

    from dashcam.text.format import fmt_ns

    c = _console(fmt)
    c.print(Text(f"{data['profile']}", style="bold"))
    c.print(Text(f"{versions_line(rec)} · schema {data['schema_version'] or 'unknown'} · "
                 f"GPU window {fmt_ns(data['window_ns']) if fw else 'none (no GPU activity)'}"))
    for what, line in (("command", rec.command), ("recorded by", rec.nsys_command)):
        if line:
            c.print(Text(f"{what}: {line}"))
    t = Table(title="rows", title_justify="left")
    for k in data["rows"]:
        t.add_column(k, justify="right")
    t.add_row(*[f"{v:,}" for v in data["rows"].values()])
    c.print(t)
    if data["gpus"]:
        g = Table(title="GPUs", title_justify="left")
        for col in ("device_id", "name", "sm_count", "has_activity"):
            g.add_column(col)
        for x in data["gpus"]:
            keys = ("device_id", "name", "sm_count", "has_activity")
            g.add_row(*[Text(str(x[k] if x[k] is not None else "-")) for k in keys])
        c.print(g)
    if data["processes"]:
        c.print(Text("processes with CUDA calls: " + ", ".join(
            f"{x['pid']} ({x['name'] or 'name not in the export'}"
            + (f", recorded as {x['recorded_name']})" if x["recorded_name"] else ")")
            for x in data["processes"])))
    cov = Table(title="capture coverage", title_justify="left")
    for col in ("data", "state", "evidence", "nsys profile options"):
        cov.add_column(col, overflow="fold")
    for k in data["coverage"]["kinds"]:
        cov.add_row(Text(k["name"]), Text(k["state"]), Text(", ".join(k["evidence"][:3]) or "-"),
                    Text("" if k["state"] == "recorded" else k["options"]))
    c.print(cov)
    render_diagnostics(diagnostics(p), c)
    c.print(Text(f"cache: {data['cache']['path']} ({_mb(data['cache']['size_bytes'])})"))


def _cache_size(cache) -> int:
    from dashcam.profile.cache import dir_size

    return dir_size(cache)


def _mb(n: int) -> str:
    return f"{n / 1e6:,.1f} MB"


SEARCH_HELP = ("Also look for caches beside the profiles in FOLDER and its sub-folders (repeatable; "
               "default: the current folder). The user cache folder, and the caches it lists as built "
               "beside their profiles, are always included.")


def _search_folders(folders: Optional[List[str]]) -> list:
    from pathlib import Path

    return [Path(f).expanduser() for f in (folders or ["."])]


@cache_app.command("list")
@guarded
def cache_list(
    folders: Optional[List[str]] = typer.Option(None, "--in", metavar="FOLDER", help=SEARCH_HELP),
    fmt: str = _format_option(),
    as_json: bool = typer.Option(False, "--json", help="Print JSON (--format json)."),
):
    """Every cached profile and report export: its folder, size, last use, whether its source still exists; the
    total."""
    from dashcam.profile.cache import known_caches, known_exports

    fmt = _format(fmt, as_json)
    caches, exports = known_caches(_search_folders(folders)), known_exports()
    total = sum(c["size_bytes"] for c in caches) + sum(e["size_bytes"] for e in exports)
    if fmt == "json":
        _print_json({"caches": caches, "exports": exports, "total_bytes": total})
        return
    _print_caches(caches, exports, total, fmt)


def _print_caches(caches: list[dict], exports: list[dict], total: int, fmt: str) -> None:
    import time

    from rich.table import Table

    when = lambda t: time.strftime("%Y-%m-%d %H:%M", time.localtime(t))
    t = Table(title_justify="left", title=f"{len(caches)} cached profile{'s' if len(caches) != 1 else ''}, "
                                          f"{len(exports)} report export{'s' if len(exports) != 1 else ''}, "
                                          f"{_mb(total)} in all")
    for col in ("profile", "size", "last used", "state"):
        t.add_column(col, justify="right" if col == "size" else "left")
    report_of = {e["sqlite"]: e["report"] for e in exports if e["sqlite"] and e["report"]}
    for c in caches:
        state = "current" if c["current"] else ("stale" if c["profile_exists"] else "profile gone")
        shown = f"{report_of[c['profile']]} (its export's cache)" if c["profile"] in report_of else c["profile"]
        t.add_row(shown or c["cache"], _mb(c["size_bytes"]), when(c["last_used"]), state)
    for e in exports:
        t.add_row(f"{e['report'] or e['export']} (export)", _mb(e["size_bytes"]), when(e["last_used"]), e["state"])
    _console(fmt).print(t)


@cache_app.command("clear")
@guarded
def cache_clear(
    profile: Optional[str] = typer.Argument(None, help="The profile whose cache to delete."),
    all_: bool = typer.Option(False, "--all", help="Delete every cache."),
    older_than: Optional[float] = typer.Option(None, "--older-than", metavar="DAYS",
                                               help="Delete the caches not used for DAYS days."),
    folders: Optional[List[str]] = typer.Option(None, "--in", metavar="FOLDER", help=SEARCH_HELP),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
):
    """Delete caches and report exports: one profile's (a report's: its exports too), every one listed (--all), or
    those unused for DAYS days (--older-than)."""
    import time
    from pathlib import Path

    from dashcam.errors import BadParameter
    from dashcam.profile.cache import (
        caches_of,
        exports_of,
        forget_missing,
        known_caches,
        known_exports,
        remove_cache,
        remove_export,
    )

    if sum([profile is not None, all_, older_than is not None]) != 1:
        raise BadParameter("cache clear takes one of PROFILE, --all or --older-than DAYS")
    if older_than is not None and older_than < 0:
        raise BadParameter(f"--older-than {older_than}: days must be 0 or more")
    if profile is not None:
        target = Path(profile).expanduser().resolve()
        found, exports = caches_of(target), exports_of(target)
    else:
        cutoff = time.time() - (older_than or 0) * 86400
        found = [Path(c["cache"]) for c in known_caches(_search_folders(folders)) if all_ or c["last_used"] < cutoff]
        exports = [e for e in known_exports() if all_ or e["last_used"] < cutoff]
    removed = [{"export": e["export"], "report": e["report"], "size_bytes": remove_export(e)} for e in exports]
    removed += [{"cache": str(f), "size_bytes": remove_cache(f)} for f in dict.fromkeys(found) if f.is_dir()]
    forget_missing()
    freed = sum(r["size_bytes"] for r in removed)
    if as_json:
        _print_json({"removed": removed, "freed_bytes": freed})
        return
    for r in removed:
        what = r.get("cache") or f"{r['export']} (export of {r['report'] or 'an unknown report'})"
        typer.echo(f"removed {what} ({_mb(r['size_bytes'])})")
    typer.echo(f"{len(removed)} cache{'s' if len(removed) != 1 else ''} removed, {_mb(freed)} freed")


@cache_app.command("info")
@guarded
def cache_info(
    profile: str = typer.Argument(..., help="The .sqlite export (or .nsys-rep)."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
):
    """Where a profile's cache is (or would be), whether it is built and current, and its size (a report's: where
    its export is, and the export's cache); builds nothing."""
    from pathlib import Path

    from dashcam.profile.cache import CACHE_VERSION, cache_dir_for, is_report, needed_bytes, read_manifest
    from dashcam.profile.source import export_path_for, file_fingerprint

    path = Path(profile).expanduser()
    export = None
    if is_report(path) and path.is_file():
        report, export = path, export_path_for(path)
        path = export
    cache = cache_dir_for(path)
    man = read_manifest(cache) or {}
    current = (path.is_file() and man.get("version") == CACHE_VERSION
               and man.get("fingerprint") == file_fingerprint(path))
    data = {"profile": str(path.resolve()), "cache": str(cache), "built": bool(man), "current": bool(current),
            "size_bytes": _cache_size(cache) if cache.is_dir() else 0,
            "needs_bytes": needed_bytes(path), "cache_dir_env": os.environ.get("DASHCAM_CACHE_DIR")}
    if export is not None:
        data |= {"profile": str(report.resolve()), "export": str(export), "exported": export.is_file()}
    if as_json:
        _print_json(data)
        return
    if export is not None:
        typer.echo(f"export: {export} ({'exported' if export.is_file() else 'not exported yet'})")
    state = "current" if current else ("built from another version of the profile" if man else "not built")
    typer.echo(f"{data['cache']} ({state}, {_mb(data['size_bytes'])})")


@tool_app.command("list")
@guarded
def tool_list(fmt: str = _format_option(),
              as_json: bool = typer.Option(False, "--json", help="Print the tools' JSON schemas (--format json).")):
    """List the analysis tools."""
    from dashcam.tools import available_tools

    fmt = _format(fmt, as_json)
    tools = available_tools()
    if fmt == "json":
        _print_json([t.json_schema() for t in tools])
        return
    from rich.table import Table
    from rich.text import Text

    t = Table(show_header=True)
    t.add_column("tool")
    t.add_column("what it answers")
    for x in tools:
        t.add_row(Text(x.name, style="bold"), Text(x.summary))
    _console(fmt).print(t)


@tool_app.command("run")
@guarded
def tool_run(
    name: str = typer.Argument(..., help="Tool name (see `dashcam tool list`)."),
    profile: str = typer.Argument(..., help="The .sqlite export (or .nsys-rep)."),
    gpu: Optional[int] = typer.Option(None, "--gpu", help="Only this device id."),
    start: Optional[float] = typer.Option(None, "--start", help="Window start, ms from the start of GPU activity."),
    end: Optional[float] = typer.Option(None, "--end", help="Window end, ms from the start of GPU activity."),
    limit: Optional[int] = typer.Option(None, "--limit", help="Rows in ranked lists (default 10)."),
    arg: List[str] = typer.Option([], "--arg", "-a", help="Tool-specific parameter KEY=VALUE (repeatable)."),
    fmt: str = _format_option(),
    as_json: bool = typer.Option(False, "--json", help="Print the result model as JSON (--format json)."),
):
    """Run one tool on a profile: rich tables by default, the result model with --json."""
    from dashcam.errors import BadParameter
    from dashcam.profile import Profile
    from dashcam.tools import TOOL_NAMES, get_tool

    fmt = _format(fmt, as_json)
    if name not in TOOL_NAMES:
        raise BadParameter(f"unknown tool {name!r}; tools: {', '.join(TOOL_NAMES)}")
    tool = get_tool(name)
    values = _parse_args(arg)
    for k, v in (("gpu", gpu), ("start_ms", start), ("end_ms", end), ("limit", limit)):
        if v is not None:
            values[k] = v
    params = tool.params.model_validate(values)
    p = Profile.open(profile)
    result = tool.run(p, params)
    if fmt == "json":
        _print_json(result)
        return
    tool.render(result, _console(fmt))


def _llm_timeout():
    return typer.Option(None, "--llm-timeout", help="LLM mode: seconds one model request may take (also "
                        "$DASHCAM_LLM_TIMEOUT; default 600; a slow local server needs minutes for the first).")


def _llm_retries():
    return typer.Option(None, "--llm-retries", help="LLM mode: retries after 429/5xx (also $DASHCAM_LLM_RETRIES; "
                        "default 2; a timed-out request is never retried).")


def _llm_max_tokens():
    return typer.Option(None, "--llm-max-tokens", help="LLM mode: the most tokens one reply may have (also "
                        "$DASHCAM_LLM_MAX_TOKENS; default 1500).")


def _llm_context():
    return typer.Option(None, "--llm-context", help="LLM mode: the model's context in tokens (also "
                        "$DASHCAM_LLM_CONTEXT; default 16000; tool results are cut to fit).")


def _llm_limits(timeout, retries, max_tokens, context):
    from dashcam.agent.llm_config import llm_options

    return llm_options(timeout=timeout, retries=retries, max_tokens=max_tokens, context=context)


@app.command()
@guarded
def ask(
    question: str = typer.Argument(..., help='The question, e.g. "why is GPU 5 idle?"'),
    profile: Optional[str] = typer.Argument(
        None, help="The .sqlite export (or .nsys-rep); default $DASHCAM_PROFILE or the only one in this folder."),
    model: Optional[str] = typer.Option(None, "--model", help="Chat model (also $DASHCAM_MODEL); LLM mode needs "
                                        "OPENAI_API_KEY or OPENAI_BASE_URL."),
    offline: bool = typer.Option(False, "--offline", help="Answer with the deterministic planner, no model."),
    as_json: bool = typer.Option(False, "--json", help="Print the answer, targets, tool calls and evidence as JSON."),
    llm_timeout: Optional[float] = _llm_timeout(),
    llm_retries: Optional[int] = _llm_retries(),
    llm_max_tokens: Optional[int] = _llm_max_tokens(),
    llm_context: Optional[int] = _llm_context(),
):
    """Ask a question about a profile; get a short answer, its evidence and the commands that reproduce it."""
    with _llm_limits(llm_timeout, llm_retries, llm_max_tokens, llm_context):
        _ask(question, profile, model, offline, as_json)


def _ask(question, profile, model, offline, as_json) -> None:
    from dashcam.agent.ask import ask as ask_question
    from dashcam.agent.ask import find_profile, render_answer
    from dashcam.profile import Profile

    path = find_profile(profile)
    from dashcam.fleet import is_fleet

    if is_fleet(path):  # a directory or a glob of reports: the fleet answers, or the report a question names
        from dashcam.agent.fleet import ask_fleet, render_fleet_answer

        fleet_answer = ask_fleet(question, _fleet_report([path]), model=model, offline=offline)
        if as_json:
            _print_json(fleet_answer)
        else:
            render_fleet_answer(fleet_answer, _console())
        return
    p = Profile.open(path)
    answer = ask_question(question, p, model=model, offline=offline)
    if as_json:
        _print_json(answer)
        return
    render_answer(answer, _console(), path, p)


@app.command()
@guarded
def chat(
    profile: Optional[str] = typer.Argument(
        None, help="The .sqlite export (or .nsys-rep); default $DASHCAM_PROFILE or the only one in this folder."),
    model: Optional[str] = typer.Option(None, "--model", help="Chat model (also $DASHCAM_MODEL); LLM mode needs "
                                        "OPENAI_API_KEY or OPENAI_BASE_URL."),
    offline: bool = typer.Option(False, "--offline", help="Answer with the deterministic planner, no model."),
    llm_timeout: Optional[float] = _llm_timeout(),
    llm_retries: Optional[int] = _llm_retries(),
    llm_max_tokens: Optional[int] = _llm_max_tokens(),
    llm_context: Optional[int] = _llm_context(),
):
    """Talk to a profile: questions and follow-ups ("and GPU 3?"), slash commands (/help), Ctrl-D to leave."""
    with _llm_limits(llm_timeout, llm_retries, llm_max_tokens, llm_context):
        _chat(profile, model, offline)


def _chat(profile, model, offline) -> None:
    from dashcam.agent.ask import find_profile
    from dashcam.agent.chat import ChatSession, run_repl
    from dashcam.profile import Profile

    path = find_profile(profile)
    from dashcam.fleet import is_fleet

    if is_fleet(path):
        from dashcam.agent.fleet import run_fleet_chat

        raise typer.Exit(run_fleet_chat(_fleet_report([path]), _console(), model=model, offline=offline))
    session = ChatSession(Profile.open(path), path, model=model, offline=offline)
    raise typer.Exit(run_repl(session, _console()))


@app.command()
@guarded
def summary(
    profile: Optional[str] = typer.Argument(
        None, help="The .sqlite export (or .nsys-rep); default $DASHCAM_PROFILE or the only one in this folder."),
    fmt: str = typer.Option("text", "--format", "-f", help="text | markdown | json."),
    llm: bool = typer.Option(False, "--llm", help="Let the configured model reword the paragraph; kept only when "
                             "every number in it comes from the tool results."),
    model: Optional[str] = typer.Option(None, "--model", help="Chat model for --llm (also $DASHCAM_MODEL); needs "
                                        "OPENAI_API_KEY or OPENAI_BASE_URL."),
    picture: Optional[str] = typer.Option(None, "--picture", help="Also write the timeline of the largest gap to this "
                                          ".svg/.html/.png file; markdown output links it."),
    llm_timeout: Optional[float] = _llm_timeout(),
    llm_retries: Optional[int] = _llm_retries(),
    llm_max_tokens: Optional[int] = _llm_max_tokens(),
    llm_context: Optional[int] = _llm_context(),
):
    """One paragraph on what limits the profile (verdict, key numbers, what to try first) and the findings behind it."""
    with _llm_limits(llm_timeout, llm_retries, llm_max_tokens, llm_context):
        _summary(profile, fmt, llm, model, picture)


def _summary(profile, fmt, llm, model, picture) -> None:
    from dashcam.agent.ask import find_profile
    from dashcam.errors import BadParameter
    from dashcam.profile import Profile
    from dashcam.reports.summary import summarize, to_markdown, to_text

    if fmt not in ("text", "markdown", "json"):
        raise BadParameter(f"--format must be text, markdown or json, not {fmt!r}")
    if picture:
        from dashcam.reports.timeline import picture_kind

        picture_kind(picture)  # before the summary (and any model call) is paid for
    path = find_profile(profile)
    from dashcam.fleet import is_fleet

    if is_fleet(path):  # a directory or a glob of reports: the fleet report (dashcam fleet)
        if llm or picture:
            raise BadParameter("--llm and --picture are for one profile, not a fleet of reports")
        from dashcam.fleet import to_json, to_markdown, to_text

        report = _fleet_report([path])
        sys.stdout.write({"json": to_json, "markdown": to_markdown, "text": to_text}[fmt](report))
        return
    p = Profile.open(path)
    result = summarize(p)
    if llm:
        from dashcam.agent.rewrite import rewrite

        result = rewrite(result, model=model)
    if picture:
        from dashcam.reports.timeline import picture_kind, write_picture

        write_picture(p, picture)
    if fmt == "json":
        _print_json(result)
    else:
        sys.stdout.write(to_markdown(result) if fmt == "markdown" else to_text(result))
        if picture:
            image = "!" if picture_kind(picture) == "png" else ""  # markdown shows a PNG in place
            sys.stdout.write(f"\n{image}[Timeline of the largest gap]({picture})\n" if fmt == "markdown"
                             else f"timeline of the largest gap: {picture}\n")
    if fmt == "text" and sys.stdout.isatty():  # the picture of the most telling moment, on a terminal only
        from dashcam.reports.timeline import small_strip

        small_strip(p, None, _console())


FLEET_HELP = ("A directory of reports, a quoted glob ('runs/report_*.sqlite') or several files: one report per "
              "rank or node (docs/fleet.md).")


def _fleet_report(args: list, workers=None, scheduler=None, scheduler_file=None, rank_pattern=None):
    """The fleet report of ``args`` (fleet/report.py), its progress bar on stderr at a terminal."""
    from dashcam.fleet import analyse

    return analyse(list(args), workers=workers, scheduler=scheduler, scheduler_file=scheduler_file,
                   rank_pattern=rank_pattern)


@app.command()
@guarded
def fleet(
    reports: List[str] = typer.Argument(..., help=FLEET_HELP),
    fmt: str = typer.Option("text", "--format", "-f", help="text (also rich, plain) | markdown | json | csv (the "
                            "per-GPU table)."),
    workers: Optional[int] = typer.Option(None, "--workers", "-w", help="Dask worker processes of one thread "
                                          "(default: 1 for few or small reports, else the machine's cores: "
                                          "docs/fleet.md); 1 runs in this process without Dask."),
    scheduler: Optional[str] = typer.Option(None, "--scheduler", metavar="ADDRESS", help="Join this Dask scheduler "
                                            "(tcp://host:8786) instead of starting one (also "
                                            "$DASK_SCHEDULER_ADDRESS)."),
    scheduler_file: Optional[str] = typer.Option(None, "--scheduler-file", metavar="FILE", help="Join the Dask "
                                                 "scheduler this file describes (dask-mpi, dask scheduler "
                                                 "--scheduler-file)."),
    rank_pattern: Optional[str] = typer.Option(None, "--rank-pattern", metavar="REGEX", help="Read the rank from the "
                                               "file name with this regular expression (its first group); default: "
                                               "the last integer of the name."),
):
    """Which rank or node holds the others back: one report per rank, analysed on Dask, compared across ranks."""
    from dashcam.fleet import to_csv, to_json, to_markdown, to_text

    fmt = _report_format(fmt)
    report = _fleet_report(reports, workers, scheduler, scheduler_file, rank_pattern)
    sys.stdout.write({"json": to_json, "markdown": to_markdown, "text": to_text, "csv": to_csv}[fmt](report))


@app.command("pr-comment")
@guarded
def pr_comment(
    profile: str = typer.Argument(..., help="The .sqlite export (or .nsys-rep) of this change."),
    baseline: Optional[str] = typer.Option(None, "--baseline", help="The profile before the change: adds the diff."),
    repo: Optional[str] = typer.Option(None, "--repo", help="OWNER/NAME of the GitHub repository."),
    pr: Optional[int] = typer.Option(None, "--pr", help="Pull request number."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the comment's markdown; no token, no HTTP."),
    threshold: float = typer.Option(5.0, "--threshold", help="Diff: smallest change that counts, in percent."),
    picture_url: Optional[str] = typer.Option(None, "--picture-url", help="Link to the timeline picture (e.g. the "
                                              "workflow artifact holding `dashcam summary --picture` output)."),
    diff_json: Optional[str] = typer.Option(None, "--diff", metavar="FILE", help="Embed this diff (`dashcam diff "
                                            "--format json` output) instead of diffing against --baseline."),
    summary_file: Optional[str] = typer.Option(None, "--summary-file", metavar="PATH", help="Also append the "
                                               "comment's markdown to PATH (e.g. $GITHUB_STEP_SUMMARY), before "
                                               "posting it."),
):
    """Post the profile summary (and the diff against --baseline) as one comment on a pull request.

    Needs GITHUB_TOKEN (GITHUB_API_URL for GitHub Enterprise); edits dashcam's earlier comment if there is one.
    """
    from dashcam.errors import BadParameter
    from dashcam.reports.pr_comment import append_to, build_comment, check_target, find_existing, publish

    if threshold < 0:
        raise BadParameter("--threshold must be >= 0")
    body = None
    if dry_run or summary_file:  # the job summary is written even when posting is refused (a fork's token)
        body = build_comment(profile, baseline, threshold, picture_url, diff_json)
        append_to(summary_file, body)
    if dry_run:
        sys.stdout.write(body)
        return
    from dashcam.reports.github import GitHub

    owner, name, number = check_target(repo, pr)
    gh = GitHub.from_env()
    existing = find_existing(gh, owner, name, number)  # token, repo and PR checked before the profile is read
    body = body or build_comment(profile, baseline, threshold, picture_url, diff_json)
    action, comment = publish(gh, owner, name, number, body, existing)
    url = comment.get("html_url")
    typer.echo(f"dashcam: {action} the comment on {owner}/{name}#{number}" + (f": {url}" if url else ""))


@app.command()
@guarded
def diff(
    before: str = typer.Argument(..., help="The profile before the change (.sqlite or .nsys-rep)."),
    after: str = typer.Argument(..., help="The profile after the change."),
    threshold: float = typer.Option(5.0, "--threshold", help="Smallest change, in percent, that is not neutral."),
    fmt: str = typer.Option("text", "--format", help="text (also rich, plain) | markdown | json | csv (the tables)."),
    fail_on_regression: bool = typer.Option(False, "--fail-on-regression",
                                            help="Exit with code 13 when the verdict is regressed, 32 when the "
                                            "pair is not comparable."),
    limit: int = typer.Option(10, "--limit", help="Rows in the kernel lists."),
    min_shared: Optional[float] = typer.Option(None, "--min-shared", metavar="PCT", help="Least share of each "
                                               "profile's kernel time in kernels both run (default 50); below it "
                                               "the pair is not comparable."),
):
    """Compare two profiles of the same workload: step time, GPU busy, kernels, copies, syncs, and a verdict."""
    from dashcam.errors import BadParameter, NotComparable
    from dashcam.profile import Profile
    from dashcam.reports.comparability import MIN_SHARED_PCT
    from dashcam.reports.diff import REGRESSION_EXIT_CODE, compare, to_csv, to_markdown, to_text

    fmt = _report_format(fmt)
    min_shared = MIN_SHARED_PCT if min_shared is None else min_shared
    if threshold < 0 or limit < 1 or not 0 <= min_shared <= 100:
        raise BadParameter("--threshold must be >= 0, --limit >= 1 and --min-shared from 0 to 100")
    result = compare(Profile.open(before), Profile.open(after), threshold_pct=threshold, limit=limit,
                     min_shared_pct=min_shared)
    if fmt == "json":
        _print_json(result)
    else:
        sys.stdout.write({"markdown": to_markdown, "csv": to_csv, "text": to_text}[fmt](result))
    if fail_on_regression and result.verdict == "not_comparable":
        raise NotComparable(f"not comparable, so no regression verdict: {result.reason}")
    if fail_on_regression and result.verdict == "regressed":
        fail(f"regressed: {result.reason}", REGRESSION_EXIT_CODE)


@app.command("eval")
@guarded
def eval_cases(
    cases: Optional[str] = typer.Option(None, "--cases", help="Case files (glob); default evals/cases/*.yaml."),
    offline: bool = typer.Option(False, "--offline", help="Answer with the deterministic planner (the default "
                                 "when no model is configured)."),
    model: Optional[str] = typer.Option(None, "--model", help="Score a real model (OPENAI_API_KEY / OPENAI_BASE_URL)."),
    replay: bool = typer.Option(False, "--replay", help="LLM mode on scripted model replies (evals/replays/*.yaml) "
                                "served on 127.0.0.1."),
    replays: Optional[str] = typer.Option(None, "--replays", help="Folder of replay cases (implies --replay; "
                                          "default evals/replays)."),
    record: Optional[str] = typer.Option(None, "--record", help="Run the cases on the configured model and save its "
                                         "replies in DIR as replay cases."),
    thresholds: Optional[str] = typer.Option(None, "--thresholds", help="Thresholds file (default "
                                             "evals/thresholds.yaml)."),
    as_json: bool = typer.Option(False, "--json", help="Print every case with each check as JSON."),
    llm_timeout: Optional[float] = _llm_timeout(),
    llm_retries: Optional[int] = _llm_retries(),
    llm_max_tokens: Optional[int] = _llm_max_tokens(),
    llm_context: Optional[int] = _llm_context(),
):
    """Score the agent on cases with known answers: a table per intent; exit 14 when below the thresholds."""
    with _llm_limits(llm_timeout, llm_retries, llm_max_tokens, llm_context):
        _eval_cases(cases, offline, model, replay, replays, record, thresholds, as_json)


def _eval_cases(cases, offline, model, replay, replays, record, thresholds, as_json) -> None:
    from dashcam.agent.eval import EXIT_BELOW, choose_mode, render_report, run_eval

    mode = choose_mode(offline, replay or replays is not None, model, record)
    console = _console()
    kwargs = {"cases_glob": cases, "replays_dir": replays, "model": model, "record_dir": record,
              "thresholds_path": thresholds}
    if console.is_terminal and not as_json:
        from rich.text import Text

        with console.status("eval") as status:
            report = run_eval(mode, on_case=lambda i, n, case_id: status.update(Text(f"{i + 1}/{n} {case_id}")),
                              **kwargs)
    else:
        report = run_eval(mode, **kwargs)
    if as_json:
        _print_json(report.to_json())
    else:
        render_report(report, console)
    if not report.ok:
        fail(report.failure_line(), EXIT_BELOW)


@app.command()
@guarded
def timeline(
    profile: str = typer.Argument(..., help="The .sqlite export (or .nsys-rep)."),
    gpu: Optional[List[int]] = typer.Option(None, "--gpu", help="Only this GPU (repeat for several)."),
    start: Optional[float] = typer.Option(None, "--start", help="Window start, ms from the start of GPU activity."),
    end: Optional[float] = typer.Option(None, "--end", help="Window end, ms from the start of GPU activity."),
    around: Optional[str] = typer.Option(None, "--around", help="Zoom on: gap (the largest GPU gap), "
                                         "kernel:NAME or nvtx:NAME (its first instance), +- 50 % of its length."),
    output: Optional[str] = typer.Option(None, "-o", "--output", help="Write FILE.svg, FILE.html or FILE.png "
                                         "instead (the kind from the suffix, or --format)."),
    fmt: Optional[str] = typer.Option(None, "--format", "-f", help="text (the strips) | svg | html | png; "
                                      "default: from -o's suffix, else text."),
):
    """What ran when: GPU kernels and copies, the busiest CPU threads' CUDA calls and NVTX ranges, as strips."""
    from dashcam.profile import Profile
    from dashcam.reports.timeline import (
        PICTURE_EVENTS_PER_ROW,
        build_timeline,
        output_kind,
        parse_around,
        render_strips,
        save_picture,
    )

    kind = output_kind(fmt, output)
    # A picture keeps every event it draws: cap rows at the longest events so a page stays small;
    # the terminal strips bin events into cells and can take more.
    tl = build_timeline(Profile.open(profile), start_ms=start, end_ms=end, gpus=gpu or None,
                        around=parse_around(around), max_events_per_row=PICTURE_EVENTS_PER_ROW if output else 20000)
    if output is None:
        from dashcam.text.console import make_console

        render_strips(tl, make_console(drawing=True))  # fitted to the terminal, or 120 columns in a pipe
        return
    save_picture(tl, output, kind)
    typer.echo(f"wrote {output}")


@app.command()
@guarded
def record(
    command: List[str] = typer.Argument(..., help="The program and its arguments, after `--`."),
    goal: str = typer.Option("idle", "--goal", help="What the analysis is for: idle | cpu | memory | nccl | metrics "
                             "(chooses the nsys options; docs/record.md)."),
    output: Optional[str] = typer.Option(None, "--output", "-o", help="The report's name (NAME.nsys-rep); default "
                                         "the program's name."),
    duration: Optional[int] = typer.Option(None, "--duration", help="Stop recording (and the program) after S "
                                           "seconds."),
    capture_range: Optional[str] = typer.Option(None, "--capture-range", help="Record only from an NVTX range "
                                                "(nvtx:NAME, nvtx:NAME@DOMAIN) or cudaProfilerStart "
                                                "(cudaProfilerApi) on."),
    question: Optional[str] = typer.Option(None, "--ask", help="Answer this question about the report instead of "
                                           "printing its summary."),
):
    """Run a program under nsys profile with the options dashcam needs, keep the .nsys-rep and print its summary."""
    from dashcam.profile.record import plan_recording, run_recording

    plan = plan_recording(command, goal=goal, output=output, duration=duration, capture_range=capture_range)
    typer.echo(f"recording: {plan.shell}")
    for note in plan.notes():
        typer.echo(note)
    sys.stdout.flush()
    rec = run_recording(plan)
    typer.echo(f"report: {rec.report}")
    if question:
        _ask(question, str(rec.report), None, False, False)
    else:
        _summary(str(rec.report), "text", False, None, None)
    rec.check_program()


@app.command("mcp")
@guarded
def mcp_server(
    root: Optional[List[str]] = typer.Option(None, "--root", metavar="DIR", help="Also open profiles under DIR "
                                             "(repeatable), besides the current folder and the roots the client "
                                             "declares."),
    http: bool = typer.Option(False, "--http", help="Serve streamable HTTP at http://HOST:PORT/mcp instead of stdio."),
    host: str = typer.Option("127.0.0.1", "--host", help="With --http: the address to listen on."),
    port: int = typer.Option(8000, "--port", help="With --http: the port."),
    keep_open: int = typer.Option(4, "--keep-open", help="Profiles kept open between calls (least recently used "
                                  "closed first)."),
    max_result_tokens: int = typer.Option(20000, "--max-result-tokens", help="Cut a result's longest lists to fit "
                                          "this many tokens (with a note of what was kept)."),
):
    """Serve the tools, summary, diff, timeline and grounding check to coding agents over MCP (stdio by default)."""
    from dashcam.mcp import serve

    serve([".", *(root or [])], http=http, host=host, port=port, keep_open=keep_open,
          max_result_tokens=max_result_tokens)


from dashcam.cli_help import add_examples, show_flags_as_flags  # noqa: E402 - once every command is defined

add_examples(app)
show_flags_as_flags()


def main() -> None:  # pragma: no cover - console entry
    app()


if __name__ == "__main__":  # pragma: no cover
    main()
