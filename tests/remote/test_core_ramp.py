"""The native core's ramp of connections to one host: a few requests first, more while the server keeps
up. Against python's own ``http.server`` (a listen backlog of 5: a wave of 256 connections at once overflowed
it, and the dropped SYNs cost 1, 3, 7, 15, 31 s each) and a server that keeps each answer's pace however many
wait (an object store): that one still gets hundreds in flight. Tests count what the servers see."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import zarr
from servers.stalls import PacedServer, small_http_server

import gdsstore
from gdsstore.engine import native
from gdsstore.engine.remote import core
from gdsstore.engine.remote.retry import RetryPolicy

from .conftest import read_pieces

pytestmark = pytest.mark.skipif(not native.load(), reason=f"native core not built: {native.unavailable_reason()}")

RETRY = RetryPolicy(max_attempts=4, retry_status=(503,), backoff_base=0.001, backoff_max=0.01)


@pytest.fixture
def paced() -> Iterator[PacedServer]:
    srv = PacedServer(delay=0.1)
    try:
        yield srv
    finally:
        srv.close()


def test_a_server_that_keeps_up_gets_many_in_flight_after_a_few(paced: PacedServer) -> None:
    n = 2000
    st = core.http_store(f"http://127.0.0.1:{paced.port}/", connect_timeout=5.0)
    pieces = [(f"o{i}", 0, None, 16, 16 * i, 16) for i in range(n)]
    buf = np.zeros(16 * n, "u1")
    res = read_pieces(st, "x", pieces, buf, retry=RETRY, concurrency=256, timeout=30.0)
    assert [r.error for r in res] == [None] * n
    assert buf[16 * 7 : 16 * 8].tobytes() == b"/o7".ljust(16, b".")
    seen = paced.seen
    assert len(seen) == n
    assert max(seen[:8]) <= 4, seen[:8]  # the first requests: a few at once, not the wave's 256
    # then many: as many as this Python server keeps its pace for on a busy 2-core machine (about 100)
    assert max(seen) >= 64, max(seen)


def test_python_http_server_reads_a_zarr_array_under_the_pipeline(tmp_path: Path) -> None:
    """100 chunks of 28 KB from ``python -m http.server``'s own classes under ``enable_pipeline()``: the
    read completes with the right values instead of waiting on SYNs the server's backlog dropped (33-68 s
    before the ramp; the guard below only stops a run that waits on them)."""
    src = np.arange(100 * 7000, dtype="f4")
    a = zarr.create_array(str(tmp_path / "a.zarr"), shape=src.shape, chunks=(7000,), dtype="f4", compressors=None)
    a[:] = src
    srv, thread = small_http_server(str(tmp_path))
    try:
        url = f"http://127.0.0.1:{srv.server_address[1]}/a.zarr"
        with gdsstore.config.set({"remote.timeout": 30.0}), gdsstore.enable_pipeline():
            z = zarr.open_array(gdsstore.GDSStore(url, read_only=True), mode="r")
            t0 = time.monotonic()
            got = z[:]
            elapsed = time.monotonic() - t0
    finally:
        srv.shutdown()
        srv.server_close()
        thread.join(5)
    np.testing.assert_array_equal(np.asarray(got), src)
    assert elapsed < 20, f"{elapsed:.1f} s: connections waited on dropped SYNs"
