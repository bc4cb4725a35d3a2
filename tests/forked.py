"""Run a function in a forked child and wait for it with a deadline (fork tests: a child that hangs must
fail the test, not the test session)."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable

__all__ = ["run_forked"]


def run_forked(child: Callable[[], int], timeout: float) -> int | None:
    """``child()``'s return value as the forked child's exit code (1 on an exception), or None when it
    has not exited within ``timeout`` seconds (it is killed and reaped)."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through its exit status, never returns into pytest
        code = 1
        try:
            code = child()
        finally:
            os._exit(code)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.05)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    return None
