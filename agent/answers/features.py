"""How much time a feature of the program takes (MPI, NCCL, run-time compilation), looked for by name in every
source the capture records (feature_time); when none holds it, what was looked for and what would record it —
never the health summary in its place."""
from __future__ import annotations

import re

from dashcam.measure.labels import FEATURE_WORDS, FEATURES
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


def asked_feature(question: str) -> str:
    for feature, pattern in ASKED:
        if re.search(pattern, question or "", re.IGNORECASE):
            return feature
    return "mpi"


# MPI calls that block until other ranks get there: their time on one rank is mostly waiting for a slower one
MPI_WAITS = re.compile(r"^MPI_(?:Recv|Wait\w*|Barrier|Probe|Sendrecv\w*|All\w+|Reduce\w*|Bcast|Gather\w*|Scatter\w*)$",
                       re.I)


def time_in(ctx: Ctx) -> str:
    """The feature's time; a range of it the question names ("MPI_Recv") gets its own analysis after it."""
    from .entity import range_analysis

    text = feature_text(ctx, asked_feature(ctx.question))
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
    what = FEATURE_WORDS[feature]
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
    main = next(s for s in found if s.source == r.main_source)
    out = [f"{what[0].upper() + what[1:]} takes {duration(r.total_ns)} ({percent(r.pct_of_window)} of the "
           f"{duration(r.window.length_ns)} window), from its {SOURCE_WORDS[main.source]}: "
           + ", ".join(f"{name(n.name)} {count(n.count, *ITEM[main.source])}, {duration(n.total_ns)}"
                       + (f" ({duration(n.mean_ns)} each)" if n.count > 1 else "") for n in main.names[:3])
           + "."]
    if main.summed_ns > main.union_ns:  # nested ranges, or several threads at once (nvFuser compiles in parallel)
        out.append(f"The {duration(r.total_ns)} is the time at least one of them was running; summed over "
                   f"threads and nesting they add up to {duration(main.summed_ns)}, so each name's total can "
                   "exceed it.")
    for s in found:
        if s is not main:
            out.append(f"Its {SOURCE_WORDS[s.source]} add up to {duration(s.summed_ns)} ("
                       + ", ".join(f"{name(n.name)} {duration(n.total_ns)}" for n in s.names[:2])
                       + "), overlapping the above where they run inside it.")
    return sentences(*out)
