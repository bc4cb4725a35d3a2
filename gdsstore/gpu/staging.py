"""The device side of landing: a window's landed items (:class:`~gdsstore.engine.landing.Landed`, landed by
the engine's :func:`~gdsstore.engine.landing.land`) moved to the GPU in one large copy, items that did
not come through the engine (another zarr store's buffers, decoded payloads) put in slots of one buffer,
and a window's chunks once decoded (:class:`RawChunks`: in the slots of each decoder's output).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from gdsstore.engine import cuda, landing
from gdsstore.engine.landing import Landed, slot_layout

__all__ = ["RawChunks", "device_pointer", "empty_slots", "from_host_buffers", "to_device"]


def device_pointer(a: Any) -> int:
    """Address of a device (or, in tests, host) array's first byte."""
    return int(a.data.ptr) if hasattr(a, "__cuda_array_interface__") else int(a.ctypes.data)


class RawChunks:
    """Chunks decoded to their raw bytes, each in a slot of one of several buffers: chunk ``i`` is ``lens[i]``
    bytes at ``offs[i]`` of ``bufs[where[i]]`` (``where[i] == -1``: not decoded here: missing, or left for the
    CPU, :attr:`cpu_reason` says why). ``bufs`` keeps the memory alive.

    Not a :class:`~gdsstore.engine.landing.Landed`: a window's chunks come out of several decoders at once
    (nvCOMP's output, the staging itself for chunks stored raw, blosc's unshuffled groups, the host decoder's
    one copy); gathering them in one buffer would cost a device copy of every window.
    """

    __slots__ = ("bufs", "cpu_reason", "lens", "offs", "where")

    def __init__(self, n: int) -> None:
        self.bufs: list[Any] = []
        self.where = np.full(n, -1, dtype=np.int64)
        self.offs = np.zeros(n, dtype=np.int64)
        self.lens = np.zeros(n, dtype=np.int64)
        self.cpu_reason: str | None = None

    def add(self, buf: Any, ids: Any, offs: Any, lens: Any) -> None:
        """Chunks ``ids`` are ``lens`` bytes at ``offs`` of ``buf``."""
        self.where[ids] = len(self.bufs)
        self.offs[ids] = offs
        self.lens[ids] = lens
        self.bufs.append(buf)

    @property
    def on_cpu(self) -> np.ndarray:
        """Chunks not decoded here (missing, or left for the CPU)."""
        return np.flatnonzero(self.where < 0)

    def ptrs(self) -> np.ndarray:
        """Device address of each chunk's raw bytes (``int64``; 0: not decoded here)."""
        base = np.array([device_pointer(b) for b in self.bufs] + [0], dtype=np.int64)
        out: np.ndarray = np.where(self.where >= 0, base[self.where] + self.offs, 0)
        return out

    def array(self, i: int) -> Any:
        """Chunk ``i``'s raw bytes as a ``uint8`` view of its buffer, or ``None`` when not decoded here."""
        w = int(self.where[i])
        if w < 0:
            return None
        a = int(self.offs[i])
        return self.bufs[w][a : a + int(self.lens[i])]


def empty_slots(sizes: Any, *, pinned: bool) -> Landed:
    """One buffer with a slot of ``sizes[i]`` bytes for item ``i`` (``-1``: missing), for the caller to fill."""
    sizes = np.asarray(sizes, dtype=np.int64)
    offsets, total = slot_layout(sizes)
    host, pin = landing.alloc_host(total, pinned)
    return Landed(host, offsets, sizes, pin)


def from_host_buffers(bufs: Sequence[Any], *, pinned: bool) -> Landed:
    """Copy host byte buffers (numpy ``uint8`` or ``None``: missing) into one buffer."""
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


def to_device(landed: Landed) -> Any:
    """The landed buffer on the device: itself when landed there, else one host-to-device copy of the
    whole buffer; returns the cupy ``uint8`` array."""
    if landed.dev is not None:
        return landed.dev
    cp = cuda.cupy_or_none()
    assert cp is not None
    host = landed.host
    total = int(host.nbytes)
    dev = cp.empty(max(total, 1), dtype=cp.uint8)
    if total:
        if landed.pinned is not None:
            cuda.memcpy_htod(dev.device.id, int(dev.data.ptr), int(landed.pinned.ptr), total)
        else:
            dev[:total].set(host)
    return dev
