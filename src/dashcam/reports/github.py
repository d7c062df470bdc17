"""A tiny GitHub REST client on urllib (no dependency), enough to keep one comment on a pull request.

Every failure becomes a :class:`GitHubError` subclass with its own exit code and a one-line message
(the CLI prints it; no traceback). ``GITHUB_API_URL`` points it at GitHub Enterprise
(default https://api.github.com); the token comes from ``GITHUB_TOKEN``.
"""
from __future__ import annotations

import json
import os
import re
import urllib.error
import urllib.parse
import urllib.request
from datetime import datetime, timezone

from dashcam import __version__
from dashcam.errors import DashcamError

DEFAULT_API_URL = "https://api.github.com"
API_VERSION = "2022-11-28"
TIMEOUT_S = 30
PER_PAGE = 100
MAX_PAGES = 100  # 10,000 comments: a safety stop against a Link loop, never reached in practice


class GitHubError(DashcamError):
    """Any other failed GitHub request: an unexpected HTTP status, a network error, a bad response."""

    exit_code = 25


class GitHubTokenMissing(GitHubError):
    exit_code = 20


class GitHubBadCredentials(GitHubError):
    """401: the token was rejected."""

    exit_code = 21


class GitHubForbidden(GitHubError):
    """403 (not a rate limit): the token lacks permission."""

    exit_code = 22


class GitHubNotFound(GitHubError):
    """404: no such repo / PR, or the token cannot see it."""

    exit_code = 23


class GitHubRateLimited(GitHubError):
    """403/429 with ``x-ratelimit-remaining: 0`` or ``Retry-After``."""

    exit_code = 24


def token_from_env(env: dict | None = None) -> str:
    token = ((env if env is not None else os.environ).get("GITHUB_TOKEN") or "").strip()
    if not token:
        raise GitHubTokenMissing(
            "GITHUB_TOKEN is not set; set it to a token that may comment on the pull request "
            "(in a workflow: `env: GITHUB_TOKEN: ${{ github.token }}`), or use --dry-run to print the comment")
    return token


def api_url_from_env(env: dict | None = None) -> str:
    return ((env if env is not None else os.environ).get("GITHUB_API_URL") or DEFAULT_API_URL).rstrip("/")


def next_link(link_header: str | None) -> str | None:
    """The ``rel="next"`` URL of a ``Link`` header, or None."""
    for part in (link_header or "").split(","):
        m = re.match(r'\s*<([^>]*)>(.*)', part)
        rel = re.search(r'\brel\s*=\s*"?([^";]*)', m.group(2)) if m else None
        if rel and "next" in rel.group(1).split():
            return m.group(1)
    return None


def _one_line(text: str, limit: int = 200) -> str:
    line = next((x.strip() for x in (text or "").splitlines() if x.strip()), "")
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _github_message(body: bytes) -> str:
    """GitHub's ``message`` from an error body, else the body's first line."""
    text = body.decode("utf-8", "replace") if body else ""
    try:
        data = json.loads(text)
        if isinstance(data, dict) and data.get("message"):
            return _one_line(str(data["message"]))
    except ValueError:
        pass
    return _one_line(text)


def _utc_iso(epoch: str | None) -> str | None:
    try:
        return datetime.fromtimestamp(int(float(epoch)), tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    except (TypeError, ValueError, OverflowError, OSError):
        return None


def error_for(status: int, reason: str, headers, body: bytes, what: str) -> GitHubError:
    """The one-line error for an HTTP error response to ``what`` (e.g. ``GET /repos/o/r/issues/1/comments``)."""
    said = _github_message(body)
    tail = f" (GitHub said: {said})" if said else ""
    remaining = headers.get("x-ratelimit-remaining")
    retry_after = headers.get("retry-after")
    if status == 429 or (status == 403 and (remaining == "0" or retry_after)):
        if remaining == "0" and _utc_iso(headers.get("x-ratelimit-reset")):
            when = f"the limit resets at {_utc_iso(headers.get('x-ratelimit-reset'))} (UTC)"
        elif retry_after:
            when = f"retry after {retry_after} s"
        else:
            when = "retry later"
        return GitHubRateLimited(f"GitHub API rate limit exceeded ({status}) on {what}; {when}{tail}")
    if status == 401:
        return GitHubBadCredentials(
            f"GitHub rejected the token (401 bad credentials) on {what}: check GITHUB_TOKEN{tail}")
    if status == 403:
        return GitHubForbidden(
            f"GitHub refused {what} (403 forbidden): the token lacks permission to comment — it needs "
            f"pull-requests: write (or issues: write); fork PRs get a read-only token{tail}")
    if status == 404:
        return GitHubNotFound(
            f"not found (404) on {what}: the repository or pull request does not exist, "
            f"or the token has no access to it{tail}")
    return GitHubError(f"GitHub request failed: {what} -> {status} {reason}{tail}")


class GitHub:
    """``GitHub(token).request("GET", "/repos/o/r/issues/1/comments")`` -> (parsed JSON, headers)."""

    def __init__(self, token: str, api_url: str = DEFAULT_API_URL, timeout: float = TIMEOUT_S):
        self.token = token
        self.api_url = api_url.rstrip("/")
        self.timeout = timeout
        origin = urllib.parse.urlsplit(self.api_url)
        self._origin = (origin.scheme, origin.netloc)

    @classmethod
    def from_env(cls, env: dict | None = None) -> GitHub:
        return cls(token_from_env(env), api_url_from_env(env))

    def _url(self, path_or_url: str) -> str:
        if path_or_url.startswith(("http://", "https://")):
            parts = urllib.parse.urlsplit(path_or_url)
            if (parts.scheme, parts.netloc) != self._origin:  # never send the token to another host
                raise GitHubError(f"GitHub returned a link to another host ({parts.netloc}); refusing to follow it")
            return path_or_url
        return self.api_url + "/" + path_or_url.lstrip("/")

    def request(self, method: str, path_or_url: str, body: dict | None = None):
        url = self._url(path_or_url)
        what = f"{method} {urllib.parse.urlsplit(url).path}"
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(url, data=data, method=method, headers={
            "Accept": "application/vnd.github+json",
            "X-GitHub-Api-Version": API_VERSION,
            "Authorization": f"Bearer {self.token}",
            "User-Agent": f"dashcam/{__version__}",
            **({"Content-Type": "application/json"} if data is not None else {}),
        })
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                raw, headers = resp.read(), resp.headers
        except urllib.error.HTTPError as e:
            with e:
                raise error_for(e.code, e.reason or "", e.headers, e.read() or b"", what) from None
        except urllib.error.URLError as e:
            raise GitHubError(f"cannot reach GitHub at {self.api_url} ({what}): {_one_line(str(e.reason))}") from None
        except (TimeoutError, OSError) as e:
            raise GitHubError(f"GitHub request failed: {what}: {type(e).__name__}: {_one_line(str(e))}") from None
        try:
            return (json.loads(raw) if raw.strip() else None), headers
        except ValueError:
            text = _one_line(raw.decode("utf-8", "replace"))
            raise GitHubError(f"GitHub sent a response that is not JSON for {what}: {text}") from None

    def paginate(self, path: str):
        """Yield the items of a list endpoint, following ``Link: rel="next"`` (``per_page=100``)."""
        url: str | None = path + ("&" if "?" in path else "?") + f"per_page={PER_PAGE}"
        for _ in range(MAX_PAGES):
            if url is None:
                return
            items, headers = self.request("GET", url)
            if not isinstance(items, list):
                raise GitHubError(f"GitHub sent a {type(items).__name__}, not a list, for GET {path}")
            yield from items
            url = next_link(headers.get("Link"))
