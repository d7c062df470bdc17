"""What an activity of a program is called, in a question and in a capture.

"How much time does the optimizer take?", "how long do the GEMMs take?", "time spent writing the output?": the
user names an activity in their own words, and the capture records it, if at all, under names of its own — NVTX
ranges, kernel names, CUDA API or OS runtime functions. Each activity here has the question words that name it
(``words``) and, per source, the pattern of the capture's names that hold it (None: that source never does), in
the form of measure/labels.py's FEATURES (the features MPI, NCCL and run-time compilation stay there). The kernel
families of measure/labels.py are activities of the kernels. A word that names none of them is looked for
literally (``literal``). Patterns are matched case-insensitively with ``re.search``.
"""
from __future__ import annotations

import re

from dashcam.measure.labels import KERNEL_FAMILIES

SOURCES = ("nvtx", "osrt", "api", "kernels")

# What recording it takes when the capture holds no name of the activity: the user's own NVTX range.
ANNOTATE = ("wrap it in an NVTX range (Python: `with torch.cuda.nvtx.range(\"{name}\"):` or the `nvtx` package's "
            "`nvtx.annotate(\"{name}\")`; C/C++: `nvtxRangePushA(\"{name}\")` ... `nvtxRangePop()`) and capture "
            "with `nsys profile --trace=cuda,nvtx`")

_IO = (r"^(?:p?read(?:64|v)?|preadv2?|p?write(?:64|v)?|pwritev2?|fread|fwrite|fopen(?:64)?|open(?:at)?(?:64)?|"
       r"fclose|close|fsync|fdatasync|fflush|lseek(?:64)?|sendfile(?:64)?)$")

# name -> the question words naming it, and a pattern per source
ACTIVITIES: dict[str, dict[str, str | None]] = {
    "the optimizer": {
        "words": r"\boptimi[sz]er|\boptim\b|\badamw?\b|\bsgd\b|weights? updates?|parameter updates?|updating (?:the )?"
                 r"(?:weights|parameters)",
        "nvtx": r"optimi[sz]er|\badamw?\b|\bsgd\b|zero_grad", "osrt": None, "api": None,
        "kernels": r"adam|\bsgd|sgd_|lamb_|multi_tensor_apply|fused_optim"},
    "the backward pass": {
        "words": r"\bbackward|back-?prop\w*|\bbwd\b|gradient computation|computing (?:the )?gradients",
        "nvtx": r"(?<!pre)(?<!pre_)(?<!post)(?<!post_)backward|\bbwd\b", "osrt": None, "api": None,
        "kernels": r"backward|_bwd|bwd_|\bbwd\b|dgrad|wgrad"},
    "the forward pass": {
        "words": r"\bforward(?! (?:progress|compatib))|\bfwd\b",
        "nvtx": r"(?<!pre)(?<!pre_)(?<!post)(?<!post_)forward|\bfwd\b", "osrt": None, "api": None,
        "kernels": r"forward|_fwd|fwd_|\bfwd\b|fprop"},
    "data loading": {
        "words": r"data ?load\w*|input pipeline|data pipeline|loading (?:the )?(?:data|batch\w*|inputs?)|"
                 r"reading (?:the )?(?:data|batch\w*|inputs?)|fetching (?:the )?(?:data|batch\w*)",
        "nvtx": r"data ?_?load|dataset|\bdali\b|collate|prefetch|load_batch|next_batch|get_batch|__next__",
        "osrt": None, "api": None, "kernels": None},
    "checkpoint saving": {  # saving the model's state; not activation checkpointing (`_checkpoint_wrapped_module`)
        "words": r"sav(?:e|es|ing) (?:the )?(?:model|weights|state|checkpoints?)|checkpoints? sav(?:e|es|ing)|"
                 r"writ(?:e|es|ing) (?:the )?checkpoints?",
        "nvtx": r"save_?checkpoint|checkpoint_?save|checkpoint\.save|save_model|save_state|torch\.save|\bsave\b",
        "osrt": None, "api": None, "kernels": None},
    "file I/O": {
        "words": r"\bfile (?:i/?o|reads?|writes?|access)|\bi/o\b|\bdisk\b|writ(?:e|es|ing) (?:the )?(?:output|results?|"
                 r"files?)|read(?:s|ing)? (?:the )?(?:input )?files?",
        "nvtx": r"\bi/o\b|\bio\b|write_output|read_input", "osrt": _IO, "api": None, "kernels": None},
    "the loss": {
        "words": r"(?<!time )(?<!performance )(?<!throughput )\bloss(?:es)?\b(?! scal| of)",
        "nvtx": r"\bloss|cross_entropy|nll_loss|mse_loss", "osrt": None, "api": None,
        "kernels": r"cross_entropy|nll_loss|mse_loss|\bloss|_loss"},
    "embeddings": {
        "words": r"\bembedding", "nvtx": r"embedding", "osrt": None, "api": None, "kernels": r"embedding"},
}

# The kernel families (measure/labels.py) a question names in its own words; NCCL and copies have their own answers.
FAMILY_WORDS = {
    "attention": r"\battention\b|\battn\b|flash ?attn|flash ?attention|\bsdpa\b",
    "convolution": r"\bconv(?:olution)?s?\b|\bconv[123]d\b",
    "GEMM": r"\bgemms?\b|\bmatmuls?\b|mat-?muls?|matrix[- ]multipl\w*|\bmatrix products?\b|\blinear layers?\b",
    "normalization": r"(?:layer|batch|group|rms|instance)[ _-]?norms?\b|normali[sz]ation",
    "softmax": r"\bsoftmax",
    "reduction": r"\breductions?\b|\breduce (?:kernels?|ops?|operations?)\b",  # not the verb: "reduce the time"
    "elementwise": r"\belement-?wise\b|\bpointwise\b",
}
# activity -> kernel family: its kernels are those measure/labels.kernel_family puts in the family (first family
# matching wins: FlashAttention's kernels, built on CUTLASS, are attention, not GEMM)
FAMILY_OF: dict[str, str] = {}
for _family, _pattern in KERNEL_FAMILIES:
    if _family in FAMILY_WORDS:
        ACTIVITIES[f"{_family} kernels"] = {"words": FAMILY_WORDS[_family], "nvtx": None, "osrt": None, "api": None,
                                            "kernels": _pattern}
        FAMILY_OF[f"{_family} kernels"] = _family

PLURAL = ("kernels", "embeddings")  # activities named in the plural ("GEMM kernels take ...")

_WORDS = [(name, re.compile(a["words"], re.IGNORECASE)) for name, a in ACTIVITIES.items()]


def activities_named(text: str) -> list[str]:
    """The activities ``text`` names in its words, leftmost first."""
    found = []
    for name, rx in _WORDS:
        m = rx.search(text or "")
        if m is not None:
            found.append((m.start(), name))
    return [name for _, name in sorted(found)]


def activity_named(text: str) -> str | None:
    """The activity ``text`` names in its words (the leftmost), else None."""
    found = activities_named(text)
    return found[0] if found else None


def patterns(activity: str) -> dict[str, str | None]:
    """Per source, the pattern of the names holding ``activity``: its ACTIVITIES entry, or for any other words the
    words themselves (a plural's ``s`` optional), in any case and joined by nothing, spaces, ``_`` or ``-``
    (``halo exchanges`` finds ``halo_exchange`` and ``HaloExchange``), as a word of the name: not inside another
    (``exchange`` is not in ``cudaThreadExchangeStreamCaptureMode``)."""
    if activity in ACTIVITIES:
        return {s: ACTIVITIES[activity][s] for s in SOURCES}
    words = [re.escape(w[:-1]) + "s?" if len(w) > 3 and w.endswith("s") else re.escape(w) for w in activity.split()]
    literal = r"(?<![A-Za-z])" + r"[\s_\-]*".join(words) + r"(?-i:(?![a-z]))"
    return dict.fromkeys(SOURCES, literal)


def capture_advice(activity: str) -> str:
    """What would record ``activity`` in a capture that has no name of it."""
    if activity.endswith(" kernels"):
        return "`nsys profile --trace=cuda` records every kernel by name"
    if activity == "file I/O":
        return "`nsys profile --trace=osrt` records the OS calls that read and write files"
    return ANNOTATE.format(name=activity.removeprefix("the "))
