"""The capture span: what of the process the capture holds, against the GPU window.

Before anyone advises "capture more" or "a longer ``--duration``", the capture itself says whether there is
more to capture. The host span runs from the first CUDA API or OS runtime call, NVTX range (or CPU sample) to the
last one; the GPU window (definitions.py) from the first kernel, copy or memset to the last. (nsys' PROCESSES
table records no process start or end in any export seen, so the calls bound the span.)

The capture spans the process from its start to its exit (``whole_process``) when:

- its first CUDA call is one the CUDA runtime or driver makes when it starts (``INIT_API``: ``cuInit``,
  ``cuModuleGetLoadingMode``, ``cudaFree`` (``cudaFree(0)``), ``cudaSetDevice``, ``cudaGetDeviceCount``...),
  or any call lasting CONTEXT_CALL_MIN_NS or more (it created the context: a CuPy program's first
  ``cudaMalloc``, 365 ms), or nsys said while capturing that its CUDA injection initialized (DIAGNOSTIC_EVENT
  "CUDA injection initialized successfully.") at or after it said "Profiling has started." (an OpenACC or OpenMP
  runtime creates the context in calls CUPTI does not trace; in a delayed or ranged capture that message comes
  before the start, at a negative time): the capture saw CUDA come up, so nothing of the GPU work came before it;
- no ``cudaProfilerStart``/``Stop`` call is traced (a capture range cuts the run at those calls);
- the host's last call ends at or after the end of the GPU window: the capture went on after the last GPU work
  (the program's teardown), so it was not cut while the GPU still worked.

``init_call`` / ``init_ns``: the longest CUDA call that ends before the GPU window starts (the CUDA context
creation, ``cuInit`` or the runtime's first call): start-up time the window does not hold. ``creates_context``: it
created the CUDA context — it is the first CUDA call, or the first after CUDA's own quick start-up queries
(``INIT_API`` calls under CONTEXT_CALL_MIN_NS: CUDA 12's ``cuModuleGetLoadingMode``) and lasts CONTEXT_CALL_MIN_NS.

Whole-profile facts, computed once per opened profile.
"""
from __future__ import annotations

import re
from dataclasses import asdict, dataclass

from dashcam.profile.cpu_source import source
from dashcam.profile.diagnostics import diagnostics

INIT_API = (r"^(cuInit|cuModuleGetLoadingMode|cuDriverGetVersion|cuGetProcAddress\w*|cuDeviceGet\w*|cuCtxCreate\w*|"
            r"cuDevicePrimaryCtx\w+|cudaGetDevice\w*|cudaSetDevice\w*|cudaInitDevice|cudaFree|cudaRuntimeGetVersion|"
            r"cudaDriverGetVersion|cudaDeviceGetAttribute|cudaGetDeviceProperties\w*|cudaChooseDevice)$")
PROFILER_RANGE_API = r"^cu(da)?ProfilerSt(art|op)"
# A first CUDA call this long created the CUDA context (a warm driver takes tens of ms; a call on a live context,
# even a large allocation, takes well under this): CUDA started inside the capture, whatever the call.
CONTEXT_CALL_MIN_NS = 50_000_000
PROFILING_STARTED = "profiling has started"  # nsys' diagnostics, lower-cased, as every version seen writes them
CUDA_INJECTED = "cuda injection initialized"


@dataclass(frozen=True)
class CaptureSpan:
    host_start_ns: int | None  # first CUDA API / OS runtime call, NVTX range or CPU sample; None without host data
    host_end_ns: int | None
    gpu_start_ns: int | None  # the GPU window; None without GPU activity
    gpu_end_ns: int | None
    first_cuda_call: str | None  # its name, version suffix stripped
    profiler_range: bool  # cudaProfilerStart/Stop calls traced
    init_call: str | None  # the longest CUDA call ending before the GPU window
    init_ns: int  # its length (0 without one)
    # init_call is the first CUDA call and one that starts CUDA (by name or length): it created the CUDA context.
    # (Where only nsys' injection message shows CUDA started, the context came up in calls the trace lacks.)
    creates_context: bool
    whole_process: bool
    why: str

    @property
    def before_gpu_ns(self) -> int:
        """Host time captured before the GPU window."""
        if self.host_start_ns is None or self.gpu_start_ns is None:
            return 0
        return max(0, self.gpu_start_ns - self.host_start_ns)

    @property
    def host_ns(self) -> int:
        """The host span's length: the program's run as the capture holds it (0 without host rows)."""
        if self.host_start_ns is None or self.host_end_ns is None:
            return 0
        return max(0, self.host_end_ns - self.host_start_ns)

    @property
    def gpu_share_pct(self) -> float | None:
        """The GPU window as % of the host span (None without both)."""
        if not self.host_ns or self.gpu_start_ns is None or self.gpu_end_ns is None:
            return None
        return round(100.0 * (self.gpu_end_ns - self.gpu_start_ns) / self.host_ns, 3)

    def as_dict(self) -> dict:
        return {**asdict(self), "before_gpu_ns": self.before_gpu_ns, "host_ns": self.host_ns,
                "gpu_share_pct": self.gpu_share_pct}


def capture_span(profile) -> CaptureSpan:
    """The capture span of ``profile`` (see the module docstring), memoized on it."""
    if "capture_span" in profile.memo:
        return profile.memo["capture_span"]
    con = profile.con
    first = con.execute('SELECT name, start, "end" - start FROM api ORDER BY start, "end" LIMIT 1').fetchall()
    last = con.execute('SELECT max("end") FROM api_calls').fetchall()
    ends = [int(last[0][0])] if last and last[0][0] is not None else []
    starts = [int(first[0][1])] if first else []
    os_span = source(profile).span()
    if os_span:
        starts.append(os_span[0])
        ends.append(os_span[1] - 1)
    if profile.has_table("nvtx"):  # the program's own ranges are its host activity too (CuPy's run to 822 ms)
        lo, hi = con.execute('SELECT min(start), max(coalesce("end", start)) FROM nvtx').fetchall()[0]
        if lo is not None:
            starts.append(int(lo))
            ends.append(int(hi))
    host = (min(starts), max(ends)) if starts and ends else (None, None)
    gpu = profile.full_window or (None, None)
    name = first[0][0] if first else None
    ranged = bool(con.execute("SELECT count(*) FROM api_names WHERE regexp_matches(name, ?)",
                              [PROFILER_RANGE_API]).fetchall()[0][0])
    init_call, init_ns, init_start = None, 0, None
    if gpu[0] is not None:
        row = con.execute(f'SELECT name, "end" - start AS d, start FROM api WHERE "end" <= {int(gpu[0])} '
                          "ORDER BY d DESC, start LIMIT 1").fetchall()
        if row:
            init_call, init_ns, init_start = row[0][0], int(row[0][1]), int(row[0][2])
    # CUDA started in the capture: its first call is one CUDA makes as it starts, or it took so long that it created
    # the context (the runtime creates it in whatever call comes first: cudaMalloc, often)
    first_starts = bool(name and (re.match(INIT_API, name) or int(first[0][2] or 0) >= CONTEXT_CALL_MIN_NS))
    # the context is created in the first call that is not one of CUDA's own quick start-up queries (CUDA 12's
    # runtime first calls cuModuleGetLoadingMode, a microsecond; the cudaMalloc or cudaHostRegister after it then
    # takes hundreds of ms): the longest call before the window is that call when only such queries precede it
    before = con.execute(f'SELECT name, "end" - start FROM api WHERE start < {int(init_start)} ORDER BY start '
                         'LIMIT 1000').fetchall() if init_start is not None else []
    after_queries = init_ns >= CONTEXT_CALL_MIN_NS and all(
        re.match(INIT_API, n or "") and int(d or 0) < CONTEXT_CALL_MIN_NS for n, d in before)
    creates_context = first_starts and init_start is not None and (init_start == int(first[0][1]) or after_queries)
    injected = bool(name) and not first_starts and _cuda_injected_in_capture(profile)
    starts_with_cuda = first_starts or injected
    outlasts = host[1] is not None and gpu[1] is not None and host[1] >= gpu[1]
    whole = starts_with_cuda and not ranged and outlasts
    if whole:
        why = (f"the first CUDA call ({name}) starts CUDA and the host outlasts the GPU work" if not injected else
               "nsys' CUDA injection initialized after profiling started, and the host outlasts the GPU work")
    elif name is None:
        why = "no CUDA API call traced"
    elif not starts_with_cuda:
        why = f"the first CUDA call ({name}) is not one that starts CUDA: the capture began after"
    elif ranged:
        why = "a capture range (cudaProfilerStart/Stop) bounds it"
    else:
        why = "the capture ends before the GPU work does"
    span = CaptureSpan(host_start_ns=host[0], host_end_ns=host[1], gpu_start_ns=gpu[0], gpu_end_ns=gpu[1],
                       first_cuda_call=name, profiler_range=ranged, init_call=init_call, init_ns=init_ns,
                       creates_context=creates_context,
                       whole_process=whole, why=why)
    profile.memo["capture_span"] = span
    return span


def _cuda_injected_in_capture(profile) -> bool:
    """nsys said its CUDA injection initialized at or after it said profiling started (see the module docstring)."""
    said = {}
    for d in diagnostics(profile):
        t = d.text.lower()
        for key in (PROFILING_STARTED, CUDA_INJECTED):
            if t.startswith(key):
                said[key] = min(said.get(key, d.first_ns), d.first_ns)
    return len(said) == 2 and said[CUDA_INJECTED] >= said[PROFILING_STARTED]
