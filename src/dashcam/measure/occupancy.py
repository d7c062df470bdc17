"""Theoretical occupancy of a kernel launch: how many of an SM's warp slots its blocks can fill at once, and what
limits it — the figures NVIDIA's occupancy calculator gives, from what the export records of each launch (threads
per block, registers per thread, shared memory per block) and the GPU's compute capability (measure/gpu_models.py).

Per SM, resident blocks are the fewest of: the warp slots over the block's warps; the register file over the
block's registers (allocated per warp in units of REGISTER_UNIT); the shared memory over the block's (plus the
driver's reserved 1 KB a block from compute capability 8.0); the resident-block limit. Occupancy is those blocks'
warps over the warp slots. Shared memory is taken at the SM's largest carveout, so the figure is the best the
launch allows. A compute capability not in ``LIMITS`` is unknown: no occupancy is claimed for it.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

WARP = 32
REGISTER_UNIT = 256  # registers are allocated to a warp in units of 256 (a thread's count rounded up to 8)
REGISTERS_PER_SM = 65_536


@dataclass(frozen=True)
class SmLimits:
    warps: int            # resident warps per SM
    blocks: int           # resident blocks per SM
    shared_kb: int        # shared memory per SM at the largest carveout, KB
    reserved_kb: int = 0  # shared memory the driver reserves per block, KB


# By compute capability (NVIDIA's CUDA C++ Programming Guide, technical specifications per compute capability).
LIMITS: dict[tuple[int, int], SmLimits] = {
    (6, 0): SmLimits(64, 32, 64),
    (6, 1): SmLimits(64, 32, 96),
    (7, 0): SmLimits(64, 32, 96),
    (7, 5): SmLimits(32, 16, 64),
    (8, 0): SmLimits(64, 32, 164, 1),
    (8, 6): SmLimits(48, 16, 100, 1),
    (8, 9): SmLimits(48, 24, 100, 1),
    (9, 0): SmLimits(64, 32, 228, 1),
    (10, 0): SmLimits(64, 32, 228, 1),
}


@dataclass(frozen=True)
class Occupancy:
    blocks_per_sm: int  # resident blocks of this launch per SM
    warps_per_sm: int
    max_warps: int
    pct: float          # warps_per_sm / max_warps, %
    limit: str          # "registers", "shared memory", "threads" (warp slots) or "blocks" (the resident-block limit)


def occupancy(compute: tuple[int, int] | None, threads_per_block: int, registers_per_thread: int | None,
              shared_bytes: int | None) -> Occupancy | None:
    """The theoretical occupancy (module docstring); None for an unknown compute capability or a launch the SM
    cannot hold."""
    lim = LIMITS.get(tuple(compute)) if compute else None
    if lim is None or threads_per_block <= 0:
        return None
    warps = math.ceil(threads_per_block / WARP)
    by = {"threads": lim.warps // warps, "blocks": lim.blocks}
    if registers_per_thread:
        per_warp = math.ceil(registers_per_thread * WARP / REGISTER_UNIT) * REGISTER_UNIT
        by["registers"] = REGISTERS_PER_SM // (per_warp * warps)
    if shared_bytes:
        by["shared memory"] = (lim.shared_kb * 1024) // (shared_bytes + lim.reserved_kb * 1024)
    order = ("registers", "shared memory", "threads", "blocks")  # the first of equal limits names it
    limit = min(by, key=lambda k: (by[k], order.index(k)))
    blocks = by[limit]
    if blocks <= 0:
        return None
    return Occupancy(blocks_per_sm=blocks, warps_per_sm=blocks * warps, max_warps=lim.warps,
                     pct=round(100.0 * blocks * warps / lim.warps, 1), limit=limit)
