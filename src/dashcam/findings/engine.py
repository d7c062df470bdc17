"""The one findings engine: ``diagnose(profile) -> Diagnosis``.

Every surface that says what is wrong with a profile — ``dashcam summary``, the PR comment, ``ask``'s
healthy / slow / what-to-fix intents, chat — calls this, so they name the same verdict, GPU and first
remedy. Steps:

1. No GPU activity (verdict ``no_gpu_activity``): one finding saying which capture it is (rules/capture.py);
   copies and memsets but no kernel (verdict ``no_kernels``): likewise.
2. The tools run once through a ``ToolRuns`` memo (facts.py), on the whole profile or a scope (a GPU,
   a window).
3. Each rule module (rules/) turns the results into items, one per GPU or for the profile.
4. Items of the same kind, severity and cause on several GPUs make one finding (the worst GPU's figures).
5. Ranking and severity by the time a fix would save (findings/impact.py): capture findings first, then by saving
   (ties: PRECEDENCE, specific reasons a GPU waits before plain idle time, idle before kernel shape), one-off
   start-up after every recurring cost unless the capture is mostly start-up (STARTUP_LEAD_PCT); severity from the
   saving's share of the window.
6. The verdict is the first finding's kind, ``healthy`` without one (every GPU kernel-busy at least
   HEALTHY_MIN_KERNEL_BUSY_PCT: GPU-bound), ``kernel_bound`` when the kernels are the lever (every GPU at least
   KERNEL_LEVER_MIN_BUSY_PCT kernel-busy and no finding saving KERNEL_LEVER_MIN_OTHER_PCT: rules/kernel_lever.py);
   with fewer than MIN_KERNELS_FOR_VERDICT kernels, when the lead would be ``healthy`` or idle time with no named
   cause (``unknown``, or ``cpu_work`` in no named NVTX phase and with no named host cause), the verdict is
   ``too_little_work``. With enough kernels, a whole-process capture whose GPU window is under GPU_MINOR_RUN_PCT
   of the process span leads with ``gpu_minor`` (rules/capture.py): the run's time is on the host.
7. Info findings follow: kernel busy per GPU, the top kernel family, the steps.
"""
from __future__ import annotations

from dashcam.evidence import ToolRuns
from dashcam.findings import advice, impact, story
from dashcam.findings.facts import Facts, gather
from dashcam.findings.models import Diagnosis, Finding
from dashcam.findings.rules import (
    Item,
    capture,
    communication,
    graphs,
    idle,
    info,
    kernel_lever,
    kernels,
    launch,
    metrics,
    migrations,
    startup,
    transfer,
)
from dashcam.findings.thresholds import MIN_KERNELS_FOR_VERDICT, STARTUP_LEAD_PCT
from dashcam.text.format import duration
from dashcam.text.format import gpus as gpu_words

RULES = (graphs, startup, migrations, transfer, launch, communication, idle, kernels, metrics)
# Among findings of equal severity: a capture that hides graph work first, specific explanations of a waiting
# GPU, then plain idle time, then the shape of the kernels, then what the GPU metrics say of busy kernels.
PRECEDENCE = ["too_little_work", "gpu_minor", "whole_graph_trace", "startup", "um_migrations", "transfer_bound",
              "launch_bound", "nccl_not_overlapped", "idle", "under_parallelized", "small_kernels", "gpu_underused",
              "kernel_bound"]
VERDICTS = ["healthy", *PRECEDENCE, "no_kernels", "no_gpu_activity"]
VERDICT_LABELS = {
    "healthy": "healthy (GPU-bound)", "idle": "idle", "transfer_bound": "transfer-bound",
    "launch_bound": "launch-bound", "small_kernels": "small kernels", "under_parallelized": "under-parallelized",
    "nccl_not_overlapped": "communication not overlapped", "no_gpu_activity": "no GPU activity",
    "startup": "a cold start", "um_migrations": "unified-memory migrations",
    "too_little_work": "too little GPU work captured", "no_kernels": "no kernels (copies only)",
    "whole_graph_trace": "CUDA graphs not traced per kernel", "gpu_underused": "busy but SMs underused",
    "kernel_bound": "kernel-bound (the kernels are the lever)",
    "gpu_minor": "the GPU is a small part of the run",
}


def verdict_label(verdict: str, lead: Finding | None = None) -> str:
    """The verdict in words, for a heading: VERDICT_LABELS; an ``idle`` verdict in the words its lead sentence opens
    with (rules/idle.lead_words: "mostly kernel-idle", "underused", "nearly GPU-bound"), so that a heading and the
    paragraph under it say the same."""
    if verdict == "startup" and lead is not None and (lead.figures.get("startup_pct") or 0) >= STARTUP_LEAD_PCT:
        return "start-up dominates"  # as its lead sentence opens (rules/startup.py)
    if verdict == "idle" and lead is not None and lead.kind == "idle" and "kernel_idle_pct" in lead.figures:
        words = idle.lead_words(lead.figures["kernel_idle_pct"])
        return words[0].lower() + words[1:]
    return VERDICT_LABELS.get(verdict, verdict)


def diagnose(profile, runs: ToolRuns | None = None, *, gpu: int | None = None, start_ms: float | None = None,
             end_ms: float | None = None) -> Diagnosis:
    """The ranked findings and the verdict of ``profile`` (or of a GPU / window of it); see the module docstring."""
    runs = runs or ToolRuns(profile)
    path = str(profile.path)
    if not profile.devices:
        wl = runs.get("workload")
        finding = capture.no_gpu_activity(wl, runs.evidence_of("workload"))
        return _closed(Diagnosis(profile=path, verdict="no_gpu_activity", findings=[finding], workload=wl.family,
                                 notes=_notes(runs)))
    f = gather(runs, {"gpu": gpu, "start_ms": start_ms, "end_ms": end_ms})
    if f.kernel_count == 0:
        return _closed(Diagnosis(profile=path, verdict="no_kernels", findings=[capture.no_kernels(f)],
                                 workload=f.family, notes=_notes(runs)))
    items = [item for rule in RULES for item in rule.find(f)]
    ranked = _group(items, f)
    lead = next((x for x in ranked if x.severity != "info"), None)  # info never leads
    verdict = lead.kind if lead is not None else "healthy"
    if lead is not None and lead is not ranked[0]:  # information ranked above the lead only by tier: the lead first
        ranked.remove(lead)
        ranked.insert(0, lead)
    if verdict not in impact.CAPTURE_KINDS and kernel_lever.applies(f, ranked):
        ranked.insert(0, kernel_lever.finding(f, ranked))
        verdict = "kernel_bound"
    elif f.kernel_count < MIN_KERNELS_FOR_VERDICT and verdict != "startup":
        if verdict == "healthy" or _unexplained(ranked[0], f):
            idlest = max(f.gaps.devices, key=lambda d: (d.kernel_idle_ns, -d.device_id)) if f.gaps.devices else None
            ranked.insert(0, _finding([capture.too_little_work(f, idlest)], f))
            verdict = "too_little_work"
    if f.kernel_count >= MIN_KERNELS_FOR_VERDICT and verdict != "too_little_work":
        best = max((x.saving_ns or 0 for x in ranked if x.kind not in impact.CAPTURE_KINDS), default=0)
        minor = capture.gpu_minor(f, best)
        if minor is not None:  # the run's time is on the host: that leads, the window's findings follow
            ranked.insert(0, _finding([minor], f))
            verdict = "gpu_minor"
    busy = info.gpu_busy(f)
    if verdict == "healthy":  # the gpu_busy finding carries a GPU-bound run's remedy: cheaper kernels
        busy.advice = advice.kernels(f, f.top.families[0].family if f.top and f.top.families else None)
    findings = ranked + [busy] + [x for x in (info.kernel_family(f), info.iterations(f)) if x]
    d = Diagnosis(profile=path, verdict=verdict, findings=findings, workload=f.family, notes=_notes(runs, f))
    d.paragraph = story.paragraph(d, f.overview)
    return d


def _closed(d: Diagnosis) -> Diagnosis:
    """A diagnosis without GPU work to weigh: its one finding and remedy are the paragraph."""
    f = d.findings[0]
    d.paragraph = story.fit([(f.sentence, True), (story.first_try(f.advice), True)])
    return d


def _unexplained(lead: Finding, f: Facts) -> bool:
    """Idle time the capture does not explain: cause unknown, or cpu_work in no named NVTX phase and with no
    named host cause (what the launching thread did: advice.host_cause)."""
    if lead.kind != "idle":
        return False
    if lead.cause == "unknown":
        return True
    if lead.cause == "cpu_work":
        dev = f.device("gpu_gaps", lead.figures["gpu"])
        return advice.named_cpu_work(dev) is None and advice.host_cause(dev) is None
    return False


def _group(items: list[Item], f: Facts) -> list[Finding]:
    """One finding per (kind, severity, cause), GPUs together with the worst one's figures; severity from the
    saving and ranked by it (findings/impact.py)."""
    groups: dict[tuple, list[Item]] = {}
    for it in items:
        it.severity = impact.severity(it, f.window_ns)
        groups.setdefault((it.kind, it.severity, it.cause), []).append(it)
    out = [_finding(sorted(g, key=lambda x: (-(x.saving_ns or 0), x.gpu if x.gpu is not None else -1)), f)
           for g in groups.values()]
    return sorted(out, key=lambda x: impact.rank_key(x, f, PRECEDENCE))


def _finding(members: list[Item], f: Facts) -> Finding:
    worst = members[0]
    gpus = sorted(x.gpu for x in members if x.gpu is not None)
    title, sentence = worst.title, worst.sentence
    if len(gpus) > 1:
        words = gpu_words(gpus, f.gpus)
        title = title.replace(f"GPU {worst.gpu}", words, 1)
        sentence = (idle.group_sentence(members, words, duration(f.window_ns), f) if worst.kind == "idle"
                    else sentence.replace(f"GPU {worst.gpu}", f"{words} (GPU {worst.gpu} the most)", 1))
    evidence = list(worst.evidence)
    if worst.saving_ns is not None:
        evidence.append(f.runs.record(impact.evidence(worst.kind, worst.gpu, worst.saving_ns, f.window_ns,
                                                      worst.extra.get("assumption"))))
    return Finding(kind=worst.kind, severity=worst.severity, gpus=gpus, title=title,
                   figures={k: v for k, v in worst.figures.items() if v is not None}, evidence=evidence,
                   saving_ns=worst.saving_ns,
                   saving_pct=round(100.0 * worst.saving_ns / f.window_ns, 3) if worst.saving_ns and f.window_ns
                   else None, cause=worst.cause, sentence=sentence, advice=worst.advice)


def _notes(runs: ToolRuns, f: Facts | None = None) -> list[str]:
    """What the profile lacks (the tools' notes on missing rows), failures, unclassified GPUs, and a long CUDA call
    before the GPU window (advice.pre_window_call)."""
    out = [n for n in runs.notes() if n.startswith(("No CUDA API rows", "No kernels", "No GPU activity"))]
    out += runs.failures
    if f is not None:
        unknown = sorted(d.device_id for d in f.small.devices if d.sm_count is None and d.kernel_count)
        if unknown:
            which = ("GPU " if len(unknown) == 1 else "GPUs ") + ", ".join(map(str, unknown))
            out.append(f"SM count unknown for {which}: kernel grids not compared with the SMs there.")
        early = advice.pre_window_call(f)
        if early:
            out.append(f"{advice.pre_window_words(early)}, outside the GPU window the findings measure.")
        copies_only = [d.device_id for d in f.overview.devices if not d.kernel_count]
        if copies_only:
            which = ("GPU " if len(copies_only) == 1 else "GPUs ") + ", ".join(map(str, copies_only))
            out.append(f"{which} ran no kernels (copies or memsets only): left out of the idle findings.")
    return list(dict.fromkeys(out))
