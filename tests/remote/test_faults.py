"""Every fault the fault server injects: correct bytes after retries, or a clear error after
``remote.max_attempts`` — never wrong bytes. Plus unreachable hosts, within the configured timeouts."""

from __future__ import annotations

import time

import numpy as np
import pytest
from servers.faults import FaultServer
from servers.net import Blackhole, closed_port

import gdsstore
from gdsstore.engine.remote import RangeMismatchError, RangeNotSupportedError, RemoteIOError

from .conftest import payload

DATA = payload(512 << 10, seed=2)
FILL = 0xA5


@pytest.fixture
def srv(faults: FaultServer) -> FaultServer:
    faults.objects["obj.bin"] = DATA
    faults.slow_seconds = 0.6
    return faults


def no_wrong_bytes(buf: np.ndarray) -> None:
    """Every byte is either untouched (FILL) or the right one."""
    ref = np.frombuffer(DATA, "u1")[: buf.size]
    assert np.all((buf == FILL) | (buf == ref))


def ranged_gets(srv: FaultServer, mode: str) -> int:
    return sum(1 for e in srv.log if e[0] == "GET" and e[1].startswith(f"/{mode}/"))


RECOVERABLE = ["503", "reset", "truncate", "slow"]


@pytest.mark.parametrize("mode", RECOVERABLE)
def test_recovers_after_retries(srv: FaultServer, mode: str) -> None:
    # Each faulty response is followed by a good one: 3 faults < max_attempts=4 for the first range(s).
    with gdsstore.config.set({"remote.timeout": 0.3}), gdsstore.open(srv.url("obj.bin", mode, 3)) as f:
        buf = np.full(f.size, FILL, "u1")
        assert f.read(buf) == len(DATA)
    assert buf.tobytes() == DATA
    assert ranged_gets(srv, mode) >= 8 + 3  # 8 ranges of 64 KiB, 3 of them retried at least once


@pytest.mark.parametrize("mode", RECOVERABLE)
def test_gives_up_after_max_attempts(srv: FaultServer, mode: str) -> None:
    buf = np.full(len(DATA), FILL, "u1")
    with gdsstore.config.set({"remote.timeout": 0.3, "remote.concurrency": 1}):
        with pytest.raises(RemoteIOError, match=r"failed after 4 attempt\(s\) \(remote\.max_attempts=4\)"):
            with gdsstore.open(srv.url("obj.bin", mode, "always")) as f:
                f.read(buf)
    no_wrong_bytes(buf)
    # The GET that tells the size takes no body: "reset" and "truncate" pass it, "503" and "slow" fail it
    # (its 4 attempts). Else one range used its 4 attempts; the others stopped instead of retrying too.
    assert ranged_gets(srv, mode) == (4 if mode in ("503", "slow") else 1 + 4)


def test_retry_resumes_where_the_body_broke(srv: FaultServer) -> None:
    # "truncate" delivers half the body then closes cleanly (a reset may discard unread data in the kernel).
    # (Two faults: the first GET, which tells the size, takes no body.)
    with gdsstore.config.set({"task_size": 1 << 20}), gdsstore.open(srv.url("obj.bin", "truncate", 2)) as f:
        buf = np.full(f.size, FILL, "u1")
        assert f.read(buf) == len(DATA)
    assert buf.tobytes() == DATA
    ranges = [e[2] for e in srv.log if e[0] == "GET"]
    # The read's body broke after half the bytes; the retry asked only for bytes not yet landed. (A whole
    # object is asked without a Range header: a server may answer that only with a 200.)
    assert ranges == [None, None, f"bytes={len(DATA) // 2}-{len(DATA) - 1}"]


def test_server_ignoring_range_never_yields_wrong_bytes(srv: FaultServer) -> None:
    with gdsstore.open(srv.url("obj.bin", "ignore-range", "always")) as f:
        buf = np.full(f.size, FILL, "u1")
        # The whole object asked in ranges: the 200s are refused, then it is read in one request.
        assert f.read(buf) == len(DATA)
        assert buf.tobytes() == DATA
        buf[:] = FILL
        # Asking for the whole object in one range is fine: the 200 is exactly what was asked.
        with gdsstore.config.set({"task_size": 1 << 20}):
            assert f.read(buf) == len(DATA)
        assert buf.tobytes() == DATA
        # ... but a partial read of it, even from offset 0, is not.
        part = np.full(1000, FILL, "u1")
        with pytest.raises(RangeNotSupportedError, match=r"ignored the Range header.*read whole objects"):
            f.read(part)
        no_wrong_bytes(part)


@pytest.mark.parametrize("mode", ["wrong-range", "short-range"])
def test_mismatched_ranges_are_refused(srv: FaultServer, mode: str) -> None:
    with gdsstore.open(srv.url("obj.bin", mode, "always")) as f:
        buf = np.full(f.size, FILL, "u1")
        with pytest.raises(RangeMismatchError):
            f.read(buf)
    no_wrong_bytes(buf)


@pytest.mark.parametrize("mode", ["chunked", "chunked-extra"])
def test_ranges_without_a_length_are_refused(srv: FaultServer, mode: str) -> None:
    # A 206 without Content-Length (chunked): object_store cannot check its length, so it is refused, once.
    with gdsstore.open(srv.url("obj.bin", mode, "always")) as f:
        buf = np.full(f.size, FILL, "u1")
        with pytest.raises(RemoteIOError, match="Content-Length Header missing"):
            f.read(buf)
    no_wrong_bytes(buf)


def test_closed_port_fails_fast() -> None:
    port = closed_port()
    with gdsstore.config.set({"remote.connect_timeout": 1.0}):
        t0 = time.perf_counter()
        with pytest.raises(RemoteIOError, match=r"(?i)connection refused"):
            gdsstore.open(f"http://127.0.0.1:{port}/x.bin")
    assert time.perf_counter() - t0 < 1.0 * 4


def test_silent_server_times_out(blackhole: Blackhole) -> None:
    before = len(blackhole._conns)
    with gdsstore.config.set({"remote.connect_timeout": 0.3, "remote.timeout": 0.3, "remote.max_attempts": 2}):
        with pytest.raises(RemoteIOError, match=r"failed after 2 attempt.*no answer for 300ms"):
            gdsstore.open(f"http://127.0.0.1:{blackhole.port}/x.bin")
    assert len(blackhole._conns) - before == 2  # each attempt connected, waited for the timeout, gave up


BIG = payload(6 << 20, seed=5)


@pytest.mark.parametrize("mode", [*RECOVERABLE, "ok"])
def test_large_ranges_read_from_the_socket_recover(faults: FaultServer, mode: str) -> None:
    """Ranges >= 1 MiB bypass http.client's buffer (recv MSG_WAITALL): same guarantees under faults."""
    faults.objects["big.bin"] = BIG
    faults.slow_seconds = 0.6
    settings = {"remote.timeout": 0.3, "task_size": 2 << 20, "remote.concurrency": 2}
    with gdsstore.config.set(settings), gdsstore.open(faults.url("big.bin", mode, 2)) as f:
        buf = np.full(f.size, FILL, "u1")
        assert f.read(buf) == len(BIG)
        assert buf.tobytes() == BIG
        part = np.full(3 << 20, FILL, "u1")
        assert f.read(part, offset=1234) == part.size
        assert part.tobytes() == BIG[1234 : 1234 + part.size]
