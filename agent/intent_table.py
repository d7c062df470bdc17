"""THE table of intents: what each kind of question is called, the words that say it, and what answers it.

To add an intent, add one ``Intent`` to ``INTENT_TABLE`` below and write its answer function
(``answers/<module>.py``: ``def name(ctx) -> str``, on tool results through ``ctx.call``); name it in
``answer`` as "module:function". Nothing else needs to change: the classifier (intents.py), the offline
planner (planner.py, through answers.TEMPLATES), ``ask --json`` and the eval read this table.

An entry:

- ``name``: the intent label (``ask --json`` "intent", eval cases' ``intent``).
- ``tools``: the tools its answer calls first (docs, LLM hints; the answer function is what runs).
- ``answer``: "module:function" in ``dashcam.agent.answers``.
- ``words``: word -> weight. Words are written plainly; they go through the same normalization as the
  questions (words.py: abbreviations, synonyms, typo correction, stemming), so "idle" also counts
  "idling", "idled" and "idel", and a synonym's canonical word counts for all of its synonyms.
  Weights: 3 = says it outright, 2 = a strong hint, 1 = a weak hint; negative = speaks against it.
  A word counts once per question.
- ``phrases``: "w1 w2 ..." -> weight: the words in this order, each at most PHRASE_GAP words after the
  one before ("host wait gpu" matches "the host sits waiting for the device"). A phrase counts once.
  Special words: ``@api`` = a CUDA API name (cudaMemcpy, cuLaunchKernel, any case), followed by its kind:
  ``@api_sync``, ``@api_memcpy``, ``@api_launch``, ``@api_memory``, ``@api_event``; ``#n`` = a number.
  A phrase starting with "=" needs its words next to each other ("=how many gpu" is not "how many
  streams per gpu").
- ``targets``: bonuses from the parsed targets (targets.py): "kernel", "nvtx", "step", "window",
  "gpus2" (two or more GPUs named), "all_gpus", "which_gpu", "gpu" (one GPU named).
- ``about``: one line on what it answers (docs, LLM hints).
- ``topic``: a few words for it (the fallback answer's "Ask me also about ..." line).
- ``example``: one question it answers (help, docs).

Scores: the sum of the weights of the words, phrases and target bonuses that occur; the best intent
wins when its score is at least MIN_SCORE, ties go to the earlier entry (specific subjects before
general complaints: keep that order when adding). Below MIN_SCORE the question is "unknown", which the
planner answers with the health summary and a line on what else it can answer.
"""
from __future__ import annotations

from dataclasses import dataclass, field

PHRASE_GAP = 2   # words allowed between two words of a phrase
MIN_SCORE = 2    # below this the question is "unknown"


@dataclass(frozen=True)
class Intent:
    name: str
    tools: tuple[str, ...]
    answer: str
    about: str
    example: str
    topic: str = ""
    words: dict[str, float] = field(default_factory=dict)
    phrases: dict[str, float] = field(default_factory=dict)
    targets: dict[str, float] = field(default_factory=dict)


INTENT_TABLE: list[Intent] = [
    Intent(
        name="nccl", tools=("nccl",), answer="nccl:nccl",
        topic="NCCL communication",
        about="NCCL communication: its time per GPU and how much of it overlaps compute",
        example="Is NCCL communication overlapped with compute?",
        words={"nccl": 3, "allreduce": 3, "allgather": 3, "reducescatter": 3, "alltoall": 3, "broadcast": 3,
               "sendrecv": 3, "communication": 2, "collectives": 3, "ddp": 2, "fsdp": 2, "distributed": 1,
               "expose": 1, "overlap": 1},
        phrases={"overlap communication": 2, "communication overlap": 2, "overlap compute": 2,
                 "communication expose": 2, "between gpu": 0.5, "communication compute": 1,
                 "talk to each other": 3, "communicate with each other": 3, "gpu talk": 2, "gpu communicate": 2,
                 # "is communication the bottleneck?": about communication, not the whole run
                 "communication bottleneck": 4, "nccl bottleneck": 4, "allreduce bottleneck": 4,
                 "collectives bottleneck": 4,
                 # "is NCCL balanced between the GPUs?": the NCCL time per GPU, not the GPUs' kernel-busy
                 "nccl balanced": 4, "communication balanced": 4, "nccl imbalance": 4, "communication imbalance": 4},
    ),
    Intent(
        name="time_in", tools=("feature_time",), answer="features:time_in",
        topic="time in MPI or run-time compilation",
        about="time in MPI, NCCL or run-time compilation (JIT, NVRTC, module loading), found by name in NVTX "
              "ranges, OS runtime calls, CUDA API calls and kernels",
        example="How much time does MPI take?",
        words={"mpi": 2, "nvrtc": 3, "openmpi": 3, "mpich": 3, "jit": 0.5},
        phrases={"time in mpi": 3, "mpi time": 3, "time mpi": 2, "mpi cost": 2, "cost mpi": 2, "mpi take": 2,
                 "spend mpi": 2, "go to mpi": 2, "compile kernel": 3, "spend compile": 3, "time compile": 2,
                 "compile take": 3, "compilation take": 3, "how long compile": 3, "how long compilation": 3,
                 "jit take": 3, "jit cost": 3, "time jit": 3, "spend jit": 3, "module load": 2, "lose jit": 3,
                 "lose compile": 3, "lose mpi": 3, "lose to mpi": 3},
    ),
    Intent(
        name="memcpy", tools=("memcpy",), answer="copies:memcpy",
        topic="copies and pinned memory",
        about="copies between host and GPU: their time, size, bandwidth, pinned or pageable memory",
        example="Do host-to-device copies stall the GPU?",
        words={"memcpy": 3, "copy": 2, "transfer": 2, "htod": 3, "dtoh": 3, "dtod": 3, "pcie": 3, "pci": 2,
               "bandwidth": 2, "offload": 2.5, "pinned": 3, "pin": 2, "pageable": 3, "pin_memory": 3, "nvlink": 2,
               "data": 0.5, "@api_memcpy": 1},
        phrases={"copy per iteration": 3, "copy per step": 3, "per iteration copy": 3, "per step copy": 3,
                 "copy compare": 3, "transfer compare": 3, "copy peak": 2, "transfer peak": 2,
                 "copy each iteration": 3, "copy every iteration": 3, "copy each step": 3, "data region": 3,
                 "copy in loop": 3, "host to gpu": 3, "gpu to host": 3, "data loader": 3, "data load": 3,
                 "input pipeline": 3,
                 "host memory": 2, "data move": 2, "data transfer": 1, "memory transfer": 3, "memory bandwidth": 2,
                 "transfer bound": 3, "copy bound": 3, "copy engine": 3, "overlap transfer": 3, "transfer overlap": 3,
                 "overlap copy": 3,
                 "copy overlap": 3},
    ),
    Intent(
        name="cpu", tools=("cpu", "gpu_gaps", "sync", "os_runtime"), answer="cpu:cpu",
        topic="what the CPU was doing",
        about="what the host threads did while a GPU waited on them: OS waits (read, poll, futex), descheduled time, "
              "the hottest sampled functions; whether the data loader is the bottleneck; which function blocks",
        example="What is the CPU doing while GPU 0 waits?",
        words={"descheduled": 3, "deschedule": 3, "syscall": 3, "futex": 3, "gil": 3, "osrt": 3, "hotspot": 2,
               "preempt": 2, "sampling": 1, "sample": 1, "thread": 1, "cpu": 1, "mpi": 2},
        phrases={"cpu do": 4, "host do": 4, "thread do": 4, "cpu busy with": 3, "host busy with": 3,
                 "launch thread": 2, "main thread": 2, "data loader bottleneck": 6,
                 "wait data loader": 4, "wait for data": 3, "input pipeline bottleneck": 5, "data load bottleneck": 5,
                 "which function block": 6, "what function block": 6, "which function": 3, "what function": 3,
                 "python function": 4, "host up to": 5, "thread up to": 5,
                 "hot function": 4, "function hot": 3, "context switch": 3, "os call": 3, "system call": 3,
                 "cpu time": 2, "cpu sample": 3, "thread spend": 3, "where thread": 2, "off cpu": 3},
    ),
    Intent(
        name="sync", tools=("sync",), answer="sync:sync",
        topic="synchronize waits",
        about="how long host threads block in CUDA synchronize calls, and what that costs the GPUs",
        example="How long does the CPU wait in synchronize calls?",
        words={"synchronize": 3, "itemcall": 2, "block": 1.5, "barrier": 1, "@api_sync": 4.5},
        # a synchronize API named: the sync tool answers it, unless the question is about the calls as calls
        phrases={"host wait gpu": 4, "host wait for gpu": 4, "host block gpu": 4, "host block on": 3,
                 "host stall gpu": 4, "host stall wait": 3, "stall on host": 3, "wait for gpu": 2.5,
                 "wait on gpu": 2.5, "wait gpu finish": 3, "wait kernel finish": 3, "host block": 2,
                 "host wait": 2, "host stuck": 2, "gpu catch up": 2, "host stall": 2, "wait on kernel": 2,
                 "host sit wait": 2, "block host": 3, "block the host": 3, "host get block": 3},
    ),
    # CUDA graphs, GPU metrics, device and unified memory (issue 18). "Would CUDA graphs help?" stays with
    # launch (its answer asks cuda_graphs): "are CUDA graphs used / traced / how much runs in them" is here.
    Intent(
        name="graphs", tools=("cuda_graphs",), answer="graphs:graphs",
        topic="CUDA graphs",
        about="CUDA graphs: whether they are used, how much kernel time runs in them per GPU and step, what "
              "whole-graph tracing hides, whether the eager launches would gain from them",
        example="Are CUDA graphs used?",
        words={"cudagraph": 2.5, "graph": 1},
        phrases={"cudagraph use": 3, "cudagraph used": 3, "graph used": 2, "graph use": 2, "use any cudagraph": 3,
                 "use cudagraph": 3, "used cudagraph": 3,
                 "using cudagraph": 3, "in cudagraph": 2, "inside cudagraph": 3, "inside graph": 3,
                 "cudagraph replay": 3,
                 "graph replay": 3, "graph trace": 3, "whole graph": 3, "graph node": 2, "graph launch": 2,
                 "cudagraph trace": 3, "how much cudagraph": 3, "share cudagraph": 3, "run in graph": 3,
                 "cudagraph enable": 2, "cudagraph on": 1, "cudagraph at all": 2},
    ),
    Intent(
        name="gpu_metrics", tools=("gpu_metrics",), answer="metrics:metrics",
        topic="GPU metrics (is a busy GPU really busy)",
        about="the sampled GPU metrics: whether a busy GPU is really busy (SM active, tensor cores, warps, DRAM)",
        example="The GPU shows 100 % utilization, is it really busy?",
        words={"metric": 3, "tensor": 2, "warp": 2, "sampler": 2, "smi": 2, "dcgm": 3, "sm": 0.5, "dram": 3,
               "mfu": 4, "flop": 3, "tflop": 4},
        phrases={"really busy": 4, "actually busy": 4, "truly busy": 4, "sm active": 4, "sm activity": 4,
                 "sm efficiency": 4, "sm utilization": 3, "tensor core": 3, "tensor active": 4, "warp occupancy": 3,
                 "gpu metric": 4, "nvidia smi": 3, "utilization 100": 2, "100 utilization": 2, "dram throughput": 3,
                 "memory bandwidth utilization": 4, "busy but": 2, "how busy sm": 3, "sm busy": 3,
                 "keep sm busy": 4, "smi say 100": 3, "model flop utilization": 4,
                 "smi show 100": 3},
    ),
    Intent(
        name="memory", tools=("memory",), answer="memory:memory",
        topic="GPU memory and unified-memory faults",
        about="device memory: the peak and its timeline per GPU, allocations and frees per step (allocator churn), "
              "unified-memory page faults and migrations and the kernels that waited on them",
        example="What is the peak GPU memory?",
        words={"allocation": 3, "allocator": 3, "allocate": 3, "oom": 3, "vram": 3, "fragmentation": 2,
               "fault": 2, "unified": 2, "managed": 2, "uvm": 3, "prefetch": 1, "migration": 2, "footprint": 2,
               "malloc": 3, "cudafree": 3},
        phrases={"peak memory": 4, "memory peak": 4, "max memory": 3, "memory use": 3, "memory utilization": 3,
                 "memory over time": 4, "memory grow": 3, "how much memory": 4, "out of memory": 3,
                 "page fault": 4, "peak vram": 4, "unified memory": 4, "managed memory": 4, "gpu memory": 2,
                 "device memory": 2,
                 "memory leak": 3, "@api memory": 2, "allocate every step": 2, "free every step": 2,
                 "allocate step": 3, "allocation step": 3, "allocation per step": 3},
    ),
    Intent(
        name="launch", tools=("launch_latency",), answer="launch:launch",
        topic="launch overhead",
        about="launch overhead: launch calls, queue delay, kernels per second, whether it is launch-bound",
        example="Am I launch-bound?",
        words={"launch": 1, "@api_launch": 0.5, "cudagraph": 3, "torchcompile": 3, "queue": 1, "latency": 1,
               "overhead": 1},
        phrases={"launch overhead": 3, "launch latency": 3, "launch cost": 3, "launch bound": 4,
                 "host bound": 4, "host overhead": 3, "host limit": 3, "kernel launch": 2, "launch rate": 3,
                 "launch per second": 3, "kernel per second": 3, "launch fast": 2, "queue delay": 3,
                 "sit queue": 2, "in the queue": 2, "many short kernel": 1, "many small kernel": 1,
                 "graph capture": 2, "cudagraph capture": 2, "cudagraph reduce overhead": 3,
                 "cudagraph cut overhead": 3, "launch enough": 1, "should use cudagraph": 3, "should try cudagraph": 3,
                 "switch to cudagraph": 3, "launch kernel": 2, "how many kernel per second": 3,
                 "how many launch per second": 3, "between launch and kernel": 4, "launch call and kernel": 4,
                 "launch and start": 2, "from launch to start": 3, "start after launch": 4, "begin after launch": 4,
                 "start after it launch": 4, "after launch return": 2, "start late": 3, "begin late": 3},
    ),
    Intent(
        name="api", tools=("api",), answer="api:api",
        topic="CUDA API call costs",
        about="CUDA API calls: per function how many, how long (total, mean, median, longest), per thread",
        example="Which CUDA API calls take the most time?",
        words={"@api": 3.5, "api": 3, "runtime": 1, "driver": 1, "call": 0.5},
        phrases={"cuda call": 4, "cuda function": 4, "cuda runtime": 2, "runtime call": 3, "driver call": 3,
                 "api call": 2, "@api call": 2, "costly call": 2, "costly cuda": 2, "call costly": 2,
                 "slow call": 1, "long call": 1, "call take": 1, "host time": 1, "kernel @api": 1, "time in driver": 3,
                 "driver time": 3, "driver overhead": 3, "driver cost": 3, "which thread launch": 4,
                 "what thread launch": 4, "which thread call": 3, "thread make call": 3},
    ),
    Intent(
        name="small_kernels", tools=("small_kernels",), answer="kernels:small_kernels",
        topic="kernels too small for the GPU",
        about="kernels too small to fill the GPU's SMs (grid sizes, blocks)",
        example="Are my kernels too small for the GPU?",
        words={"occupancy": 2, "sm": 2, "multiprocessor": 3, "grid": 2, "blocks": 1, "undersized": 3,
               "tiny": 1},
        phrases={"small kernel": 3, "tiny kernel": 3, "little kernel": 3, "short kernel": 2, "fill gpu": 3,
                 "fill sm": 3, "fill whole gpu": 3, "too small": 2, "few blocks": 3, "enough blocks": 3,
                 "grid size": 3, "block size": 2, "sm occupancy": 2, "kernel small": 2, "kernel tiny": 2,
                 "too tiny": 2, "fewer blocks": 3, "blocks than sm": 3},
    ),
    Intent(
        name="streams", tools=("streams",), answer="kernels:streams",
        topic="streams and concurrency",
        about="streams: how many, how busy, and whether kernels on different streams run concurrently",
        example="Do kernels on different streams run concurrently?",
        words={"stream": 2, "concurrent": 3, "parallel": 2, "serialized": 2},
        phrases={"overlap kernel": 2, "kernel overlap": 2, "stream overlap": 2, "one stream": 1,
                 "in parallel": 1, "=how many stream": 2},
    ),
    Intent(
        name="iterations", tools=("iterations",), answer="steps:iterations",
        topic="steps and the slowest one",
        about="training steps: their durations, the slowest step and why, one step's timeline",
        example="Which iteration is the slowest?",
        words={"iteration": 2, "step": 1.5, "epoch": 2, "batch": 1, "jitter": 3, "variance": 2, "variability": 2,
               "frame": 2, "fps": 3},
        phrases={"step time": 3, "per step": 3, "each step": 3, "every step": 2, "per iteration": 3,
                 "slow step": 3, "slow iteration": 3, "long step": 3, "fast step": 3, "first iteration": 2,
                 "step take": 3, "step vary": 3, "batch time": 3, "per batch": 3, "training step": 2,
                 "typical step": 3, "average step": 3, "step long": 2, "step duration": 3, "how many step": 2,
                 "step slow": 3, "iteration slow": 3, "each loop": 3, "per loop": 3, "loop time": 3,
                 "loop iteration": 2, "frame rate": 3, "per frame": 3, "each frame": 3, "frame time": 3,
                 "frame take": 3, "limit step time": 3, "limit frame": 3},
        targets={"step": 3},
    ),
    Intent(
        name="nvtx", tools=("nvtx",), answer="nvtx:nvtx",
        topic="NVTX ranges",
        about="NVTX ranges: time per range, the GPU work launched inside each",
        example="Which NVTX ranges take the most time?",
        words={"nvtx": 3, "range": 1, "region": 2, "annotation": 3, "annotate": 3, "forward": 2, "backward": 2,
               "phase": 1, "marker": 2},
        phrases={"which part code": 3, "part of my code": 3, "code region": 3, "forward backward": 1},
        targets={"nvtx": 2},
    ),
    Intent(
        name="top_kernels", tools=("top_kernels",), answer="kernels:top_kernels",
        topic="the kernels that take the time",
        about="which kernels take the GPU time",
        example="Which kernels take the most time?",
        words={"kernel": 1, "breakdown": 1},
        phrases={"top kernel": 3, "costly kernel": 3, "slow kernel": 3, "long kernel": 3, "long run kernel": 3,
                 "main kernel": 2, "consume kernel": 2, "kernel consume": 3, "which kernel": 2, "what kernel": 2,
                 "kernel take most": 3, "kernel take long": 2, "kernel use most": 3, "take most gpu time": 2,
                 "take most time": 1, "most gpu time": 1, "time per kernel": 2, "kernel breakdown": 2,
                 "kernel time breakdown": 2, "kernel consume time": 2, "kernel slow": 2, "consume gpu time": 3,
                 "kernel duration": 2, "average kernel": 2, "mean kernel": 2, "median kernel": 2, "kernel length": 2,
                 "kernel last": 2,
                 # the launches of each kernel counted, not the cost of launching: "how many times is each
                 # kernel launched?"
                 "how many time kernel launch": 5, "how often kernel launch": 5, "time each kernel launch": 5,
                 "kernel launch count": 4, "launch count": 3, "number of launch": 3, "how many launch": 3,
                 "each kernel launch": 3, "how many time launch": 4, "many time launch": 4, "often launch": 3,
                 "each kernel call": 4, "kernel call how many time": 5, "how many time kernel call": 5,
                 "kernel call count": 4},
        targets={"kernel": 2},
    ),
    Intent(
        name="compare_gpus", tools=("overview", "gpu_gaps"), answer="overview:compare_gpus",
        topic="comparing the GPUs",
        about="the GPUs side by side: how busy each is, the straggler, imbalance",
        example="Compare the GPUs.",
        words={"compare": 1, "imbalance": 3, "imbalanced": 3, "unbalanced": 3, "balanced": 2, "balance": 2,
               "straggler": 3, "uneven": 3, "skew": 2, "outlier": 1, "lag": 1},
        phrases={"compare gpu": 3, "gpu compare": 3, "compare the two gpu": 3, "gpu vs": 3, "vs gpu": 2,
                 "differ between gpu": 3, "difference between gpu": 3, "two gpu differ": 3, "across gpu": 1,
                 "which gpu slow": 3, "which gpu fast": 3, "which gpu worst": 3, "which gpu behind": 3,
                 "which of gpu": 1, "gpu fall behind": 3, "gpu lag": 3, "lag behind": 3, "slow than other": 3,
                 "fast than other": 3, "slow compared": 2, "same load": 3, "gpu load same": 3,
                 "equally load": 3, "equal load": 3,
                 "gpu same": 1, "load balance": 3, "one of gpu": 1, "between the gpu": 1, "which gpu idle": 2,
                 "which gpu busy": 2, "which gpu most": 1, "which gpu least": 1, "same amount work": 3, "same work": 2,
                 "equal work": 3, "more work than": 2, "less work than": 2, "which gpu finish": 3, "slow than gpu": 3,
                 "fast than gpu": 3, "only one work": 3, "only one gpu work": 3, "one gpu work": 2, "finish last": 2,
                 "finish first": 2, "which gpu start": 3, "start first": 2, "start last": 2, "which gpu end": 3,
                 "end last": 2, "end first": 2, "which gpu done": 3},
        targets={"gpus2": 1, "all_gpus": 1, "which_gpu": 1},
    ),
    Intent(
        name="idle", tools=("gpu_gaps",), answer="idle:idle",
        topic="why a GPU is idle",
        about="why a GPU sits idle: its gaps, what it waited for, the largest gap",
        example="Why is GPU 1 idle?",
        words={"idle": 3, "gap": 2, "starve": 3, "underutilization": 3, "utilization": 2, "busy": 2,
               "saturated": 2, "wait": 1, "stall": 1},
        phrases={"doing nothing": 3, "do nothing": 3, "not busy": 3, "busy enough": 2, "sit around": 3,
                 "sit idle": 2, "hang around": 2, "wait around": 3, "between kernel": 1, "poor utilization": 2,
                 "low utilization": 2, "utilization low": 2, "utilization poor": 2, "kept busy": 2,
                 "keep busy": 2, "occupancy of gpu": 2, "empty spot": 2, "empty stretch": 2, "gpu wait": 1,
                 "what gpu wait": 2, "gpu wait for": 1, "gpu stall": 2, "gpu keep stall": 1, "twiddle thumb": 3,
                 "gpu compute": 2, "gpu computing": 2, "time compute": 1, "time computing": 1, "white space": 3,
                 "do any work": 3, "do no work": 3, "any work at all": 2, "fraction of window": 2, "share of window": 2,
                 "percent of window": 2, "kernel run": 1, "host fault": 2, "before first kernel": 4,
                 "first kernel start late": 4, "first kernel launch late": 4, "before gpu start": 2,
                 "before gpu begin": 2},
    ),
    Intent(
        name="overview", tools=("overview",), answer="overview:overview",
        topic="what the profile holds",
        about="what the profile holds: GPUs and their models, processes, kernels, its length, versions",
        example="What is this profile?",
        words={"overview": 3, "describe": 3, "version": 2, "nsys": 1, "hardware": 2, "model": 1, "total": 1},
        phrases={"what in this": 3, "what in file": 3, "what is this profile": 3, "what is in": 2,
                 "=tell me about": 3, "=how many gpu": 3, "=how many kernel": 4, "=how many process": 3,
                 "=how many thread": 3, "total kernel count": 3, "kernel count": 2, "which nsys version": 3,
                 "nsys version": 3, "gpu model": 3, "=what gpu": 2, "which gpu is this": 3, "what hardware": 3,
                 "how long capture": 3, "how long trace": 3, "how long profile": 3, "how long record": 3,
                 "capture run": 2, "=how many gpu are": 1, "kernel ran": 1, "what gpu were used": 3,
                 "which gpu used": 3, "what gpu used": 3, "used which gpu": 3, "capture take": 3,
                 "trace take": 3, "profile take": 3, "capture last": 3, "trace last": 3, "length of capture": 3,
                 "gpu time vs wall": 4, "gpu time wall time": 4, "wall time": 2, "wall clock": 2,
                 "which gpu ran": 3, "which gpu run": 3, "which gpu did": 3, "gpu ran kernel": 3,
                 "length of trace": 3, "duration of capture": 3, "duration of trace": 3},
    ),
    Intent(
        name="healthy", tools=("overview", "gpu_gaps"), answer="health:health",
        topic="the health verdict",
        about="the health verdict of the profile: what limits it and what to fix first",
        example="Does this profile look healthy?",
        words={"health": 3, "problem": 2, "flag": 1, "summary": 2, "check": 0.5, "verdict": 3, "sick": 3,
               "ok": 0.5, "jit": 2, "startup": 1.5, "warmup": 1.5, "compilation": 1.5, "compile": 1.5},
        phrases={"health check": 1, "red flag": 3, "anything problem": 2, "any problem": 2, "look ok": 3,
                 "is this ok": 2, "is it ok": 2, "all good": 3, "look good": 2, "look off": 3, "improve first": 3,
                 "what improve": 2, "what should improve": 2, "low hang fruit": 3, "look at first": 3,
                 "anything problem go on": 1, "stand out": 3, "jump out": 3, "=gpu bound": 3, "host or gpu bound": 5,
                 "start up": 2, "warm up": 2, "startup phase": 1, "compile time": 2, "warmup time": 1,
                 "host bound or gpu": 5, "gpu or host bound": 5, "gpu bound or host": 5},
    ),
    Intent(
        name="slow", tools=("overview", "gpu_gaps"), answer="health:health",
        topic="why it is slow",
        about="why the run is slow: the same verdict, what limits it and what to try",
        example="Why is my training slow?",
        words={"slow": 2, "bottleneck": 3, "fast": 1.5, "improve": 1, "performance": 1, "speed": 1,
               "waste": 2},
        phrases={"take so long": 3, "where time go": 3, "where my time go": 3, "where time spend": 3,
                 "where spend time": 3, "speed up": 2, "go fast": 2,
                 "run fast": 2, "make fast": 2, "performance poor": 2, "performance ok": 2, "too slow": 2,
                 "what limit": 3, "limiting factor": 3, "what hold back": 3,
                 # "what dominates the timeline?", "what takes up most of the time?"
                 "what dominate": 3, "dominate timeline": 3, "take up most": 3, "most of timeline": 3},
    ),
]

# -- derived views -----------------------------------------------------------------------------
INTENTS: dict[str, Intent] = {i.name: i for i in INTENT_TABLE}
ORDER: list[str] = [i.name for i in INTENT_TABLE]
