"""Batched reads into one staging area: whole chunk objects or byte ranges, read with the engine's
threads into (pinned) host memory, then moved to the device in one large copy.

Two sources:

- a gdsstore :class:`~gdsstore.engine.backend.Backend` (what ``GDSStore.backend`` exposes): local
  files through the engine's :func:`gdsstore.engine.batch.read_batch` (``num_threads`` threads
  ``preadv`` straight into each slot; sizes looked up in one batched ``stat`` unless known), other
  backends through their file objects (no per-chunk Python buffers, no per-chunk device copies);
- any other zarr store: the byte getters' ``get`` runs concurrently and the results are copied in.

Slots are 64-byte aligned (nvCOMP wants 8-16 bytes; 64 keeps every chunk on its own cache line).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

import gdsstore.trace as _trace
from gdsstore import policy
from gdsstore.engine import batch, bounce, cuda
from gdsstore.engine.pool import map_all
from gdsstore.engine.ranges import ByteRange

__all__ = [
    "Fetch",
    "Staged",
    "alloc_staging",
    "empty_slots",
    "release_staging",
    "stage_from_backend",
    "stage_from_host_buffers",
    "stage_local",
    "stage_wave",
    "to_device",
]

_ALIGN = 64


@dataclass(frozen=True)
class Fetch:
    """One read: ``key`` whole (``byte_range=None``) or a range of it."""

    key: str
    byte_range: ByteRange | None = None


class Staged:
    """The bytes of a batch in one staging buffer: host memory, or device memory (``dev``) when the
    batch was read through the bounce ring straight to the GPU.

    ``offsets[i]``/``sizes[i]`` (``int64`` arrays) locate item ``i``; ``sizes[i] == -1``: missing.
    ``slots`` is the same as a list of ``(offset, nbytes)`` or ``None``. ``host`` of a device-staged
    batch is a copy made on first use (only paths that parse bytes on the CPU ask for it).
    """

    __slots__ = ("_host", "dev", "offsets", "pinned", "sizes")

    def __init__(
        self, host: np.ndarray | None, offsets: Any, sizes: Any, pinned: Any = None, dev: Any = None
    ) -> None:
        if host is None and dev is None:
            raise ValueError("Staged(): neither a host nor a device buffer")
        self._host = host  # uint8, possibly a view of pinned memory
        self.dev = dev  # uint8 cupy array, or None
        self.offsets = np.asarray(offsets, dtype=np.int64)
        self.sizes = np.asarray(sizes, dtype=np.int64)
        self.pinned = pinned  # the PinnedBuffer backing ``host`` (returned to the pool on release)

    @classmethod
    def from_slots(
        cls,
        host: np.ndarray | None,
        slots: Sequence[tuple[int, int] | None],
        pinned: Any = None,
        dev: Any = None,
    ) -> Staged:
        offs = [0 if s is None else s[0] for s in slots]
        sizes = [-1 if s is None else s[1] for s in slots]
        return cls(host, offs, sizes, pinned, dev)

    def sub(self, offsets: Any, sizes: Any) -> Staged:
        """Other items in the same buffer (inner chunks of coalesced reads); shares the memory."""
        return Staged(self._host, offsets, sizes, self.pinned, self.dev)

    def sub_slots(self, slots: Sequence[tuple[int, int] | None]) -> Staged:
        """:meth:`sub` with items given as ``(offset, nbytes)`` or ``None`` (missing)."""
        return Staged.from_slots(self._host, slots, self.pinned, self.dev)

    @property
    def host(self) -> np.ndarray:
        if self._host is None:
            self._host = self.dev.get()
        return self._host

    @property
    def slots(self) -> list[tuple[int, int] | None]:
        return [None if n < 0 else (a, n) for a, n in zip(self.offsets.tolist(), self.sizes.tolist())]

    @property
    def present(self) -> np.ndarray:
        """Indices of the items that exist."""
        return np.flatnonzero(self.sizes >= 0)

    def view(self, i: int) -> np.ndarray | None:
        n = int(self.sizes[i])
        if n < 0:
            return None
        a = int(self.offsets[i])
        return self.host[a : a + n]

    @property
    def nbytes(self) -> int:
        return int(self.sizes.clip(0).sum())

    def release(self) -> None:
        if self.pinned is not None:
            _pinned_pool.put(self.pinned)
            self.pinned = None
        self.dev = None


def staging_size(nbytes: int) -> int:
    """Bytes of a pinned staging buffer for ``nbytes``: at least 1 MiB, rounded up by at most an eighth
    or 1 MiB (to a sixteenth of the next power of two), so that slightly larger windows reuse it without
    pinning up to twice what a read needs, as rounding to a power of two did.

    Examples:
        >>> [staging_size(n) >> 20 for n in (1, (16 << 20) + 1, 100 << 20)]
        [1, 18, 104]
    """
    n = max(nbytes, 1 << 20)
    step = max(1 << 20, 1 << max(0, (n - 1).bit_length() - 4))
    return (n + step - 1) // step * step


class _PinnedPool:
    """Reuses pinned staging buffers: ``cudaHostAlloc`` of hundreds of MiB costs more than reading them.

    Every buffer it makes is counted in the bounce ring's pinned account (:mod:`gdsstore.engine.bounce`),
    so the ring's slots and the staging buffers, in use or idle, stay within ``pinned_memory_limit``
    together. A buffer that does not fit, even once the idle ones are freed, is not made: :meth:`get`
    returns ``None`` and the window is staged in pageable memory (the trace says so). Idle buffers kept:
    at most ``keep``; freed when the ring needs their room; emptied in a forked child (the parent's CUDA
    context owns them).

    Args:
        keep: idle buffers kept at most.
        ring: the account (tests pass their own).
        alloc: makes a pinned buffer of ``nbytes`` (``.nbytes``, ``.ptr``); tests pass a host stand-in.
    """

    def __init__(
        self, keep: int = 4, ring: bounce.BounceRing | None = None, alloc: Callable[[int], Any] | None = None
    ) -> None:
        self._free: list[Any] = []
        self._lock = threading.Lock()
        self._keep = keep
        self._ring = ring if ring is not None else bounce.ring
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


_pinned_pool = _PinnedPool()
bounce.ring.set_reclaimer(_pinned_pool.trim)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_pinned_pool.forget_after_fork)


def map_parallel(fn: Callable[[Any], Any], items: Sequence[Any]) -> list[Any]:
    """``[fn(x) for x in items]`` on the engine pool, ``num_threads`` at a time.

    Through :func:`gdsstore.engine.pool.map_all`, never ``Executor.map``: staging runs inside pool tasks
    (the window prefetch), and a thread that waits there runs the pieces itself, so a full pool cannot
    deadlock on its own nested work.
    """
    return map_all(fn, items, policy.settings().num_threads)


def _layout(sizes: np.ndarray) -> tuple[np.ndarray, int]:
    """Slot offsets (64-byte aligned, in order) for ``sizes`` (``-1``: missing, no room)."""
    padded = (sizes.clip(0) + _ALIGN - 1) // _ALIGN * _ALIGN
    ends = np.cumsum(padded)
    return ends - padded, int(ends[-1]) if len(ends) else 0


def alloc_staging(total: int, pinned: bool) -> tuple[np.ndarray, Any]:
    """``total`` bytes of host memory and their owner: a pinned-pool buffer when ``pinned`` (``None`` owner: pageable)."""
    if pinned and cuda.gpu_available():
        buf = _pinned_pool.get(total)
        if buf is not None:
            return np.frombuffer(buf.view, dtype=np.uint8, count=total), buf
        _trace.record("stage", "pageable", "pinned_memory_limit reached: staged in pageable memory", total, 0.0)
    return np.empty(total, dtype=np.uint8), None


def _resolve(backend: Any, f: Fetch) -> tuple[int, int] | None:
    """``(offset, nbytes)`` of a fetch, or ``None`` when the key does not exist."""
    try:
        size = backend.size(f.key)
    except FileNotFoundError:
        return None
    return f.byte_range.resolve(size) if f.byte_range is not None else (0, size)


def _read_to_device(
    paths: list[str],
    offsets: np.ndarray,
    sizes: np.ndarray,
    slot_offsets: np.ndarray,
    total: int,
    device: int,
    threads: int,
    url: str,
) -> tuple[Any, np.ndarray]:
    cp = cuda.cupy_or_none()
    assert cp is not None
    slot, limit = bounce.bounce_slots(policy.settings())
    with cp.cuda.Device(device):
        dev = cp.empty(max(total, 1), dtype=cp.uint8)
    sink = bounce.DeviceSink(device, int(dev.data.ptr), total, batch.piece_size(total, threads, slot), slot, limit)
    got = batch.read_batch(paths, offsets, sizes, sink, slot_offsets, threads, url=url)
    return dev, got


def stage_local(
    backend: Any,
    keys: Sequence[str],
    starts: np.ndarray | None = None,
    stops: np.ndarray | None = None,
    *,
    pinned: bool,
    ranges: Sequence[ByteRange | None] | None = None,
    expect: np.ndarray | None = None,
    device: int | None = None,
) -> Staged:
    """Local files through :func:`gdsstore.engine.batch.read_batch`, straight into their slots.

    Whole files when ``starts`` is ``None`` and ``ranges`` is ``None`` (one ``stat`` pass sizes them);
    exact ``[starts, stops)`` ranges known to lie inside the files (shard index entries: no
    ``stat``); or any :class:`ByteRange` per key (``ranges``, clamped as zarr says). ``expect``:
    whole files whose size is known (uncompressed chunks): no ``stat`` either, one byte more is
    asked for so that a file of another size is an error, not silently wrong data.

    ``device``: stage on that GPU instead, through the POSIX route's pinned bounce ring
    (:func:`gdsstore.engine.batch.read_batch` into a :class:`~gdsstore.engine.bounce.DeviceSink`): each slot is copied while the next is read,
    with no host staging buffer as large as the batch (``pinned`` is then ignored).

    Raises:
        OSError: a short read, or a file not of its ``expect`` size.
    """
    paths = batch.local_paths(backend.root, keys, "stage_from_backend()")
    threads = policy.settings().num_threads
    offsets, sizes = _local_extents(paths, starts, stops, ranges, expect, threads)
    slot_offsets, total = _layout(sizes)
    host: np.ndarray | None = None
    dev, pin = None, None
    if device is not None:
        dev, got = _read_to_device(paths, offsets, sizes, slot_offsets, total, device, threads, backend.url)
    else:
        host, pin = alloc_staging(total, pinned)
        try:
            got = batch.read_batch(
                paths,
                offsets,
                sizes,
                host,
                slot_offsets,
                threads,
                into="pinned staging" if pin is not None else "host buffer",
                url=backend.url,
            )
        except BaseException:
            if pin is not None:
                _pinned_pool.put(pin)
            raise
    try:
        sizes = _checked_sizes(keys, offsets, sizes, got, expect)
    except OSError:
        if pin is not None:
            _pinned_pool.put(pin)
        raise
    return Staged(host, slot_offsets, sizes, pin, dev)


def _local_extents(
    paths: list[str],
    starts: np.ndarray | None,
    stops: np.ndarray | None,
    ranges: Sequence[ByteRange | None] | None,
    expect: np.ndarray | None,
    threads: int,
) -> tuple[np.ndarray, np.ndarray]:
    """``(offsets, sizes)`` to read from each file (see :func:`stage_local`; ``-1``: missing)."""
    n = len(paths)
    if expect is not None:
        return np.zeros(n, dtype=np.int64), np.asarray(expect, dtype=np.int64) + 1
    if starts is not None:
        assert stops is not None
        offsets = np.asarray(starts, dtype=np.int64)
        return offsets, np.asarray(stops, dtype=np.int64) - offsets
    sizes = batch.stat_batch(paths, threads)
    offsets = np.zeros(n, dtype=np.int64)
    if ranges is not None:
        for i, br in enumerate(ranges):
            if br is not None and sizes[i] >= 0:
                offsets[i], sizes[i] = br.resolve(int(sizes[i]))
    return offsets, sizes


def _checked_sizes(
    keys: Sequence[str], offsets: np.ndarray, sizes: np.ndarray, got: np.ndarray, expect: np.ndarray | None
) -> np.ndarray:
    """The staged sizes after a read that returned ``got`` bytes per file (``-1``: missing).

    Raises:
        OSError: a short read, or a file not of its ``expect`` size.
    """
    gone = got < 0
    if gone.any():
        sizes = np.where(gone, -1, sizes)  # deleted since the stat: missing, as zarr says
    if expect is not None:
        bad = np.flatnonzero((got >= 0) & (got != sizes - 1))
        if len(bad):
            i = int(bad[0])
            what = "larger than" if got[i] == sizes[i] else f"{int(got[i])} bytes, not"
            raise OSError(
                f"stage_from_backend(): chunk {keys[i]!r} is {what} the {int(sizes[i]) - 1} bytes "
                "its codecs produce"
            )
        sizes = np.where(gone, -1, sizes - 1)
    short = np.flatnonzero((got >= 0) & (got < sizes.clip(0)))
    if len(short):
        i = int(short[0])
        raise OSError(
            f"stage_from_backend(): short read of {keys[i]!r}: {int(got[i])} of {int(sizes[i])} bytes "
            f"at offset {int(offsets[i])}"
        )
    return sizes


def release_staging(owner: Any) -> None:
    """Return an :func:`alloc_staging` buffer's owner to the pinned pool (``None``: nothing to return)."""
    if owner is not None:
        _pinned_pool.put(owner)


def stage_wave(
    backend: Any,
    keys: Sequence[str],
    ranges: Sequence[ByteRange | None] | None,
    *,
    pinned: bool,
    expect: np.ndarray | None = None,
    exact: bool = False,
    room: int | None = None,
) -> Staged:
    """A remote backend's objects or ranges in one wave of concurrent requests, no size lookups
    (:meth:`~gdsstore.engine.backend.Backend.get_many`), landed in one host (pinned when ``pinned``)
    buffer. ``expect``: whole objects' sizes when known; ``exact``: ranges inside their objects;
    ``room``: bytes to set aside for objects of unknown size.

    Raises:
        OSError: a request failed for good (its URL and the reason).
    """
    w = backend.get_many(
        keys, ranges, lambda n: alloc_staging(n, pinned), release_staging,
        expect=expect, exact=exact, room=room, where="stage_from_backend()",
    )  # fmt: skip
    return Staged(w.host, w.offsets, w.sizes, w.owner)


def stage_from_backend(backend: Any, fetches: Sequence[Fetch], *, pinned: bool, room: int | None = None) -> Staged:
    """Read every fetch through the engine into one host (pinned when ``pinned``) buffer: local files
    by the batched ``preadv``, remote objects in one wave (``room``: see :func:`stage_wave`).

    Missing keys give ``None`` slots. Ranges follow zarr's clamping contract.
    """
    from gdsstore.engine.localfs import LocalBackend

    if isinstance(backend, LocalBackend):
        return stage_local(
            backend, [f.key for f in fetches], pinned=pinned, ranges=[f.byte_range for f in fetches]
        )
    if backend.waves:
        return stage_wave(backend, [f.key for f in fetches], [f.byte_range for f in fetches], pinned=pinned, room=room)
    where = map_parallel(lambda f: _resolve(backend, f), fetches)
    sizes = np.array([-1 if w is None else w[1] for w in where], dtype=np.int64)
    offs, total = _layout(sizes)
    host, pin = alloc_staging(total, pinned)
    slots: list[tuple[int, int] | None] = [None if w is None else (int(a), w[1]) for a, w in zip(offs, where)]

    def read(i: int) -> None:
        s, w = slots[i], where[i]
        if s is None or w is None or s[1] == 0:
            return
        try:
            with backend.open(fetches[i].key, "rb") as fh:
                got = fh.read(host[s[0] : s[0] + s[1]], s[1], w[0])
        except FileNotFoundError:
            slots[i] = None  # deleted between the size lookup and the read: missing, as zarr says
            return
        if got != s[1]:
            raise OSError(
                f"stage_from_backend(): short read of {fetches[i].key!r}: {got} of {s[1]} bytes at offset {w[0]}"
            )

    try:
        map_parallel(read, range(len(fetches)))
    except BaseException:
        if pin is not None:
            _pinned_pool.put(pin)
        raise
    return Staged.from_slots(host, slots, pin)


def empty_slots(sizes: Any, *, pinned: bool) -> Staged:
    """One staging buffer with a 64-byte aligned slot of ``sizes[i]`` bytes for item ``i`` (``-1``: missing),
    for the caller to fill."""
    sizes = np.asarray(sizes, dtype=np.int64)
    offs, total = _layout(sizes)
    host, pin = alloc_staging(total, pinned)
    return Staged(host, offs, sizes, pin)


def stage_from_host_buffers(bufs: Sequence[Any], *, pinned: bool) -> Staged:
    """Copy host byte buffers (numpy ``uint8`` or ``None``) into one staging buffer."""
    st = empty_slots([-1 if b is None else int(b.nbytes) for b in bufs], pinned=pinned)
    host = st.host
    for b, a, n in zip(bufs, st.offsets.tolist(), st.sizes.tolist()):
        if b is not None:
            host[a : a + n] = (
                np.frombuffer(b, dtype=np.uint8)
                if not isinstance(b, np.ndarray)
                else b.view(np.uint8).reshape(-1)
            )
    return st


def to_device(staged: Staged) -> Any:
    """The staging buffer on the device: itself when staged there, else one host-to-device copy of
    the whole buffer; returns the cupy ``uint8`` array."""
    if staged.dev is not None:
        return staged.dev
    cp = cuda.cupy_or_none()
    assert cp is not None
    host = staged.host
    total = int(host.nbytes)
    dev = cp.empty(max(total, 1), dtype=cp.uint8)
    if total:
        if staged.pinned is not None:
            cuda.memcpy_htod(dev.device.id, int(dev.data.ptr), int(staged.pinned.ptr), total)
        else:
            dev[:total].set(host)
    return dev
