"""Theoretical occupancy (measure/occupancy.py) against the figures NVIDIA's occupancy calculator gives, and a
kernel's launch shapes and occupancy in kernel_detail and its answer, on a planted program."""
from __future__ import annotations

import pytest

from dashcam.agent.ask import ask
from dashcam.measure.occupancy import occupancy
from dashcam.profile import Profile
from dashcam.testing.builder import ExportBuilder
from dashcam.tools.kernel_detail import Params, run

US = 1_000
MS = 1_000_000


@pytest.mark.parametrize("cc, threads, regs, shared, blocks, pct, limit", [
    ((8, 9), 512, 56, 0, 2, 66.7, "registers"),          # 1792 registers a warp x 16 warps: 2 blocks of 48 warps
    ((8, 0), 256, 247, 120 * 1024, 1, 12.5, "registers"),  # 7936 a warp x 8; shared memory allows 1 too
    ((9, 0), 128, 255, 64 * 1024, 2, 12.5, "registers"),   # 8192 a warp x 4 warps: 2; shared memory: 3
    ((8, 6), 1024, 32, 0, 1, 66.7, "threads"),            # 32 warps a block, 48 slots
    ((8, 0), 32, 16, 0, 32, 50.0, "blocks"),              # one warp a block, 32 blocks at most
    ((9, 0), 256, 32, 100 * 1024, 2, 25.0, "shared memory"),  # 228 KiB / (100 + 1) KiB
])
def test_calculator_figures(cc, threads, regs, shared, blocks, pct, limit):
    o = occupancy(cc, threads, regs, shared)
    assert (o.blocks_per_sm, o.pct, o.limit) == (blocks, pct, limit)


def test_unknown_architecture_claims_nothing():
    assert occupancy((12, 0), 256, 32, 0) is None
    assert occupancy(None, 256, 32, 0) is None


@pytest.fixture(scope="module")
def program(tmp_path_factory):
    """`./attn` on an A100: `attn_kernel` with 247 registers and 120 KiB of shared memory, 256 threads a block,
    launched 4 times on grid (2048,1,1) for 10 ms and 4 times on grid (64,1,1) for 1 ms."""
    b = ExportBuilder("2024")
    b.gpu(0, "NVIDIA A100-SXM4-80GB", 108)
    b.process(700, "./attn")
    for i in range(8):
        s = i * 20 * MS
        big = i % 2 == 0
        b.launch(0, s, s + 10 * US, s + 20 * US, s + 20 * US + (10 * MS if big else 1 * MS), name="attn_kernel",
                 pid=700, grid=(2048, 1, 1) if big else (64, 1, 1), block=(256, 1, 1), registers=247,
                 shared=(0, 120 * 1024))
    return Profile.open(b.write(tmp_path_factory.mktemp("occ") / "attn.sqlite"), progress=False)


def test_kernel_detail_shapes_and_occupancy(program):
    r = run(program, Params(kernel="attn_kernel"))
    assert [(s.grid, s.launches, s.median_ns) for s in r.shapes] == [([2048, 1, 1], 4, 10 * MS), ([64, 1, 1], 4, MS)]
    assert (r.registers_per_thread, r.shared_mem_bytes, r.gpu_model) == (247, 120 * 1024, "A100 80GB")
    assert (r.occupancy_pct, r.occupancy_blocks_per_sm, r.occupancy_limit) == (12.5, 1, "registers")


def test_answer_says_shapes_and_occupancy(program):
    a = ask("is my attn_kernel using the GPU well?", program, offline=True)
    assert a.grounded, a.ungrounded_numbers
    assert "Its launches come in 2 shapes that take different times" in a.answer
    assert "median 10 ms" in a.answer and "median 1 ms" in a.answer
    said = ("Its blocks use 247 registers per thread and 120 KiB of shared memory: on the A100 80GB at most 1 block "
            "fits on an SM at once, 12.5 % of its warp slots (theoretical occupancy), limited by registers.")
    assert said in a.answer
    assert "WarpStateStats" in a.answer
