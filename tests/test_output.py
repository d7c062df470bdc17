"""Output for where it goes (docs/output.md): a pipe gets no wrapping and no colour codes, COLUMNS and NO_COLOR
are honoured, --format renders the tables as plain, markdown, json or csv, one shortener keeps long names
apart, headings say what the text says, the evidence rows are words, --version and help examples."""
from __future__ import annotations

import csv
import io
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from dashcam.testing.builder import ExportBuilder

DASHCAM = [sys.executable, "-m", "dashcam"]
COLOUR = re.compile(r"\x1b\[(?:[0-9;]*;)?(?:3[0-8]|9[0-7])(?:;[0-9;]*)?m")  # an SGR foreground colour
KERNEL_A = ("void cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<cutlass::gemm::threadblock::"
            "MmaMultistage<cutlass::arch::Sm80, execute_kernel<float, 128, 64, 32>, cutlass::epilogue::thread::"
            "LinearCombination<float, 4, float, float>, cutlass::gemm::threadblock::Swizzle<8>>>>(Params)")
KERNEL_B = KERNEL_A.replace("execute_kernel", "execute_split_k_kernel")


def _steady(path: Path, kernel_ns: int = 850_000, names=("gemm_kernel",), steps: int = 200,
            gpu_info: bool = True) -> Path:
    """One GPU, ``steps`` launches 1 ms apart each running ``kernel_ns``: idle (1 ms - kernel_ns) per step,
    waiting on the CPU (the launch call ends 10 µs before the kernel). ``gpu_info``: the GPU's name and SMs
    recorded (else the export says nothing of the GPU but its activity)."""
    b = ExportBuilder().process(100)
    if gpu_info:
        b.gpu(0)
    t = 1_000_000
    for i in range(steps):
        b.launch(0, t - 20_000, t - 10_000, t, t + kernel_ns, name=names[i % len(names)])
        t += 1_000_000
    return b.write(path)


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    cache = tmp_path_factory.mktemp("cache")
    e = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "NO_COLOR", "FORCE_COLOR", "LINES")}
    e.update(DASHCAM_CACHE_DIR=str(cache), HOME=str(cache))
    return e


@pytest.fixture(scope="module")
def near(tmp_path_factory) -> Path:
    """Idle 15 % of the window (low severity): "Nearly GPU-bound"."""
    return _steady(tmp_path_factory.mktemp("near") / "near.sqlite")


@pytest.fixture(scope="module")
def twins(tmp_path_factory) -> Path:
    """Two kernels whose 200-character names differ only in the middle, 100 launches each."""
    return _steady(tmp_path_factory.mktemp("twins") / "twins.sqlite", names=(KERNEL_A, KERNEL_B))


def run(env, *args, extra: dict | None = None) -> subprocess.CompletedProcess:
    """``dashcam ARGS`` with stdout a pipe (not a terminal)."""
    return subprocess.run([*DASHCAM, *map(str, args)], capture_output=True, text=True, timeout=300,
                          env={**env, **(extra or {})})


# -- not a terminal ---------------------------------------------------------------------------------

def test_a_pipe_gets_whole_commands_and_unwrapped_tables(env, near):
    """The answer's reproduce commands are one line each, the evidence table's rows are not folded at 80
    columns, and there is no colour code."""
    p = run(env, "ask", "why is GPU 0 idle?", near, "--offline")
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert f"  dashcam tool run gpu_gaps {near} --gpu 0" in lines or f"  dashcam tool run gpu_gaps {near}" in lines
    assert any(len(x) > 80 for x in lines)  # the paragraph is one line, not folded at rich's default 80
    row = next(x for x in lines if x.startswith("│ gpu_gaps"))
    assert "GPU 0: kernel-busy 85.1 %, kernel-idle" in row  # the whole row on one line
    assert "\x1b[" not in p.stdout


@pytest.mark.parametrize("args", [("ask", "why is GPU 0 idle?", "PROFILE", "--offline"), ("info", "PROFILE"),
                                  ("tool", "run", "top_kernels", "PROFILE", "--format", "csv")])
def test_a_reader_that_closes_the_pipe_ends_the_command_quietly(env, near, args):
    """``dashcam … | head``: the pipe is closed before the first write; the command stops with status 0 and
    nothing on stderr (rich's own handler says 1; a script under ``set -o pipefail`` would stop)."""
    cmd = [*DASHCAM, *(str(near) if a == "PROFILE" else a for a in args)]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    p.stdout.close()  # the reader is gone before the first byte
    err = p.stderr.read().decode()
    assert p.wait(timeout=300) == 0 and err == ""


def test_force_color_makes_a_pipe_a_terminal(env, near):
    p = run(env, "ask", "why is GPU 0 idle?", near, "--offline", extra={"FORCE_COLOR": "1", "COLUMNS": "100"})
    assert COLOUR.search(p.stdout)  # what a CI log that renders colours asks for
    lines = [re.sub(r"\x1b\[[0-9;]*m", "", x) for x in p.stdout.splitlines()]
    assert max(len(x) for x in lines) <= 100 and "time (ms)" in p.stdout  # the terminal's width and strip


def test_columns_sets_the_width_of_tables_but_commands_stay_whole(env, near):
    p = run(env, "ask", "why is GPU 0 idle?", near, "--offline", extra={"COLUMNS": "60"})
    assert p.returncode == 0, p.stderr
    table = [x for x in p.stdout.splitlines() if x[:1] in "┏┃┡│└"]
    assert table and max(len(x) for x in table) <= 60
    assert any(x.strip().startswith("dashcam tool run gpu_gaps") and str(near) in x for x in p.stdout.splitlines())


def test_the_timeline_strips_fill_120_columns_in_a_pipe_or_columns(env, near):
    from dashcam.text.console import DRAWING

    for extra, width in (({}, DRAWING), ({"COLUMNS": "70"}, 70)):
        p = run(env, "timeline", near, extra=extra)
        assert p.returncode == 0, p.stderr
        strips = [x for x in p.stdout.splitlines() if x.startswith("GPU 0 kernels")]
        assert strips and all(len(x) == width for x in strips)  # the legend and caption are prose: not cut


def test_no_color_at_a_terminal(env, near):
    pexpect = pytest.importorskip("pexpect")
    base = {**env, "COLUMNS": "120", "LINES": "40"}
    coloured = pexpect.run(shlex.join([*DASHCAM, "tool", "run", "sync", str(near)]), env=base, encoding="utf-8",
                           timeout=120)
    plain = pexpect.run(shlex.join([*DASHCAM, "tool", "run", "sync", str(near)]), env={**base, "NO_COLOR": "1"},
                        encoding="utf-8", timeout=120)
    assert COLOUR.search(coloured)  # a terminal: rich's colours
    assert "sync" in plain and not COLOUR.search(plain)


# -- --format -----------------------------------------------------------------------------------------

def test_formats_of_a_tool_table(env, near):
    as_json = json.loads(run(env, "tool", "run", "top_kernels", near, "--json").stdout)
    assert json.loads(run(env, "tool", "run", "top_kernels", near, "--format", "json").stdout) == as_json
    [k] = as_json["kernels"]
    assert (k["name"], k["count"]) == ("gemm_kernel", 200)

    rows = list(csv.reader(io.StringIO(run(env, "tool", "run", "top_kernels", near, "--format", "csv").stdout)))
    # numbers with units are plain numbers in CSV, the unit in the header (text/formats.py)
    assert rows[0] == ["kernel", "count", "total (ms)", "avg (ms)", "max (ms)", "min (ms)", "%"]
    assert rows[1][:3] == ["gemm_kernel", "200", "170"] and rows[1][-1] == "100"

    md = run(env, "tool", "run", "top_kernels", near, "--format", "markdown").stdout.splitlines()
    i = md.index("| kernel | count | total | avg | max | min | % |")
    assert md[i + 1] == "|---|---|---|---|---|---|---|"
    assert md[i + 2].startswith("| gemm_kernel | 200 | 170.000 ms |")

    plain = run(env, "tool", "run", "top_kernels", near, "--format", "plain").stdout
    assert "│" not in plain and "\x1b[" not in plain
    assert re.search(r"^gemm_kernel\s+200\s+170\.000 ms", plain, re.M)


def test_format_on_info_and_lists(env, near):
    info = run(env, "info", near, "--format", "csv").stdout
    assert "kernels,api_calls,memcpys,memsets,sync_events,nvtx_events" in info and "\n200,200,0,0,0,0" in info
    assert json.loads(run(env, "info", near, "--format", "json").stdout)["rows"]["kernels"] == 200
    tools = run(env, "tool", "list", "--format", "plain").stdout.splitlines()
    assert tools[0].split() == ["tool", "what", "it", "answers"] and any(x.startswith("gpu_gaps ") for x in tools)
    assert json.loads(run(env, "cache", "list", "--format", "json").stdout)["caches"]


def test_csv_of_the_diff_and_the_fleet(env, tmp_path):
    from dashcam.testing import fleets

    before = _steady(tmp_path / "before.sqlite", kernel_ns=500_000)
    after = _steady(tmp_path / "after.sqlite", kernel_ns=850_000)
    text = run(env, "diff", before, after, "--format", "csv").stdout
    blocks = [list(csv.reader(io.StringIO(b))) for b in text.strip().split("\n\n")]
    assert blocks[0][0] == ["metric", "before", "after", "delta"]
    kernels = next(b for b in blocks if b[0][0].startswith("# Kernel time"))
    assert kernels[2][:3] == ["gemm_kernel", "0.5", "0.85"]  # per step: 1 x 0.5 ms, 1 x 0.85 ms
    assert kernels[1][1:3] == ["before (ms)", "after (ms)"]
    rows = list(csv.reader(io.StringIO(run(env, "fleet", fleets.uniform_fleet(tmp_path / "fleet"), "--workers", "1",
                                           "--format", "csv").stdout)))
    assert rows[0][:3] == ["rank", "host", "GPU"] and [r[0] for r in rows[1:]] == ["0", "1", "2", "3"]


def test_bad_formats_are_exit_11(env, near):
    p = run(env, "tool", "run", "overview", near, "--format", "yaml")
    assert p.returncode == 11 and p.stderr.strip().startswith("dashcam: error: --format must be one of rich, plain")
    p = run(env, "info", near, "--json", "--format", "csv")
    assert p.returncode == 11 and "--json is --format json" in p.stderr


# -- one shortener ------------------------------------------------------------------------------------

def test_names_that_differ_only_in_the_middle_stay_apart():
    from dashcam.text.format import name
    from dashcam.text.shorten import MAX_NAME, shorten, shorten_all

    a, b = shorten_all([KERNEL_A, KERNEL_B])
    assert a != b and "execute_kernel" in a and "execute_split_k_kernel" in b
    assert len(a) <= MAX_NAME and len(b) <= MAX_NAME and a.startswith(KERNEL_A[:20])
    assert name(KERNEL_A, [KERNEL_B]) == f"`{a}`"
    assert shorten("short") == "short" and len(shorten(KERNEL_A)) == MAX_NAME  # alone: start…end


def test_surfaces_keep_the_two_kernels_apart(env, twins):
    plain = run(env, "tool", "run", "top_kernels", twins, "--format", "plain").stdout
    assert "execute_kernel<" in plain and "execute_split_k_kernel<" in plain
    p = run(env, "ask", "which kernels take the most time?", twins, "--offline")
    assert p.returncode == 0, p.stderr
    assert "execute_kernel<" in p.stdout and "execute_split_k_kernel<" in p.stdout


# -- headings from the verdict ------------------------------------------------------------------------

def test_the_heading_says_what_the_paragraph_says(env, near):
    p = run(env, "summary", near)
    head, _, paragraph = p.stdout.splitlines()[:3]
    assert head == f"dashcam summary: nearly GPU-bound  ({near})"
    assert paragraph.startswith("Nearly GPU-bound: GPU 0 is kernel-idle 14.9 %")
    md = run(env, "summary", near, "--format", "markdown").stdout
    assert md.startswith("### dashcam summary: nearly GPU-bound (`near.sqlite`)\n\nNearly GPU-bound:")


def test_the_pr_comment_heading_carries_the_diff_verdict(env, tmp_path):
    before = _steady(tmp_path / "before.sqlite", kernel_ns=500_000)
    after = _steady(tmp_path / "after.sqlite", kernel_ns=850_000)
    diff = json.loads(run(env, "diff", before, after, "--format", "json").stdout)
    assert diff["verdict"] == "regressed"
    body = run(env, "pr-comment", after, "--baseline", before, "--dry-run").stdout
    headings = [x for x in body.splitlines() if x.startswith("#")]
    assert headings[0] == "## dashcam: regressed against the baseline `before.sqlite`"


# -- evidence rows, notes, findings, windows ------------------------------------------------------------

def test_evidence_rows_are_words(env, near):
    out = run(env, "ask", "why is GPU 0 idle?", near, "--offline").stdout
    assert "device_id=" not in out and "window_start_ns" not in out and "kernel_busy_pct" not in out
    row = next(x for x in out.splitlines() if x.startswith("│ gpu_gaps"))
    assert "GPU 0: kernel-busy 85.1 %, kernel-idle 29.85 ms (14.9 %), 199 gaps" in row  # 170 of 199.85 ms; 199 x 150 µs


def test_evidence_rows_write_thread_ids_as_nsys_does():
    from dashcam.text.figures import evidence_row

    row = evidence_row({"tool": "iterations", "method": "nvtx", "pid": 1000, "tid": 123456, "step_count": 6})
    assert row == "method nvtx; pid 1000; tid 123456"  # was "pid 1,000; tid 123,456"


def test_each_note_once_per_answer_and_once_per_chat(near, monkeypatch, tmp_path):
    monkeypatch.setenv("DASHCAM_CACHE_DIR", str(tmp_path))
    from dashcam.agent.ask import ask, render_answer
    from dashcam.profile import Profile
    from dashcam.text.formats import format_console

    p = Profile.open(near, progress=False)
    a = ask("why is GPU 0 idle?", p, offline=True)
    a = a.model_copy(update={"notes": ["SM count unknown here", "SM count unknown here", "other"]})
    seen: set = set()
    buf = io.StringIO()
    console = format_console("plain")
    console.file = buf
    render_answer(a, console, str(near), p, seen)
    render_answer(a, console, str(near), p, seen)  # the next answer of the same chat
    text = buf.getvalue()
    assert text.count("SM count unknown here") == 1 and text.count("other") == 1


def test_a_range_that_is_no_range_is_one_figure(tmp_path, monkeypatch):
    monkeypatch.setenv("DASHCAM_CACHE_DIR", str(tmp_path / "cache"))
    from dashcam.profile import Profile
    from dashcam.reports.summary import summarize

    b = ExportBuilder().gpu(0).gpu(1).process(100)
    for d in (0, 1):
        t = 1_000_000
        for _ in range(50):
            b.launch(d, t - 20_000, t - 10_000, t, t + 500_000)
            t += 1_000_000
    s = summarize(Profile.open(b.write(tmp_path / "two.sqlite"), progress=False))
    busy = next(f for f in s.findings if f.kind == "gpu_busy")
    assert busy.title == "GPUs 0 and 1 each kernel-busy 50.5 % of the 49.5 ms window"


def test_chat_summary_leaves_out_an_unknown_gpu_name(near, monkeypatch, tmp_path):
    monkeypatch.setenv("DASHCAM_CACHE_DIR", str(tmp_path))
    from dashcam.agent.chat import ChatSession
    from dashcam.profile import Profile

    nameless = _steady(tmp_path / "nameless.sqlite", gpu_info=False)
    s = ChatSession(Profile.open(nameless, progress=False), str(nameless), offline=True)
    text = s.cmd_summary("")
    assert "(?)" not in text and "\nGPU 0: 200 kernels" in text
    named = ChatSession(Profile.open(near, progress=False), str(near), offline=True).cmd_summary("")
    assert "\nGPU 0 (NVIDIA H100 80GB HBM3): 200 kernels" in named


@pytest.mark.parametrize("args, words", [
    (["--start", "500", "--end", "100"], "--start 500 is after --end 100"),
    (["--start", "100", "--end", "100"], "--start 100 is at --end 100"),
    (["--start", "900"], "--start 900 ms is past the end of the profile window (0 to 199.850 ms)"),
])
def test_window_errors_say_what_is_wrong(env, near, args, words):
    p = run(env, "tool", "run", "overview", near, *args)
    assert p.returncode == 11 and p.stderr.startswith(f"dashcam: error: {words}") and p.stdout == ""


# -- --version, help --------------------------------------------------------------------------------------

def test_version(env):
    from dashcam import __version__

    p = run(env, "--version")
    assert p.returncode == 0 and p.stdout == f"dashcam {__version__}\n"


def _commands():
    import typer.main

    from dashcam.cli import app

    root = typer.main.get_command(app)
    out = {(): root}

    def walk(group, path):
        for name, cmd in group.commands.items():
            out[path + (name,)] = cmd
            if hasattr(cmd, "commands"):
                walk(cmd, path + (name,))

    walk(root, ())
    return root, out


def test_every_help_shows_examples_and_flags_as_flags():
    from typer.testing import CliRunner

    from dashcam.cli import app
    from dashcam.cli_help import EXAMPLES

    _, commands = _commands()
    assert set(EXAMPLES) == {" ".join(p) for p in commands}
    for path in commands:
        out = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": "200"}).output
        assert "Examples:" in out and EXAMPLES[" ".join(path)][0] in out, path
        assert "<bool>" not in out, path


def test_every_example_parses_against_its_command():
    import typer

    from dashcam.cli_help import EXAMPLES

    root, commands = _commands()
    for examples in EXAMPLES.values():
        for example in examples:
            words = shlex.split(example)[1:]
            cmd, path = root, ()
            while words and (path + (words[0],)) in commands:
                path += (words.pop(0),)
                cmd = commands[path]
            try:  # parses and checks the options and arguments; runs nothing (but --version's eager callback)
                cmd.make_context(" ".join(("dashcam",) + path), words)
            except typer.Exit as e:
                assert e.exit_code == 0, example


def test_the_readme_invocations_are_help_examples():
    from dashcam.cli_help import EXAMPLES

    readme = (Path(__file__).parents[1] / "README.md").read_text()
    block = readme.split("A few invocations:", 1)[1].split("```bash\n", 1)[1].split("```", 1)[0]
    every = {x for xs in EXAMPLES.values() for x in xs}
    for line in block.splitlines():
        line = line.split("  #", 1)[0].strip()
        assert line in every, line


def test_csv_numbers_with_units_become_numbers_in_one_unit():
    """A column of "36.000 ms" and "400.00 µs" is ms; "1,519" a count; "25.0%" a share; a column with anything else,
    or mixed kinds, stays as written."""
    from dashcam.text.formats import csv_table

    text = csv_table("t", ["kernel", "count", "total", "share", "size", "note"],
                     [["a", "1,519", "36.000 ms", "25.0%", "1.2 GB", "x"], ["b", "2", "400.00 µs", "-", "512 bytes",
                                                                            "3 ms"]])
    rows = list(csv.reader(io.StringIO(text.split("\n", 1)[1])))
    assert rows == [["kernel", "count", "total (ms)", "share (%)", "size (bytes)", "note"],
                    ["a", "1519", "36", "25", "1200000000", "x"], ["b", "2", "0.4", "", "512", "3 ms"]]


def test_evidence_rows_name_the_time_share_each_tool_measures():
    """iterations' gpu_busy_pct is its kernels' union: kernel-busy; range_detail's is any GPU work: busy."""
    from dashcam.text.figures import evidence_row

    step = {"tool": "iterations", "steps": [{"index": 0, "duration_ns": 20_000_000, "gpu_busy_pct": 40.0}]}
    assert evidence_row(step) == "index 0, duration 20 ms, kernel-busy 40.0 %"
    rng = {"tool": "range_detail", "instances": 2, "gpu_busy_pct": 99.9}
    assert "busy 99.9 %" in evidence_row(rng) and "kernel-busy" not in evidence_row(rng)
