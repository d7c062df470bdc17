"""Test checkpoints of a cache build and the cache's one-line notes on stderr."""
from __future__ import annotations

import errno
import os
import signal
import sys
import threading
import time

# DASHCAM_TEST_HOOK makes a build stop at its Nth checkpoint, so the fault-injection tests
# (tests/test_cache_faults.py) are deterministic: ``kill:N`` (SIGKILL, as kill -9 would),
# ``fail:N:ENOSPC`` (an OSError with that errno, as a full disk would), ``wait:PATH`` (a process that
# starts a build appends its pid to PATH.builders and waits until PATH exists) and
# ``log:PATH`` (append each checkpoint's name to PATH).
HOOK_ENV = "DASHCAM_TEST_HOOK"


class _Checkpoints:
    def __init__(self) -> None:
        self.n = 0
        self.lock = threading.Lock()

    def __call__(self, name: str) -> None:
        hook = os.environ.get(HOOK_ENV)
        if not hook:
            return
        with self.lock:
            self.n += 1
            n = self.n
        kind, _, arg = hook.partition(":")
        if kind == "log":
            with open(arg, "a") as f:
                f.write(name + "\n")
        elif kind == "kill" and n == int(arg):
            os.kill(os.getpid(), signal.SIGKILL)
        elif kind == "fail" and n == int(arg.split(":")[0]):
            code = getattr(errno, arg.split(":")[1])
            raise OSError(code, os.strerror(code))
        elif kind == "wait" and name == "started":
            with open(arg + ".builders", "a") as f:
                f.write(f"{os.getpid()}\n")
            while not os.path.exists(arg):
                time.sleep(0.05)


checkpoint = _Checkpoints()


def note(message: str) -> None:
    """One line on stderr: what the cache is doing when it is not the usual (rebuilding, waiting)."""
    sys.stderr.write(f"dashcam: {message}\n")
    sys.stderr.flush()
