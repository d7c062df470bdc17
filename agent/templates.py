"""Answer templates of the offline planner: one function per intent.

Each template takes a ``Ctx`` and returns the answer text. It asks for the tool results it
needs with ``ctx.call(tool, **args)`` (recorded as tool calls and evidence, identical calls
run once), so a later call can depend on an earlier result (the step window, the idlest GPU).

Every number written comes from a tool result, only reformatted: ns as ms (s at 10 s and
above, µs under 0.1 ms) with at most 3 decimals, percentages with 1 decimal, bytes as KB/MB/GB.
Nothing is added, subtracted or summed for the text; comparisons that decide a wording are
made on the numbers but never printed. Profile names are shown in backticks.
"""
from __future__ import annotations

import re

from dashcam.errors import NO_GPU_ACTIVITY_NOTE, DashcamError, NoGpuActivity

from .models import Evidence, Targets, ToolCall

CPU_SIDE = ("sync_wait", "cuda_api", "launch_overhead", "cpu_work")
DEVICE_SIDE = ("memcpy", "dependency")
# A GPU whose kernels cover at least this % of the window is mostly busy: its time goes to kernels.
MOSTLY_BUSY_PCT = 70.0
# "healthy" needs every GPU at least this kernel busy and no other flag.
HEALTHY_BUSY_PCT = 90.0
# The slowest step is called an outlier at this ratio to the median or above.
OUTLIER_RATIO = 1.2
MAX_NAME = 80
_WHY = re.compile(r"\bwhy\b|\bwhat (?:makes|made|causes|caused)\b|\bcause[sd]?\b|\breasons?\b|\bexplain",
                  re.IGNORECASE)

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

CAUSE_WORDS = {
    "sync_wait": "blocked in synchronize calls",
    "cuda_api": "inside other CUDA API calls",
    "launch_overhead": "inside the kernel launch calls themselves",
    "cpu_work": "busy on the CPU outside CUDA (Python, data loading)",
    "memcpy": "queued behind copies on the device",
    "dependency": "waiting on a dependency (an event, another stream or GPU)",
    "unknown": "unattributed (no launch call in the capture)",
}

ADVICE = {
    "sync_wait": "Remove synchronizations the loop does not need (`.item()`, `.cpu()`, printing tensors) "
                 "or wait on CUDA events instead.",
    "memcpy_api": "Copy from pinned memory (`pin_memory=True`) with `cudaMemcpyAsync` (`non_blocking=True`) "
                  "so the copy stops blocking the launching thread.",
    "malloc_api": "Stop allocating in the loop: use a caching allocator or preallocate the buffers.",
    "cuda_api": "Take those calls off the launching thread's critical path, or make them less often.",
    "launch_overhead": "Cut launch overhead with CUDA graphs (or `torch.compile`) and by fusing small kernels.",
    "cpu_work": "Profile the Python side (a CPU profiler or NVTX ranges) and give the dataloader more workers "
                "so the GPU is fed sooner.",
    "memcpy": "Overlap copies with compute on a separate stream and copy from pinned memory.",
    "dependency": "Check the cross-stream and event waits (`cudaStreamWaitEvent`) and the other GPUs this one "
                  "waits on.",
    "unknown": "Capture with CUDA API tracing (`nsys profile -t cuda,nvtx`) so the gaps can be attributed.",
    "launch_bound": "Launch fewer, larger kernels: CUDA graphs or `torch.compile`, fused kernels, larger batches.",
    "transfer": "Overlap copies with compute on separate streams, keep data on the GPU, and use pinned memory.",
    "small": "Fuse or batch the small kernels so each launch fills the GPU.",
    "nccl": "Overlap communication with compute (gradient bucketing, asynchronous collectives).",
    "kernel": "Speed up that kernel first (its launch configuration, precision, a fused or library version).",
    "tail": "Balance the work across GPUs (pipeline stages, data shards) so this GPU does not finish early and "
            "wait for the others.",
}


class StepNotFound(DashcamError):
    """The question names a step the profile does not have."""


class Ctx:
    """What a template needs: the profile, the targets, and a recorder of tool calls."""

    def __init__(self, profile, targets: Targets, question: str = "") -> None:
        self.profile = profile
        self.targets = targets
        self.question = question
        self.tool_calls: list[ToolCall] = []
        self.evidence: list[Evidence] = []
        self.notes: list[str] = []
        self._cache: dict[str, dict] = {}
        self._win: dict | None = None

    def call(self, tool: str, **args) -> dict:
        """Run ``tool`` (None args dropped) and return its result dict; identical calls run once."""
        from .toolbox import run_tool

        args = {k: v for k, v in args.items() if v is not None}
        key = f"{tool}:{sorted(args.items())!r}"
        if key not in self._cache:
            self.tool_calls.append(ToolCall(name=tool, args=args))
            ev = run_tool(self.profile, tool, args)
            self.evidence.append(ev)
            self._cache[key] = ev.result
            for n in ev.result.get("notes") or []:
                if n.startswith("No ") and n not in self.notes:
                    self.notes.append(n)
        return self._cache[key]

    def note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)

    @property
    def gpus(self) -> list[int | None]:
        """The GPUs to ask about: each named one, or None (all)."""
        return list(dict.fromkeys(self.targets.gpus)) or [None]

    @property
    def win(self) -> dict:
        """Window args: the asked window, else the asked step's window, else {} (the whole profile)."""
        if self._win is None:
            self._win = self.targets.window_args()
            if not self._win and self.targets.step is not None:
                self._win = step_window(self, self.targets.step)
        return self._win

    @property
    def whole_profile(self) -> bool:
        return not self.win


# -- formatting -----------------------------------------------------------------

def _trim(x: float, decimals: int = 3) -> str:
    s = f"{x:.{decimals}f}"
    if "." in s:
        s = s.rstrip("0").rstrip(".")
    return "0" if s in ("-0", "") else s


def t(ns: float | None) -> str:
    """A duration in ns as ms (s at 10 s and above, µs below 0.1 ms), at most 3 decimals."""
    if ns is None:
        return "-"
    v = float(ns)
    if v == 0:
        return "0 ms"
    if abs(v) >= 10e9:
        return f"{_trim(v / 1e9)} s"
    if abs(v) >= 1e5:
        return f"{_trim(v / 1e6)} ms"
    return f"{_trim(v / 1e3)} µs"


def at(ms: float) -> str:
    """A time stamp already in ms from the start of GPU activity."""
    return f"{_trim(ms)} ms"


def p(v: float | None) -> str:
    return "-" if v is None else f"{v:.1f} %"


def size(nbytes: int) -> str:
    v = float(nbytes)
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if abs(v) >= scale:
            return f"{_trim(v / scale, 2)} {unit}"
    return f"{int(v)} bytes"


def name(s: str | None) -> str:
    """Profile text in backticks, cut to a readable length."""
    s = (s or "?").replace("`", "'").replace("\n", " ")
    if len(s) > MAX_NAME:
        s = s[: MAX_NAME - 1] + "…"
    return f"`{s}`"


def n(count: int, word: str, plural: str | None = None) -> str:
    """ "1 launch", "2 launches"."""
    return f"{count} {word if count == 1 else plural or word + 's'}"


def ids(values: list[int]) -> str:
    """GPU ids as "0", "0 and 1", "0, 1 and 2"."""
    v = [str(x) for x in values]
    return v[0] if len(v) == 1 else ", ".join(v[:-1]) + " and " + v[-1]


def window_words(result: dict, whole: bool) -> str:
    """ "the 117.59 ms window" or "the 20 ms window from 10 ms to 30 ms"."""
    w = result["window"]
    if whole:
        return f"the {t(w['length_ns'])} window"
    return f"the {t(w['length_ns'])} window from {at(w['start_ms'])} to {at(w['end_ms'])}"


def sentences(*parts: str | None) -> str:
    return " ".join(x.strip() for x in parts if x)


def devices_of(results: list[dict], key: str = "devices") -> list[dict]:
    """Device rows of several per-GPU results, one per device, in order."""
    seen, out = set(), []
    for r in results:
        for d in r.get(key) or []:
            if d["device_id"] not in seen:
                seen.add(d["device_id"])
                out.append(d)
    return out


def calls_per_gpu(ctx: Ctx, tool: str, **args) -> list[dict]:
    return [ctx.call(tool, gpu=g, **ctx.win, **args) for g in ctx.gpus]


# -- idle time: shared by several intents ------------------------------------------

def _is_sync(api: str) -> bool:
    return "Synchronize" in api


def top_api(dev: dict, sync: bool) -> str | None:
    """The API name (synchronize calls, or the others) with the most time in the device's gaps."""
    per = dev["cuda_api_calls"]
    total = {api: ns for api, ns in per.items() if _is_sync(api) == sync and ns > 0}
    return max(total, key=lambda a: (total[a], a)) if total else None


def led_by(dev: dict) -> str:
    """ ", led by `cudaMemcpy`": the API behind a cuda_api or sync_wait dominant cause, else ""."""
    cause = dev.get("dominant_cause")
    api = top_api(dev, sync=cause == "sync_wait") if cause in ("cuda_api", "sync_wait") else None
    return f", led by {name(api)}" if api else ""


def tail_gap(dev: dict, result: dict) -> dict | None:
    """The device's tail among its largest gaps: a gap running to the window end with no kernel after it
    (no kernel_after, no launch_call), i.e. the GPU had finished its last kernel. None if not listed."""
    end = result["window"]["end_ns"]
    return next((g for g in dev.get("largest_gaps") or []
                 if g["end_ns"] == end and g.get("kernel_after") is None and g.get("launch_call") is None), None)


def _tail_explains(dev: dict, tail: dict | None) -> bool:
    """The answer should lead with the tail: `unknown` is the dominant cause and the tail holds at least
    half of it (a decision, never printed), so "capture with API tracing" would be the wrong advice."""
    return (tail is not None and dev.get("dominant_cause") == "unknown"
            and 2 * tail["causes"].get("unknown", 0) >= dev["causes"]["unknown"])


def _cause_outside_tail(dev: dict, tail: dict) -> str | None:
    """The largest cause of the idle time outside the tail (compared, never printed), None if the tail is all."""
    rest = {c: ns - tail["causes"].get(c, 0) for c, ns in dev["causes"].items()}
    best = max(sorted(rest), key=lambda c: rest[c])
    return best if rest[best] > 0 else None


def advice_for(dev: dict, result: dict | None = None) -> str:
    """What to try for the device's main cause of idle time; with ``result`` (its gpu_gaps result) a tail
    that explains the idle time is set aside: the advice is for the cause of the other gaps."""
    cause = dev.get("dominant_cause") or "unknown"
    if result is not None:
        tail = tail_gap(dev, result)
        if _tail_explains(dev, tail):
            cause = _cause_outside_tail(dev, tail) or "tail"
    if cause == "cuda_api":
        api = top_api(dev, sync=False) or ""
        if "Memcpy" in api:
            return ADVICE["memcpy_api"]
        if any(x in api for x in ("Malloc", "MemAlloc", "Free")):
            return ADVICE["malloc_api"]
    return ADVICE[cause]


def _tail_sentences(dev: dict, tail: dict, result: dict, whole: bool, head: str) -> list[str]:
    """Idle time led by the tail: the GPU finished its last kernel and waited for the window to end."""
    gid = dev["device_id"]
    largest = (dev.get("largest_gaps") or [None])[0] is tail
    gap = f"{t(tail['duration_ns'])} at {at(tail['start_ms'])}"
    which = (f"{'The only gap' if dev['gap_count'] == 1 else 'The largest gap'}, {gap}, is its tail" if largest
             else f"Its tail is {gap}")
    last = f" ({name(tail['kernel_before'])})" if tail.get("kernel_before") else ""
    still = " while other GPU work was still running" if whole else ""
    out = [f"{head}.",
           f"{which}: GPU {gid} finished its last kernel{last} early and sat idle until the end of the "
           f"window{still}."]
    cause = _cause_outside_tail(dev, tail)
    if cause is None:
        return out
    if tail["causes"].get(cause, 0) == 0:  # the device total is the time outside the tail: printable
        led = led_by({**dev, "dominant_cause": cause})
        mostly = 2 * dev["causes"][cause] >= dev["idle_ns"] - tail["duration_ns"]  # a wording choice, not printed
        lead = "The rest of its idle time is mostly" if mostly else "The largest cause of the rest is"
        out.append(f"{lead} `{cause}`: {t(dev['causes'][cause])} "
                   f"({p(dev['cause_pct'][cause])} of idle: {CAUSE_WORDS[cause]}){led}.")
    else:
        out.append(f"Its other gaps are mostly `{cause}` too ({CAUSE_WORDS[cause]}).")
    return out


def idle_sentences(dev: dict, result: dict, whole: bool, advice: bool = True,
                   head: str | None = None) -> list[str]:
    """Idle time of one device (a gpu_gaps row): the amount, the main cause, the largest gap, what to try.

    ``head`` replaces the opening "GPU 1 was idle 69.59 ms (59.2 % of the 117.59 ms window)". A tail gap
    (the GPU done with its kernels before the window ends) that explains the idle time is described as
    such, with the cause of the other gaps, instead of as `unknown` time."""
    gid = dev["device_id"]
    head = head or (f"GPU {gid} was idle {t(dev['idle_ns'])} ({p(dev['idle_pct'])} of "
                    f"{window_words(result, whole)})")
    if dev["idle_ns"] <= 0 or not dev.get("dominant_cause"):
        return [f"GPU {gid} was never idle: its kernels cover all of {window_words(result, whole)}."]
    tail = tail_gap(dev, result)
    if _tail_explains(dev, tail):
        out = _tail_sentences(dev, tail, result, whole, head)
        if advice:
            out.append(advice_for(dev, result))
        return out
    cause = dev["dominant_cause"]
    share = dev["cause_pct"][cause]
    side = ("waiting on the CPU" if cause in CPU_SIDE else
            "waiting on the device" if cause in DEVICE_SIDE else "for reasons the capture does not show")
    led = led_by(dev)
    what = f"`{cause}` {t(dev['causes'][cause])} ({p(share)} of idle: {CAUSE_WORDS[cause]}){led}"
    if share >= 50:
        first = f"{head}, mostly {side}: {what}."
    else:
        rest = sorted((c for c in dev["causes"] if c != cause and dev["causes"][c] > 0),
                      key=lambda c: -dev["causes"][c])
        then = f", then `{rest[0]}` {t(dev['causes'][rest[0]])} ({p(dev['cause_pct'][rest[0]])})" if rest else ""
        first = f"{head}; the largest cause is {side}: {what}{then}."
    out = [first]
    gaps = dev.get("largest_gaps") or []
    if gaps:
        g = gaps[0]
        where = f" inside {name(g['nvtx_range'])}" if g.get("nvtx_range") else ""
        ended = (f"ended when {name(g['kernel_after'])} started" if g.get("kernel_after")
                 else "ran to the end of the window")
        calls = g.get("cuda_api_calls") or {}
        if g is tail:
            last = f" ({name(g['kernel_before'])})" if g.get("kernel_before") else ""
            detail = f"; it is the GPU's tail, after its last kernel{last}"
        elif calls:
            api_name = max(calls, key=lambda a: (calls[a], a))
            detail = f"; {t(calls[api_name])} of it was in {name(api_name)}"
        else:
            detail = f"; mostly `{g['dominant_cause']}`"
        if len(gaps) > 1 or dev["gap_count"] > 1:
            out.append(f"The largest gap, {t(g['duration_ns'])} at {at(g['start_ms'])}{where}, {ended}{detail}.")
        else:
            out.append(f"The only gap, {t(g['duration_ns'])} at {at(g['start_ms'])}{where}, {ended}{detail}.")
    if advice:
        out.append(advice_for(dev, result))
    return out


def idle_cause(dev: dict, result: dict, whole: bool, head: str, of: str) -> list[str]:
    """One sentence on a device's idle time and its main cause ("GPU 1 was idle 6 ms, mostly `cpu_work`
    (90.0 % of its idle: ...)"), or the tail sentences when a tail explains the idle time."""
    tail = tail_gap(dev, result)
    if _tail_explains(dev, tail):
        return _tail_sentences(dev, tail, result, whole, head)
    cause = dev["dominant_cause"]
    return [f"{head}, mostly `{cause}` ({p(dev['cause_pct'][cause])} of {of}: {CAUSE_WORDS[cause]}){led_by(dev)}."]


def idlest(devs: list[dict]) -> dict:
    return max(devs, key=lambda d: (d["idle_ns"], -d["device_id"]))


# -- intents ------------------------------------------------------------------------

def idle(ctx: Ctx) -> str:
    results = calls_per_gpu(ctx, "gpu_gaps")
    devs = devices_of(results)
    main = idlest(devs)
    out = idle_sentences(main, results[0], ctx.whole_profile)
    others = [d for d in devs if d is not main]
    at_end = len(out) - 1 if main["idle_ns"] > 0 else len(out)  # before the advice
    if others and len(others) <= 3:
        out.insert(at_end, "For comparison, " + "; ".join(
            f"GPU {d['device_id']} was idle {t(d['idle_ns'])} ({p(d['idle_pct'])})" for d in others) + ".")
    elif others:
        out.insert(at_end, f"It is the idlest of the {len(devs)} GPUs.")
    return sentences(*out)


def slow(ctx: Ctx) -> str:
    ov = calls_per_gpu(ctx, "overview")
    devs = devices_of(ov)
    focus = min(devs, key=lambda d: (d["kernel_busy_pct"], d["device_id"]))
    gid = focus["device_id"]
    gaps = ctx.call("gpu_gaps", gpu=gid, **ctx.win)
    gdev = gaps["devices"][0]
    if focus["kernel_busy_pct"] >= MOSTLY_BUSY_PCT:
        top = ctx.call("top_kernels", gpu=gid, limit=5, **ctx.win)
        why = "so the time goes to the kernels themselves"
        who = (f"The GPUs are mostly busy, {why}: even the least busy, GPU {gid}," if len(devs) > 1 else
               f"GPU {gid} is mostly busy, {why}: it")
        out = [f"{who} runs kernels {p(focus['kernel_busy_pct'])} of {window_words(ov[0], ctx.whole_profile)}."]
        if top["kernels"]:
            k = top["kernels"][0]
            out.append(f"The top kernel is {name(k['name'])}: {t(k['total_ns'])} over "
                       f"{n(k['count'], 'launch', 'launches')}, {p(k['pct'])} of GPU {gid}'s kernel time.")
            out.append(ADVICE["kernel"])
        if gdev["idle_ns"] > 0 and gdev.get("dominant_cause"):
            out.append(f"The remaining idle time, {t(gdev['idle_ns'])}, is mostly `{gdev['dominant_cause']}`.")
        return sentences(*out)
    out = [f"GPU {gid} is mostly idle, not slowed by its kernels: they run only {p(focus['kernel_busy_pct'])} "
           f"of {window_words(ov[0], ctx.whole_profile)}."]
    out += idle_sentences(gdev, gaps, ctx.whole_profile, advice=False, head=f"It was idle {t(gdev['idle_ns'])}")
    if gdev.get("dominant_cause") in ("launch_overhead", "cpu_work"):
        ll = ctx.call("launch_latency", gpu=gid, **ctx.win)
        d = ll["devices"][0]
        if d.get("launch_bound"):
            out.append(f"GPU {gid} is launch-bound: its median kernel ({t(d['median_kernel_ns'])}) is shorter "
                       f"than the median launch call ({t(d['api_p50_ns'])}).")
    out.append(advice_for(gdev, gaps))
    return sentences(*out)


def top_kernels(ctx: Ctx) -> str:
    kernel = ctx.targets.kernel
    results = calls_per_gpu(ctx, "top_kernels", name_contains=kernel, limit=5)
    out = []
    for gpu, r in zip(ctx.gpus, results):
        scope = "" if gpu is None else f" on GPU {gpu}"
        if r["kernel_count"] == 0:
            out.append(f"No kernels ran{scope} in {window_words(r, ctx.whole_profile)}.")
            continue
        if kernel is not None:
            if not r.get("matched_count"):
                out.append(f"No kernel name contains {name(kernel)}{scope}; {n(r['kernel_count'], 'kernel')} ran in "
                           f"{window_words(r, ctx.whole_profile)}.")
                continue
            out.append(f"Kernels matching {name(kernel)}{scope}: {n(r['matched_count'], 'launch', 'launches')}, "
                       f"{t(r['matched_ns'])}, {p(r['matched_pct'])} of the {t(r['total_kernel_ns'])} of kernel time.")
        rows = r["kernels"][:3]
        listed = ", ".join(f"{name(k['name'])} {t(k['total_ns'])} ({p(k['pct'])}, "
                           f"{n(k['count'], 'launch', 'launches')})" for k in rows)
        if kernel is None:
            out.append(f"The top kernels{scope} by GPU time, of {t(r['total_kernel_ns'])} summed over "
                       f"{n(r['kernel_count'], 'kernel')}: {listed}.")
        elif len(rows) > 1:
            out.append(f"By name: {listed}.")
    if kernel is None and any(r["kernel_count"] for r in results):
        out.append("Percentages are of summed kernel time (concurrent kernels each count).")
    return sentences(*out)


def _gbps(row: dict) -> str:
    """ " at 12.0 GB/s" for a copy row with a rate (3 decimals under 0.05 GB/s), else ""."""
    g = row.get("gbps")
    if not g or _trim(g) == "0":
        return ""
    return f" at {g:.1f} GB/s" if g >= 0.05 else f" at {_trim(g)} GB/s"


def copy_kinds(r: dict) -> str:
    """ ": 10 HtoD (360 MB at 12.0 GB/s) and 10 DtoH (120 MB at 12.0 GB/s)": bytes and rate per copy
    kind present (memcpy by_kind, pinned and pageable copies together)."""
    kinds = [k for k in r.get("by_kind") or [] if k["count"]]
    if not kinds:
        return ""
    parts = [f"{k['count']} {k['kind']} ({size(k['bytes'])}{_gbps(k)})" for k in kinds]
    return ": " + (parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1])


def memcpy(ctx: Ctx) -> str:
    results = calls_per_gpu(ctx, "memcpy")
    out = []
    for r in results:
        devs = r["devices"]
        if r["copy_count"] == 0:
            which = f" on GPU {ids([d['device_id'] for d in devs])}" if ctx.targets.gpus else ""
            out.append(f"There are no memory copies{which} in {window_words(r, ctx.whole_profile)}.")
            continue
        bound = [d for d in devs if d["transfer_bound"]]
        if bound:
            d = max(bound, key=lambda x: x["memory_busy_pct"])
            out.append(f"GPU {d['device_id']} is transfer-bound: copies and memsets keep it busy "
                       f"{p(d['memory_busy_pct'])} of {window_words(r, ctx.whole_profile)}, more than its kernels "
                       f"({p(d['kernel_busy_pct'])}).")
        else:
            d = max(devs, key=lambda x: (x["memory_busy_pct"], -x["device_id"]))
            who = "No GPU is" if len(devs) > 1 else f"GPU {d['device_id']} is not"
            out.append(f"{who} transfer-bound: copies keep GPU {d['device_id']} busy {p(d['memory_busy_pct'])} of "
                       f"{window_words(r, ctx.whole_profile)} (kernels {p(d['kernel_busy_pct'])}).")
        pageable = [h for h in r["host_memory"] if h["host_mem"] == "pageable" and h["count"]]
        line = f"{n(r['copy_count'], 'copy', 'copies')} moved {size(r['copy_bytes'])}" + copy_kinds(r)
        h = max(pageable, key=lambda x: x["total_ns"]) if pageable else None
        # pageable copies matter when they take 1 % of the window or more (a wording choice, not printed)
        pageable_matters = bool(h) and h["total_ns"] * 100 >= r["window"]["length_ns"]
        if h:
            rate = _gbps(h)
            line += (f"; {n(h['count'], h['kind'] + ' copy', h['kind'] + ' copies')} ({size(h['bytes'])}, "
                     f"{t(h['total_ns'])}) came from pageable host memory{rate}")
        out.append(line + ".")
        if r["sync_copy_calls"]:
            top = r["sync_by_api"][0]
            out.append(f"{top['calls']} synchronous {name(top['api'])} call{'' if top['calls'] == 1 else 's'} "
                       f"blocked the host for {t(top['blocked_ns'])}.")
        if r["pre_kernel_stall_count"]:
            s = r["pre_kernel_stalls"][0]
            mem = " pageable" if s.get("pageable") else " pinned" if s.get("pageable") is False else ""
            out.append(f"{n(r['pre_kernel_stall_count'], 'HtoD copy', 'HtoD copies')} stalled the GPU before its "
                       "next kernel, "
                       f"{t(r['pre_kernel_stall_ns'])} in all; the largest, a{mem} {t(s['duration_ns'])} copy of "
                       f"{size(s['bytes'])} at {at(s['start_ms'])} on GPU {s['device_id']}, held back "
                       f"{name(s['next_kernel'])}.")
        if pageable_matters or r["sync_copy_calls"]:
            out.append(ADVICE["memcpy_api"])
        elif bound or r["pre_kernel_stall_count"]:
            out.append(ADVICE["transfer"])
    return sentences(*out)


def launch(ctx: Ctx) -> str:
    results = calls_per_gpu(ctx, "launch_latency", kernel=ctx.targets.kernel)
    devs = devices_of(results)
    with_calls = [d for d in devs if d.get("launch_bound") is not None]
    out = []
    if not with_calls:
        ctx.note("No kernel has a launch call in the capture: the launch-bound verdict needs CUDA API rows.")
        out.append("No verdict: no kernel in the window has a launch call in the capture, so launch times "
                   "cannot be measured.")
    else:
        bound = [d for d in with_calls if d["launch_bound"]]
        d = (min(bound, key=lambda x: (x["kernel_busy_pct"], x["device_id"])) if bound
             else min(with_calls, key=lambda x: (x["kernel_busy_pct"], x["device_id"])))
        gid = d["device_id"]
        if d["launch_bound"]:
            out.append(f"GPU {gid} is launch-bound: its kernels run only {p(d['kernel_busy_pct'])} of the window, "
                       f"start a median {t(d['queue_p50_ns'])} after their launch call returns, and the median "
                       f"kernel ({t(d['median_kernel_ns'])}) is shorter than the median launch call "
                       f"({t(d['api_p50_ns'])}).")
        else:
            reasons = []
            if d["kernel_busy_pct"] >= MOSTLY_BUSY_PCT:
                reasons.append(f"its kernels run {p(d['kernel_busy_pct'])} of the window")
            if d["queue_p50_ns"] is not None and d["queue_p50_ns"] >= 10_000:
                reasons.append(f"kernels wait a median {t(d['queue_p50_ns'])} after their launch call returns "
                               "(work is queued ahead of them)")
            if d["median_kernel_ns"] is not None and d["api_p50_ns"] is not None \
                    and d["median_kernel_ns"] >= d["api_p50_ns"]:
                reasons.append(f"the median kernel ({t(d['median_kernel_ns'])}) outlasts the median launch call "
                               f"({t(d['api_p50_ns'])})")
            if len(with_calls) > 1 and not ctx.targets.gpus:
                why = f": on GPU {gid}, " + "; ".join(reasons) if reasons else ""
                out.append(f"No GPU is launch-bound{why}.")
            else:
                out.append(f"GPU {gid} is not launch-bound" + (": " + "; ".join(reasons) if reasons else "") + ".")
        gaps = ctx.call("gpu_gaps", gpu=gid, **ctx.win)["devices"][0]
        if gaps["idle_ns"] > 0:
            lo, cw = gaps["causes"]["launch_overhead"], gaps["causes"]["cpu_work"]
            out.append(f"Of GPU {gid}'s {t(gaps['idle_ns'])} idle time, `launch_overhead` is {t(lo)} "
                       f"({p(gaps['cause_pct']['launch_overhead'])}) and `cpu_work` {t(cw)} "
                       f"({p(gaps['cause_pct']['cpu_work'])}); it issues {_trim(d['launches_per_s'], 1)} launches/s.")
        if d["launch_bound"]:
            out.append(ADVICE["launch_bound"])
    for r in results:
        if r.get("kernel_filter") is not None:
            if not r.get("kernel_matches"):
                out.append(f"No kernel name contains {name(r['kernel_filter'])} in the window.")
            elif r["launchers"]:
                x = r["launchers"][0]
                rng = f" inside {name(x['nvtx_range'])}" if x.get("nvtx_range") else ""
                thread = f" ({name(x['thread_name'])})" if x.get("thread_name") else ""
                out.append(f"{name(r['kernel_filter'])} matched {n(r['kernel_matches'], 'kernel')}; most "
                           f"({x['launches']}) were launched by thread {x['tid']}{thread} of process {x['pid']}{rng}.")
    return sentences(*out)


def sync(ctx: Ctx) -> str:
    results = calls_per_gpu(ctx, "sync")
    out = []
    for r in results:
        if not r["calls"]:
            out.append(f"No host thread called a CUDA synchronize function in "
                       f"{window_words(r, ctx.whole_profile)}.")
            continue
        c = r["calls"][0]
        if c["threads"] == 1:
            blocked = (f"A host thread was blocked in {name(c['name'])} for {t(c['total_ns'])} "
                       f"({p(c['pct_of_window'])} of {window_words(r, ctx.whole_profile)})")
        else:
            blocked = (f"Host threads were blocked in {name(c['name'])} for {t(c['total_ns'])} summed over "
                       f"{c['threads']} threads (in {window_words(r, ctx.whole_profile)})")
        out.append(f"{blocked}: {n(c['count'], 'call')}, the longest {t(c['max_ns'])}.")
        if len(r["calls"]) > 1:
            c2 = r["calls"][1]
            out.append(f"Next is {name(c2['name'])} with {t(c2['total_ns'])} over {n(c2['count'], 'call')}.")
        th = r["threads"][0]
        tn = f" ({name(th['thread_name'])})" if th.get("thread_name") else ""
        out.append(f"The most blocked thread is {th['tid']}{tn} of process {th['pid']}: {t(th['total_ns'])} "
                   f"({p(th['pct_of_window'])}).")
    try:
        gaps = devices_of([ctx.call("gpu_gaps", gpu=g, **ctx.win) for g in ctx.gpus])
    except DashcamError:  # an API-only capture: no GPU to attribute idle time on
        gaps = []
    idle_gpus = [d for d in gaps if d["idle_ns"] > 0]
    if idle_gpus and any(r["calls"] for r in results):
        d = max(idle_gpus, key=lambda x: (x["causes"]["sync_wait"], -x["device_id"]))
        sw = d["causes"]["sync_wait"]
        if d["dominant_cause"] == "sync_wait":
            out.append(f"On GPU {d['device_id']} these waits are the main cause of idle time: `sync_wait` "
                       f"{t(sw)} ({p(d['cause_pct']['sync_wait'])} of its idle).")
            out.append(ADVICE["sync_wait"])
        else:
            out.append(f"They cost little GPU time: `sync_wait` is {t(sw)} ({p(d['cause_pct']['sync_wait'])}) of "
                       f"GPU {d['device_id']}'s idle time, whose main cause is `{d['dominant_cause']}`.")
    return sentences(*out)


def nccl(ctx: Ctx) -> str:
    results = calls_per_gpu(ctx, "nccl")
    devs = devices_of(results)
    comm = [d for d in devs if d["comm_kernel_count"]]
    if not comm:
        return ("There are no NCCL kernels in this profile: no multi-GPU communication was recorded "
                "(or it does not use NCCL).")
    d = max(comm, key=lambda x: (x["exposed_comm_pct"], -x["device_id"]))
    out = [f"GPU {d['device_id']} spends {t(d['comm_ns'])} ({p(d['comm_pct'])} of the window) in "
           f"{n(d['comm_kernel_count'], 'NCCL kernel')}, and {p(d['overlap_pct'])} of that overlaps compute."]
    if d["verdict"] == "not_overlapped":
        out.append(f"Communication is not overlapped: {t(d['exposed_comm_ns'])} ({p(d['exposed_comm_pct'])} of the "
                   f"window) runs with no compute beside it.")
        out.append(ADVICE["nccl"])
    else:
        out.append(f"Exposed communication is small: {t(d['exposed_comm_ns'])} ({p(d['exposed_comm_pct'])} of the "
                   f"window) runs with no compute beside it.")
    if d["top_kernels"]:
        k = d["top_kernels"][0]
        out.append(f"The largest is {name(k['name'])}: {n(k['count'], 'launch', 'launches')}, "
                   f"{t(k['total_ns'])}.")
    return sentences(*out)


def nvtx(ctx: Ctx) -> str:
    label = ctx.targets.nvtx
    results = calls_per_gpu(ctx, "nvtx", label=label, limit=5)
    r = results[0]
    if r["range_count"] == 0:
        ctx.note("no NVTX ranges in this profile" if ctx.whole_profile else "no NVTX ranges in this window")
        return ("This profile has no NVTX ranges, so there are no annotated regions to report; ask about "
                "idle time, kernels or copies instead." if ctx.whole_profile else
                f"No NVTX range overlaps {window_words(r, False)}.")
    if not r["groups"]:
        return f"No NVTX range label contains {name(label)}; the profile has {r['group_count']} label groups."
    shown = r["groups"][:1 if label else 3]
    if label and _COMPARE.search(ctx.question or ""):
        shown += compared_ranges(ctx, shown[0]["label"])
    out = []
    for i, g in enumerate(shown):
        gpu = (f", launching {n(g['kernel_count'], 'kernel')} with {t(g['gpu_ns'])} of GPU time"
               if g["kernel_count"] else ", launching no kernels")
        lead = ("NVTX range" if label or i else "The NVTX range with the most time is") + " " + name(g["label"])
        out.append(f"{lead}: {n(g['count'], 'range')}, {t(g['total_ns'])} in total (average {t(g['avg_ns'])}, "
                   f"longest {t(g['max_ns'])}){gpu}.")
    if r["group_count"] > 1:
        out.append(f"Range times are summed, so nested ranges each count; {r['range_count']} ranges in "
                   f"{r['group_count']} label groups overall.")
    return sentences(*out)


def compared_ranges(ctx: Ctx, shown: str) -> list[dict]:
    """Other NVTX label groups the question names beside the asked one ("backward ... compared with the
    forward pass"): the top groups of the window whose label appears in the question as words."""
    r = calls_per_gpu(ctx, "nvtx", limit=20)[0]
    return [g for g in r["groups"] if g["label"] != shown and len(g["label"]) >= 3
            and re.search(rf"(?<!\w){re.escape(g['label'])}(?!\w)", ctx.question, re.IGNORECASE)][:2]


def step_window(ctx: Ctx, index: int) -> dict:
    """start_ms/end_ms of step ``index`` (iterations over the whole profile); StepNotFound if absent."""
    r = ctx.call("iterations", limit=min(1000, max(10, index + 1)))
    step = next((s for s in r["steps"] if s["index"] == index), None)
    if step is None:
        raise StepNotFound(f"step {index} not found ({r['step_count']} steps)")
    w = r["window"]
    start = max(0.0, (step["start_ns"] - w["start_ns"]) / 1e6 + w["start_ms"])
    end = max(start, (step["end_ns"] - w["start_ns"]) / 1e6 + w["start_ms"])
    return {"start_ms": round(start, 6), "end_ms": round(end, 6)}


def _steps_source(r: dict) -> str:
    if r["method"] == "nvtx":
        return f"NVTX ranges {name(r['label'])}"
    return f"launches of {name(r['kernel_name'])} on GPU {r['device_id']}"


def iterations(ctx: Ctx) -> str:
    step = ctx.targets.step
    if step is not None and not ctx.targets.window_args():
        win = ctx.win  # raises StepNotFound when there is no such step
        r = ctx.call("iterations", limit=min(1000, max(10, step + 1)))
        s = next(x for x in r["steps"] if x["index"] == step)
        out = [f"Step {step} (of {r['step_count']}, from {_steps_source(r)}) took {t(s['duration_ns'])}; the median "
               f"step takes {t(r['median_ns'])}, and GPU {s['gpu_busy_device']} was kernel-busy "
               f"{p(s['gpu_busy_pct'])} of it."]
        gaps = devices_of([ctx.call("gpu_gaps", gpu=g, **win) for g in ctx.gpus])
        res = ctx.call("gpu_gaps", gpu=ctx.gpus[0], **win)
        out += idle_sentences(idlest(gaps), res, False)
        return sentences(*out)
    r = ctx.call("iterations", gpu=ctx.gpus[0], label=ctx.targets.nvtx, **ctx.targets.window_args())
    if r["step_count"] == 0:
        ctx.note("no steps found (no NVTX step ranges, no repeating kernel pattern)")
        return ("No repeating steps were found: the profile has no NVTX step ranges and no kernel that repeats "
                "like a step.")
    out = [f"The run has {r['step_count']} steps, from {_steps_source(r)}: median {t(r['median_ns'])}, mean "
           f"{t(r['mean_ns'])}, p90 {t(r['p90_ns'])}."]
    slow_, fast = r["slowest"], r["fastest"]
    if r["stdev_ns"] == 0:
        out.append(f"All steps take the same time (standard deviation {t(r['stdev_ns'])}); GPU kernel busy in "
                   f"step {slow_['index']} is {p(slow_['gpu_busy_pct'])}.")
    else:
        out.append(f"The slowest is step {slow_['index']} at {t(slow_['duration_ns'])} "
                   f"({_trim(slow_['ratio_to_median'])} times the median), with the GPU kernel-busy "
                   f"{p(slow_['gpu_busy_pct'])} of it; the fastest, step {fast['index']}, took "
                   f"{t(fast['duration_ns'])}.")
        if asks_why(ctx.question):
            out += slowest_step_why(ctx, r, slow_)
        elif slow_["ratio_to_median"] >= OUTLIER_RATIO:
            out.append(f"Step {slow_['index']} is an outlier: ask why the GPU was idle in step {slow_['index']} to "
                       "see what it waited on.")
    return sentences(*out)


def asks_why(question: str) -> bool:
    """The question asks for a cause ("... and why?", "what makes it slow", "the reason")."""
    return bool(_WHY.search(question or ""))


def _step_bounds(r: dict, step: dict) -> dict:
    """start_ms/end_ms of a step row of an iterations result (its own start_ms/end_ms when it has them)."""
    if step.get("start_ms") is not None and step.get("end_ms") is not None:
        return {"start_ms": step["start_ms"], "end_ms": step["end_ms"]}
    w = r["window"]
    start = max(0.0, (step["start_ns"] - w["start_ns"]) / 1e6 + w["start_ms"])
    return {"start_ms": round(start, 6), "end_ms": round(start + step["duration_ns"] / 1e6, 6)}


def slowest_step_why(ctx: Ctx, r: dict, step: dict) -> list[str]:
    """Why the slowest step is slow: gpu_gaps over its window (the idlest GPU's main cause and its largest
    gap with the NVTX range open in it); a GPU kernel-busy most of the step gets its top kernel instead."""
    win = _step_bounds(r, step)
    results = [ctx.call("gpu_gaps", gpu=g, **win) for g in ctx.gpus]
    dev = idlest(devices_of(results))
    gid, i = dev["device_id"], step["index"]
    out = [] if step["ratio_to_median"] >= OUTLIER_RATIO else [
        f"Step {i} is close to the median, so no step stands out; here is where its time went."]
    if dev["kernel_busy_pct"] >= MOSTLY_BUSY_PCT or not dev.get("dominant_cause"):
        top = ctx.call("top_kernels", gpu=gid, limit=5, **win)
        out += [f"In step {i} GPU {gid} was kernel-busy {p(dev['kernel_busy_pct'])} of "
               f"{window_words(results[0], False)}, so the step's time goes to its kernels."]
        if top["kernels"]:
            k = top["kernels"][0]
            out.append(f"The top kernel in it is {name(k['name'])}: {t(k['total_ns'])} over "
                       f"{n(k['count'], 'launch', 'launches')}.")
            out.append(ADVICE["kernel"])
        return out
    head = (f"Step {i} is slow because GPU {gid} waited: it was idle {t(dev['idle_ns'])} "
            f"({p(dev['idle_pct'])} of {window_words(results[0], False)})")
    return out + idle_sentences(dev, results[0], False, head=head)


def small_kernels(ctx: Ctx) -> str:
    devs = devices_of(calls_per_gpu(ctx, "small_kernels"))
    known = [d for d in devs if d.get("verdict") is not None]
    if not known:
        ctx.note("SM count unknown: small kernels cannot be classified")
        return "The profile does not record the GPUs' SM counts, so kernels cannot be called small or not."
    d = max(known, key=lambda x: (x["small_time_pct"], -x["device_id"]))
    if d["verdict"] == "small_kernels":
        out = [f"GPU {d['device_id']} spends {p(d['small_time_pct'])} of its kernel time ({t(d['small_time_ns'])} "
               f"of {t(d['kernel_time_ns'])}) in {n(d['small_count'], 'kernel')} with fewer blocks than its "
               f"{d['sm_count']} SMs."]
        if d["top_small"]:
            k = d["top_small"][0]
            out.append(f"The largest is {name(k['name'])}: {n(k['count'], 'launch', 'launches')}, "
                       f"{t(k['total_ns'])}, {_trim(k['avg_blocks'], 2)} blocks on average.")
        out.append(ADVICE["small"])
        return sentences(*out)
    who = "No GPU is" if len(known) > 1 else f"GPU {d['device_id']} is not"
    return (f"{who} held back by small kernels: at most {p(d['small_time_pct'])} of kernel time (GPU "
            f"{d['device_id']}) is in kernels with fewer blocks than its {d['sm_count']} SMs.")


def streams(ctx: Ctx) -> str:
    devs = devices_of(calls_per_gpu(ctx, "streams"))
    out = []
    for d in devs[:4]:
        if not d["kernel_count"]:
            out.append(f"GPU {d['device_id']} ran no kernels.")
            continue
        s = d["streams"][0] if d["streams"] else None
        top = (f"; the busiest, stream {s['stream_id']}, ran kernels {p(s['kernel_time_pct'])} of the window"
               if s and s.get("stream_id") is not None else "")
        if d["overlap_ns"] > 0:
            conc = (f"kernels on different streams overlapped {t(d['overlap_ns'])} ({p(d['overlap_pct'])} of its "
                    f"kernel-busy time), up to {d['max_concurrent_kernels']} at once")
        else:
            conc = "no two kernels ran at the same time"
        out.append(f"GPU {d['device_id']} used {n(d['stream_count'], 'stream')} and {conc}{top}.")
    if len(devs) > 4:
        out.append(f"({len(devs)} GPUs in all; name one to see its streams.)")
    return sentences(*out)


API_SUMMARY_SQL = ("SELECT (SELECT count(*) FROM api) AS api_calls, "
                   "(SELECT count(DISTINCT pid) FROM api) AS processes, "
                   "(SELECT max(\"end\") - min(start) FROM api) AS span_ns, "
                   "(SELECT count(*) FROM api WHERE name LIKE '%Launch%') AS launch_calls, "
                   "(SELECT count(*) FROM gpus) AS gpus_listed, "
                   "(SELECT string_agg(DISTINCT name, ', ') FROM gpus) AS gpu_names")
API_TOP_SQL = ("SELECT name, count(*) AS calls, sum(dur) AS total_ns FROM api GROUP BY name "
               "ORDER BY total_ns DESC, name LIMIT 3")
_COMPARE = re.compile(r"\b(?:compar\w*|vs|versus|than|against|relative to)\b", re.IGNORECASE)
_GPU_MODEL = re.compile(r"\b(?:gpu|card|device|hardware)s?\b.{0,20}\b(?:model|name|type|kind)s?\b|"
                        r"\b(?:model|name|type|kind)s? of (?:the |this |my )?(?:gpu|card|device)|"
                        r"\b(?:which|what)(?: kind of| type of| sort of)? (?:gpu|card|device|hardware)s?\b"
                        r"(?! (?:is|was|are|were) (?:the )?(?:idle|busy|slow))", re.IGNORECASE)


def asks_gpu_model(question: str) -> bool:
    """The question asks which GPU model (name) the profile ran on."""
    return bool(_GPU_MODEL.search(question or ""))


def _sql_rows(result: dict) -> list[dict]:
    return [dict(zip(result["columns"], row)) for row in result["rows"]]


def api_only(ctx: Ctx) -> str:
    """An API-only capture (no kernels, memcpys or memsets): what it does hold, from the sql tool."""
    ctx.note(NO_GPU_ACTIVITY_NOTE)
    summary = _sql_rows(ctx.call("sql", query=API_SUMMARY_SQL))[0]
    if not summary["api_calls"]:
        raise NoGpuActivity("no GPU activity and no CUDA API calls in this profile")
    top = _sql_rows(ctx.call("sql", query=API_TOP_SQL))
    listed = ", ".join(f"{name(x['name'])} {t(x['total_ns'])} ({n(x['calls'], 'call')})" for x in top)
    out = ["This profile has no GPU activity: no kernels, memcpys or memsets were recorded, only CUDA API calls "
           "on the host.",
           f"It has {n(summary['api_calls'], 'CUDA API call')} from "
           f"{n(summary['processes'], 'process', 'processes')} over {t(summary['span_ns'])}; by time: {listed}."]
    if summary["gpus_listed"]:
        which = f" ({name(summary['gpu_names'])})" if summary.get("gpu_names") else ""
        out.append(f"The export lists {n(summary['gpus_listed'], 'GPU')}{which}, but no work on "
                   f"{'it' if summary['gpus_listed'] == 1 else 'them'} was recorded.")
    if summary["launch_calls"]:
        out.append(f"The {n(summary['launch_calls'], 'launch call')} left no kernel in the capture, so the GPU "
                   "side was not traced (as happens under WSL2): capture with CUDA tracing (`nsys profile -t cuda`) "
                   "where the GPU trace is supported.")
    else:
        out.append("Capture with CUDA tracing on (`nsys profile -t cuda`) while the GPU work runs.")
    return sentences(*out)


def gpu_model_sentence(ctx: Ctx, devs: list[dict]) -> str:
    """The GPU models (overview gpu_name per device), or that the export does not record them."""
    by_name: dict[str | None, list[int]] = {}
    for d in devs:
        by_name.setdefault(d.get("gpu_name"), []).append(d["device_id"])
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


def overview(ctx: Ctx) -> str:
    if not ctx.profile.devices:
        return api_only(ctx)
    results = calls_per_gpu(ctx, "overview")
    r = results[0]
    devs = devices_of(results)
    model = gpu_model_sentence(ctx, devs) if asks_gpu_model(ctx.question) else None
    version = (f"Nsight Systems {name(r['nsys_version'])} export (schema {name(r['schema_version'])})"
               if r.get("nsys_version") else "Nsight Systems export (version not recorded)")
    gpu_names = list(dict.fromkeys(d["gpu_name"] for d in devs if d.get("gpu_name")))
    kinds = f" ({', '.join(name(g) for g in gpu_names)})" if gpu_names and not model else ""
    plural = "GPU" if r["gpu_count"] == 1 else "GPUs"
    out = [f"This is an {version} with {r['gpu_count']} {plural}{kinds} and a "
           f"{t(r['window_ns'])} window of GPU activity{'' if ctx.whole_profile else ' (the part asked for)'}.",
           f"It has {n(r['process_count'], 'process', 'processes')}, {n(r['api_calls'], 'CUDA API call')} and "
           f"{n(r['nvtx_ranges'], 'NVTX range')}."]
    if len(devs) <= 4:
        out.append("; ".join(f"GPU {d['device_id']} ran {n(d['kernel_count'], 'kernel')}, kernel-busy "
                             f"{p(d['kernel_busy_pct'])} of the window ({p(d['busy_pct'])} counting copies)"
                             for d in devs) + ".")
    else:
        out.append("Kernel busy per GPU: " + ", ".join(f"GPU {d['device_id']} {p(d['kernel_busy_pct'])}"
                                                        for d in devs) + ".")
    return sentences(model, *out)


def compare_gpus(ctx: Ctx) -> str:
    named = ctx.targets.gpus if len(ctx.targets.gpus) > 1 else []
    results = [ctx.call("overview", gpu=g, **ctx.win) for g in (named or [None])]
    devs = devices_of(results)
    w = window_words(results[0], ctx.whole_profile)
    if len(devs) == 1:
        d = devs[0]
        return (f"This profile has one GPU, GPU {d['device_id']}, so there is nothing to compare: it is kernel-busy "
                f"{p(d['kernel_busy_pct'])} of {w}.")
    most = max(devs, key=lambda d: (d["kernel_busy_pct"], -d["device_id"]))
    least = min(devs, key=lambda d: (d["kernel_busy_pct"], d["device_id"]))
    if most["kernel_busy_pct"] == least["kernel_busy_pct"]:
        return (f"The GPUs are equally busy: GPUs {ids([d['device_id'] for d in devs])} are each kernel-busy "
                f"{p(most['kernel_busy_pct'])} of {w}.")
    uneven = most["kernel_busy_pct"] - least["kernel_busy_pct"] >= 10  # a wording choice, not printed
    out = [f"GPU {most['device_id']} is the busiest (kernel-busy {p(most['kernel_busy_pct'])} of {w}) and GPU "
           f"{least['device_id']} the least busy ({p(least['kernel_busy_pct'])}), "
           + ("a wide spread: the load is uneven." if uneven else "a narrow spread: the load is even.")]
    mid = [d for d in devs if d is not most and d is not least]
    if mid and len(mid) <= 6:
        out.append("The others: " + ", ".join(f"GPU {d['device_id']} {p(d['kernel_busy_pct'])}" for d in mid) + ".")
    gres = ctx.call("gpu_gaps", gpu=least["device_id"], **ctx.win)
    g = gres["devices"][0]
    if g["idle_ns"] > 0 and g.get("dominant_cause"):
        out += idle_cause(g, gres, ctx.whole_profile, f"GPU {least['device_id']} was idle {t(g['idle_ns'])}",
                          "its idle")
        out.append(advice_for(g, gres))
    return sentences(*out)


def healthy(ctx: Ctx) -> str:
    ov = devices_of(calls_per_gpu(ctx, "overview"))
    gap_results = calls_per_gpu(ctx, "gpu_gaps")
    gaps = devices_of(gap_results)
    ll = devices_of(calls_per_gpu(ctx, "launch_latency"))
    mc = calls_per_gpu(ctx, "memcpy")
    sk = devices_of(calls_per_gpu(ctx, "small_kernels"))
    nc = devices_of(calls_per_gpu(ctx, "nccl"))
    gaps_of = {d["device_id"]: d for d in gaps}
    problems: list[tuple[str, list[str]]] = []  # (short name, sentences)
    low = [d for d in ov if d["kernel_busy_pct"] < HEALTHY_BUSY_PCT]
    if low:
        d = min(low, key=lambda x: (x["kernel_busy_pct"], x["device_id"]))
        g = gaps_of[d["device_id"]]
        text = [f"Not healthy: GPU {d['device_id']} runs kernels only {p(d['kernel_busy_pct'])} of the window."]
        if g.get("dominant_cause"):
            text += idle_cause(g, gap_results[0], ctx.whole_profile, f"It was idle {t(g['idle_ns'])}", "idle")
            text.append(advice_for(g, gap_results[0]))
        problems.append((f"GPU {d['device_id']} underused", text))
    bound = [d for d in ll if d.get("launch_bound")]
    if bound:
        d = bound[0]
        problems.append((f"GPU {d['device_id']} launch-bound", [
            f"Not healthy: GPU {d['device_id']} is launch-bound: its median kernel ({t(d['median_kernel_ns'])}) is "
            f"shorter than the median launch call ({t(d['api_p50_ns'])}).", ADVICE["launch_bound"]]))
    for r in mc:
        tb = [d for d in r["devices"] if d["transfer_bound"]]
        if tb:
            d = tb[0]
            problems.append((f"GPU {d['device_id']} transfer-bound", [
                f"Not healthy: GPU {d['device_id']} is transfer-bound: copies keep it busy "
                f"{p(d['memory_busy_pct'])} of the window against {p(d['kernel_busy_pct'])} for kernels.",
                ADVICE["transfer"]]))
        elif r["pre_kernel_stall_count"]:
            s = r["pre_kernel_stalls"][0]
            mem = "pageable " if s.get("pageable") else ""
            problems.append(("copy stalls", [
                f"Not healthy: {n(r['pre_kernel_stall_count'], 'HtoD copy', 'HtoD copies')} stall the GPU before its "
                "next kernel "
                f"({t(r['pre_kernel_stall_ns'])} in all; the largest a {mem}{t(s['duration_ns'])} copy on GPU "
                f"{s['device_id']}).", ADVICE["memcpy_api"]]))
    small = [d for d in sk if d.get("verdict") == "small_kernels"]
    if small:
        d = small[0]
        problems.append((f"small kernels on GPU {d['device_id']}", [
            f"Not healthy: GPU {d['device_id']} spends {p(d['small_time_pct'])} of its kernel time in kernels with "
            f"fewer blocks than its {d['sm_count']} SMs.", ADVICE["small"]]))
    exposed = [d for d in nc if d["verdict"] == "not_overlapped"]
    if exposed:
        d = exposed[0]
        problems.append((f"exposed NCCL on GPU {d['device_id']}", [
            f"Not healthy: GPU {d['device_id']} spends {p(d['exposed_comm_pct'])} of the window in NCCL "
            "communication with no compute beside it.", ADVICE["nccl"]]))
    if not problems:
        d = min(ov, key=lambda x: (x["kernel_busy_pct"], x["device_id"]))
        return (f"It looks healthy: kernels keep every GPU busy (the least busy, GPU {d['device_id']}, runs kernels "
                f"{p(d['kernel_busy_pct'])} of the window), no GPU is launch-bound or transfer-bound, and neither "
                "small kernels nor NCCL communication raise a flag.")
    out = list(problems[0][1])
    if len(problems) > 1:
        out.append("Also flagged: " + "; ".join(x for x, _ in problems[1:]) + ".")
    return sentences(*out)


def unknown(ctx: Ctx) -> str:
    r = ctx.call("overview")
    examples = [q for q in EXAMPLE_QUESTIONS if not any(ch.isdigit() for ch in q)][:6]
    plural = "GPU" if r["gpu_count"] == 1 else "GPUs"
    return sentences(
        f"I can only answer questions about this profile's timeline: {r['gpu_count']} {plural} over a "
        f"{t(r['window_ns'])} window.",
        "Try: " + " ".join(f'"{q}"' for q in examples))


def missing_gpu(ctx: Ctx, missing: list[int]) -> str:
    """The question names GPUs the profile does not have: say which exist (overview only)."""
    which = "GPU " + ids(missing) if len(missing) == 1 else "GPUs " + ids(missing)
    verb = "is" if len(missing) == 1 else "are"
    if not ctx.profile.devices:
        return f"{which} {verb} not in this profile; it has no GPU activity at all (no kernels, memcpys or memsets)."
    r = ctx.call("overview")
    have = [d["device_id"] for d in r["devices"]]
    return f"{which} {verb} not in this profile; it has {'GPU' if len(have) == 1 else 'GPUs'} {ids(have)}."


TEMPLATES = {
    "idle": idle, "slow": slow, "top_kernels": top_kernels, "memcpy": memcpy, "launch": launch, "sync": sync,
    "nccl": nccl, "nvtx": nvtx, "iterations": iterations, "small_kernels": small_kernels, "streams": streams,
    "healthy": healthy, "compare_gpus": compare_gpus, "overview": overview, "unknown": unknown,
}
