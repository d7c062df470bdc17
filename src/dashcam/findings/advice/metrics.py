"""Remedies that rest on GPU metrics: kernels that cover the timeline while the SMs stay mostly empty."""
from __future__ import annotations

from dashcam.findings.advice.kernels import small_kernels, under_parallelized
from dashcam.text.format import name


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
