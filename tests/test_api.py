"""api: CUDA API calls per function, planted to the ns; invariants and plain-SQL checks on the shared exports."""
import sqlite3

import pytest

from dashcam.errors import UnknownGpu
from dashcam.testing.builder import ExportBuilder
from dashcam.tools import get_tool, tool_schemas

from .conftest import SHARED_GPU, US

tool = get_tool("api")


def planted() -> ExportBuilder:
    """Window [100, 300] us (GPU 0: pid 100; GPU 1: pid 200).

    pid 100, thread 100: cudaLaunchKernel (suffixed _v7000 in the export) [90, 98] launches gemm at
    [100, 140] (the call is outside the window, its kernel inside); [150, 160] launches gemm [170, 200];
    [205, 215] launches relu [220, 230]. cudaStreamSynchronize [240, 290]; cudaMalloc [10, 50] (outside).
    pid 100, thread 101: cudaStreamSynchronize [250, 310] (clipped to [250, 300]: 50 us), overlapping
    thread 100's; cudaMemcpyAsync [120, 124].
    pid 200, thread 200: the same correlation ids 1-3 as pid 100 (ids are per process): cuLaunchKernel
    (driver) [110, 112] launches saxpy on GPU 1 [130, 140]; cudaLaunchKernel [160, 166] launches saxpy
    [170, 180]; cudaLaunchKernel [180, 186] launches saxpy [190, 300]. cudaFree [295, 305] (clipped: 5 us).
    """
    b = ExportBuilder()
    b.gpu(0)
    b.gpu(1)
    b.thread(100, 100, "python")
    b.thread(100, 101, "loader")
    b.thread(200, 200, "python")
    b.launch(0, 90 * US, 98 * US, 100 * US, 140 * US, name="gemm", pid=100, tid=100)
    b.launch(0, 150 * US, 160 * US, 170 * US, 200 * US, name="gemm", pid=100, tid=100)
    b.launch(0, 205 * US, 215 * US, 220 * US, 230 * US, name="relu", pid=100, tid=100)
    b.api("cudaStreamSynchronize", 240 * US, 290 * US, pid=100, tid=100)
    b.api("cudaMalloc", 10 * US, 50 * US, pid=100, tid=100)
    b.api("cudaStreamSynchronize", 250 * US, 310 * US, pid=100, tid=101)
    b.api("cudaMemcpyAsync", 120 * US, 124 * US, pid=100, tid=101)
    b.launch(1, 110 * US, 112 * US, 130 * US, 140 * US, name="saxpy", pid=200, tid=200, api_name="cuLaunchKernel")
    b.launch(1, 160 * US, 166 * US, 170 * US, 180 * US, name="saxpy", pid=200, tid=200)
    b.launch(1, 180 * US, 186 * US, 190 * US, 300 * US, name="saxpy", pid=200, tid=200)
    b.api("cudaFree", 295 * US, 305 * US, pid=200, tid=200)
    return b


def by_name(r):
    return {f.name: f for f in r.functions}


def test_per_function_figures(build):
    r = tool(build(planted()))
    assert r.window.length_ns == 200 * US
    f = by_name(r)
    assert [x.name for x in r.functions] == ["cudaStreamSynchronize", "cudaLaunchKernel", "cudaFree",
                                             "cudaMemcpyAsync", "cuLaunchKernel", "cudaMalloc"]
    sync = f["cudaStreamSynchronize"]
    # two threads: 50 + 50 us of thread time; a thread was inside it over [240, 300]: 60 us = 30 %
    assert (sync.calls, sync.total_ns, sync.mean_ns, sync.median_ns, sync.max_ns, sync.threads) == (
        2, 100 * US, 50 * US, 50 * US, 50 * US, 2)
    assert sync.pct_of_window == 30.0 and sync.kind == "runtime" and sync.launched_kernels is None
    launch = f["cudaLaunchKernel"]  # [150,160] [205,215] of pid 100, [160,166] [180,186] of pid 200
    assert (launch.calls, launch.total_ns, launch.mean_ns, launch.median_ns, launch.max_ns) == (
        4, 32 * US, 8 * US, 8 * US, 10 * US)
    assert launch.threads == 2 and launch.outside_calls == 1 and launch.outside_ns == 8 * US
    assert launch.pct_of_window == 16.0  # union [150,166] + [180,186] + [205,215] = 32 us of 200
    assert launch.calls_per_s == 20000.0  # 4 calls in 200 us
    # kernels in the window launched by cudaLaunchKernel, joined on (pid, correlationId): both gemms (one
    # launched by the call outside the window), relu, and two saxpys; not the saxpy cuLaunchKernel launched
    assert launch.launched_kernels == 5
    assert [(k.kernel, k.count, k.kernel_ns) for k in launch.launched] == [
        ("saxpy", 2, 120 * US), ("gemm", 2, 70 * US), ("relu", 1, 10 * US)]  # by count, then time
    driver = f["cuLaunchKernel"]
    assert (driver.kind, driver.calls, driver.total_ns, driver.launched_kernels) == ("driver", 1, 2 * US, 1)
    assert [(k.kernel, k.count) for k in driver.launched] == [("saxpy", 1)]
    assert (f["cudaFree"].calls, f["cudaFree"].total_ns) == (1, 5 * US)  # clipped at the window end
    malloc = f["cudaMalloc"]  # only before the window: listed last, counted outside
    assert (malloc.calls, malloc.total_ns, malloc.outside_calls, malloc.outside_ns) == (0, 0, 1, 40 * US)
    assert r.api_calls == 9 and r.function_count == 5 and r.outside_calls == 2
    # any thread in any call: [110,112] [120,124] [150,166] [180,186] [205,215] [240,300] = 98 us
    assert (r.busy_ns, r.pct_of_window) == (98 * US, 49.0)
    assert r.threads == []


def test_version_suffix_stripped_and_name_patterns(build):
    p = build(planted())
    assert [f.name for f in tool(p, {"name": "cudaLaunchKernel"}).functions] == ["cudaLaunchKernel"]
    assert [f.name for f in tool(p, {"name": "CUDALAUNCHKERNEL_v7000"}).functions] == ["cudaLaunchKernel"]
    assert [f.name for f in tool(p, {"name": "*launch*"}).functions] == ["cudaLaunchKernel", "cuLaunchKernel"]
    assert [f.name for f in tool(p, {"name": "cuda?alloc"}).functions] == ["cudaMalloc"]
    assert [f.name for f in tool(p, {"name": "cudaM*"}).functions] == ["cudaMemcpyAsync", "cudaMalloc"]
    raw = [r[0] for r in p.rows("SELECT DISTINCT raw_name FROM api_names")]
    assert "cudaLaunchKernel_v7000" in raw  # what the export holds
    none = tool(p, {"name": "cudaGraphLaunch"})
    assert none.functions == [] and none.api_calls == 0 and none.variants_of is None
    assert any("No CUDA API function matches name='cudaGraphLaunch'" in n for n in none.notes)


def test_a_name_nobody_called_gets_its_variants(build):
    """cudaMemcpy asked, only cudaMemcpyAsync called: the tool itself reports the variants and says so (the LLM
    reads the same result the offline answer does); an exact name or a pattern never does."""
    p = build(planted())
    r = tool(p, {"name": "cudaMemcpy"})
    assert r.variants_of == "cudaMemcpy"
    assert [(f.name, f.calls, f.total_ns) for f in r.functions] == [("cudaMemcpyAsync", 1, 4 * US)]
    assert any("No CUDA API function is named 'cudaMemcpy'; its variants are reported: cudaMemcpyAsync." in n
               for n in r.notes)
    assert tool(p, {"name": "cudaMemcpy_v3020"}).variants_of == "cudaMemcpy"  # a version suffix asked is dropped
    assert tool(p, {"name": "cudaMemcpyAsync"}).variants_of is None
    assert tool(p, {"name": "cudaMemcpy?"}).functions == []  # a pattern is taken as it is


def test_median_of_an_even_count_and_per_thread(build):
    b = ExportBuilder()
    b.kernel(0, 0, 100 * US)
    for start, length in ((0, 1), (10, 2), (20, 4), (30, 9)):  # median (2 + 4) / 2 = 3 us
        b.api("cudaEventRecord", start * US, (start + length) * US, tid=7)
    b.api("cudaEventQuery", 50 * US, 51 * US, tid=8)
    b.thread(100, 7, "main")
    r = tool(build(b), {"per_thread": True})
    f = by_name(r)["cudaEventRecord"]
    assert (f.calls, f.median_ns, f.mean_ns, f.max_ns, f.threads) == (4, 3 * US, 4 * US, 9 * US, 1)
    assert [(t.tid, t.thread_name, t.calls, t.total_ns, t.busy_ns, t.pct_of_window, t.top_function)
            for t in r.threads] == [(7, "main", 4, 16 * US, 16 * US, 16.0, "cudaEventRecord"),
                                    (8, "python", 1, 1 * US, 1 * US, 1.0, "cudaEventQuery")]


def test_nested_calls_count_once_in_a_threads_busy_time(build):
    b = ExportBuilder()
    b.kernel(0, 0, 100 * US)
    b.api("cudaLaunchKernel", 10 * US, 30 * US, tid=1)
    b.api("cuLaunchKernel", 12 * US, 28 * US, tid=1, driver=True)
    r = tool(build(b), {"per_thread": True})
    (t,) = r.threads
    assert (t.calls, t.total_ns, t.busy_ns, t.top_function) == (2, 36 * US, 20 * US, "cudaLaunchKernel")
    assert r.busy_ns == 20 * US and r.pct_of_window == 20.0


def test_gpu_keeps_the_processes_of_that_gpu(build):
    p = build(planted())
    r = tool(p, {"gpu": 1})
    assert [f.name for f in r.functions] == ["cudaLaunchKernel", "cudaFree", "cuLaunchKernel"]
    launch = by_name(r)["cudaLaunchKernel"]
    assert (launch.calls, launch.launched_kernels, [k.kernel for k in launch.launched]) == (2, 2, ["saxpy"])
    with pytest.raises(UnknownGpu):
        tool(p, {"gpu": 5})


def test_window_clips_and_counts_the_rest_outside(build):
    p = build(planted())
    r = tool(p, {"start_ms": 0.14, "end_ms": 0.17})  # [240, 270] us
    f = by_name(r)
    assert f["cudaStreamSynchronize"].total_ns == 30 * US + 20 * US  # [240,270] and [250,270]
    assert f["cudaStreamSynchronize"].pct_of_window == 100.0
    assert f["cudaLaunchKernel"].calls == 0 and f["cudaLaunchKernel"].outside_calls == 5
    assert r.api_calls == 2


def test_backtrace_duplicates_are_not_counted(tmp_path):
    from dashcam.profile import Profile

    b = ExportBuilder("2022")  # every runtime call has an eventClass 67 twin with the same correlationId
    b.gpu(0)
    b.launch(0, 10 * US, 20 * US, 30 * US, 40 * US)
    b.api("cudaStreamSynchronize", 40 * US, 60 * US)
    b.kernel(0, 60 * US, 70 * US)
    path = b.write(tmp_path / "bt.sqlite")
    con = sqlite3.connect(path)
    assert con.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME").fetchone()[0] == 4
    con.close()
    p = Profile.open(path, progress=False)
    r = tool(p)
    assert {f.name: (f.calls, f.total_ns) for f in r.functions} == {"cudaStreamSynchronize": (1, 20 * US),
                                                                     "cudaLaunchKernel": (0, 0)}
    assert by_name(r)["cudaLaunchKernel"].outside_calls == 1


def test_no_runtime_rows_and_no_gpu_activity(build):
    b = ExportBuilder()
    b.kernel(0, 0, 10 * US)
    r = tool(build(b))
    assert r.functions == [] and r.api_calls == 0 and r.pct_of_window == 0.0
    assert any("No CUDA API rows" in n for n in r.notes)
    b = ExportBuilder()
    b.api("cudaMalloc", 0, 2 * US)
    b.api("cudaFree", 2 * US, 3 * US)
    r = tool(build(b))  # API-only capture: the window is the calls' span
    assert r.window.length_ns == 3 * US and r.pct_of_window == 100.0
    assert any("No GPU activity" in n for n in r.notes)


def test_the_llm_sees_the_schema():
    schema = next(s for s in tool_schemas() if s["function"]["name"] == "api")
    props = schema["function"]["parameters"]["properties"]
    assert {"name", "per_thread", "gpu", "start_ms", "end_ms", "limit"} <= set(props)


# -- the shared real exports ---------------------------------------------------------------------

def _window(con) -> tuple[int, int]:
    tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    parts = [f'SELECT start, "end" FROM {t}' for t in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY",
                                                         "CUPTI_ACTIVITY_KIND_MEMSET") if t in tables]
    return con.execute(f'SELECT min(start), max("end") FROM ({" UNION ALL ".join(parts)})').fetchone()


@pytest.mark.parametrize("path", SHARED_GPU, ids=lambda p: p.name)
def test_shared_invariants_and_plain_sql(path):
    from dashcam.profile import Profile

    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if "CUPTI_ACTIVITY_KIND_RUNTIME" not in tables:
        pytest.skip("no CUDA API rows")
    ws, we = _window(con)
    bt = "AND coalesce(r.eventClass, 0) <> 67" if "eventClass" in {
        c[1] for c in con.execute("PRAGMA table_info(CUPTI_ACTIVITY_KIND_RUNTIME)")} else ""
    # per stripped name: calls overlapping the window and their clipped time, by plain SQL
    want = {}
    for raw, n, ns in con.execute(f"""
            SELECT s.value, count(*), sum(min(r."end", {we}) - max(r.start, {ws}))
            FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s ON s.id = r.nameId
            WHERE r."end" > {ws} AND r.start < {we} {bt} GROUP BY 1"""):
        import re
        name = re.sub(r"_v[0-9]+$", "", raw)
        a, b = want.get(name, (0, 0))
        want[name] = (a + n, b + ns)
    r = tool(Profile.open(path, progress=False), {"limit": 1000})
    got = {f.name: (f.calls, f.total_ns) for f in r.functions if f.calls}
    assert got == want
    assert r.api_calls == sum(n for n, _ in want.values()) and r.function_count == len(want)
    assert 0 <= r.pct_of_window <= 100 and r.busy_ns <= r.window.length_ns
    for f in r.functions:
        assert 0 <= f.pct_of_window <= 100
        assert f.max_ns <= f.total_ns and f.median_ns <= f.max_ns and f.mean_ns <= f.max_ns
        assert f.calls == 0 or abs(f.mean_ns * f.calls - f.total_ns) <= f.calls
    # kernels launched: the plain (pid, correlationId) join, per launch function
    pid = "((k.globalPid >> 24) & 16777215)" if "globalPid" in {
        c[1] for c in con.execute("PRAGMA table_info(CUPTI_ACTIVITY_KIND_KERNEL)")} else None
    if pid:
        joined = dict(con.execute(f"""
            SELECT s.value, count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k
            JOIN (SELECT DISTINCT correlationId, ((globalTid >> 24) & 16777215) AS pid, nameId
                  FROM CUPTI_ACTIVITY_KIND_RUNTIME r WHERE 1 = 1 {bt}) c
              ON c.correlationId = k.correlationId AND c.pid = {pid}
            JOIN StringIds s ON s.id = c.nameId
            WHERE k."end" > {ws} AND k.start < {we} GROUP BY 1""").fetchall())
        launched = {}
        for raw, n in joined.items():
            import re
            name = re.sub(r"_v[0-9]+$", "", raw)
            launched[name] = launched.get(name, 0) + n
        for f in r.functions:
            if f.launched_kernels is not None:
                assert f.launched_kernels == launched.get(f.name, 0), f.name
                assert sum(k.count for k in f.launched) <= f.launched_kernels


@pytest.mark.parametrize("path", [p for p in SHARED_GPU if p.name == "nsys-ai__mfu_2gpu_before.sqlite"],
                         ids=lambda p: p.name)
def test_shared_two_gpu_training_figures(path):
    """Checked with plain SQL on the file (RUNTIME overlapping the kernel/memcpy/memset window, clipped)."""
    from dashcam.profile import Profile

    r = tool(Profile.open(path, progress=False), {"limit": 1000})
    f = by_name(r)
    assert (f["cudaStreamSynchronize"].calls, f["cudaStreamSynchronize"].total_ns) == (33, 324490065)
    assert (f["cudaLaunchKernel"].calls, f["cudaLaunchKernel"].total_ns) == (3603, 27971938)
    assert (f["cuLaunchKernelEx"].calls, f["cuLaunchKernelEx"].kind) == (402, "driver")
    assert r.functions[0].name == "cudaStreamSynchronize"
