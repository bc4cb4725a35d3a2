"""The device side of landing: a window's landed items (:class:`~gdsstore.engine.landing.Landed`, landed by
the engine's :func:`~gdsstore.engine.landing.land`) moved to the GPU in one large copy, and items that did
not come through the engine (another zarr store's buffers, decoded payloads) put in slots of one buffer.
A window's chunks once decoded are a ``Landed`` too, in the slots of each decoder's output
(``Landed.empty``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from gdsstore.engine import cuda, landing
from gdsstore.engine.landing import Landed, slot_layout

__all__ = ["empty_slots", "from_host_buffers", "to_device"]


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
