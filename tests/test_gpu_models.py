"""The GPU model table (measure/gpu_models.py): names as exports record them resolve to their published figures."""
from __future__ import annotations

import pytest

from dashcam.measure.gpu_models import NEAR_PEAK, model_of


@pytest.mark.parametrize(("recorded", "name", "compute", "link_gbps", "fp8"), [
    ("NVIDIA A100-SXM4-80GB", "A100 80GB", (8, 0), 25.0, False),
    ("NVIDIA A100-SXM4-40GB", "A100 40GB", (8, 0), 25.0, False),
    ("NVIDIA H100 80GB HBM3", "H100 SXM", (9, 0), 50.0, True),
    ("NVIDIA H100 PCIe", "H100 PCIe", (9, 0), 50.0, True),
    ("NVIDIA H200", "H200", (9, 0), 50.0, True),
    ("NVIDIA GH200 480GB", "GH200", (9, 0), 450.0, True),
    ("NVIDIA GeForce RTX 3080", "RTX 3080", (8, 6), 25.0, False),
    ("NVIDIA GeForce RTX 4090", "RTX 4090", (8, 9), 25.0, True),
    ("Tesla V100-SXM2-16GB", "V100", (7, 0), 12.5, False),
    ("Tesla T4", "T4", (7, 5), 12.5, False),
    ("NVIDIA L4", "L4", (8, 9), 25.0, True),
])
def test_recorded_names_resolve(recorded, name, compute, link_gbps, fp8):
    m = model_of(recorded)
    assert (m.name, m.compute, m.host_link_gbps, m.fp8) == (name, compute, link_gbps, fp8)


def test_capabilities_follow_the_architecture():
    assert model_of("NVIDIA GeForce GTX 1660 Ti").tensor_cores is False  # Turing without tensor cores
    assert model_of("NVIDIA GeForce RTX 2080 Ti").tensor_cores is True
    assert (model_of("Tesla V100-PCIE-32GB").bf16, model_of("NVIDIA A10G").bf16) == (False, True)
    assert model_of("NVIDIA GeForce GTX 1080 Ti").tensor_cores is False


def test_unknown_models_claim_nothing():
    assert model_of("Some Future GPU") is None and model_of(None) is None and model_of("") is None
    assert 0 < NEAR_PEAK < 1
