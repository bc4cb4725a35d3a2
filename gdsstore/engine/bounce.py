"""The pinned bounce ring: how the POSIX route and remote reads reach device memory.

Host buffers are read and written in place (:mod:`gdsstore.engine.posix`). Device buffers go through
:class:`BounceRing`: a piece is read into a pinned, page-aligned slot (a file read: into one half of a slot, the two halves in
turn), its H2D copy is queued on the thread's stream, and the thread moves on to the next piece while
the copy runs; memory is refilled only once its copy's event has completed. (kvikio's POSIX path
waits for each copy before the next read.)

The ring keeps the process's one account of pinned memory: its slots of every size and the GPU
pipeline's staging buffers (:meth:`BounceRing.take_external`) together stay within
``pinned_memory_limit``. It is emptied in a forked child (its pinned memory belongs to the parent's CUDA
context).
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

import gdsstore.trace as _trace
from gdsstore import policy
from gdsstore.engine import cuda
from gdsstore.engine.posix import pread_full, pwrite_full

__all__ = [
    "BounceRing", "DeviceCopy", "DeviceSink", "DeviceTransfer", "PinnedPool", "Slots", "bounce_slots", "pinned_pool", "read_to_device",
    "ring", "staging_size", "write_from_device",
]

_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


class _Slot:
    __slots__ = ("buf", "event", "halves")

    def __init__(self, nbytes: int, alloc: Callable[[int], Any]) -> None:
        self.buf = alloc(nbytes)
        self.event: Any = None  # CUDA event of the last copy out of / into this slot
        self.halves: list[Any] = []  # read_to_device's two reusable events, one per half


class BounceRing:
    """Pinned, page-aligned bounce buffers shared by the engine's threads, pooled by size.

    Local I/O uses ``bounce_buffer_size`` slots and remote reads ``remote.max_range_size`` slots: one
    free list per size, so alternating users never free and re-pin each other's memory. ``limit``
    bounds the slots of one size; ``pinned_memory_limit`` bounds the bytes of all sizes together: a new
    slot that would pass it first frees idle slots of other sizes, else waits for a slot to come back.
    Every user holds one slot at a time, so a wait always ends.

    Args:
        alloc: makes a pinned buffer of ``nbytes`` (``.nbytes``, ``.ptr``, ``.view``); tests pass a host one.
    """

    def __init__(self, alloc: Callable[[int], Any] = cuda.PinnedBuffer) -> None:
        self._alloc = alloc
        self._cond = threading.Condition()
        self._free: dict[int, deque[_Slot]] = {}
        self._count: dict[int, int] = {}
        self._pinned = 0  # bytes of every slot alive, free or in use, and of the external buffers
        self._external = 0  # of which: buffers of other users (the pipeline's staging)
        self.generation = 0  # changes in a forked child: buffers counted before the fork are not
        self._reclaim: Callable[[], None] | None = None

    def set_reclaimer(self, reclaim: Callable[[], None]) -> None:
        """Called, without the ring's lock, when a slot finds no room: frees the external user's idle
        buffers (their room comes back through :meth:`release_external`)."""
        self._reclaim = reclaim

    def take_external(self, nbytes: int) -> bool:
        """Count ``nbytes`` of another user's pinned memory in the account, if they fit within
        ``pinned_memory_limit`` once idle slots are freed; ``False`` when they do not."""
        cap = policy.settings().pinned_memory_limit
        with self._cond:
            if self._pinned + nbytes > cap:
                self._drop_idle(cap - nbytes)
            if self._pinned + nbytes > cap:
                return False
            self._pinned += nbytes
            self._external += nbytes
            return True

    def release_external(self, nbytes: int, generation: int) -> None:
        """Give back what :meth:`take_external` counted (ignored for a buffer from before a fork)."""
        with self._cond:
            if generation != self.generation:
                return
            self._pinned -= nbytes
            self._external -= nbytes
            self._cond.notify_all()

    def stats(self) -> dict[str, int]:
        """Pinned bytes now: ``total`` (the account), ``slots`` (the ring's own), ``external``, ``limit``."""
        with self._cond:
            return {
                "total": self._pinned,
                "slots": self._pinned - self._external,
                "external": self._external,
                "limit": policy.settings().pinned_memory_limit,
            }

    @property
    def pinned_bytes(self) -> int:
        """Pinned bytes the ring holds now (free and in-use slots)."""
        return self._pinned

    def acquire(self, slot_size: int, limit: int) -> _Slot:
        """A slot of ``slot_size`` bytes: a free one, a new one within both bounds, or the next released."""
        cap = policy.settings().pinned_memory_limit
        if slot_size > cap:
            raise ValueError(
                f"BounceRing.acquire(): a bounce buffer of {policy.fmt_bytes(slot_size)} exceeds "
                f"pinned_memory_limit {policy.fmt_bytes(cap)}; raise pinned_memory_limit "
                "or lower bounce_buffer_size / remote.max_range_size"
            )
        with self._cond:
            free = self._free.setdefault(slot_size, deque())
            while True:
                if free:
                    slot = free.popleft()
                    break
                if self._count.get(slot_size, 0) < limit:
                    self._drop_idle(cap - slot_size)
                    if self._pinned + slot_size <= cap:
                        slot = self._new_slot(slot_size)
                        break
                    if self._external and self._reclaim is not None:
                        self._cond.release()  # the reclaimer frees buffers whose release takes the lock
                        try:
                            self._reclaim()
                        finally:
                            self._cond.acquire()
                        if self._pinned + slot_size <= cap:
                            continue
                self._cond.wait(timeout=1.0)  # a slot or an external buffer comes back
        if slot.event is not None:
            slot.event.synchronize()  # its previous copy must be done before the slot is overwritten
            slot.event = None
        return slot

    def _new_slot(self, slot_size: int) -> _Slot:
        self._count[slot_size] = self._count.get(slot_size, 0) + 1
        self._pinned += slot_size
        try:
            return _Slot(slot_size, self._alloc)
        except BaseException:
            self._count[slot_size] -= 1
            self._pinned -= slot_size
            raise

    def _drop_idle(self, target: int) -> None:
        """Free idle slots (largest sizes first) until at most ``target`` bytes stay pinned."""
        for size in sorted(self._free, reverse=True):
            free = self._free[size]
            while free and self._pinned > target:
                slot = free.pop()
                if slot.event is not None:
                    slot.event.synchronize()  # no queued copy may still read the memory being freed
                self._count[size] -= 1
                self._pinned -= size

    def release(self, slot: _Slot, event: Any = None) -> None:
        slot.event = event
        cap = policy.settings().pinned_memory_limit
        with self._cond:
            self._free.setdefault(slot.buf.nbytes, deque()).append(slot)
            if self._pinned > cap:  # the limit was lowered since the slots were made: give idle ones back
                self._drop_idle(cap)
            self._cond.notify_all()

    def forget_after_fork(self) -> None:
        """In a forked child: drop every slot without freeing it (the parent's CUDA context owns it)."""
        for free in self._free.values():
            for slot in free:
                slot.buf.ptr = 0  # PinnedBuffer.__del__ frees nothing for ptr 0
        self._cond = threading.Condition()
        self._free, self._count, self._pinned, self._external = {}, {}, 0, 0
        self.generation += 1


ring = BounceRing()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=ring.forget_after_fork)


def staging_size(nbytes: int) -> int:
    """Bytes of a pinned buffer for ``nbytes``: at least 1 MiB, rounded up by at most an eighth or 1 MiB
    (to a sixteenth of the next power of two), so that slightly larger windows reuse it without pinning up
    to twice what a read needs.

    Examples:
        >>> [staging_size(n) >> 20 for n in (1, (16 << 20) + 1, 100 << 20)]
        [1, 18, 104]
    """
    n = max(nbytes, 1 << 20)
    step = max(1 << 20, 1 << max(0, (n - 1).bit_length() - 4))
    return (n + step - 1) // step * step


class PinnedPool:
    """Reuses pinned landing buffers: ``cudaHostAlloc`` of hundreds of MiB costs more than reading them.

    Every buffer it makes is counted in the bounce ring's pinned account, so the ring's slots and the landing buffers, in use or idle, stay within ``pinned_memory_limit``
    together. A buffer that does not fit, even once the idle ones are freed, is not made: :meth:`get`
    returns ``None`` and the items land in pageable memory (the trace says so). Idle buffers kept: at
    most ``keep``; freed when the ring needs their room; emptied in a forked child (the parent's CUDA
    context owns them).

    Args:
        keep: idle buffers kept at most.
        ring: the account (tests pass their own).
        alloc: makes a pinned buffer of ``nbytes`` (``.nbytes``, ``.ptr``); tests pass a host stand-in.
    """

    def __init__(
        self, keep: int = 4, ring: BounceRing = ring, alloc: Callable[[int], Any] | None = None
    ) -> None:
        self._free: list[Any] = []
        self._lock = threading.Lock()
        self._keep = keep
        self._ring = ring
        self._make = alloc if alloc is not None else cuda.PinnedBuffer

    def get(self, nbytes: int) -> Any | None:
        """A pinned buffer of at least ``nbytes``, or ``None`` when ``pinned_memory_limit`` leaves no room."""
        with self._lock:
            fits = [b for b in self._free if b.nbytes >= nbytes]
            if fits:
                best = min(fits, key=lambda b: b.nbytes)
                self._free.remove(best)
                return best
        size = staging_size(nbytes)
        if not self._ring.take_external(size):
            self.trim()
            if not self._ring.take_external(size):
                return None
        generation = self._ring.generation
        try:
            buf: Any = self._make(size)
        except BaseException:
            self._ring.release_external(size, generation)
            raise
        buf.gdsstore_account = generation  # counted: give the room back when it is freed
        return buf

    def put(self, buf: Any) -> None:
        """Take back a buffer from :meth:`get`: kept idle (the largest first, at most ``keep``) or freed."""
        with self._lock:
            self._free.append(buf)
            self._free.sort(key=lambda b: -b.nbytes)
            dropped = self._free[self._keep :]
            self._free = self._free[: self._keep]
        for b in dropped:
            self._forget(b)

    def trim(self) -> None:
        """Free every idle buffer (the ring calls this when a bounce slot finds no room)."""
        with self._lock:
            dropped, self._free = self._free, []
        for b in dropped:
            self._forget(b)

    def _forget(self, buf: Any) -> None:
        generation = getattr(buf, "gdsstore_account", None)
        if generation is not None:
            self._ring.release_external(buf.nbytes, generation)
        # The memory itself is freed with the last reference (PinnedBuffer.__del__).

    def held(self) -> int:
        """Bytes of idle pinned buffers kept for reuse."""
        with self._lock:
            return sum(b.nbytes for b in self._free)

    def forget_after_fork(self) -> None:
        """In a forked child: drop every buffer without freeing it (the parent's CUDA context owns it)."""
        for b in self._free:
            b.ptr = 0  # PinnedBuffer.__del__ frees nothing for ptr 0
        self._free = []
        self._lock = threading.Lock()


#: The process's one pool of pinned landing buffers, in the ring's account.
pinned_pool = PinnedPool()
ring.set_reclaimer(pinned_pool.trim)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=pinned_pool.forget_after_fork)


class Slots(NamedTuple):
    """The ring's slots a device route takes: their size, and how many of that size the ring holds at most."""

    size: int
    limit: int


def bounce_slots(s: policy.Settings) -> Slots:
    """Slot size and ring bound of the device routes: two slots per thread, so a thread's next
    slot is free while its last one's copy runs."""
    return Slots(min(s.bounce_buffer_size, s.task_size), 2 * s.num_threads)


@dataclass(frozen=True)
class DeviceTransfer:
    """One piece moved between a file and device memory through the ring, either way
    (:func:`read_to_device`, :func:`write_from_device`).

    Attributes:
        fd: the file.
        device: the GPU ordinal of the memory.
        ptr: the device memory's first byte.
        nbytes: bytes to move.
        offset: where they start in the file.
        slots: the ring's slots to go through (:func:`bounce_slots`).
        direct_fd: the same file opened with ``O_DIRECT`` (page-aligned pieces go through it), -1 for none.
        after: an event the copies wait for (:func:`gdsstore.engine.cuda.current_event`, taken by the caller).
    """

    fd: int
    device: int
    ptr: int
    nbytes: int
    offset: int
    slots: Slots
    direct_fd: int = -1
    after: Any = None


def _drain(stream: Any) -> None:
    """After an error: wait out ``stream`` (if any) before its slot goes back to the ring, so nobody
    refills memory a queued copy still reads. Best effort: the error being raised is what matters."""
    if stream is not None:
        with contextlib.suppress(Exception):
            stream.synchronize()


class DeviceCopy:
    """Spans of a host buffer copied to the same offsets of device memory on ``device`` as they become final,
    on the calling thread's stream: a remote wave's parts while the rest of it is in flight
    (:class:`~gdsstore.engine.remote.wave.WaveCopy`; ``part``: bytes of one). The first copy waits for the
    kernels the caller had queued when this was made (the memory may be theirs, freed); :meth:`result`
    waits for the copies. The device memory is allocated at the first copy, as large as the buffer."""

    def __init__(self, device: int, part: int) -> None:
        self.device = device
        self.part = part
        self._after: Any = cuda.current_event(device)
        self._dev: Any = None
        self._stream: Any = None
        self._copies = 0

    def copy(self, buf: Any, lo: int, hi: int) -> None:
        if hi <= lo:
            return
        cp = cuda.cupy_or_none()
        assert cp is not None
        with cp.cuda.Device(self.device):
            if self._dev is None or self._dev.size < buf.nbytes:
                self.abandon()  # nothing may still write into the memory given back
                self._dev = cp.empty(max(1, int(buf.nbytes)), dtype=cp.uint8)
            if self._stream is None:
                self._stream = cuda.thread_stream(self.device, after=self._after)
            src = int(buf.ctypes.data) + lo
            cuda.check_driver(
                cuda.copy_calls().copy_htod(int(self._dev.data.ptr) + lo, src, hi - lo, self._stream.ptr),
                "cuMemcpyHtoDAsync",
            )
        self._copies += 1

    def result(self, nbytes: int, parts: int) -> Any:
        """The device bytes ``[0, nbytes)`` once every copy is done (traced: ``parts`` of the copies were made
        while the wave ran; the time is the wait for the rest)."""
        t0 = time.perf_counter()
        cp = cuda.cupy_or_none()
        assert cp is not None
        with cp.cuda.Device(self.device):  # the event of the stream's device, whichever is current here
            if self._stream is not None:
                cuda.record_event(self._stream, blocking=True).synchronize()  # a sleeping wait: receivers run
            if self._dev is None:
                self._dev = cp.empty(max(1, nbytes), dtype=cp.uint8)
        if nbytes:
            _trace.record("h2d", "pinned-copy", f"{self._copies} copies, {parts} of them during the wave", nbytes,
                          time.perf_counter() - t0, device=self.device)
        return self._dev[:nbytes]

    def abandon(self) -> None:
        """Wait for the copies queued (after an error, or before the memory they write into is replaced)."""
        _drain(self._stream)


class DeviceSink:
    """Slots of the shared ring, each copied asynchronously to device memory at ``dst_ptr`` + its
    place on the calling thread's stream: the :class:`~gdsstore.engine.batch.Sink` of batched reads
    into ``nbytes`` of device staging (:func:`gdsstore.engine.batch.read_batch`).

    ``piece`` is at most ``slot_size``; ``limit`` bounds the ring's slots of that size; ``blocking``: waits on
    the copies sleep (:func:`~gdsstore.engine.cuda.record_event`; remote reads).
    """

    def __init__(self, device: int, dst_ptr: int, nbytes: int, piece: int, slot_size: int, limit: int,
                 *, blocking: bool = False) -> None:
        if piece > slot_size:
            raise ValueError(f"DeviceSink(): piece of {piece} bytes exceeds the slot size {slot_size}")
        self.device = device
        self.dst_ptr = dst_ptr
        self.nbytes = nbytes
        self.piece = piece
        self._slot_size = slot_size
        self._limit = limit
        self._blocking = blocking
        self._events: list[Any] = []
        self._lock = threading.Lock()
        self._after = cuda.current_event(device)  # the copies wait for the caller's queued kernels

    def acquire(self) -> tuple[memoryview, _Slot]:
        slot = ring.acquire(self._slot_size, self._limit)
        return slot.buf.view, slot

    def flush(self, handle: _Slot, lo: int, hi: int, base: int) -> None:
        cp = cuda.cupy_or_none()
        assert cp is not None
        event = None
        stream: Any = None
        try:
            with cp.cuda.Device(self.device):
                stream = cuda.thread_stream(self.device, after=self._after)
                cp.cuda.runtime.memcpyAsync(
                    self.dst_ptr + base + lo,
                    handle.buf.ptr + lo,
                    hi - lo,
                    cp.cuda.runtime.memcpyHostToDevice,
                    stream.ptr,
                )
                event = cuda.record_event(stream, blocking=self._blocking)
            with self._lock:
                self._events.append(event)
        except BaseException:
            if event is None:  # a queued copy no event covers
                _drain(stream)
            raise
        finally:
            ring.release(handle, event)  # reused only once this copy is done

    def discard(self, handle: _Slot) -> None:
        ring.release(handle)

    def finish(self) -> None:
        with self._lock:
            events, self._events = self._events, []
        for ev in events:
            ev.synchronize()


def read_to_device(t: DeviceTransfer) -> tuple[int, list[Any]]:
    """Read ``t.nbytes`` at ``t.offset`` into device memory through the ring; returns (bytes, copy events).

    The thread holds one slot for the whole call and reads pieces of half a slot into its two halves
    in turn: the copy of one half runs while the next piece is read into the other, and a half is
    refilled once its own copy is done. The per-piece CUDA calls keep the GIL where the driver loads
    through ctypes (:func:`gdsstore.engine.cuda.copy_calls`); the read is the only hand-over (this loop
    against one slot per piece: docs/performance.md, "Measurements behind the engine's choices"). The caller
    synchronizes the events before reporting the data as landed.
    """
    cp = cuda.cupy_or_none()
    assert cp is not None
    calls = cuda.copy_calls()
    fd, direct_fd, nbytes, offset = t.fd, t.direct_fd, t.nbytes, t.offset
    half = max(_PAGE, t.slots.size // 2 // _PAGE * _PAGE)  # page-aligned halves (O_DIRECT)
    slot = ring.acquire(t.slots.size, t.slots.limit)
    if not slot.halves:
        slot.halves = [cp.cuda.Event(block=False, disable_timing=True) for _ in range(2)]
    last: Any = None
    done = 0
    k = 0
    stream: Any = None
    try:
        with cp.cuda.Device(t.device):
            stream = cuda.thread_stream(t.device, after=t.after)
            while done < nbytes:
                h = k & 1
                k += 1
                ev = slot.halves[h]
                # This half's previous copy must be out before it is overwritten (an event never
                # recorded queries as done).
                if calls.query(ev.ptr) != 0:
                    cuda.check_driver(calls.synchronize(ev.ptr), "cuEventSynchronize")
                base = h * half
                view = slot.buf.view[base : base + half]
                want = min(half, nbytes - done)
                pos = offset + done
                got = -1
                span = -(-want // _PAGE) * _PAGE
                if direct_fd >= 0 and pos % _PAGE == 0 and span <= half:
                    # O_DIRECT needs aligned offset, length and buffer: halves are page-aligned; round up.
                    try:
                        got = min(pread_full(direct_fd, view[:span], pos), want)
                    except OSError:  # EINVAL on filesystems with stricter alignment: buffered instead
                        got = -1
                if got < 0:
                    got = pread_full(fd, view[:want], pos)
                if got:
                    cuda.check_driver(
                        calls.copy_htod(t.ptr + done, slot.buf.ptr + base, got, stream.ptr), "cuMemcpyHtoDAsync"
                    )
                    cuda.check_driver(calls.record(ev.ptr, stream.ptr), "cuEventRecord")
                    last = ev
                done += got
                if got < want:
                    break
    except BaseException:
        _drain(stream)  # a copy may be queued that no recorded event covers (a failed record)
        raise
    finally:
        # Copies on one stream finish in order: the last one's event covers the slot's two halves
        # (and, for the caller, every copy of this call).
        ring.release(slot, last)
    return done, [] if last is None else [last]


def write_from_device(t: DeviceTransfer) -> int:
    """Write ``t.nbytes`` of device memory at ``t.offset`` through the ring (D2H, then pwrite), the reverse of
    :func:`read_to_device`: page-aligned whole pages through ``t.direct_fd`` where there is one, the rest
    buffered."""
    done = 0
    while done < t.nbytes:
        want = min(t.slots.size, t.nbytes - done)
        slot = ring.acquire(t.slots.size, t.slots.limit)
        try:
            cuda.memcpy_dtoh(t.device, slot.buf.ptr, t.ptr + done, want, t.after)
            aligned = t.direct_fd >= 0 and (t.offset + done) % _PAGE == 0 and want % _PAGE == 0
            pwrite_full(t.direct_fd if aligned else t.fd, slot.buf.view[:want], t.offset + done)
        finally:
            ring.release(slot)
        done += want
    return done
