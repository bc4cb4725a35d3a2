"""gdsstore.engine.bounce: the pinned ring holds at most pinned_memory_limit bytes, and a forked child
starts with an empty ring. Host buffers stand in for pinned memory (the accounting is the same)."""

from __future__ import annotations

import ctypes
import os
import threading
import time

import pytest

import gdsstore
from gdsstore.engine.bounce import BounceRing

MiB = 1 << 20


class _HostBuffer:
    """A stand-in for cuda.PinnedBuffer: ``nbytes``, ``ptr``, ``view``; counts the live ones."""

    live = 0
    lock = threading.Lock()

    def __init__(self, nbytes: int) -> None:
        self.nbytes = nbytes
        self._mem = (ctypes.c_ubyte * nbytes)()
        self.ptr = ctypes.addressof(self._mem)
        self.view = memoryview(self._mem).cast("B")
        with _HostBuffer.lock:
            _HostBuffer.live += nbytes

    def __del__(self) -> None:
        with _HostBuffer.lock:
            _HostBuffer.live -= self.nbytes


def test_slots_of_all_sizes_stay_within_the_limit() -> None:
    ring = BounceRing(_HostBuffer)
    with gdsstore.config.set({"pinned_memory_limit": 8 * MiB}):
        small = [ring.acquire(MiB, 16) for _ in range(6)]
        assert ring.pinned_bytes == 6 * MiB
        for s in small:
            ring.release(s)
        del small, s
        # A 4 MiB slot needs room: idle 1 MiB slots are freed first, never more than the limit held.
        big = [ring.acquire(4 * MiB, 4) for _ in range(2)]
        assert ring.pinned_bytes <= 8 * MiB
        assert _HostBuffer.live <= 8 * MiB  # freed slots really gave their memory back
        got: list[object] = []

        def third() -> None:
            got.append(ring.acquire(4 * MiB, 4))  # waits: 8 MiB are in use

        t = threading.Thread(target=third)
        t.start()
        time.sleep(0.2)
        assert got == [] and ring.pinned_bytes <= 8 * MiB
        ring.release(big[0])
        t.join(10)
        assert len(got) == 1 and ring.pinned_bytes <= 8 * MiB


def test_a_slot_larger_than_the_limit_is_an_error_naming_the_setting() -> None:
    ring = BounceRing(_HostBuffer)
    with gdsstore.config.set({"pinned_memory_limit": 2 * MiB}), pytest.raises(ValueError, match="pinned_memory_limit"):
        ring.acquire(4 * MiB, 2)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_a_forked_child_starts_with_an_empty_ring() -> None:
    from gdsstore.engine import bounce

    ring = BounceRing(_HostBuffer)
    slot = ring.acquire(MiB, 2)
    ring.release(slot)
    os.register_at_fork(after_in_child=ring.forget_after_fork)  # as the module does for its own ring
    pid = os.fork()
    if pid == 0:
        ok = ring.pinned_bytes == 0 and slot.buf.ptr == 0 and bounce.ring.pinned_bytes == 0
        os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert ring.pinned_bytes == MiB and slot.buf.ptr != 0  # the parent keeps its slot
