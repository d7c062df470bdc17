"""dashcam mcp: the MCP SDK's own client spawns `dashcam mcp` over stdio (and once over HTTP) and checks what
an agent sees: every tool with its schema, the same JSON as `dashcam tool run --json` inside the untrusted
wrapper, tool errors that leave the server serving, the roots, the open-profile cache and progress, the
resources and prompts."""
from __future__ import annotations

import functools
import json
import os
import shutil
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import anyio
import mcp.types as types
import pytest
from anyio.from_thread import start_blocking_portal
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from typer.testing import CliRunner

from dashcam.agent.llm import UNTRUSTED
from dashcam.cli import app
from dashcam.testing import fleets
from dashcam.testing.scenarios import INJECTED_KERNEL, INJECTED_NVTX, demo, injection
from dashcam.tools import TOOL_NAMES, get_tool

ROOT = Path(__file__).resolve().parents[1]
TOOL_ARGS = {"sql": {"query": "SELECT device_id, count(*) AS n FROM kernels GROUP BY 1 ORDER BY 1"}}
REPORTS = ["list_profiles", "summary", "diff", "timeline", "fleet", "check_grounding"]


def server_command() -> list[str]:
    """`dashcam mcp`: the console script of this environment, else the same CLI through python -m."""
    script = Path(sys.executable).with_name("dashcam")
    return [str(script), "mcp"] if script.exists() else [sys.executable, "-m", "dashcam", "mcp"]


def server_env(cache: Path) -> dict[str, str]:
    """What an agent passes: little beyond the SDK's safe defaults (PATH, HOME...), here the private cache."""
    env = {"DASHCAM_CACHE_DIR": str(cache)}
    for name in ("TIKTOKEN_CACHE_DIR", "PYTHONPATH"):
        if os.environ.get(name):
            env[name] = os.environ[name]
    return env


class Session:
    """A synchronous face of the SDK's Client, its event loop in a portal thread (one server for many tests)."""

    def __init__(self, portal, client: Client) -> None:
        self.portal, self.client = portal, client

    def __call__(self, method: str, *args, **kwargs):
        return self.portal.call(functools.partial(getattr(self.client, method), *args, **kwargs))

    def tool(self, name: str, args: dict | None = None, **kwargs) -> types.CallToolResult:
        return self("call_tool", name, args or {}, **kwargs)


def connect(root: Path, cache: Path, *extra: str, cwd: Path | None = None, **client_options):
    """A context manager: the SDK client connected to a spawned `dashcam mcp --root ROOT EXTRA` (started in
    ``cwd``, default ROOT), as a Session."""
    params = StdioServerParameters(command=server_command()[0],
                                   args=[*server_command()[1:], "--root", str(root), *extra],
                                   env=server_env(cache), cwd=str(cwd or root))

    class _Connected:
        def __enter__(self) -> Session:
            self._portal_cm = start_blocking_portal()
            portal = self._portal_cm.__enter__()
            self._client_cm = portal.wrap_async_context_manager(
                Client(params, read_timeout_seconds=120, **client_options))
            try:
                return Session(portal, self._client_cm.__enter__())
            except BaseException:
                self._portal_cm.__exit__(*sys.exc_info())
                raise

        def __exit__(self, *exc) -> None:
            try:
                self._client_cm.__exit__(*exc)
            finally:
                self._portal_cm.__exit__(None, None, None)

    return _Connected()


def data_of(result: types.CallToolResult):
    """The untrusted wrapper's data (checked: no error, the note, nothing cut)."""
    assert not result.is_error, result.content[0].text
    body = json.loads(result.content[0].text)
    assert body["note"] == UNTRUSTED and "cut" not in body, body.keys()
    return body["data"]


def error_of(result: types.CallToolResult) -> str:
    assert result.is_error, result.content[0].text[:200]
    return result.content[0].text


def cli_json(*args) -> object:
    r = CliRunner().invoke(app, [*map(str, args)])
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("root")
    outside = tmp_path_factory.mktemp("outside")
    out = {"root": root, "outside_dir": outside,
           "demo": demo(root / "demo.sqlite"), "injection": injection(root / "injection.sqlite")}
    out["outside"] = Path(shutil.copy(out["demo"], outside / "elsewhere.sqlite"))
    (root / "escape.sqlite").symlink_to(out["outside"])
    con = sqlite3.connect(root / "plain.sqlite")
    con.execute("CREATE TABLE notes (x TEXT)")
    con.commit()
    con.close()
    (root / "notes.txt").write_text("not a profile\n")
    (root / "folder.sqlite").mkdir()
    out["fleet"] = fleets.straggler_fleet(root / "runs")
    (root / "report.nsys-rep").write_bytes(b"a report, by its name")  # listed by its suffix: nsys exports it
    (root / "sub").mkdir()
    (root / "sub" / "old.qdrep").write_bytes(b"an older report")
    (root / ".hidden").mkdir()
    shutil.copy(out["demo"], root / ".hidden" / "copy.sqlite")  # hidden folders are not listed
    deep = root / "a" / "b" / "c" / "d" / "e"
    deep.mkdir(parents=True)
    shutil.copy(out["demo"], deep / "deep.sqlite")  # 5 folders down: past LIST_DEPTH
    return out


@pytest.fixture(scope="module")
def mcp_session(files, tmp_path_factory):
    with connect(files["root"], tmp_path_factory.mktemp("server-cache")) as session:
        yield session


# -- listing ---------------------------------------------------------------------------------------------

def test_every_tool_is_listed_with_the_schema_of_its_params_plus_profile(mcp_session):
    listed = {t.name: t for t in mcp_session("list_tools").tools}
    assert list(listed) == [*TOOL_NAMES, *REPORTS]
    for name in TOOL_NAMES:
        expected = get_tool(name).json_schema()["function"]["parameters"]
        schema = listed[name].input_schema
        assert schema["properties"].pop("profile")["type"] == "string"
        assert schema["required"][0] == "profile"
        schema["required"] = schema["required"][1:] or None
        assert {**schema, "required": schema["required"]} == {**expected, "required": expected.get("required")}, name
        assert listed[name].description == get_tool(name).summary
    for name in ("summary", "timeline"):
        assert listed[name].input_schema["required"] == ["profile"]
    assert "required" not in listed["list_profiles"].input_schema
    assert listed["diff"].input_schema["required"] == ["before", "after"]
    assert listed["check_grounding"].input_schema["required"] == ["answer"]
    for t in listed.values():
        assert t.annotations.read_only_hint and not t.annotations.destructive_hint, t.name
    assert "check_grounding" in mcp_session.client.instructions


# -- results ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", TOOL_NAMES)
def test_each_tool_returns_the_json_of_tool_run(mcp_session, files, name):
    args = TOOL_ARGS.get(name, {})
    data = data_of(mcp_session.tool(name, {"profile": "demo.sqlite", **args}))
    flags = [x for k, v in args.items() for x in ("-a", f"{k}={v}")]
    assert data == cli_json("tool", "run", name, files["demo"], "--json", *flags)


def test_common_parameters_pass_through(mcp_session, files):
    data = data_of(mcp_session.tool("gpu_gaps", {"profile": str(files["demo"]), "gpu": 1, "start_ms": 10,
                                                 "end_ms": 90, "limit": 2}))
    assert data == cli_json("tool", "run", "gpu_gaps", files["demo"], "--gpu", 1, "--start", 10, "--end", 90,
                            "--limit", 2, "--json")
    assert [d["device_id"] for d in data["devices"]] == [1]


def test_summary_diff_and_timeline(mcp_session, files):
    assert data_of(mcp_session.tool("summary", {"profile": "demo.sqlite"})) == cli_json(
        "summary", files["demo"], "--format", "json")
    markdown = data_of(mcp_session.tool("summary", {"profile": "demo.sqlite", "format": "markdown"}))
    assert markdown.startswith("### dashcam summary")
    assert data_of(mcp_session.tool("diff", {"before": "demo.sqlite", "after": "injection.sqlite"})) == cli_json(
        "diff", files["demo"], files["injection"], "--format", "json")
    r = mcp_session.tool("timeline", {"profile": "demo.sqlite", "around": "gap", "gpu": [1]})
    meta = data_of(r)
    [picture] = [c for c in r.content if isinstance(c, types.EmbeddedResource)]
    assert picture.resource.mime_type == "image/svg+xml" and str(picture.resource.uri) == meta["picture"]
    assert picture.resource.text.startswith("<svg") and "GPU 1 kernels" in picture.resource.text
    assert [row["label"] for row in meta["rows"]][:2] == ["GPU 1 kernels", "GPU 1 memory"]
    assert meta["highlight_ms"] is not None


def test_fleet_over_a_folder_under_the_root(mcp_session, files):
    data = data_of(mcp_session.tool("fleet", {"reports": "runs"}))
    expected = cli_json("fleet", files["fleet"], "--workers", 1, "--format", "json")
    assert data["verdict"] == "straggler" and data["reports"] == 9 and data["analysed"] == 8
    assert [f["ranks"] for f in data["findings"] if f["kind"] == "straggler"] == [[3]]
    assert {k: v for k, v in data.items() if k != "mapped"} == {k: v for k, v in expected.items() if k != "mapped"}
    again = data_of(mcp_session.tool("fleet", {"reports": str(files["fleet"] / "report_*.sqlite"),
                                               "format": "markdown"}))
    assert again.startswith("### dashcam fleet: straggler")
    answer = f"Rank 3 is the straggler; {data['paragraph'].split()[0]} 99.5 ms."
    verdict = json.loads(mcp_session.tool("check_grounding", {"answer": answer}).content[0].text)
    assert verdict["ungrounded_numbers"] == ["99.5 ms"]  # the fleet's figures are evidence; a made-up one is not
    assert "outside the folders" in error_of(mcp_session.tool("fleet", {"reports": str(files["outside_dir"])}))
    assert "no reports" in error_of(mcp_session.tool("fleet", {"reports": str(files["root"] / "folder.sqlite")}))


def test_check_grounding_flags_made_up_numbers(mcp_session):
    r = mcp_session.tool("gpu_gaps", {"profile": "demo.sqlite", "gpu": 1})
    idle = data_of(r)["devices"][0]["kernel_idle_pct"]
    answer = f"GPU 1 is idle {idle} % of the window; fixing it would save 42.7 ms."
    for args in ({"answer": answer}, {"answer": answer, "tool_results": [r.content[0].text]}):
        verdict = json.loads(mcp_session.tool("check_grounding", args).content[0].text)
        assert verdict["grounded"] is False and verdict["ungrounded_numbers"] == ["42.7 ms"], verdict
    verdict = json.loads(mcp_session.tool("check_grounding", {"answer": f"GPU 1 is idle {idle} % of the window.",
                                                              "tool_results": [r.content[0].text]}).content[0].text)
    assert verdict["grounded"] is True and verdict["ungrounded_numbers"] == []
    assert "not JSON" in error_of(mcp_session.tool("check_grounding", {"answer": "1 ms", "tool_results": ["x y"]}))


def test_a_planted_nvtx_label_with_instructions_stays_data(mcp_session):
    for name in ("nvtx", "gpu_gaps", "top_kernels"):
        r = mcp_session.tool(name, {"profile": "injection.sqlite"})
        [block] = r.content
        body = json.loads(block.text)
        assert set(body) == {"note", "data"} and body["note"] == UNTRUSTED
        assert INJECTED_NVTX in json.dumps(body["data"]) or INJECTED_KERNEL in json.dumps(body["data"]), name
        assert block.text.startswith('{"note":"' + UNTRUSTED + '","data":')
    assert data_of(mcp_session.tool("nvtx", {"profile": "injection.sqlite"}))["groups"][0]["label"] == INJECTED_NVTX
    markdown = data_of(mcp_session.tool("summary", {"profile": "injection.sqlite", "format": "markdown"}))
    assert isinstance(markdown, str)


def test_list_profiles_lists_what_may_be_opened(mcp_session, files):
    from dashcam.mcp.profiles import LIST_DEPTH

    assert LIST_DEPTH == 4
    root = files["root"].resolve()
    data = data_of(mcp_session.tool("list_profiles"))
    listed = {str(Path(p["path"]).relative_to(root)): p for p in data["profiles"]}
    # the 8 good rank reports; not report_8 (truncated), plain.sqlite (no nsys tables), notes.txt, the folder
    # folder.sqlite, escape.sqlite (a link out of the roots), .hidden/ or the report 5 folders down
    assert sorted(listed) == ["demo.sqlite", "injection.sqlite", "report.nsys-rep",
                              *[f"runs/report_{r}.sqlite" for r in range(8)], "sub/old.qdrep"]
    assert data["roots"] == [str(root)] and data["profile_count"] == 12 and "notes" not in data
    demo = listed["demo.sqlite"]
    assert (demo["kind"], demo["root"], demo["size_bytes"]) == ("sqlite", str(root), files["demo"].stat().st_size)
    assert listed["sub/old.qdrep"]["kind"] == "qdrep" and listed["report.nsys-rep"]["kind"] == "nsys-rep"
    sub = data_of(mcp_session.tool("list_profiles", {"folder": "runs", "limit": 3}))
    assert [Path(p["path"]).name for p in sub["profiles"]] == ["report_0.sqlite", "report_1.sqlite",
                                                               "report_2.sqlite"]
    assert sub["profile_count"] == 8 and sub["notes"] == ["showing 3 of 8 profiles (raise limit, or pass folder)"]
    assert "outside the folders" in error_of(mcp_session.tool("list_profiles", {"folder": str(files["outside_dir"])}))
    path = listed["runs/report_3.sqlite"]["path"]  # a listed path opens as it is
    assert data_of(mcp_session.tool("overview", {"profile": path}))["gpu_count"] == 1


def test_the_timeline_as_png(mcp_session):
    import base64
    import struct

    from dashcam.reports.timeline.png import PNG_SIGNATURE

    args = {"profile": "demo.sqlite", "around": "gap", "gpu": [1]}
    svg = [c for c in mcp_session.tool("timeline", args).content if isinstance(c, types.EmbeddedResource)][0]
    r = mcp_session.tool("timeline", {**args, "format": "png"})
    meta = data_of(r)
    [image] = [c for c in r.content if isinstance(c, types.ImageContent)]
    assert image.mime_type == meta["mime_type"] == "image/png" and meta["picture"].endswith("demo.png")
    png = base64.b64decode(image.data)
    assert png.startswith(PNG_SIGNATURE) and png[12:16] == b"IHDR"
    width, height = struct.unpack(">II", png[16:24])  # the picture is drawn at the SVG's own size: its viewBox
    head = svg.resource.text.split(">", 1)[0]
    assert f'viewBox="0 0 {width} {height}"' in head
    assert "must be one of 'svg' or 'png'" in error_of(mcp_session.tool("timeline", {**args, "format": "gif"}))


# -- errors ----------------------------------------------------------------------------------------------------

def test_bad_calls_are_tool_errors_and_the_server_keeps_serving(mcp_session, files):
    cases = [
        ({"profile": str(files["outside"])}, "outside the folders this server may read"),
        ({"profile": "../" + files["outside_dir"].name + "/elsewhere.sqlite"}, "outside the folders"),
        ({"profile": "escape.sqlite"}, "outside the folders"),  # a link inside the root to a file outside it
        ({"profile": "missing.sqlite"}, "no such file"),
        ({"profile": "folder.sqlite"}, "is a directory"),
        ({"profile": "plain.sqlite"}, "without Nsight Systems tables"),
        ({"profile": "notes.txt"}, "not an SQLite file"),
        ({"profile": ""}, "give the path"),
        ({"profile": "demo.sqlite", "gpu": 7}, "GPU 7 is not in this profile"),
        ({"profile": "demo.sqlite", "gpu": "one"}, "gpu"),
        ({"profile": "demo.sqlite", "colour": "red"}, "colour"),
        ({"gpu": 1}, "profile"),
    ]
    for args, says in cases:
        text = error_of(mcp_session.tool("gpu_gaps", args))
        assert says in text, (args, text)
    for query in ("DROP TABLE kernels", "COPY kernels TO 'x.csv'", "SELECT * FROM read_csv('/etc/passwd')"):
        assert "is not allowed" in error_of(mcp_session.tool("sql", {"profile": "demo.sqlite", "query": query})), query
    assert "outside the folders" in error_of(mcp_session.tool("diff", {"before": "demo.sqlite",
                                                                       "after": str(files["outside"])}))
    assert "--around must be" in error_of(mcp_session.tool("timeline", {"profile": "demo.sqlite", "around": "x"}))
    assert "format" in error_of(mcp_session.tool("summary", {"profile": "demo.sqlite", "format": "pdf"}))
    assert "Unknown tool" in error_of(mcp_session.tool("no_such_tool"))
    assert data_of(mcp_session.tool("overview", {"profile": "demo.sqlite"}))["tool"] == "overview"


def test_schema_errors_are_one_line_per_field(mcp_session):
    text = error_of(mcp_session.tool("gpu_gaps", {"profile": "demo.sqlite", "gpu": "one", "start_ms": "x",
                                                  "colour": "red"}))
    assert text.splitlines() == [
        "Error executing tool gpu_gaps: invalid arguments:", "gpu: must be an integer", "start_ms: must be a number",
        "colour: not an argument of this tool (it takes profile, gpu, start_ms, end_ms, limit, min_gap_us)"]
    assert "pydantic" not in text and "http" not in text
    assert error_of(mcp_session.tool("gpu_gaps", {"gpu": 1})).splitlines()[1:] == ["profile: required"]
    assert error_of(mcp_session.tool("diff", {"before": "demo.sqlite", "after": "demo.sqlite", "limit": 0,
                                              "threshold_pct": -1})).splitlines()[1:] == [
        "threshold_pct: must be >= 0", "limit: must be >= 1"]
    assert error_of(mcp_session.tool("timeline", {"profile": "demo.sqlite", "gpu": [0, "x"]})).splitlines()[1:] == [
        "gpu[1]: must be an integer"]
    # a window error in the tools' own parameter names, not the CLI's --start/--end
    window = error_of(mcp_session.tool("gpu_gaps", {"profile": "demo.sqlite", "start_ms": 500, "end_ms": 100}))
    assert "start_ms 500 is after end_ms 100" in window and "--start" not in window


# -- the open profiles and progress ------------------------------------------------------------------------------

def test_a_cold_open_reports_progress_and_a_second_call_opens_nothing(files, tmp_path):
    from dashcam.profile.cache import cache_dir_for

    cache_root = tmp_path / "cache"
    with connect(files["root"], cache_root) as session:
        seen: list[tuple] = []

        async def progress(done, total, message):
            seen.append((done, total, message))

        data_of(session.tool("top_kernels", {"profile": "demo.sqlite"}, progress_callback=progress))
        assert seen and seen[-1][0] == seen[-1][1] and "indexing" in seen[-1][2], seen
        cache = _cache_of(files["demo"], cache_root, cache_dir_for)
        used = cache.stat().st_mtime_ns
        time.sleep(0.05)
        seen.clear()
        data_of(session.tool("gpu_gaps", {"profile": "demo.sqlite"}, progress_callback=progress))
        assert seen == []
        assert cache.stat().st_mtime_ns == used  # every open marks the cache used; this call opened nothing


def _cache_of(profile: Path, cache_root: Path, cache_dir_for) -> Path:
    prev = os.environ.get("DASHCAM_CACHE_DIR")
    os.environ["DASHCAM_CACHE_DIR"] = str(cache_root)
    try:
        return cache_dir_for(profile)
    finally:
        if prev is None:
            del os.environ["DASHCAM_CACHE_DIR"]
        else:
            os.environ["DASHCAM_CACHE_DIR"] = prev


def test_open_profiles_keeps_the_most_recent_and_never_deadlocks(files, tmp_path):
    from dashcam.mcp.profiles import OpenProfiles

    a = files["demo"]
    b = Path(shutil.copy(files["demo"], tmp_path / "b.sqlite"))
    keep = OpenProfiles(keep=1)
    kernels = lambda *ps: [p.count("kernels") for p in ps]
    [n] = keep.run([a], kernels)
    assert keep.run([a], kernels) == [n] and keep.opens == 1
    assert keep.run([a, b], kernels) == [n, n] and len(keep) == 1  # two open at once with keep=1: no deadlock
    assert keep.run([a, a], kernels) == [n, n]  # one profile given twice: one lock taken once
    opens = keep.opens
    keep.run([b], kernels)
    keep.run([a], kernels)
    assert keep.opens == opens + 2  # keep=1: each switch reopens
    keep.close()


# -- roots, HTTP, resources and prompts ---------------------------------------------------------------------------

def test_roots_the_client_declares_are_added_and_results_are_cut_to_the_budget(files, tmp_path):
    """As a 2025-protocol client (Claude Code, Cursor, VS Code) that declares roots: a roots/list request."""
    outside = files["outside_dir"]

    async def roots(context):
        return types.ListRootsResult(roots=[types.Root(uri=outside.as_uri(), name="runs")])

    with connect(files["root"], tmp_path / "cache", "--max-result-tokens", "1000", mode="legacy",
                 list_roots_callback=roots) as session:
        assert session.client.protocol_version.startswith("2025")
        listed = json.loads(session.tool("list_profiles").content[0].text)["data"]
        assert str(files["outside"].resolve()) in [p["path"] for p in listed["profiles"]]
        for path in (str(files["outside"]), "elsewhere.sqlite"):  # (a small budget may cut even overview)
            r = session.tool("overview", {"profile": path})
            assert not r.is_error and json.loads(r.content[0].text)["data"]["tool"] == "overview", path
        big = session.tool("sql", {"profile": "demo.sqlite", "query": "SELECT * FROM kernels"})
        body = json.loads(big.content[0].text)
        assert body["note"] == UNTRUSTED and body["cut"].startswith("cut: rows kept"), body.get("cut")
        assert len(body["data"]["rows"]) < body["data"]["row_count"]


def test_roots_are_the_start_folder_plus_each_root(files, tmp_path):
    """Started in the root folder with --root OUTSIDE: both folders are roots (as docs/mcp.md says)."""
    with connect(files["outside_dir"], tmp_path / "cache", cwd=files["root"]) as session:
        assert data_of(session.tool("overview", {"profile": "demo.sqlite"}))["gpu_count"] == 2  # the start folder
        assert data_of(session.tool("overview", {"profile": "elsewhere.sqlite"}))["gpu_count"] == 2  # the --root
        roots = data_of(session.tool("list_profiles"))["roots"]
        assert roots == [str(files["root"].resolve()), str(files["outside_dir"].resolve())]


def test_http_transport_answers_on_localhost(files, tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, **server_env(tmp_path / "cache")}
    proc = subprocess.Popen([*server_command(), "--http", "--port", str(port), "--root", str(files["root"])],
                            env=env, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read() if proc.poll() else ""
                time.sleep(0.1)

        async def session():
            async with Client(f"http://127.0.0.1:{port}/mcp", read_timeout_seconds=120) as c:
                names = [t.name for t in (await c.list_tools()).tools]
                r = await c.call_tool("gpu_gaps", {"profile": "demo.sqlite", "gpu": 1})
                return names, r

        names, r = anyio.run(session)
        assert "gpu_gaps" in names and data_of(r)["devices"][0]["device_id"] == 1
    finally:
        proc.terminate()
        err = proc.communicate(timeout=30)[1]
    assert f"http://127.0.0.1:{port}/mcp" in err


def test_definitions_skill_and_prompts(mcp_session):
    resources = {str(r.uri): r for r in mcp_session("list_resources").resources}
    assert set(resources) == {"dashcam://definitions", "dashcam://skill"}
    definitions = mcp_session("read_resource", "dashcam://definitions").contents[0]
    assert definitions.text == (ROOT / "docs" / "definitions.md").read_text(encoding="utf-8")
    skill = mcp_session("read_resource", "dashcam://skill").contents[0].text
    assert skill == (ROOT / "skills" / "dashcam" / "SKILL.md").read_text(encoding="utf-8")
    prompts = {p.name: p for p in mcp_session("list_prompts").prompts}
    assert set(prompts) == {"why_gpu_idle", "health_summary", "compare_before_after"}
    assert [a.name for a in prompts["why_gpu_idle"].arguments] == ["profile", "gpu"]
    text = mcp_session("get_prompt", "why_gpu_idle", {"profile": "run.sqlite", "gpu": "3"}).messages[0].content.text
    assert "GPU 3" in text and "gpu_gaps" in text and "check_grounding" in text


def test_without_the_sdk_one_line_says_what_to_install(monkeypatch):
    import importlib.metadata

    def missing(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", missing)
    r = CliRunner().invoke(app, ["mcp"])
    assert r.exit_code == 26
    assert r.stderr.strip().splitlines() == ["dashcam: error: dashcam mcp needs the mcp package (>= 2.3): "
                                             "pip install 'dashcam[mcp]'"]
