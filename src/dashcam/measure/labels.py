"""What a name says: the kind of an NVTX range, a CUDA API call or a kernel, by pattern.

Used to read a capture's own words: an NVTX range open while the host kept the GPU waiting
(JIT compilation, MPI, a framework op, data loading), an API call that loads modules, the
programming model a kernel name betrays. Each pattern is matched case-insensitively with
``re.search``; the first kind whose pattern matches wins.
"""
from __future__ import annotations

import re

# NVTX range labels (group labels: names.nvtx_group_labels) by what the host is doing inside them.
NVTX_KINDS: tuple[tuple[str, str], ...] = (
    # compiling code at run time: NVRTC, a framework's JIT/codegen (nvFuser, XLA, Triton, Numba), autotuning
    ("jit", r"nvrtc|\bjit\b|jit_compile|compil|codegen|ptxas|autotun|lowering|\blower\b"),
    # MPI calls (nsys --trace=mpi writes them as NVTX ranges in the "MPI" domain) and other host-side comms
    ("mpi", r"^p?mpi_|^mpix_|\bshmem_"),
    ("nccl", r"^nccl"),
    ("data", r"dataloader|data_loader|data loading|\bdataset|collate|prefetch|load_batch|next_batch"),
    ("framework", r"^aten::|^autograd::|^torch\.|^c10d::|^profilerstep|^optimizer\.|^xla"),
)

# CUDA API calls that load code onto the GPU (module / library loading, lazy loading on a first launch).
MODULE_LOAD_API = r"^cu(da)?(Module|Library)Load|^cuModuleGetFunction$|^cudaGetFuncBySymbol$|^cuLink"
# Kernel launch calls (runtime, driver, graphs).
LAUNCH_API = r"^cu(da)?LaunchKernel|^cudaLaunchCooperativeKernel|^cuLaunchCooperativeKernel|^cu(da)?GraphLaunch" \
             r"|^cudaLaunchKernelExC|^cuLaunchKernelEx"


# A feature of the program found by its names wherever the capture records it (issue 25: a feature absent from
# one source is looked for in the others before it is denied): per feature, a pattern per source (NVTX labels,
# OS runtime functions, CUDA API functions, kernel names; None: that source never holds it), and the capture
# options that record it when nothing does.
FEATURES: dict[str, dict[str, str | None]] = {
    "mpi": {"nvtx": dict(NVTX_KINDS)["mpi"], "osrt": r"^p?mpix?_", "api": None, "kernels": None},
    "nccl": {"nvtx": dict(NVTX_KINDS)["nccl"], "osrt": None, "api": r"^nccl", "kernels": r"^nccl|nccl_kernel"},
    "jit": {"nvtx": dict(NVTX_KINDS)["jit"], "osrt": r"^nvrtc|^nvJitLink", "api": MODULE_LOAD_API + r"|^nvrtc",
            "kernels": None},
}
FEATURE_CAPTURE = {
    "mpi": "`nsys profile --trace=mpi` (with `--mpi-impl=openmpi` or `mpich`) records MPI calls as NVTX ranges",
    "nccl": "`nsys profile --trace=cuda,nvtx` records NCCL's kernels and its NVTX ranges",
    "jit": "`nsys profile --trace=cuda,nvtx,osrt` records module loading; NVRTC itself is not traced: wrap "
           "`nvrtcCompileProgram` in an NVTX range",
}
FEATURE_WORDS = {"mpi": "MPI", "nccl": "NCCL", "jit": "run-time compilation (JIT, NVRTC, module loading)"}


def nvtx_kind(label: str | None) -> str | None:
    """``jit``, ``mpi``, ``nccl``, ``data``, ``framework`` or None for an NVTX label."""
    if not label:
        return None
    for kind, pattern in NVTX_KINDS:
        if re.search(pattern, label, re.IGNORECASE):
            return kind
    return None


# Kernel families (first match wins; tested on the short name, then on the full demangled name, lower case).
KERNEL_FAMILIES: tuple[tuple[str, str], ...] = (
    ("NCCL", "nccl"),
    ("attention", "flash|attention|attn|fmha|sdpa"),
    ("convolution", "conv2d|conv3d|convolve|convolution|dgrad|wgrad|fprop"),
    ("GEMM", "gemm|cutlass|cublas|nvjet|matmul|xmma|wgmma"),
    ("normalization", "layer_?norm|rms_?norm|batch_?norm|group_?norm|instance_?norm"),
    ("softmax", "softmax"),
    ("reduction", "reduce|reduction"),
    ("elementwise", "elementwise|vectorized"),
    ("copy", "copy|transpose|concat|catarray"),
)
FAMILY_NAMES = {f for f, _ in KERNEL_FAMILIES}


def kernel_family(short: str | None, full: str | None = None) -> str:
    """The family of a kernel (``KERNEL_FAMILIES`` on the short name, then the full name), else its short name."""
    for text in (short, full):
        low = (text or "").lower()
        for family, pattern in KERNEL_FAMILIES:
            if re.search(pattern, low):
                return family
    return short or full or "<unnamed kernel>"


# OS runtime calls (OSRT_API names) a thread blocks in, waiting for something outside it: a file descriptor
# (poll, select, epoll, reads, receives, accept), another thread (futexes, condition variables, semaphores,
# mutexes, joins, barriers), a child process, or time (sleeps, yields). Other OS runtime calls (ioctl, mmap,
# open, write, ...) are work the thread asked of the kernel. nsys traces these libc/pthread functions
# (--trace=osrt) and records a call when it lasts longer than its threshold (1 us by default).
OS_WAIT_CALLS = (r"^(?:p?poll|p?select|pselect6|epoll_p?wait2?|read|readv|pread(?:64)?|preadv2?|recv|recvfrom|"
                 r"recvmsg|recvmmsg|accept4?|connect|futex|pthread_cond_(?:timed|clock)?wait|"
                 r"sem_(?:timed|clock)?wait|pthread_mutex_(?:timed|clock)?lock|pthread_rwlock_\w*lock|"
                 r"pthread_spin_lock|pthread_join|pthread_barrier_wait|sleep|usleep|nanosleep|clock_nanosleep|"
                 r"sched_yield|wait|waitpid|waitid|wait3|wait4|msgrcv|semop|semtimedop|sigwait\w*|sigsuspend|"
                 r"pause|fread|fgets|getline|getdelim|flock|lockf|fsync|fdatasync|msync)(?:64)?$")


# Threads the CUDA driver, CUPTI or nsys itself start inside the program's process (named so in ThreadNames):
# their OS runtime calls (a CUPTI worker's sem_wait for the whole run, the event handler's poll) are the tools'
# waiting, not the program's work. Unnamed threads and every other name are the program's.
SUPPORT_THREAD_NAMES = (r"^(?:\[NSys[^\]]*\]|nsys[\w-]*|CUPTI\b.*|cuda-EvtHandlr|cuda0\d+|UVM .*|\*\d[A-Za-z]\w*|"
                        r"NVIDIA\b.*)$")


def is_support_thread(name: str | None) -> bool:
    """Whether a thread's name is one of CUDA's, CUPTI's or nsys's own threads (``SUPPORT_THREAD_NAMES``)."""
    return bool(name) and re.search(SUPPORT_THREAD_NAMES, name) is not None


def is_os_wait(call: str | None) -> bool:
    """Whether an OS runtime call is one a thread blocks in waiting (``OS_WAIT_CALLS``)."""
    return bool(call) and re.search(OS_WAIT_CALLS, call) is not None


# Call-stack frames of the CUDA runtime, driver and the profiler itself (by module, or by symbol when the
# runtime is linked statically: __cudart<n>, cudaXxx / cuXxx entry points, the cudaError cudaXxx<T>(...)
# templates of cuda_runtime.h, nvcc's __device_stub__ launch stubs). The calling function of a CUDA call is
# the first resolved frame above the outermost of them (cpu_source.caller).
CUDA_FRAME_MODULE = r"(?:^|/)(?:libcuda|libcudart|libcupti|libnvToolsExt|libnvtx\w*|libToolsInjection\w*)[^/]*$"
# Frames of the C library, the dynamic loader, the kernel and language runtimes (libstdc++, the Python
# interpreter): the function that made an OS runtime call is the first frame above them (cpu_source.os_caller).
SYSTEM_FRAME_MODULE = (r"(?:^|/)(?:libc|libpthread|libdl|librt|libm|libstdc\+\+|libgcc_s|ld-linux[\w.-]*|ld|"
                       r"libpython[\d.]*|python[\d.]*)(?:[-.][^/]*)?$|^\[(?:vdso|kernel\.kallsyms|Unknown)\]$")
CUDA_FRAME_SYMBOL = r"^(?:__cudart\d+|cuda[A-Z]\w*|cu[A-Z]\w*|cudaError(?:_t)?\s+cuda\w*<.*|__device_stub__.*)$"
