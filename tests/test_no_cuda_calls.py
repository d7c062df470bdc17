"""A capture with no CUDA call although nsys traced CUDA: the program never reached the GPU (JACC.jl's script failed
on its first line); dashcam says so, with the error the program printed, instead of "profile with CUDA tracing on"."""
from __future__ import annotations

from dashcam.findings import diagnose
from dashcam.profile import Profile
from dashcam.profile.program_output import program_error
from dashcam.testing.builder import ExportBuilder

MS = 1_000_000
ERROR = ('ERROR: LoadError: SystemError: opening file "/home/u/setup.jl": No such file or directory\n'
         "Stacktrace:\n [1] include(mapexpr::Function, mod::Module, _path::String)\n")


def _julia(tmp_path, traced: bool, failed: bool, name: str):
    b = ExportBuilder("2024")
    b.process(300, "julia")
    b.command("julia", "--project=.", "run.jl")
    b.osrt("read", 1 * MS, 2 * MS, pid=300)
    if traced:
        b.capture_option("CAPTURE_EVENT_TYPE", "Cuda")
        b.diagnostic("No CUDA events collected. Does the process use CUDA?", t=5 * MS, severity=2, source=2, pid=300)
    if failed:
        b.program_output("stderr", ERROR, pid=300)
        b.program_output("stdout", "", pid=300)
    return Profile.open(b.write(tmp_path / f"{name}.sqlite"), progress=False)


def test_a_failed_run_under_cuda_tracing(tmp_path):
    p = _julia(tmp_path, traced=True, failed=True, name="failed")
    assert program_error(p) == 'ERROR: LoadError: SystemError: opening file "/home/u/setup.jl": No such file or ' \
                               'directory'
    d = diagnose(p)
    assert (d.verdict, d.findings[0].kind) == ("no_gpu_activity", "cuda_unused")
    assert "CUDA tracing was on, but Julia (CUDA.jl) made no CUDA call in this run" in d.paragraph
    assert "`ERROR: LoadError: SystemError: opening file \"/home/u/setup.jl\"" in d.paragraph
    assert "fix the error it printed" in d.paragraph and "-t cuda" not in d.paragraph


def test_no_cuda_call_and_no_error(tmp_path):
    d = diagnose(_julia(tmp_path, traced=True, failed=False, name="quiet"))
    assert d.findings[0].kind == "cuda_unused" and "never reached its GPU code" in d.paragraph


def test_tracing_off_still_says_turn_it_on(tmp_path):
    d = diagnose(_julia(tmp_path, traced=False, failed=True, name="off"))
    assert d.findings[0].kind == "cpu_only_capture" and "-t cuda,nvtx,osrt" in d.paragraph
