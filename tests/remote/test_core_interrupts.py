"""Ctrl-C, stalls and what is retried, through the native core: a real SIGINT sent to a child process stuck
in a wave or an upload on a server that never answers; the retry log and the default timeouts against a
silent server; a self-signed certificate refused once, not retried. Tests count connections and requests;
the deadlines below only stop a child that hangs (the code before them ran until `remote.timeout`)."""

from __future__ import annotations

import logging
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator

import numpy as np
import pytest
from servers.net import Blackhole
from servers.stalls import StallingS3, TLSCounter

from gdsstore._config import ROWS
from gdsstore.engine import native
from gdsstore.engine.remote import core
from gdsstore.engine.remote.retry import RetryPolicy
from gdsstore.errors import RemoteIOError

from .conftest import read_pieces

pytestmark = pytest.mark.skipif(not native.load(), reason=f"native core not built: {native.unavailable_reason()}")

#: Seconds a child may take to exit after SIGINT before the test fails (it should take well under one).
EXIT_GUARD = 10.0

_READ = """
import sys
from concurrent.futures import ThreadPoolExecutor
import numpy as np
from gdsstore.engine.remote import core
from gdsstore.engine.remote.retry import RetryPolicy

port, where = int(sys.argv[1]), sys.argv[2]
st = core.http_store(f"http://127.0.0.1:{port}/", connect_timeout=5.0)
buf = np.zeros(4096, "u1")
pieces = [(f"o{i}", 0, None, None, 1024 * i, 1024) for i in range(4)]

def read():
    return core.read_table(st, "x", core.PieceTable.of(pieces), buf, retry=RetryPolicy(1, (), 0.0, 0.0), concurrency=4,
                           timeout=300.0)

if where == "main":
    read()
else:  # zarr and asyncio run waves on a pool's thread while the main thread waits
    with ThreadPoolExecutor(1) as pool:
        pool.submit(read).result()
"""

_UPLOAD = """
import sys
import numpy as np
from gdsstore.engine.remote import core
from gdsstore.engine.remote.retry import RetryPolicy

port, size = int(sys.argv[1]), int(sys.argv[2])
opts = {"aws_endpoint": f"http://127.0.0.1:{port}", "aws_region": "us-east-1", "aws_bucket": "bkt",
        "aws_access_key_id": "AKIDEXAMPLE", "aws_secret_access_key": "secret",
        "aws_virtual_hosted_style_request": "false"}
st = core.s3_store(opts, connect_timeout=5.0)
buf = np.ones(size, "u1")
core.write_objects(st, ["PUT s3://bkt/obj"], ["obj"], buf, [(0, size)], create=False, threshold=5 << 20,
                   part_size=5 << 20, retry=RetryPolicy(1, (), 0.0, 0.0), concurrency=4, timeout=300.0)
"""


def _interrupt(script: str, args: list[str], started: Callable[[], bool]) -> subprocess.CompletedProcess[str]:
    """Run ``script`` in a child, send it SIGINT once ``started()`` (the server saw its requests), and wait
    for it to exit (killed, and the test failed, after EXIT_GUARD seconds). The child has Python's own SIGINT
    handler, as at a terminal, whatever the test runner inherited: one started in the background of a
    non-interactive shell (``nohup pytest &``) ignores SIGINT, and a child would inherit that."""
    code = "import signal; signal.signal(signal.SIGINT, signal.default_int_handler)\n" + textwrap.dedent(script)
    child = subprocess.Popen([sys.executable, "-c", code, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
    try:
        deadline = time.monotonic() + 60
        while not started():
            assert child.poll() is None, f"the child exited before its requests were sent: {child.communicate()}"
            assert time.monotonic() < deadline, "the server never saw the child's requests"
            time.sleep(0.02)
        child.send_signal(signal.SIGINT)
        try:
            out, err = child.communicate(timeout=EXIT_GUARD)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the child still ran {EXIT_GUARD} s after SIGINT (its wave was not stopped)")
        return subprocess.CompletedProcess(child.args, child.returncode, out, err)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


@pytest.fixture
def blackhole() -> Iterator[Blackhole]:
    bh = Blackhole()
    try:
        yield bh
    finally:
        bh.close()


@pytest.mark.parametrize("where", ["main", "pool"])
def test_sigint_stops_a_wave_on_a_stalled_server(blackhole: Blackhole, where: str) -> None:
    done = _interrupt(_READ, [str(blackhole.port), where], lambda: len(blackhole._conns) >= 1)
    assert done.returncode != 0
    assert done.stderr.rstrip().endswith("KeyboardInterrupt"), done.stderr[-2000:]


def test_sigint_aborts_a_multipart_upload_and_publishes_nothing() -> None:
    srv = StallingS3()
    try:
        done = _interrupt(_UPLOAD, [str(srv.port), str(12 << 20)], lambda: "part" in srv.requests)
        assert done.returncode != 0
        assert done.stderr.rstrip().endswith("KeyboardInterrupt"), done.stderr[-2000:]
        seen = srv.requests
        assert "complete" not in seen, seen
        assert seen.count("abort") == 1, seen
    finally:
        srv.close()


def test_sigint_stops_a_single_put() -> None:
    srv = StallingS3()
    try:
        done = _interrupt(_UPLOAD, [str(srv.port), str(1 << 20)], lambda: "put" in srv.requests)
        assert done.stderr.rstrip().endswith("KeyboardInterrupt"), done.stderr[-2000:]
        assert srv.requests == ["put"]
    finally:
        srv.close()


# -- stalls: timeouts and the retry log -----------------------------------------------------------------


def test_a_silent_server_fails_within_a_minute_with_the_defaults() -> None:
    """The worst case of the default settings against a server that accepts and never answers: every
    attempt waits `remote.timeout`, and the pauses between attempts are at most their backoff caps."""
    d = {r.key: r.default for r in ROWS}
    n, timeout = d["remote.max_attempts"], max(d["remote.timeout"], d["remote.connect_timeout"])
    pauses = sum(min(d["remote.backoff_max"], d["remote.backoff_base"] * 2 ** (a - 1)) for a in range(1, n))
    worst = n * timeout + pauses
    assert worst < 60, f"{n} attempts x {timeout} s + {pauses:.1f} s of pauses = {worst:.0f} s"


def test_the_first_retry_is_logged_once(blackhole: Blackhole, caplog: pytest.LogCaptureFixture) -> None:
    st = core.http_store(f"http://127.0.0.1:{blackhole.port}/", connect_timeout=2.0)
    buf = np.zeros(2048, "u1")
    pieces = [(f"o{i}", 0, None, None, 1024 * i, 1024) for i in range(2)]
    retry = RetryPolicy(max_attempts=3, retry_status=(), backoff_base=0.0, backoff_max=0.0)
    with caplog.at_level(logging.DEBUG, logger="gdsstore"):
        res = read_pieces(st, "http://silent/", pieces, buf, retry=retry, concurrency=2, timeout=0.3)
    assert all(isinstance(r.error, RemoteIOError) for r in res)
    assert all("after 3 attempt(s)" in str(r.error) for r in res)
    warnings = [r for r in caplog.records if r.name.startswith("gdsstore") and r.levelno >= logging.WARNING]
    assert len(warnings) == 1, [r.getMessage() for r in warnings]
    msg = warnings[0].getMessage()
    assert "attempt 1 failed" in msg and "http://silent/o" in msg and "1 more request" in msg
    assert len(blackhole._conns) == 6  # 2 requests x 3 attempts, each on a connection of its own


def test_the_first_retry_of_the_python_path_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    calls: list[int] = []

    def flaky() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise TimeoutError("no answer")
        return "ok"

    retry = RetryPolicy(max_attempts=3, retry_status=(), backoff_base=0.0, backoff_max=0.0)
    with caplog.at_level(logging.DEBUG, logger="gdsstore"):
        assert retry.call(flaky, "GET http://x/y") == "ok"
    levels = [r.levelno for r in caplog.records if r.name == "gdsstore.remote"]
    assert levels == [logging.WARNING, logging.DEBUG]


# -- what is not retried --------------------------------------------------------------------------------


@pytest.fixture
def tls_counter(tls_files: tuple[str, str]) -> Iterator[TLSCounter]:
    srv = TLSCounter(tls_files)
    try:
        yield srv
    finally:
        srv.close()


def test_an_untrusted_certificate_is_one_attempt_naming_the_fix(tls_counter: TLSCounter) -> None:
    st = core.http_store(f"https://127.0.0.1:{tls_counter.port}/", connect_timeout=5.0)
    buf = np.zeros(1024, "u1")
    retry = RetryPolicy(max_attempts=4, retry_status=(503,), backoff_base=0.0, backoff_max=0.0)
    res = read_pieces(st, "https://127.0.0.1/", [("a.bin", 0, None, None, 0, 1024)], buf,
                         retry=retry, concurrency=1, timeout=5.0)
    err = res[0].error
    assert isinstance(err, RemoteIOError) and res[0].kind == "tls"
    assert res[0].attempts == 1
    text = str(err)
    assert "certificate" in text and "verify=" in text and "CA bundle" in text, text
    assert tls_counter.connections == 1
