"""NVIDIA's own numbers as a test oracle: `nsys stats` / `nsys analyze` on an export, lined up with dashcam's tools.

`run_nsys` runs the real CLI on a copy of an export (nsys may add tables and indices to the file it reads) and
parses its CSV output; the ``compare_*`` functions turn one report into rows (figure, key, dashcam, nsys, how) that
agree exactly once the definitions are lined up. Every way the two define a figure differently is in
``DIFFERENCES``, once, with its reason, and the alignment code names the difference it applies;
docs/definitions.md ("dashcam vs nsys stats") shows the same table to users (tests/test_nsys_oracle.py checks it
lists every topic). A figure that differs with no difference to explain it is a bug in one of the two.

Which nsys: tests/real_nsys.py's (``DASHCAM_NSYS``, which .ci/run sets, else ``nsys`` on PATH, else the one
.ci/install-nsys unpacked); a ``DASHCAM_NSYS`` that does not run nsys is said, not passed over.
"""
from __future__ import annotations

import csv
import os
import re
import shutil
import sqlite3
import subprocess
from dataclasses import dataclass
from pathlib import Path

from . import real_nsys

STATS_REPORTS = ("cuda_gpu_kern_sum", "cuda_api_sum", "cuda_gpu_mem_time_sum", "cuda_gpu_mem_size_sum", "nvtx_sum",
                 "osrt_sum")
GAP_MS = 1  # nsys analyze gpu_gaps:gap=1 — gaps longer than 1 ms
# gpu_time_util in one chunk per process and device, every chunk shown (the threshold above any figure)
RULES = (f"gpu_gaps:gap={GAP_MS}:rows=-1", "cuda_api_sync:rows=-1", "gpu_time_util:chunks=1:threshold=1000000:rows=-1")
NSYS_TIMEOUT_S = 120


@dataclass(frozen=True)
class Difference:
    topic: str
    nsys: str
    dashcam: str
    reason: str


# The definitions that differ, each once. ``topic`` is the first column of the table in docs/definitions.md.
DIFFERENCES = {d.topic: d for d in (
    Difference("time range",
               "the whole capture: every call, range and OS runtime call, whole",
               "the GPU window (first to last kernel, copy or memset); calls and ranges overlapping it, cut to it",
               "dashcam's percentages are of the window, so what it sums must lie inside it; the alignment adds "
               "back what lies outside (from the export's own rows)"),
    Difference("API names",
               "strips a 4-digit `_vNNNN` suffix only (`cudaLaunchKernel_v7000` → `cudaLaunchKernel`; "
               "`cudaStreamIsCapturing_v10000`, `cuMemAlloc_v2` stay)",
               "strips the trailing `_v<digits>`, however many digits (`cuMemAlloc_v2` → `cuMemAlloc`, "
               "`cudaGetDeviceProperties_v2_v12000` → `cudaGetDeviceProperties_v2`)",
               "one function, one row, whatever the suffix of the CUDA version that introduced it"),
    Difference("backtrace duplicates",
               "`cuda_api_sum` and `cuda_api_sync` count the eventClass-67 rows of 2.x-schema exports (a call with "
               "a backtrace twice)",
               "not counted: they are copies of calls, not calls",
               "a 2.x export writes a second row for each call whose backtrace it kept"),
    Difference("copies",
               "by label (`[CUDA memcpy Host-to-Device]`, `[CUDA memcpy Unified Host-to-Device]`); sizes in MB "
               "(1e6 B) to 3 decimals",
               "by direction (HtoD, DtoH, DtoD, HtoH, PtoP; Array copies join their direction); unified-memory "
               "migrations apart (`migrations`); bytes exact",
               "what a copy costs depends on its direction and whether it is an explicit copy or a page migration"),
    Difference("NVTX",
               "one row per `domain:label` and style (PushPop, StartEnd); a range never ended runs to the last "
               "timestamp",
               "label groups: a trailing number is `<n>` (`Identity_12`, `compile2` → `Identity_<n>`, "
               "`compile<n>`), PyTorch's `, seq = N` suffixes dropped, domains together; ranges never ended left "
               "out",
               "a loop's ranges `step 1`, `step 2`, … are one thing to time"),
    Difference("OS runtime",
               "whole call durations",
               "a thread's time inside a call outside its CUDA calls, each instant to the innermost call open",
               "dashcam says what a thread was doing at each instant, so nested and CUDA-covered time counts once; "
               "only call counts compare"),
    Difference("gaps",
               "per process and device, from its first to its last GPU operation; kernels, copies, memsets and "
               "CUDA profiling overhead count busy; gaps strictly longer than `gap=` ms",
               "one window for every device; a hole in the device's kernels (copies and memsets do not fill it), "
               "including before its first and after its last kernel",
               "dashcam asks why the kernels stopped; a copy in a hole is one of its causes (`memcpy`)"),
    Difference("utilization",
               "`gpu_time_util` adds the durations of concurrent operations in a chunk (it can exceed 100 %)",
               "the union of the intervals (0-100 %)",
               "busy time of one GPU cannot exceed the time that passed"),
    Difference("sync",
               "`cuda_api_sync`: `cudaDeviceSynchronize` and `cudaStreamSynchronize` calls, whole capture",
               "every `*Synchronize` API (events, contexts, driver calls too), cut to the window",
               "any call that blocks the host on the GPU is a sync wait"),
)}

# nsys's copy labels (ENUM_CUDA_MEMCPY_OPER.label) -> (dashcam's direction, is a unified-memory migration):
# the "copies" difference. dashcam's views map copyKind the same way (profile/views.py COPY_KIND).
COPY_LABELS = {
    "Host-to-Device": ("HtoD", False), "Device-to-Host": ("DtoH", False), "Device-to-Device": ("DtoD", False),
    "Host-to-Host": ("HtoH", False), "Peer-to-Peer": ("PtoP", False), "Host-to-Array": ("HtoD", False),
    "Array-to-Host": ("DtoH", False), "Array-to-Array": ("DtoD", False), "Array-to-Device": ("DtoD", False),
    "Device-to-Array": ("DtoD", False), "Unified Host-to-Device": ("HtoD", True),
    "Unified Device-to-Host": ("DtoH", True), "Unified Device-to-Device": ("DtoD", True),
}
MB = 1_000_000  # nsys's MB
MB_DECIMALS = 3


# -- finding and running nsys --------------------------------------------------------------------------------
def find_nsys() -> tuple[str | None, str]:
    """(the nsys to run, None) or (None, why there is none)."""
    env = os.environ.get("DASHCAM_NSYS")
    if env:
        found = real_nsys.runs(env)
        return (found, "") if found else (None, f"DASHCAM_NSYS={env} does not run nsys")
    found = real_nsys.find_real_nsys()
    return (found, "") if found else (None, real_nsys.NO_NSYS)


def _read_csv(path: Path) -> list[dict] | None:
    if not path.is_file() or path.stat().st_size == 0:
        return None  # nsys skipped the report (no data of its kind, or a table it needs is missing)
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def run_nsys(nsys: str, export: Path, workdir: Path) -> dict[str, list[dict] | None]:
    """Every report of STATS_REPORTS and rule of RULES on a copy of ``export``: its CSV rows, None when skipped.
    The log of each run is kept under ``"_log"`` (a one-row list) to explain a skip."""
    workdir.mkdir(parents=True, exist_ok=True)
    copy = workdir / export.name
    shutil.copyfile(export, copy)
    copy.chmod(0o644)
    base = workdir / export.stem
    out: dict[str, list[dict] | None] = {}
    log = []
    for cmd in ([nsys, "stats", "--report", ",".join(STATS_REPORTS)],
                [nsys, "analyze", "--rule", ",".join(RULES)]):
        p = subprocess.run([*cmd, "--format", "csv", "--output", str(base), "--force-overwrite", "true", str(copy)],
                           capture_output=True, text=True, timeout=NSYS_TIMEOUT_S, check=False)
        log.append(p.stdout + p.stderr)
        if p.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd[1:2])} failed on {export.name} (exit {p.returncode}): "
                               f"{(p.stdout + p.stderr).strip()[-2000:]}")
    for name in STATS_REPORTS:
        out[name] = _read_csv(Path(f"{base}_{name}.csv"))
    for rule in RULES:
        name = rule.split(":")[0]
        found = sorted(workdir.glob(f"{export.stem}_{name}*.csv"))
        out[name] = _read_csv(found[0]) if found else None
    out["_log"] = [{"log": "\n".join(log)}]
    return out


# -- reading the export itself, for what lies outside dashcam's window ---------------------------------------
def _connect(export: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{export}?mode=ro", uri=True)


def _tables(con) -> set[str]:
    return {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def _columns(con, table: str) -> set[str]:
    return {r[1] for r in con.execute(f'PRAGMA table_info("{table}")')}


@dataclass
class Outside:
    """Per key, what of an event kind lies outside dashcam's window: whole events (count, ns) and the parts cut
    off events that cross an edge (the "time range" difference)."""

    calls: int = 0
    ns: int = 0
    cut_ns: int = 0


def outside_window(rows, w0: int, w1: int) -> dict[str, Outside]:
    """``rows`` of (key, start, end): per key, the events not overlapping [w0, w1] and the parts cut off the
    others — dashcam's rule, an event counts when ``end > w0 and start < w1``, clipped to the window."""
    out: dict[str, Outside] = {}
    for key, s, e in rows:
        o = out.setdefault(key, Outside())
        if e > w0 and s < w1:
            o.cut_ns += max(0, w0 - s) + max(0, e - w1)
        else:
            o.calls += 1
            o.ns += e - s
    return out


def dashcam_api_name(nsys_name: str) -> str:
    """The "API names" difference: nsys's name (or a raw StringIds name) as dashcam spells it."""
    return re.sub(r"_v\d+$", "", nsys_name)


def api_rows(export: Path, backtraces: bool = False) -> list[tuple[str, int, int]]:
    """(dashcam's name, start, end) of the export's CUDA API calls; ``backtraces``: the 2.x eventClass-67 rows
    only (the "backtrace duplicates" difference), else every other row."""
    con = _connect(export)
    try:
        if "CUPTI_ACTIVITY_KIND_RUNTIME" not in _tables(con):
            return []
        has_class = "eventClass" in _columns(con, "CUPTI_ACTIVITY_KIND_RUNTIME")
        if backtraces and not has_class:
            return []
        where = ("WHERE r.eventClass = 67" if backtraces else "WHERE r.eventClass IS NOT 67") if has_class else ""
        return [(dashcam_api_name(n), s, e) for n, s, e in con.execute(
            f'SELECT s.value, r.start, r."end" FROM CUPTI_ACTIVITY_KIND_RUNTIME r '
            f"JOIN StringIds s ON s.id = r.nameId {where}")]
    finally:
        con.close()


NVTX_RANGES = (59, 60, 70, 71)


def nvtx_rows(export: Path) -> list[tuple[str, int, int]]:
    """(label, start, end) of the export's ended NVTX ranges, the label as dashcam reads it (text, else the
    registered string)."""
    con = _connect(export)
    try:
        if "NVTX_EVENTS" not in _tables(con):
            return []
        return con.execute(f"""SELECT coalesce(e.text, s.value), e.start, e."end" FROM NVTX_EVENTS e
                               LEFT JOIN StringIds s ON s.id = e.textId
                               WHERE e.eventType IN {NVTX_RANGES} AND e."end" IS NOT NULL""").fetchall()
    finally:
        con.close()


def nvtx_domains(export: Path) -> set[str]:
    """The NVTX domain names the export creates (eventType 75): nsys writes ``domain:label``."""
    con = _connect(export)
    try:
        if "NVTX_EVENTS" not in _tables(con):
            return set()
        return {r[0] for r in con.execute("SELECT DISTINCT text FROM NVTX_EVENTS WHERE eventType = 75 "
                                          "AND text IS NOT NULL")}
    finally:
        con.close()


def unended_ranges(export: Path) -> list[tuple[str, int, int]]:
    """(label, start, end) of the ranges never ended, ended where nsys ends them: at the export's last NVTX
    timestamp (nvtx_sum's maxts)."""
    con = _connect(export)
    try:
        if "NVTX_EVENTS" not in _tables(con):
            return []
        return con.execute(f"""SELECT coalesce(e.text, s.value), e.start,
                                      (SELECT max(max(start), coalesce(max("end"), 0)) FROM NVTX_EVENTS)
                               FROM NVTX_EVENTS e LEFT JOIN StringIds s ON s.id = e.textId
                               WHERE e.eventType IN {NVTX_RANGES} AND e."end" IS NULL""").fetchall()
    finally:
        con.close()


def profiler_overhead(export: Path) -> list[tuple[int, int, int]]:
    """(pid, start, end) of the CUDA profiling overheads nsys counts as GPU busy (gpustats.py's names)."""
    con = _connect(export)
    try:
        if "PROFILER_OVERHEAD" not in _tables(con):
            return []
        return con.execute("""SELECT (o.globalTid >> 24) & 16777215, o.start, o."end" FROM PROFILER_OVERHEAD o
            JOIN StringIds s ON s.id = o.nameId WHERE s.value IN ('CUDA profiling data flush overhead',
            'CUDA profiling stop overhead', 'CUDA profiling overhead')""").fetchall()
    finally:
        con.close()


# -- the comparisons --------------------------------------------------------------------------------------
@dataclass
class Row:
    figure: str
    key: str
    dashcam: int
    nsys: int
    how: str  # "same definition" or the DIFFERENCES topics the alignment applied
    raw: int | None = None  # dashcam's own figure before the alignment (None: the same as ``dashcam``)

    @property
    def aligned(self) -> bool:
        """The alignment made the difference: dashcam's own figure differs from nsys's, the aligned one not."""
        return self.raw is not None and self.raw != self.nsys and self.agrees

    @property
    def agrees(self) -> bool:
        return self.dashcam == self.nsys


def _int(x: str) -> int:
    return int(float(x))


def compare_kernels(top_kernels, nsys_rows: list[dict]) -> list[Row]:
    """cuda_gpu_kern_sum against top_kernels across devices (limit: every kernel name). The same definition: a
    kernel is GPU activity, so inside the window; both group by the demangled name."""
    mine = {k.full_name: k for k in top_kernels.kernels}
    out = []
    for r in nsys_rows:
        k = mine.get(r["Name"])
        for fig, col, attr in (("instances", "Instances", "count"), ("total_ns", "Total Time (ns)", "total_ns"),
                               ("min_ns", "Min (ns)", "min_ns"), ("max_ns", "Max (ns)", "max_ns")):
            out.append(Row(f"kernel {fig}", r["Name"], getattr(k, attr) if k else 0, _int(r[col]), "same definition"))
    extra = set(mine) - {r["Name"] for r in nsys_rows}
    out += [Row("kernel instances", n, mine[n].count, 0, "same definition") for n in sorted(extra)]
    return out


def compare_api(api, nsys_rows: list[dict], export: Path) -> list[Row]:
    """cuda_api_sum against the api tool: dashcam's calls in the window + its outside_calls, and its clipped
    time + outside_ns + the parts cut off calls crossing the window's edges ("time range"); names by dashcam's
    rule ("API names"); 2.x backtrace rows added to dashcam's side ("backtrace duplicates")."""
    w = api.window
    nsys: dict[str, list[int]] = {}
    for r in nsys_rows:
        a = nsys.setdefault(dashcam_api_name(r["Name"]), [0, 0])
        a[0] += _int(r["Num Calls"])
        a[1] += _int(r["Total Time (ns)"])
    cut = outside_window(api_rows(export), w.start_ns, w.end_ns)
    dup_n: dict[str, int] = {}
    dup_ns: dict[str, int] = {}
    for k, s, e in api_rows(export, backtraces=True):
        dup_n[k] = dup_n.get(k, 0) + 1
        dup_ns[k] = dup_ns.get(k, 0) + (e - s)
    mine = {f.name: f for f in api.functions}
    out = []
    for name in sorted(set(nsys) | set(mine)):
        f = mine.get(name)
        how = "time range, API names" + (", backtrace duplicates" if name in dup_n else "")
        calls = (f.calls + f.outside_calls if f else 0) + dup_n.get(name, 0)
        total = (f.total_ns + f.outside_ns if f else 0) + cut.get(name, Outside()).cut_ns + dup_ns.get(name, 0)
        n_calls, n_total = nsys.get(name, [0, 0])
        out.append(Row("api calls", name, calls, n_calls, how, f.calls if f else 0))
        out.append(Row("api total_ns", name, total, n_total, how, f.total_ns if f else 0))
        o = cut.get(name, Outside())
        if f:  # the api tool's own outside figures against the export's rows
            out.append(Row("api outside_calls", name, f.outside_calls, o.calls, "time range"))
            out.append(Row("api outside_ns", name, f.outside_ns, o.ns, "time range"))
    return out


def compare_copies(memcpy, nsys_time: list[dict], nsys_size: list[dict] | None) -> list[Row]:
    """cuda_gpu_mem_time_sum / cuda_gpu_mem_size_sum against the memcpy tool ("copies"): nsys's labels summed
    into dashcam's (direction, migration) rows. Copies are GPU activity, so inside the window. nsys's MB are
    rounded: dashcam's bytes are compared in nsys's unit and rounding."""
    nsys: dict[str, list[float]] = {}
    sizes = {r["Operation"]: float(r["Total (MB)"]) for r in nsys_size or []}
    for r in nsys_time:
        m = re.fullmatch(r"\[CUDA memcpy (.+)\]", r["Operation"])
        if not m:
            continue  # [CUDA memset]: compare_memsets
        kind, migration = COPY_LABELS[m.group(1)]
        key = f"{'migration' if migration else 'copy'} {kind}"
        a = nsys.setdefault(key, [0, 0, 0.0])
        a[0] += _int(r["Count"])
        a[1] += _int(r["Total Time (ns)"])
        a[2] += sizes.get(r["Operation"], 0.0)
    mine = {f"copy {k.kind}": k for k in memcpy.by_kind if k.count} | \
        {f"migration {k.kind}": k for k in memcpy.migrations if k.count}
    out = []
    for key in sorted(set(nsys) | set(mine)):
        k, (n, ns, mb) = mine.get(key), nsys.get(key, [0, 0, 0.0])
        out.append(Row("copies count", key, k.count if k else 0, n, "copies"))
        out.append(Row("copies total_ns", key, k.total_ns if k else 0, ns, "copies"))
        if nsys_size is not None:
            scale = 10 ** MB_DECIMALS  # in thousandths of nsys's MB, as nsys rounds them
            out.append(Row("copies size (MB x 1000)", key, round((k.bytes if k else 0) / MB * scale),
                           round(mb * scale), "copies"))
    return out


def compare_memsets(memset_count: int, memset_ns: int, nsys_time: list[dict]) -> list[Row]:
    """The ``[CUDA memset]`` row against dashcam's memset view (no tool sums memsets on their own)."""
    rows = [r for r in nsys_time if r["Operation"] == "[CUDA memset]"]
    n = sum(_int(r["Count"]) for r in rows)
    ns = sum(_int(r["Total Time (ns)"]) for r in rows)
    return [Row("memset count", "[CUDA memset]", memset_count, n, "same definition"),
            Row("memset total_ns", "[CUDA memset]", memset_ns, ns, "same definition")]


def compare_nvtx(nvtx, nsys_rows: list[dict], export: Path) -> list[Row]:
    """nvtx_sum against the nvtx tool (limit: every group): nsys's `domain:label` rows without the domain, summed
    into dashcam's label groups ("NVTX"); dashcam's ranges in the window + those outside, its clipped time + the
    outside time and the parts cut at the edges ("time range")."""
    from dashcam.measure.names import nvtx_group_label

    domains = sorted(nvtx_domains(export), key=len, reverse=True)

    def label(tag: str) -> str:
        for d in domains:
            if tag.startswith(d + ":"):
                return tag[len(d) + 1:]
        return tag

    nsys: dict[str, list[int]] = {}
    for r in nsys_rows:
        a = nsys.setdefault(nvtx_group_label(label(r["Range"])), [0, 0])
        a[0] += _int(r["Instances"])
        a[1] += _int(r["Total Time (ns)"])
    w = nvtx.window
    cut = outside_window([(nvtx_group_label(lb or ""), s, e) for lb, s, e in nvtx_rows(export)], w.start_ns, w.end_ns)
    for lb, s, e in unended_ranges(export):  # never counted by dashcam: all of it is "outside" ("NVTX")
        o = cut.setdefault(nvtx_group_label(lb or ""), Outside())
        o.calls += 1
        o.ns += e - s
    mine = {g.label: g for g in nvtx.groups}
    out = []
    for key in sorted(set(nsys) | set(mine)):
        g, o, (n, ns) = mine.get(key), cut.get(key, Outside()), nsys.get(key, [0, 0])
        out.append(Row("nvtx instances", key, (g.count if g else 0) + o.calls, n, "time range, NVTX",
                       g.count if g else 0))
        out.append(Row("nvtx total_ns", key, (g.total_ns if g else 0) + o.ns + o.cut_ns, ns, "time range, NVTX",
                       g.total_ns if g else 0))
    return out


def _subtract(gap: tuple[int, int], busy: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The parts of ``gap`` no interval of ``busy`` (sorted by start) covers."""
    s, e = gap
    out = []
    for b0, b1 in busy:
        if b1 <= s or b0 >= e:
            continue
        if b0 > s:
            out.append((s, b0))
        s = max(s, b1)
        if s >= e:
            break
    if s < e:
        out.append((s, e))
    return out


def nsys_gaps_from(gaps, memory_ops: dict[int, list[tuple[int, int, int]]], overhead: list[tuple[int, int, int]],
                   pids: dict[int, set[int]], spans: dict[int, tuple[int, int]]) -> dict[int, list[tuple[int, int]]]:
    """nsys's gaps ("gaps") made from dashcam's: per device with one process, each of dashcam's gaps (holes in
    its kernels, the window's edges included) less the device's copies and memsets (``memory_ops``: device ->
    (pid, start, end)) and the process's profiling overhead strictly inside its span, cut to the device's span
    (``spans``: its first to last kernel, copy or memset), the pieces longer than GAP_MS ms. Devices shared by several
    processes are left out (nsys splits them per process)."""
    out = {}
    for d in gaps.devices:
        if len(pids.get(d.device_id, ())) != 1:
            continue
        (pid,) = pids[d.device_id]
        mem = memory_ops.get(d.device_id, [])
        span0, span1 = spans[d.device_id]
        busy = sorted([(s, e) for _, s, e in mem] +
                      [(s, e) for p, s, e in overhead if p == pid and s > span0 and e < span1])
        pieces = []
        for g in d.largest_gaps:
            for s, e in _subtract((max(g.start_ns, span0), min(g.end_ns, span1)), busy):
                if e - s > GAP_MS * 1_000_000:
                    pieces.append((s, e))
        out[d.device_id] = sorted(pieces)
    return out


def compare_gaps(gaps, derived: dict[int, list[tuple[int, int]]], nsys_rows: list[dict] | None) -> list[Row]:
    """gpu_gaps:gap=GAP_MS against ``nsys_gaps_from`` ("gaps"): the same gaps, start and length; ``raw``:
    dashcam's own gaps over GAP_MS ms."""
    nsys: dict[int, list[tuple[int, int]]] = {}
    for r in nsys_rows or []:
        s = _int(r["Start (ns)"])
        nsys.setdefault(_int(r["Device ID"]), []).append((s, s + _int(r["Duration (ns)"])))
    own = {d.device_id: [g for g in d.largest_gaps if g.duration_ns > GAP_MS * 1_000_000] for d in gaps.devices}
    out = []
    for dev, mine in sorted(derived.items()):
        theirs = sorted(nsys.get(dev, []))
        out.append(Row("gaps > 1 ms count", f"GPU {dev}", len(mine), len(theirs), "gaps", len(own[dev])))
        out.append(Row("gaps > 1 ms total_ns", f"GPU {dev}", sum(e - s for s, e in mine),
                       sum(e - s for s, e in theirs), "gaps", sum(g.duration_ns for g in own[dev])))
        out.append(Row("gaps > 1 ms unmatched", f"GPU {dev}", len(set(mine) ^ set(theirs)), 0, "gaps"))
    return out


def _tenths(part: int, whole: int) -> int:
    """``part`` as % of ``whole`` in tenths, rounded half up (nsys's round(x, 1) on its percentages)."""
    return int(1000 * part / whole + 0.5) if whole else 0


def compare_utilization(profile, spans: dict[int, tuple[int, int]], pids: dict[int, set[int]],
                        overhead: list[tuple[int, int, int]], nsys_rows: list[dict] | None) -> list[Row]:
    """gpu_time_util in one chunk (its first to last GPU operation, per process and device) against dashcam's
    summed durations on that device over that span ("utilization"): kernel time (top_kernels), copy time
    (memcpy), memset time, and the profiling overhead nsys counts busy ("gaps"); ``raw``: dashcam's busy, the
    union (overview over the same span)."""
    from dashcam.tools import get_tool

    nsys = {_int(r["Device ID"]): float(r["In-Use (%)"]) for r in nsys_rows or []}
    w0 = profile.full_window[0]
    out = []
    for dev, (a, b) in sorted(spans.items()):
        if len(pids.get(dev, ())) != 1 or dev not in nsys:
            continue
        (pid,) = pids[dev]
        kernels = get_tool("top_kernels")(profile, {"gpu": dev}).total_kernel_ns
        copies = get_tool("memcpy")(profile, {"gpu": dev})
        copy_ns = sum(k.total_ns for k in copies.by_kind) + sum(k.total_ns for k in copies.migrations)
        ((memset_ns,),) = _sql(profile, f"SELECT coalesce(sum(dur), 0) FROM memset WHERE device_id = {dev} "
                                        "AND start > 0")
        over = sum(e - s for p, s, e in overhead if p == pid and s > a and e < b)
        busy = get_tool("overview")(profile, {"gpu": dev, "start_ms": (a - w0) / 1e6, "end_ms": (b - w0) / 1e6})
        (union,) = [d.busy_ns for d in busy.devices if d.device_id == dev]
        out.append(Row("utilization (% x 10)", f"GPU {dev}", _tenths(kernels + copy_ns + int(memset_ns) + over, b - a),
                       round(nsys[dev] * 10), "utilization, gaps", _tenths(union, b - a)))
    return out


def osrt_rows(export: Path) -> list[tuple[str, int, int]]:
    con = _connect(export)
    try:
        if "OSRT_API" not in _tables(con):
            return []
        return con.execute('SELECT s.value, o.start, o."end" FROM OSRT_API o JOIN StringIds s ON s.id = o.nameId '
                           "WHERE o.eventClass = 27").fetchall()
    finally:
        con.close()


def compare_osrt(cpu, nsys_rows: list[dict], export: Path) -> list[Row]:
    """osrt_sum against the cpu tool over every thread ("OS runtime"): the calls of a name in the window + those
    outside it ("time range"), for the names the cpu tool lists — a name whose calls in the window all lie inside
    CUDA calls has no time outside them, so it is not listed. Times are not compared (dashcam's are exclusive)."""
    mine: dict[str, int] = {}
    for t in cpu.threads:
        for c in t.os_calls:
            mine[c.name] = mine.get(c.name, 0) + c.calls
    w = cpu.window
    cut = outside_window(osrt_rows(export), w.start_ns, w.end_ns)
    nsys = {r["Name"]: _int(r["Num Calls"]) for r in nsys_rows}
    return [Row("osrt calls", name, n + cut.get(name, Outside()).calls, nsys.get(name, 0), "OS runtime, time range", n)
            for name, n in sorted(mine.items())]


def compare_os_runtime(os_runtime, nsys_rows: list[dict]) -> list[Row]:
    """osrt_sum against the os_runtime tool: the same definition (the whole capture, whole calls, every thread):
    calls, total, min and max per function, and every function on both sides."""
    mine = {f.name: f for f in os_runtime.functions}
    out = []
    for r in nsys_rows:
        f = mine.get(r["Name"])
        for fig, col, attr in (("calls", "Num Calls", "calls"), ("total_ns", "Total Time (ns)", "total_ns"),
                               ("min_ns", "Min (ns)", "min_ns"), ("max_ns", "Max (ns)", "max_ns")):
            out.append(Row(f"os_runtime {fig}", r["Name"], getattr(f, attr) if f else 0, _int(r[col]),
                           "same definition"))
    out += [Row("os_runtime calls", n, mine[n].calls, 0, "same definition")
            for n in sorted(set(mine) - {r["Name"] for r in nsys_rows})]
    return out


NSYS_SYNC_APIS = ("cudaDeviceSynchronize", "cudaStreamSynchronize")


def compare_sync(sync, api, nsys_rows: list[dict] | None, export: Path) -> list[Row]:
    """cuda_api_sync (its two APIs, whole capture) against the sync tool's calls in the window + the api tool's
    calls of them outside it ("sync", "time range") + the 2.x backtrace rows ("backtrace duplicates")."""
    per = {c.name: c for c in sync.calls}
    outside = {f.name: f.outside_calls for f in api.functions}
    dup: dict[str, int] = {}
    for k, _, _ in api_rows(export, backtraces=True):
        dup[k] = dup.get(k, 0) + 1
    out = []
    for name in NSYS_SYNC_APIS:
        n = sum(1 for r in nsys_rows or [] if dashcam_api_name(r["API Name"]) == name)
        inside = per[name].count if name in per else 0
        how = "sync, time range" + (", backtrace duplicates" if name in dup else "")
        out.append(Row("sync calls", name, inside + outside.get(name, 0) + dup.get(name, 0), n, how, inside))
    return out


# nsys's GPU operations (gpustats.py): kernels, copies and memsets with a start after 0, in dashcam's views
MEMORY_OPS = ('SELECT device_id, pid, start, "end" FROM memcpy WHERE start > 0 UNION ALL '
              'SELECT device_id, pid, start, "end" FROM memset WHERE start > 0')
GPU_OPS = 'SELECT device_id, pid, start, "end" FROM kernels WHERE start > 0 UNION ALL ' + MEMORY_OPS


def _sql(profile, query: str) -> list[list]:
    from dashcam.tools import get_tool

    r = get_tool("sql")(profile, {"query": query, "max_rows": 5000})
    assert not r.truncated, f"more than 5000 rows: {query}"
    return r.rows


def compare_all(profile, export: Path, reports: dict[str, list[dict] | None]) -> list[Row]:
    """Every report nsys computed on ``export`` against dashcam's tools on ``profile`` (the same file)."""
    from dashcam.tools import get_tool

    def tool(name: str, **args):
        return get_tool(name)(profile, {"limit": 1000, **args})

    out: list[Row] = []
    if reports.get("cuda_gpu_kern_sum"):
        out += compare_kernels(tool("top_kernels"), reports["cuda_gpu_kern_sum"])
    api = tool("api")
    if reports.get("cuda_api_sum"):
        out += compare_api(api, reports["cuda_api_sum"], export)
    if reports.get("cuda_gpu_mem_time_sum"):
        out += compare_copies(tool("memcpy"), reports["cuda_gpu_mem_time_sum"], reports.get("cuda_gpu_mem_size_sum"))
        ((n, ns),) = _sql(profile, "SELECT count(*), coalesce(sum(dur), 0) FROM memset")
        out += compare_memsets(int(n), int(ns), reports["cuda_gpu_mem_time_sum"])
    if reports.get("nvtx_sum"):
        out += compare_nvtx(tool("nvtx"), reports["nvtx_sum"], export)
    if profile.has_table("kernel"):
        memory: dict[int, list[tuple[int, int, int]]] = {}
        pids: dict[int, set[int]] = {}
        for dev, pid, s, e in _sql(profile, MEMORY_OPS):
            memory.setdefault(int(dev), []).append((int(pid), int(s), int(e)))
        for dev, pid in _sql(profile, f"SELECT DISTINCT device_id, pid FROM ({GPU_OPS})"):
            pids.setdefault(int(dev), set()).add(int(pid))
        spans = {int(dev): (int(a), int(b)) for dev, a, b in _sql(profile, f"""SELECT device_id, min(start), max("end")
            FROM ({GPU_OPS}) GROUP BY 1""")}
        gaps = tool("gpu_gaps", min_gap_us=GAP_MS * 1000)
        overhead = profiler_overhead(export)
        derived = nsys_gaps_from(gaps, memory, overhead, pids, spans)
        out += compare_gaps(gaps, derived, reports.get("gpu_gaps"))
        out += compare_utilization(profile, spans, pids, overhead, reports.get("gpu_time_util"))
    if reports.get("osrt_sum"):
        out += compare_osrt(tool("cpu", all_threads=True), reports["osrt_sum"], export)
        out += compare_os_runtime(tool("os_runtime"), reports["osrt_sum"])
    if reports.get("cuda_api_sum"):
        out += compare_sync(tool("sync"), api, reports.get("cuda_api_sync"), export)
    return out
