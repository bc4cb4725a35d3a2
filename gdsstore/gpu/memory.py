"""How much device memory gdsstore may take for a GPU window, RMM-aware.

``cudaMemGetInfo`` is blind to an RMM pool: under dask-cuda's ``--rmm-pool-size`` the pool has already
taken most of the device (``memGetInfo`` reports little free), while CuPy allocations go to that pool
and find room there. :func:`device_free_bytes` asks RMM's current resource when it is a pool (free in
the pool plus what the pool may still grow into) and CuPy's ``memGetInfo`` otherwise.

No RMM import happens unless ``rmm`` is already imported by the process (RMM manages a device only
after someone imported it and set a resource), so calling this costs nothing elsewhere.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

__all__ = ["DeviceMemory", "device_free_bytes", "device_memory", "pool_free_bytes"]


@dataclass(frozen=True)
class DeviceMemory:
    """Free device memory and where the number came from.

    Attributes:
        free: bytes gdsstore may allocate on the current device.
        source: ``"rmm pool"``, ``"rmm pool (no statistics: half the pool counted free)"`` or
            ``"cudaMemGetInfo"``.
    """

    free: int
    source: str


def pool_free_bytes(pool_size: int, used_bytes: int | None, device_free: int) -> DeviceMemory:
    """Free bytes under an RMM pool: the unused part of the pool plus the device memory it may grow into.

    Args:
        pool_size: bytes the pool holds now (``PoolMemoryResource.pool_size()``).
        used_bytes: bytes allocated from it (a ``StatisticsResourceAdaptor`` above the pool counts them),
            or ``None`` when nothing counts them: then half the pool is taken as free, a guess that
            neither starves the window nor claims the whole pool.
        device_free: ``cudaMemGetInfo``'s free bytes (memory outside the pool that it can still grow into).

    Returns:
        The estimate and its source.

    Examples:
        >>> pool_free_bytes(8 << 30, 6 << 30, 1 << 30).free == 3 << 30
        True
        >>> pool_free_bytes(8 << 30, None, 0).source
        'rmm pool (no statistics: half the pool counted free)'
    """
    if used_bytes is None:
        return DeviceMemory(pool_size // 2 + device_free, "rmm pool (no statistics: half the pool counted free)")
    return DeviceMemory(max(0, pool_size - used_bytes) + device_free, "rmm pool")


def _rmm_pool(mr: Any, rmm_mr: Any) -> tuple[Any, int | None] | None:
    """Walk from RMM's current resource down its upstreams to a pool; bytes in use if an adaptor counts them."""
    used: int | None = None
    for _ in range(16):  # resource chains are a few adaptors deep; never loop forever on a cycle
        if isinstance(mr, rmm_mr.StatisticsResourceAdaptor) and used is None:
            counts = mr.allocation_counts
            used = int(counts["current_bytes"] if isinstance(counts, dict) else counts.current_bytes)
        if isinstance(mr, rmm_mr.PoolMemoryResource):
            return mr, used
        upstream = getattr(mr, "get_upstream", None)
        if upstream is None:
            return None
        mr = upstream()
    return None


def device_memory() -> DeviceMemory:
    """Free memory on the current CUDA device, from RMM's pool when RMM manages the device.

    Returns:
        The free bytes and the source of the number.

    Raises:
        gdsstore.errors.MissingOptionalDependencyError: CuPy is not installed.
    """
    from gdsstore._optional import require

    cupy = require("cupy", purpose="gdsstore GPU window sizing")
    device_free = int(cupy.cuda.runtime.memGetInfo()[0])
    if "rmm" in sys.modules:  # RMM manages a device only if the process imported it
        rmm_mr = require("rmm.mr", extra="cuda13")
        found = _rmm_pool(rmm_mr.get_current_device_resource(), rmm_mr)
        if found is not None:
            pool, used = found
            return pool_free_bytes(int(pool.pool_size()), used, device_free)
    return DeviceMemory(device_free, "cudaMemGetInfo")


def device_free_bytes() -> int:
    """Bytes gdsstore may allocate on the current device (RMM's pool when it manages the device).

    The GPU pipeline sizes its window from this rather than ``cudaMemGetInfo`` alone.

    Returns:
        Free bytes (see :func:`device_memory` for the source).
    """
    return device_memory().free
