"""Remedies for the host side: what the launching thread did in a gap (host code, OS calls, waits, sampled
functions) and the CUDA calls it made (synchronize, host copies, readbacks, allocations, launches, graphs)."""
from __future__ import annotations

import re

from dashcam.findings import practices, remedies
from dashcam.findings.advice.capture import startup
from dashcam.findings.advice.wording import by_family
from dashcam.findings.thresholds import (
    MIN_NAMED_SAMPLES,
    NAMED_CPU_WORK_PCT,
    NAMED_HOST_PCT,
)
from dashcam.measure.labels import is_os_wait
from dashcam.measure.names import short_function_name
from dashcam.text.format import duration, name


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
        return by_family(f.family, {
            "pytorch": "Cut the framework's overhead between kernels: `torch.compile` (fewer, fused kernels) and keep "
                       "Python work out of the step loop; most kernels already run in CUDA graphs.",
            "default": "Cut the framework's overhead between kernels: compile or fuse the step so fewer operations "
                       "are dispatched; most kernels already run in CUDA graphs.",
        })
    if kind == "framework":  # the host time is the framework's own, between its ops
        return by_family(f.family, {
            "pytorch": "Cut the framework's overhead between kernels: `torch.compile` (fewer, fused kernels) or CUDA "
                       "graphs (`torch.compile(mode=\"reduce-overhead\")`), and keep Python work out of the step loop.",
            "default": "Cut the framework's overhead between kernels: compile or fuse the step so fewer operations "
                       "are dispatched, or capture it in a CUDA graph.",
        })
    general = host_remedy(f, dev) or host_code(f)
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
        return by_family(f.family, {
            "pytorch": f"The launching thread waits for input ({call}) between launches: give the DataLoader more "
                       "workers (`num_workers`) and prefetching (`prefetch_factor`, `pin_memory=True`), so the next "
                       "batch is ready when the GPU is.",
            "python": f"The launching thread waits for input ({call}) between launches: read or decode the next "
                      "batch in a background thread or process (prefetch), so it is ready when the GPU is.",
            "default": f"The launching thread waits for input ({call}) between launches: read the next data ahead on "
                       "another thread (or with asynchronous I/O), so it is ready when the GPU is.",
        })
    if state == "os_wait" and re.search(_THREADS, who or ""):
        return by_family(f.family, {
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
        return by_family(f.family, {
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


OVERLAP = {  # how host work overlaps GPU work, per model
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


def host_code(f) -> str:
    if "cpu_sampling" in f.workload.recorded:  # sampled already: the cpu tool shows where the time goes
        return ("The capture's CPU samples show what the launching thread runs between launches "
                f"(`dashcam tool run cpu --arg gaps=true`): {by_family(f.family, OVERLAP)}.")
    if f.family in remedies.PYTHONIC and f.workload.span.whole_process and not f.windowed:
        steps = f.iterations  # a whole process with no repeating step: no loop to move work out of
        if steps is not None and steps.method == "none":
            return ("Profile the Python side between launches (py-spy or `nsys profile --python-sampling=true`): the "
                    "capture holds the whole process and no repeating step, so this is set-up or one-off work "
                    "(imports, tracing, compiling), paid once per process; a longer run, or warming up before the "
                    "part you measure, makes it a smaller share.")
    return by_family(f.family, {
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
    return by_family(f.family, {
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
    return by_family(f.family, {
        "pytorch": f"{done[0].upper() + done[1:]}: test the value every few steps instead of every step (`.item()` "
                   "syncs), or keep the test on the GPU (`torch.where`), so the launches run ahead.",
        "default": f"{done[0].upper() + done[1:]}: test it every few iterations instead of every one (launch several "
                   "iterations between checks), or keep the test on the device, so the launches run ahead of the "
                   "GPU.",
    })


def allocations(f) -> str:
    return by_family(f.family, {
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
        return by_family(f.family, {
            "pytorch": "Cut the remaining launch overhead: fuse the small eager kernels (`torch.compile`); most "
                       "kernels already run in CUDA graphs.",
            "default": "Cut the remaining launch overhead: fuse the small eager kernels; most kernels already run in "
                       "CUDA graphs.",
        })
    if in_graphs(f):
        return by_family(f.family, {
            "pytorch": "Capture the eager launches between the graph replays in a CUDA graph too "
                       "(`torch.compile(mode=\"reduce-overhead\")` over more of the step, or `torch.cuda.graphs`).",
            "default": "Capture the eager launches between the graph launches in a CUDA graph too "
                       "(`cudaStreamBeginCapture`, `cudaGraphLaunch`), or fuse them.",
        })
    return by_family(f.family, {
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
