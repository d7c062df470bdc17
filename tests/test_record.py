"""``dashcam record`` without a real nsys: the options per goal (from the capture-coverage table), with and without
a GPU, and every error path through a fake nsys (tests/test_record_real.py records for real)."""
from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest

from dashcam.errors import BadParameter, NsysNotFound
from dashcam.profile.record import GOALS, plan_recording, refused_option
from dashcam.testing.builder import ExportBuilder
from dashcam.testing.scenarios import demo

from .conftest import run_cli
from .test_bad_input import assert_one_line_error
from .test_loader import FAKE_NSYS_START

FAKE_NSYS = FAKE_NSYS_START + """with open({log!r}, "a") as f:
    f.write(json.dumps(args) + "\\n")
mode = {mode!r}
if args == ["profile", "--help"]:  # nsys 2024.2 spells it --gpu-metrics-device, newer ones --gpu-metrics-devices
    print("\\t--gpu-metrics-device" + ("=" if mode == "old" else "s=") + "\\n\\t--gpu-metrics-frequency=")
    sys.exit(0)
if args[0] == "export":
    shutil.copyfile({fixture!r}, args[args.index("--output") + 1])
    sys.exit(0)
if mode == "refuse":  # nsys 2024.2's words for an option it does not know, on stdout
    print("unrecognised option '--python-sampling=true'")
    print("\\nusage: nsys profile [<args>] [application] [<application args>]")
    sys.exit(1)
out = next(a for a in args if a.startswith("--output=")).split("=", 1)[1]
print("the program's output")
if mode != "noreport" and mode != "fail_noreport":
    with open(out + ".nsys-rep", "w") as f:
        f.write("a report of " + mode)
if mode in ("fail", "fail_noreport"):
    sys.stderr.write("Traceback (most recent call last):\\n  File \\"train.py\\", line 3\\nValueError: boom\\n")
    sys.exit(3)
if mode == "killed":
    sys.exit(143)
"""


def fake_nsys(folder: Path, mode: str = "ok", fixture: Path | None = None) -> tuple[Path, Path]:
    """A fake ``nsys`` in ``folder/bin`` (profile: behaves as ``mode``; export: copies ``fixture``); returns (the
    nsys, its call log: one JSON argument list a line)."""
    bin_dir = folder / "bin"
    bin_dir.mkdir(exist_ok=True)
    fixture = fixture or demo(folder / "demo.sqlite")
    log = folder / "nsys-calls.log"
    nsys = bin_dir / "nsys"
    nsys.write_text(FAKE_NSYS.format(python=sys.executable, log=str(log), mode=mode, fixture=str(fixture)))
    nsys.chmod(0o755)
    return nsys, log


def record(folder: Path, nsys: Path | None, *args: str, program: tuple[str, ...] = ("/bin/sleep", "0")):
    env = {"DASHCAM_NSYS": str(nsys)} if nsys else {"PATH": str(folder / "empty-bin")}
    return run_cli("record", *args, "--", *program, cache=folder / "cache", cwd=folder, env=env)


def error_line(proc, code: int) -> str:
    """The one-line error ending a record (the program's and nsys's output pass through to stderr before it)."""
    assert "Traceback (most recent call last):\n  File \"/" not in proc.stderr  # no traceback of dashcam's
    assert proc.returncode == code, proc.stderr
    last = proc.stderr.splitlines()[-1]
    assert last.startswith("dashcam: error: "), proc.stderr
    return last


def calls(log: Path) -> list[list[str]]:
    return [json.loads(ln) for ln in log.read_text().splitlines()] if log.exists() else []


# -- the options ------------------------------------------------------------------------------------------------

@pytest.fixture
def nsys_here(tmp_path, monkeypatch):
    nsys, _ = fake_nsys(tmp_path)
    monkeypatch.setenv("DASHCAM_NSYS", str(nsys))
    return nsys


def options(plan) -> list[str]:
    return plan.argv[2:plan.argv.index(next(a for a in plan.argv if a.startswith("--output=")))]


def test_every_goal_traces_cuda_nvtx_and_os_runtime_on_a_gpu_machine(nsys_here, tmp_path):
    for goal in GOALS:
        plan = plan_recording(["/bin/sleep", "1"], goal=goal, gpu=True, cwd=tmp_path)
        trace = options(plan)[0]
        assert trace.startswith("--trace=cuda,nvtx,osrt"), (goal, trace)
        assert plan.missing == [] and plan.notes() == []


@pytest.mark.parametrize("goal, gpu_options, cpu_options", [
    ("idle", [], ["--sample=process-tree", "--cpuctxsw=process-tree"]),
    ("cpu", ["--cudabacktrace=all"], ["--sample=process-tree", "--cpuctxsw=process-tree"]),
    ("memory", ["--cuda-memory-usage=true", "--cuda-um-cpu-page-faults=true", "--cuda-um-gpu-page-faults=true"], []),
    ("metrics", ["--gpu-metrics-devices=all"], []),
    ("nccl", [], []),
])
def test_the_goal_options_and_what_a_machine_without_gpu_leaves_out(nsys_here, tmp_path, goal, gpu_options,
                                                                      cpu_options):
    with_gpu = options(plan_recording(["/bin/sleep", "1"], goal=goal, gpu=True, cwd=tmp_path))
    without = plan_recording(["/bin/sleep", "1"], goal=goal, gpu=False, cwd=tmp_path)
    assert set(gpu_options + cpu_options) <= set(with_gpu)
    assert not set(gpu_options) & set(options(without)) and set(cpu_options) <= set(options(without))
    assert options(without)[0].startswith("--trace=nvtx,osrt") and "cuda" not in options(without)[0]
    assert "cuda_trace" in without.missing
    (note,) = without.notes()
    assert note.startswith("note: no NVIDIA GPU on this machine") and "CUDA API calls and GPU activity" in note
    assert all(o in note for o in gpu_options)
    if goal == "nccl":
        assert options(without)[0] == "--trace=nvtx,osrt,mpi"


def test_gpu_metrics_are_asked_for_the_way_this_nsys_spells_it(tmp_path, monkeypatch):
    nsys, log = fake_nsys(tmp_path, "old")
    monkeypatch.setenv("DASHCAM_NSYS", str(nsys))
    assert "--gpu-metrics-device=all" in options(plan_recording(["/bin/sleep", "1"], goal="metrics", gpu=True,
                                                                cwd=tmp_path))
    # without a GPU the note names the option a GPU machine needs the same way (not one this nsys refuses)
    (note,) = plan_recording(["/bin/sleep", "1"], goal="metrics", gpu=False, cwd=tmp_path).notes()
    assert "(--trace=cuda --gpu-metrics-device=all)" in note
    nsys, _ = fake_nsys(tmp_path / "bin", "ok")
    monkeypatch.setenv("DASHCAM_NSYS", str(nsys))
    assert "--gpu-metrics-devices=all" in options(plan_recording(["/bin/sleep", "1"], goal="metrics", gpu=True,
                                                                 cwd=tmp_path))
    plan_recording(["/bin/sleep", "1"], goal="idle", gpu=True, cwd=tmp_path)
    assert calls(log) == [["profile", "--help"]] * 2  # asked only when an option has an older spelling


def test_a_python_program_gets_the_python_options(nsys_here, tmp_path):
    py = plan_recording([sys.executable, "train.py"], goal="cpu", gpu=True, cwd=tmp_path)
    assert {"--python-sampling=true", "--python-backtrace=cuda"} <= set(options(py))
    assert py.report == tmp_path / "train.nsys-rep"  # named after the script
    other = plan_recording(["/bin/sleep", "1"], goal="cpu", gpu=True, cwd=tmp_path)
    assert not {"--python-sampling=true", "--python-backtrace=cuda"} & set(options(other))
    assert other.report == tmp_path / "sleep.nsys-rep"
    (tmp_path / "sleep.nsys-rep").write_text("an earlier report")
    assert plan_recording(["/bin/sleep", "1"], cwd=tmp_path).report == tmp_path / "sleep-2.nsys-rep"


def test_capture_range_and_duration_options(nsys_here, tmp_path):
    plan = plan_recording(["/bin/sleep", "1"], capture_range="nvtx:train@app", duration=30, gpu=False, cwd=tmp_path)
    assert options(plan)[-5:] == ["--capture-range=nvtx", "--nvtx-capture=train@app", "--capture-range-end=stop",
                                  "--env-var=NSYS_NVTX_PROFILER_REGISTER_ONLY=0", "--duration=30"]
    plan = plan_recording(["/bin/sleep", "1"], capture_range="cudaProfilerApi", gpu=True, cwd=tmp_path)
    assert options(plan)[-2:] == ["--capture-range=cudaProfilerApi", "--capture-range-end=stop"]


@pytest.mark.parametrize("kwargs, words", [
    ({"goal": "speed"}, "--goal must be one of idle, cpu, memory, nccl, metrics, not 'speed'"),
    ({"capture_range": "range:x"}, "--capture-range must be nvtx:NAME"),
    ({"duration": 0}, "--duration must be a positive number of seconds, not 0"),
])
def test_bad_parameters(nsys_here, tmp_path, kwargs, words):
    with pytest.raises(BadParameter, match=words):
        plan_recording(["/bin/sleep", "1"], cwd=tmp_path, **kwargs)


def test_no_nsys_says_how_to_install_it(tmp_path, monkeypatch):
    (tmp_path / "empty-bin").mkdir()
    line = assert_one_line_error(record(tmp_path, None), 27)
    assert "dashcam record runs NVIDIA's nsys, and `nsys` is not on PATH; install NVIDIA Nsight Systems" in line
    assert all(w in line for w in ("NVIDIA's installer", "the CUDA toolkit", "the `nsight-systems` package",
                                   "--nsys or DASHCAM_NSYS"))
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    with pytest.raises(NsysNotFound, match="install NVIDIA Nsight Systems"):  # the same without the CLI
        plan_recording(["/bin/sleep", "1"], cwd=tmp_path)


# -- through the CLI ---------------------------------------------------------------------------------------------

def test_record_prints_the_command_it_ran_then_the_summary(tmp_path):
    nsys, log = fake_nsys(tmp_path)
    proc = record(tmp_path, nsys, "--goal", "memory", "-o", "run")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    (ran,) = calls(log)[:1]
    assert lines[0] == "recording: " + shlex.join([str(nsys), *ran])  # copyable: what nsys was given
    assert ran[-3:] == ["--output=run", "/bin/sleep", "0"]
    assert f"report: {tmp_path / 'run.nsys-rep'}" in lines
    assert any(ln.startswith("dashcam summary:") for ln in lines)  # the demo export's summary
    assert calls(log)[1][:3] == ["export", "--type", "sqlite"]  # exported the way any .nsys-rep is
    assert "the program's output" in proc.stderr  # the program's output passes through, on stderr
    proc = record(tmp_path, nsys, "-o", "run")
    assert "run.nsys-rep: exists; name another report with -o or delete this one" in assert_one_line_error(proc, 11)


def test_ask_answers_the_question_instead_of_the_summary(tmp_path):
    nsys, _ = fake_nsys(tmp_path)
    proc = record(tmp_path, nsys, "--ask", "why is GPU 1 idle?", "-o", "run")
    assert proc.returncode == 0, proc.stderr
    assert "dashcam summary:" not in proc.stdout
    direct = run_cli("ask", "why is GPU 1 idle?", tmp_path / "run.nsys-rep", cache=tmp_path / "cache", cwd=tmp_path,
                     env={"DASHCAM_NSYS": str(nsys)})
    assert direct.stdout.strip() and direct.stdout in proc.stdout  # the same answer as `dashcam ask` on the report


def test_an_option_this_nsys_refuses_is_named(tmp_path):
    nsys, _ = fake_nsys(tmp_path, "refuse")
    line = error_line(record(tmp_path, nsys, "--goal", "cpu", program=(sys.executable, "train.py")), 29)
    assert ("nsys 2024.2.3.38 (" in line and "refused `--python-sampling=true` (\"unrecognised option "
            "'--python-sampling=true'\"); this nsys does not take that option" in line)
    assert not list(tmp_path.glob("*.nsys-rep"))


@pytest.mark.parametrize("said, named", [  # nsys 2024.2's own words (docs/record.md#errors)
    ("unrecognised option '--gpu-metrics-devices=all'", "`--gpu-metrics-devices=all`"),
    ("Illegal --trace argument 'bogus'", "`--trace` value `bogus`"),
    ("Illegal --sample argument: bogus.", "`--sample` value `bogus`"),
    ("option is ambiguous and matches 'capture-range-end', 'command-file'", "an option"),
])
def test_how_nsys_refuses_an_option(said, named):
    assert refused_option(["Generating...", said, "usage: nsys profile [<args>]"]).startswith(f"{named} (\"{said}\")")
    assert refused_option(["ValueError: invalid value 3"]) is None


def test_a_failing_program_keeps_its_report_prints_the_summary_then_exits_30(tmp_path):
    nsys, _ = fake_nsys(tmp_path, "fail")
    proc = record(tmp_path, nsys, "-o", "run")
    line = error_line(proc, 30)
    assert "dashcam summary:" in proc.stdout and (tmp_path / "run.nsys-rep").exists()
    assert line == (f"dashcam: error: `/bin/sleep 0` exited with 3; {tmp_path / 'run.nsys-rep'} holds what it did "
                    "until then; its stderr ended: Traceback (most recent call last): | File \"train.py\", line 3 | "
                    "ValueError: boom")


def test_a_failing_program_without_a_report(tmp_path):
    nsys, _ = fake_nsys(tmp_path, "fail_noreport")
    line = error_line(record(tmp_path, nsys, "-o", "run"), 30)
    assert "`/bin/sleep 0` exited with 3 and nsys wrote no report; its stderr ended: " in line
    assert line.endswith("ValueError: boom")


def test_no_report_or_an_empty_one_is_an_empty_capture(tmp_path):
    nsys, _ = fake_nsys(tmp_path, "noreport")
    line = error_line(record(tmp_path, nsys, "-o", "run"), 31)
    assert "nsys wrote no report (run.nsys-rep): nothing was captured; nsys said: the program's output" in line
    line = error_line(record(tmp_path, nsys, "-o", "run", "--capture-range", "nvtx:train"), 31)
    assert "the capture range (nvtx:train) never opened: is the name right (nvtx:NAME (NAME@DOMAIN" in line
    empty = ExportBuilder().write(tmp_path / "empty.sqlite")
    nsys, _ = fake_nsys(tmp_path, "ok", fixture=empty)
    line = error_line(record(tmp_path, nsys, "-o", "nothing"), 31)
    assert line.endswith("nothing.nsys-rep: the capture holds nothing (no CUDA call, NVTX range, OS runtime call or "
                         "CPU sample)")
    assert (tmp_path / "nothing.nsys-rep").exists()  # kept: it is what nsys recorded


def test_the_end_of_duration_is_not_a_failure(tmp_path):
    nsys, _ = fake_nsys(tmp_path, "killed")
    assert record(tmp_path, nsys, "-o", "run", "--duration", "5").returncode == 0
    error_line(record(tmp_path, nsys, "-o", "run2"), 30)  # without --duration, 143 is the program's


def test_the_program_must_exist_and_follow_the_dashes(tmp_path):
    nsys, log = fake_nsys(tmp_path)
    line = assert_one_line_error(record(tmp_path, nsys, program=("no-such-program-here",)), 11)
    assert "no-such-program-here: no such program" in line
    assert not calls(log)
