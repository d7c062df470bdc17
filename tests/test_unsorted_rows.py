"""Exports whose rows are not in time order give the same answers as sorted ones.

nsys 2025.6's release notes warn that exported rows may no longer come out in timestamp order. Each export here
is written twice, as built and with every table's rows shuffled (``ExportBuilder.write(shuffle_seed=...)``,
``shuffled_copy``), under the same file name in two folders: every tool's full JSON result (its defaults, and a
GPU and a window cut out of the middle), the summary's JSON and ``dashcam summary --format json`` must be equal.
"""
from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from dashcam.profile import Profile
from dashcam.reports.summary import summarize
from dashcam.testing.builder import ExportBuilder, shuffled_copy
from dashcam.testing.scenarios import build as build_scenario
from dashcam.tools import available_tools, get_tool

from .conftest import MS, SHARED, US, run_cli
from .test_shared_profiles import EXAMPLE_ARGS

SEED = 20251206
# Scenarios with every kind of row: NVTX steps and copies on two ranks, graphs, the CPU side (OS runtime calls, context
# switches, samples, backtraces), memory events and UM faults, GPU metrics, TensorRT layers, the 2021 schema, a
# CPU-only capture. (Every scenario of testing/scenarios.py passed this once; these keep the file fast.)
SCENARIOS = ("demo", "nvtx_steps", "graph_decode", "host_waits", "memory_churn", "managed_faults", "busy_not_busy",
             "old_schema", "trt_layers", "cpu_only")
REAL = ("hpcgroup__pipit__perlmutter-cloverleaf-cuda.sqlite", "hpcgroup__pipit__saxpy-mpi-cuda_nsys_perlmutter0.sqlite",
        "nsys-ai__mock.sqlite")


def _answers(path: Path) -> dict:
    """Every tool's JSON (defaults; and the first GPU in the middle half of the window), and the summary's; an
    error as its type and message. The folder is left out of the text so the two copies compare."""
    p = Profile.open(path, progress=False)
    def strip(text: str):
        return json.loads(text.replace(str(path.parent), "DIR"))

    out = {}
    cut = {}
    if p.full_window:
        length_ms = (p.full_window[1] - p.full_window[0]) / 1e6
        cut = {"gpu": sorted(p.devices)[0], "start_ms": length_ms / 4, "end_ms": length_ms * 3 / 4}
    for tool in available_tools():
        for label, extra in (("", {}), (" cut", cut)):
            if label and not extra:
                continue
            try:
                out[tool.name + label] = strip(tool(p, {**EXAMPLE_ARGS.get(tool.name, {}), **extra}).model_dump_json())
            except Exception as e:  # an answer too: the same one for both copies
                out[tool.name + label] = f"{type(e).__name__}: {str(e).replace(str(path.parent), 'DIR')}"
    try:
        out["summary"] = strip(summarize(p).model_dump_json())
    except Exception as e:
        out["summary"] = f"{type(e).__name__}: {str(e).replace(str(path.parent), 'DIR')}"
    return out


def _differences(a: dict, b: dict) -> list[str]:
    return [k for k in a if a[k] != b.get(k)]


def _starts(path: Path, table: str) -> list[int]:
    """The table's start times in the order its rows are stored."""
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return [r[0] for r in con.execute(f"SELECT start FROM {table}")]
    finally:
        con.close()


def _pair(tmp_path: Path, write) -> tuple[Path, Path]:
    a, b = tmp_path / "sorted" / "x.sqlite", tmp_path / "shuffled" / "x.sqlite"
    a.parent.mkdir()
    b.parent.mkdir()
    write(a)
    shuffled_copy(a, b, SEED)
    return a, b


@pytest.mark.parametrize("name", SCENARIOS)
def test_shuffled_planted_export_gives_the_same_answers(tmp_path, name):
    a, b = _pair(tmp_path, lambda p: build_scenario(name, p))
    if name != "cpu_only":
        kernels = _starts(b, "CUPTI_ACTIVITY_KIND_KERNEL")
        assert kernels != sorted(kernels) and kernels != _starts(a, "CUPTI_ACTIVITY_KIND_KERNEL"), \
            "the shuffle left the kernels in order"
    sorted_answers, shuffled_answers = _answers(a), _answers(b)
    assert not _differences(sorted_answers, shuffled_answers), _differences(sorted_answers, shuffled_answers)


@pytest.mark.parametrize("name", REAL)
def test_shuffled_real_export_gives_the_same_answers(tmp_path, name):
    src = SHARED / name
    if not src.exists():
        pytest.skip(f"{src} not present (../shared/profiles is only in the project workspace)")

    def copy(p: Path) -> None:
        shutil.copyfile(src, p)
        p.chmod(0o644)

    a, b = _pair(tmp_path, copy)
    sorted_answers, shuffled_answers = _answers(a), _answers(b)
    assert not _differences(sorted_answers, shuffled_answers), _differences(sorted_answers, shuffled_answers)


def test_write_shuffles_with_a_fixed_seed(tmp_path):
    """``write(shuffle_seed=...)`` and ``shuffled_copy``: the same rows in another order, the same for one seed."""
    from dashcam.testing.builder import ExportBuilder

    b = ExportBuilder()
    b.gpu(0)
    for i in range(50):
        b.launch(0, i * 1000, i * 1000 + 100, i * 1000 + 200, i * 1000 + 900)
    plain = b.write(tmp_path / "plain.sqlite")
    one = b.write(tmp_path / "one.sqlite", shuffle_seed=SEED)
    two = shuffled_copy(plain, tmp_path / "two.sqlite", SEED)

    def rows(p: Path) -> list:
        con = sqlite3.connect(p)
        try:
            return con.execute("SELECT * FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchall()
        finally:
            con.close()

    assert rows(one) == rows(two) != rows(plain)
    assert sorted(rows(one)) == sorted(rows(plain))


def test_summary_command_on_a_shuffled_export(tmp_path):
    a, b = _pair(tmp_path, lambda p: build_scenario("demo", p))
    out = [run_cli("summary", p, "--format", "json", cache=tmp_path / f"cache{i}", cwd=tmp_path)
           for i, p in enumerate((a, b))]
    assert [o.returncode for o in out] == [0, 0], [o.stderr for o in out]
    assert json.loads(out[0].stdout.replace(str(a.parent), "DIR")) == json.loads(
        out[1].stdout.replace(str(b.parent), "DIR"))


def _nested_at_one_instant() -> ExportBuilder:
    """Three steps of 10 ms, each opening `train_step <i>` and `forward` at the same instant (forward nested,
    5 ms); in forward, at 1 ms, a launch (kernel 3-4 ms) and a cudaDeviceSynchronize: every gap starts (4 ms) and
    every call starts inside forward."""
    b = ExportBuilder()
    b.gpu(0)
    for i in range(3):
        t = i * 10 * MS
        b.nvtx(f"train_step {i}", t, t + 10 * MS)
        b.nvtx("forward", t, t + 5 * MS)
        b.launch(0, t + 1 * MS, t + 1 * MS + 10 * US, t + 3 * MS, t + 4 * MS, name="gemm")
        b.api("cudaDeviceSynchronize", t + 1 * MS + 20 * US, t + 4 * MS)
    return b


@pytest.mark.parametrize("seed", [None, 1, 2, 3, 4])
def test_innermost_range_of_ranges_opened_together(tmp_path, seed):
    """Ranges that start at the same instant: the innermost is the one nested in the other (the first to end), in
    whatever order the rows come (``seed``: shuffled; None: as built)."""
    p = Profile.open(_nested_at_one_instant().write(tmp_path / "x.sqlite", shuffle_seed=seed), progress=False)
    gaps = [g for d in get_tool("gpu_gaps")(p).devices for g in d.largest_gaps if g.launch_call]
    assert len(gaps) == 2 and {g.nvtx_range for g in gaps} == {"forward"}
    assert [(x.nvtx_range, x.launches) for x in get_tool("kernel_detail")(p, {"kernel": "gemm"}).launched_from] \
        == [("forward", 3)]
    assert [(x.nvtx_range, x.calls) for x in get_tool("api_detail")(p, {"name": "cudaDeviceSynchronize"}).called_from] \
        == [("forward", 3)]
