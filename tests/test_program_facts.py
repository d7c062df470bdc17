"""The names and counts workload reads (profile/program_facts.py), counted when the cache is built, are the
counts the SQL over the views gives."""
from dashcam.profile.program_facts import host_facts, nvtx_facts
from dashcam.testing.builder import ExportBuilder
from dashcam.tools import get_tool

from .conftest import MS, US


def _export() -> ExportBuilder:
    b = ExportBuilder()
    b.gpu(0)
    for pid in (100, 200):
        b.process(pid, f"python train.py --pid {pid}")
        for i in range(3):
            t = i * MS
            b.launch(0, t, t + 10 * US, t + 5 * US, t + 300 * US, pid=pid, name="ampere_sgemm_128x64_tn")
        b.api("cudaStreamSynchronize", 4 * MS, 5 * MS, pid=pid)
    b.api("cuModuleLoadData", 2 * MS, 2 * MS + 50 * US, pid=200, driver=True)
    b.nvtx("forward", 0, 1 * MS)
    b.nvtx("forward", 1 * MS, 2 * MS, registered=True)  # the same label group from a registered string
    b.nvtx("aten::mm", 0, 500 * US, pid=200)
    b.nvtx("a mark", 3 * MS, None)  # a mark, not a range
    b.nvtx("NCCL", 0, None, event_type=75)  # a domain's creation: its name
    b.nvtx("MPI", 0, None, event_type=75, registered=True)
    return b


def test_facts_counted_with_the_cache_are_the_sql_counts(build):
    p = build(_export())
    stored = p.manifest["derived"]["program_facts"]
    want = {**host_facts(p.con), **nvtx_facts(p.con)}
    assert set(stored) == {*want, "startup"}
    for k, v in want.items():
        assert (sorted(map(tuple, stored[k])) if isinstance(v, list) and k != "pids" else stored[k]) == \
            (sorted(map(tuple, v)) if isinstance(v, list) and k != "pids" else v), k
    assert sorted(map(tuple, stored["nvtx"])) == [("aten::mm", 1), ("forward", 2)]
    assert sorted(map(tuple, stored["nvtx_domain"])) == [("MPI", 1), ("NCCL", 1)]
    assert stored["pids"] == [100, 200]
    assert sorted(map(tuple, stored["api"])) == [("cuModuleLoadData", 1), ("cudaLaunchKernel", 6),
                                                 ("cudaStreamSynchronize", 2)]
    # the first launch call of the kernel in each process: [0, 10 us), in the window (from the first kernel, at
    # 5 us) [5, 10 us); and a module load in process 200
    first = stored["startup"]["first_launches"]
    assert (first["rows"], first["ns"], first["starts"], first["ends"]) == (2, 5 * US, [5 * US], [10 * US])
    loads = stored["startup"]["module_loads"]
    assert (loads["rows"], loads["ns"], loads["starts"]) == (1, 50 * US, [2 * MS])


def test_workload_reads_the_stored_facts(build):
    got = get_tool("workload")(build(_export())).model_dump()
    assert got["family"] == "pytorch" and got["mpi"] and got["nccl"]
    assert (got["first_launch_count"], got["first_launch_ns"], got["module_load_ns"]) == (2, 5 * US, 50 * US)
