"""``dashcam mcp``: dashcam's tools, summary, diff, timeline and grounding check as a Model Context
Protocol server for coding agents (Claude Code, Cursor, VS Code, Codex); docs/mcp.md.

A surface like the command line, one layer below it: ``profiles`` (which paths may be opened; the
open profiles kept between calls) and ``results`` (what a call returns: the untrusted wrapper, cut
to fit) need no SDK; ``server`` is built on the official ``mcp`` SDK (2.x), imported only by
``serve``. The SDK is the ``mcp`` extra: ``pip install 'dashcam[mcp]'`` (the ``test`` extra has it).

The SDK's top-level package is ``mcp`` and this one is ``dashcam.mcp``: modules here import the SDK
with absolute imports (``from mcp.server.mcpserver import ...``), which always mean the SDK.
"""
from __future__ import annotations

import sys
from collections.abc import Iterable

SDK_FLOOR = (2, 3)  # the oldest mcp release the tests have run against
INSTALL = "pip install 'dashcam[mcp]'"


def check_sdk() -> None:
    """Raise ``MissingDependency`` (one line: what to install) unless an ``mcp`` SDK >= SDK_FLOOR is importable."""
    from importlib.metadata import PackageNotFoundError, version

    from dashcam.errors import MissingDependency

    floor = ".".join(map(str, SDK_FLOOR))
    try:
        found = version("mcp")
    except PackageNotFoundError:
        raise MissingDependency(f"dashcam mcp needs the mcp package (>= {floor}): {INSTALL}") from None
    parts = tuple(int(x) for x in found.split(".")[:2] if x.isdigit())
    if parts < SDK_FLOOR:
        raise MissingDependency(f"dashcam mcp needs mcp >= {floor}, found {found}: {INSTALL} --upgrade")
    try:
        import mcp.server.mcpserver  # noqa: F401
    except ImportError as e:
        raise MissingDependency(f"dashcam mcp cannot import the mcp SDK ({e}): {INSTALL}") from None


def build_server(roots: Iterable[str] = (".",), keep_open: int = 4, max_result_tokens: int = 20000):
    """The SDK's ``MCPServer`` with dashcam's tools, resources and prompts (not yet running)."""
    check_sdk()
    from dashcam.errors import BadParameter
    from dashcam.mcp.profiles import root_paths
    from dashcam.mcp.results import MIN_RESULT_TOKENS
    from dashcam.mcp.server import DashcamServer

    if max_result_tokens < MIN_RESULT_TOKENS:
        raise BadParameter(f"--max-result-tokens {max_result_tokens}: at least {MIN_RESULT_TOKENS}")
    return DashcamServer(root_paths(roots), keep_open, max_result_tokens).build()


def serve(roots: Iterable[str] = (".",), http: bool = False, host: str = "127.0.0.1", port: int = 8000,
          keep_open: int = 4, max_result_tokens: int = 20000) -> None:
    """Serve until the client goes away: over stdio, or streamable HTTP at http://HOST:PORT/mcp."""
    server = build_server(roots, keep_open, max_result_tokens)
    if not http:
        server.run()
        return
    if host not in ("127.0.0.1", "localhost", "::1"):
        print(f"dashcam mcp: serving on {host}: anyone who can reach it may read the profiles under the roots",
              file=sys.stderr)
    print(f"dashcam mcp: streamable HTTP on http://{host}:{port}/mcp", file=sys.stderr, flush=True)
    server.run("streamable-http", host=host, port=port)
