"""``DeviceCopy`` (``gdsstore.engine.bounce``): a remote wave's parts copied to the device while the wave runs
(GPU machine: ``pytest -m gpu``). Each span lands at its own offset, a larger buffer gets new device memory, the
first copy waits for the kernels the caller had queued (its memory may be theirs), and the trace row says how
many copies were made during the wave."""

from __future__ import annotations

import numpy as np
import pytest
from test_stream_order import _slow_copy

import gdsstore
from gdsstore.engine import landing
from gdsstore.engine.bounce import DeviceCopy

pytestmark = pytest.mark.gpu


def test_spans_land_at_their_offsets() -> None:
    import cupy as cp

    n = 3 << 20
    buf, owner = landing.alloc_host(n, True)
    try:
        buf[:] = np.random.default_rng(1).integers(0, 256, n, dtype=np.uint8)
        copy = DeviceCopy(0, 1 << 20)
        with gdsstore.trace() as t:
            for lo, hi in [(1 << 20, 2 << 20), (0, 1 << 20), (2 << 20, n - 5)]:
                copy.copy(buf, lo, hi)
            dev = copy.result(n - 5, 2)
        assert isinstance(dev, cp.ndarray) and dev.nbytes == n - 5
        assert np.array_equal(cp.asnumpy(dev), buf[: n - 5])
        (row,) = t.events
        assert (row.op, row.route, row.reason) == ("h2d", "pinned-copy", "3 copies, 2 of them during the wave")
    finally:
        landing.release_host(owner)


def test_a_larger_buffer_gets_new_device_memory() -> None:
    import cupy as cp

    small, large = np.full(1000, 3, np.uint8), np.full(5000, 4, np.uint8)
    copy = DeviceCopy(0, 1024)
    copy.copy(small, 0, 1000)
    copy.copy(large, 0, 5000)  # a wave that moved to a larger buffer copies it whole again
    assert bool((copy.result(5000, 0) == 4).all())
    assert cp.asnumpy(DeviceCopy(0, 1).result(0, 0)).nbytes == 0


def test_the_first_copy_waits_for_kernels_still_reading_the_memory() -> None:
    import cupy as cp

    n = 64 << 20
    pool = cp.cuda.MemoryPool()  # a pool of its own: the freed block is the one handed out next
    with cp.cuda.using_allocator(pool.malloc):
        rows = cp.full(n, 7, dtype=cp.uint8)
        out = cp.zeros(n, dtype=cp.uint8)
        cp.cuda.Device().synchronize()
        _slow_copy(rows, out, n)  # a scatter still queued on the caller's stream
        ptr = rows.data.ptr
        del rows
        copy = DeviceCopy(0, 16 << 20)  # as a wave starts: after that kernel
        buf = np.ones(n, np.uint8)
        copy.copy(buf, 0, n)
        dev = copy.result(n, 1)
        assert dev.data.ptr == ptr  # the pool reused the block the kernel still reads
        cp.cuda.Device().synchronize()
        assert int((out != 7).sum()) == 0
        assert bool((dev == 1).all())
