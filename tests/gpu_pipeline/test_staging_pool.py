"""The GPU pipeline's pool of idle pinned staging buffers: bounded by ``pinned_memory_limit`` and by
count, emptied in a forked child. Host stand-ins with the two attributes the pool reads (``nbytes``,
``ptr``) take the place of pinned buffers, which need a GPU."""

from __future__ import annotations

import os

import pytest

import gdsstore
from gdsstore.engine.bounce import BounceRing
from gdsstore.gpu.staging import _PinnedPool


class Buf:
    def __init__(self, nbytes: int) -> None:
        self.nbytes = nbytes
        self.ptr = 1


def test_idle_buffers_kept_within_the_limit_largest_first() -> None:
    pool = _PinnedPool(keep=4, ring=BounceRing(HostPinned))
    with gdsstore.config.set({"pinned_memory_limit": 100 << 20}):
        for n in (64, 32, 16, 8, 4):
            pool.put(Buf(n << 20))
        assert pool.held() == (64 + 32 + 4) << 20  # 16 or 8 more would pass 100 MiB; 4 fits
        pool.put(Buf(200 << 20))  # larger than the limit: never kept
        assert pool.held() <= 100 << 20
    b = pool.get(30 << 20)
    assert b.nbytes == 32 << 20  # the smallest that fits


def test_count_bound() -> None:
    pool = _PinnedPool(keep=2, ring=BounceRing(HostPinned))
    for _ in range(5):
        pool.put(Buf(1 << 20))
    assert pool.held() == 2 << 20


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_starts_with_no_idle_buffers() -> None:
    from gdsstore.gpu import staging

    kept = Buf(1 << 20)
    staging._pinned_pool.put(kept)
    try:
        pid = os.fork()
        if pid == 0:  # the child: nothing kept, and the parent's buffer was not freed from here
            os._exit(0 if staging._pinned_pool.held() == 0 and kept.ptr == 0 else 1)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert kept.ptr == 1 and staging._pinned_pool.held() >= 1 << 20  # the parent keeps its own
    finally:
        staging._pinned_pool.forget_after_fork()


# -- one account for the bounce ring and the staging pool -------------------------------------------------

MiB = 1 << 20


class HostPinned:
    """A stand-in for cuda.PinnedBuffer with what the ring and the pool use."""

    def __init__(self, nbytes: int) -> None:
        self.nbytes = nbytes
        self._mem = bytearray(nbytes)
        self.ptr = 1
        self.view = memoryview(self._mem)
        self.pid = os.getpid()


def test_staging_is_sized_to_the_read() -> None:
    from gdsstore.gpu.staging import staging_size

    for n in (1, 700 << 10, 5 * MiB + 3, 300 * MiB, 1 << 30):
        got = staging_size(n)
        assert n <= got <= max(MiB, n + n // 8 + MiB)


def test_ring_and_staging_share_pinned_memory_limit() -> None:
    from gdsstore.engine.bounce import BounceRing

    ring = BounceRing(HostPinned)
    pool = _PinnedPool(ring=ring)
    ring.drop_staging = pool.drop_idle
    with gdsstore.config.set({"pinned_memory_limit": 64 * MiB, "bounce_buffer_size": 4 * MiB,
                              "remote.max_range_size": 8 * MiB}):
        a = pool.get(30 * MiB, HostPinned)
        assert a is not None and ring.stats()["staging"] == staging_size_of(30 * MiB)
        # 64 MiB less the 4 MiB reserved for a bounce buffer: a second 30 MiB buffer would pass it
        assert pool.get(30 * MiB, HostPinned) is None
        slots = [ring.acquire(4 * MiB, 8) for _ in range(4)]  # the reserve and what staging left free
        st = ring.stats()
        assert st["total"] <= 64 * MiB and st["peak"] <= 64 * MiB
        for s in slots:
            ring.release(s)
        pool.put(a)  # idle: kept, still counted
        assert ring.stats()["staging"] > 0 and pool.held() > 0
        many = [ring.acquire(4 * MiB, 16) for _ in range(15)]  # needs the idle staging's room
        assert pool.held() == 0 and ring.stats()["total"] <= 64 * MiB
        for s in many:
            ring.release(s)


def staging_size_of(n: int) -> int:
    from gdsstore.gpu.staging import staging_size

    return staging_size(n)


def test_a_buffer_that_would_pass_the_limit_is_not_pinned() -> None:
    from gdsstore.engine.bounce import BounceRing

    ring = BounceRing(HostPinned)
    pool = _PinnedPool(ring=ring)
    with gdsstore.config.set({"pinned_memory_limit": 8 * MiB}):
        assert pool.get(64 * MiB, HostPinned) is None  # the caller stages in ordinary host memory
        assert ring.stats()["staging"] == 0


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_parent_buffer_coming_back_in_a_forked_child_is_dropped() -> None:
    from gdsstore.gpu import staging

    buf = HostPinned(MiB)  # in use by the parent when it forks
    pid = os.fork()
    if pid == 0:
        staging._pinned_pool.put(buf)  # a Staged of the parent's released in the child
        ok = buf.ptr == 0 and staging._pinned_pool.held() == 0
        os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert buf.ptr == 1
