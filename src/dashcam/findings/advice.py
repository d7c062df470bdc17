"""What to try, in the program's own terms, and only when the evidence allows it.

Every remedy has a neutral CUDA wording (``cudaMallocHost``, ``cudaMemcpyAsync``, streams, CUDA
graphs) and, where the words differ, one per programming model the workload tool recognises
(PyTorch, JAX, CuPy, Julia, OpenACC, OpenMP offload, nvc++ stdpar, TensorRT): a framework idiom appears only
with evidence of that framework. OpenACC and OpenMP offload each have their own words (``!$acc data`` /
``gang vector`` / ``async`` against ``omp target data map(...)`` / ``teams distribute`` / ``nowait``), and
stdpar code, which cannot name streams or ``cudaMemcpyAsync``, gets its own (fuse the algorithms, keep the
data on the GPU with prefetch hints, no host access between algorithms). Lower-precision math is named only
where the GPU model has it (measure/gpu_models.py: FP8 from Ada/Hopper, bf16 and TF32 from Ampere).
Each remedy checks its preconditions against the tool results before it
is offered: no pinned-memory advice for copies already pinned, no "overlap the copies" when they
already overlap kernels, no lower-precision advice for GEMMs already in reduced precision, no
"balance the GPUs" on one GPU, no "enable API tracing" when the API was traced.
"""
from __future__ import annotations

import re

from dashcam.findings import practices, remedies
from dashcam.findings.thresholds import (
    LATENCY_CONSTANT_MAX_SPREAD_PCT,
    LATENCY_CONSTANT_MIN_GAPS,
    LATENCY_LARGE_MIN_US,
    MIN_NAMED_SAMPLES,
    NAMED_CPU_WORK_PCT,
    NAMED_HOST_PCT,
    PRE_WINDOW_CALL_NOTABLE_MS,
)
from dashcam.measure.gpu_models import model_of
from dashcam.measure.labels import is_os_wait
from dashcam.measure.names import short_function_name
from dashcam.profile.capture_span import INIT_API
from dashcam.text.format import duration, name

PYTHONIC = ("pytorch", "jax", "tensorflow", "cupy", "numba", "python")
# Compiler-directed models: no streams, pinned buffers or cudaMemcpyAsync in their source (their own words below).
DIRECTIVES = ("openacc", "openmp_offload", "stdpar")


def _by_family(family: str | None, options: dict[str, str]) -> str:
    """The wording for ``family``: its own, else the Python one for Python families, else the default."""
    if family in options:
        return options[family]
    if family in PYTHONIC and "python" in options:
        return options["python"]
    return options["default"]


# Keeping arrays on the GPU across the loop, in each compiler-directed model's terms (host_copies, transfers).
RESIDENT = {
    "openacc": "keep the arrays on the GPU across the loop with data regions (`!$acc data copyin(...)` / "
               "`#pragma acc data`) and `update` only what changes",
    "openmp_offload": "keep the arrays on the GPU across the loop with data regions (`#pragma omp target data "
                      "map(to: ...)` or `target enter data`) and `target update` only what changes",
    "stdpar": remedies.STDPAR,
}


# -- the host side: what the launching thread did -------------------------------------------------

def named_cpu_work(dev) -> str | None:
    """The NVTX kind (jit, mpi, data, nccl, framework) holding at least NAMED_CPU_WORK_PCT of a GPU's
    cpu_work (a gpu_gaps device row), the largest; None when no kind does."""
    total = dev.causes.get("cpu_work", 0)
    if not total or not dev.cpu_work_kinds:
        return None
    kind, ns = max(dev.cpu_work_kinds.items(), key=lambda kv: (kv[1], kv[0]))
    return kind if 100.0 * ns / total >= NAMED_CPU_WORK_PCT else None


MPI = ("Overlap MPI communication with GPU work: post non-blocking `MPI_Isend`/`MPI_Irecv` before launching, "
       "pass device buffers to a CUDA-aware MPI, and wait only where the data is needed.")


def cpu_work(f, dev) -> str:
    """The host was busy outside CUDA calls: the named kind's remedy when it holds most of that time, the
    host-code remedy otherwise (followed by the named kind's when it holds a good part of it)."""
    kind = named_cpu_work(dev)
    most = kind is not None and 2 * dev.cpu_work_kinds[kind] >= dev.causes["cpu_work"]
    if kind == "jit" and most:
        return startup(f)
    if kind == "mpi" and most:
        return MPI
    if kind == "data" and most:
        return ("Load data off the critical path: more DataLoader workers (`num_workers`), `pin_memory=True` and "
                "prefetching, so the next batch is ready when the GPU is." if f.family == "pytorch" else
                "Load the next batch on another thread or process while the GPU works on this one.")
    if kind == "framework" and not graphs_fit(f, dev.device_id):  # already in graphs: compile, keep Python out
        return _by_family(f.family, {
            "pytorch": "Cut the framework's overhead between kernels: `torch.compile` (fewer, fused kernels) and keep "
                       "Python work out of the step loop; most kernels already run in CUDA graphs.",
            "default": "Cut the framework's overhead between kernels: compile or fuse the step so fewer operations "
                       "are dispatched; most kernels already run in CUDA graphs.",
        })
    if kind == "framework":  # the host time is the framework's own, between its ops
        return _by_family(f.family, {
            "pytorch": "Cut the framework's overhead between kernels: `torch.compile` (fewer, fused kernels) or CUDA "
                       "graphs (`torch.compile(mode=\"reduce-overhead\")`), and keep Python work out of the step loop.",
            "default": "Cut the framework's overhead between kernels: compile or fuse the step so fewer operations "
                       "are dispatched, or capture it in a CUDA graph.",
        })
    general = host_remedy(f, dev) or _host_code(f)
    if kind == "mpi":
        return general + " " + MPI
    return general


def host_cause(dev) -> tuple[str, str | None, int] | None:
    """What a GPU's cpu_work mostly was, where the capture says (gpu_gaps' cpu_work_states, _os_calls,
    _functions): the named piece with the most time — an OS runtime call (``os_wait`` or ``os_call``, its name),
    ``descheduled``, or ``running`` (its most sampled function when enough samples say so: sampled_function, or
    None) — as (state, name, ns), when it holds at least NAMED_HOST_PCT of the cpu_work examined; else None."""
    st = dev.cpu_work_states
    total = sum(st.values()) if st else 0
    if not total:
        return None
    cands = [("os_wait" if is_os_wait(n) else "os_call", n, ns) for n, ns in (dev.cpu_work_os_calls or {}).items()]
    cands.append(("descheduled", None, st.get("descheduled", 0)))
    cands.append(("running", sampled_function(dev.cpu_work_functions), st.get("running", 0)))
    state, who, ns = max(cands, key=lambda c: (c[2], c[0]))
    return (state, who, ns) if ns > 0 and 100.0 * ns / total >= NAMED_HOST_PCT else None


def sampled_function(functions) -> str | None:
    """The most sampled function (self samples) of host code, when at least MIN_NAMED_SAMPLES samples fall in it;
    None when fewer do: a handful of samples names no cause."""
    fns = [x for x in functions or [] if x.self_samples]
    return fns[0].function if fns and fns[0].self_samples >= MIN_NAMED_SAMPLES else None


def host_words(state: str, who: str | None) -> str:
    """ "blocked in `read`", "inside `write` calls", "descheduled (off its CPU)", "computing, most often in
    `main`" or "running on its CPU (computing)"."""
    if state == "os_wait":
        return f"blocked in {name(who)}"
    if state == "os_call":
        return f"inside {name(who)} calls"
    if state == "descheduled":
        return "descheduled (off its CPU)"
    return f"computing, most often in {name(short_function_name(who))}" if who else "running on its CPU (computing)"


# OS runtime calls by what the launching thread waits for or does in them (host_remedy)
_INPUT = r"^(?:p?poll|p?select|pselect6|epoll_p?wait2?|read|readv|pread(?:64)?|preadv2?|recv\w*|accept4?|fread|" \
         r"fgets|getline|getdelim)$"
_THREADS = r"^(?:futex|pthread_\w+|sem_\w+|semop|semtimedop)$"
_SLEEP = r"^(?:sleep|usleep|nanosleep|clock_nanosleep|sched_yield|pause)$"
_FILES = r"^(?:write|writev|pwrite\w*|fwrite|fflush|fsync|fdatasync|msync|f?open(?:64|at)?|f?close|fputs|fprintf)$"
_OUTPUT = r"^(?:write|writev|pwrite\w*|fwrite|fflush|fsync|fdatasync|msync|fputs|fprintf)$"
_MEMORY = r"^(?:mmap(?:64)?|munmap|mremap|brk|sbrk|madvise|mprotect)$"


def is_output_io(call: str | None) -> bool:
    """An OS runtime call that writes data out (write, pwrite64, fwrite, fsync, ...): the program's output."""
    return bool(re.search(_OUTPUT, call or ""))


def host_remedy(f, dev) -> str | None:
    """The remedy for what the launching thread mostly did in a GPU's cpu_work (host_cause), in the program's
    terms; None when the capture does not say."""
    cause = host_cause(dev)
    if cause is None:
        return None
    state, who, _ = cause
    call = name(who) if who else ""
    if state in ("os_wait", "os_call") and re.search(_INPUT, who or ""):
        return _by_family(f.family, {
            "pytorch": f"The launching thread waits for input ({call}) between launches: give the DataLoader more "
                       "workers (`num_workers`) and prefetching (`prefetch_factor`, `pin_memory=True`), so the next "
                       "batch is ready when the GPU is.",
            "python": f"The launching thread waits for input ({call}) between launches: read or decode the next "
                      "batch in a background thread or process (prefetch), so it is ready when the GPU is.",
            "default": f"The launching thread waits for input ({call}) between launches: read the next data ahead on "
                       "another thread (or with asynchronous I/O), so it is ready when the GPU is.",
        })
    if state == "os_wait" and re.search(_THREADS, who or ""):
        return _by_family(f.family, {
            "python": f"The launching thread waits on another thread ({call}) between launches — a lock, a queue, or "
                      "the GIL held by a Python thread: find what holds it and take that work off the launch path "
                      "(a process instead of a thread for CPU-heavy work).",
            "default": f"The launching thread waits on another thread ({call}) between launches — a lock or a queue: "
                       "find what holds it and take that work off the launch path.",
        })
    if state == "os_wait" and re.search(_SLEEP, who or ""):
        return f"The launching thread sleeps ({call}) between launches: remove the sleep or the polling from the loop."
    if state == "os_call" and re.search(_FILES, who or ""):
        return (f"The launching thread works on files ({call}) between launches: write output less often, or hand "
                "it to another thread, so the GPU does not wait for it.")
    if state == "os_call" and re.search(_MEMORY, who or ""):
        return (f"The launching thread maps and unmaps memory ({call}) between launches: allocate buffers once, "
                "outside the loop, and reuse them.")
    if state in ("os_wait", "os_call"):
        return f"The launching thread is in {call} between launches: move those calls off the thread that launches."
    if state == "descheduled":
        return descheduled(dev)
    if who:
        fn = name(short_function_name(who))
        return _by_family(f.family, {
            "python": f"Speed up or move the host code between launches (its samples fall most often in {fn}): take "
                      "that work out of the loop, or overlap it with GPU work.",
            "openacc": f"Speed up or move the host code between the compute regions (its samples fall most often in "
                       f"{fn}): run the regions `async` so it overlaps them, or move it into a compute region.",
            "openmp_offload": f"Speed up or move the host code between the target regions (its samples fall most "
                              f"often in {fn}): add `nowait` to the target regions so it overlaps them, or move it "
                              "into a target region.",
            "stdpar": f"Speed up or move the host code between the parallel algorithms (its samples fall most often "
                      f"in {fn}): run it as a parallel algorithm too (`std::execution::par_unseq`), so it stays on "
                      "the GPU.",
            "default": f"Speed up or move the host code between launches (its samples fall most often in {fn}): "
                       "overlap it with GPU work (asynchronous launches on streams) or move it to the GPU.",
        })
    return None


_OVERLAP = {  # how host work overlaps GPU work, per model
    "openacc": "run the compute regions `async` so the host work overlaps them, or move it to the GPU",
    "openmp_offload": "add `nowait` to the target regions so the host work overlaps them, or move it to the GPU",
    "stdpar": "move it into the parallel algorithms (`std::execution::par_unseq`) so it runs on the GPU",
    "default": "overlap that work with GPU work (asynchronous launches on streams) or move it off the launching "
               "thread",
}


def paced_words(dev) -> str | None:
    """ "the loop is paced by its input (`ioctl` on a device every 40 ms, 25 per second)" when the launching thread
    calls a device at a steady period (gpu_gaps cpu_work_paced_by), else None."""
    p = getattr(dev, "cpu_work_paced_by", None)
    if p is None:
        return None
    return (f"the loop is paced by its input ({name(p.call)} on a device every {duration(p.period_ns)}, "
            f"{p.per_second:g} per second)")


def oversubscribed(dev) -> bool:
    """Evidence that threads compete for the cores: more busy threads than the capture machine's cores, or OpenMP
    or BLAS worker threads (gpu_gaps busy_threads, cpu_cores, parallel_runtime_threads)."""
    busy, cores = getattr(dev, "busy_threads", None), getattr(dev, "cpu_cores", None)
    return bool(getattr(dev, "parallel_runtime_threads", None)) or (
        busy is not None and cores is not None and busy > cores)


def descheduled(dev) -> str:
    """The launching thread is mostly off its CPU between launches: paced by its input (a device call at a steady
    period), competing for cores (only with evidence: oversubscribed), or asleep for a reason the capture does not
    name."""
    paced = paced_words(dev)
    if paced:
        return (f"Nothing to fix on the GPU side: {paced}; the launching thread sleeps until each input arrives, "
                "and the GPU waits for it, not for a core. If throughput matters, process more per input (batch "
                "frames or several streams) or run more work beside it.")
    if oversubscribed(dev):
        return ("The launching thread is descheduled (off its CPU) between launches: it competes for cores — keep the "
                "busy threads (data workers, OpenMP or BLAS threads) below the core count and give the launching "
                "thread a core of its own (`taskset`, `OMP_NUM_THREADS`).")
    cores = getattr(dev, "cpu_cores", None)
    load = (f" ({dev.busy_threads} busy threads on {cores} cores)" if cores is not None
            and getattr(dev, "busy_threads", None) is not None else "")
    return (f"The launching thread is descheduled (off its CPU) between launches with no sign of too many busy "
            f"threads{load}: it sleeps or blocks outside the traced calls, or processes outside the capture hold "
            "the cores. Find what it waits for (`nsys profile -t osrt` with `--osrt-threshold` lowered, or a "
            "backtrace of the sleeping thread) and wake it when the GPU needs work.")


def _host_code(f) -> str:
    if "cpu_sampling" in f.workload.recorded:  # sampled already: the cpu tool shows where the time goes
        return ("The capture's CPU samples show what the launching thread runs between launches "
                f"(`dashcam tool run cpu --arg gaps=true`): {_by_family(f.family, _OVERLAP)}.")
    return _by_family(f.family, {
        "pytorch": "Profile the Python side between launches (py-spy, `torch.profiler`, or `nsys profile "
                   "--python-sampling=true`) and move work out of the step loop; if the input pipeline runs on "
                   "this thread, give the DataLoader more workers.",
        "python": "Profile the Python side between launches (py-spy or `nsys profile --python-sampling=true`) and "
                  "move that work out of the loop or overlap it with GPU work.",
        "julia": "Profile the Julia code between launches (`nsys profile --sample=cpu`): remove type instabilities "
                 "and allocations in the loop, and warm up so compilation is not captured.",
        "openacc": "Find what the host does between the compute regions (`nsys profile --sample=cpu`) and move it to "
                   "the GPU, or run the regions `async` so the host work overlaps them.",
        "openmp_offload": "Find what the host does between the target regions (`nsys profile --sample=cpu`) and move "
                          "it to the GPU, or add `nowait` to the target regions so the host work overlaps them.",
        "stdpar": "Find what the host does between the parallel algorithms (`nsys profile --sample=cpu`) and run it "
                  "as a parallel algorithm too (`std::execution::par_unseq`), so the data stays on the GPU.",
        "default": "Find what the launching thread does between launches (`nsys profile --sample=cpu`, or NVTX "
                   "ranges around the host phases) and overlap it with GPU work (asynchronous launches on "
                   "streams) or move it to the GPU.",
    })


def sync_wait(f, api: str | None = None) -> str:
    """The host blocks in synchronize calls (``api``: the one with the most time in the gaps, if known)."""
    calls = f"the {name(api)} calls" if api else "synchronize calls (`cudaDeviceSynchronize`, `cudaStreamSynchronize`)"
    return _by_family(f.family, {
        "pytorch": "Remove synchronizations the loop does not need (`.item()`, `.cpu()`, printing tensors, "
                   "`torch.cuda.synchronize()`) or wait on CUDA events instead.",
        "jax": "Remove host waits in the loop (`block_until_ready()`, `.item()`, converting arrays to NumPy) so JAX "
               "can dispatch ahead.",
        "cupy": "Remove host waits in the loop (`.get()`, `cupy.asnumpy`, `Stream.synchronize()`).",
        "julia": "Remove host waits in the loop (`CUDA.synchronize()`, copies to `Array`, scalar indexing).",
        "openacc": "Remove waits the loop does not need (`!$acc wait` / `#pragma acc wait`) and run the regions on "
                   "`async` queues.",
        "openmp_offload": "Remove waits the loop does not need (`taskwait`, target regions without `nowait`).",
        "stdpar": "Each parallel algorithm waits for the GPU before it returns: make fewer, larger algorithm calls "
                  "(`std::transform_reduce` instead of `std::transform` then `std::reduce`) and do not read the "
                  "results on the host inside the loop.",
        "default": f"Remove {calls} the loop does not need, or wait on a CUDA event only where the result is "
                   "needed.",
    })


def host_copies(f, gpu: int | None = None) -> str:
    """Synchronous or pageable host copies blocking the launching thread (cuda_api led by a memcpy): a flag read
    back every iteration when that is what the copies are, else the copy remedy that saves the most
    (remedies.copies)."""
    rb = practices.readback(f, gpu)
    if rb:
        return readbacks(f, rb)
    return remedies.copies(f, gpu)[0]


def readbacks(f, done: str) -> str:
    """The host waits for a value read back from the GPU between launches (practices.readback)."""
    return _by_family(f.family, {
        "pytorch": f"{done[0].upper() + done[1:]}: test the value every few steps instead of every step (`.item()` "
                   "syncs), or keep the test on the GPU (`torch.where`), so the launches run ahead.",
        "default": f"{done[0].upper() + done[1:]}: test it every few iterations instead of every one (launch several "
                   "iterations between checks), or keep the test on the device, so the launches run ahead of the "
                   "GPU.",
    })


def allocations(f) -> str:
    return _by_family(f.family, {
        "pytorch": "Stop allocating in the loop: avoid `torch.cuda.empty_cache()` and tensors whose shapes change "
                   "every step, so the caching allocator reuses its blocks.",
        "cupy": "Reuse arrays across iterations so CuPy's memory pool serves them instead of the driver.",
        "julia": "Reuse GPU arrays across iterations instead of allocating new ones.",
        "stdpar": "Create the vectors once outside the loop and reuse them: under `-stdpar` each new allocation is "
                  "a managed allocation the driver makes and frees.",
        "default": "Allocate once outside the loop, or use stream-ordered allocation (`cudaMallocAsync` with a "
                   "memory pool).",
    })


def cuda_api(f, api: str | None, gpu: int | None = None) -> str:
    api = api or ""
    if "Memcpy" in api:
        return host_copies(f, gpu)
    if re.search(r"Malloc|MemAlloc|Free", api) and "Host" not in api:
        return allocations(f)
    if re.search(r"HostRegister|HostAlloc|MallocHost|HostUnregister", api):
        return f"Pin host buffers once at start-up, not in the loop: {name(api)} is expensive."
    return "Take those calls off the launching thread's critical path, or make them less often."


def graphs_fit(f, gpu: int | None = None) -> bool:
    """Whether a remedy may suggest CUDA graphs: cuda_graphs.graphs_fit on the scope's cuda_graphs result (the one
    rule: not for work already in graphs unless its eager launches are launch-bound); true when that tool could
    not run."""
    from dashcam.tools.cuda_graphs import graphs_fit as fits

    r = f.graphs
    return True if r is None else fits(r, gpu)


def in_graphs(f) -> bool:
    """Some of the scope's kernel time already runs in CUDA graphs (graph kernels or whole-graph executions)."""
    r = f.graphs
    return r is not None and any(d.graph_kernels or d.whole_graph_executions for d in r.devices)


def launches(f) -> str:
    rb = practices.readback(f)
    if rb:  # a graph cannot cross the host's decision after each readback
        return readbacks(f, rb)
    if not graphs_fit(f):
        return _by_family(f.family, {
            "pytorch": "Cut the remaining launch overhead: fuse the small eager kernels (`torch.compile`); most "
                       "kernels already run in CUDA graphs.",
            "default": "Cut the remaining launch overhead: fuse the small eager kernels; most kernels already run in "
                       "CUDA graphs.",
        })
    if in_graphs(f):
        return _by_family(f.family, {
            "pytorch": "Capture the eager launches between the graph replays in a CUDA graph too "
                       "(`torch.compile(mode=\"reduce-overhead\")` over more of the step, or `torch.cuda.graphs`).",
            "default": "Capture the eager launches between the graph launches in a CUDA graph too "
                       "(`cudaStreamBeginCapture`, `cudaGraphLaunch`), or fuse them.",
        })
    return _by_family(f.family, {
        "pytorch": "Cut launch overhead: capture the step in a CUDA graph (`torch.compile(mode=\"reduce-overhead\")` "
                   "or `torch.cuda.graphs`) and fuse small kernels.",
        "jax": "Dispatch fewer, larger computations: jit the whole step and loop with `lax.scan`.",
        "julia": "Launch fewer, larger kernels: fuse broadcasts into one expression and batch small launches.",
        "openacc": "Launch fewer, larger compute regions: merge loops into one `!$acc parallel` region and "
                   "`collapse` nests.",
        "openmp_offload": "Launch fewer, larger target regions: merge loops into one `target teams distribute "
                          "parallel for` region and `collapse` nests.",
        "stdpar": "Call fewer, larger parallel algorithms: fuse consecutive `std::for_each` / `std::transform` "
                  "passes into one, over more elements each.",
        "default": "Launch fewer, larger kernels: fuse them, or capture the launch sequence once in a CUDA graph "
                   "(`cudaStreamBeginCapture`, `cudaGraphLaunch`).",
    })


# -- the device side ------------------------------------------------------------------------------

def queued_copies(f, gpu: int) -> str:
    """Kernels queued behind copies on the device (the memcpy cause): the copy remedy that saves the most."""
    return remedies.copies(f, gpu)[0]


def dependency_part(dev) -> str:
    """The part of a GPU's `dependency` time that leads (gpu_gaps' dependency_split; profile/gap_dependency.py):
    launch_latency, wait or turnaround; ``wait`` without a split."""
    split = dev.dependency_split
    if split is None:
        return "wait"
    parts = {"launch_latency": split.launch_latency_ns, "wait": split.wait_ns, "turnaround": split.turnaround_ns}
    return max(parts, key=lambda p: parts[p])  # ties: the first (latency before wait before turnaround)


def constant_latency(split) -> bool:
    """The launch-to-start latency is large (median >= LATENCY_LARGE_MIN_US) and constant (10th-90th percentile
    spread within LATENCY_CONSTANT_MAX_SPREAD_PCT of the median, over LATENCY_CONSTANT_MIN_GAPS gaps or more):
    something outside the trace holds the kernels."""
    p50 = split.latency_p50_ns
    return (p50 is not None and p50 >= LATENCY_LARGE_MIN_US * 1000 and split.latency_gaps >= LATENCY_CONSTANT_MIN_GAPS
            and 100.0 * (split.latency_p90_ns - split.latency_p10_ns) <= LATENCY_CONSTANT_MAX_SPREAD_PCT * p50)


def wait_call(split) -> tuple[str, int] | None:
    """The stream-wait call behind the most waits, and how many such calls there are, or None."""
    if split is None or not split.wait_calls:
        return None
    top = next(iter(split.wait_calls))
    return top, sum(split.wait_calls.values())


def dependency(f, dev) -> str:
    """The GPU waited on the device: advice for the part of that time that leads (dependency_part)."""
    part, split = dependency_part(dev), dev.dependency_split
    if part == "turnaround":
        return ("Nothing waits here: the gaps are the GPU's own turnaround between back-to-back kernels; only fewer, "
                "longer kernels (merged work, CUDA graphs) remove it.")
    if part == "launch_latency":
        ahead = ("Queue work ahead: launch asynchronously and do not synchronize before each launch, so the next "
                 "kernel is already queued when the one before ends and its launch-to-start latency overlaps that "
                 "kernel.")
        if not constant_latency(split):
            return ahead
        return ("Look outside this process: the kernels start the same long delay after each launch with the "
                "GPU empty, which this capture cannot explain — check for other processes on the GPU (`nvidia-smi`), "
                "MPS or time-slicing, and profile every process on it (GPU context switches: `--gpuctxsw=true`). "
                + ahead)
    call = wait_call(split)
    other = " and the other GPUs this one waits on" if f.multi_gpu else ""
    if call is not None:
        return (f"Check the {call[1]} stream waits (`{call[0]}`){other}: each makes the next kernel wait on the "
                "device for another stream's work; record the events as early as the data is ready and wait only "
                "where it is needed.")
    if f.multi_gpu:
        return ("Look at what these kernels wait for on the other GPUs this one waits on (peer copies, collectives, "
                "events across devices): overlap that work with this GPU's own, or balance the stages so neither "
                "waits.")
    return ("Shorten the chain of dependencies these kernels wait for on the device (the edges between graph "
            "nodes): the kernels were queued and waited.")


def unknown(f) -> str:
    if f.runs.profile.has_table("runtime"):
        return ("Trace every thread that launches work: these kernels have no launch call in the capture (another "
                "process or thread, or CUDA graphs traced as a whole: `--cuda-graph-trace=node`).")
    return "Capture with CUDA API tracing (`nsys profile -t cuda,nvtx`) so the gaps can be attributed."


def migrations(f) -> str:
    done = practices.prefetch(f)
    if done:  # prefetching is in place, yet pages still migrate on demand
        return (f"{done[0].upper() + done[1:]}, yet pages still migrate on demand: prefetch to the GPU that runs the "
                "kernel, on its stream and before it (`cudaMemPrefetchAsync(ptr, bytes, device, stream)`), pin the "
                "arrays there (`cudaMemAdvise` with `cudaMemAdviseSetPreferredLocation`), or move the hot arrays to "
                "device memory (`cudaMalloc`) with explicit copies.")
    if f.family == "openacc":
        return ("Move the hot arrays out of managed memory: explicit data regions (`!$acc data copyin(...)`) instead "
                "of `-gpu=managed`, or prefetch them before the compute regions.")
    if f.family == "openmp_offload":
        return ("Move the hot arrays out of managed memory: explicit data regions (`#pragma omp target data "
                "map(to: ...)`) instead of `-gpu=managed`, or prefetch them before the target regions.")
    if f.family == "stdpar":
        return ("Stop the page migrations: " + RESIDENT["stdpar"] + ".")
    return ("Stop page faults in the kernels: prefetch managed memory before use (`cudaMemPrefetchAsync`), set its "
            "preferred location (`cudaMemAdvise`), or switch the hot arrays to device memory and explicit copies.")


def tail(f, lead: str | None, call: str | None = None) -> str:
    """The GPU's tail (after its last kernel): advice by what fills most of it (idle.tail_fillers: ``lead`` the
    kind, ``call`` the OS call of an ``output`` or ``os_call`` lead)."""
    if lead == "migrations":
        return migrations(f)
    if lead == "copies":
        return ("Overlap the final copies with the last kernels: copy results back in chunks on another stream as "
                "they are ready.")
    if lead == "other_gpus":
        return ("Balance the work across GPUs (data shards, pipeline stages) so this GPU does not finish early and "
                "wait for the others.")
    if lead == "output":
        return (f"Not a GPU problem: the program writes its output ({name(call)}) after its last kernel, and the GPU "
                "has little to gain. To shorten the run, write on another thread (or asynchronously) while the GPU "
                "still computes, write less, or leave the teardown out of the capture.")
    if lead == "os_call":
        return (f"The program is inside {name(call)} calls after its last kernel: that host work, not the GPU, ends "
                "the captured window; move it off the critical path or out of the capture.")
    if lead == "host":
        return ("Host code ends the captured window after the last kernel: move that work off the critical path "
                "(overlap it with GPU work), or leave it out of the capture.")
    return "Look at what the program does after its last kernel (host code, I/O): it ends the captured window."


def transfers(f, gpu: int | None = None) -> str:
    """Copies keep the GPU busier than its kernels: the copy remedy that saves the most."""
    return remedies.copies(f, gpu)[0]


def communication(f) -> str:
    return _by_family(f.family, {
        "pytorch": "Overlap communication with compute: DDP gradient bucketing (`bucket_cap_mb`), FSDP prefetching "
                   "or asynchronous collectives, with NCCL kernels on their own stream.",
        "default": "Run the collectives asynchronously on their own stream and overlap them with independent compute "
                   "(e.g. all-reduce each layer's gradients during the backward pass).",
    })


# -- the kernels ----------------------------------------------------------------------------------

def small_kernels(f) -> str:
    if not graphs_fit(f) or practices.readback(f):  # already in graphs, or a readback a graph cannot cross
        return _by_family(f.family, {
            "pytorch": "Fuse the small kernels (`torch.compile`) so fewer, larger kernels each fill the GPU.",
            "jax": "Let XLA fuse more: jit larger functions so fewer, bigger kernels run.",
            "default": "Fuse the small kernels, so fewer, larger kernels each fill the GPU.",
        })
    return _by_family(f.family, {
        "pytorch": "Fuse the small kernels (`torch.compile`) or capture the sequence in a CUDA graph, so fewer "
                   "launches each fill the GPU.",
        "jax": "Let XLA fuse more: jit larger functions so fewer, bigger kernels run.",
        "julia": "Fuse broadcasts and batch small operations so each kernel fills the GPU.",
        "openacc": "Merge small loops into fewer compute regions over more data (`collapse`, larger loops).",
        "openmp_offload": "Merge small loops into fewer target regions over more data (`collapse`, larger loops).",
        "stdpar": "Fuse the small parallel algorithms into fewer over more elements each, so each kernel fills "
                  "the GPU.",
        "default": "Fuse the small kernels or capture them in a CUDA graph, so fewer launches each fill the GPU.",
    })


def under_parallelized(f, row, sm_count: int) -> str:
    what = (f"{name(row.name)} runs {row.grid} blocks of {row.block} threads" if row.grid and row.block else
            f"{name(row.name)} runs too few blocks")
    return _by_family(f.family, {
        "openacc": f"Give the loop more parallelism: {what}; use `gang vector` on the outer loops, `collapse(n)` or "
                   "more gangs (`num_gangs`).",
        "openmp_offload": f"Give the loop more parallelism: {what}; use `teams distribute parallel for` with enough "
                          "teams (`num_teams`) and `collapse(n)`.",
        "julia": f"Launch enough blocks: {what}; set `blocks = cld(n, threads)` in `@cuda`.",
        "stdpar": f"Give the algorithm more parallelism: {what}; run it over more elements at once (one algorithm "
                  "over the whole range instead of one per row).",
        "default": f"Launch enough blocks to fill the GPU: {what}; size the grid to the data (one thread per "
                   "element, e.g. `(n + 255) / 256` blocks of `256`) or use a grid-stride loop over at least "
                   "twice as many blocks as SMs.",
    })


_REDUCED_PRECISION = re.compile(r"bf16|fp16|f16|half|\bh\d|_h_|hmma|tf32|fp8|e4m3|e5m2|int8|i8|s16816|16816|"
                                r"tensorop|wgmma|nvjet", re.IGNORECASE)
# Kernel names of fused attention: FlashAttention, cuDNN / apex / xformers fused multi-head attention.
_FUSED_ATTENTION = re.compile(r"flash|fmha|fused_attn|_attn_fwd|_attn_bwd|cudnn.*mha|mem_efficient", re.IGNORECASE)
_MEMORY_BOUND = ("normalization", "softmax", "reduction", "elementwise")


def gpu_model(f):
    """The model of the scope's GPUs (measure/gpu_models.py) when they all are one known model, else None: no
    capability is claimed for a GPU the table does not know."""
    names = {d.gpu_name for d in f.overview.devices if d.kernel_count}
    models = {model_of(n) for n in names}
    return models.pop() if len(models) == 1 and None not in models else None


def precisions(model) -> list[str]:
    """The reduced-precision tensor-core formats ``model`` has, widest first; [] for an unknown model or one
    without tensor cores."""
    if model is None or not model.tensor_cores:
        return []
    return (["TF32", "bf16"] if model.bf16 else []) + ["FP16"] + (["FP8"] if model.fp8 else [])


def _gemm(f) -> str:
    """Matrix multiplies not in reduced precision: the formats this GPU has (precisions), in the program's terms."""
    model = gpu_model(f)
    formats = precisions(model)
    if model is not None and not model.tensor_cores:
        return (f"The {model.name} has no tensor cores: use a tuned library GEMM (cuBLAS) and make fewer, larger "
                "matrix multiplies.")
    if not formats:  # unknown GPU: no format named that it may not have
        return ("Run the matrix multiplies on tensor cores in a lower precision the GPU supports (see its compute "
                "capability), with dimensions that are multiples of `16`.")
    if f.family == "pytorch":
        how = ("bf16 autocast (`torch.autocast`) or TF32 (`torch.backends.cuda.matmul.allow_tf32 = True`)"
               if "bf16" in formats else "FP16 autocast (`torch.autocast(dtype=torch.float16)`)")
        fp8 = ", or FP8 (Transformer Engine) where accuracy allows" if "FP8" in formats else ""
        return f"Run the matrix multiplies on tensor cores: {how}{fp8}, with dimensions that are multiples of `16`."
    named = (["TF32", "bf16/FP16"] if "bf16" in formats else ["FP16"]) + (["FP8"] if "FP8" in formats else [])
    return (f"Run the matrix multiplies on tensor cores: lower precision ({', '.join(named)}) and dimensions that "
            "are multiples of `16`.")


def kernels(f, family: str | None, names: str = "") -> str:
    """GPU-bound: make the kernels of ``family`` cheaper (measure/labels.py families; ``names``: the kernels'
    full names, checked for precision and layout already in use; default the top kernels'). Lower-precision
    formats only as the GPU model has them (precisions)."""
    names = names or " ".join(k.full_name for k in (f.top.kernels if f.top else []))
    if f.family == "tensorrt":
        low = "INT8/FP8" if "FP8" in precisions(gpu_model(f)) else "INT8"
        return (f"The engine's kernels are already fused and tuned: a faster run needs lower precision ({low} "
                "where accuracy allows), a newer TensorRT or a smaller model.")
    if family == "GEMM":
        if _REDUCED_PRECISION.search(names):
            return ("The matrix multiplies already run on tensor cores in reduced precision: make fewer, larger "
                    "ones (batch small GEMMs) with dimensions that are multiples of `64`.")
        return _gemm(f)
    if family == "convolution":
        nhwc = "nhwc" in names.lower()
        return _by_family(f.family, {
            "pytorch": "Let cuDNN pick the fastest algorithms (`torch.backends.cudnn.benchmark = True`)"
                       + ("" if nhwc else ", use channels-last tensors") + " and lower precision.",
            "default": "Let cuDNN search for the fastest convolution algorithms"
                       + ("" if nhwc else ", use the NHWC layout") + " and lower precision.",
        })
    if family == "attention" and _FUSED_ATTENTION.search(names):  # fused attention already: say so
        return ("Attention already runs in fused kernels (FlashAttention / fused multi-head attention): a faster step "
                "needs fewer or shorter sequences (no padded tokens, packed batches) or a newer attention kernel; "
                f"profile one launch to see what limits it: `{ncu_command(f, family_row(f, family))}`.")
    if family == "attention":
        half = "bf16" if "bf16" in precisions(gpu_model(f)) else "FP16"
        return _by_family(f.family, {
            "pytorch": "Use the fastest fused attention kernel (FlashAttention or `scaled_dot_product_attention`) in "
                       f"{half}, and avoid padded tokens.",
            "default": "Use a fused attention kernel (FlashAttention, cuDNN fused attention) in reduced precision.",
        })
    if family in _MEMORY_BOUND:
        return _by_family(f.family, {
            "pytorch": "Fuse these memory-bound kernels with their neighbours (`torch.compile`, fused optimizers and "
                       "norms) so the data is read once.",
            "jax": "These memory-bound kernels are what XLA left unfused: jit larger functions so more of them fuse.",
            "default": "Fuse these memory-bound kernels with their neighbours so the data is read once.",
        })
    if family == "copy":
        return ("Avoid device-side copies: keep data contiguous in the layout the kernels want, with fewer "
                "transposes and concatenations.")
    if family == "NCCL":
        return communication(f)
    spread = spread_family(f)
    if spread is not None and spread.family == family:  # the family, not one instantiation, is the lever
        return (f"Speed up the {name(spread.family)} kernels, all its instantiations: see what limits them (memory "
                "throughput, occupancy or instruction mix) with Nsight Compute, one launch of the family: "
                f"`{ncu_command(f, family=spread)}`.")
    return ("Speed up the top kernel first: see what limits it (memory throughput, occupancy or instruction mix) "
            f"with Nsight Compute, one launch: `{ncu_command(f, family_row(f, family))}`.")


def spread_family(f):
    """The top kernel family (top_kernels' families row) when its time is spread over its instantiations: several
    of them and at least twice the top kernel's share of the kernel time, so the family, not its largest
    instantiation nor the top kernel, is what to speed up; else None."""
    fams = f.top.families if f.top else []
    top = f.top.kernels[0] if f.top and f.top.kernels else None
    fam = fams[0] if fams else None
    if fam is None or top is None or fam.instantiations < 2 or fam.pct < 2 * top.pct:
        return None
    return fam


def family_row(f, family: str | None):
    """The largest kernel (top_kernels row) of ``family``: what to profile when the advice is about that family,
    which need not hold the largest kernel overall; None (the top kernel) when no row is of it."""
    from dashcam.measure.labels import kernel_family

    rows = f.top.kernels if f.top else []
    return next((k for k in rows if family and kernel_family(k.name, k.full_name) == family), None)


def ncu_command(f, row=None, family=None) -> str:
    """The Nsight Compute command that profiles one steady launch of ``row`` (default the scope's top kernel) or,
    given a top_kernels families row, of any kernel of that ``family``: the name as a regular expression, the
    first launch skipped (lazy loading and caches warm up in it) when there are several, the program as the
    capture recorded it. A generic wrapper's instantiation (``par_ranged2d_kernel<PdV_kernel>``, names.py) is
    matched on the demangled name (``--kernel-name-base demangled``), where its distinguishing argument is,
    so the command profiles that instantiation and not whichever launch of the wrapper comes next; any other
    kernel on its function name (ncu's default base)."""
    row = row or (f.top.kernels[0] if f.top and f.top.kernels and family is None else None)
    target, launches = ((family.family, family.kernel_count) if family is not None
                        else (row.name, row.count) if row is not None else ("KERNEL", 0))
    wrapped = re.match(r"^([\w:]+)<(\w[\w:]*)>$", target)
    if wrapped:
        base, arg = wrapped.group(1).split("::")[-1], wrapped.group(2)
        select = f"--kernel-name-base demangled --kernel-name 'regex:{re.escape(base)}<.*{re.escape(arg)}'"
        out = f"{base}_{arg}"
    else:
        base = re.sub(r"[<(].*$", "", target).split("::")[-1]
        select, out = f"--kernel-name regex:{re.escape(base)}", base
    skip = 1 if launches > 1 else 0
    program = (f.workload.command or "").strip().replace("`", "'")[:200] or "./your_program"
    return (f"ncu {select} --launch-skip {skip} --launch-count 1 --set full "
            f"-o {re.sub(r'[^A-Za-z0-9_]', '_', out)[:60]} {program}")


# -- the capture ----------------------------------------------------------------------------------

def pre_window_call(f) -> tuple[str, int] | None:
    """The longest CUDA call before the GPU window (capture span: init_call), as (name, ns), when it takes at
    least PRE_WINDOW_CALL_NOTABLE_MS: start-up the window does not hold. Not for a --start/--end window."""
    span = f.workload.span
    windowed = "start_ms" in f.scope or "end_ms" in f.scope
    if windowed or not span.init_call or span.init_ns < PRE_WINDOW_CALL_NOTABLE_MS * 1_000_000:
        return None
    return span.init_call, span.init_ns


def pre_window_words(call: tuple[str, int]) -> str:
    """ "`cudaFree` took 273 ms before the first GPU work (CUDA creates its context in the first calls)"."""
    api, ns = call
    why = " (CUDA creates its context in the first calls)" if re.match(INIT_API + r"|^(cudaMalloc|cuMemAlloc)",
                                                                         api) else ""
    return f"{name(api)} took {duration(ns)} before the first GPU work{why}"


def startup(f) -> str:
    """A cold start: capture the steady state (unless the capture already spans the whole process: then start-up
    is part of what the run costs); then what makes start-up cheaper, by what dominates it."""
    wl = f.workload
    if wl.jit_ns >= wl.module_load_ns + wl.first_launch_ns:
        extra = _by_family(f.family, {
            "pytorch": " Compiled kernels (nvFuser, Triton, `torch.compile`) are cached after the first run.",
            "julia": " The first call of each function compiles: run it once before the profiled part.",
            "jax": " jit compiles each new shape once: warm up with the shapes the run uses.",
            "default": " Kernels compiled at run time (NVRTC) can be cached: compile once and keep the module.",
        })
    else:
        extra = (" CUDA loads a kernel's module on its first launch (lazy loading), once: set "
                 "`CUDA_MODULE_LOADING=EAGER` to load at start-up instead, and build for the GPU's architecture so "
                 "no PTX is JIT-compiled.")
    early = pre_window_call(f)
    if early:
        extra += (f" For the {duration(early[1])} {name(early[0])} before the first GPU work: keep the driver "
                  "loaded (`nvidia-smi -pm 1`) and expose only the GPUs the run uses (`CUDA_VISIBLE_DEVICES`).")
    if wl.span.whole_process:
        return "The capture spans the whole process, so start-up is part of what the run costs." + extra
    return ("Profile the steady state, not the start-up: warm up first, then capture a window of the loop "
            "(`cudaProfilerStart`/`Stop` with `nsys profile --capture-range=cudaProfilerApi`, or `--delay`)." + extra)


def more_capture(f) -> str:
    """Too little GPU work: capture more of the run, unless the capture already spans the whole process (then
    the run itself has little GPU work: give it more)."""
    if f.workload.span.whole_process:
        return ("The capture already spans the whole process, from CUDA's start to its exit, so a longer capture "
                "holds no more GPU work: give the run more of it (a larger problem or more iterations) to diagnose "
                "a steady state.")
    return ("Capture more of the run: a longer window around the steady-state loop (`nsys profile --duration`, "
            "`--capture-range`), so there are enough kernels for a verdict.")


# -- GPU metrics ----------------------------------------------------------------------------------

def sm_underused(f, gpu: int) -> str:
    """Kernels cover the timeline but the SMs are mostly empty (GPU metrics): more blocks where the grids are
    small (small_kernels), else what keeps the top kernel's SMs idle."""
    small = f.device("small_kernels", gpu)
    if small is not None and small.small_time_pct and small.small_time_pct >= 50.0 and small.top_small:
        row = small.top_small[0]
        return under_parallelized(f, row, small.sm_count) if row.under_parallelized else small_kernels(f)
    m = next((d for d in (f.metrics.devices if f.metrics else []) if d.device_id == gpu), None)
    top = m.top_kernels[0] if m and m.top_kernels else None
    dram = top.dram_read_pct if top else None
    which = f"{name(top.name)}" if top else "the top kernel"
    memory = (f"; it reads DRAM at {dram:g} % of peak, so it is memory-bound: cut its memory traffic (fuse it with "
              "its neighbours, better access patterns)" if dram is not None and dram >= 60 else "")
    return (f"Find what leaves the SMs empty in {which} with Nsight Compute (`ncu --set full`): too few blocks or "
            f"warps per SM (launch more blocks, use fewer registers or less shared memory per thread){memory}.")
