"""Fork safety of the remote transports (the PyTorch DataLoader / multiprocessing pattern).

A parent that has read (so its pools hold kept-alive connections) forks children while one of its
threads keeps reading; parent and children then read (and, where the transport writes, write) their
own objects concurrently, a set number of times each, the parent until the children are done. Every byte
is checked: a child that shared a connection with its parent would receive another object's bytes (6 wrong
in 3,000 reads before the fix). A child that does not finish within HANG_SECONDS is a hang, and fails the test.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from servers.faults import FaultServer
from servers.nginx import NginxServer
from servers.webhdfs import WebHDFSServer

import gdsstore
from gdsstore.engine.backend import backend_for

from .conftest import WEBHDFS_USER, payload

HANG_SECONDS = 120.0
CHILDREN = 3
#: Operations per child: reads enough for the sharing bug to show (about 1 in 500 reads), fewer where each
#: is a write and two reads (S3 through moto, WebHDFS).
READS, WRITES, WAVES = 800, 12, 100
SIZE = 256 << 10
# Four ranges per read: every read in a child also runs on the engine pool it rebuilt after the fork.
SETTINGS = {"task_size": 64 << 10, "remote.max_range_size": 64 << 10}
# One range per read, where a test counts the connections each child opens.
ONE_RANGE = {"task_size": 4 << 20, "remote.max_range_size": 4 << 20}


def _loop(work: Callable[[int], bool], times: int, stop: threading.Event | None = None) -> tuple[int, int]:
    """Run ``work(i)`` ``times`` times, or (``stop``) at least once and until ``stop`` is set; ``(calls, wrong
    results)``."""
    n = wrong = 0
    while (n < times) if stop is None else (n == 0 or not stop.is_set()):
        if not work(n):
            wrong += 1
        n += 1
    return n, wrong


def _run_forked(parent_work: Callable[[int], bool], child_work: Callable[[int], Callable[[int], bool]],
                times: int) -> None:
    """Fork CHILDREN children while a parent thread reads; each child works ``times`` times, the parent until
    they are done; check results."""
    stop = threading.Event()
    parent_stats: list[tuple[int, int]] = []
    background = threading.Thread(target=lambda: parent_stats.append(_loop(parent_work, 0, stop)), daemon=True)
    background.start()
    time.sleep(0.2)  # the parent thread is mid-read when the children are forked
    pids = []
    for c in range(CHILDREN):
        pid = os.fork()
        if pid == 0:  # the child: report through the exit status, never return into pytest
            code = 3
            try:
                calls, wrong = _loop(child_work(c), times)
                code = 0 if wrong == 0 and calls > 0 else 1
                if wrong:
                    print(f"child {c}: {wrong} wrong results of {calls}", file=sys.stderr)
            except BaseException:
                traceback.print_exc()
                code = 2
            finally:
                os._exit(code)
        pids.append(pid)
    deadline = time.monotonic() + HANG_SECONDS
    statuses = {}
    while pids and time.monotonic() < deadline:
        for pid in list(pids):
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                statuses[pid] = os.waitstatus_to_exitcode(status)
                pids.remove(pid)
        time.sleep(0.05)
    for pid in pids:  # hung: kill ours, then fail
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    stop.set()
    background.join(HANG_SECONDS)
    assert not pids, f"{len(pids)} forked children hung (killed after {HANG_SECONDS:.0f} s)"
    assert all(code == 0 for code in statuses.values()), f"children exit codes {statuses} (1: wrong bytes, 2: error)"
    assert parent_stats and parent_stats[0][1] == 0 and parent_stats[0][0] > 0, f"parent: {parent_stats}"


def _fork_one(child: Callable[[], int]) -> int:
    """Run ``child()`` in a forked child; its exit code (``child``'s return value, 2 on an exception)."""
    pid = os.fork()
    if pid == 0:
        code = 2
        try:
            code = child()
        except BaseException:
            traceback.print_exc()
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
def test_a_forked_child_never_uses_its_parents_connections(faults: FaultServer) -> None:
    # Deterministic: the parent holds a kept-alive connection; each child's read must arrive on a
    # connection of its own (a new client port at the server), and the parent's stays usable.
    faults.objects["a.bin"] = payload(SIZE, seed=7)
    backend = backend_for(f"http://127.0.0.1:{faults.port}/ok/0")
    with gdsstore.config.set(ONE_RANGE):
        assert bytes(backend.get("a.bin", bytearray)) == faults.objects["a.bin"]
        before = set(faults.peers)

        def child() -> int:
            return 0 if bytes(backend.get("a.bin", bytearray)) == faults.objects["a.bin"] else 1

        assert [_fork_one(child) for _ in range(CHILDREN)] == [0] * CHILDREN
        assert len(faults.peers - before) == CHILDREN  # one new connection per child, none shared
        assert bytes(backend.get("a.bin", bytearray)) == faults.objects["a.bin"]


def _reader(backend: Any, key: str, want: bytes) -> Callable[[int], bool]:
    def work(_: int) -> bool:
        return bytes(backend.get(key, bytearray)) == want

    return work


def _writer_reader(backend: Any, key: str, seed: int) -> Callable[[int], bool]:
    """Write a distinct value, read it back (through a ranged open, then a whole get)."""

    def work(i: int) -> bool:
        value = payload(SIZE, seed=seed * 100_000 + i % 7)
        backend.put(key, value)
        with backend.open(key) as f:
            buf = np.empty(f.size, "u1")
            f.read(buf)
        return buf.tobytes() == value and bytes(backend.get(key, bytearray)) == value

    return work


FORK_WARNING = pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")


@FORK_WARNING
def test_fork_http_parent_and_children_read_their_own_objects(nginx: NginxServer, nginx_root: str) -> None:
    objs = {f"fork/o{i}.bin": payload(SIZE, seed=300 + i) for i in range(CHILDREN + 1)}
    for name, data in objs.items():
        os.makedirs(os.path.join(nginx_root, "fork"), exist_ok=True)
        with open(os.path.join(nginx_root, name), "wb") as f:
            f.write(data)
    backend = backend_for(nginx.url(""))
    names = list(objs)
    with gdsstore.config.set(SETTINGS):
        assert bytes(backend.get(names[-1], bytearray)) == objs[names[-1]]  # pools hold connections now
        _run_forked(_reader(backend, names[-1], objs[names[-1]]),
                    lambda c: _reader(backend, names[c], objs[names[c]]), READS)


@FORK_WARNING
def test_fork_s3_parent_and_children_write_and_read(s3: dict[str, Any]) -> None:
    opts = {k: v for k, v in s3.items() if k != "client"}
    backend = backend_for("s3://test-bucket/fork", opts)
    with gdsstore.config.set(SETTINGS):
        backend.put("parent.bin", payload(SIZE, seed=1))
        assert len(bytes(backend.get("parent.bin", bytearray))) == SIZE
        _run_forked(_writer_reader(backend, "parent.bin", 1),
                    lambda c: _writer_reader(backend, f"child{c}.bin", 2 + c), WRITES)


@FORK_WARNING
def test_fork_webhdfs_parent_and_children_write_and_read(webhdfs: WebHDFSServer) -> None:
    backend = backend_for(webhdfs.url("/fork"), {"user": WEBHDFS_USER})
    with gdsstore.config.set(SETTINGS):
        backend.put("parent.bin", payload(SIZE, seed=1))
        assert len(bytes(backend.get("parent.bin", bytearray))) == SIZE
        _run_forked(_writer_reader(backend, "parent.bin", 1),
                    lambda c: _writer_reader(backend, f"child{c}.bin", 2 + c), WRITES)


def _wave_reader(backend: Any, objs: dict[str, bytes]) -> Callable[[int], bool]:
    """A wave of every object, sizes unknown, with room for a quarter of each: every object is asked twice
    through the core (the second time into room of its size)."""
    names = list(objs)

    def read(_: int) -> bool:
        w = backend.get_many(names, None, lambda n: (np.empty(n, np.uint8), None), room=len(names) * (256 << 10))
        return all(w.view(i).tobytes() == objs[k] for i, k in enumerate(names))

    return read


@FORK_WARNING
def test_fork_waves(nginx: NginxServer, nginx_root: str) -> None:
    # The core's runtime does not survive fork(): a child of a parent that used it must build its own, not hang.
    objs = {f"forkwave/o{i}.bin": payload(1 << 20, seed=400 + i) for i in range(4)}
    os.makedirs(os.path.join(nginx_root, "forkwave"), exist_ok=True)
    for name, data in objs.items():
        with open(os.path.join(nginx_root, name), "wb") as f:
            f.write(data)
    backend = backend_for(nginx.url(""))
    with gdsstore.trace() as t:
        assert _wave_reader(backend, objs)(0)
    assert all(e.reason.startswith("wave: native core") for e in t.events), str(t)  # the parent's runtime is started
    _run_forked(_wave_reader(backend, objs), lambda c: _wave_reader(backend, objs), WAVES)
