"""The device side of landing: a window's landed items (:class:`~gdsstore.engine.landing.Landed`, landed by
the engine's :func:`~gdsstore.engine.landing.land`) moved to the GPU in one large copy. Slots for items that
did not come through the engine, and a window's chunks once decoded, are ``Landed`` too
(``landing.empty_slots``, ``landing.from_host_buffers``, ``Landed.empty``).
"""

from __future__ import annotations

from typing import Any

from gdsstore.engine import cuda
from gdsstore.engine.landing import Landed

__all__ = ["to_device"]


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
