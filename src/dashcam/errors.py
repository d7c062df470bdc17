"""Errors a user can cause, each with its own exit code and a one-line message.

The CLI prints ``str(error)`` on stderr and exits with ``error.exit_code``; nothing
here ever reaches the user as a traceback.
"""
from __future__ import annotations


class DashcamError(Exception):
    """Base class: a problem with the input, reported in one line."""

    exit_code = 1


class ProfileNotFound(DashcamError):
    exit_code = 3


class ProfileIsDirectory(DashcamError):
    exit_code = 4


class NotSQLite(DashcamError):
    exit_code = 5


class NotNsysExport(DashcamError):
    exit_code = 6


class CorruptProfile(DashcamError):
    """Truncated or otherwise unreadable SQLite file."""

    exit_code = 7


class NoGpuActivity(DashcamError):
    exit_code = 8


NO_GPU_ACTIVITY_NOTE = "no GPU activity in this profile (no kernels, memcpys or memsets)"  # for answers' notes


class UnknownGpu(DashcamError):
    exit_code = 9


class NsysUnavailable(DashcamError):
    """A .nsys-rep was given but it cannot be exported here."""

    exit_code = 10


class NsysNotFound(NsysUnavailable):
    """A .nsys-rep was given and no nsys is found (DASHCAM_NSYS / --nsys, then PATH)."""

    exit_code = 27


class ReportTooNew(NsysUnavailable):
    """The .nsys-rep was recorded by a newer Nsight Systems than the nsys that would export it."""

    exit_code = 28


class NsysRefusedOption(DashcamError):
    """``dashcam record``: the nsys of this machine does not know an option of the command (its version predates
    it, or it was removed); the message names the option."""

    exit_code = 29


class ProgramFailed(DashcamError):
    """``dashcam record``: the recorded program exited non-zero (or could not start); the message gives its exit
    code and the end of its stderr, and the report when nsys wrote one."""

    exit_code = 30


class EmptyCapture(DashcamError):
    """``dashcam record``: nsys wrote no report, or a report without a row of any kind of data."""

    exit_code = 31


class BadParameter(DashcamError):
    exit_code = 11


class UnsafeQuery(DashcamError):
    exit_code = 12


class CacheUnwritable(DashcamError):
    """The cache cannot be written: its folder is full, over quota, read-only or not ours."""

    exit_code = 15


class CacheDamaged(DashcamError):
    """The cache is still unreadable after it was rebuilt once (``retry``: not yet rebuilt)."""

    exit_code = 16

    def __init__(self, message: str, cache=None, retry: bool = False) -> None:
        super().__init__(message)
        self.cache = cache
        self.retry = retry


class SchedulerUnreachable(DashcamError):
    """The fleet's Dask scheduler (--scheduler, --scheduler-file, DASK_SCHEDULER_ADDRESS) does not answer."""

    exit_code = 17


class NoReports(DashcamError):
    """A fleet (a directory, a glob, several files) names no report."""

    exit_code = 18


class WorkersLackDashcam(DashcamError):
    """Workers of the fleet's Dask cluster cannot import dashcam."""

    exit_code = 19


class NotComparable(DashcamError):
    """``diff --fail-on-regression`` on two profiles it cannot compare (different programs, GPU counts or steps)."""

    exit_code = 32


class MissingDependency(DashcamError):
    """A command needs an optional package that is not installed (the message says what to install)."""

    exit_code = 26


EXIT_CODES = {
    cls.__name__: cls.exit_code
    for cls in (
        ProfileNotFound,
        ProfileIsDirectory,
        NotSQLite,
        NotNsysExport,
        CorruptProfile,
        NoGpuActivity,
        UnknownGpu,
        NsysNotFound,
        ReportTooNew,
        NsysUnavailable,
        NsysRefusedOption,
        ProgramFailed,
        EmptyCapture,
        BadParameter,
        UnsafeQuery,
        CacheUnwritable,
        CacheDamaged,
        SchedulerUnreachable,
        NoReports,
        WorkersLackDashcam,
        MissingDependency,
        NotComparable,
    )
}
