"""workload: what program made this capture — its language and framework, with the evidence — and its phases.

Advice must fit the program: ``pin_memory=True`` means nothing to a C++ or Fortran code. This tool
reads the capture's own words and says what they point to, and why:

- process and thread names (``python3``, ``julia``, ``trtexec``; PyTorch's ``pt_autograd_0``,
  ``pt_nccl_watchdg``; ``MPI Rank 0``), the launch command when the export records it;
- NVTX domains and range labels (``aten::`` ops, the ``MPI`` domain, ``NCCL``);
- kernel names (``at::native::``, ``triton_``, XLA ``fusion``, ``cupy_``, ``julia_``, NVHPC's
  ``main_42_gpu`` (OpenACC) and ``nvkernel_main_F1L12_1`` (OpenMP offload), TensorRT's ``__myl_`` / ``trt_``,
  the thrust/cub kernels of nvc++ ``-stdpar``);
- CUDA API names (driver ``cuLaunchKernel`` vs runtime ``cudaLaunchKernel``, graph launches), the
  export's tables (OpenACC, OpenMP, MPI trace tables) and the shared libraries its call stacks name
  (NVHPC's OpenMP runtime ``libnvomp.so``).

Each rule in ``RULES`` is a (family, source, pattern); a family's score is the number of distinct
sources that point to it. A rule in ``CORROBORATING`` counts only beside another source of its family:
thrust/cub kernels are any CUDA C++ program's, and stdpar's only under the ``STDPAR`` NVTX domain nvc++
emits; ``libnvomp.so`` is NVHPC's OpenMP runtime for host threads as well as target regions. The family
with the highest score wins (ties: ``PRECEDENCE``; ``openmp_offload`` before
``openacc``, since NVHPC's runtime records OpenACC tables for OpenMP target regions too, while
``nvkernel_*_F<n>L<line>`` kernels are OpenMP's alone). A Python framework needs a Python process: PyTorch
evidence (``at::native`` kernels) in a compiled program without one (a C++ gtest binary linking libtorch)
is ``libtorch``, C++. No
framework evidence: ``python`` when the CUDA work comes from a Python interpreter, ``cuda_cpp``
(plain CUDA C/C++) when it comes from a compiled program launching through the CUDA runtime with
C++ kernel symbols, otherwise unknown (``family`` null) — unknown stays unknown.

``mpi`` and ``nccl`` are separate flags (an MPI+CUDA code is ``cuda_cpp`` with ``mpi``). Startup
facts: the time the capture spends compiling (NVTX ranges of kind ``jit``, measure/labels.py) and
loading modules (``MODULE_LOAD_API`` calls), each as a union over threads inside the window, and
the phases: ``startup`` the longest prefix of the window at least half covered by them (and by each
kernel's first launch call), ``teardown`` from
the end of the last kernel (every GPU) to the window end, ``steady`` between.

Whole-profile facts are computed once per opened profile (they do not depend on the window).
"""
from __future__ import annotations

import re

import numpy as np
from pydantic import BaseModel, Field

from dashcam.errors import NoGpuActivity
from dashcam.measure.definitions import pct
from dashcam.measure.intervals import merge
from dashcam.measure.labels import LAUNCH_API, nvtx_kind
from dashcam.profile.capture_span import capture_span
from dashcam.profile.coverage import coverage
from dashcam.profile.gap_causes import whole_window
from dashcam.profile.gap_context import group_labels
from dashcam.profile.program_facts import (
    clipped,
    first_launches_sql,
    module_loads_sql,
    union_of,
)
from dashcam.profile.program_output import cuda_trace_requested, program_error
from dashcam.profile.recording import recording

from .base import Tool, ToolParams, ToolResult, WindowInfo

FAMILIES = {
    "pytorch": ("PyTorch", "python"), "jax": ("JAX / XLA", "python"), "tensorflow": ("TensorFlow", "python"),
    "cupy": ("CuPy", "python"), "numba": ("Numba", "python"), "tensorrt": ("TensorRT", None),
    "julia": ("Julia (CUDA.jl)", "julia"), "openacc": ("OpenACC", None), "openmp_offload": ("OpenMP offload", None),
    "stdpar": ("nvc++ stdpar (C++ parallel algorithms)", "c++"), "libtorch": ("PyTorch C++ (libtorch)", "c++"),
    "python": ("Python", "python"), "cuda_cpp": ("CUDA C/C++", "c++"),
}
# Evidence rules: (family, source, regex). Sources: process, thread, command, nvtx_domain, nvtx, kernel, api, table,
# library (a shared library a call stack names: program_facts.host_facts).
RULES: tuple[tuple[str, str, str], ...] = (
    ("pytorch", "thread", r"^pt_(main|autograd|nccl|thread|data|tp|elastic)"),
    ("pytorch", "nvtx", r"^aten::|^autograd::|^profilerstep|^c10d::|^nccl:all_reduce"),
    ("pytorch", "kernel", r"at::native::|\bat::cuda|c10::|^triton_(poi|red|per|tem|for)_|^cutlass.*pytorch"),
    ("pytorch", "command", r"\btorchrun\b|torch\.distributed|\btorch\b"),
    ("jax", "kernel", r"^(loop_|input_|wrapped_)[a-z0-9_]*fusion(_\d+)?$|^fusion(_\d+)?$|^xla_"),
    ("jax", "nvtx", r"^XlaModule|^xla::|^jit_[a-z_]+"),
    ("jax", "thread", r"^xla|^jax"),
    ("tensorflow", "kernel", r"tensorflow::"),
    ("tensorflow", "thread", r"^tf_"),
    ("cupy", "kernel", r"^cupy_"),
    ("numba", "kernel", r"^_ZN\d*cudapy|numba"),
    ("tensorrt", "kernel", r"^__myl_|^trt_|_trt_|tensorrt"),
    ("tensorrt", "process", r"trtexec"),
    ("tensorrt", "nvtx_domain", r"tensorrt"),
    ("julia", "process", r"\bjulia\b"),
    ("julia", "command", r"\bjulia\b"),
    ("julia", "kernel", r"(^|_)julia_|^_Z\d+julia"),
    ("openacc", "table", r"OPENACC"),
    ("openacc", "kernel", r"_\d+_gpu(__red|_\d+)?$"),
    ("openmp_offload", "table", r"^OPENMP"),
    ("openmp_offload", "kernel", r"^nvkernel_|__omp_offloading_"),
    ("openmp_offload", "library", r"^libnvomp\.so$"),
    ("stdpar", "nvtx_domain", r"^STDPAR$"),
    ("stdpar", "kernel", r"thrust::cuda_cub::|\bcub::(CUB_\w+::)?Device(For|Reduce|Scan|RadixSort|Transform)|"
                         r"_ZN6thrust\d*cuda_cub|^_ZN3cub"),
)
# Count only beside another source of their family (module docstring): thrust/cub kernels are any CUDA C++
# program's; libnvomp.so is NVHPC's OpenMP runtime for host threads too (a CUDA C + MPI code built with nvc++
# -mp links it: the shared saxpy-mpi-cuda export).
CORROBORATING = {("stdpar", "kernel"), ("openmp_offload", "library")}
PRECEDENCE = ["tensorrt", "jax", "tensorflow", "pytorch", "cupy", "numba", "julia", "stdpar", "openmp_offload",
              "openacc"]
PYTHON_PROCESS = r"(^|/)(python[0-9.]*|pytest|ipython|jupyter|torchrun|accelerate|deepspeed)\b"
INTERPRETERS = PYTHON_PROCESS + r"|(^|/)julia\b"
MPI_RULES = (("thread", r"^MPI Rank"), ("nvtx_domain", r"^MPI$"), ("nvtx", r"^p?mpi_"), ("table", r"^MPI_"),
             ("command", r"\b(mpirun|mpiexec|srun|jsrun)\b"))
NCCL_RULES = (("kernel", r"^nccl"), ("nvtx_domain", r"^NCCL$"), ("thread", r"nccl"))
MAX_EVIDENCE_PER_SOURCE = 3  # examples kept per (family, source)
# The startup phase is the longest prefix of the window that start-up work (JIT ranges, module loads,
# first launches) covers at least half of: a late lazy load of one more kernel does not stretch it.
STARTUP_DENSITY = 0.5


class Params(ToolParams):
    pass


class Signal(BaseModel):
    points_to: str = Field(description="What it is evidence of: a family, 'mpi', 'nccl', 'python' or 'compiled'.")
    source: str = Field(description="process, thread, command, nvtx_domain, nvtx, kernel, api, table or library.")
    value: str = Field(description="The name seen in the capture (untrusted profile text).")
    count: int = Field(
        description="How many events carry it (processes, threads, ranges, kernels, calls; 1 for a table).")


class Phase(BaseModel):
    name: str = Field(description="startup, steady or teardown.")
    start_ms: float = Field(description="ms from the start of the profile's GPU activity.")
    end_ms: float
    length_ns: int
    reason: str = Field(description="What bounds it.")


class Span(BaseModel):
    """The capture span against the GPU window (profile/capture_span.py), whole-profile ns on the profile clock."""
    host_start_ns: int | None = Field(description="First CUDA API / OS runtime call or CPU sample.")
    host_end_ns: int | None = Field(description="Last CUDA API / OS runtime call end or CPU sample.")
    gpu_start_ns: int | None = Field(description="The GPU window's start (first kernel, copy or memset).")
    gpu_end_ns: int | None
    before_gpu_ns: int = Field(description="Host time captured before the GPU window.")
    host_ns: int = Field(0, description="host_end_ns - host_start_ns: the program's run as the capture holds it.")
    gpu_share_pct: float | None = Field(None, description="The GPU window as % of host_ns.")
    first_cuda_call: str | None = Field(description="The first CUDA API call's name.")
    profiler_range: bool = Field(description="cudaProfilerStart/Stop calls traced: a capture range.")
    init_call: str | None = Field(description="The longest CUDA call ending before the GPU window (CUDA "
                                              "initialization, context creation).")
    init_ns: int = Field(description="Its length, ns (0 without one).")
    creates_context: bool = Field(False, description="init_call is the first CUDA call and one that starts "
                                  "CUDA: it created the CUDA context.")
    whole_process: bool = Field(description="The capture spans the process from CUDA's start to after its last GPU "
                                            "work: capturing more holds no more GPU work.")
    why: str


class Result(ToolResult):
    family: str | None = Field(description="pytorch, jax, tensorflow, cupy, numba, tensorrt, julia, openacc, "
                                           "openmp_offload, stdpar (nvc++ -stdpar), libtorch (PyTorch from C++), "
                                           "python (no framework seen), cuda_cpp (plain CUDA C/C++), "
                                           "or null: unknown.")
    family_label: str | None = Field(description="The family as people say it ('PyTorch', 'CUDA C/C++').")
    language: str | None = Field(description="python, julia, c++ or null when the evidence does not say.")
    frameworks: list[str] = Field(description="Every family with evidence, best first.")
    mpi: bool = Field(description="MPI evidence: MPI trace, MPI NVTX domain or ranges, 'MPI Rank' threads, mpirun.")
    nccl: bool = Field(description="NCCL kernels or NVTX domain.")
    cuda_graphs: bool = Field(description="CUDA graph launch calls or kernels launched from graphs.")
    driver_api_launches: int = Field(description="Kernel launches through the driver API (cuLaunchKernel...).")
    runtime_api_launches: int = Field(description="Kernel launches through the runtime API (cudaLaunchKernel...).")
    processes: int = Field(description="Processes with CUDA calls or GPU work.")
    gpu_count: int
    command: str | None = Field(None, description="The launch command the export records (untrusted profile text).")
    cuda_api_calls: int = Field(description="CUDA runtime and driver calls in the whole capture.")
    recorded: list[str] = Field(description="The kinds of data the capture holds (capture coverage, "
                                            "profile/coverage.py: cuda_trace, nvtx, os_runtime, cpu_sampling, "
                                            "context_switches, cuda_backtraces, ...).")
    why: str = Field(description="One line: what the family rests on.")
    cuda_trace_on: bool = Field(False, description="CUDA tracing was on: a CUDA call was traced, or the capture's "
                                                   "settings ask for it, or nsys said 'No CUDA events collected' "
                                                   "(profile/program_output.py).")
    program_error: str | None = Field(None, description="For a capture without CUDA calls: the first line of a "
                                                        "launched process's stderr that reports a failure, as nsys "
                                                        "kept it (untrusted profile text).")
    evidence: list[Signal]
    jit_ns: int = Field(description="Union over threads of NVTX ranges that compile code (kind 'jit') inside the "
                                    "window.")
    jit_pct: float = Field(description="jit_ns as % of the window.")
    jit_ranges: dict[str, int] = Field(description="JIT range label -> ns (union per label), most first.")
    module_load_ns: int = Field(description="Union over threads of module/library load calls inside the window.")
    module_load_pct: float
    first_launch_ns: int = Field(description="Union over threads of each kernel's first launch call (per process, "
                                             "GPU and kernel name) inside the window: lazy module loading happens "
                                             "there.")
    first_launch_count: int = Field(description="Those first launch calls that overlap the window.")
    startup_ns: int = Field(description="Union of the JIT ranges, module loads and first launch calls inside the "
                                        "window: the time the capture spends starting up.")
    startup_pct: float = Field(description="startup_ns as % of the window.")
    phases: list[Phase]
    span: Span = Field(description="The capture span against the GPU window (profile/capture_span.py).")


def _facts(profile) -> dict:
    """Names, counts and tables of the whole profile (profile/program_facts.py), read once per opened profile."""
    memo = profile.memo
    if "workload_facts" in memo:
        return memo["workload_facts"]
    found = profile.manifest["derived"]["program_facts"]  # counted when the cache was built (every cache version)
    f = {k: [tuple(r) for r in v] if isinstance(v, list) and k != "pids" else v for k, v in found.items()}
    f["table"] = [(t, 1) for t in profile.manifest.get("nonempty_tables", [])]
    f["command"] = recording(profile).command
    memo["workload_facts"] = f
    return f


def _names(f: dict, source: str) -> list[tuple[str, int]]:
    if source == "command":
        return [(f["command"], 1)] if f["command"] else []
    if source == "kernel":  # short and full names both speak
        out: dict[str, int] = {}
        for short, full, n in f["kernel"]:
            for x in {short, full} - {None}:
                out[x] = out.get(x, 0) + int(n)
        return list(out.items())
    return [(str(name), int(n)) for name, n in f[source]]


def _match(f: dict, points_to: str, source: str, pattern: str) -> list[Signal]:
    hits = [(name, n) for name, n in _names(f, source) if re.search(pattern, name, re.IGNORECASE)]
    hits.sort(key=lambda x: (-x[1], x[0]))
    return [Signal(points_to=points_to, source=source, value=name[:200], count=n)
            for name, n in hits[:MAX_EVIDENCE_PER_SOURCE]]


def classify(f: dict) -> dict:
    """family, frameworks, mpi, nccl and the evidence from the whole-profile facts (see the module docstring)."""
    evidence: list[Signal] = []
    score: dict[str, int] = {}
    held: list[tuple[str, str, list[Signal]]] = []
    for family, source, pattern in RULES:
        hits = _match(f, family, source, pattern)
        if hits:
            held.append((family, source, hits))
    primary = {fam for fam, src, _ in held if (fam, src) not in CORROBORATING}
    for family, source, hits in held:
        if (family, source) in CORROBORATING and family not in primary:
            continue
        score[family] = score.get(family, 0) + 1
        evidence += hits
    mpi = [s for source, p in MPI_RULES for s in _match(f, "mpi", source, p)]
    nccl = [s for source, p in NCCL_RULES for s in _match(f, "nccl", source, p)]
    python = _match(f, "python", "process", PYTHON_PROCESS) or _match(f, "python", "command", PYTHON_PROCESS)
    frameworks = sorted(score, key=lambda x: (-score[x], PRECEDENCE.index(x)))
    family = frameworks[0] if frameworks else None
    why = ""
    if family == "pytorch" and not python and _compiled_process(f):  # libtorch in a C++ binary
        family = "libtorch"
        why = "PyTorch C++ (libtorch): PyTorch kernels launched by a compiled program, no Python process"
        evidence += _compiled_process(f)
    elif family:
        srcs = sorted({s.source for s in evidence if s.points_to == family})
        why = f"{FAMILIES[family][0]}: evidence in {', '.join(srcs)}"
    elif python:
        family, why = "python", "a Python process runs the CUDA work; no framework evidence"
        evidence += python
    else:
        compiled = _compiled(f)
        if compiled:
            family, why = "cuda_cpp", "a compiled program launches through the CUDA runtime with C++ kernel symbols"
            evidence += compiled
        else:
            why = "no evidence of the language or framework"
    if python and family not in ("python",) and FAMILIES.get(family, ("", None))[1] == "python":
        evidence += python
    return {"family": family, "frameworks": frameworks, "mpi": bool(mpi), "nccl": bool(nccl),
            "evidence": evidence + mpi + nccl, "why": why}


def _compiled_process(f: dict) -> list[Signal]:
    """The busiest process, when every named process is a compiled program (no interpreter); else []."""
    procs = _names(f, "process")
    if not procs or any(re.search(INTERPRETERS, n, re.IGNORECASE) for n, _ in procs):
        return []
    top = max(procs, key=lambda x: (x[1], x[0]))
    return [Signal(points_to="compiled", source="process", value=top[0][:200], count=top[1])]


def _compiled(f: dict) -> list[Signal]:
    """Evidence of a plain compiled CUDA program: no interpreter process, runtime-API launches, C++ kernels."""
    process = _compiled_process(f)
    runtime = [(n, c) for n, c in _names(f, "api") if re.match(r"^cuda(Launch|GraphLaunch)", n)]
    cxx = [(n, c) for n, c in _names(f, "kernel") if "(" in n or n.startswith("_Z") or "::" in n]
    if not process or not runtime or not cxx:
        return []
    return [*process,
            Signal(points_to="compiled", source="api", value=runtime[0][0], count=sum(c for _, c in runtime)),
            Signal(points_to="compiled", source="kernel", value=cxx[0][0][:200], count=cxx[0][1])]


def run(profile, params: Params) -> Result:
    if params.gpu is not None:
        profile.check_gpu(params.gpu)  # a GPU the profile does not have is an error, as for every tool
    f = _facts(profile)
    c = classify(f)
    api = dict(_names(f, "api"))
    launches = {n: k for n, k in api.items() if re.search(LAUNCH_API, n)}
    common = {
        "tool": "workload", "family": c["family"], "family_label": FAMILIES[c["family"]][0] if c["family"] else None,
        "language": FAMILIES[c["family"]][1] if c["family"] else None, "frameworks": c["frameworks"], "mpi": c["mpi"],
        "nccl": c["nccl"],
        "cuda_graphs": f["graph_kernels"] > 0 or any(n.endswith("GraphLaunch") for n in launches),
        "driver_api_launches": sum(k for n, k in launches.items() if n.startswith("cu") and not n.startswith("cuda")),
        "runtime_api_launches": sum(k for n, k in launches.items() if n.startswith("cuda")),
        "processes": len(f["pids"]), "gpu_count": len(profile.devices), "command": f["command"], "why": c["why"],
        "cuda_api_calls": sum(api.values()),
        "recorded": coverage(profile).recorded,
        # read only for a capture without CUDA calls, the one the no-GPU verdict explains (a CUDA call says it
        # was traced): no extra reads of the export on every summary
        "cuda_trace_on": bool(api) or cuda_trace_requested(profile),
        "program_error": None if api else program_error(profile),
        "evidence": c["evidence"], "span": Span(**capture_span(profile).as_dict())}
    try:
        w = profile.window(params.start_ms, params.end_ms)
    except NoGpuActivity:  # a capture without GPU work still has a program: no window, no phases
        return Result(**common, jit_ns=0, jit_pct=0.0, jit_ranges={}, module_load_ns=0, module_load_pct=0.0,
                      first_launch_ns=0, first_launch_count=0, startup_ns=0, startup_pct=0.0, phases=[],
                      notes=["No GPU activity: no window, so no phases or startup times."])
    jit_groups = {lab: gid for gid, lab in group_labels(profile).items() if nvtx_kind(lab) == "jit"}
    clip, inside = clipped(w)
    jit_ns, js, je = 0, np.zeros(0, np.int64), np.zeros(0, np.int64)
    per_label: dict[str, int] = {}
    if jit_groups:
        ids = ",".join(str(int(g)) for g in jit_groups.values())
        jit_ns, js, je, _ = union_of(profile.con, f"SELECT {clip} FROM nvtx_times WHERE is_range AND group_id IN "
                                                  f"({ids}) AND {inside}", w)
        for lab, gid in jit_groups.items():
            ns = union_of(profile.con, f"SELECT {clip} FROM nvtx_times WHERE is_range AND group_id = {int(gid)} "
                                       f"AND {inside}", w)[0]
            if ns:
                per_label[lab] = ns
    stored = f.get("startup") if (w.start_ns, w.end_ns) == tuple(profile.full_window) else None
    if stored is not None:  # the whole-profile window: counted with the cache
        (load_ns, ls, le, _), (first_ns, fs, fe, first_calls) = (
            (x["ns"], np.array(x["starts"], np.int64), np.array(x["ends"], np.int64), x["rows"])
            for x in (stored["module_loads"], stored["first_launches"]))
    else:
        load_ns, ls, le, _ = union_of(profile.con, module_loads_sql(w), w)
        first_ns, fs, fe, first_calls = union_of(profile.con, first_launches_sql(w), w)
    startup = merge(np.concatenate([js, ls, fs]), np.concatenate([je, le, fe]), w)
    phases = _phases(profile, w, startup)
    return Result(**common, window=WindowInfo.of(w), jit_ns=jit_ns, jit_pct=round(pct(jit_ns, w), 3),
                  jit_ranges=dict(sorted(per_label.items(), key=lambda kv: (-kv[1], kv[0]))[:10]),
                  module_load_ns=load_ns, module_load_pct=round(pct(load_ns, w), 3),
                  first_launch_ns=first_ns, first_launch_count=first_calls,
                  startup_ns=startup.total, startup_pct=round(pct(startup.total, w), 3), phases=phases)


def _phases(profile, w, startup) -> list[Phase]:
    """startup: the longest prefix of the window at least half covered by start-up work (STARTUP_DENSITY);
    teardown: after the last kernel; steady: between."""
    last_kernel = _last_kernel_end(profile, w)
    s_end = w.start_ns
    if len(startup):
        covered = startup.covered_before(startup.ends)  # start-up time in [w.start, end of each interval)
        dense = covered >= STARTUP_DENSITY * (startup.ends - w.start_ns)
        if dense.any():
            s_end = int(startup.ends[np.flatnonzero(dense)[-1]])
    t_start = int(last_kernel) if last_kernel is not None else w.end_ns
    s_end = min(s_end, t_start)
    out = []

    def add(name: str, a: int, b: int, reason: str) -> None:
        if b > a:
            out.append(Phase(name=name, start_ms=round(w.rel_ms(a), 6), end_ms=round(w.rel_ms(b), 6),
                             length_ns=b - a, reason=reason))

    add("startup", w.start_ns, s_end, "JIT compiling, module loads and first launches cover at least half of it")
    add("steady", s_end, t_start, "between startup and the end of the last kernel")
    add("teardown", t_start, w.end_ns, "after the last kernel in the window")
    return out


def _last_kernel_end(profile, w) -> int | None:
    """The end of the last kernel in the window (clipped to it), None without one. Over the whole profile it is
    the latest of the devices' kernel spans stored with the cache (gap_causes.whole_window: every kernel of a
    device, and the export gives every kernel one)."""
    whole = whole_window(profile, w)
    if whole is not None:
        ends = [x["kernels"][1] for x in whole.values() if x.get("kernels")]
        return max(ends) if ends else None
    return profile.one(f'SELECT max(least("end", {w.end_ns})) FROM kernel_times WHERE "end" > {w.start_ns} '
                       f"AND start < {w.end_ns}")[0]


def render(result: Result, console) -> None:
    from rich.text import Text

    from dashcam.text.format import fmt_ns
    from dashcam.text.tables import print_notes

    console.print(Text(f"workload: {result.family_label or 'unknown'}"
                       + (" + MPI" if result.mpi else "") + (" + NCCL" if result.nccl else ""), style="bold"))
    console.print(Text(f"why: {result.why}"))
    if result.command:
        console.print(Text(f"command: {result.command}"))
    for s in result.evidence:
        console.print(Text(f"  {s.points_to:<14} {s.source:<12} {s.count:>8,}  {s.value}"))
    console.print(Text(f"JIT compile {fmt_ns(result.jit_ns)} ({result.jit_pct:.1f}% of the window), module loads "
                       f"{fmt_ns(result.module_load_ns)} ({result.module_load_pct:.1f}%)"))
    sp = result.span
    console.print(Text(("capture: the whole process" if sp.whole_process else "capture: part of the process")
                       + f" ({sp.why})" + (f"; before the GPU window {sp.init_call} took {fmt_ns(sp.init_ns)}"
                                           if sp.init_call else "")))
    for p in result.phases:
        console.print(Text(f"  {p.name:<9} {p.start_ms:.3f}–{p.end_ms:.3f} ms ({fmt_ns(p.length_ns)}): {p.reason}"))
    print_notes(result.notes, console)


TOOL = Tool(
    name="workload",
    summary=("What program made the capture: its language and framework (PyTorch, JAX, TensorRT, CuPy, Julia, OpenACC, "
             "OpenMP offload, plain CUDA C/C++...) with the evidence, MPI/NCCL use, CUDA graphs, time spent compiling "
             "(JIT) and loading modules, and the startup / steady / teardown phases."),
    params=Params, result=Result, run=run,
)
