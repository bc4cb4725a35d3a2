"""Batched reads into one staging area: whole chunk objects or byte ranges, read with the engine's
threads into (pinned) host memory, then moved to the device in one large copy.

Two sources:

- a gdsstore :class:`~gdsstore.engine.backend.Backend` (what ``GDSStore.backend`` exposes): sizes
  are looked up, then every range is ``pread`` straight into its slot of the staging buffer by a
  pool of ``num_threads`` threads (no per-chunk Python buffers, no per-chunk device copies);
- any other zarr store: the byte getters' ``get`` runs concurrently and the results are copied in.

Slots are 64-byte aligned (nvCOMP wants 8-16 bytes; 64 keeps every chunk on its own cache line).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

import gdsstore.trace as _trace
from gdsstore import policy
from gdsstore.engine import cuda
from gdsstore.engine.backend import ByteRange

__all__ = ["Fetch", "Staged", "stage_from_backend", "stage_from_host_buffers", "to_device"]

_ALIGN = 64


@dataclass(frozen=True)
class Fetch:
    """One read: ``key`` whole (``byte_range=None``) or a range of it."""

    key: str
    byte_range: ByteRange | None = None


@dataclass
class Staged:
    """The bytes of a batch in one host buffer: ``slots[i]`` is ``(offset, nbytes)`` or ``None`` (missing)."""

    host: np.ndarray  # uint8, possibly a view of pinned memory
    slots: list[tuple[int, int] | None]
    pinned: Any = None  # the PinnedBuffer backing ``host`` (kept alive, returned to the pool on release)

    def view(self, i: int) -> np.ndarray | None:
        s = self.slots[i]
        return None if s is None else self.host[s[0] : s[0] + s[1]]

    @property
    def nbytes(self) -> int:
        return sum(s[1] for s in self.slots if s is not None)

    def release(self) -> None:
        if self.pinned is not None:
            _pinned_pool.put(self.pinned)
            self.pinned = None


class _PinnedPool:
    """Reuses pinned buffers: ``cudaHostAlloc`` of hundreds of MiB costs more than reading them."""

    def __init__(self, keep: int = 4) -> None:
        self._free: list[Any] = []
        self._lock = threading.Lock()
        self._keep = keep

    def get(self, nbytes: int) -> Any:
        with self._lock:
            fits = [b for b in self._free if b.nbytes >= nbytes]
            if fits:
                best = min(fits, key=lambda b: b.nbytes)
                self._free.remove(best)
                return best
        # Round up so that slightly larger batches reuse the buffer.
        return cuda.PinnedBuffer(max(1 << 20, 1 << (max(nbytes, 1) - 1).bit_length()))

    def put(self, buf: Any) -> None:
        with self._lock:
            self._free.append(buf)
            self._free.sort(key=lambda b: -b.nbytes)
            del self._free[self._keep :]


_pinned_pool = _PinnedPool()
_executor: ThreadPoolExecutor | None = None
_executor_threads = 0
_executor_lock = threading.Lock()


def executor() -> ThreadPoolExecutor:
    """The staging pool (``num_threads`` threads). Separate from the engine's pool: its tasks block on
    engine reads, which may themselves run pieces on the engine pool."""
    global _executor, _executor_threads
    n = policy.settings().num_threads
    with _executor_lock:
        if _executor is None or _executor_threads != n:
            old = _executor
            _executor = ThreadPoolExecutor(max_workers=n, thread_name_prefix="gdsstore-stage")
            _executor_threads = n
            if old is not None:
                old.shutdown(wait=False)
        return _executor


def _layout(sizes: Sequence[int | None]) -> tuple[list[tuple[int, int] | None], int]:
    slots: list[tuple[int, int] | None] = []
    pos = 0
    for n in sizes:
        if n is None:
            slots.append(None)
            continue
        slots.append((pos, n))
        pos += (n + _ALIGN - 1) // _ALIGN * _ALIGN
    return slots, pos


def _alloc(total: int, pinned: bool) -> tuple[np.ndarray, Any]:
    if pinned and cuda.gpu_available():
        buf = _pinned_pool.get(total)
        return np.frombuffer(buf.view, dtype=np.uint8, count=total), buf
    return np.empty(total, dtype=np.uint8), None


def _resolve(backend: Any, f: Fetch) -> tuple[int, int] | None:
    """``(offset, nbytes)`` of a fetch, or ``None`` when the key does not exist."""
    try:
        size = backend.size(f.key)
    except FileNotFoundError:
        return None
    return f.byte_range.resolve(size) if f.byte_range is not None else (0, size)


def _groups(n: int, parts: int) -> list[range]:
    """``range(n)`` cut into at most ``parts`` contiguous groups (one pool task each)."""
    parts = max(1, min(parts, n))
    step = -(-n // parts)
    return [range(a, min(n, a + step)) for a in range(0, n, step)]


def _local_stage(backend: Any, fetches: Sequence[Fetch], pinned: bool) -> Staged:
    """Local files: ``stat`` then ``open``/``preadv``/``close`` per file, straight into the slot.

    The engine's file object costs ~100 us of Python per file (settings, buffer checks, routing);
    a batch of host-memory reads needs none of it: the route is POSIX into host memory by policy
    ("host buffer"), and these syscalls release the GIL. Each pool task takes a contiguous group of
    files: one task per file would cost more in futures than in reads for small chunks.
    """
    pool = executor()
    threads = policy.settings().num_threads
    t0 = time.perf_counter()
    n = len(fetches)
    paths = [backend._path(f.key, "stage_from_backend()") for f in fetches]
    where: list[tuple[int, int] | None] = [None] * n

    def sizes(g: range) -> None:
        for i in g:
            try:
                size = os.stat(paths[i]).st_size
            except (FileNotFoundError, NotADirectoryError):
                continue
            br = fetches[i].byte_range
            where[i] = br.resolve(size) if br is not None else (0, size)

    groups = _groups(n, threads)
    list(pool.map(sizes, groups))
    slots, total = _layout([None if w is None else w[1] for w in where])
    host, pin = _alloc(total, pinned)
    flags = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0)

    def read(g: range) -> int:
        done = 0
        for i in g:
            s, w = slots[i], where[i]
            if s is None or w is None or s[1] == 0:
                continue
            try:
                fd = os.open(paths[i], flags)
            except (FileNotFoundError, NotADirectoryError):
                slots[i] = None  # deleted since the stat: missing, as zarr says
                continue
            try:
                got = 0
                view = memoryview(host[s[0] : s[0] + s[1]])
                while got < s[1]:
                    k = os.preadv(fd, [view[got:]], w[0] + got)
                    if k == 0:
                        break
                    got += k
            finally:
                os.close(fd)
            if got != s[1]:
                raise OSError(
                    f"stage_from_backend(): short read of {fetches[i].key!r}: {got} of {s[1]} bytes"
                )
            done += got
        return done

    try:
        nbytes = sum(pool.map(read, _groups(n, threads)))
    except BaseException:
        if pin is not None:
            _pinned_pool.put(pin)
        raise
    _trace.record(
        "read",
        "posix",
        f"host buffer; batch of {n} reads",
        nbytes,
        time.perf_counter() - t0,
        backend.url,
    )
    return Staged(host, slots, pin)


def stage_from_backend(backend: Any, fetches: Sequence[Fetch], *, pinned: bool) -> Staged:
    """Read every fetch through the engine into one host (pinned when ``pinned``) buffer.

    Missing keys give ``None`` slots. Ranges follow zarr's clamping contract.
    """
    from gdsstore.engine.localfs import LocalBackend

    if isinstance(backend, LocalBackend):
        return _local_stage(backend, fetches, pinned)
    pool = executor()
    where = list(pool.map(lambda f: _resolve(backend, f), fetches))
    slots, total = _layout([None if w is None else w[1] for w in where])
    host, pin = _alloc(total, pinned)

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
        list(pool.map(read, range(len(fetches))))
    except BaseException:
        if pin is not None:
            _pinned_pool.put(pin)
        raise
    return Staged(host, slots, pin)


def stage_from_host_buffers(bufs: Sequence[Any], *, pinned: bool) -> Staged:
    """Copy host byte buffers (numpy ``uint8`` or ``None``) into one staging buffer."""
    slots, total = _layout([None if b is None else int(b.nbytes) for b in bufs])
    host, pin = _alloc(total, pinned)
    for b, s in zip(bufs, slots):
        if s is not None and b is not None:
            host[s[0] : s[0] + s[1]] = (
                np.frombuffer(b, dtype=np.uint8)
                if not isinstance(b, np.ndarray)
                else b.view(np.uint8).reshape(-1)
            )
    return Staged(host, slots, pin)


def to_device(staged: Staged) -> Any:
    """One host-to-device copy of the whole staging buffer; returns the cupy ``uint8`` array."""
    cp = cuda.cupy_or_none()
    assert cp is not None
    total = int(staged.host.nbytes)
    dev = cp.empty(max(total, 1), dtype=cp.uint8)
    if total:
        if staged.pinned is not None:
            cuda.memcpy_htod(dev.device.id, int(dev.data.ptr), int(staged.pinned.ptr), total)
        else:
            dev[:total].set(staged.host)
    return dev
