"""Capture coverage: which kinds of data a capture holds, and the ``nsys profile`` options that record the rest.

``KINDS`` is the data table. Each ``Kind`` names the export tables and columns that prove it was recorded
(``Proof``: a table with rows, or a value in one of the model's views), the capture options in the
export's metadata that say whether it was switched on (``Switch``, META_DATA_CAPTURE in nsys 2023.3 and
later), and the ``nsys profile`` options that record it (plus the Python ones for Python programs).

A kind's ``state`` on a profile:

``recorded``  a proof holds: the capture has rows of this kind;
``empty``     no proof, but the capture's options say it was on (traced, nothing happened);
``off``       no proof and the options say it was off;
``absent``    no proof and the export does not say (older exports have no capture options).

To add a kind: append a ``Kind`` to ``KINDS`` (id, name, proofs, switches, options) and a row to the
coverage table in docs/input.md; ``tests/test_coverage.py`` states the expected coverage of every shared
profile and of the planted exports, so add the kind's expectation there. Nothing else changes: ``info``,
``overview``, the JSON and ``lacking`` read this table.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from pydantic import BaseModel, Field


@dataclass(frozen=True)
class Proof:
    """What shows a kind was recorded: an export table with rows (``table``, a regex on its name), or a row
    of a model view (views.py) matching ``where``. ``what`` is how docs and results name it. ``fact``: (key,
    label) when the cache's program facts (program_facts.py) count those same rows by label under that key (label
    None: the key holds their count): the proof is then read from the manifest, without the query."""

    what: str
    table: str | None = None
    view: str | None = None
    where: str | None = None
    fact: tuple[str, str | None] | None = None


@dataclass(frozen=True)
class Switch:
    """A capture option in the export's metadata: ``key`` (a regex on the item name) is on when a value of it
    matches ``on`` (a regex, case-insensitive). A key listed with none of its values matching is off."""

    key: str
    on: str


@dataclass(frozen=True)
class Kind:
    id: str
    name: str  # how a sentence names the data ("OS runtime calls")
    proofs: tuple[Proof, ...]
    options: tuple[str, ...]  # `nsys profile` options that record it
    switches: tuple[Switch, ...] = ()
    python_options: tuple[str, ...] = ()  # added for Python programs (their frames, not the interpreter's)
    # Capture options the kind needs besides its own switches (all must be on): one listed and off makes the
    # kind off whatever its switches say (CPU sampling and context switches need USE_LINUX_PERF).
    requires: tuple[Switch, ...] = ()
    gpu: bool = False  # recorded only on a machine with an NVIDIA GPU (dashcam record leaves it out without one)
    # (option, how older nsys versions spell it): dashcam record uses the older spelling when this nsys's
    # `nsys profile --help` knows only that one
    older_spellings: tuple[tuple[str, str], ...] = ()


def _tables(*names: str) -> tuple[Proof, ...]:
    return tuple(Proof(n, table=f"^{n}$") for n in names)


# nsys collects CPU samples and context switches through Linux perf: USE_LINUX_PERF false (newer exports without
# LINUX_PERF_OPTIONS then) means neither was collected.
_LINUX_PERF = Switch("^USE_LINUX_PERF$", "^true$")

KINDS: tuple[Kind, ...] = (
    Kind("cuda_trace", "CUDA API calls and GPU activity",
         _tables("CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY",
                 "CUPTI_ACTIVITY_KIND_MEMSET"),
         ("--trace=cuda",), (Switch("^CAPTURE_EVENT_TYPE$", "^cuda$"),), gpu=True),
    Kind("nvtx", "NVTX ranges", _tables("NVTX_EVENTS"), ("--trace=nvtx",),
         (Switch("^CAPTURE_EVENT_TYPE$", "^nvtxevents$"),)),
    Kind("os_runtime", "OS runtime calls", _tables("OSRT_API"), ("--trace=osrt",),
         (Switch("^CAPTURE_EVENT_TYPE$", "^osruntime$"),)),
    Kind("cpu_sampling", "CPU samples with call stacks", _tables("COMPOSITE_EVENTS", "SAMPLING_CALLCHAINS"),
         ("--sample=process-tree",), (Switch("^LINUX_PERF_OPTIONS:COLLECT_IP_BACKTRACE_SAMPLES$", "^true$"),),
         python_options=("--python-sampling=true",), requires=(_LINUX_PERF,)),
    Kind("context_switches", "thread context switches", _tables("SCHED_EVENTS"), ("--cpuctxsw=process-tree",),
         (Switch("^LINUX_PERF_OPTIONS:COLLECT_CPU_CTXSW_TRACE$", "^true$"),), requires=(_LINUX_PERF,)),
    Kind("cuda_backtraces", "CUDA API backtraces", _tables("CUDA_CALLCHAINS"),
         ("--trace=cuda", "--cudabacktrace=all", "--sample=process-tree"),
         python_options=("--python-backtrace=cuda",), gpu=True),
    Kind("gpu_metrics", "GPU metrics", _tables("GPU_METRICS"), ("--gpu-metrics-devices=all",), gpu=True,
         older_spellings=(("--gpu-metrics-devices=all", "--gpu-metrics-device=all"),)),  # nsys 2024.2 and older
    Kind("gpu_memory_usage", "CUDA memory usage", _tables("CUDA_GPU_MEMORY_USAGE_EVENTS"),
         ("--cuda-memory-usage=true",), (Switch(r"^(PROCESS_\d+:)?COLLECT_GPU_MEMORY_USAGE$", "^true$"),), gpu=True),
    Kind("um_page_faults", "unified-memory page faults",
         _tables("CUDA_UM_CPU_PAGE_FAULT_EVENTS", "CUDA_UM_GPU_PAGE_FAULT_EVENTS"),
         ("--cuda-um-cpu-page-faults=true", "--cuda-um-gpu-page-faults=true"),
         (Switch(r"^(PROCESS_\d+:)?COLLECT_UVM_(CPU|GPU)_PAGE_FAULTS$", "^true$"),), gpu=True),
    Kind("cuda_graph_nodes", "CUDA graph kernels traced node by node",
         (Proof("CUPTI_ACTIVITY_KIND_KERNEL.graphNodeId", view="kernel_times", where="graph_node_id IS NOT NULL",
                fact=("graph_kernels", None)),),
         ("--cuda-graph-trace=node",), (Switch(r"^(PROCESS_\d+:)?CUDA_GRAPH_TRACE_OPTIONS:MODE$", "^node$"),),
         gpu=True),
    Kind("cuda_graph_whole", "CUDA graphs traced as whole graphs (one range per launch, no kernels)",
         _tables("CUPTI_ACTIVITY_KIND_GRAPH_TRACE"), ("--cuda-graph-trace=graph",),
         (Switch(r"^(PROCESS_\d+:)?CUDA_GRAPH_TRACE_OPTIONS:MODE$", "^graph$"),), gpu=True),
    Kind("mpi", "MPI calls",
         (Proof("MPI_* tables", table="^MPI_"),
          Proof("NVTX_EVENTS domain MPI", view="nvtx", where="event_type = 75 AND label = 'MPI'",
                fact=("nvtx_domain", "MPI"))),
         ("--trace=mpi",)),
    Kind("nvtx_payloads", "NVTX payloads (NCCL message sizes and communicators)",
         _tables("NVTX_PAYLOAD_SCHEMAS", "NVTX_PAYLOAD_SCHEMA_ENTRIES"), ("--trace=nvtx",)),
    Kind("openacc", "OpenACC trace", (Proof("CUPTI_ACTIVITY_KIND_OPENACC_* tables",
                                            table="^CUPTI_ACTIVITY_KIND_OPENACC_"),), ("--trace=openacc",)),
    Kind("openmp", "OpenMP trace", (Proof("OPENMP_EVENT_KIND_* tables", table="^OPENMP_EVENT_KIND_"),),
         ("--trace=openmp",)),
)
BY_ID = {k.id: k for k in KINDS}
STATES = ("recorded", "empty", "off", "absent")


class KindCoverage(BaseModel):
    kind: str = Field(description="Kind id (profile/coverage.py KINDS).")
    name: str
    state: str = Field(description="recorded (rows of this kind), empty (the capture's options had it on, no "
                                   "rows), off (the options had it off), absent (no rows, options unknown).")
    evidence: list[str] = Field(description="The tables/columns with rows, or the capture options, the state rests "
                                            "on.")
    options: str = Field(description="The `nsys profile` options that record it.")


class Coverage(BaseModel):
    recorded: list[str] = Field(description="Ids of the kinds the capture holds.")
    kinds: list[KindCoverage] = Field(description="Every kind, in KINDS order.")


def _proved(profile, proof: Proof, tables: list[str]) -> list[str]:
    if proof.table is not None:
        return [proof.what] if any(re.search(proof.table, t) for t in tables) else []
    found = _fact(profile, *proof.fact) if proof.fact is not None else None
    if found is not None:
        return [proof.what] if found else []
    if proof.view is not None and profile.has_view(proof.view):
        row = profile.one(f"SELECT EXISTS (SELECT 1 FROM {proof.view} WHERE {proof.where})")
        return [proof.what] if row and row[0] else []
    return []


def _fact(profile, key: str, label: str | None) -> bool | None:
    """Whether the manifest's program facts count a row under ``key`` (with ``label``); None without them."""
    facts = profile.manifest.get("derived", {}).get("program_facts") or {}
    if key not in facts:
        return None
    return facts[key] > 0 if label is None else any(x == label for x, _ in facts[key])


def _switch_state(kind: Kind, items: list[tuple[str, str]]) -> tuple[str | None, list[str]]:
    """("on" | "off" | None, the metadata items it rests on): off when a required option is off, else by the
    kind's own switches."""
    for req in kind.requires:
        values = [(key, value) for key, value in items if re.search(req.key, key)]
        if values and not any(re.search(req.on, str(v).strip(), re.IGNORECASE) for _, v in values):
            return "off", sorted({f"{k}={v}" for k, v in values})
    seen, on = [], []
    for sw in kind.switches:
        for key, value in items:
            if re.search(sw.key, key):
                seen.append(f"{key}={value}")
                if re.search(sw.on, str(value).strip(), re.IGNORECASE):
                    on.append(f"{key}={value}")
    if on:
        return "on", on
    if seen:
        return "off", sorted(set(seen))
    return None, []


def coverage(profile) -> Coverage:
    """The coverage of an opened Profile: the manifest's non-empty tables, the model views, the capture options
    in its metadata (see the module docstring). Computed once per opened profile."""
    if "coverage" in profile.memo:
        return profile.memo["coverage"]
    tables = profile.manifest.get("nonempty_tables", [])
    items = profile.metadata_items()
    rows = []
    for kind in KINDS:
        proofs = [x for p in kind.proofs for x in _proved(profile, p, tables)]
        if proofs:
            state, evidence = "recorded", proofs
        else:
            switch, evidence = _switch_state(kind, items)
            state = {"on": "empty", "off": "off"}.get(switch, "absent")
        rows.append(KindCoverage(kind=kind.id, name=kind.name, state=state, evidence=evidence,
                                 options=" ".join(kind.options)))
    out = Coverage(recorded=[r.kind for r in rows if r.state == "recorded"], kinds=rows)
    profile.memo["coverage"] = out
    return out


def holds(profile, kind_id: str) -> bool:
    """Whether ``kind_id`` is in ``coverage(profile).recorded``, checking that kind's proofs only (a kind proved by
    tables costs no query; the whole coverage runs a query per view proof)."""
    if "coverage" in profile.memo:
        return kind_id in profile.memo["coverage"].recorded
    tables = profile.manifest.get("nonempty_tables", [])
    return any(_proved(profile, p, tables) for p in BY_ID[kind_id].proofs)


def profile_options(kinds: list[str], python: bool = False) -> list[str]:
    """The ``nsys profile`` options that record ``kinds``: one --trace with the values merged, other options once."""
    trace, other = [], []
    for k in kinds:
        kind = BY_ID[k]
        for opt in (*kind.options, *(kind.python_options if python else ())):
            if opt.startswith("--trace="):
                trace += [v for v in opt.split("=", 1)[1].split(",") if v not in trace]
            elif opt not in other:
                other.append(opt)
    return [*([f"--trace={','.join(trace)}"] if trace else []), *other]


def options_for(kinds: list[str], python: bool = False) -> str:
    """One ``nsys profile`` command line that records ``kinds`` (profile_options)."""
    return " ".join(["nsys profile", *profile_options(kinds, python)])


def lacking(cov: Coverage, kinds: list[str], python: bool = False, what: str = "") -> str | None:
    """The sentence an answer or finding gives when it needs ``kinds`` and the capture holds none of them
    (None when it holds one): which data is missing, whether the capture had it off, and the options that
    record it. ``what`` names what the data would have answered ("what the CPU did in the gaps")."""
    states = {r.kind: r.state for r in cov.kinds}
    missing = [k for k in kinds if states.get(k) != "recorded"]
    if len(missing) < len(kinds):
        return None
    names = [BY_ID[k].name for k in missing]
    off = [BY_ID[k].name for k in missing if states.get(k) == "off"]
    empty = [BY_ID[k].name for k in missing if states.get(k) == "empty"]
    listed = _series(names, "or")
    if off and len(off) == len(names):
        why = f" ({'all ' if len(off) > 2 else 'both ' if len(off) == 2 else ''}switched off)"
    else:
        why = "".join([f" ({_series(off, 'and')} switched off)" if off else "",
                       f" ({_series(empty, 'and')} traced, none recorded)" if empty else ""])
    so = f", so it cannot show {what}" if what else ""
    return f"This capture has no {listed}{why}{so}; `{options_for(missing, python)}` records them."


def _series(items: list[str], word: str) -> str:
    """"a", "a or b", "a, b or c"."""
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + f" {word} " + items[-1]
