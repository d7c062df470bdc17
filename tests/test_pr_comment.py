"""dashcam pr-comment: the comment body, the GitHub client against a fake API on 127.0.0.1, the CLI's
one-line errors and exit codes, and the GitHub Action / example workflow files."""
from __future__ import annotations

import re
import shlex
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from dashcam.errors import DashcamError
from dashcam.reports.github import (
    GitHub,
    GitHubBadCredentials,
    GitHubError,
    GitHubForbidden,
    GitHubNotFound,
    GitHubRateLimited,
    GitHubTokenMissing,
    error_for,
    next_link,
    token_from_env,
)
from dashcam.reports.pr_comment import (
    MARKER,
    MAX_BODY_CHARS,
    build_comment,
    check_target,
    compose,
    fit,
    upsert,
)
from dashcam.testing.builder import ExportBuilder
from dashcam.testing.scenarios import demo
from tests.conftest import MS, US, run_cli
from tests.fake_github import FakeGitHub

REPO_ROOT = Path(__file__).resolve().parents[1]
TOKEN = "ghs_test_token"
RESET_EPOCH = 1_893_456_000  # 2030-01-01T00:00:00Z


@pytest.fixture(scope="module")
def profiles(tmp_path_factory):
    """(after, baseline): the demo profile (6 NVTX steps of about 20 ms on two GPUs), and a baseline of the same
    program whose 6 "train_step" ranges take 10 ms: the same four kernels, 20 per step on each GPU."""
    d = tmp_path_factory.mktemp("prc")
    after = demo(d / "after.sqlite")
    b = ExportBuilder("2024")
    names = ["ampere_sgemm_128x64_tn", "vectorized_elementwise_kernel", "layer_norm_fwd_kernel", "softmax_warp_forward"]
    for dev, pid in ((0, 1000), (1, 1001)):
        b.gpu(dev)
        b.process(pid)
        for step in range(6):
            t = 1 * MS + step * 10 * MS
            b.nvtx(f"train_step {step}", t, t + 10 * MS, pid=pid)
            for i in range(20):
                s = t + i * 500 * US
                b.launch(dev, s - 20 * US, s - 14 * US, s, s + 400 * US, name=names[i % 4], pid=pid)
    return after, b.write(d / "baseline.sqlite")


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("prc-cache")


def github_env(api_url=None, token=TOKEN) -> dict[str, str | None]:
    """The GitHub variables of a ``pr-comment`` run (None: unset): the API's URL and the token."""
    return {"GITHUB_API_URL": api_url, "GITHUB_TOKEN": token}


def assert_one_line_error(p, code):
    assert p.returncode == code, (p.returncode, p.stderr)
    assert "Traceback" not in p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("dashcam: error: "), p.stderr
    return lines[0]


# -- the comment body -------------------------------------------------------------------------------


def test_compose_with_and_without_a_diff():
    body = compose("GPU 0 was busy 95.0 %.\n\n| finding |\n|---|\n| x |\n", None, "run.sqlite")
    assert body.startswith(MARKER + "\n")
    assert "GPU 0 was busy 95.0 %." in body and "| finding |" in body
    assert "baseline" not in body
    assert body.rstrip().splitlines()[-1] == "<sub>dashcam 0.1.0 · profile `run.sqlite`</sub>"
    body = compose("S.", "| metric |\n|---|\n", "after.sqlite", "before.sqlite", 7.5)
    assert body.index("S.") < body.index("Compared with the baseline `before.sqlite`") < body.index("| metric |")
    assert body.rstrip().splitlines()[-1] == (
        "<sub>dashcam 0.1.0 · profile `after.sqlite` · baseline `before.sqlite` · regression threshold 7.5 %</sub>")


def test_a_body_over_githubs_limit_is_cut_at_a_line_with_the_footer_kept():
    summary = "\n".join(f"| row {i} | {'x' * 90} |" for i in range(1000))  # ~100 k chars
    body = compose(summary, None, "p.sqlite")
    assert len(body) <= MAX_BODY_CHARS
    assert body.startswith(MARKER)
    assert "cut here" in body and body.rstrip().endswith("`p.sqlite`</sub>")
    kept = [ln for ln in body.splitlines() if ln.startswith("| row ")]
    assert kept and all(ln.endswith("|") for ln in kept)  # no half rows
    assert fit("short", "f") == "short\n\nf\n"


def test_build_comment_runs_each_tool_once_per_profile(profiles, monkeypatch):
    """The summary and the diff share the profile's tool runs: no tool runs twice with the same arguments
    on the same profile; the summary comes first, then the diff against the baseline."""
    import dashcam.evidence.runs as runs_mod

    after, baseline = profiles
    calls = []
    real = runs_mod.run_tool

    def counting(profile, name, args=None):
        calls.append((profile.path.name, name, repr(sorted((args or {}).items()))))
        return real(profile, name, args)

    monkeypatch.setattr(runs_mod, "run_tool", counting)
    body = build_comment(after, baseline, threshold_pct=3)
    assert len(calls) == len(set(calls)), [c for c in calls if calls.count(c) > 1]
    assert {c[0] for c in calls} == {"after.sqlite", "baseline.sqlite"}
    assert body.index("### dashcam summary:") < body.index("### Compared with the baseline `baseline.sqlite`")
    assert "regression threshold 3 %" in body
    calls.clear()
    body = build_comment(after)
    assert {c[0] for c in calls} == {"after.sqlite"} and "Compared with the baseline" not in body


def test_target_validation():
    assert check_target("octo-org/octo.repo_1", 12) == ("octo-org", "octo.repo_1", 12)
    for repo, pr in (("octo", 1), ("octo/repo/x", 1), ("", 1), (None, 1), ("o/r", 0), ("o/r", None), ("a b/c", 1)):
        with pytest.raises(DashcamError) as e:
            check_target(repo, pr)
        assert e.value.exit_code == 11


# -- the client against the fake API ----------------------------------------------------------------


def test_next_link():
    assert next_link('<https://h/x?page=2>; rel="next", <https://h/x?page=5>; rel="last"') == "https://h/x?page=2"
    assert next_link('<https://h/x?page=1>; rel="prev", <https://h/x?page=5>; rel="last"') is None
    assert next_link(None) is None and next_link("") is None


def test_first_run_creates_the_comment_and_the_second_updates_it():
    with FakeGitHub(token=TOKEN, repos={"octo/repo": [7]}) as fake:
        fake.add_comment("octo/repo", 7, "LGTM", login="alice")
        gh = GitHub(TOKEN, fake.api_url)
        action, c = upsert(gh, "octo", "repo", 7, f"{MARKER}\nfirst")
        assert action == "created" and c["html_url"].endswith(f"#issuecomment-{c['id']}")
        action, c2 = upsert(gh, "octo", "repo", 7, f"{MARKER}\nsecond")
        assert action == "updated" and c2["id"] == c["id"]
        assert [x["body"] for x in fake.comments("octo/repo", 7)] == ["LGTM", f"{MARKER}\nsecond"]
        assert fake.methods() == [
            "GET /repos/octo/repo/issues/7/comments", "POST /repos/octo/repo/issues/7/comments",
            "GET /repos/octo/repo/issues/7/comments", f"PATCH /repos/octo/repo/issues/comments/{c['id']}"]
        assert fake.requests[1]["body"] == {"body": f"{MARKER}\nfirst"}
        h = fake.requests[0]["headers"]
        assert h["accept"] == "application/vnd.github+json" and h["x-github-api-version"] == "2022-11-28"
        assert h["authorization"] == f"Bearer {TOKEN}" and h["user-agent"].startswith("dashcam")


def test_a_marker_comment_on_page_two_is_found_and_the_first_marked_one_is_edited():
    with FakeGitHub(token=TOKEN, repos={"octo/repo": [3]}) as fake:
        for i in range(250):
            fake.add_comment("octo/repo", 3, f"{MARKER} old report" if i in (130, 200) else f"comment {i}")
        target = fake.comments("octo/repo", 3)[130]["id"]
        action, c = upsert(GitHub(TOKEN, fake.api_url), "octo", "repo", 3, f"{MARKER} new")
        assert action == "updated" and c["id"] == target
        gets = [r for r in fake.requests if r["method"] == "GET"]
        assert [r["query"] for r in gets] == [{"per_page": "100"}, {"per_page": "100", "page": "2"}]  # stops at 2
        assert sum(MARKER in x["body"] for x in fake.comments("octo/repo", 3)) == 2
        assert len(fake.comments("octo/repo", 3)) == 250


def test_enterprise_api_url_with_a_path_prefix():
    with FakeGitHub(token=TOKEN, repos={"corp/app": [1]}, prefix="/api/v3") as fake:
        for i in range(101):
            fake.add_comment("corp/app", 1, f"c{i}")
        action, _ = upsert(GitHub.from_env({"GITHUB_TOKEN": TOKEN, "GITHUB_API_URL": fake.api_url + "/"}),
                           "corp", "app", 1, MARKER)
        assert action == "created"
        assert {r["path"] for r in fake.requests} == {"/api/v3/repos/corp/app/issues/1/comments"}
        assert len(fake.requests) == 3  # two pages, one POST


def test_error_mapping_and_messages():
    hdr = {"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(RESET_EPOCH)}
    e = error_for(403, "Forbidden", hdr, b'{"message": "API rate limit exceeded"}', "GET /x")
    assert isinstance(e, GitHubRateLimited) and "2030-01-01T00:00:00Z" in str(e) and "API rate limit" in str(e)
    e = error_for(429, "Too Many Requests", {"retry-after": "60"}, b"", "POST /x")
    assert isinstance(e, GitHubRateLimited) and "retry after 60 s" in str(e)
    e = error_for(403, "Forbidden", {"retry-after": "30"}, b'{"message": "secondary rate limit"}', "POST /x")
    assert isinstance(e, GitHubRateLimited) and "retry after 30 s" in str(e)
    e = error_for(403, "Forbidden", {"x-ratelimit-remaining": "4999"}, b'{"message": "Resource not accessible '
                  b'by integration"}', "POST /x")
    assert isinstance(e, GitHubForbidden) and "pull-requests: write" in str(e) and "not accessible" in str(e)
    assert isinstance(error_for(401, "", {}, b"", "GET /x"), GitHubBadCredentials)
    assert isinstance(error_for(404, "", {}, b"", "GET /x"), GitHubNotFound)
    e = error_for(502, "Bad Gateway", {}, b"<html>\n<h1>502</h1>\n</html>", "GET /x")
    assert type(e) is GitHubError and str(e) == "GitHub request failed: GET /x -> 502 Bad Gateway (GitHub said: <html>)"
    codes = {GitHubTokenMissing: 20, GitHubBadCredentials: 21, GitHubForbidden: 22, GitHubNotFound: 23,
             GitHubRateLimited: 24, GitHubError: 25}
    assert {c: c.exit_code for c in codes} == codes and all(issubclass(c, DashcamError) for c in codes)


def test_missing_token_and_timeouts_and_foreign_links():
    with pytest.raises(GitHubTokenMissing, match="set it"):
        token_from_env({"GITHUB_TOKEN": "  "})
    with FakeGitHub(token=TOKEN) as fake:
        fake.delay = 0.5
        with pytest.raises(GitHubError, match="TimeoutError|timed out"):
            GitHub(TOKEN, fake.api_url, timeout=0.1).request("GET", "/repos/octo/repo/issues/1/comments")
        fake.delay = 0
        with pytest.raises(GitHubError, match="another host"):
            GitHub(TOKEN, fake.api_url).request("GET", "https://evil.example/steal")


# -- the real CLI -----------------------------------------------------------------------------------


def _closed_port_url():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return f"http://127.0.0.1:{port}"


def test_cli_dry_run_prints_the_markdown_without_a_token_or_http(profiles, cache_dir):
    from dashcam.profile import Profile
    from dashcam.reports.summary import summarize, to_markdown

    after, _ = profiles
    with FakeGitHub(token=TOKEN) as fake:
        p = run_cli("pr-comment", after, "--dry-run", cache=cache_dir, env=github_env(fake.api_url, token=None))
        assert p.returncode == 0, p.stderr
        assert fake.requests == []
    summary = summarize(Profile.open(after, progress=False))
    assert p.stdout.startswith(MARKER + "\n") and summary.paragraph in p.stdout and to_markdown(summary) in p.stdout
    assert p.stdout.rstrip().endswith("profile `after.sqlite`</sub>")


def test_cli_creates_then_updates_one_comment(profiles, cache_dir):
    after, baseline = profiles
    with FakeGitHub(token=TOKEN, repos={"octo/repo": [42]}) as fake:
        p = run_cli("pr-comment", after, "--repo", "octo/repo", "--pr", 42, cache=cache_dir,
                    env=github_env(fake.api_url))
        assert p.returncode == 0, p.stderr
        [c] = fake.comments("octo/repo", 42)
        assert p.stdout.strip() == f"dashcam: created the comment on octo/repo#42: {c['html_url']}"
        assert "baseline" not in c["body"]
        p = run_cli("pr-comment", after, "--baseline", baseline, "--threshold", 2.5, "--repo", "octo/repo", "--pr", 42,
                    cache=cache_dir, env=github_env(fake.api_url))
        assert p.returncode == 0, p.stderr
        assert p.stdout.startswith("dashcam: updated the comment on octo/repo#42")
        [c2] = fake.comments("octo/repo", 42)
        assert c2["id"] == c["id"] and c2["body"].startswith(MARKER)
        assert "Compared with the baseline `baseline.sqlite`" in c2["body"]
        assert "regression threshold 2.5 %" in c2["body"]


@pytest.mark.parametrize("case", ["bad_token", "forbidden", "no_pr", "rate_limit", "rate_limit_429", "server_error"])
def test_cli_http_errors_are_one_line_with_their_exit_code(case, profiles, cache_dir):
    after, _ = profiles
    token, pr, expect = TOKEN, 1, None
    with FakeGitHub(token=TOKEN, repos={"octo/repo": [1]}) as fake:
        if case == "bad_token":
            token, code, expect = "wrong", 21, "401 bad credentials"
        elif case == "forbidden":
            fake.fail(403, {"x-ratelimit-remaining": "4000"}, "Resource not accessible by integration",
                      methods=("POST", "PATCH"))  # a read-only token: listing works, writing does not
            code, expect = 22, "pull-requests: write"
        elif case == "no_pr":
            pr, code, expect = 999, 23, "not found (404) on GET /repos/octo/repo/issues/999/comments"
        elif case == "rate_limit":
            fake.fail(403, {"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(RESET_EPOCH)}, "API rate limit")
            code, expect = 24, "resets at 2030-01-01T00:00:00Z (UTC)"
        elif case == "rate_limit_429":
            fake.fail(429, {"Retry-After": "17"}, "slow down")
            code, expect = 24, "retry after 17 s"
        else:
            fake.fail(500, {}, "boom\nsecond line")
            code, expect = 25, "-> 500 Internal Server Error (GitHub said: boom)"
        p = run_cli("pr-comment", after, "--repo", "octo/repo", "--pr", pr, cache=cache_dir,
                    env=github_env(fake.api_url, token=token))
        assert expect in assert_one_line_error(p, code)
        assert fake.comments("octo/repo", 1) == []


def test_cli_missing_token_network_error_and_bad_repo(profiles, cache_dir):
    after, _ = profiles
    p = run_cli("pr-comment", after, "--repo", "octo/repo", "--pr", 1, cache=cache_dir,
                env=github_env(_closed_port_url(), token=None))
    assert "GITHUB_TOKEN is not set" in assert_one_line_error(p, 20)
    url = _closed_port_url()
    p = run_cli("pr-comment", after, "--repo", "octo/repo", "--pr", 1, cache=cache_dir, env=github_env(url))
    assert f"cannot reach GitHub at {url}" in assert_one_line_error(p, 25)
    p = run_cli("pr-comment", after, "--repo", "octo", "--pr", 1, cache=cache_dir, env=github_env(url))
    assert "--repo must be OWNER/NAME" in assert_one_line_error(p, 11)
    p = run_cli("pr-comment", after, "--dry-run", "--threshold", -1, cache=cache_dir, env=github_env())
    assert "--threshold must be >= 0" in assert_one_line_error(p, 11)


# -- action.yml and the example workflow ------------------------------------------------------------


def _action():
    return yaml.safe_load((REPO_ROOT / "action.yml").read_text())


def test_action_yml_is_a_composite_action_with_the_inputs():
    a = _action()
    assert a["name"] and a["description"] and a["runs"]["using"] == "composite"
    inputs = a["inputs"]
    assert inputs["profile"]["required"] is True
    assert {k: str(inputs[k].get("default")) for k in ("baseline", "python-version", "threshold",
                                                       "fail-on-regression", "dashcam-spec")} == {
        "baseline": "", "python-version": "3.11", "threshold": "5", "fail-on-regression": "false", "dashcam-spec": ""}
    assert all(v.get("description") for v in inputs.values())
    steps = a["runs"]["steps"]
    assert steps[0]["uses"].startswith("actions/setup-python@")
    assert steps[0]["with"]["python-version"] == "${{ inputs.python-version }}"
    for s in steps:
        assert "uses" in s or s.get("shell") == "bash"  # composite run steps need a shell
        if "run" in s:  # inputs reach scripts through env only (no ${{ }} inside scripts: no injection)
            assert "${{" not in s["run"]
            subprocess.run(["bash", "-n"], input=s["run"], text=True, check=True)
    comment = next(s for s in steps if "dashcam pr-comment" in s.get("run", ""))
    assert comment["env"]["GITHUB_TOKEN"] == "${{ inputs.github-token }}"
    assert inputs["github-token"]["default"] == "${{ github.token }}"
    assert comment["env"]["REPO"] == "${{ github.repository }}"
    assert comment["env"]["PR"] == "${{ github.event.pull_request.number }}"
    gate = next(s for s in steps if s.get("name") == "Fail on regression")
    assert gate["if"] == GATE_IF and "dashcam diff" not in gate["run"]  # it reads the diff step's verdict
    assert [s["name"] for s in steps if "dashcam diff" in s.get("run", "")] == ["Diff against the baseline"]
    assert {k: v["value"] for k, v in a["outputs"].items()} == {
        "verdict": "${{ steps.diff.outputs.verdict }}", "regressed": "${{ steps.diff.outputs.regressed }}",
        "comment-url": "${{ steps.comment.outputs.comment-url }}"}
    assert all(v.get("description") for v in a["outputs"].values())
    assert str(inputs["picture"]["default"]) == "" and str(inputs["min-shared"]["default"]) == ""


def test_example_workflow_runs_the_action_on_pull_requests():
    wf = yaml.safe_load((REPO_ROOT / ".github/workflows/dashcam-example.yml").read_text())
    on = wf.get("on", wf.get(True))  # YAML 1.1 reads a bare `on` key as True
    assert "pull_request" in on
    report = wf["jobs"]["report"]
    assert report["permissions"]["pull-requests"] == "write"
    uses = [s.get("uses", "") for s in report["steps"]]
    assert uses[0].startswith("actions/checkout@") and any(u.startswith("actions/download-artifact@") for u in uses)
    step = next(s for s in report["steps"] if s.get("uses") == "./")
    assert step["with"]["profile"] == "profiles/demo.sqlite"
    upload = next(s for s in wf["jobs"]["profile"]["steps"] if s.get("uses", "").startswith("actions/upload-artifact@"))
    assert upload["with"]["path"] == "examples/demo.sqlite" and (REPO_ROOT / upload["with"]["path"]).is_file()


def _resolve(text: str, ctx: dict) -> str:
    """Substitute ``${{ a.b.c }}`` from ``ctx`` (only plain context paths: what action.yml uses in env/with)."""
    def one(m):
        value = ctx
        for key in m.group(1).split("."):
            value = value.get(key, "") if isinstance(value, dict) else ""
        return str(value)

    return re.sub(r"\$\{\{\s*([\w.-]+)\s*\}\}", one, text)


GATE_IF = "inputs.fail-on-regression == 'true' && inputs.baseline != ''"
CONDITIONS = {  # every `if:` of action.yml, evaluated here by hand
    GATE_IF: lambda ins: ins["fail-on-regression"] == "true" and ins["baseline"] != "",
    "inputs.baseline != ''": lambda ins: ins["baseline"] != "",
    "inputs.picture != ''": lambda ins: ins["picture"] != "",
}
ARTIFACT_URL = "https://github.com/octo/repo/actions/runs/1/artifacts/2"  # what upload-artifact would give


def run_action(tmp_path, inputs: dict, github: dict, env: dict) -> tuple[list[tuple[str, int]], str, str]:
    """Run action.yml's bash steps the way the runner does (setup-python and pip install skipped; the
    upload-artifact step gives ARTIFACT_URL), stopping at the first failing step. Returns ([(step name, exit
    code)], the job summary, the failing step's output); the action's outputs are in ``run_action.outputs``."""
    a = _action()
    ins = {k: _resolve(str(v.get("default", "")), {"github": github}) for k, v in a["inputs"].items()}
    ins.update(inputs)
    ctx = {"inputs": ins, "github": github, "steps": {}}
    summary = tmp_path / "step_summary.md"
    summary.unlink(missing_ok=True)
    ran, stderr = [], ""
    for step in a["runs"]["steps"]:
        if "if" in step and not CONDITIONS[step["if"]](ins):
            continue
        if step.get("uses", "").startswith("actions/upload-artifact@"):
            assert step["with"]["path"] == "${{ steps.picture.outputs.path }}"
            assert Path(_resolve(step["with"]["path"], ctx)).is_file()
            ctx["steps"][step["id"]] = {"outputs": {"artifact-url": ARTIFACT_URL}}
            continue
        if "uses" in step or step["name"] == "Install dashcam":
            continue
        out = tmp_path / f"output-{len(ran)}"
        out.write_text("")
        step_env = {k: _resolve(str(v), ctx) for k, v in step.get("env", {}).items()}
        full_env = {**env, **step_env, "GITHUB_OUTPUT": str(out), "GITHUB_STEP_SUMMARY": str(summary),
                    "RUNNER_TEMP": str(tmp_path), "GITHUB_ACTION_PATH": str(REPO_ROOT)}
        p = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]], env=full_env,
                           check=False, capture_output=True, text=True, cwd=tmp_path, timeout=120)
        ran.append((step["name"], p.returncode))
        if p.returncode:
            stderr = p.stdout + p.stderr  # (workflow commands such as ::error:: go to stdout)
            break
        if "id" in step:
            outputs = dict(line.split("=", 1) for line in out.read_text().splitlines())
            ctx["steps"][step["id"]] = {"outputs": outputs}
    run_action.outputs = {k: _resolve(v["value"], ctx) for k, v in a["outputs"].items()}
    return ran, summary.read_text() if summary.exists() else "", stderr


def shims(tmp_path: Path, after: Path) -> tuple[Path, Path]:
    """A bin folder with a stand-in nsys (`export ... --output OUT REP` copies the planted export to OUT) and a
    `dashcam` that logs its arguments to calls.log, then runs the real one. Returns (bin folder, the log)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    nsys = bin_dir / "nsys"
    nsys.write_text(f"#!/bin/sh\nwhile [ $# -gt 1 ]; do [ \"$1\" = --output ] && out=$2; shift; done\n"
                    f"cp {shlex.quote(str(after))} \"$out\"\n")
    log = tmp_path / "calls.log"
    real = Path(sys.executable).with_name("dashcam")
    dashcam = bin_dir / "dashcam"
    dashcam.write_text(f"#!/bin/sh\necho \"$*\" >> {shlex.quote(str(log))}\nexec {shlex.quote(str(real))} \"$@\"\n")
    for f in (nsys, dashcam):
        f.chmod(0o755)
    return bin_dir, log


def action_env(bin_dir: Path, cache_dir: Path, api_url: str) -> dict:
    return {"PATH": f"{bin_dir}:{Path(sys.executable).parent}:/usr/bin:/bin", "DASHCAM_CACHE_DIR": str(cache_dir),
            "HOME": str(cache_dir), "GITHUB_API_URL": api_url}


PR_EVENT = {"token": TOKEN, "repository": "octo/repo", "event": {"pull_request": {"number": 9}}}


def test_the_action_steps_comment_export_a_nsys_rep_and_fail_on_regression(profiles, cache_dir, tmp_path):
    after, baseline = profiles
    rep = tmp_path / "after.nsys-rep"
    rep.write_bytes(b"not really a report")
    bin_dir, calls = shims(tmp_path, after)
    with FakeGitHub(token=TOKEN, repos={"octo/repo": [9]}) as fake:
        env = action_env(bin_dir, cache_dir, fake.api_url)
        # the baseline (10 ms steps) against the demo (20 ms steps): regressed
        ran, summary, err = run_action(tmp_path, {"profile": str(rep), "baseline": str(baseline), "threshold": "4",
                                                  "fail-on-regression": "true", "picture": "gap.svg"}, PR_EVENT, env)
        assert ran == [("Export .nsys-rep files to SQLite", 0), ("Diff against the baseline", 0),
                       ("Draw the timeline picture", 0), ("Comment on the pull request", 0),
                       ("Fail on regression", 13)]
        assert "::error title=dashcam::regressed: median step time 10.000 ms → 20.000 ms" in err
        [c] = fake.comments("octo/repo", 9)
        assert c["body"].startswith(MARKER) and "profile `dashcam-profile.sqlite`" in c["body"]
        assert "baseline `baseline.sqlite`" in c["body"] and "regression threshold 4 %" in c["body"]
        assert f"[Timeline of the largest gap]({ARTIFACT_URL})" in c["body"]
        assert summary == c["body"]  # a PR run writes the job summary too
        assert run_action.outputs == {"verdict": "regressed", "regressed": "true", "comment-url": c["html_url"]}
        # the diff is computed once, by the diff step: the comment embeds its JSON
        commands = [line.split()[0] for line in calls.read_text().splitlines()]
        assert commands == ["diff", "timeline", "pr-comment"]
        comment_call = calls.read_text().splitlines()[2]
        assert "--diff" in comment_call.split() and "--baseline" not in comment_call
        assert "<svg" in (tmp_path / "gap.svg").read_text()
        # not a pull_request event: the report goes to the job summary, nothing is posted; no gate without baseline
        ran, summary, _ = run_action(tmp_path, {"profile": str(after), "fail-on-regression": "true"},
                                     {"token": TOKEN, "repository": "octo/repo"}, env)
        assert ran == [("Export .nsys-rep files to SQLite", 0), ("Comment on the pull request", 0)]
        assert summary.startswith(MARKER) and "profile `after.sqlite`" in summary
        assert run_action.outputs == {"verdict": "", "regressed": "", "comment-url": ""}
        assert len(fake.comments("octo/repo", 9)) == 1 and len(fake.requests) == 2


def test_a_fork_pull_request_writes_the_job_summary_with_a_notice(profiles, cache_dir, tmp_path):
    """A fork's read-only token: the POST is refused (403, exit 22); the job goes on, the report in the summary."""
    after, baseline = profiles
    bin_dir, _ = shims(tmp_path, after)
    with FakeGitHub(token=TOKEN, repos={"octo/repo": [9]}) as fake:
        fake.fail(403, message="Resource not accessible by integration", methods=("POST",))
        ran, summary, _ = run_action(tmp_path, {"profile": str(after), "baseline": str(baseline)}, PR_EVENT,
                                     action_env(bin_dir, cache_dir, fake.api_url))
        assert ran == [("Export .nsys-rep files to SQLite", 0), ("Diff against the baseline", 0),
                       ("Comment on the pull request", 0)]
        assert fake.comments("octo/repo", 9) == [] and fake.methods()[-1] == "POST /repos/octo/repo/issues/9/comments"
        assert summary.startswith(MARKER) and "**dashcam diff: regressed**" in summary
        assert run_action.outputs == {"verdict": "regressed", "regressed": "true", "comment-url": ""}


def test_the_gate_warns_on_a_pair_it_cannot_compare(profiles, cache_dir, tmp_path):
    """The demo against an unrelated program (its "train_step" ranges run an fft_kernel): not_comparable, the gate
    does not fail the job; with min-shared 0 the two compare."""
    after, _ = profiles
    other = ExportBuilder("2024")
    other.gpu(0)
    other.gpu(1)
    for dev in (0, 1):
        for i in range(5):
            s = 1 * MS + i * 500 * US
            other.nvtx(f"train_step {i}", s, s + 500 * US, pid=1000 + dev)
            other.launch(dev, s - 20 * US, s - 14 * US, s, s + 400 * US, name="fft_kernel", pid=1000 + dev)
    unrelated = other.write(tmp_path / "unrelated.sqlite")
    bin_dir, _ = shims(tmp_path, after)
    with FakeGitHub(token=TOKEN, repos={"octo/repo": [9]}) as fake:
        ran, summary, _ = run_action(tmp_path, {"profile": str(after), "baseline": str(unrelated),
                                                "fail-on-regression": "true"}, PR_EVENT,
                                     action_env(bin_dir, cache_dir, fake.api_url))
        assert [code for _, code in ran] == [0, 0, 0, 0] and ran[-1][0] == "Fail on regression"
        assert run_action.outputs["verdict"] == "not_comparable" and run_action.outputs["regressed"] == "false"
        assert "**dashcam diff: not_comparable** — Different programs" in fake.comments("octo/repo", 9)[0]["body"]
        ran, _, _ = run_action(tmp_path, {"profile": str(after), "baseline": str(unrelated), "min-shared": "0",
                                          "fail-on-regression": "true"}, PR_EVENT,
                               action_env(bin_dir, cache_dir, fake.api_url))
        assert run_action.outputs["verdict"] == "regressed" and ran[1] == ("Diff against the baseline", 0)
        assert ran[-1] == ("Fail on regression", 13)  # 0.5 ms steps before, 20 ms after


def test_pr_comment_embeds_a_given_diff_without_diffing(profiles, cache_dir, tmp_path, monkeypatch):
    from dashcam.reports import diff as diff_module

    after, baseline = profiles
    j = run_cli("diff", baseline, after, "--format", "json", "--threshold", "3", cache=cache_dir)
    saved = tmp_path / "diff.json"
    saved.write_text(j.stdout)

    def no_diff(*a, **k):
        raise AssertionError("diffed again")

    monkeypatch.setattr(diff_module, "compare_measured", no_diff)
    body = build_comment(after, diff_path=saved)
    assert "baseline `baseline.sqlite`" in body and "regression threshold 3 %" in body
    assert "**dashcam diff: regressed**" in body
    out = tmp_path / "summary.md"
    p = run_cli("pr-comment", after, "--diff", saved, "--dry-run", "--summary-file", out, cache=cache_dir,
                env=github_env())
    assert p.returncode == 0 and out.read_text() == p.stdout == body
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    p = run_cli("pr-comment", after, "--diff", bad, "--dry-run", cache=cache_dir, env=github_env())
    assert "not the JSON of `dashcam diff --format json`" in assert_one_line_error(p, 11)
    p = run_cli("pr-comment", after, "--diff", saved, "--baseline", baseline, "--dry-run", cache=cache_dir,
                env=github_env())
    assert "--baseline or --diff, not both" in assert_one_line_error(p, 11)
