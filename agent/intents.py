"""What a question asks for: one intent label, by keyword scoring.

``classify(question) -> str`` returns one of INTENTS; ``classify_all(question)`` every intent
with a positive score, best first. Each intent has weighted patterns (case-insensitive, on
the question with its quoted names blanked, so a kernel called 'memcpy_kernel' says nothing);
an intent's score is the sum of the weights of its patterns that occur (3 = says it outright,
2 = strong hint, 1 = weak hint). The highest score wins; ties go to the intent earlier in
PRIORITY. No positive score -> "unknown".

Words per intent (the patterns below are the exact rules):
- idle: idle, gaps, bubbles, starved/starving, underutilized, low/poor utilization, utilization
  is low, doing nothing, not busy, waiting, stalls, busy, utilization, between kernels.
- slow: why is X slow, slow/slower/slowness/slowdown, slowest (weak), bottleneck, takes/taking so long,
  what's wrong, speed up, faster, optimize, performance, time going / spent.
- top_kernels: top/heaviest/most expensive/longest/biggest/hottest/slowest/costliest kernels,
  which kernel(s) take/dominate/use the most, kernels taking the most time, what takes the most
  time, hot kernels, kernel breakdown, time per kernel.
- memcpy: memcpy, copy/copies, transfers, HtoD/DtoH/H2D/D2H, host to device, PCIe, bandwidth,
  pinned, pageable, dataloader, data loading, input pipeline.
- launch: launch overhead/latency, launch-bound, CPU-bound, host-bound, kernel launch(es), CUDA
  graphs, torch.compile, CPU/Python overhead, queue delay, launches, many short/small kernels,
  launch rate (launched per second, launches/s, rate of launches, kernels per second).
- sync: synchronize/synchronization, cuda*Synchronize, sync, blocking/blocked, stall on (the)
  host, .item(), host waits/blocked.
- nccl: NCCL, allreduce/all-reduce, allgather, reduce-scatter, broadcast, send/recv,
  communication/comms, collectives, overlap of communication, DDP/FSDP/distributed.
- nvtx: NVTX, ranges, regions, annotations, which part of the code, code region, forward,
  backward, fwd/bwd, backprop, phases.
- iterations: iteration(s), iter, step time, per step, each step, slowest/fastest/longest step or
  iteration, step duration, epoch, batch time, per batch, steps.
- small_kernels: small/tiny kernels, occupancy, SMs, streaming multiprocessors, grid size, block
  size, fill the GPU, too small.
- streams: streams, concurrency, concurrent, in parallel, overlapping kernels, serialized.
- healthy: healthy/health, health check, is this profile/run ok/fine/good, anything wrong,
  any problems/issues, red flags, sick, summary/summarize, what should I fix/look at.
- compare_gpus: compare/comparison when the question also says GPU/device/rank/card/cuda:N
  ("forward compared with backward" is not one), difference(s) between GPUs, imbalance, load balance,
  unbalanced/uneven/skew, straggler, which GPU is slowest/fastest, slower than the others,
  GPU vs GPU, across GPUs/ranks.
- overview: what is this profile, overview, describe, what's in this profile/file, tell me
  about the profile, how many GPUs/devices/kernels/processes/threads, which version, nsys
  version, which GPU model / hardware, how long the profile/capture is.
"""
from __future__ import annotations

import re

from .targets import mask_quotes

INTENTS = ["idle", "slow", "top_kernels", "memcpy", "launch", "sync", "nccl", "nvtx", "iterations",
           "small_kernels", "streams", "healthy", "compare_gpus", "overview", "unknown"]

# Ties: the first listed wins (specific subjects before general complaints).
PRIORITY = ["nccl", "memcpy", "sync", "launch", "small_kernels", "streams", "iterations", "nvtx",
            "top_kernels", "compare_gpus", "idle", "slow", "healthy", "overview"]

GPUS = r"(?:gpus?|devices?|ranks?|cards?)"
KERNELS = r"kernels?"
PER_TIME = r"(?:per|a|each|every)\s+(?:second|sec|s|millisecond|msec|ms)\b"
# Kernel launch rate: "launched per second", "launches/s", "launch rate", "kernels per second".
LAUNCH_RATE = (r"\blaunch(?:es|ed)?\s+" + PER_TIME + r"|\blaunch(?:es)?\s*/\s*(?:s|sec|ms)\b"
               r"|\blaunch\s+rates?\b|\brates?\s+of\s+(?:kernel\s+)?launch\w*|\b" + KERNELS + r"\s+" + PER_TIME)
# "compare" is a GPU comparison only when the question also names GPUs/devices/ranks ("How does forward
# compare with backward?" compares NVTX ranges).
GPU_MENTION = r"\b" + GPUS + r"(?![a-z])|\bcuda\s*:\s*\d"
COMPARE_WITH_GPUS = r"^(?=[\s\S]*\bcompar)(?=[\s\S]*(?:" + GPU_MENTION + r"))"

RULES: dict[str, list[tuple[str, int]]] = {
    "idle": [
        (r"\bidle\w*", 3), (r"\bgaps?\b", 2), (r"\bbubbles?\b", 3), (r"\bstarv\w*", 3),
        (r"\bunder-?utili[sz]\w*", 3), (r"\b(?:low|poor|bad)\s+(?:gpu\s+)?utili[sz]ation\b", 3),
        (r"\butili[sz]ation\s+(?:is\s+)?(?:so\s+|very\s+|too\s+)?low\b", 3), (r"\bdoing\s+nothing\b", 3),
        (r"\bnot\s+busy\b", 3), (r"\bwait(?:s|ing|ed)?\b", 1), (r"\bstall(?:s|ed|ing)?\b", 1),
        (r"\bbusy\b", 1), (r"\butili[sz]ation\b", 1), (r"\bbetween\s+kernels\b", 1),
    ],
    "slow": [
        (r"\bslow(?:er|ly|ness|down|s)?\b", 2), (r"\bslowest\b", 1), (r"\bbottlenecks?\b", 3),
        (r"\b(?:takes?|taking|took)\s+so\s+long\b", 3),
        (r"\bwhat(?:'s|’s|\s+is)\s+wrong\b", 2), (r"\bspeed\s*up\b", 1), (r"\bfaster\b", 1),
        (r"\boptimi[sz]\w*", 1), (r"\bperformance\b", 1),
        (r"\bwhere\s+(?:is|does)\s+(?:the\s+|all\s+the\s+)?time\b", 1),
    ],
    "top_kernels": [
        ((r"\b(?:top|heaviest|most\s+expensive|longest|biggest|hottest|hot|slowest|costliest|main|dominant)\s+"
         r"(?:\d+\s+)?(?:gpu\s+|cuda\s+)?" + KERNELS + r"\b"), 3),
        ((r"\b(?:which|what)\s+" + KERNELS + r"\b[^?.]*\b(?:takes?|took|taking|dominat\w*|uses?|consum\w*|spends?|"
         r"most|longest)\b"), 3),
        (r"\b" + KERNELS + r"\s+(?:take|took|taking|use|using|consume|consuming|spend)\s+(?:up\s+)?(?:the\s+)?"
         r"most\b", 3),
        (r"\bwhat\s+(?:takes|took|is\s+taking)\s+(?:up\s+)?(?:the\s+)?most\s+(?:gpu\s+)?time\b",
         2),
        (r"\btime\s+per\s+kernel\b", 2), (r"\bkernel\s+(?:time\s+)?breakdown\b", 2), (r"\bwhich\s+kernel\b", 1),
    ],
    "memcpy": [
        (r"\bmem-?cpy\w*|\bmemcopy\w*", 3), (r"\bcop(?:y|ies|ying)\b", 2), (r"\btransfer\w*", 2),
        (r"\b(?:HtoD|DtoH|DtoD|H2D|D2H)\b", 3), (r"\b(?:host|cpu)[\s-]+to[\s-]+(?:device|gpu)\b", 3),
        (r"\b(?:device|gpu)[\s-]+to[\s-]+(?:host|cpu)\b", 3), (r"\bpcie?\b", 3), (r"\bbandwidth\b", 2),
        (r"\bpinned\b|\bpageable\b|\bpin_memory\b", 3), (r"\bdata\s*-?loader\w*|\bdata\s+loading\b", 3),
        (r"\binput\s+pipeline\b", 3),
    ],
    "launch": [
        (r"\blaunch\w*\s+(?:overhead|latenc\w*|cost)", 3), (r"\blaunch[\s-]+bound\b", 3),
        (r"\b(?:cpu|host|python)[\s-]+(?:bound|overhead|limited)\b", 3), (r"\bkernel\s+launch\w*", 2),
        (r"\bcuda\s*graphs?\b", 3), (r"\btorch\.compile\b", 2), (r"\bqueue\w*\s+delay\b", 2),
        (r"\blaunch(?:es|ed|ing)?\b", 1), (r"\bmany\s+(?:short|small|tiny)\s+kernels\b", 1),
        (LAUNCH_RATE, 3),
    ],
    "sync": [
        (r"\bsynchroni[sz]\w*|cuda\w*synchronize\b", 3), (r"\bsync(?:s|ing|ed)?\b", 3),
        (r"\bblock(?:ing|ed)\b", 2), (r"\bstall\w*\s+on\s+(?:the\s+)?(?:host|cpu)\b", 3), (r"\.item\(\)", 2),
        (r"\b(?:host|cpu)\s+(?:waits?|waiting|blocked)\b", 2),
    ],
    "nccl": [
        (r"\bnccl\w*", 3), (r"\ball-?reduce\w*|\ball-?gather\w*|\breduce-?scatter\w*|\bbroadcast\b", 3),
        (r"\bsend\s*/\s*recv\b|\bsendrecv\b", 3), (r"\bcommunicat\w*|\bcomms?\b", 2), (r"\bcollectives?\b", 3),
        (r"\boverlap\w*\s+(?:of\s+)?(?:the\s+)?comm\w*", 3), (r"\bddp\b|\bfsdp\b|\bdistributed\b", 1),
    ],
    "nvtx": [
        (r"\bnvtx\b", 3), (r"(?<!time\s)\branges?\b(?!\s+(?:of|between|from)\b)", 1), (r"\bregions?\b", 2),
        (r"\bannotat\w*", 3), (r"\bwhich\s+parts?\s+of\s+(?:the\s+|my\s+|our\s+)?code\b", 3),
        (r"\bcode\s+regions?\b", 3), (r"\bforward\b|\bbackward\b|\bfwd\b|\bbwd\b|\bbackprop\w*", 2),
        (r"\bphases?\b", 1),
    ],
    "iterations": [
        (r"\biter(?:ation)?s?\b", 2), (r"\bsteps?\s+(?:time|times|duration|durations|length)\b", 3),
        (r"\b(?:per|each|every)\s+(?:training\s+)?(?:step|iteration|batch)\b", 3),
        (r"\b(?:slowest|fastest|longest|shortest|slow|first)\s+(?:training\s+)?(?:step|iteration)s?\b", 3),
        (r"\bsteps?\s+(?:take|takes|took|vary|varies)\b", 3), (r"\bepochs?\b", 2),
        (r"\bbatch\s+time\b|\btime\s+per\s+batch\b", 3), (r"\bsteps?\b", 1),
    ],
    "small_kernels": [
        (r"\b(?:small|tiny|little)\s+(?:\w+\s+)?kernels?\b", 3), (r"\boccupancy\b", 3), (r"\bSMs?\b", 2),
        (r"\bstreaming\s+multiprocessors?\b", 3), (r"\b(?:grid|block)\s+sizes?\b", 2),
        (r"\bfill\w*\s+(?:up\s+)?(?:the\s+)?(?:gpu|device|sms)\b", 2), (r"\btoo\s+small\b", 2),
        (r"\b(?:few|fewer)\s+blocks\b", 2),
    ],
    "streams": [
        (r"\bstreams?\b", 2), (r"\bconcurren\w*", 3), (r"\bin\s+parallel\b|\bparallelism\b", 2),
        (r"\boverlap\w*\s+kernels?\b|\bkernels?\s+overlap\w*", 2), (r"\bseriali[sz]\w*", 2),
    ],
    "healthy": [
        (r"\bhealth\w*", 3), (r"\bsick\b", 3), (r"\bhealth\s+check\b", 3),
        ((r"\bis\s+(?:this|the|my|our)\s+(?:profile|run|training|trace|job|workload)\s+"
          r"(?:ok|okay|fine|good|alright|normal)\b"), 3),
        (r"\banything\s+(?:wrong|bad|off|suspicious|odd|unusual)\b", 3), (r"\bany\s+(?:problems?|issues?)\b", 3),
        (r"\bred\s+flags?\b", 3), (r"\bsummar\w*", 2), (r"\bwhat\s+should\s+(?:i|we)\s+(?:fix|look\s+at|check)\b", 2),
    ],
    "compare_gpus": [
        (COMPARE_WITH_GPUS, 3), (r"\bdifferen\w*\s+(?:between|across|among)\s+(?:the\s+)?" + GPUS, 3),
        (r"\bimbalance\w*|\bload[\s-]+balanc\w*", 3), (r"\bunbalanced\b|\buneven\w*|\bskew\w*", 2),
        (r"\bstraggl\w*", 3), ((r"\b(?:which|what)\s+" + GPUS + r"\b[^?.]*\b(?:slowest|fastest|slower|faster|"
         r"least|most|worst|best|lagging|behind)\b"), 3),
        (r"\b(?:slower|faster)\s+than\s+(?:the\s+)?others?\b", 3), (r"\b" + GPUS + r"\s*\d*\s+(?:vs\.?|versus)\b", 2),
        (r"\bacross\s+(?:all\s+)?(?:the\s+)?" + GPUS + r"\b", 1), (r"\bbalanced\b", 2), (r"\boutliers?\b", 1),
    ],
    "overview": [
        (r"\bwhat\s+(?:is|'s)\s+(?:in\s+)?(?:this|the)\s+(?:profile|file|trace|report|capture)\b", 3),
        (r"\bwhat(?:'s|’s|\s+is)\s+in\s+(?:this|the|it)\b", 3), (r"\boverview\b", 3), (r"\bdescribe\b", 3),
        (r"\btell\s+me\s+about\b", 3),
        (r"\bhow\s+many\s+(?:gpus|devices|kernels|processes|threads|ranks)\b", 3),
        (r"\b(?:which|what)\s+(?:nsys\s+|nsight\s+|schema\s+|export\s+)?versions?\b", 3), (r"\bversions?\b", 2),
        ((r"\b(?:which|what)\s+(?:kind\s+of\s+|type\s+of\s+)?(?:gpu|hardware|card)s?\s+(?:is|are|was|were)\s+"
          r"(?:this|it|used|these|that|in)\b"), 3),
        (r"\bgpu\s+models?\b", 3),
        (r"\bhow\s+long\s+(?:is|was)\s+(?:the\s+|this\s+)?(?:profile|capture|trace|recording)\b", 3),
    ],
}

_COMPILED = {intent: [(re.compile(p, re.IGNORECASE), w) for p, w in rules] for intent, rules in RULES.items()}


def scores(question: str) -> dict[str, int]:
    """Score of every intent (0 when none of its patterns occurs)."""
    text = mask_quotes(question)
    return {intent: sum(w for p, w in rules if p.search(text)) for intent, rules in _COMPILED.items()}


def classify_all(question: str) -> list[str]:
    """Intents with a positive score, best first (ties in PRIORITY order); [] when none."""
    s = scores(question)
    return sorted((i for i in PRIORITY if s[i] > 0), key=lambda i: (-s[i], PRIORITY.index(i)))


def classify(question: str) -> str:
    """The best intent of ``question`` (see the module docstring), or "unknown"."""
    ranked = classify_all(question)
    return ranked[0] if ranked else "unknown"
