"""What a GPU model can do, for remedies and savings: its architecture (compute capability), whether it has tensor
cores and FP8, its memory bandwidth and its link to the host, by the model name the export records
(``TARGET_INFO_GPU.name``, e.g. "NVIDIA A100-SXM4-80GB").

The figures are NVIDIA's published specifications. ``host_link_gbps`` is what pinned host copies achieve over the
link in one direction, not the link's signalling rate: PCIe 3.0 x16 signals 15.75 GB/s and pinned copies reach
about 12.5; PCIe 4.0 x16 31.5 and about 25; PCIe 5.0 x16 63 and about 50 (the packet overhead takes the rest);
Grace Hopper's NVLink-C2C 450 GB/s a direction. A copy at or above NEAR_PEAK of that figure is as fast as the link
allows: only moving less data makes it shorter.

A model not in the table is unknown (``None``): no saving or capability is claimed for it.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

# Pinned host copies in one direction, GB/s, by host link.
LINK_GBPS = {"pcie3": 12.5, "pcie4": 25.0, "pcie5": 50.0, "nvlink-c2c": 450.0}
LINK_NAMES = {"pcie3": "PCIe 3.0 x16", "pcie4": "PCIe 4.0 x16", "pcie5": "PCIe 5.0 x16", "nvlink-c2c": "NVLink-C2C"}
# A copy rate at least this share of the link's achievable rate is at the link's peak (pinning or async changes
# little): 90 % leaves room for the spread between machines of the same model.
NEAR_PEAK = 0.90
# A pinned copy's fixed cost on the device (DMA set-up): even a few bytes take about this long, so a small copy
# gains little from pinning and a flag read back costs its latency, not its bytes.
PINNED_COPY_LATENCY_NS = 2_000


@dataclass(frozen=True)
class GpuModel:
    name: str  # as people say it: "A100", "RTX 3080"
    compute: tuple[int, int]  # compute capability (8, 0)
    memory_gbps: float  # peak DRAM bandwidth, GB/s
    link: str  # LINK_GBPS key

    @property
    def tensor_cores(self) -> bool:
        """Volta (7.0) and later have tensor cores (Turing's GTX 16xx parts do not: listed as 7.5 without them)."""
        return self.compute >= (7, 0) and not self.name.startswith("GTX 16")

    @property
    def fp8(self) -> bool:
        """FP8 tensor-core math: Ada (8.9), Hopper (9.0) and later."""
        return self.compute >= (8, 9)

    @property
    def bf16(self) -> bool:
        """bf16 tensor-core math: Ampere (8.0) and later."""
        return self.compute >= (8, 0)

    @property
    def host_link_gbps(self) -> float:
        return LINK_GBPS[self.link]

    @property
    def link_name(self) -> str:
        return LINK_NAMES[self.link]


# (pattern on the recorded name, model). First match wins: the specific patterns come before the general ones.
MODELS: tuple[tuple[str, GpuModel], ...] = (
    (r"GH200", GpuModel("GH200", (9, 0), 4000.0, "nvlink-c2c")),
    (r"H200", GpuModel("H200", (9, 0), 4800.0, "pcie5")),
    (r"H100.*NVL", GpuModel("H100 NVL", (9, 0), 3900.0, "pcie5")),
    (r"H100.*PCIe", GpuModel("H100 PCIe", (9, 0), 2000.0, "pcie5")),
    (r"H100|H800", GpuModel("H100 SXM", (9, 0), 3350.0, "pcie5")),
    (r"B200", GpuModel("B200", (10, 0), 8000.0, "pcie5")),
    (r"B100", GpuModel("B100", (10, 0), 8000.0, "pcie5")),
    (r"A100.*80GB.*PCIe|A100.*PCIe.*80GB|A100 80GB PCIe", GpuModel("A100 80GB PCIe", (8, 0), 1935.0, "pcie4")),
    (r"A100.*80GB", GpuModel("A100 80GB", (8, 0), 2039.0, "pcie4")),
    (r"A100|A800", GpuModel("A100 40GB", (8, 0), 1555.0, "pcie4")),
    (r"\bA30\b", GpuModel("A30", (8, 0), 933.0, "pcie4")),
    (r"\bA40\b", GpuModel("A40", (8, 6), 696.0, "pcie4")),
    (r"\bA10G\b", GpuModel("A10G", (8, 6), 600.0, "pcie4")),
    (r"\bA10\b", GpuModel("A10", (8, 6), 600.0, "pcie4")),
    (r"\bA2\b", GpuModel("A2", (8, 6), 200.0, "pcie4")),
    (r"L40S", GpuModel("L40S", (8, 9), 864.0, "pcie4")),
    (r"\bL40\b", GpuModel("L40", (8, 9), 864.0, "pcie4")),
    (r"\bL4\b", GpuModel("L4", (8, 9), 300.0, "pcie4")),
    (r"V100", GpuModel("V100", (7, 0), 900.0, "pcie3")),
    (r"\bT4\b", GpuModel("T4", (7, 5), 320.0, "pcie3")),
    (r"P100", GpuModel("P100", (6, 0), 732.0, "pcie3")),
    (r"RTX 6000 Ada", GpuModel("RTX 6000 Ada", (8, 9), 960.0, "pcie4")),
    (r"RTX A6000", GpuModel("RTX A6000", (8, 6), 768.0, "pcie4")),
    (r"RTX A5000", GpuModel("RTX A5000", (8, 6), 768.0, "pcie4")),
    (r"RTX A4000", GpuModel("RTX A4000", (8, 6), 448.0, "pcie4")),
    (r"RTX 5090", GpuModel("RTX 5090", (12, 0), 1792.0, "pcie5")),
    (r"RTX 5080", GpuModel("RTX 5080", (12, 0), 960.0, "pcie5")),
    (r"RTX 4090", GpuModel("RTX 4090", (8, 9), 1008.0, "pcie4")),
    (r"RTX 4080", GpuModel("RTX 4080", (8, 9), 717.0, "pcie4")),
    (r"RTX 4070", GpuModel("RTX 4070", (8, 9), 504.0, "pcie4")),
    (r"RTX 4060", GpuModel("RTX 4060", (8, 9), 272.0, "pcie4")),
    (r"RTX 4050", GpuModel("RTX 4050 Laptop", (8, 9), 192.0, "pcie4")),  # a laptop part only
    (r"RTX 3090", GpuModel("RTX 3090", (8, 6), 936.0, "pcie4")),
    (r"RTX 3080", GpuModel("RTX 3080", (8, 6), 760.0, "pcie4")),
    (r"RTX 3070", GpuModel("RTX 3070", (8, 6), 448.0, "pcie4")),
    (r"RTX 3060", GpuModel("RTX 3060", (8, 6), 360.0, "pcie4")),
    (r"Quadro RTX [68]000|TITAN RTX", GpuModel("Quadro RTX 8000", (7, 5), 672.0, "pcie3")),
    (r"Quadro RTX 5000", GpuModel("Quadro RTX 5000", (7, 5), 448.0, "pcie3")),
    (r"TITAN V\b", GpuModel("TITAN V", (7, 0), 653.0, "pcie3")),
    (r"RTX 2080 Ti", GpuModel("RTX 2080 Ti", (7, 5), 616.0, "pcie3")),
    (r"RTX 2080", GpuModel("RTX 2080", (7, 5), 448.0, "pcie3")),
    (r"RTX 2070", GpuModel("RTX 2070", (7, 5), 448.0, "pcie3")),
    (r"GTX 16\d0", GpuModel("GTX 16 series", (7, 5), 192.0, "pcie3")),
    (r"GTX 1080 Ti", GpuModel("GTX 1080 Ti", (6, 1), 484.0, "pcie3")),
    (r"GTX 10\d0", GpuModel("GTX 10 series", (6, 1), 256.0, "pcie3")),
)


def model_of(name: str | None) -> GpuModel | None:
    """The model a recorded GPU name is, or None when the table does not know it."""
    if not name:
        return None
    for pattern, model in MODELS:
        if re.search(pattern, name, re.IGNORECASE):
            return model
    return None


def pinned_copy_ns(nbytes: int, link_gbps: float) -> int:
    """How long a copy of ``nbytes`` takes from pinned memory over a link whose pinned copies reach ``link_gbps``
    (1 GB/s = 1 byte/ns): the fixed latency plus the bytes at that rate."""
    return PINNED_COPY_LATENCY_NS + round(nbytes / link_gbps)
