"""Why one CUDA API call takes long (findings/advice/calls.py): the process's first CUDA call that creates the
context, a cudaHostRegister that pins a buffer, a launch that is not slow — on a planted program whose calls are
known by construction."""
from __future__ import annotations

import pytest

from dashcam.agent.ask import ask
from dashcam.findings.advice.calls import call_cost
from dashcam.profile import Profile
from dashcam.testing.builder import ExportBuilder

US = 1_000
MS = 1_000_000


@pytest.fixture(scope="module")
def program(tmp_path_factory):
    """`./app` (pid 500): its first CUDA call, cudaMalloc [1, 301] ms, creates the context; cudaHostRegister
    [310, 510] ms pins a buffer; then 3 launches of `scale` (10 us calls) from 520 ms and 2 cudaMalloc of 8 us."""
    b = ExportBuilder("2024")
    b.gpu(0, "NVIDIA A100-SXM4-80GB", 108)
    b.process(500, "./app")
    b.api("cudaMalloc", 1 * MS, 301 * MS, pid=500)
    b.api("cudaHostRegister", 310 * MS, 510 * MS, pid=500)
    for i in range(3):
        s = 520 * MS + i * MS
        b.launch(0, s, s + 10 * US, s + 20 * US, s + 520 * US, name="scale", pid=500)
    b.api("cudaMalloc", 524 * MS, 524 * MS + 8 * US, pid=500)
    b.api("cudaMalloc", 525 * MS, 525 * MS + 8 * US, pid=500)
    b.launch(0, 526 * MS, 526 * MS + 10 * US, 526 * MS + 20 * US, 527 * MS, name="scale", pid=500)
    return Profile.open(b.write(tmp_path_factory.mktemp("calls") / "app.sqlite"), progress=False)


def test_catalogue():
    assert "page-locks" in call_cost("cudaHostRegister")[0]
    assert "page-locks" in call_cost("cuMemHostRegister_v2")[0]
    assert "module" in call_cost("cuLaunchKernel")[0]
    assert call_cost("cudaStreamCreate") is None


def test_first_call_creating_the_context(program):
    a = ask("why is the first cudaMalloc 300 ms?", program, offline=True)
    assert a.grounded, a.ungrounded_numbers
    assert "Its longest call, 300 ms before the first GPU work, is slow because it is the process's first CUDA " \
           "call that needs the GPU" in a.answer
    assert "nvidia-smi -pm 1" in a.answer


def test_pinning_an_existing_buffer(program):
    a = ask("cudaHostRegister 为什么这么慢?", program, offline=True)
    assert a.grounded, a.ungrounded_numbers
    assert "Its calls outside the window take 200 ms" in a.answer, a.answer
    assert "page-locks (pins) host memory" in a.answer and "cudaMallocHost" in a.answer


def test_a_fast_call_is_said_not_slow(program):
    a = ask("is cudaLaunchKernel slow here?", program, offline=True)
    assert "No call of `cudaLaunchKernel` is slow here: the longest takes 10 µs." in a.answer, a.answer
    assert "It launched 4 kernels in the window: `scale` 4." in a.answer  # no "among others" for the only kernel
    assert "module" not in a.answer


def test_explained_when_asked_or_notable(program):
    """A call of 10 ms or more is explained whatever the question says; a quick one only when asked why."""
    a = ask("how many times is cudaHostRegister called?", program, offline=True)
    assert "page-locks" in a.answer
    a = ask("how many times is cudaLaunchKernel called?", program, offline=True)
    assert "slow" not in a.answer and "module" not in a.answer


def test_the_context_is_created_after_cudas_own_start_up_query(tmp_path):
    """CUDA 12's runtime first calls cuModuleGetLoadingMode (1 us); the cudaHostRegister after it takes 300 ms: it
    created the context (saxpy-mpi's shape), so it is said as that, in the answer and in the summary's note."""
    from dashcam.findings import diagnose
    from dashcam.profile.capture_span import capture_span

    b = ExportBuilder("2024")
    b.gpu(0, "NVIDIA A100-SXM4-80GB", 108)
    b.process(600, "./saxpy")
    b.api("cuModuleGetLoadingMode", 1 * MS, 1 * MS + 1 * US, pid=600, driver=True)
    b.api("cudaHostRegister", 2 * MS, 302 * MS, pid=600)
    b.api("cudaHostRegister", 303 * MS, 304 * MS, pid=600)
    for i in range(3):
        s = 310 * MS + i * MS
        b.launch(0, s, s + 10 * US, s + 20 * US, s + 520 * US, name="saxpy", pid=600)
    p = Profile.open(b.write(tmp_path / "saxpy.sqlite"), progress=False)
    span = capture_span(p)
    assert (span.init_call, span.init_ns, span.creates_context) == ("cudaHostRegister", 300 * MS, True)
    a = ask("why is cudaHostRegister so slow?", p, offline=True)
    said = "Its longest call, 300 ms before the first GPU work, is slow because it is the process's first CUDA call"
    assert said + " that needs the GPU" in a.answer, a.answer
    assert any("`cudaHostRegister` took 300 ms before the first GPU work (CUDA creates its context" in n
               for n in diagnose(p).notes)
