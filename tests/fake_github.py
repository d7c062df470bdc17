"""A fake GitHub REST API on 127.0.0.1 for tests: the three issue-comment endpoints dashcam uses.

    with FakeGitHub(token="t0k", repos={"octo/repo": [7]}) as gh:   # repo octo/repo has PR #7
        env = {"GITHUB_API_URL": gh.api_url, "GITHUB_TOKEN": "t0k"}
        ...
        gh.comments("octo/repo", 7)   # the in-memory store
        gh.requests                   # every request: {method, path, query, headers, body}

- ``GET  /repos/{o}/{r}/issues/{n}/comments`` pages with ``per_page`` (default 30, max 100) and ``page``,
  and a ``Link`` header (next/last, absolute URLs) when there is more than one page;
- ``POST /repos/{o}/{r}/issues/{n}/comments`` adds ``{"body"}`` (201);
- ``PATCH /repos/{o}/{r}/issues/comments/{id}`` replaces the body (200).
The token must come as ``Authorization: Bearer <token>`` (else 401 "Bad credentials"); unknown repos,
PRs and comment ids are 404. ``gh.fail(status, headers, message)`` makes every later request answer
that error (403, 429, 500, ...; ``methods=("POST",)`` only those); ``gh.delay`` sleeps before each answer.
``prefix="/api/v3"`` serves under a GitHub Enterprise style path.
"""
from __future__ import annotations

import json
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class FakeGitHub:
    def __init__(self, token: str = "test-token", repos: dict[str, list[int]] | None = None, prefix: str = "",
                 login: str = "github-actions[bot]"):
        self.token = token
        self.prefix = prefix.rstrip("/")
        self.login = login
        self.store: dict[tuple[str, int], list[dict]] = {
            (repo, n): [] for repo, prs in (repos or {"octo/repo": [1]}).items() for n in prs}
        self.requests: list[dict] = []
        self.error: tuple[int, dict, str, set | None] | None = None
        self.delay = 0.0
        self._next_id = 1000
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    # -- lifecycle ------------------------------------------------------------------------------
    def __enter__(self) -> FakeGitHub:
        handler = type("Handler", (_Handler,), {"fake": self})
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.02},
                                        daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}{self.prefix}"

    # -- store and script ---------------------------------------------------------------------------
    def comments(self, repo: str, pr: int) -> list[dict]:
        return self.store[(repo, pr)]

    def add_comment(self, repo: str, pr: int, body: str, login: str | None = None) -> dict:
        with self._lock:
            self._next_id += 1
            cid = self._next_id
            comment = {"id": cid, "body": body, "user": {"login": login or self.login},
                       "html_url": f"https://github.com/{repo}/pull/{pr}#issuecomment-{cid}"}
            self.store[(repo, pr)].append(comment)
            return comment

    def fail(self, status: int, headers: dict | None = None, message: str = "scripted error",
             methods: tuple[str, ...] | None = None) -> None:
        """Answer every later request (or only those with these HTTP methods) with this error."""
        self.error = (status, headers or {}, message, set(methods) if methods else None)

    def methods(self) -> list[str]:
        return [f"{r['method']} {r['path']}" for r in self.requests]


class _Handler(BaseHTTPRequestHandler):
    fake: FakeGitHub
    protocol_version = "HTTP/1.0"

    def log_message(self, *args) -> None:  # quiet
        pass

    def _send(self, status: int, obj, headers: dict | None = None) -> None:
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def _error(self, status: int, message: str, headers: dict | None = None) -> None:
        self._send(status, {"message": message, "documentation_url": "https://docs.github.com/rest"}, headers)

    def _handle(self, method: str) -> None:
        fake = self.fake
        url = urllib.parse.urlsplit(self.path)
        query = dict(urllib.parse.parse_qsl(url.query))
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        body = json.loads(raw) if raw else None
        with fake._lock:
            fake.requests.append({"method": method, "path": url.path, "query": query,
                                  "headers": {k.lower(): v for k, v in self.headers.items()}, "body": body})
        if fake.delay:
            time.sleep(fake.delay)
        if self.headers.get("Authorization") != f"Bearer {fake.token}":
            return self._error(401, "Bad credentials")
        if fake.error and (fake.error[3] is None or method in fake.error[3]):
            status, headers, message, _ = fake.error
            return self._error(status, message, headers)
        if not url.path.startswith(fake.prefix + "/repos/"):
            return self._error(404, "Not Found")
        parts = url.path[len(fake.prefix + "/repos/"):].split("/")
        if len(parts) < 4 or parts[2] != "issues":
            return self._error(404, "Not Found")
        repo = f"{parts[0]}/{parts[1]}"
        if parts[3] == "comments" and len(parts) == 5 and method == "PATCH":
            return self._patch(repo, parts[4], body)
        if len(parts) == 5 and parts[4] == "comments" and parts[3].isdigit():
            key = (repo, int(parts[3]))
            if key not in fake.store:
                return self._error(404, "Not Found")
            if method == "GET":
                return self._list(key, query)
            if method == "POST":
                if not isinstance(body, dict) or not isinstance(body.get("body"), str):
                    return self._error(422, "Invalid request: body is required")
                return self._send(201, fake.add_comment(repo, key[1], body["body"]))
        return self._error(404, "Not Found")

    def _list(self, key, query) -> None:
        fake = self.fake
        per_page = min(int(query.get("per_page", 30)), 100)
        page = int(query.get("page", 1))
        items = fake.store[key]
        last = max(1, -(-len(items) // per_page))
        headers = {}
        if last > 1:
            base = f"http://127.0.0.1:{self.server.server_address[1]}{urllib.parse.urlsplit(self.path).path}"
            links = []
            if page < last:
                links.append(f'<{base}?per_page={per_page}&page={page + 1}>; rel="next"')
            links.append(f'<{base}?per_page={per_page}&page={last}>; rel="last"')
            headers["Link"] = ", ".join(links)
        self._send(200, items[(page - 1) * per_page: page * per_page], headers)

    def _patch(self, repo: str, cid: str, body) -> None:
        for (r, _), comments in self.fake.store.items():
            for c in comments:
                if r == repo and str(c["id"]) == cid:
                    c["body"] = body["body"]
                    return self._send(200, c)
        self._error(404, "Not Found")

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    def do_PATCH(self) -> None:
        self._handle("PATCH")
