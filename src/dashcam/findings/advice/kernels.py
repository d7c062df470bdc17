"""Remedies for the kernels: small and under-parallelized launches, GEMMs, attention, memory-bound families,
and the Nsight Compute command for the kernel or family to profile."""
from __future__ import annotations

import re

from dashcam.findings import practices
from dashcam.findings.advice.device import communication
from dashcam.findings.advice.host import graphs_fit
from dashcam.findings.advice.wording import by_family
from dashcam.measure.gpu_models import model_of
from dashcam.measure.names import wrapper_parts
from dashcam.text.format import name, percent


def small_kernels(f) -> str:
    if not graphs_fit(f) or practices.readback(f):  # already in graphs, or a readback a graph cannot cross
        return by_family(f.family, {
            "pytorch": "Fuse the small kernels (`torch.compile`) so fewer, larger kernels each fill the GPU.",
            "jax": "Let XLA fuse more: jit larger functions so fewer, bigger kernels run.",
            "default": "Fuse the small kernels, so fewer, larger kernels each fill the GPU.",
        })
    return by_family(f.family, {
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
    return by_family(f.family, {
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


# Fused attention kernels by generation, from their names: the first FlashAttention and apex's / NVIDIA's FMHA
# (`fmha_fwd_loop_kernel`, `fmha_bwd_q_dk_dv_loop_seqparallel_kernel`), FlashAttention-2 (`flash_fwd_kernel`,
# `flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel`), and Hopper's FlashAttention-3 and cuDNN attention.
_ATTENTION_FA1 = re.compile(r"\bfmha_(?:fwd|bwd|dgrad)|fmha_fprop|fmhalib", re.IGNORECASE)
_ATTENTION_FA2 = re.compile(r"\bflash_(?:fwd|bwd)_", re.IGNORECASE)
_ATTENTION_NEWEST = re.compile(r"sm90|hopper|flash3|flash_attn_3|FlashAttnFwdSm|cudnn", re.IGNORECASE)


def _attention_now(names: str) -> str:
    if _ATTENTION_NEWEST.search(names):
        return "FlashAttention-3 / cuDNN attention"
    if _ATTENTION_FA2.search(names):
        return "FlashAttention-2"
    if _ATTENTION_FA1.search(names):
        return "first-generation FlashAttention / FMHA kernels"
    return "FlashAttention / fused multi-head attention"


def _newer_attention(f, names: str) -> str:
    """The newer fused attention kernel the GPU allows, first (the lever when the kernels are the lever), or ""."""
    model = gpu_model(f)
    hopper = model is not None and model.compute >= (9, 0)
    if _ATTENTION_NEWEST.search(names):
        return ""
    if _ATTENTION_FA1.search(names):
        return ("first move to FlashAttention-2 (`scaled_dot_product_attention` in `torch>=2.2`), reported about twice "
                "as fast" + ("; on this Hopper GPU, FlashAttention-3 or cuDNN attention" if hopper else "") + "; then ")
    if _ATTENTION_FA2.search(names) and (hopper or model is None):
        return (("first move to Hopper's " if hopper else "on a Hopper GPU, first move to ")
                + "FlashAttention-3 (`flash_attn_interface`) or cuDNN attention (`SDPBackend.CUDNN_ATTENTION`), "
                "reported up to twice as fast; then ")
    return ""


# Elementwise kernels beside GEMMs from this share of the kernel time: fusing them into the GEMMs is a lever too
EPILOGUE_MIN_PCT = 20.0


def _epilogue(f) -> str:
    """GEMMs with elementwise kernels taking EPILOGUE_MIN_PCT of the kernel time beside them: those read the GEMMs'
    output again; fused into the GEMMs' epilogues they cost almost nothing (healthy_1pct: an `elementwise_add` as
    long as each GEMM)."""
    fam = next((x for x in (f.top.families if f.top else []) if x.family == "elementwise"), None)
    if fam is None or fam.pct < EPILOGUE_MIN_PCT:
        return ""
    how = by_family(f.family, {"pytorch": "`torch.compile` does it", "jax": "XLA does it under `jit`",
                               "default": "cuBLASLt epilogues take bias and activation; CUTLASS takes any"})
    return (f" The elementwise kernels beside them take {percent(fam.pct)} of the kernel time (led by "
            f"{name(fam.top_kernel)}): fuse them into the GEMMs' epilogues ({how}) so the GEMMs' output is not read "
            "again.")


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
                    "ones (batch small GEMMs) with dimensions that are multiples of `64`." + _epilogue(f))
        return _gemm(f) + _epilogue(f)
    if family == "convolution":
        nhwc = "nhwc" in names.lower()
        return by_family(f.family, {
            "pytorch": "Let cuDNN pick the fastest algorithms (`torch.backends.cudnn.benchmark = True`)"
                       + ("" if nhwc else ", use channels-last tensors") + " and lower precision.",
            "default": "Let cuDNN search for the fastest convolution algorithms"
                       + ("" if nhwc else ", use the NHWC layout") + " and lower precision.",
        })
    if family == "attention" and _FUSED_ATTENTION.search(names):  # fused attention already: say so
        return (f"Attention already runs in fused kernels ({_attention_now(names)}): {_newer_attention(f, names)}"
                "shorter sequences where batches are padded; "
                f"profile one launch to see what limits it: `{ncu_command(f, family_row(f, family))}`.")
    if family == "attention":
        half = "bf16" if "bf16" in precisions(gpu_model(f)) else "FP16"
        return by_family(f.family, {
            "pytorch": "Use the fastest fused attention kernel (FlashAttention or `scaled_dot_product_attention`) in "
                       f"{half}, and avoid padded tokens.",
            "default": "Use a fused attention kernel (FlashAttention, cuDNN fused attention) in reduced precision.",
        })
    if family in _MEMORY_BOUND:
        return by_family(f.family, {
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
    return spread_family_in(f.top)


def spread_family_in(top_result):
    """spread_family on a top_kernels result (``ask "which kernel should I optimize first?"`` reads its own)."""
    fams = top_result.families if top_result else []
    top = top_result.kernels[0] if top_result and top_result.kernels else None
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
    wrapped = wrapper_parts(target)
    if wrapped:
        base, arg = wrapped
        select = f"--kernel-name-base demangled --kernel-name 'regex:{re.escape(base)}<.*{re.escape(arg)}'"
        out = f"{base}_{arg}"
    else:
        base = re.sub(r"[<(].*$", "", target).split("::")[-1]
        select, out = f"--kernel-name regex:{re.escape(base)}", base
    skip = 1 if launches > 1 else 0
    program = (f.workload.command or "").strip().replace("`", "'")[:200] or "./your_program"
    return (f"ncu {select} --launch-skip {skip} --launch-count 1 --set full "
            f"-o {re.sub(r'[^A-Za-z0-9_]', '_', out)[:60]} {program}")
