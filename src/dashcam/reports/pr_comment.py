"""One dashcam comment per pull request: the profile summary (and its diff against a baseline) as markdown.

The comment carries :data:`MARKER` (an HTML comment, invisible when rendered); a later run finds the
first comment with the marker and edits it instead of adding another.
"""
from __future__ import annotations

import re
import urllib.parse
from pathlib import Path

from dashcam import __version__
from dashcam.errors import BadParameter
from dashcam.evidence import ToolRuns
from dashcam.profile import Profile
from dashcam.reports import diff, summary
from dashcam.text import markdown

MARKER = "<!-- dashcam:pr-comment -->"
MAX_BODY_CHARS = 65_536  # GitHub rejects longer comment bodies (422)
REPO_RE = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")


def check_target(repo: str | None, pr: int | None) -> tuple[str, str, int]:
    """``OWNER/NAME`` and a PR number, validated; raises BadParameter."""
    if not repo or not REPO_RE.match(repo):
        raise BadParameter(f"--repo must be OWNER/NAME (e.g. octo-org/octo-repo), got {repo!r}")
    if pr is None or pr < 1:
        raise BadParameter(f"--pr must be a pull request number >= 1, got {pr!r}")
    owner, name = repo.split("/")
    return owner, name, pr


def compose(summary_md: str, diff_md: str | None, profile_name: str, baseline_name: str | None = None,
            threshold_pct: float | None = None, diff_verdict: str | None = None) -> str:
    """The comment body: marker, with a diff a heading carrying its verdict ("dashcam: regressed against the
    baseline"), the summary (it brings its own heading), the diff, a footer line."""
    parts = [MARKER]
    if diff_md is not None and diff_verdict:
        parts.append(f"## dashcam: {diff_verdict.replace('_', ' ')} against the baseline "
                     f"{markdown.inline(baseline_name or 'baseline', code=True)}")
    parts.append(summary_md.strip())
    footer = f"dashcam {__version__} · profile {markdown.inline(profile_name, code=True)}"
    if diff_md is not None:
        base = markdown.inline(baseline_name, code=True)
        parts += [f"### Compared with the baseline {base}", diff_md.strip()]
        footer += f" · baseline {base}"
        if threshold_pct is not None:
            footer += f" · regression threshold {threshold_pct:g} %"
    return fit("\n\n".join(parts), f"<sub>{footer}</sub>")


def fit(body: str, footer: str, limit: int = MAX_BODY_CHARS) -> str:
    """``body`` + footer, cut at a line boundary (with a note) when GitHub's size limit would be exceeded."""
    full = f"{body}\n\n{footer}\n"
    if len(full) <= limit:
        return full
    note = "\n\n_… cut here: the report exceeded GitHub's comment size limit._"
    room = limit - len(note) - len(footer) - 4
    head = body[:room].rsplit("\n", 1)[0]
    return f"{head}{note}\n\n{footer}\n"


def load_diff(path: str | Path) -> diff.Diff:
    """A diff computed before (the JSON of ``dashcam diff --format json``), so the comment need not diff again."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise BadParameter(f"--diff {path}: cannot read it ({getattr(e, 'strerror', None) or e})") from None
    try:
        return diff.Diff.model_validate_json(text)
    except ValueError:
        raise BadParameter(f"--diff {path}: not the JSON of `dashcam diff --format json`") from None


def build_comment(profile_path: str | Path, baseline_path: str | Path | None = None,
                  threshold_pct: float = 5.0, picture_url: str | None = None,
                  diff_path: str | Path | None = None) -> str:
    """Open the profile (and the baseline), summarize, diff, and compose the comment body. The summary and
    the diff share the profile's tool runs (one memo), so no tool runs twice. ``diff_path``: a diff JSON
    computed before, embedded instead of diffing against ``baseline_path`` (give one of the two)."""
    if baseline_path and diff_path:
        raise BadParameter("give --baseline or --diff, not both (--diff is a diff against a baseline, computed before)")
    given = load_diff(diff_path) if diff_path else None  # a bad file fails before the profile is read
    after = Profile.open(profile_path)
    runs = ToolRuns(after)
    summary_md = summary.to_markdown(summary.summarize(after, runs))
    if picture_url:  # GitHub renders only pictures reachable by URL: link the workflow's artifact
        summary_md += f"\n\n[Timeline of the largest gap]({picture_url})\n"
    d = given
    if baseline_path:
        before = Profile.open(baseline_path)
        d = diff.compare_measured(diff.measure(before), diff.measure(after, runs), threshold_pct)
    if d is None:
        return compose(summary_md, None, Path(profile_path).name)
    return compose(summary_md, diff.to_markdown(d), Path(profile_path).name, Path(d.before.profile).name,
                   d.threshold_pct, d.verdict)


def append_to(path: str | Path | None, body: str) -> None:
    """Append ``body`` to the file ``path`` (a job summary); nothing when ``path`` is None."""
    if path is None:
        return
    try:
        with open(path, "a", encoding="utf-8") as f:
            f.write(body)
    except OSError as e:
        raise BadParameter(f"--summary-file {path}: cannot write it ({e.strerror})") from None


def find_marked(comments) -> dict | None:
    """The first comment whose body contains the marker (stops reading pages once found)."""
    return next((c for c in comments if MARKER in (c.get("body") or "")), None)


def _repo_path(owner: str, name: str) -> str:
    return f"/repos/{urllib.parse.quote(owner, safe='')}/{urllib.parse.quote(name, safe='')}"


def find_existing(gh, owner: str, name: str, pr: int) -> dict | None:
    """The PR's dashcam comment, if any (this GET also checks the token, the repo and the PR)."""
    return find_marked(gh.paginate(f"{_repo_path(owner, name)}/issues/{pr}/comments"))


def publish(gh, owner: str, name: str, pr: int, body: str, existing: dict | None) -> tuple[str, dict]:
    """Edit ``existing`` or create the comment: ``("updated" | "created", comment JSON)``."""
    repo = _repo_path(owner, name)
    if existing is not None:
        comment, _ = gh.request("PATCH", f"{repo}/issues/comments/{existing['id']}", {"body": body})
        return "updated", comment or {}
    comment, _ = gh.request("POST", f"{repo}/issues/{pr}/comments", {"body": body})
    return "created", comment or {}


def upsert(gh, owner: str, name: str, pr: int, body: str) -> tuple[str, dict]:
    """Edit the PR's dashcam comment, or create it."""
    return publish(gh, owner, name, pr, body, find_existing(gh, owner, name, pr))
