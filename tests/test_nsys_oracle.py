"""NVIDIA's numbers as a test oracle: `nsys stats` / `nsys analyze` against dashcam's tools (tests/nsys_oracle.py).

On the shared real exports and on planted ones, every figure nsys computes agrees with dashcam's once the
definitions in ``nsys_oracle.DIFFERENCES`` are lined up; the alignments are shown to matter (each changes a figure
on some export), and docs/definitions.md lists every difference. Skipped without nsys (the reason says how to
point at one) or without ../shared/profiles.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from dashcam.profile import Profile
from dashcam.testing.builder import ExportBuilder
from dashcam.testing.scenarios import build as build_scenario

from . import nsys_oracle as oracle
from .conftest import MS, SHARED_GPU, US

NSYS, NO_NSYS = oracle.find_nsys()
needs_nsys = pytest.mark.skipif(NSYS is None, reason=NO_NSYS)
DOCS = Path(__file__).resolve().parents[1] / "docs" / "definitions.md"

# Planted scenarios with each kind of figure: NVTX steps and copies (demo), the 2021 schema, OS runtime calls,
# unified-memory migrations and memsets, JIT ranges.
PLANTED = ("demo", "old_schema", "host_waits", "unified_memory", "jit_cold_start", "tail_copies")


def _compare(export: Path, workdir: Path, profile: Profile | None = None) -> tuple[dict, list[oracle.Row]]:
    reports = oracle.run_nsys(NSYS, export, workdir)
    return reports, oracle.compare_all(profile or Profile.open(export, progress=False), export, reports)


def _disagreements(rows: list[oracle.Row]) -> str:
    return "\n".join(f"{r.figure} [{r.key}]: dashcam {r.dashcam} (own {r.raw}), nsys {r.nsys} ({r.how})"
                     for r in rows if not r.agrees)


@pytest.fixture(scope="module")
def shared_results(tmp_path_factory, opened):
    """Each shared export compared once per module: (reports, rows); opened through the session's cache of the
    shared profiles (conftest ``opened``), so a run with test_shared_profiles builds each cache once."""
    done: dict[Path, tuple] = {}

    def get(path: Path):
        if path not in done:
            done[path] = _compare(path, tmp_path_factory.mktemp("nsys"), opened(path))
        return done[path]

    return get


@needs_nsys
@pytest.mark.parametrize("path", SHARED_GPU, ids=lambda p: p.name)
def test_shared_export_agrees_with_nsys(shared_results, path):
    reports, rows = shared_results(path)
    assert rows, f"nsys computed nothing dashcam reports on {path.name}"
    assert reports["cuda_gpu_kern_sum"], "every shared export with GPU activity has kernels"
    assert not _disagreements(rows), _disagreements(rows)


@needs_nsys
@pytest.mark.skipif(not SHARED_GPU, reason="../shared/profiles is only in the project workspace")
def test_alignments_change_figures_on_real_exports(shared_results):
    """Each alignment is needed: on some real export dashcam's own figure differs from nsys's and the aligned one
    does not (the time range, the gaps, the 2.x backtrace rows, the OS runtime calls); nsys keeps API suffixes
    dashcam strips, and has more NVTX rows than dashcam has label groups."""
    changed: set[str] = set()
    kept_suffix, nvtx_rows, nvtx_groups = set(), 0, 0
    for path in SHARED_GPU:
        reports, rows = shared_results(path)
        for r in rows:
            if r.aligned:
                changed.update(t.strip() for t in r.how.split(","))
        kept_suffix |= {r["Name"] for r in reports["cuda_api_sum"] or []
                        if oracle.dashcam_api_name(r["Name"]) != r["Name"]}
        nvtx_rows += len(reports["nvtx_sum"] or [])
        nvtx_groups += sum(1 for r in rows if r.figure == "nvtx instances")
    assert {"time range", "gaps", "backtrace duplicates", "OS runtime"} <= changed, changed
    assert kept_suffix, "no real export has an API name nsys leaves a version suffix on"
    assert nvtx_rows > nvtx_groups, (nvtx_rows, nvtx_groups)


@needs_nsys
@pytest.mark.parametrize("name", PLANTED)
def test_planted_export_agrees_with_nsys(tmp_path, name):
    export = build_scenario(name, tmp_path / f"{name}.sqlite")
    reports, rows = _compare(export, tmp_path / "nsys")
    assert reports["cuda_gpu_kern_sum"], reports["_log"][0]["log"]
    assert not _disagreements(rows), _disagreements(rows)


def _edges(schema: str) -> ExportBuilder:
    """One export that meets every difference: calls and ranges before, across and after the GPU window, suffixes
    nsys keeps (`_v10000`, `_v2`), numbered NVTX labels, a copy and a memset in a long gap, a migration, two
    kernels at once."""
    b = ExportBuilder(schema)
    b.gpu(0)
    b.api("cudaMalloc", 0, 2 * MS)                                   # before the window
    b.api("cuMemAlloc_v2", 1 * MS, 3 * MS + 500 * US, driver=True)   # crosses the window's start (3 ms)
    b.nvtx("setup", 0, 4 * MS)                                       # crosses it too
    t = 3 * MS
    for i in range(4):
        b.nvtx(f"step {i}", t, t + 10 * MS)
        b.launch(0, t, t + 10 * US, t + 20 * US, t + 4 * MS, name="gemm")
        b.api("cudaGraphLaunch", t + 4 * MS, t + 4 * MS + 5 * US)   # a suffix nsys keeps (_v10000)
        b.api("cudaStreamSynchronize", t + 4 * MS + 10 * US, t + 6 * MS)
        t += 10 * MS
    # kernels at [t + 20 us, t + 4 ms], t = 3, 13, 23, 33 ms: the window is [3.02, 37] ms, gaps > 1 ms at 7-13.02,
    # 17-23.02 and 27-33.02 ms; a memset splits the first for nsys, a copy the second
    b.memset(0, 9 * MS, 9 * MS + 300 * US, 4096)
    b.copy_call(0, 18 * MS, 18 * MS + 10 * US, 19 * MS, 20 * MS, 1 << 20, "HtoD")
    b.memcpy(0, 36 * MS, 36 * MS + 200 * US, 65536, "UM_HtoD", cause=2)  # under the last kernel
    b.launch(0, 3 * MS + 30 * US, 3 * MS + 40 * US, 4 * MS, 6 * MS, name="side", stream=8)  # concurrent with gemm
    b.api("cudaDeviceSynchronize", 36 * MS, 60 * MS)                # crosses the window's end
    b.nvtx("teardown", 50 * MS, 55 * MS)                             # after the window
    b.nvtx("never ended", 20 * MS, None)                              # nsys ends it at the last NVTX time
    return b


@needs_nsys
@pytest.mark.parametrize("schema", ["2024", "2022"])
def test_every_difference_on_a_planted_export(tmp_path, schema):
    export = _edges(schema).write(tmp_path / f"edges_{schema}.sqlite")
    reports, rows = _compare(export, tmp_path / "nsys")
    assert not _disagreements(rows), _disagreements(rows)
    changed = {t.strip() for r in rows if r.aligned for t in r.how.split(",")}
    assert {"time range", "gaps", "NVTX", "utilization"} <= changed, changed
    if schema == "2022":
        assert "backtrace duplicates" in changed
    # API names: nsys keeps the suffixes that are not 4 digits, dashcam strips them
    names = {r["Name"] for r in reports["cuda_api_sum"]}
    assert {"cudaGraphLaunch_v10000", "cuMemAlloc_v2", "cudaMalloc"} <= names
    api = {r.key for r in rows if r.figure == "api calls" and r.agrees}
    assert {"cudaGraphLaunch", "cuMemAlloc", "cudaMalloc"} <= api
    # NVTX: four labels for nsys, one group for dashcam
    assert {r["Range"] for r in reports["nvtx_sum"]} >= {f"step {i}" for i in range(4)}
    (steps,) = [r for r in rows if r.figure == "nvtx instances" and r.key == "step <n>"]
    assert steps.dashcam == steps.nsys == 4
    (never,) = [r for r in rows if r.figure == "nvtx total_ns" and r.key == "never ended"]
    assert never.raw == 0 and never.nsys == 35 * MS  # from 20 ms to the end of teardown
    # copies: the migration is nsys's "Unified" label and dashcam's migrations
    assert "[CUDA memcpy Unified Host-to-Device]" in {r["Operation"] for r in reports["cuda_gpu_mem_time_sum"]}
    (mig,) = [r for r in rows if r.figure == "copies count" and r.key == "migration HtoD"]
    assert mig.dashcam == mig.nsys == 1
    # gaps: the memset and the copy split two of dashcam's three gaps in two for nsys
    (gaps,) = [r for r in rows if r.figure == "gaps > 1 ms count"]
    assert gaps.raw == 3 and gaps.nsys == 5


def test_every_difference_is_documented():
    """docs/definitions.md has the "dashcam vs nsys stats" table: the helper's DIFFERENCES, row for row."""
    text = DOCS.read_text()
    m = re.search(r"^## dashcam vs nsys stats\n(.*?)(?=^## |\Z)", text, re.S | re.M)
    assert m, "docs/definitions.md lacks its '## dashcam vs nsys stats' section"
    rows = {tuple(c.strip() for c in row.strip("|").split(" | ")) for row in m.group(1).splitlines()
            if row.startswith("| ") and not row.startswith("| topic")}
    want = {(d.topic, d.nsys, d.dashcam, d.reason) for d in oracle.DIFFERENCES.values()}
    assert rows == want, f"docs only: {rows - want}\nhelper only: {want - rows}"


def test_find_nsys_reports_a_bad_dashcam_nsys(monkeypatch, tmp_path):
    monkeypatch.setenv("DASHCAM_NSYS", str(tmp_path / "no-such-nsys"))
    path, why = oracle.find_nsys()
    assert path is None and "DASHCAM_NSYS" in why
