"""idle: a GPU whose kernels leave more than IDLE_MIN_PCT of the window empty, and what it waited for.

Per GPU with kernels and kernel busy below HEALTHY_MIN_KERNEL_BUSY_PCT: the dominant gap cause
(gpu_gaps). Its severity is the share of the window lost (loss_severity of idle %); the saving is the
dominant cause's time. Refinements, each from the gap facts: ``cpu_work`` names the NVTX kind that
holds at least NAMED_CPU_WORK_PCT of it (JIT, MPI, data loading, framework ops) with its ranges, and, where the
capture has OS runtime calls, context switches or CPU samples, what the launching thread mostly did in it (the
OS call it was blocked in, descheduled, or the function it computed in: advice.host_cause, at least
NAMED_HOST_PCT of it); when
the dominant cause is ``unknown`` and the tail (after the GPU's last kernel) holds at least
TAIL_MIN_UNKNOWN_PCT of it, the finding says what fills the tail (its own copies, migrations, other
GPUs' kernels, nothing) instead of "unknown", and the advice is for what fills it (or, when nothing
on the GPUs does, for the cause of the other gaps).
"""
from __future__ import annotations

from dashcam.findings import advice, causes, impact, practices, remedies
from dashcam.findings.rules import Item, loss_severity, share
from dashcam.findings.thresholds import (
    HEALTHY_MIN_KERNEL_BUSY_PCT,
    MIGRATION_MIN_IDLE_PCT,
    TAIL_FILLER_MIN_PCT,
    TAIL_MIN_UNKNOWN_PCT,
)
from dashcam.measure.labels import nvtx_kind
from dashcam.measure.names import short_function_name
from dashcam.profile.gap_dependency import TURNAROUND_MAX_NS
from dashcam.text.format import duration, name, percent

NO_BOUND = 1 << 62
SEVERITIES = ["info", "low", "medium", "high"]

LEAD = {"high": "Mostly kernel-idle", "medium": "Underused", "low": "Nearly GPU-bound", "info": "Nearly GPU-bound"}


def lead_words(idle_pct: float) -> str:
    """The words an idle finding's sentence opens with (LEAD, by how idle the GPU is): "Nearly GPU-bound"."""
    return LEAD[loss_severity(idle_pct)]


def top_api(dev, sync: bool) -> str | None:
    """The API name (synchronize calls, or the others) with the most time in the device's gaps."""
    per = {api: ns for api, ns in dev.cuda_api_calls.items() if ("Synchronize" in api) == sync and ns > 0}
    return max(per, key=lambda a: (per[a], a)) if per else None


def led_by(dev) -> str:
    """ ", led by `cudaMemcpy`" for a cuda_api or sync_wait dominant cause, else ""."""
    cause = dev.dominant_cause
    api = top_api(dev, sync=cause == "sync_wait") if cause in ("cuda_api", "sync_wait") else None
    return f", led by {name(api)}" if api else ""


UNLAUNCHED = ("unknown", "transfer")  # the causes of a gap no launch call splits (a tail's: no kernel ends it)


def tail_explains(dev) -> bool:
    """The dominant cause is ``unknown`` or ``transfer`` and the tail holds at least TAIL_MIN_UNKNOWN_PCT of the
    time of those two (a decision, never printed): the unattributed time is the GPU having finished, not missing
    launch calls."""
    t, unlaunched = dev.tail, sum(dev.causes.get(c, 0) for c in UNLAUNCHED)
    return (t is not None and dev.dominant_cause in UNLAUNCHED and unlaunched > 0
            and 100.0 * t.duration_ns / unlaunched >= TAIL_MIN_UNKNOWN_PCT)


def tail_fillers(dev, multi_gpu: bool) -> list[tuple[str, str, int, str | None]]:
    """What fills the GPU's tail, largest first, each ``(kind, words, ns, OS call)`` covering at least
    TAIL_FILLER_MIN_PCT of it: ``migrations``, ``copies`` (its own copies and memsets), ``other_gpus`` (their
    kernels), ``output`` (an OS call that writes data out: advice.is_output_io) or ``os_call`` (another, the
    process's call with the most time), ``host`` (the launching thread's host code, named by its most sampled
    function only on enough samples: advice.sampled_function). The first is the lead."""
    t = dev.tail
    cands = [("migrations", "unified-memory migrations", t.migration_ns, None),
             ("copies", "its own copies and memsets", t.memory_ns - t.migration_ns, None)]
    if multi_gpu and t.other_gpus_kernel_ns:
        cands.append(("other_gpus", "other GPUs' kernels", t.other_gpus_kernel_ns, None))
    if t.host_os_calls:
        call, ns = next(iter(t.host_os_calls.items()))  # most time first
        out = advice.is_output_io(call)
        cands.append(("output" if out else "os_call", f"{name(call)} calls", ns, call))
    running = (t.host_states or {}).get("running", 0)
    if running:
        fn = advice.sampled_function(t.host_functions)
        cands.append(("host", "host code on the launching thread"
                      + (f", most often in {name(short_function_name(fn))}" if fn else ""), running, None))
    named = [c for c in cands if c[2] > 0 and 100.0 * c[2] >= TAIL_FILLER_MIN_PCT * t.duration_ns]
    return sorted(named, key=lambda c: -c[2])


def tail_fill(dev, multi_gpu: bool) -> str:
    """What fills most of the GPU's tail: "its own copies and memsets (3 ms)", "`pwrite64` calls (70.6 ms): the
    program writing its output at teardown (output I/O, not a GPU problem)", ... (tail_fillers); when nothing
    reaches TAIL_FILLER_MIN_PCT, what little the GPUs did in it."""
    t = dev.tail
    named = tail_fillers(dev, multi_gpu)
    if named:
        text = " and ".join(f"{words} ({duration(ns)})" for _, words, ns, _ in named)
        return text + (": the program writing its output at teardown (output I/O, not a GPU problem)"
                       if named[0][0] == "output" else "")
    little = [(w, ns) for w, ns in (("unified-memory migrations", t.migration_ns),
                                    ("its own copies and memsets", t.memory_ns - t.migration_ns),
                                    ("other GPUs' kernels", t.other_gpus_kernel_ns if multi_gpu else 0)) if ns]
    if little:
        return ("nothing on the GPUs for most of it (" + " and ".join(f"{w} {duration(ns)}" for w, ns in little)
                + f" of its {duration(t.duration_ns)})")
    return "no GPU work at all (the window ends with other GPUs' copies or the host)"


def kind_detail(dev, family) -> str:
    """ ", 173.606 ms of it inside MPI calls (`MPI_Send`, `MPI_Recv`)" for named cpu_work, else ""."""
    kind = advice.named_cpu_work(dev)
    if kind is None:
        return ""
    labels = [lab for lab in dev.cpu_work_nvtx if nvtx_kind(lab) == kind][:2]
    which = f" ({', '.join(name(x) for x in labels)})" if labels else ""
    return f", {duration(dev.cpu_work_kinds[kind])} of it inside {causes.KIND_WORDS[kind]}{which}"


def migration_detail(dev) -> str:
    """ ", 60 ms of the GPU's gaps filled by unified-memory migrations" when the gaps hold migrations, else ""."""
    return (f"; unified-memory migrations fill {duration(dev.migration_ns)} of its gaps" if dev.migration_ns
            else "")


def host_detail(dev) -> str:
    """ "; the launching thread was mostly blocked in `read`" where the capture has OS runtime calls, context
    switches or samples and one piece names the cpu_work (advice.host_cause), else ""."""
    cause = advice.host_cause(dev)
    if cause is None:
        return ""
    state, who, ns = cause
    mostly = 2 * ns >= sum(dev.cpu_work_states.values())
    what = advice.host_words(state, who)
    paced = advice.paced_words(dev) if state in ("descheduled", "os_wait") else None
    tail = f"; {paced}" if paced else ""
    return (f"; the launching thread was mostly {what}{tail}" if mostly
            else f"; the largest part of it the launching thread was {what}{tail}")


def migrations_matter(dev) -> bool:
    """Whether unified-memory migrations fill MIGRATION_MIN_IDLE_PCT of the GPU's idle time (the um_migrations
    rule's bar), so every sentence about that GPU's idle time names them, whatever its main cause."""
    return 100.0 * dev.migration_ns >= MIGRATION_MIN_IDLE_PCT * max(dev.kernel_idle_ns, 1)


def said(dev, cause: str, family) -> str:
    """What the GPU waited for (causes.phrase); `dependency` by the part of it that leads (advice.dependency_part)."""
    return causes.dependency_phrase(advice.dependency_part(dev)) if cause == "dependency" else causes.phrase(cause,
                                                                                                            family)


def words(dev, cause: str, family) -> str:
    """The short gloss of a cause (causes.words); `dependency` by the part of it that leads."""
    return causes.dependency_words(advice.dependency_part(dev)) if cause == "dependency" else causes.words(cause,
                                                                                                          family)


def dependency_detail(dev) -> str:
    """What the leading part of `dependency` time is: ", launch-to-start latency: each kernel starts a median 120 us
    after its launch call returned, with the device empty (...)", the stream waits behind real waits, ..."""
    split, part = dev.dependency_split, advice.dependency_part(dev)
    if split is None:
        return ""
    ns = {"launch_latency": split.launch_latency_ns, "wait": split.wait_ns, "turnaround": split.turnaround_ns}[part]
    share = f"{duration(ns)} of it " if ns < dev.causes.get("dependency", 0) else ""
    if part == "turnaround":
        return (f", {share}back-to-back turnaround: {split.turnaround_gaps} gaps under "
                f"{duration(TURNAROUND_MAX_NS)} between kernels")
    if part == "wait":
        call = advice.wait_call(split)
        behind = [f"behind {call[1]} {name(call[0])} calls"] if call else []
        if split.wait_other_gpus_ns:
            behind.append(("all " if split.wait_other_gpus_ns == split.wait_ns else
                           f"{duration(split.wait_other_gpus_ns)} ") + "while other GPUs' kernels ran")
        return f", {share}real waits" + (f" ({'; '.join(behind)})" if behind else "")
    n = split.latency_gaps
    spread = ("in its one gap" if n == 1 else f"the same delay in all {n} gaps"
              if split.latency_p90_ns <= split.latency_p10_ns else
              f"10th–90th percentile {duration(split.latency_p10_ns)}–{duration(split.latency_p90_ns)} over {n} gaps")
    outside = ("; so large and constant a delay is something the trace cannot see holding the kernels: another "
               "process or context sharing the GPU (MPS, time-slicing), or a device-side wait"
               if advice.constant_latency(split) else "")
    return (f", {share}launch-to-start latency: each kernel starts a median {duration(split.latency_p50_ns)} after "
            f"its launch call returned, with the device empty ({spread}) and no wait call in the "
            f"capture{outside}")


def cause_detail(dev, cause: str, family) -> str:
    """What the capture adds to a cause: the NVTX kind of cpu_work and what the launching thread did in it, the
    part of `dependency` that leads, the migrations behind memcpy (or behind any cause when they matter:
    migrations_matter)."""
    detail = kind_detail(dev, family) + host_detail(dev) if cause == "cpu_work" else ""
    if cause == "dependency":
        detail = dependency_detail(dev)
    if cause in ("memcpy", "transfer") or migrations_matter(dev):
        detail += migration_detail(dev)
    return detail


def find(f) -> list[Item]:
    out = []
    ov = f.rows("overview")
    window = duration(f.window_ns)
    for d, dev in f.rows("gpu_gaps").items():
        o = ov.get(d)
        if o is None or not o.kernel_count or o.kernel_busy_pct >= HEALTHY_MIN_KERNEL_BUSY_PCT:
            continue
        cause = dev.dominant_cause or "unknown"
        sev = loss_severity(dev.kernel_idle_pct)  # the sentence opens with lead_words(dev.kernel_idle_pct)
        figures = {"gpu": d, "kernel_idle_pct": dev.kernel_idle_pct, "kernel_idle_ns": dev.kernel_idle_ns,
                   "kernel_busy_pct": o.kernel_busy_pct,
                   "dominant_cause": cause, "cause_pct": dev.cause_pct.get(cause), "cause_ns": dev.causes.get(cause)}
        head = f"GPU {d} is kernel-idle {percent(dev.kernel_idle_pct)} of the {window} window"
        if tail_explains(dev):
            t = dev.tail
            figures.update(tail_ns=t.duration_ns, tail_memory_ns=t.memory_ns, tail_migration_ns=t.migration_ns)
            if t.other_gpus_kernel_ns is not None:
                figures["tail_other_gpus_kernel_ns"] = t.other_gpus_kernel_ns
            named = tail_fillers(dev, f.multi_gpu)
            if named:
                figures.update(tail_filler=named[0][0], tail_filler_ns=named[0][2], tail_filler_call=named[0][3])
            sentence = (f"{LEAD[sev]}: {head}; {duration(t.duration_ns)} of it is the tail after its last kernel, "
                        "filled by "
                        f"{tail_fill(dev, f.multi_gpu)}.")
            title = f"GPU {d} kernel-idle {percent(dev.kernel_idle_pct)} of the window, mostly its tail"
            item_advice, saving, cause_key = tail_advice(f, dev), tail_saving(dev, f.multi_gpu), "tail"
            if saving < t.duration_ns:  # output I/O: the severity is what the GPU could win
                sev = min(sev, loss_severity(share(saving, f.window_ns)), key=SEVERITIES.index)
                figures["saving_basis"] = "the tail without its output I/O (the GPU cannot win that)"
        else:
            detail = cause_detail(dev, cause, f.family)
            sentence = (f"{LEAD[sev]}: {head}, {said(dev, cause, f.family)}: `{cause}` is "
                        f"{percent(dev.cause_pct.get(cause))} of the kernel-idle time{led_by(dev)}{detail}.")
            lead = "mostly" if dev.cause_pct.get(cause, 0) >= 50 else "the largest cause"
            title = f"GPU {d} kernel-idle {percent(dev.kernel_idle_pct)} of the window, {lead} `{cause}`"
            saving = min(dev.causes.get(cause, 0) - impact.one_off_ns(f, dev, cause), copy_fix_ns(f, dev, cause))
            item_advice, cause_key = cause_advice(f, dev, cause), cause
            if cause == "dependency" and dev.dependency_split is not None:
                saving = dependency_figures(dev, figures)
                title += f" ({causes.PART_NAMES[figures['dependency_part']]})"
            if led_by(dev):
                figures["led_by"] = top_api(dev, sync=cause == "sync_wait")
            host = advice.host_cause(dev) if cause == "cpu_work" else None
            if host is not None:
                figures.update(host_state=host[0], host_ns=host[2])
                if host[1]:
                    figures["host_name"] = host[1]
        out.append(Item("idle", d, sev, saving, figures, [f.ev("gpu_gaps"), f.ev("overview")], title, sentence,
                        item_advice, cause=cause_key, extra={"kernel_idle_pct": dev.kernel_idle_pct, "dev": dev}))
    return out


def waits_on_copies(f, dev, cause: str) -> bool:
    """The GPU's ``cause`` time is spent on copies: ``memcpy`` that is not mostly migrations; ``cuda_api`` led by a
    memcpy call; or a host wait (``sync_wait``, ``cuda_api``) while the device copies — its copy time outside
    kernels (memcpy ``exposed_copy_ns``) at least half the cause's time. Readbacks (a flag read back) are not copies
    to speed up (practices.readback)."""
    if cause in ("memcpy", "transfer"):
        return 2 * dev.migration_ns < dev.causes.get(cause, 0)
    if cause not in ("cuda_api", "sync_wait") or practices.readback(f, dev.device_id) is not None:
        return False
    if cause == "cuda_api" and "Memcpy" in (top_api(dev, sync=False) or ""):
        return True
    mc = f.device("memcpy", dev.device_id)
    return mc is not None and 2 * mc.exposed_copy_ns >= dev.causes.get(cause, 0) > 0


def copy_fix_ns(f, dev, cause: str) -> int:
    """What the copy remedy the advice offers would save when the cause is copies (waits_on_copies): the idle time is
    the upper bound, the remedy's saving the part a fix wins (remedies.copies). Otherwise no bound."""
    fix = remedies.copies(f, dev.device_id)[1] if waits_on_copies(f, dev, cause) else None
    return fix if fix is not None else NO_BOUND


def dependency_figures(dev, figures: dict) -> int:
    """Adds the leading part of `dependency` and its figures to ``figures``; returns that part's ns (the saving:
    the time of the cause the finding names)."""
    split, part = dev.dependency_split, advice.dependency_part(dev)
    ns = {"launch_latency": split.launch_latency_ns, "wait": split.wait_ns, "turnaround": split.turnaround_ns}[part]
    figures.update(dependency_part=part, part_ns=ns)
    if part == "launch_latency":
        figures.update(latency_p10_ns=split.latency_p10_ns, latency_p50_ns=split.latency_p50_ns,
                       latency_p90_ns=split.latency_p90_ns)
    call = advice.wait_call(split) if part == "wait" else None
    if call is not None:
        figures.update(wait_call=call[0], wait_calls=call[1])
    return ns


def cause_outside_tail(dev) -> str | None:
    """The largest cause of the idle time outside the tail (the tail's time is ``transfer`` while its GPU copies,
    else ``unknown``), or None."""
    rest, t = dict(dev.causes), dev.tail
    rest["transfer"] = max(0, rest.get("transfer", 0) - t.memory_ns)
    rest["unknown"] = max(0, rest.get("unknown", 0) - (t.duration_ns - t.memory_ns))
    best = max(sorted(rest), key=lambda c: rest[c])
    return best if rest[best] > 0 else None


def tail_advice(f, dev) -> str:
    """Advice for a GPU whose idle time is mostly its tail: for the cause of the other gaps when they lose more
    than the tail, else for what fills most of the tail (tail_fillers' lead); when nothing fills enough of it,
    for the cause of the other gaps (or, without one, what the program does after its last kernel)."""
    t = dev.tail
    other = cause_outside_tail(dev)
    known = other is not None and other not in UNLAUNCHED
    if known and dev.causes[other] > t.duration_ns:
        return cause_advice(f, dev, other)  # the other gaps lose more than the tail
    named = tail_fillers(dev, f.multi_gpu)
    if not named and known:
        return cause_advice(f, dev, other)
    return advice.tail(f, named[0][0] if named else None, named[0][3] if named else None)


def tail_saving(dev, multi_gpu: bool) -> int:
    """What a fix could save of the tail: all of it, but for output I/O at teardown (tail_fillers' lead
    ``output``), which the GPU cannot win: the rest of the tail."""
    named = tail_fillers(dev, multi_gpu)
    if named and named[0][0] == "output":
        return dev.tail.duration_ns - named[0][2]
    return dev.tail.duration_ns


def cause_advice(f, dev, cause: str) -> str:
    if cause in ("sync_wait", "cuda_api") and waits_on_copies(f, dev, cause):
        return advice.host_copies(f, dev.device_id)
    if cause == "cpu_work":
        return advice.cpu_work(f, dev)
    if cause == "sync_wait":
        return advice.sync_wait(f, top_api(dev, sync=True))
    if cause == "cuda_api":
        return advice.cuda_api(f, top_api(dev, sync=False), dev.device_id)
    if cause == "launch_overhead":
        ll = f.device("launch_latency", dev.device_id)
        if ll is not None and ll.launch_call_ns and 2 * ll.first_launch_ns >= ll.launch_call_ns:
            return advice.startup(f)
        return advice.launches(f)
    if cause in ("memcpy", "transfer"):
        if 2 * dev.migration_ns >= dev.causes.get(cause, 0):  # the copies are page migrations
            return advice.migrations(f)
        return advice.queued_copies(f, dev.device_id)
    if cause == "dependency":
        return advice.dependency(f, dev)
    return advice.unknown(f)


def group_sentence(items: list[Item], gpus_words: str, window: str, f) -> str:
    """The lead sentence for several GPUs idle for the same cause and severity (figures of the worst)."""
    w = items[0]
    fig, cause = w.figures, w.cause
    lead = lead_words(fig["kernel_idle_pct"])  # how idle, not how much a fix saves (the finding's severity)
    if cause == "tail":
        return (f"{lead}: {gpus_words} are kernel-idle up to {percent(fig['kernel_idle_pct'])} of the {window} window "
                f"(GPU {w.gpu} the most), mostly in their tails after their last kernels.")
    dev = w.extra["dev"]
    return (f"{lead}: {gpus_words} are kernel-idle up to {percent(fig['kernel_idle_pct'])} of the {window} window "
            f"(GPU {w.gpu} the most), {said(dev, cause, f.family)}: `{cause}` is "
            f"{percent(fig['cause_pct'])} of the kernel-idle time of GPU {w.gpu}{led_by(dev)}"
            f"{cause_detail(dev, cause, f.family)}.")
