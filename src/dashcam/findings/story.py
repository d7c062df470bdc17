"""The paragraph every surface shows: what limits the run, the key numbers, what to try first.

At most MAX_WORDS words and MAX_NUMBERS key numbers (GPU ids and other ordinals do not count): the
lead finding's sentence; on several GPUs, the busiest GPU outside it when they differ; the other
verdict-kind findings in one "Also flagged" sentence; the lead's remedy as the first thing to try.
Optional sentences are dropped from the end to fit. Every number comes from a tool result (the
findings' figures, reformatted), so the grounding check passes.
"""
from __future__ import annotations

from dashcam.evidence.grounding import numbers_in
from dashcam.findings.models import Diagnosis, Finding
from dashcam.measure.labels import FAMILY_NAMES
from dashcam.text.format import duration, name, percent
from dashcam.text.format import gpus as gpu_words

MAX_WORDS = 120
# A paragraph a reader takes in at once: the verdict and two to four key numbers, what the first fix would save, and
# the figures that show a remedy is already applied ("446 of 450 copies are pinned and run at 24 GB/s, 96 %").
MAX_NUMBERS = 7
ALSO = {"idle": "kernel-idle time", "transfer_bound": "transfer-bound", "launch_bound": "launch-bound",
        "nccl_not_overlapped": "exposed NCCL communication", "small_kernels": "small kernels",
        "under_parallelized": "under-parallelized kernels", "um_migrations": "unified-memory migrations",
        "startup": "start-up time"}


def first_try(advice: str | None, saving_ns: int | None = None) -> str | None:
    """ "First thing to try (saves up to 48.11 ms): ..." — with the time the fix would save at most, when the finding
    states one (findings/impact.py)."""
    if not advice:
        return None
    if len(advice) > 1 and not advice[1].isupper():
        advice = advice[0].lower() + advice[1:]
    saves = f" (saves up to {duration(saving_ns)})" if saving_ns else ""
    return f"First thing to try{saves}: " + advice


def paragraph(d: Diagnosis, overview=None) -> str:
    """The summary paragraph of a diagnosis (``overview``: the overview tool's result, for the GPU contrast)."""
    parts: list[tuple[str, bool]] = []
    lead = d.lead
    if d.verdict == "healthy":
        busy = next(f for f in d.findings if f.kind == "gpu_busy")
        parts += _healthy(d, busy)
        parts.append((first_try(busy.advice), True))
    elif lead is not None:
        parts.append((lead.sentence, True))
        contrast = _contrast(lead, overview)
        if contrast:
            parts.append((contrast, False))
        also = _also(d, lead, overview)
        if also:
            parts.append((also, False))
        if lead.kind == "idle" and lead.severity == "low":  # nearly GPU-bound: where the rest of the time goes
            fam = _family_sentence(d)
            if fam:
                parts.append((fam, False))
        one_off = lead.kind in ("startup",)  # paid once: its share is in the lead sentence, not a saving per run
        parts.append((first_try(lead.advice, None if one_off else lead.saving_ns), True))
    return fit([(s, r) for s, r in parts if s])


def _healthy(d: Diagnosis, busy: Finding) -> list[tuple[str, bool]]:
    b = busy.figures
    window = duration(b["window_ns"])
    if len(busy.gpus) == 1:
        s1 = f"Healthy and GPU-bound: GPU {b['least_busy_gpu']} is kernel-busy " \
             f"{percent(b['least_kernel_busy_pct'])} of the {window} window."
    else:
        s1 = (f"Healthy and GPU-bound: every GPU is mostly kernel-busy; the least, GPU {b['least_busy_gpu']}, is "
              f"kernel-busy {percent(b['least_kernel_busy_pct'])} of the {window} window.")
    out = [(s1, True)]
    fam = _family_sentence(d)
    if fam:
        out.append((fam, True))
    out.append(("No GPU is launch-bound or transfer-bound.", False))
    return out


def _family_sentence(d: Diagnosis) -> str | None:
    """ "Most kernel time goes to GEMM kernels (60.0 % of it, led by `sgemm`)." from the kernel_family finding."""
    fam = next((f for f in d.findings if f.kind == "kernel_family"), None)
    if fam is None:
        return None
    f = fam.figures
    family = f["family"]
    named = f"{family} kernels" if family in FAMILY_NAMES else name(family)
    led = f", led by {name(f['top_kernel'])}" if family in FAMILY_NAMES else ""
    top_pct = f.get("top_kernel_pct", f["pct"])
    if f.get("instantiations", 1) > 1 and top_pct < f["pct"]:  # never hide what the largest instantiation takes
        led += f" at {percent(top_pct)}" if led else f", the largest of its {f['instantiations']} " \
                                                     f"instantiations {percent(top_pct)}"
    return f"Most kernel time goes to {named} ({percent(f['pct'])} of it{led})."


def _contrast(lead: Finding, overview) -> str | None:
    """The busiest GPU outside the lead's GPUs, when the profile has several."""
    if overview is None or not lead.gpus:
        return None
    others = [x for x in overview.devices if x.device_id not in lead.gpus and x.kernel_count]
    if not others:
        return None
    x = max(others, key=lambda x: (x.kernel_busy_pct, -x.device_id))
    return f"GPU {x.device_id} differs: it is kernel-busy {percent(x.kernel_busy_pct)} of the window."


def _also(d: Diagnosis, lead: Finding, overview) -> str | None:
    all_gpus = [x.device_id for x in overview.devices if x.kernel_count] if overview is not None else None
    seen, out = {lead.kind}, []
    for f in d.findings:
        if f is lead or f.kind not in ALSO or f.kind in seen or f.severity == "info":
            continue
        seen.add(f.kind)
        out.append(ALSO[f.kind] + (f" on {gpu_words(f.gpus, all_gpus)}" if f.gpus else ""))
    return ("Also flagged: " + "; ".join(out[:3]) + ".") if out else None


def key_numbers(text: str) -> int:
    """How many numbers a reader sees in ``text`` (GPU ids, steps and other ordinals left out)."""
    return sum(1 for _, _, unit in numbers_in(text) if not (unit or "").startswith("#"))


def fit(parts: list[tuple[str, bool]]) -> str:
    """Join the sentences, dropping optional ones from the end until the text has at most MAX_WORDS words
    and MAX_NUMBERS key numbers."""
    keep = [True] * len(parts)
    words = lambda: sum(len(s.split()) for (s, _), k in zip(parts, keep) if k)
    numbers = lambda: key_numbers(" ".join(s for (s, _), k in zip(parts, keep) if k))
    for i in range(len(parts) - 1, -1, -1):
        if words() <= MAX_WORDS and numbers() <= MAX_NUMBERS:
            break
        if not parts[i][1]:
            keep[i] = False
    return " ".join(s for (s, _), k in zip(parts, keep) if k)
