"""The GPU pipeline's pool of pinned staging buffers: counted with the bounce ring's slots in one
``pinned_memory_limit``, bounded idle by count, emptied in a forked child. Host stand-ins with the
attributes the pool and ring read (``nbytes``, ``ptr``, ``view``) take the place of pinned buffers, which
need a GPU."""

from __future__ import annotations

import os

import pytest
from hypothesis import given
from hypothesis import strategies as st

import gdsstore
from gdsstore.engine.bounce import BounceRing, PinnedPool, staging_size


class Buf:
    def __init__(self, nbytes: int) -> None:
        self.nbytes = nbytes
        self.ptr = 1
        self.view = memoryview(bytearray(1))


def account(limit_mib: int) -> tuple[BounceRing, PinnedPool]:
    ring = BounceRing(alloc=Buf)
    pool = PinnedPool(keep=4, ring=ring, alloc=Buf)
    ring.set_reclaimer(pool.trim)
    return ring, pool


def test_staging_buffers_and_ring_slots_share_one_pinned_limit() -> None:
    ring, pool = account(100)
    with gdsstore.config.set({"pinned_memory_limit": 100 << 20}):
        a = pool.get(60 << 20)
        assert a is not None and ring.stats()["external"] == 60 << 20
        assert pool.get(50 << 20) is None  # 110 MiB would pass the limit: staged in pageable memory
        slot = ring.acquire(8 << 20, 4)  # a bounce slot still fits beside it
        assert ring.stats() == {"total": 68 << 20, "slots": 8 << 20, "external": 60 << 20, "limit": 100 << 20}
        ring.release(slot)
        pool.put(a)  # idle, still counted: it is pinned memory
        assert ring.stats()["total"] == 68 << 20 and pool.held() == 60 << 20
        b = pool.get(50 << 20)  # reuses the idle 60 MiB buffer
        assert b is a
        pool.put(b)
        c = pool.get(80 << 20)  # frees the idle buffer and the idle slot to make room
        assert c is not None and pool.held() == 0
        assert ring.stats()["total"] == 80 << 20 <= 100 << 20
        pool.put(c)


def test_a_bounce_slot_reclaims_the_room_of_idle_staging_buffers() -> None:
    ring, pool = account(64)
    with gdsstore.config.set({"pinned_memory_limit": 64 << 20}):
        buf = pool.get(60 << 20)
        pool.put(buf)  # idle, holding 60 of the 64 MiB
        slot = ring.acquire(8 << 20, 4)  # would wait forever without the reclaimer
        assert pool.held() == 0 and ring.stats()["total"] == 8 << 20
        ring.release(slot)


def test_idle_buffers_kept_at_most_keep_largest_first() -> None:
    ring, pool = account(1024)
    with gdsstore.config.set({"pinned_memory_limit": 1 << 30}):
        bufs = [pool.get(n << 20) for n in (64, 32, 16, 8, 4)]
        assert ring.stats()["external"] == (64 + 32 + 16 + 8 + 4) << 20
        for b in bufs:
            pool.put(b)
        assert pool.held() == (64 + 32 + 16 + 8) << 20  # keep=4: the smallest was freed
        assert ring.stats()["external"] == pool.held()
    assert pool.get(30 << 20).nbytes == 32 << 20  # the smallest that fits


@given(st.integers(1, 1 << 34))
def test_staging_size_rounds_up_by_at_most_an_eighth_or_a_mib(n: int) -> None:
    size = staging_size(n)
    assert size >= n and size >= 1 << 20
    assert size <= n + max(1 << 20, n // 8)
    assert staging_size(size) == size  # a buffer of that size is reused as it is


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_starts_with_no_idle_buffers() -> None:
    from gdsstore.engine import bounce

    kept = Buf(1 << 20)
    bounce.pinned_pool.put(kept)
    try:
        pid = os.fork()
        if pid == 0:  # the child: nothing kept, and the parent's buffer was not freed from here
            os._exit(0 if bounce.pinned_pool.held() == 0 and kept.ptr == 0 else 1)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert kept.ptr == 1 and bounce.pinned_pool.held() >= 1 << 20  # the parent keeps its own
    finally:
        bounce.pinned_pool.forget_after_fork()


def test_a_lowered_limit_is_reached_as_slots_come_back() -> None:
    ring, _ = account(0)
    with gdsstore.config.set({"pinned_memory_limit": 1 << 30}):
        slots = [ring.acquire(8 << 20, 16) for _ in range(8)]  # 64 MiB of slots, made under 1 GiB
    with gdsstore.config.set({"pinned_memory_limit": 24 << 20}):
        for slot in slots:
            ring.release(slot)
        assert ring.stats()["total"] <= 24 << 20
