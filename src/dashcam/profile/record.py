"""``dashcam record``: run ``nsys profile`` with the options a goal's analysis needs, keep the report, export it.

A goal names the capture-coverage kinds (coverage.py ``KINDS``) its analysis reads; the options are those kinds'
``nsys profile`` options (``coverage.profile_options``), so the coverage table stays the one place that knows them.
The kinds that need a GPU (``Kind.gpu``) are left out on a machine without one and named as missing.

``plan_recording`` builds the command (nothing runs); ``run_recording`` runs it, passing the program's and nsys's
output through to stderr, then exports the report through ``source.export_nsys_rep`` (so the export is cached like
any other report's) and checks that the capture holds something. Failures are one-line errors with their own exit
codes: no nsys (27, how to install it), an option this nsys refuses (29), the program failing (30, its exit code and
the end of its stderr), an empty capture (31).
"""
from __future__ import annotations

import glob
import re
import shlex
import shutil
import subprocess
import sys
import threading
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

from dashcam.errors import BadParameter, EmptyCapture, NsysNotFound, NsysRefusedOption, ProgramFailed
from dashcam.profile.coverage import BY_ID, coverage, profile_options
from dashcam.profile.source import NSYS_ENV, export_nsys_rep, find_nsys, nsys_version

ALWAYS = ("cuda_trace", "nvtx", "os_runtime")  # every goal: the CUDA calls and GPU work, NVTX ranges, OS calls
GOALS: dict[str, tuple[str, ...]] = {
    # why the GPU idles: gpu_gaps reads the CUDA calls; the cpu tool (gaps=true) what the CPU did meanwhile
    "idle": (*ALWAYS, "cpu_sampling", "context_switches"),
    # where host time goes: samples with call stacks, context switches, and which code made each CUDA call
    "cpu": (*ALWAYS, "cpu_sampling", "context_switches", "cuda_backtraces"),
    "memory": (*ALWAYS, "gpu_memory_usage", "um_page_faults"),  # the memory tool: allocations, frees, page faults
    "nccl": (*ALWAYS, "nvtx_payloads", "mpi"),  # the nccl tool: NCCL's NVTX ranges and payloads, MPI calls
    "metrics": (*ALWAYS, "gpu_metrics"),  # the gpu_metrics tool: SM activity, memory bandwidth, ...
}
CAPTURE_RANGES = "nvtx:NAME (NAME@DOMAIN for a range in a domain) or cudaProfilerApi"
KILLED_BY_NSYS = 128 + 15  # nsys ends the program with SIGTERM when --duration runs out
_TAIL_LINES = 3  # lines of the program's stderr a failure message quotes

INSTALL = ("install NVIDIA Nsight Systems — NVIDIA's installer (developer.nvidia.com/nsight-systems, Linux .run/.deb/"
           ".rpm), the CUDA toolkit (its bin/ has nsys), or on Debian/Ubuntu the `nsight-systems` package where the "
           "archive has it (Debian: non-free) — then put nsys on PATH or name it with --nsys or " + NSYS_ENV)

# How nsys says it does not take an option or a value (on stdout or stderr), as nsys 2024.2 words it:
# "unrecognised option '--gpu-metrics-devices=all'", "Illegal --trace argument 'bogus'",
# "Illegal --sample argument: bogus.", "option is ambiguous and matches ...".
_REFUSED = re.compile(r"unrecogni[sz]ed option '(?P<opt>[^']+)'"
                      r"|Illegal (?P<name>--[\w-]+) argument(?::\s*(?P<val>.*?)\.?\s*$| '(?P<qval>[^']*)')"
                      r"|option '?[^' ]*'? ?is ambiguous", re.IGNORECASE)


@dataclass
class Plan:
    """The ``nsys profile`` command for a goal, before it runs."""

    argv: list[str]  # the nsys command, program included
    report: Path  # the .nsys-rep it writes
    goal: str
    kinds: list[str]  # coverage kinds it records
    missing: list[str]  # kinds the goal wants that this machine cannot record (no GPU)
    nsys: str
    program: list[str]
    duration: int | None = None
    capture_range: str | None = None
    missing_options: list[str] = field(default_factory=list)  # the missing kinds' options, spelled for this nsys

    @property
    def shell(self) -> str:
        """The command as one copyable shell line."""
        return shlex.join(self.argv)

    def notes(self) -> list[str]:
        if not self.missing:
            return []
        names = ", ".join(BY_ID[k].name for k in self.missing)
        opts = " ".join(self.missing_options or profile_options(self.missing))
        return [f"note: no NVIDIA GPU on this machine (no /dev/nvidia* device, no GPU listed by nvidia-smi): not "
                f"recording {names} ({opts}); the --goal {self.goal} analysis of them needs a run on a GPU machine"]


@dataclass
class Recording:
    plan: Plan
    report: Path
    sqlite: Path  # its cached export
    exit_code: int  # the program's (nsys passes it on)
    stderr_tail: list[str] = field(default_factory=list)

    @property
    def stopped_by_duration(self) -> bool:
        return self.plan.duration is not None and self.exit_code == KILLED_BY_NSYS

    def check_program(self) -> None:
        """Raise ProgramFailed when the program exited non-zero (not when --duration ended it)."""
        if self.exit_code != 0 and not self.stopped_by_duration:
            raise ProgramFailed(f"{_name(self.plan.program)} exited with {self.exit_code}; {self.report} holds what "
                                f"it did until then; {_tail(self.stderr_tail)}")


def has_gpu() -> bool:
    """An NVIDIA GPU is usable here: a /dev/nvidiaN device, or nvidia-smi listing a GPU."""
    if glob.glob("/dev/nvidia[0-9]*"):
        return True
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return False
    try:
        out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return False
    return "GPU " in out


def is_python(program: list[str]) -> bool:
    return bool(re.fullmatch(r"python[\d.]*", Path(program[0]).name))


def capture_options(spec: str | None) -> list[str]:
    """``--capture-range`` SPEC as nsys options; the program runs to its end after the range (capture-range-end
    stop: nsys's default, stop-shutdown, would end it with SIGTERM)."""
    if spec is None:
        return []
    if spec == "cudaProfilerApi":
        return ["--capture-range=cudaProfilerApi", "--capture-range-end=stop"]
    if spec.startswith("nvtx:") and spec[5:].strip():
        # nsys matches only registered NVTX strings unless told otherwise (nvtxRangePushA's are not registered)
        return ["--capture-range=nvtx", f"--nvtx-capture={spec[5:].strip()}", "--capture-range-end=stop",
                "--env-var=NSYS_NVTX_PROFILER_REGISTER_ONLY=0"]
    raise BadParameter(f"--capture-range must be {CAPTURE_RANGES}, not {spec!r}")


def plan_recording(program: list[str], goal: str = "idle", output: str | None = None, duration: int | None = None,
                   capture_range: str | None = None, gpu: bool | None = None, cwd: Path | None = None) -> Plan:
    """The ``nsys profile`` command that records ``program`` for ``goal`` (gpu: whether the machine has one,
    default ``has_gpu()``); checks the arguments, finds nsys and the program, runs nothing."""
    if goal not in GOALS:
        raise BadParameter(f"--goal must be one of {', '.join(GOALS)}, not {goal!r}")
    if not program:
        raise BadParameter("give the program to record after `--`: dashcam record -- python train.py")
    if program[0].startswith("-"):
        raise BadParameter(f"{program[0]!r} is not a program; put dashcam's options before `--` and the program "
                           "after it")
    if shutil.which(program[0]) is None:
        raise BadParameter(f"{program[0]}: no such program (not on PATH, or not an executable file)")
    if duration is not None and duration <= 0:
        raise BadParameter(f"--duration must be a positive number of seconds, not {duration}")
    capture = capture_options(capture_range)
    try:
        nsys = find_nsys()
    except NsysNotFound as e:
        raise NsysNotFound(f"dashcam record runs NVIDIA's nsys, and {e}; {INSTALL}") from None
    cwd = cwd or Path.cwd()
    report = _report_path(output, program, cwd)
    gpu = has_gpu() if gpu is None else gpu
    kinds = [k for k in GOALS[goal] if gpu or not BY_ID[k].gpu]
    missing = [k for k in GOALS[goal] if k not in kinds]
    python = is_python(program)
    chosen = _spelled_for(nsys, kinds, profile_options(kinds, python=python))
    argv = [nsys, "profile", *chosen, *capture, *([f"--duration={duration}"] if duration else []),
            f"--output={_relative(report, cwd)}", *program]
    # what the note says a GPU machine would add, as this nsys spells it (2024.2: --gpu-metrics-device=all)
    lacked = _spelled_for(nsys, missing, profile_options(missing, python=python)) if missing else []
    return Plan(argv, report, goal, kinds, missing, nsys, list(program), duration, capture_range, lacked)


def _spelled_for(nsys: str, kinds: list[str], options: list[str]) -> list[str]:
    """``options`` with the older spelling of an option (Kind.older_spellings) where this nsys's ``profile --help``
    knows only that one (nsys 2024.2: --gpu-metrics-device, not --gpu-metrics-devices)."""
    spellings = dict(s for k in kinds for s in BY_ID[k].older_spellings if s[0] in options)
    if not spellings:
        return options
    try:
        known = subprocess.run([nsys, "profile", "--help"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired):
        return options
    flag = lambda opt: opt.split("=", 1)[0] + "="
    return [spellings[o] if o in spellings and flag(o) not in known and flag(spellings[o]) in known else o
            for o in options]


def _report_path(output: str | None, program: list[str], cwd: Path) -> Path:
    """-o NAME (NAME.nsys-rep; refused when it exists: nsys would not overwrite it either), else the program's
    name (its script's for an interpreter), numbered past the reports already there."""
    if output:
        name = output[: -len(".nsys-rep")] if output.endswith(".nsys-rep") else output
        report = cwd / f"{name}.nsys-rep"
        if report.exists():
            raise BadParameter(f"{report}: exists; name another report with -o or delete this one")
        if not report.parent.is_dir():
            raise BadParameter(f"-o {output}: no folder {report.parent}")
        return report
    script = next((a for a in program[1:] if a.endswith(".py")), None) if is_python(program) else None
    stem = Path(script or program[0]).stem or "report"
    n = 1
    while (cwd / f"{stem}{'' if n == 1 else f'-{n}'}.nsys-rep").exists():
        n += 1
    return cwd / f"{stem}{'' if n == 1 else f'-{n}'}.nsys-rep"


def _relative(path: Path, cwd: Path) -> str:
    """The --output value: the report without its suffix, relative to ``cwd`` when inside it."""
    base = path.with_suffix("")
    try:
        return str(base.relative_to(cwd))
    except ValueError:
        return str(base)


def run_recording(plan: Plan, cwd: Path | None = None) -> Recording:
    """Run the plan's nsys command, its output passed through to stderr; export the report (cached) and check the
    capture is not empty. Raises NsysRefusedOption, ProgramFailed (no report) or EmptyCapture."""
    out_tail, err_tail = deque(maxlen=200), deque(maxlen=200)
    try:
        proc = subprocess.Popen(plan.argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=cwd or Path.cwd())
    except OSError as e:
        raise NsysNotFound(f"{plan.nsys} could not run ({e}); {INSTALL}") from None
    pumps = [threading.Thread(target=_pump, args=(s, t), daemon=True)
             for s, t in ((proc.stdout, out_tail), (proc.stderr, err_tail))]
    for p in pumps:
        p.start()
    try:
        code = proc.wait()
    except KeyboardInterrupt:  # the program and nsys got the Ctrl-C too; let nsys write what it has
        code = proc.wait()
        raise
    finally:
        for p in pumps:
            p.join(timeout=30)
    said = [*out_tail, *err_tail]
    if not plan.report.exists():
        refused = refused_option(said)
        if refused:
            version = nsys_version(plan.nsys) or "of unknown version"
            raise NsysRefusedOption(f"nsys {version} ({plan.nsys}) refused {refused}; this nsys does not take that "
                                    f"option (see `{plan.nsys} profile --help`), or record with a newer Nsight "
                                    "Systems (--nsys)")
        exited = f"{_name(plan.program)} exited with {code}"
        if plan.capture_range:  # nsys 2024.2's injection can abort the program at exit then (134, SIGABRT)
            raise EmptyCapture(f"nsys wrote no report ({plan.report.name}): the capture range ({plan.capture_range}) "
                               f"never opened: is the name right ({CAPTURE_RANGES})?"
                               + (f" ({exited}; {_tail(err_tail)})" if code else ""))
        if code != 0:
            raise ProgramFailed(f"{exited} and nsys wrote no report; {_tail(err_tail)}")
        last = next((ln for ln in reversed(said) if ln.strip()), "")
        raise EmptyCapture(f"nsys wrote no report ({plan.report.name}): nothing was captured"
                           + (f"; nsys said: {last}" if last else ""))
    sqlite = export_nsys_rep(plan.report)
    rec = Recording(plan, plan.report, sqlite, code, list(err_tail))
    check_not_empty(rec)
    return rec


def check_not_empty(rec: Recording) -> None:
    """EmptyCapture when the report holds no row of any coverage kind (no OS call, range, sample, kernel...)."""
    from dashcam.profile.profile import Profile

    if not coverage(Profile.open(rec.sqlite, progress=False)).recorded:
        stopped = f"; {_name(rec.plan.program)} exited with {rec.exit_code}" if rec.exit_code else ""
        raise EmptyCapture(f"{rec.report}: the capture holds nothing (no CUDA call, NVTX range, OS runtime call or "
                           f"CPU sample){stopped}")


def _pump(stream, tail: deque) -> None:
    """Copy a child's output to our stderr as it comes, keeping its last lines."""
    out = sys.stderr.buffer if hasattr(sys.stderr, "buffer") else None
    for raw in iter(stream.readline, b""):
        if out is not None:
            out.write(raw)
            out.flush()
        else:
            sys.stderr.write(raw.decode(errors="replace"))
        for line in raw.decode(errors="replace").replace("\r", "\n").splitlines():
            tail.append(line)
    stream.close()


def refused_option(lines: list[str]) -> str | None:
    """The option nsys refused, as its message quotes it, or None."""
    for line in lines:
        m = _REFUSED.search(line)
        if not m:
            continue
        if m.group("opt"):
            return f"`{m.group('opt')}` (\"{line.strip()}\")"
        if m.group("name"):
            value = m.group("val") if m.group("val") is not None else m.group("qval")
            return f"`{m.group('name')}` value `{value}` (\"{line.strip()}\")"
        return f"an option (\"{line.strip()[:200]}\")"
    return None


def _name(program: list[str]) -> str:
    return f"`{shlex.join(program)}`" if len(shlex.join(program)) <= 80 else f"`{program[0]}`"


def _tail(lines) -> str:
    """The last lines of the program's stderr, on one line."""
    kept = [ln.strip() for ln in lines if ln.strip()][-_TAIL_LINES:]
    return "its stderr ended: " + " | ".join(kept) if kept else "it wrote nothing on stderr"
