"""The GPU pipeline's pool of idle pinned staging buffers: bounded by ``pinned_memory_limit`` and by
count, emptied in a forked child. Host stand-ins with the two attributes the pool reads (``nbytes``,
``ptr``) take the place of pinned buffers, which need a GPU."""

from __future__ import annotations

import os

import pytest

import gdsstore
from gdsstore.gpu.staging import _PinnedPool


class Buf:
    def __init__(self, nbytes: int) -> None:
        self.nbytes = nbytes
        self.ptr = 1


def test_idle_buffers_kept_within_the_limit_largest_first() -> None:
    pool = _PinnedPool(keep=4)
    with gdsstore.config.set({"pinned_memory_limit": 100 << 20}):
        for n in (64, 32, 16, 8, 4):
            pool.put(Buf(n << 20))
        assert pool.held() == (64 + 32 + 4) << 20  # 16 or 8 more would pass 100 MiB; 4 fits
        pool.put(Buf(200 << 20))  # larger than the limit: never kept
        assert pool.held() <= 100 << 20
    b = pool.get(30 << 20)
    assert b.nbytes == 32 << 20  # the smallest that fits


def test_count_bound() -> None:
    pool = _PinnedPool(keep=2)
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
