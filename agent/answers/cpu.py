"""What the CPU was doing while a GPU waited: the launching thread's OS waits, descheduled time and hottest
functions (the cpu tool on the GPU's gaps), whether the data loader is the bottleneck, and which function
blocks (``ask "what is the CPU doing while GPU 0 waits?"``, "is the dataloader the bottleneck?", "which Python
function blocks?").

Every figure comes from the cpu, gpu_gaps and sync tools. What the capture lacks is said with the
``nsys profile`` options that record it (profile/coverage.py ``lacking``), never guessed; the verdict on a
data loader and every remedy are the findings engine's (findings/advice/).
"""
from __future__ import annotations

import re

from dashcam.findings import advice
from dashcam.findings.thresholds import LOW_LOSS_PCT
from dashcam.measure.names import short_function_name
from dashcam.profile.coverage import coverage, lacking
from dashcam.text.format import count, duration, name, percent, sentences

from .context import Ctx, window_words

# the input pipeline, by name: a data loader, data loading, NVIDIA DALI
DATALOADER = re.compile(r"data\s*-?\s*load(?:er|ing)?\b|input\s+pipeline|loading\s+(?:the\s+)?data|\bdali\b", re.I)
LAUNCHERS = re.compile(r"\blaunch\w*\b", re.I)
BLOCKS = re.compile(r"\bblock\w*|\bwait\w*\b.*\bfunction|\bfunction\w*\b.*\bwait|\bstuck\b|\bhang", re.I)
HOST_KINDS = ["os_runtime", "context_switches", "cpu_sampling"]
# OS waits on input: a pipe, a socket or a file (a DataLoader's main thread polls and reads its workers' pipes)
INPUT_WAITS = re.compile(r"^(?:p?poll|p?select|pselect6|epoll_p?wait2?|read|readv|pread(?:64)?|recv\w*|fread)$")
# "which OS runtime calls take the most time?": the calls themselves, over the capture (the os_runtime tool);
# asked about a GPU's gaps or a wait it is the launching thread's states instead (doing)
OS_CALLS = re.compile(r"\b(?:os[\s-]*runtime|osrt|os[\s-]+(?:calls?|functions?)|system[\s-]+calls?|syscalls?|"
                      r"libc\s+calls?)\b|系统调用|操作系统调用|系统函数", re.I)
GPU_FRAMING = re.compile(r"\b(?:idle|gaps?|wait(?:s|ed|ing)?\s+(?:on|for)\b|while|stall\w*)|空闲|等待|间隙", re.I)
STATE_WORDS = {"os_wait": "blocked in OS waits", "os_call": "in other OS calls", "descheduled": "descheduled (off "
               "its CPU)", "running": "computing", "unknown": "in a state the capture does not record"}


def cpu(ctx: Ctx) -> str:
    if ctx.targets.osrt and ctx.targets.osrt.lower() in (ctx.question or "").lower():  # named in this question
        return os_function(ctx, ctx.targets.osrt)
    if DATALOADER.search(ctx.question or ""):
        return dataloader(ctx)
    if OS_CALLS.search(ctx.question or "") and not GPU_FRAMING.search(ctx.question or ""):
        return os_calls(ctx)
    if BLOCKS.search(ctx.question or ""):
        return blocking(ctx)
    if LAUNCHERS.search(ctx.question or "") and re.search(r"\b(?:function|code|who|where)\b", ctx.question, re.I):
        return launchers(ctx)
    return doing(ctx)


def _python(ctx: Ctx) -> bool:
    return (ctx.facts.workload.language or "") == "python" if ctx.profile.devices else False


def _gpu(ctx: Ctx):
    """The asked GPU's gpu_gaps row, else the idlest GPU's (None without GPU activity)."""
    if not ctx.profile.devices:
        return None
    rows = [d for g in ctx.gpus for d in ctx.call("gpu_gaps", gpu=g, **ctx.win).devices]
    return max(rows, key=lambda d: (d.kernel_idle_ns, -d.device_id)) if rows else None


def _thread_words(t, first: bool = False) -> str:
    tn = f" ({name(t.thread_name)})" if t.thread_name else ""
    return f"{'Thread' if first else 'thread'} {t.tid}{tn}"


def _states(t, total: int) -> str:
    """ "blocked in OS waits 1.2 ms (mostly `read`, called from `load_batch()`), descheduled 300 µs and computing
    1.22 ms" over the states with time, most first."""
    parts = []
    # what the capture records first, most time first; the time it does not record last, whatever its size
    for s in sorted((s for s, v in t.states.items() if v > 0), key=lambda s: (s == "unknown", -t.states[s])):
        words = f"{STATE_WORDS[s]} {duration(t.states[s])}"
        calls = [c for c in t.os_calls if c.wait == (s == "os_wait")] if s in ("os_wait", "os_call") else []
        if calls:
            c = calls[0]
            by = f", called from {name(short_function_name(c.caller))}" if c.caller else ""
            words += f" (mostly {name(c.name)}{by})"
        parts.append(words)
    if not parts:
        return ""
    return ", ".join(parts[:-1]) + (" and " if len(parts) > 1 else "") + parts[-1]


def _functions(t, period: float | None) -> str | None:
    """ "its samples fall most often in `main` (2390 of 3609 host samples, about 471 ms)"."""
    if not t.functions or not t.functions[0].self_samples:
        return None
    f = t.functions[0]
    about = f", about {duration(f.self_ns)}" if f.self_ns else ""
    return (f"Its samples in host code fall most often in {name(short_function_name(f.function))} "
            f"({f.self_samples} of {count(t.host_samples, 'sample')}{about}; sampled times are estimates).")


def doing(ctx: Ctx) -> str:
    """What the launching thread did while the GPU waited on it (the cpu tool on the GPU's gaps)."""
    dev = _gpu(ctx)
    if dev is None:  # a capture without GPU work: what the threads did over the capture
        r = ctx.call("cpu", **ctx.win)
        out = [f"This capture has no GPU activity; over {window_words(r, ctx.whole_profile)} of CPU data:"]
        recorded = sorted(r.threads, key=lambda t: -sum(v for k, v in t.states.items() if k != "unknown"))
        for t in recorded[:2]:  # the threads whose time the capture records the most of
            out.append(f"{_thread_words(t, first=True)} was {_states(t, t.examined_ns)}.")
            out.append(_functions(t, r.sampling_period_ns))
        return sentences(*out, *(n for n in r.notes if n.startswith("This capture has no")))
    gid = dev.device_id
    cw = dev.causes.get("cpu_work", 0)
    head = (f"GPU {gid} was kernel-idle {duration(dev.kernel_idle_ns)}; for {duration(cw)} of it "
            f"({percent(dev.cause_pct.get('cpu_work'))}) it waited on its launching thread while that thread was in "
            "no CUDA call (`cpu_work`)")
    if cw == 0:
        return sentences(head + ".", f"Its kernel-idle time is mostly `{dev.dominant_cause}`, not host work.")
    missing = lacking(coverage(ctx.profile), HOST_KINDS, python=_python(ctx), what="what the thread did then")
    if missing:
        nvtx = list(dev.cpu_work_nvtx.items())[:1]
        where = (f" The innermost NVTX range open then is most often {name(nvtx[0][0])} ({duration(nvtx[0][1])})."
                 if nvtx else "")
        return sentences(head + "." + where, missing)
    r = ctx.call("cpu", gpu=gid, gaps=True, **ctx.win)
    out = [head + "."]
    for t in r.threads[:2]:
        out.append(f"In that time {_thread_words(t)} was {_states(t, t.examined_ns - t.cuda_ns)}.")
        out.append(_functions(t, r.sampling_period_ns))
    out += [n for n in r.notes if n.startswith("This capture has no")]
    return sentences(*out)


def os_function(ctx: Ctx, function: str) -> str:
    """One OS runtime function the question names (api_detail reads OS runtime calls too): its calls and time, when
    in the run they fall (before the first kernel, after the last: an output write at teardown), where they are
    called from and what the GPU ran meanwhile."""
    from .entity import api_analysis

    r = ctx.call("api_detail", name=function, **ctx.win)
    fn = name(r.function)
    where = window_words(r, ctx.whole_profile)
    if not r.calls:
        return (f"No call of {fn} (an OS runtime function) overlaps {where}: the capture's "
                f"{count(r.outside_calls, 'call')} of it ({duration(r.outside_ns)}) all fall outside the window, "
                "before the GPU's first work or after its last.")
    threads = "one thread" if len(r.threads) == 1 else f"{len(r.threads)} threads"
    stats = f"median {duration(r.median_ns)}, longest {duration(r.max_ns)}"
    if ctx.whole_profile and r.outside_ns > r.total_ns:  # most of it outside the GPU window: the capture's first
        out = [f"{fn} (an OS runtime call): {count(r.capture_calls, 'call')} in the capture, "
               f"{duration(r.capture_ns)} in all; {r.calls} of them "
               f"({duration(r.total_ns)}; {stats}) in {where}, the rest before the GPU's first work or after its "
               "last."]
    else:
        out = [f"{fn} (an OS runtime call): {count(r.calls, 'call')} from {threads} in {where}, "
               f"{duration(r.total_ns)} in all ({stats})."]
        if r.outside_calls:
            out.append(f"Another {count(r.outside_calls, 'call')} ({duration(r.outside_ns)}) fall outside {where}.")
        out += _when(r)
    out.append(api_analysis(ctx, r.function))
    return sentences(*out)


def os_calls(ctx: Ctx) -> str:
    """Which OS runtime calls take the most time (the os_runtime tool: the whole capture, as nsys stats osrt_sum):
    the top functions with their threads, what of it is CUDA's, CUPTI's or nsys's own threads waiting, the
    program's own costliest, and how little of it falls in the GPU window when that is so."""
    r = ctx.call("os_runtime", **ctx.win)
    if not r.recorded:
        return ("This capture has no OS runtime calls, so it cannot say which take the most time; "
                "`nsys profile --trace=osrt` records them.")
    if not r.functions:
        return "The capture traced OS runtime calls but recorded none."

    def said(f) -> str:
        th = f.top_thread
        on = "" if f.threads > 1 and 2 * th.total_ns < f.total_ns else \
            f"; thread {th.tid}" + (f" {name(th.thread_name)}" if th.thread_name else "")
        return f"{name(f.name)} {duration(f.total_ns)} ({count(f.calls, 'call')}{on})"

    out = [f"OS runtime calls over the whole capture (as `nsys stats --report osrt_sum` counts them): "
           f"{count(r.calls, 'call')} to {count(r.function_count, 'function')}, {duration(r.total_ns)} in all; "
           f"the most time: {'; '.join(said(f) for f in r.functions[:3])}."]
    support = [f for f in r.functions[:3] if 2 * f.support_ns > f.total_ns]
    if support:
        out.append(f"{' and '.join(name(f.name) for f in support)} {'is' if len(support) == 1 else 'are'} mostly "
                   "on threads CUDA, CUPTI or nsys start in the process, waiting for work of their own: the tools', "
                   "not the program's.")
    own = sorted((f for f in r.functions if f.program_ns > 0), key=lambda f: (-f.program_ns, f.name))
    if own and (support or own[0].name != r.functions[0].name):
        work = [f for f in own if not f.wait][:2]
        if work:
            out.append("The program's own threads spend the most in " + " and ".join(
                f"{name(f.name)} ({duration(f.program_ns)}, {count(f.calls, 'call')}{_os_when(f)})" for f in work)
                + ".")
    waits = [f for f in r.functions[:3] if f.wait and f not in support]
    if waits:
        out.append(f"{' and '.join(name(f.name) for f in waits)} {'is a wait' if len(waits) == 1 else 'are waits'}: "
                   "a thread blocked there uses no CPU, and costs the run only when it is the thread that should "
                   "be launching the GPU's work.")
    if ctx.profile.devices and r.program_window_ns * 10 < r.program_ns:
        out.append(f"Of the program's own threads' {duration(r.program_ns)}, only {duration(r.program_window_ns)} "
                   f"falls in {window_words(r, True)}: the rest is start-up or teardown, around the GPU's work.")
    return sentences(*out)


def _os_when(f) -> str:
    """When most of an os_runtime function's time falls outside the window: ", after the GPU's last work: …"."""
    if 2 * f.after_ns > f.total_ns:
        io = ": the program writing its output at teardown, not a GPU problem" if advice.is_output_io(f.name) else ""
        return f", after the GPU's last work{io}"
    if 2 * f.before_ns > f.total_ns:
        return ", before the GPU's first work"
    return ""


def _when(r) -> list[str]:
    """Where in the run an api_detail result's calls fall, when most of them fall after the GPU's last kernel (an
    output write at teardown) or before its first."""
    if r.after_gpu_ns and 2 * r.after_gpu_ns >= r.union_ns:
        said = ("all of it" if r.after_gpu_ns == r.union_ns else f"{duration(r.after_gpu_ns)} of its "
                f"{duration(r.union_ns)}")
        io = (": the program writing its output at teardown (output I/O, not a GPU problem); to shorten the run, "
              "write on another thread (or asynchronously) while the GPU still computes, or write less"
              if advice.is_output_io(r.function) else "")
        return [f"It falls after the GPU's last kernel ({said}), in the run's tail{io}."]
    if r.before_gpu_ns and 2 * r.before_gpu_ns >= r.union_ns:
        return [f"Most of it ({duration(r.before_gpu_ns)} of {duration(r.union_ns)}) falls before the GPU's first "
                "kernel."]
    return []


def dataloader(ctx: Ctx) -> str:
    """Is the data loader the bottleneck: the GPU waits on host work, and that work is waiting for input (an input
    OS wait of the launching thread) or inside data-loading NVTX ranges."""
    dev = _gpu(ctx)
    if dev is None:
        return "This capture has no GPU activity, so it cannot show whether the GPU waits for data."
    gid, cw = dev.device_id, dev.causes.get("cpu_work", 0)
    if dev.kernel_idle_ns and dev.kernel_idle_pct < LOW_LOSS_PCT:  # the GPU hardly waits at all: nothing to fix
        return (f"No: GPU {gid} is kernel-busy {percent(dev.kernel_busy_pct)} of the window; its kernel-idle "
                f"time ({duration(dev.kernel_idle_ns)}, {percent(dev.kernel_idle_pct)}) is too little for any input "
                "pipeline to hold it back.")
    if dev.kernel_idle_ns == 0 or dev.dominant_cause != "cpu_work":
        main = dev.dominant_cause or "none"
        return sentences(
            f"No: GPU {gid} does not mostly wait on host work. Its kernel-idle time ({duration(dev.kernel_idle_ns)}, "
            f"{percent(dev.kernel_idle_pct)} of the window) is mostly `{main}`" +
            (f"; `cpu_work`, where loading data would show, is {percent(dev.cause_pct.get('cpu_work'))} of it."
             if cw else "."))
    share = f"`cpu_work` is {percent(dev.cause_pct['cpu_work'])} of GPU {gid}'s kernel-idle time ({duration(cw)})"
    data_ns = dev.cpu_work_kinds.get("data", 0)
    cause = advice.host_cause(dev)
    input_wait = cause is not None and cause[0] in ("os_wait", "os_call") and bool(INPUT_WAITS.search(cause[1] or ""))
    if data_ns and advice.named_cpu_work(dev) == "data":
        return sentences(f"Yes: {share}, and {duration(data_ns)} of it is inside data-loading NVTX ranges.",
                         advice.cpu_work(ctx.facts, dev))
    if input_wait:
        return sentences(f"Likely: {share}, and the launching thread spends most of it waiting for input "
                         f"(blocked in {name(cause[1])}: {duration(cause[2])}), as a main thread waiting on its "
                         "data loader does.", advice.cpu_work(ctx.facts, dev))
    if cause is not None:
        return sentences(f"Not by this capture: {share}, but the launching thread spends {duration(cause[2])} of it "
                         f"{advice.host_words(cause[0], cause[1])} rather than waiting for input.",
                         advice.cpu_work(ctx.facts, dev))
    missing = lacking(coverage(ctx.profile), HOST_KINDS, python=_python(ctx), what="whether that time waits for data")
    return sentences(f"The capture cannot tell: {share}, but no data-loading NVTX range covers it.",
                     missing or "What the thread did then names no single cause.")


def blocking(ctx: Ctx) -> str:
    """Which function blocks: the launching threads' longest OS waits with the function that made them, and the
    synchronize calls with theirs."""
    dev = _gpu(ctx)
    args = {"gpu": dev.device_id, **ctx.win} if dev is not None else dict(ctx.win)
    r = ctx.call("cpu", **args)
    cov = coverage(ctx.profile)
    python = _python(ctx)
    out = []
    waits = sorted(((t, c) for t in r.threads for c in t.os_calls if c.wait), key=lambda tc: -tc[1].ns)
    for t, c in waits[:2]:
        by = (f", called from {name(short_function_name(c.caller))}" if c.caller
              else " (its backtraces name no function of the program)")
        out.append(f"{_thread_words(t, first=True)} blocks longest in {name(c.name)}: {duration(c.ns)} over "
                   f"{count(c.calls, 'call')}{by}.")
    if not waits and "os_runtime" in cov.recorded:
        out.append("No launching thread blocked in a traced OS wait.")
    if dev is not None:
        sync = ctx.call("sync", gpu=dev.device_id, **ctx.win)
        if sync.calls:
            c = sync.calls[0]
            callers = c.callers or {}
            by = (f", most often called from {name(short_function_name(next(iter(callers))))}" if callers else "")
            out.append(f"In CUDA, the threads block in {name(c.name)} for {duration(c.total_ns)} "
                       f"({count(c.count, 'call')}){by}.")
    need = [k for k in ("os_runtime", "cuda_backtraces") if k not in cov.recorded]
    if "os_runtime" in need:
        out.append(lacking(cov, ["os_runtime"], python=python, what="which OS calls block"))
    if python and "cuda_backtraces" in need:
        out.append(lacking(cov, ["cuda_backtraces"], python=True, what="which Python function makes the CUDA calls"))
    return sentences(*out) or "Nothing in this capture blocks the launching threads."


def launchers(ctx: Ctx) -> str:
    """Which functions launch the kernels (launch_latency's callers, for the named kernel or every kernel)."""
    if not ctx.profile.devices:
        return "This capture has no GPU activity: no kernel was launched."
    kernel = ctx.targets.kernel or ""
    out = []
    for g in ctx.gpus:
        r = ctx.call("launch_latency", gpu=g, kernel=kernel, **ctx.win)
        which = count(r.kernel_matches or 0, "kernel") + (f" matching {name(kernel)}" if kernel else "")
        on = f" on GPU {g}" if g is not None else ""
        if r.callers:
            top = list(r.callers.items())[:3]
            listed = ", ".join(f"{name(short_function_name(fn))} ({count(n, 'kernel')})" for fn, n in top)
            out.append(f"The launch calls of the {which}{on} come from {listed}.")
        elif r.kernel_matches:
            out.append(f"No call stack names who launched the {which}{on}.")
    if not any(ctx.call("launch_latency", gpu=g, kernel=kernel, **ctx.win).callers for g in ctx.gpus):
        missing = lacking(coverage(ctx.profile), ["cuda_backtraces", "cpu_sampling"], python=_python(ctx),
                          what="which function launched them")
        if missing:
            out.append(missing)
    return sentences(*out) or "No kernel matches."
