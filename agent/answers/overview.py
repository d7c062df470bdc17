"""What the profile is, which GPU models, comparing the GPUs, a capture without GPU work, the fallbacks."""
from __future__ import annotations

import re

from dashcam.errors import NO_GPU_ACTIVITY_NOTE, NoGpuActivity
from dashcam.findings.story import first_try
from dashcam.text.format import at_ms, count, duration, ids, name, percent, sentences

from .context import Ctx, calls_per_gpu, devices_of, window_words
from .idle import advice_for, idle_cause

EXAMPLE_QUESTIONS = [
    "What is this profile?",
    "Why is GPU 1 idle?",
    "Why is my training slow?",
    "Which kernels take the most time?",
    "Do host-to-device copies stall the GPU?",
    "Am I launch-bound?",
    "How long does the CPU wait in synchronize calls?",
    "Is NCCL communication overlapped with compute?",
    "Which NVTX ranges take the most time?",
    "Which iteration is the slowest?",
    "Are my kernels too small for the GPU?",
    "How busy are my streams?",
    "Compare the GPUs.",
    "Does this profile look healthy?",
    "Why was GPU 0 idle between 2 s and 3.5 s?",
    "What happened in step 3?",
]

API_SUMMARY_SQL = ("SELECT (SELECT count(*) FROM api) AS api_calls, "
                   "(SELECT count(DISTINCT pid) FROM api) AS processes, "
                   "(SELECT max(\"end\") - min(start) FROM api) AS span_ns, "
                   "(SELECT count(*) FROM api WHERE name LIKE '%Launch%') AS launch_calls, "
                   "(SELECT count(*) FROM gpus) AS gpus_listed, "
                   "(SELECT string_agg(DISTINCT name, ', ') FROM gpus) AS gpu_names")
API_TOP_SQL = ("SELECT name, count(*) AS calls, sum(dur) AS total_ns FROM api GROUP BY name "
               "ORDER BY total_ns DESC, name LIMIT 3")
_GPU_MODEL = re.compile(r"\b(?:gpu|card|device|hardware)s?\b.{0,20}\b(?:model|name|type|kind)s?\b|"
                        r"\b(?:model|name|type|kind)s? of (?:the |this |my )?(?:gpu|card|device)|"
                        r"\b(?:which|what)(?: kind of| type of| sort of)? (?:gpu|card|device|hardware)s?\b"
                        r"(?! (?:is|was|are|were) (?:the )?(?:idle|busy|slow))", re.IGNORECASE)


def asks_gpu_model(question: str) -> bool:
    """The question asks which GPU model (name) the profile ran on."""
    return bool(_GPU_MODEL.search(question or ""))


def _sql_rows(result) -> list:
    return [dict(zip(result.columns, row)) for row in result.rows]


def no_gpu_activity(ctx: Ctx) -> str:
    """A capture without GPU activity: the findings engine says which kind (CPU-only, GPU records missing,
    CUDA calls without work) and what to do; the sql tool adds what the CUDA calls were, when there are any."""
    ctx.note(NO_GPU_ACTIVITY_NOTE)
    from dashcam.findings import diagnose  # the engine (every rule and its tools) loads when first used

    d = diagnose(ctx.profile, ctx.runs)
    out = [d.findings[0].sentence]
    summary = _sql_rows(ctx.call("sql", query=API_SUMMARY_SQL))[0] if ctx.profile.has_table("runtime") else None
    if summary and summary["api_calls"]:
        top = _sql_rows(ctx.call("sql", query=API_TOP_SQL))
        listed = ", ".join(f"{name(x['name'])} {duration(x['total_ns'])} ({count(x['calls'], 'call')})" for x in top)
        out.append(f"The {count(summary['api_calls'], 'CUDA API call')} come from "
                   f"{count(summary['processes'], 'process', 'processes')} over {duration(summary['span_ns'])}; "
                   f"by time: {listed}.")
        if summary["gpus_listed"]:
            which = f" ({name(summary['gpu_names'])})" if summary.get("gpu_names") else ""
            out.append(f"The export lists {count(summary['gpus_listed'], 'GPU')}{which}, but no work on "
                       f"{'it' if summary['gpus_listed'] == 1 else 'them'} was recorded.")
    out.append(first_try(d.findings[0].advice))
    return sentences(*out)


def gpu_model_sentence(ctx: Ctx, devs: list) -> str:
    """The GPU models (overview gpu_name per device), or that the export does not record them."""
    by_name: dict[str | None, list[int]] = {}
    for d in devs:
        by_name.setdefault(d.gpu_name, []).append(d.device_id)
    named = [f"{'GPU' if len(g) == 1 else 'GPUs'} {ids(g)} {'is a' if len(g) == 1 else 'are'} {name(m)}"
             for m, g in by_name.items() if m]
    unnamed = by_name.get(None, [])
    out = []
    if named:
        out.append("; ".join(named) + ".")
    if unnamed:
        table = ctx.profile.manifest["tables"].get("TARGET_INFO_GPU")
        why = ("it has no TARGET_INFO_GPU table" if table is None else
               "its TARGET_INFO_GPU table is empty" if not table.get("rows") else
               "TARGET_INFO_GPU has no name for " + ("it" if len(unnamed) == 1 else "them"))
        whose = f"{'GPU' if len(unnamed) == 1 else 'GPUs'} {ids(unnamed)}"
        if named:
            out.append(f"The export does not record the GPU model of {whose} ({why}).")
        else:
            out.append(f"The export does not record the GPU model ({why}), so the model of {whose} is unknown.")
    return sentences(*out)


# The capture's host span is said when the GPU window is under this share of it (GPU time against wall time)
RUN_SHARE_WORTH_PCT = 90.0


def overview(ctx: Ctx) -> str:
    if not ctx.profile.devices:
        return no_gpu_activity(ctx)
    results = calls_per_gpu(ctx, "overview")
    r = results[0]
    devs = devices_of(results)
    model = gpu_model_sentence(ctx, devs) if asks_gpu_model(ctx.question) else None
    version = (f"Nsight Systems {name(r.nsys_version)} export (schema {name(r.schema_version)})"
               if r.nsys_version else "Nsight Systems export (version not recorded)")
    gpu_names = list(dict.fromkeys(d.gpu_name for d in devs if d.gpu_name))
    kinds = f" ({', '.join(name(g) for g in gpu_names)})" if gpu_names and not model else ""
    plural = "GPU" if r.gpu_count == 1 else "GPUs"
    out = [f"This is an {version} with {r.gpu_count} {plural}{kinds} and a "
           f"{duration(r.window_ns)} window of GPU activity{'' if ctx.whole_profile else ' (the part asked for)'}.",
           f"It has {count(r.process_count, 'process', 'processes')}, {count(r.api_calls, 'CUDA API call')} and "
           f"{count(r.nvtx_ranges, 'NVTX range')}."]
    wl = r.workload
    if wl.family:
        extra = (" with MPI" if wl.mpi else "") + (" and NCCL" if wl.nccl else "")
        out.append(f"The program looks like {wl.family_label}{extra} ({wl.why}).")
    span = wl.span
    share = span.gpu_share_pct
    if ctx.whole_profile and span.host_ns and share is not None and share < RUN_SHARE_WORTH_PCT:
        out.append(f"The capture holds {duration(span.host_ns)} of the program's run (its first to last CUDA call, OS "
                   f"call or NVTX range); the window of GPU activity is {percent(span.gpu_share_pct)} of it.")
    if len(devs) <= 4:
        out.append("; ".join(f"GPU {d.device_id} ran {count(d.kernel_count, 'kernel')}, kernel-busy "
                             f"{percent(d.kernel_busy_pct)} of the window (busy {percent(d.busy_pct)}, counting copies)"
                             for d in devs) + ".")
    else:
        out.append("Kernel-busy per GPU: " + ", ".join(f"GPU {d.device_id} {percent(d.kernel_busy_pct)}"
                                                        for d in devs) + ".")
    return sentences(model, *out)


# "compared to the GPU's peak / spec": on one GPU the comparison is with the device, not with other GPUs
PEAK = re.compile(r"\bpeak\b|\btheoretical\b|\bspecs?\b|\bspecification|\broofline\b|\bmax(?:imum)?\s+"
                  r"(?:throughput|performance|flops|bandwidth)\b", re.IGNORECASE)


def compare_gpus(ctx: Ctx) -> str:
    named = ctx.targets.gpus if len(ctx.targets.gpus) > 1 else []
    results = [ctx.call("overview", gpu=g, **ctx.win) for g in (named or [None])]
    devs = devices_of(results)
    w = window_words(results[0], ctx.whole_profile)
    if len(devs) == 1:
        d = devs[0]
        if PEAK.search(ctx.question or ""):  # "compared to the GPU's peak": the device itself, not other GPUs
            return (f"Against what GPU {d.device_id} can do: it is kernel-busy {percent(d.kernel_busy_pct)} of {w}, so "
                    "the timeline leaves the rest of the GPU's time unused; how close each kernel comes to the "
                    "device's peak throughput is not on the timeline: GPU metrics (`nsys profile "
                    "--gpu-metrics-devices=all`) show SM and DRAM throughput over time, and Nsight Compute "
                    "(`ncu --set full -k KERNEL`) measures one kernel against the roofline.")
        return (f"This profile has one GPU, GPU {d.device_id}, so there is nothing to compare: it is kernel-busy "
                f"{percent(d.kernel_busy_pct)} of {w}.")
    most = max(devs, key=lambda d: (d.kernel_busy_pct, -d.device_id))
    least = min(devs, key=lambda d: (d.kernel_busy_pct, d.device_id))
    if most.kernel_busy_pct == least.kernel_busy_pct:
        return (f"The GPUs are equally busy: GPUs {ids([d.device_id for d in devs])} are each kernel-busy "
                f"{percent(most.kernel_busy_pct)} of {w}.")
    uneven = most.kernel_busy_pct - least.kernel_busy_pct >= 10  # a wording choice, not printed
    # asked which GPU finished last / started first: that leads
    edge = EDGE_WORDS.search(ctx.question) if ORDER_WORDS.search(ctx.question) else None
    out = [edge_order(ctx, [d.device_id for d in devs], edge.group(1))] if edge else []
    out += [f"GPU {most.device_id} is the busiest (kernel-busy {percent(most.kernel_busy_pct)} of {w}) and GPU "
           f"{least.device_id} the least busy ({percent(least.kernel_busy_pct)}), "
           + ("a wide spread: the load is uneven." if uneven else "a narrow spread: the load is even.")]
    mid = [d for d in devs if d is not most and d is not least]
    if mid and len(mid) <= 6:
        out.append("The others: " + ", ".join(f"GPU {d.device_id} {percent(d.kernel_busy_pct)}" for d in mid) + ".")
    gres = ctx.call("gpu_gaps", gpu=least.device_id, **ctx.win)
    g = gres.devices[0]
    if g.kernel_idle_ns > 0 and g.dominant_cause:
        out += idle_cause(ctx, g, f"GPU {least.device_id} was kernel-idle {duration(g.kernel_idle_ns)}",
                          "its kernel-idle time")
        out.append(advice_for(ctx, g))
    return sentences(*out)


# "which GPU finished last / started first": the order of the GPUs' last (or first) kernels
ORDER_WORDS = re.compile(r"\b(first|last|earliest|latest|soonest)\b", re.IGNORECASE)
EDGE_WORDS = re.compile(r"\b(finish\w*|end(?:s|ed)?|done|complet\w*|start(?:s|ed)?|beg[ai]n\w*)\b", re.IGNORECASE)


def edge_order(ctx: Ctx, gpus: list[int], word: str) -> str:
    """Which GPU's last kernel ended last (or first), or first kernel started first (or last), in the window:
    each GPU's tail gap (its last kernel's end to the window's end) or head gap (the window's start to its
    first kernel), from gpu_gaps. A GPU without one ran kernels up to the window's edge. "first" / "earliest"
    / "soonest" in the question picks that end of the order, else "last" for finishing and "first" for
    starting."""
    start = word.lower().startswith(("start", "beg"))
    q = ctx.question.lower()
    early = bool(re.search(r"\b(first|earliest|soonest|early|before)\b", q))
    late = bool(re.search(r"\b(last|latest|late)\b", q))
    edges = {}
    for g in gpus:
        d = ctx.call("gpu_gaps", gpu=g, **ctx.win).devices[0]
        edges[g] = d.head if start else d.tail
    gap = {g: edges[g].duration_ns if edges[g] else 0 for g in gpus}
    # asked for the first to finish or the last to start: the GPU with the longest edge gap leads
    longest_first = (early and not late) if not start else (late and not early)
    order = sorted(gpus, key=lambda g: (-gap[g] if longest_first else gap[g], g))
    which = ("last" if late and not early else "first") if start else ("first" if early and not late else "last")

    def edge(g: int) -> str:
        e = edges[g]
        if start:
            return f"{duration(e.duration_ns)} after the window's start" if e else "at the window's start"
        return f"{duration(e.duration_ns)} before the window's end (at {at_ms(e.start_ms)})" if e else \
            "at the window's end"

    lead, rest = order[0], order[1:]
    verb = "started" if start else "finished"
    noun = "first kernel began" if start else "last kernel ended"
    others = [f"GPU {g}'s {edge(g)}" for g in rest[:6]] + ([f"{len(rest) - 6} more"] if len(rest) > 6 else [])
    return f"GPU {lead} {verb} {which}: its {noun} {edge(lead)}; " + ", ".join(others) + "."


def unknown(ctx: Ctx) -> str:
    """A question the classifier cannot place, about an open profile: never a refusal. The health
    summary of the profile (the findings engine's paragraph, as ``dashcam summary``), then one line on
    what else can be asked (the intent table's topics)."""
    from ..intent_table import INTENT_TABLE
    from .health import health

    if not ctx.profile.devices:  # the planner answers with what kind of capture it is and what to do
        raise NoGpuActivity(NO_GPU_ACTIVITY_NOTE)
    topics = [i.topic for i in INTENT_TABLE if i.topic and i.name not in ("healthy", "slow")]
    return sentences(health(ctx), "You can also ask about " + ", ".join(topics[:-1]) + " or " + topics[-1] + ".")


def missing_gpu(ctx: Ctx, missing: list[int]) -> str:
    """The question names GPUs the profile does not have: say which exist (overview only)."""
    which = "GPU " + ids(missing) if len(missing) == 1 else "GPUs " + ids(missing)
    verb = "is" if len(missing) == 1 else "are"
    if not ctx.profile.devices:
        return f"{which} {verb} not in this profile; it has no GPU activity at all (no kernels, memcpys or memsets)."
    r = ctx.call("overview")
    have = [d.device_id for d in r.devices]
    return f"{which} {verb} not in this profile; it has {'GPU' if len(have) == 1 else 'GPUs'} {ids(have)}."
