"""A planted program whose questions time an activity by its common name (issue 25: "how much time does the optimizer
take?", "how long do the GEMMs take?"), with every figure known by construction. Times are ns.

``training_activities``: a PyTorch-style training run `python train.py` (pid 9000) on one H100 (132 SMs), MPI
around it. Four steps of 10 ms from 10 ms; step k starts at s = 10 + 10 k ms:

- NVTX ``forward`` [s, s + 3 ms]: the GEMM `ampere_sgemm_128x64_tn` [s + 0.2, s + 1.2] ms (1 ms) and the attention
  kernel `flash_fwd_kernel` [s + 1.3, s + 2.8] ms (1.5 ms);
- the attention kernel `flash_bwd_kernel` [s + 3.5, s + 5.5] ms (2 ms), in no NVTX range (no backward range);
- NVTX ``Optimizer.step#AdamW.step`` [s + 6, s + 8] ms (2 ms), launching `multi_tensor_apply_kernel`
  [s + 6.2, s + 6.7] ms (0.5 ms).

So the window is [10.2, 46.7] ms = 36.5 ms; kernel time 4 x 5 ms = 20 ms: GEMM 4 ms (20 %), attention 14 ms (70 %:
fwd 6 ms and bwd 8 ms), kernels named like the backward pass 8 ms (40 %), `multi_tensor_apply_kernel` 2 ms (10 %);
optimizer ranges 4 x 2 ms = 8 ms, of which 6.7 ms inside the window (18.356 %): the last, [46, 48] ms, crosses its
end (1.3 ms outside). OS runtime: `pwrite64` 3 calls of 2 ms at [50, 52],
[53, 55], [56, 58] ms (the output written after the last kernel: 6 ms outside the window) and one `read` of 1 ms at
[30, 31] ms (inside). NVTX ``MPI_Init`` [1, 9] ms (8 ms, before the window) and ``MPI_Allreduce`` [44, 45] ms.
"""
from __future__ import annotations

from pathlib import Path

from dashcam.testing.builder import ExportBuilder

US = 1_000
MS = 1_000_000
PID = 9000
STEPS = 4
GEMM = "ampere_sgemm_128x64_tn"
FWD = "flash_fwd_kernel"
BWD = "flash_bwd_kernel"
ADAM = "multi_tensor_apply_kernel"
OPTIMIZER = "Optimizer.step#AdamW.step"


def training_activities(path: str | Path) -> Path:
    """The training run of the module docstring: 4 steps of forward (GEMM + flash_fwd), flash_bwd and the optimizer
    (AdamW ranges, multi_tensor_apply_kernel); MPI_Init before the window, pwrite64 after it. Window [10.2, 46.7] ms;
    kernel time 20 ms (GEMM 20 %, attention 70 %)."""
    b = ExportBuilder("2024")
    b.gpu(0, "NVIDIA H100 80GB HBM3", 132)
    b.process(PID, "python")
    b.command("python", "train.py")
    b.nvtx("MPI_Init", 1 * MS, 9 * MS, pid=PID)
    for k in range(STEPS):
        s = (10 + 10 * k) * MS
        b.nvtx("forward", s, s + 3 * MS, pid=PID)
        b.launch(0, s + 100 * US, s + 110 * US, s + 200 * US, s + 1200 * US, name=GEMM, pid=PID)
        b.launch(0, s + 1100 * US, s + 1110 * US, s + 1300 * US, s + 2800 * US, name=FWD, pid=PID)
        b.launch(0, s + 3300 * US, s + 3310 * US, s + 3500 * US, s + 5500 * US, name=BWD, pid=PID)
        b.nvtx(OPTIMIZER, s + 6 * MS, s + 8 * MS, pid=PID)
        b.launch(0, s + 6100 * US, s + 6110 * US, s + 6200 * US, s + 6700 * US, name=ADAM, pid=PID)
    b.nvtx("MPI_Allreduce", 44 * MS, 45 * MS, pid=PID)
    b.osrt("read", 30 * MS, 31 * MS, pid=PID)
    for t in (50, 53, 56):
        b.osrt("pwrite64", t * MS, (t + 2) * MS, pid=PID)
    return b.write(path)


ACTIVITY_PROGRAMS = {"training_activities": training_activities}
WITH_HOST_DATA = frozenset({"training_activities"})  # it records OS runtime calls
