"""Device memory of the GPU pipeline: how much a window may take (RMM-aware), and where one call's
allocations come from and go back to (:class:`CallMemory`).

``cudaMemGetInfo`` is blind to an RMM pool: under dask-cuda's ``--rmm-pool-size`` the pool has already
taken most of the device (``memGetInfo`` reports little free), while CuPy allocations go to that pool
and find room there. :func:`device_free_bytes` asks RMM's current resource when it is a pool (free in
the pool plus what the pool may still grow into) and CuPy's ``memGetInfo`` otherwise.

No RMM import happens unless ``rmm`` is already imported by the process (RMM manages a device only
after someone imported it and set a resource), so calling this costs nothing elsewhere.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gdsstore.gpu.nvcomp_capi import BOUND_SCRATCH

__all__ = [
    "CallMemory",
    "DeviceMemory",
    "call_memory",
    "device_free_bytes",
    "device_memory",
    "in_callers_allocator",
    "pool_free_bytes",
    "trim_call_pool",
    "window_budget",
]


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


# -- one call's allocations ------------------------------------------------------------------------------

#: Besides a window's decoded bytes (1x) and nvCOMP's decode scratch (``scratch`` x the decoded bytes:
#: :func:`gdsstore.gpu.nvcomp_capi.scratch_ratio`), alive at once: the compressed staging of this window
#: and of the next (about 2 x 0.6x; one window's when it is the read's only one) and a margin. Under
#: windows of a sixth of the budget at nvCOMP's bound scratch (3.1x), reads peaked at 0.88-0.92 of the
#: budget (H200, ``benchmarks/probe_budget.py`` of commit 9176d08: 900-940 MiB under 1 GiB, the call pool
#: trimmed between windows): 5.3-5.5x in use, so a margin of half the decoded bytes.
STAGING_SHARE = 1.2
MARGIN_SHARE = 0.5
#: Share of ``gpu.memory_budget`` one window's decoded bytes may take at nvCOMP's bound scratch.
WINDOW_SHARE = 1 + BOUND_SCRATCH + STAGING_SHARE + MARGIN_SHARE


def window_budget(budget: int, scratch: float = BOUND_SCRATCH, alone: bool = False) -> int:
    """Decoded bytes of one window under ``budget`` bytes of device memory, with ``scratch`` bytes of
    decode scratch per decoded byte; ``alone``: the read's only window (no next window staged beside it).

    Examples:
        >>> window_budget(1 << 30) >> 20
        176
        >>> window_budget(4 << 30, scratch=1.72, alone=True) >> 20
        1072
    """
    staging = STAGING_SHARE / 2 if alone else STAGING_SHARE
    return max(1, int(budget / (1 + scratch + staging + MARGIN_SHARE)))


class CallMemory:
    """Where the device allocations of one pipeline call come from, and where they go when it returns.

    With CuPy's default pool as the current allocator (nobody chose another), the call allocates from a
    pool of its own, emptied when the call returns: the default pool does not grow behind the user's back,
    and what the call took is back on the device. With another allocator current (RMM's
    ``rmm_cupy_allocator``, a PyTorch-backed one), the call allocates through it and that allocator
    keeps what it keeps. nvCOMP allocates its scratch with its own allocator: the call drops the codecs
    that hold it when it returns. (Routing nvCOMP's allocations through CuPy by
    ``nvidia.nvcomp.set_device_allocator`` crashed the interpreter at exit on the H200: nvCOMP's C++
    state then released Python objects after Python had finalized.)

    Allocators are per thread in CuPy: the engine threads that stage a window run under the caller's
    (:func:`in_callers_allocator`).
    """

    def __init__(self, cp: Any) -> None:
        self._cp = cp
        current = cp.cuda.get_allocator()
        private = getattr(current, "__self__", None) is cp.get_default_memory_pool()
        self.pool: Any = cp.cuda.MemoryPool() if private else None
        self.allocator: Callable[[int], Any] = current if self.pool is None else self.pool.malloc
        self._using: Any = None

    def __enter__(self) -> CallMemory:
        self._using = self._cp.cuda.using_allocator(self.allocator)
        self._using.__enter__()
        if self.pool is not None:
            _call_pools.add(id(self.pool))
        return self

    def __exit__(self, *exc: object) -> None:
        self._using.__exit__(*exc)
        if self.pool is not None:
            _call_pools.discard(id(self.pool))
            from gdsstore.gpu.nvcomp import forget_codecs

            # nvCOMP and the copies may run on streams of their own: wait for the whole device, then
            # free. Blocks still referenced stay valid: only free ones go back.
            self._cp.cuda.Device().synchronize()
            forget_codecs()
            self.pool.free_all_blocks()


#: ``id`` of every private pool of a call in progress (:class:`CallMemory`).
_call_pools: set[int] = set()


def trim_call_pool() -> None:
    """Between two windows of a call: give the free blocks of the call's private pool back to the device.

    CuPy's pool reuses a free block only for a request no larger than it, so windows of slightly
    different sizes each added blocks beside the idle ones: under a 256 MiB budget reads peaked at
    290-372 MiB, under 1 GiB shards at 1.43 GiB; freed between windows, 192-244 MiB and 900-940 MiB, at
    0-20 % of the speed (H200, ``benchmarks/probe_budget.py`` of commit 9176d08,
    ``benchmarks/results/2026-12-02-h200-s4/run6``).
    ``cudaFree`` waits for the device, so no block goes while a kernel still reads it. Does nothing under
    an allocator the user chose (it keeps what it keeps) or outside a call."""
    cp = sys.modules.get("cupy")
    if cp is None or not _call_pools:
        return
    pool = getattr(cp.cuda.get_allocator(), "__self__", None)
    if pool is not None and id(pool) in _call_pools:
        pool.free_all_blocks()


def call_memory() -> Any:
    """A :class:`CallMemory` for the calling thread, or a no-op context where CuPy is not loaded."""
    cp = sys.modules.get("cupy")
    return contextlib.nullcontext() if cp is None else CallMemory(cp)


def in_callers_allocator[T](fn: Callable[..., T]) -> Callable[..., T]:
    """``fn``, to run on another thread under the calling thread's CuPy allocator (CuPy's is per thread)."""
    cp = sys.modules.get("cupy")
    if cp is None:
        return fn
    alloc = cp.cuda.get_allocator()

    def run(*args: Any, **kwargs: Any) -> T:
        with cp.cuda.using_allocator(alloc):
            return fn(*args, **kwargs)

    return run
