"""Planted profiles: each builds an export whose right answers are known by construction.

``demo`` is the example the repo ships (``examples/demo.sqlite``); the others are the
signatures tests and evals check. All times are ns; helpers keep the arithmetic visible.
"""
from __future__ import annotations

from pathlib import Path

from .fixtures import ExportBuilder

US = 1_000
MS = 1_000_000


def demo(path: str | Path) -> Path:
    """Two ranks of a small training loop, 6 steps of about 20 ms.

    GPU 0 (pid 1000) is busy: a pinned 0.5 ms HtoD copy, then 40 back-to-back kernels of 400 us.
    GPU 1 (pid 1001) stalls: each step starts with an 8 ms *pageable* HtoD copy issued by a
    synchronous cudaMemcpy (the dataloader), and ends in a 3 ms cudaStreamSynchronize.
    """
    b = ExportBuilder("2024")
    b.gpu(0, "NVIDIA H100 80GB HBM3", 132)
    b.gpu(1, "NVIDIA H100 80GB HBM3", 132)
    b.process(1000, "python train.py --rank 0")
    b.process(1001, "python train.py --rank 1")
    names = ["ampere_sgemm_128x64_tn", "vectorized_elementwise_kernel", "layer_norm_fwd_kernel",
             "softmax_warp_forward"]
    for rank, pid in ((0, 1000), (1, 1001)):
        t = 1 * MS
        for step in range(6):
            step_start = t
            b.nvtx(f"train_step {step}", step_start, step_start + 20 * MS, pid=pid, registered=(rank == 1))
            if rank == 0:
                b.copy_call(0, t, t + 50 * US, t + 20 * US, t + 520 * US, 64 << 20, "HtoD", pinned=True, pid=pid)
                k0 = t + 600 * US
            else:
                b.copy_call(1, t, t + 8 * MS + 30 * US, t + 10 * US, t + 8 * MS + 10 * US, 512 << 20, "HtoD",
                            pinned=False, pid=pid, api_name="cudaMemcpy")
                k0 = t + 8 * MS + 100 * US
            n = 40 if rank == 0 else 20
            api_t = k0 - 80 * US
            for i in range(n):
                ks = k0 + i * 400 * US
                b.launch(rank, api_t, api_t + 6 * US, ks, ks + 400 * US, name=names[i % 4], pid=pid)
                api_t += 10 * US
            last_end = k0 + n * 400 * US
            if rank == 1:
                c = b.api("cudaStreamSynchronize", api_t, last_end + 20 * US, pid=pid)
                b.sync_event(1, api_t, last_end + 20 * US, corr=c, pid=pid)
            t = step_start + 20 * MS + 200 * US
    return b.write(path)


if __name__ == "__main__":  # python -m dashcam.scenarios OUT.sqlite
    import sys

    print(demo(sys.argv[1] if len(sys.argv) > 1 else "examples/demo.sqlite"))
