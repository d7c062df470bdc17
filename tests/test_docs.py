"""The documentation keeps up with the code: README.md (the front door) and docs/ (the reference).

Every list below is read from the code — the CLI's commands and options, the tools and their
parameter and result models, the exit codes, the summary's thresholds — so a new command, flag,
tool, field or exit code fails here until it is documented, and a removed one fails until the docs
stop mentioning it.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest
import typer.main
from pydantic import BaseModel

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
README_MAX_LINES = 200

FENCE = re.compile(r"^(```+|~~~+)[^\n]*\n.*?^\1[ \t]*$", re.MULTILINE | re.DOTALL)
INLINE_CODE = re.compile(r"(`+)(.+?)\1", re.DOTALL)
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$", re.MULTILINE)
TABLE_CODE = re.compile(r"^\|\s*(\d+)\s*\|", re.MULTILINE)
FLAG = re.compile(r"(?<![\w./-])(--?[A-Za-z][\w-]*)")


def doc_pages() -> list[Path]:
    return sorted(DOCS.glob("*.md"))


def read(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def all_docs_text() -> str:
    return "\n".join(read(p) for p in doc_pages())


def section(text: str, heading: str) -> str:
    """The body under the first heading whose text is ``heading``, up to the next heading of its level or above."""
    for m in HEADING.finditer(text):
        if m.group(2).strip() == heading:
            level = len(m.group(1))
            rest = text[m.end():]
            nxt = re.search(rf"^#{{1,{level}}}\s", rest, re.MULTILINE)
            return rest[: nxt.start()] if nxt else rest
    raise AssertionError(f"no heading {heading!r}")


# -- the command line ---------------------------------------------------------------------------------

def cli_commands() -> dict[tuple[str, ...], object]:
    """Every runnable command of ``dashcam.cli.app`` by its path, sub-apps (``tool``) walked recursively."""
    from dashcam.cli import app

    out: dict[tuple[str, ...], object] = {}

    def walk(cmd, path: tuple[str, ...]) -> None:
        subs = getattr(cmd, "commands", None)
        if subs:
            for name, sub in subs.items():
                walk(sub, path + (name,))
        else:
            out[path] = cmd

    walk(typer.main.get_command(app), ())
    return out


def root_options() -> list:
    """The options of ``dashcam`` itself, given before the command."""
    from dashcam.cli import app

    return [p for p in typer.main.get_command(app).params if p.param_type_name == "option"]


def options(cmd) -> list[list[str]]:
    """Each option of a command as its list of spellings (``['--format', '-f']``)."""
    return [list(p.opts) + list(p.secondary_opts) for p in cmd.params if p.param_type_name == "option"]


def command_lines(text: str) -> list[str]:
    """Lines of code blocks and inline code spans that start with ``dashcam `` (a command someone may copy)."""
    out = []
    for block in FENCE.finditer(text):
        out += [ln.strip() for ln in block.group(0).splitlines() if ln.strip().startswith("dashcam ")]
    prose = FENCE.sub("", text)
    out += [m.group(2).strip() for m in INLINE_CODE.finditer(prose) if m.group(2).strip().startswith("dashcam ")]
    return out


def resolve(line: str, commands: dict[tuple[str, ...], object]) -> tuple[str, ...] | None:
    """The command path a ``dashcam ...`` line runs: the longest known path its words start with."""
    words = line.split()[1:]
    takes_value = {s: not p.is_flag for p in root_options() for s in p.opts}
    while words and words[0] in takes_value:  # options of dashcam itself (`dashcam --nsys PATH summary ...`)
        words = words[2:] if takes_value[words[0]] else words[1:]
    best = None
    for path in commands:
        if tuple(words[: len(path)]) == path and (best is None or len(path) > len(best)):
            best = path
    return best


def flags_in(line: str) -> set[str]:
    """The ``-x``/``--xx`` tokens of a command line, outside quoted values and ``#`` comments, before a `` -- ``
    (what follows is a program's own: ``dashcam record -- python train.py --epochs 1``)."""
    line = re.sub(r"\s#.*$", "", line)
    line = line.split(" -- ", 1)[0]
    line = re.sub(r"'[^']*'|\"[^\"]*\"", " ", line)
    return set(FLAG.findall(line))


def documented_command_lines() -> list[tuple[str, str]]:
    return [(p.name, ln) for p in [README, *doc_pages()] for ln in command_lines(read(p))]


def test_every_command_is_in_the_docs():
    text = all_docs_text()
    missing = [" ".join(path) for path in cli_commands()
               if not re.search(rf"`dashcam {re.escape(' '.join(path))}(?=[\s`])", text)]
    assert not missing, f"commands not documented in docs/ (as `dashcam NAME`): {missing}"


def test_every_top_level_command_is_in_the_readme_tour():
    readme = read(README)
    missing = sorted({path[0] for path in cli_commands()
                      if not re.search(rf"`dashcam {re.escape(path[0])}(?=[\s`])", readme)})
    assert not missing, f"commands missing from the README's command tour: {missing}"


def test_every_option_is_documented_with_its_command():
    commands = cli_commands()
    used_by: dict[tuple[str, ...], set[str]] = {path: set() for path in commands}
    for _, line in documented_command_lines():
        path = resolve(line, commands)
        if path is not None:
            used_by[path] |= flags_in(line)
    missing = []
    for path, cmd in commands.items():
        used = used_by[path]
        for spellings in options(cmd):
            if "--help" not in spellings and not used.intersection(spellings):
                missing.append(f"dashcam {' '.join(path)} {spellings[0]}")
    assert not missing, ("options no documented command line shows (write them in a ```bash block or a "
                         f"`dashcam ...` code span): {missing}")


def test_documented_commands_and_flags_exist():
    commands = cli_commands()
    wrong = []
    root_flags = {s for p in root_options() for s in p.opts}
    for page, line in documented_command_lines():
        path = resolve(line, commands)
        if path is None and set(flags_in(line)) <= root_flags and len(line.split()) == 2:  # `dashcam --version`
            continue
        if path is None:
            wrong.append(f"{page}: no such command: {line}")
            continue
        known = {s for spellings in options(commands[path]) for s in spellings} | {"--help"}
        known |= {s for p in root_options() for s in p.opts}
        wrong += [f"{page}: dashcam {' '.join(path)} has no {flag}: {line}" for flag in sorted(flags_in(line) - known)]
    assert not wrong, "\n".join(wrong)


# -- the tools ----------------------------------------------------------------------------------------

def model_fields(model: type[BaseModel], seen: set | None = None) -> set[str]:
    """Field names of a result model and of every model nested in it (lists, optionals, dicts)."""
    import typing

    seen = set() if seen is None else seen
    if model in seen:
        return set()
    seen.add(model)
    names = set(model.model_fields)
    for f in model.model_fields.values():
        stack = [f.annotation]
        while stack:
            a = stack.pop()
            if isinstance(a, type) and issubclass(a, BaseModel):
                names |= model_fields(a, seen)
            else:
                stack.extend(typing.get_args(a))
    return names


@pytest.fixture(scope="module")
def tools_doc() -> str:
    return read(DOCS / "tools.md")


def test_every_tool_has_a_section(tools_doc):
    from dashcam.tools import TOOL_NAMES

    headings = {m.group(2).strip().strip("`") for m in HEADING.finditer(tools_doc) if len(m.group(1)) == 2}
    missing = [name for name in TOOL_NAMES if name not in headings]
    assert not missing, f"tools without a '## NAME' section in docs/tools.md: {missing}"
    extra = sorted(h for h in headings - set(TOOL_NAMES) if re.fullmatch(r"[a-z_]+", h))
    assert not extra, f"docs/tools.md has sections for tools that do not exist: {extra}"


def test_every_tool_parameter_and_result_field_is_documented(tools_doc):
    from dashcam.tools import TOOL_NAMES, ToolParams, ToolResult, get_tool

    common_params, common_fields = set(ToolParams.model_fields), model_fields(ToolResult)
    for name in ("gpu", "start_ms", "end_ms", "limit", *common_fields):
        assert f"`{name}`" in tools_doc, f"docs/tools.md does not describe the common {name!r}"
    missing = []
    for name in TOOL_NAMES:
        tool = get_tool(name)
        body = section(tools_doc, name)
        for p in sorted(set(tool.params.model_fields) - common_params):
            if f"`{p}`" not in body:
                missing.append(f"{name}: parameter {p}")
        for f in sorted(model_fields(tool.result) - common_fields):
            if f"`{f}`" not in body and f"`{f}[]`" not in body:
                missing.append(f"{name}: result field {f}")
    assert not missing, f"undocumented in docs/tools.md: {missing}"


def test_the_readme_tools_table_lists_every_tool():
    from dashcam.tools import TOOL_NAMES

    readme = read(README)
    missing = [n for n in TOOL_NAMES if not re.search(rf"^\|\s*`{n}`\s*\|", readme, re.MULTILINE)]
    assert not missing, f"tools missing from the README's tools table: {missing}"


# -- exit codes ---------------------------------------------------------------------------------------

def github_exit_codes() -> set[int]:
    from dashcam.reports.github import GitHubError

    codes, stack = set(), [GitHubError]
    while stack:
        cls = stack.pop()
        codes.add(cls.exit_code)
        stack.extend(cls.__subclasses__())
    return codes


def expected_exit_codes() -> set[int]:
    from dashcam.agent.eval import EXIT_BELOW
    from dashcam.errors import EXIT_CODES
    from dashcam.reports.diff import REGRESSION_EXIT_CODE

    return set(EXIT_CODES.values()) | {REGRESSION_EXIT_CODE, EXIT_BELOW} | github_exit_codes()


def test_every_exit_code_is_in_the_exit_code_table():
    table = section(read(DOCS / "input.md"), "Exit codes")
    documented = {int(c) for c in TABLE_CODE.findall(table)}
    missing = sorted(expected_exit_codes() - documented)
    assert not missing, f"exit codes missing from the table in docs/input.md: {missing}"


def test_the_pr_comment_page_lists_its_exit_codes():
    table = section(read(DOCS / "pr-comment.md"), "Exit codes")
    documented = {int(c) for c in TABLE_CODE.findall(table)}
    missing = sorted(github_exit_codes() - documented)
    assert not missing, f"pr-comment exit codes missing from docs/pr-comment.md: {missing}"


# -- thresholds ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("page", ["definitions.md"])
def test_the_thresholds_are_listed_with_their_values(page):
    """Every threshold a verdict depends on is in the definitions page, with its value (one place)."""
    from dashcam.reports.summary import THRESHOLDS

    text = read(DOCS / page)
    for name, value in THRESHOLDS.items():
        row = next((ln for ln in text.splitlines() if ln.startswith("|") and f"`{name}`" in ln), None)
        assert row is not None, f"{page}: no table row for {name}"
        assert re.search(rf"\|\s*{value:g}\s*\|", row), f"{page}: {name} should be {value:g}: {row}"


# -- links and pages ----------------------------------------------------------------------------------

def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = INLINE_CODE.sub(lambda m: m.group(2), heading).strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for m in HEADING.finditer(FENCE.sub("", read(path))):
        s = slug(m.group(2))
        n = seen.get(s, 0)
        seen[s] = n + 1
        out.add(s if n == 0 else f"{s}-{n}")
    return out


def relative_links(path: Path) -> list[str]:
    text = INLINE_CODE.sub("", FENCE.sub("", read(path)))
    return [t for t in LINK.findall(text) if not re.match(r"[a-z][a-z0-9+.-]*:", t, re.IGNORECASE)]


@pytest.mark.parametrize("page", [README, *doc_pages()], ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(page):
    broken = []
    for target in relative_links(page):
        file_part, _, anchor = target.partition("#")
        dest = (page.parent / file_part).resolve() if file_part else page
        if not dest.exists():
            broken.append(f"{target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{target}: no heading with anchor #{anchor} in {dest.name}")
    assert not broken, f"{page.name}: {broken}"


def test_every_docs_page_is_linked_from_the_index_and_the_readme():
    pages = {p.name for p in doc_pages()} - {"index.md"}
    assert pages, "docs/ has no pages"
    index = {Path(t.partition("#")[0]).name for t in relative_links(DOCS / "index.md")}
    readme = {Path(t.partition("#")[0]).name for t in relative_links(README) if t.startswith("docs/")}
    assert not pages - index, f"pages missing from docs/index.md: {sorted(pages - index)}"
    assert not pages - readme, f"pages the README does not link: {sorted(pages - readme)}"
    assert "index.md" in readme, "the README should link docs/index.md"


def test_readme_is_short():
    n = len(read(README).splitlines())
    assert n <= README_MAX_LINES, f"README.md has {n} lines; at most {README_MAX_LINES} (reference goes to docs/)"
