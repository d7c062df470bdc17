"""How much time a feature of the program takes (MPI, NCCL, run-time compilation), looked for by name in every
source the capture records (feature_time); when none holds it, what was looked for and what would record it —
never the health summary in its place."""
from __future__ import annotations

import re

from dashcam.measure.activities import ACTIVITIES, FAMILY_OF, PLURAL
from dashcam.measure.activities import patterns as activity_patterns
from dashcam.measure.labels import FEATURES
from dashcam.text.format import count, duration, name, percent, sentences

from .context import Ctx

# Which feature a question asks about, by its words (first match wins); without one, MPI.
ASKED = (("nccl", r"\bnccl\b|all-?reduce|all-?gather|reduce-?scatter|collectives?"),
         ("jit", r"\bjit\b|nvrtc|compil|ptx|module load|codegen|autotun"),
         ("mpi", r"\bmpi\b|mpi_|inter-?process|communicat|message passing"))
SOURCE_WORDS = {"nvtx": "NVTX ranges", "osrt": "OS runtime calls", "api": "CUDA API calls", "kernels": "kernels"}
ITEM = {"nvtx": ("range", "ranges"), "osrt": ("call", "calls"), "api": ("call", "calls"),
        "kernels": ("launch", "launches")}
SOURCE_CAPTURE = {"nvtx": "--trace=nvtx", "osrt": "--trace=osrt", "api": "--trace=cuda", "kernels": "--trace=cuda"}


def asked_feature(question: str) -> str | None:
    """The feature (MPI, NCCL, JIT) the question's words name, else None."""
    for feature, pattern in ASKED:
        if re.search(pattern, question or "", re.IGNORECASE):
            return feature
    return None


# MPI calls that block until other ranks get there: their time on one rank is mostly waiting for a slower one
MPI_WAITS = re.compile(r"^MPI_(?:Recv|Wait\w*|Barrier|Probe|Sendrecv\w*|All\w+|Reduce\w*|Bcast|Gather\w*|Scatter\w*)$",
                       re.I)


def time_in(ctx: Ctx) -> str:
    """The feature's time; a range of it the question names ("MPI_Recv") gets its own analysis after it."""
    from ..activities import asked_activity
    from .entity import range_analysis

    feature = asked_feature(ctx.question)
    activity = None if feature else asked_activity(ctx.question)  # "the optimizer", "GEMM kernels", "halo exchange"
    text = activity_text(ctx, activity) if activity else feature_text(ctx, feature or "mpi")
    label = ctx.targets.nvtx
    if not label:
        return text
    detail = range_analysis(ctx, label)
    if detail and MPI_WAITS.match(label):
        detail += (f" {name(label)} returns only when the other ranks it waits for get there, so on one rank its time "
                   "is mostly waiting for a slower rank; `dashcam fleet` on every rank's report lines them up on one "
                   "clock and names the late one.")
    return sentences(text, detail)


def feature_text(ctx: Ctx, feature: str) -> str:
    """The feature's time by source, or what was looked for and what would capture it."""
    gpu = ctx.targets.gpus[0] if len(set(ctx.targets.gpus)) == 1 else None
    r = ctx.call("feature_time", feature=feature, gpu=gpu, **ctx.win)
    what = r.what
    if not r.found:
        looked = ", ".join(SOURCE_WORDS[s] for s in r.looked_in) or "nothing: the capture records no NVTX, OS " \
                                                                      "runtime, CUDA API or kernel names"
        missing = [s for s in r.sources if not s.recorded and s.source not in r.looked_in
                   and FEATURES[feature][s.source] is not None]
        unrecorded = (" It records no " + " and no ".join(
            f"{SOURCE_WORDS[s.source]} ({SOURCE_CAPTURE[s.source]})" for s in missing) + "." if missing else "")
        return (f"This capture holds no {what}: I looked for its names in the {looked}, and none matches."
                f"{unrecorded} If the program uses it, {r.capture}.")
    found = [s for s in r.sources if s.count]
    main = next((s for s in found if s.source == r.main_source), None)
    if main is None:  # all of it before the first or after the last GPU work
        return _outside(r, what[0].upper() + what[1:], only=True)
    out = [f"{what[0].upper() + what[1:]} takes {duration(r.total_ns)} ({percent(r.pct_of_window)} of the "
           f"{duration(r.window.length_ns)} window), from its {SOURCE_WORDS[main.source]}: "
           + _names(main) + "."]
    if main.summed_ns > main.union_ns:  # nested ranges, or several threads at once (nvFuser compiles in parallel)
        out.append(f"The {duration(r.total_ns)} is the time at least one of them was running; summed over "
                   f"threads and nesting they add up to {duration(main.summed_ns)}, so each name's total can "
                   "exceed it.")
    return sentences(_named_outside(r, ctx.question), *out, *_others(found, main), _outside(r, "it"))


# MPI calls paid once per run: the start-up that launches and connects the ranks, and the teardown
MPI_ONCE = {"mpi_init": "MPI's start-up (starting the ranks and connecting them), paid once per run",
            "mpi_init_thread": "MPI's start-up (starting the ranks and connecting them), paid once per run",
            "mpi_finalize": "MPI's teardown, paid once per run"}


def _named_outside(r, question: str) -> str | None:
    """A name the question gives (``MPI_Init``) whose ranges or calls lie outside the window: their figures, said
    as outside it, and for MPI's start-up and teardown what they are."""
    asked = {w.lower() for w in re.findall(r"[A-Za-z_][\w]*", question or "") if "_" in w}
    for src in r.sources:
        for n in src.outside_names:
            if n.name.lower() in asked:
                inside = next((m for m in src.names if m.name == n.name), None)
                what = MPI_ONCE.get(n.name.lower())
                return (f"{name(n.name)}: {count(n.count, *ITEM[src.source])}, {duration(n.total_ns)}, outside the "
                        "window (before the first or after the last GPU work)"
                        + (f", besides {duration(inside.total_ns)} inside it" if inside else "")
                        + (f": {what}, not GPU time." if what else "."))
    return None


def activity_text(ctx: Ctx, activity: str) -> str:
    """An activity's time by source (the kernels' as GPU time, with their share of all kernel time), or what was
    looked for and what would record it."""
    gpu = ctx.targets.gpus[0] if len(set(ctx.targets.gpus)) == 1 else None
    r = ctx.call("feature_time", activity=activity, gpu=gpu, **ctx.win)
    literal = activity not in ACTIVITIES  # the user's own words: quoted as a name
    what = name(activity) if literal else activity
    if not r.found:
        patterns = activity_patterns(activity)
        wanted = [SOURCE_WORDS[s] for s in SOURCE_WORDS if patterns[s] is not None]
        if not r.looked_in:
            return (f"This capture cannot show {what}: it would be in the {_and(wanted)}, which the capture does not "
                    f"record. To time it, {r.capture}.")
        return (f"Nothing in this capture is named like {what}: I looked for it in the "
                f"{_and([SOURCE_WORDS[s] for s in r.looked_in])}, and none matches. To time it, {r.capture}.")
    found = [s for s in r.sources if s.count]
    main = next((s for s in found if s.source == r.main_source), None)
    out = []
    if r.matched != activity:  # the words as a whole name nothing; one of them does
        out.append(f"Nothing in this capture is named like {what} as a whole.")
        subject = f"Names with {name(r.matched)} in them take"
    elif main.source == "kernels" and activity not in FAMILY_OF:  # kernels of the forward pass are not all of it
        subject = f"Kernels named like {what} take"
    else:
        subject = what[0].upper() + what[1:] + (" take" if activity.endswith(PLURAL) else " takes")
    their = "their" if subject.endswith(" take") else "its"
    if main is None:  # all of it before the first or after the last GPU work
        return sentences(*out, _outside(r, subject.removesuffix(" takes").removesuffix(" take"), only=True))
    if main.source == "kernels":
        out.append(f"{subject} {duration(main.summed_ns)} of GPU time ({percent(main.pct_of_kernel_time)} of all "
                   f"kernel time): {_names(main)}.")
        if main.summed_ns > main.union_ns:
            out.append(f"On several GPUs or streams at once, at least one of them ran {duration(main.union_ns)} "
                       f"({percent(main.pct_of_window)} of the {duration(r.window.length_ns)} window).")
    else:
        out.append(f"{subject} {duration(r.total_ns)} ({percent(r.pct_of_window)} of the "
                   f"{duration(r.window.length_ns)} window), from {their} {SOURCE_WORDS[main.source]}: {_names(main)}.")
        if main.summed_ns > main.union_ns:
            out.append(f"The {duration(r.total_ns)} is the time at least one of them was running; summed over "
                       f"threads and nesting they add up to {duration(main.summed_ns)}.")
    return sentences(*out, *_others(found, main), _outside(r, "it"))


def _names(src) -> str:
    return ", ".join(f"{name(n.name)} {count(n.count, *ITEM[src.source])}, {duration(n.total_ns)}"
                     + (f" ({duration(n.mean_ns)} each)" if n.count > 1 else "") for n in src.names[:3])


def _others(found: list, main) -> list[str]:
    return [f"Its {SOURCE_WORDS[s.source]} add up to {duration(s.summed_ns)} ("
            + ", ".join(f"{name(n.name)} {duration(n.total_ns)}" for n in s.names[:2])
            + "), overlapping the above where they run inside it." for s in found if s is not main]


def _outside(r, what: str, only: bool = False) -> str | None:
    """The matches outside the window (the GPU's: before its first or after its last GPU work), from the source
    with the most time there; with ``only``, as the whole answer."""
    src = max(r.sources, key=lambda x: x.outside_ns)
    if not src.outside_count and not src.outside_ns:
        return None
    names = ", ".join(f"{name(n.name)} {count(n.count, *ITEM[src.source])}, {duration(n.total_ns)}"
                      for n in src.outside_names[:3])
    where = f"the {duration(r.window.length_ns)} window (from the first to the last GPU work)"
    if only:
        return (f"{what} is outside {where}: its {SOURCE_WORDS[src.source]} take {duration(src.outside_ns)} "
                f"before or after it ({names}).")
    return (f"Outside {where}, {it_or(what)} {SOURCE_WORDS[src.source]} take {duration(src.outside_ns)} more"
            + (f" ({names})" if names else "") + ".")


def it_or(what: str) -> str:
    return "its" if what == "it" else what + "'s"


def _and(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]
