"""An independent check of dashcam's advice against facts read straight from an export with plain SQLite.

It shares no code with dashcam: the facts below are computed here, from the raw tables, so a rule that
drifts in the findings engine cannot also drift in its check. ``violations(path, texts)`` lists what the
texts (a summary paragraph, ask answers) say that the export contradicts:

- a framework idiom (PyTorch: ``pin_memory``, ``non_blocking``, ``torch``, ``DataLoader``, ``.item()``,
  ``cudnn``) for a program with no PyTorch evidence in its threads, NVTX labels, kernels or command;
- a multi-GPU story ("balance the work across GPUs", "other GPUs") on a capture with one GPU;
- a launch-bound verdict with fewer than 100 kernel launch calls;
- "enable tracing" advice ("tracing on", "with CUDA API tracing") when CUDA API calls were traced;
- unified-memory migrations that fill a fifth of the window but go unnamed;
- pinned-memory advice when every host copy is already pinned;
- "fuse" advice when the small-grid kernels are long (100 us and more on average);
- advice to capture CPU samples (``--sample=``, ``--python-sampling``) when the capture has them (a new
  capture that should *keep* them, say with CUDA tracing, is no such advice).
"""
from __future__ import annotations

import re
import sqlite3
from pathlib import Path

ACTIVITY = ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET")
TORCH_IDIOMS = re.compile(r"pin_memory|non_blocking|\btorch\b|DataLoader|\.item\(\)|cudnn\.benchmark", re.I)
MULTI_GPU = re.compile(r"balance the work across GPUs|other GPUs' kernels|other GPUs this one", re.I)
ENABLE_TRACING = re.compile(r"(capture|profile) with CUDA (API )?tracing", re.I)
CODE_SPAN = re.compile(r"`[^`]*`")  # profile text (kernel names, NVTX labels) is quoted: not advice
PINNED_ADVICE = re.compile(r"pinned host memory \(`cudaMallocHost`|pin_memory=True|copy from pinned", re.I)
FUSE = re.compile(r"\bfuse\b", re.I)
WAIT_CALL = re.compile(r"`cu(?:da)?StreamWait\w*`")  # left after masking: a stream-wait call the export lacks
SAMPLE_ADVICE = re.compile(r"--sample=(?:cpu|process-tree|system-wide)|--python-sampling", re.I)


def _tables(con) -> set[str]:
    return {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def facts(path: Path) -> dict:
    """What the export says, by plain SQL on its raw tables."""
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        t = _tables(con)
        q = lambda sql: con.execute(sql).fetchall()
        strings = "StringIds" in t
        devices = set()
        for a in ACTIVITY:
            if a in t:
                devices |= {r[0] for r in q(f"SELECT DISTINCT deviceId FROM {a}")}
        torch = False
        if "ThreadNames" in t and strings:
            torch |= bool(q("SELECT 1 FROM ThreadNames n JOIN StringIds s ON s.id = n.nameId "
                            "WHERE s.value LIKE 'pt\\_%' ESCAPE '\\' LIMIT 1"))
        if "NVTX_EVENTS" in t:
            torch |= bool(q("SELECT 1 FROM NVTX_EVENTS WHERE text LIKE 'aten::%' LIMIT 1"))
            if strings:
                torch |= bool(q("SELECT 1 FROM NVTX_EVENTS e JOIN StringIds s ON s.id = e.textId "
                                "WHERE s.value LIKE 'aten::%' LIMIT 1"))
        if "CUPTI_ACTIVITY_KIND_KERNEL" in t and strings:
            torch |= bool(q("SELECT 1 FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.demangledName "
                            "WHERE s.value LIKE '%at::native::%' LIMIT 1"))
        if "META_DATA_CAPTURE" in t:
            torch |= bool(q("SELECT 1 FROM META_DATA_CAPTURE WHERE (name LIKE 'PROCESS_%:COMMAND' OR name LIKE "
                            "'PROCESS_%:ARGUMENT_%') AND value LIKE '%torch%' LIMIT 1"))
        launches = 0
        api_rows = 0
        if "CUPTI_ACTIVITY_KIND_RUNTIME" in t:
            api_rows = q("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME")[0][0]
            if strings:
                cols = {r[1] for r in con.execute("PRAGMA table_info(CUPTI_ACTIVITY_KIND_RUNTIME)")}
                no_backtraces = "AND coalesce(r.eventClass, 0) != 67" if "eventClass" in cols else ""
                launches = q("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s ON s.id = r.nameId "
                             "WHERE (s.value LIKE 'cudaLaunch%' OR s.value LIKE 'cuLaunch%' OR s.value LIKE "
                             f"'cudaGraphLaunch%' OR s.value LIKE 'cuGraphLaunch%') {no_backtraces}")[0][0]
        window = (0, 0)
        spans = [q(f"SELECT min(start), max(end) FROM {a}")[0] for a in ACTIVITY if a in t]
        spans = [s for s in spans if s[0] is not None]
        if spans:
            window = (min(s[0] for s in spans), max(s[1] for s in spans))
        migration_ns, host_copies, pinned_copies = 0, 0, 0
        if "CUPTI_ACTIVITY_KIND_MEMCPY" in t:
            migration_ns = q("SELECT coalesce(sum(end - start), 0) FROM CUPTI_ACTIVITY_KIND_MEMCPY "
                             "WHERE copyKind IN (11, 12, 13)")[0][0]
            cols = {r[1] for r in con.execute("PRAGMA table_info(CUPTI_ACTIVITY_KIND_MEMCPY)")}
            if {"srcKind", "dstKind"} <= cols:
                host_copies, pinned_copies = q(
                    "SELECT count(*), coalesce(sum(CASE WHEN (copyKind = 1 AND srcKind = 1) OR "
                    "(copyKind = 2 AND dstKind = 1) THEN 1 ELSE 0 END), 0) FROM CUPTI_ACTIVITY_KIND_MEMCPY "
                    "WHERE copyKind IN (1, 2)")[0]
        strings = {r[0] for r in q("SELECT value FROM StringIds")} if strings else set()
        if "NVTX_EVENTS" in t:
            strings |= {r[0] for r in q("SELECT DISTINCT text FROM NVTX_EVENTS WHERE text IS NOT NULL")}
        small_long = False
        has_sms = "TARGET_INFO_GPU" in t and "smCount" in {
            r[1] for r in con.execute("PRAGMA table_info(TARGET_INFO_GPU)")}
        if "CUPTI_ACTIVITY_KIND_KERNEL" in t and has_sms:
            sms = q("SELECT max(smCount) FROM TARGET_INFO_GPU")[0][0]
            if sms:
                row = q(f"SELECT count(*), avg(end - start) FROM CUPTI_ACTIVITY_KIND_KERNEL "
                        f"WHERE gridX * gridY * gridZ < {int(sms)}")[0]
                small_long = bool(row[0]) and row[1] >= 100_000
        sampled = "COMPOSITE_EVENTS" in t and bool(q("SELECT 1 FROM COMPOSITE_EVENTS LIMIT 1"))
        return {"gpus": len(devices), "torch": torch, "launches": launches, "api_rows": api_rows, "sampled": sampled,
                "window_ns": window[1] - window[0], "migration_ns": migration_ns, "host_copies": host_copies,
                "pinned_copies": pinned_copies, "small_long": small_long, "strings": strings}
    finally:
        con.close()


def _quotes_profile(span: str, strings: set[str]) -> bool:
    """Whether a code span quotes profile text (a label or name of the export, maybe cut with "…")."""
    span = span.replace("'", "`").rstrip("…")
    return bool(span) and any(s.startswith(span) for s in strings)


def violations(path: Path, texts: dict[str, str], verdict: str | None = None) -> list[str]:
    """What ``texts`` ({surface: text}) say that the export at ``path`` contradicts (module docstring)."""
    f = facts(path)
    out = []
    for where, text in texts.items():
        text = CODE_SPAN.sub(lambda m: "`…`" if _quotes_profile(m.group(0)[1:-1], f["strings"]) else m.group(0),
                             text)
        if not f["torch"] and TORCH_IDIOMS.search(text):
            out.append(f"{where}: PyTorch idiom {TORCH_IDIOMS.search(text).group(0)!r} without PyTorch")
        if f["gpus"] <= 1 and MULTI_GPU.search(text):
            out.append(f"{where}: multi-GPU story on {f['gpus']} GPU")
        if f["launches"] < 100 and re.search(r"(^|\. )Launch-bound:|\bis launch-bound\b", text):
            out.append(f"{where}: launch-bound with {f['launches']} launch calls")
        if WAIT_CALL.search(text):
            out.append(f"{where}: advises {WAIT_CALL.search(text).group(0)}, a call the export does not have")
        if f["api_rows"] and ENABLE_TRACING.search(text):
            out.append(f"{where}: 'enable tracing' advice with {f['api_rows']} CUDA API rows traced")
        if (f["window_ns"] and f["migration_ns"] >= 0.2 * f["window_ns"] and "migration" not in text.lower()
                and where != "top_kernels"):
            out.append(f"{where}: unified-memory migrations ({f['migration_ns']} ns) not named")
        if f["host_copies"] and f["pinned_copies"] == f["host_copies"] and PINNED_ADVICE.search(text):
            out.append(f"{where}: pinned-memory advice for copies already pinned")
        if f["small_long"] and FUSE.search(text) and "small" in text.lower():
            out.append(f"{where}: 'fuse' advice for long small-grid kernels")
        if f["sampled"] and any(SAMPLE_ADVICE.search(x) and "keep" not in x for x in re.split(r"(?<=\.) ", text)):
            out.append(f"{where}: advice to capture CPU samples in a capture that has them")
    if verdict == "launch_bound" and f["launches"] < 100:
        out.append(f"verdict: launch-bound with {f['launches']} launch calls")
    return out
