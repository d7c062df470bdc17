"""The timeline picture next to the summary and in the PR comment."""
import xml.etree.ElementTree as ET

from dashcam.testing.scenarios import demo

from .conftest import run_cli


def test_summary_writes_and_links_the_picture(tmp_path):
    path = demo(tmp_path / "demo.sqlite")
    svg = tmp_path / "gap.svg"
    p = run_cli("summary", str(path), "--format", "markdown", "--picture", str(svg), cache=tmp_path / "c")
    assert p.returncode == 0, p.stderr
    assert f"[Timeline of the largest gap]({svg})" in p.stdout
    rows = [g for g in ET.parse(svg).getroot().iter() if g.get("class") == "row"]
    assert len(rows) == 8  # 2 GPUs x (kernels, memory) + 2 threads + their 2 NVTX rows


def test_summary_refuses_other_picture_formats(tmp_path):
    path = demo(tmp_path / "demo.sqlite")
    p = run_cli("summary", str(path), "--picture", str(tmp_path / "x.jpg"), cache=tmp_path / "c")
    assert p.returncode == 11 and ".svg, .html or .png" in p.stderr and "Traceback" not in p.stderr


def test_pr_comment_links_the_picture_url(tmp_path):
    path = demo(tmp_path / "demo.sqlite")
    p = run_cli("pr-comment", str(path), "--dry-run", "--picture-url", "https://ci.example/artifacts/42",
                cache=tmp_path / "c")
    assert p.returncode == 0, p.stderr
    assert "[Timeline of the largest gap](https://ci.example/artifacts/42)" in p.stdout
