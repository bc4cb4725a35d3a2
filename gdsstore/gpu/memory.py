"""Device memory: the pipeline's budget (``gpu.memory_budget``), its accounting, and free memory, RMM-aware.

Every GPU pipeline read or write runs inside :func:`device_call`: its allocations go through
:data:`budget`, which counts them (the windows are sized from the setting, :mod:`gdsstore.gpu.plan`)
and routes them to CuPy's current allocator, or to a private pool that is emptied when the call
returns when the current allocator is CuPy's default pool (see :class:`DeviceBudget`).

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
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

__all__ = [
    "IDLE_SHARE",
    "DeviceBudget",
    "DeviceMemory",
    "budget",
    "budget_bytes",
    "budget_stats",
    "device_call",
    "device_free_bytes",
    "device_memory",
    "forget_learned",
    "idle_bytes",
    "is_default_pool",
    "learned_cost",
    "observe",
    "on_thread",
    "pool_free_bytes",
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


# -- the device memory budget ------------------------------------------------------------------------------

#: What the private pool may keep between calls: at most this share of the budget (1/32: 32 MiB of 1 GiB).
IDLE_SHARE = 32


def budget_bytes() -> int:
    """The ``gpu.memory_budget`` setting: device bytes one pipeline read or write may take."""
    from gdsstore import policy

    return policy.settings().gpu_memory_budget


def idle_bytes(budget: int) -> int:
    """What gdsstore's private pool keeps once no call is running (:data:`IDLE_SHARE` of the budget).

    Examples:
        >>> idle_bytes(1 << 30) >> 20
        32
    """
    return budget // IDLE_SHARE


def is_default_pool(allocator: Any, default_pool: Any) -> bool:
    """Whether ``allocator`` (``cupy.cuda.get_allocator()``) is CuPy's default pool's ``malloc``: then
    nobody chose an allocator, and gdsstore's temporaries go to a private pool instead of growing it."""
    return getattr(allocator, "__self__", None) is default_pool


class _Tracked:
    """Owner of one allocation: keeps the allocator's memory alive and gives its bytes back to the
    budget's count when the last view of it is gone."""

    __slots__ = ("budget", "mem", "nbytes")

    def __init__(self, budget: DeviceBudget, mem: Any, nbytes: int) -> None:
        self.budget, self.mem, self.nbytes = budget, mem, nbytes

    def __del__(self) -> None:
        self.budget._freed(self.nbytes)


def _cupy_wrap(mem: Any, owner: _Tracked, nbytes: int) -> Any:
    """A CuPy ``MemoryPointer`` to ``mem``'s bytes that keeps ``owner`` (and so ``mem``) alive."""
    import cupy

    unowned = cupy.cuda.UnownedMemory(int(mem.ptr), nbytes, owner, int(mem.device_id))
    return cupy.cuda.MemoryPointer(unowned, 0)


class DeviceBudget:
    """gdsstore's device temporaries, counted: every allocation a pipeline call makes (its own buffers,
    CuPy's temporaries, nvCOMP's scratch) goes through :meth:`allocate` while the call runs
    (``cupy.cuda.using_allocator``, per thread: the user's other threads are untouched).

    :meth:`allocate` asks the allocator that was current when the call started (``base``) — RMM's,
    PyTorch's, ``cupy.cuda.malloc_async``, the user's own pool — except CuPy's default pool: nobody
    chose it, and blocks freed into it would stay held by it behind the user's back, so those
    allocations come from a private ``cupy.cuda.MemoryPool`` that :meth:`trim` empties when the last
    call returns (unless it holds no more than :func:`idle_bytes`). Nothing else is ever freed from
    anyone's pool.

    Args:
        private_pool: makes the private pool (``cupy.cuda.MemoryPool``); tests pass a stand-in.
        wrap: turns ``(memory, owner, nbytes)`` into what the caller gets (a CuPy ``MemoryPointer``).
    """

    def __init__(self, private_pool: Any = None, wrap: Any = _cupy_wrap) -> None:
        # re-entrant: a _Tracked freed by a garbage collection that runs inside a locked block re-enters
        self._lock = threading.RLock()
        self._make_pool = private_pool
        self._pool: Any = None
        self._wrap = wrap
        self._base: Any = None
        self.active = 0  # calls running now
        self.live = 0  # bytes allocated through the budget and not yet freed
        self.peak = 0  # most live bytes since the last reset_peak() (one window's)
        self.top = 0  # most live bytes since the running calls started (theirs, all windows)
        self.devices: set[int] = set()  # GPUs the private pool has allocated on (the ones to trim)

    # -- accounting --

    def _freed(self, nbytes: int) -> None:
        with self._lock:
            self.live -= nbytes

    def reset_peak(self) -> int:
        """Start a new peak from what is live now; returns the old peak."""
        with self._lock:
            old, self.peak = self.peak, self.live
        return old

    def allocate(self, nbytes: int) -> Any:
        """``nbytes`` from the call's allocator, counted until freed (the ``cupy.cuda.alloc`` signature)."""
        base = self._base or self._default_base()
        mem = base(nbytes)
        if nbytes <= 0:
            return mem
        owner = _Tracked(self, mem, nbytes)
        with self._lock:
            self.devices.add(int(getattr(mem, "device_id", 0)))
            self.live += nbytes
            self.peak = max(self.peak, self.live)
            self.top = max(self.top, self.live)
        return self._wrap(mem, owner, nbytes)

    def _default_base(self) -> Any:
        import cupy

        return self.resolve(cupy.cuda.get_allocator(), cupy.get_default_memory_pool())

    def resolve(self, current: Any, default_pool: Any) -> Any:
        """The allocator a call uses, given the current one: itself, or the private pool's ``malloc``
        when it is CuPy's default pool (see the class docstring)."""
        if current == self.allocate:  # a nested call: keep the outer call's allocator
            return self._base or self._private().malloc
        if not is_default_pool(current, default_pool):
            return current
        return self._private().malloc

    def _private(self) -> Any:
        with self._lock:
            if self._pool is None:
                if self._make_pool is None:
                    import cupy

                    self._make_pool = cupy.cuda.MemoryPool
                self._pool = self._make_pool()
            return self._pool

    # -- calls --

    def enter(self, base: Any) -> None:
        """A call starts; ``base``: the allocator it resolved (:meth:`resolve`)."""
        with self._lock:
            if self.active == 0:
                self._base = base
                self.peak = self.top = self.live
            self.active += 1

    def leave(self, budget: int, devices: Sequence[Any] = ()) -> None:
        """A call returns; the last one out trims (:meth:`trim`) on each of ``devices`` (context managers
        that make a GPU current; none: the current one)."""
        with self._lock:
            self.active -= 1
            last = self.active == 0
            if last:
                self._base = None
        if last:
            for dev in devices or [contextlib.nullcontext()]:
                with dev:
                    self.trim(idle_bytes(budget))

    def held(self) -> int:
        """Bytes the private pool holds (in use and idle) on the current device."""
        pool = self._pool
        return int(pool.total_bytes()) if pool is not None else 0

    def trim(self, keep: int) -> int:
        """Free what gdsstore keeps once idle: nvCOMP's cached codecs (their scratch) and, when the private
        pool holds more than ``keep`` bytes on the current device, its free blocks there (all or nothing:
        CuPy frees a pool's free blocks together). Returns the bytes the pool holds after."""
        from gdsstore.gpu import nvcomp

        nvcomp.drop_codecs()
        pool = self._pool
        if pool is None:
            return 0
        if int(pool.total_bytes()) > keep:
            pool.free_all_blocks()
        return int(pool.total_bytes())


budget = DeviceBudget()


@contextmanager
def on_thread() -> Iterator[None]:
    """Route this thread's CuPy allocations through :data:`budget` (a pipeline call's worker threads)."""
    from gdsstore.engine import cuda

    cp = cuda.cupy_or_none()
    if cp is None or not cuda.gpu_available():
        yield
        return
    with cp.cuda.using_allocator(budget.allocate):
        yield


@contextmanager
def device_call() -> Iterator[None]:
    """One GPU pipeline read or write: its allocations (this thread's, and those of workers that run
    :func:`on_thread`) are counted against ``gpu.memory_budget``, through the allocator current now;
    the last call to return trims gdsstore's private pool and nvCOMP's cached scratch."""
    from gdsstore.engine import cuda

    cp = cuda.cupy_or_none()
    if cp is None or not cuda.gpu_available():
        yield
        return
    limit = budget_bytes()
    budget.enter(budget.resolve(cp.cuda.get_allocator(), cp.get_default_memory_pool()))
    try:
        with cp.cuda.using_allocator(budget.allocate):
            yield
    finally:
        # only GPUs it allocated on: making another one current would create its context
        budget.leave(limit, [cp.cuda.Device(d) for d in sorted(budget.devices)])


def budget_stats() -> dict[str, int]:
    """What the budget counts now: ``live`` bytes (gdsstore's allocations, nvCOMP's included), the
    ``peak`` of the last window, the ``top`` of the last calls (all their windows), ``held`` by the
    private pool, ``budget``, ``active`` calls (for benchmarks, tests and doctor)."""
    return {
        "budget": budget_bytes(),
        "live": budget.live,
        "peak": budget.peak,
        "top": budget.top,
        "held": budget.held(),
        "active": budget.active,
    }


# -- what windows measured -----------------------------------------------------------------------------------

_learned: dict[tuple[Any, ...], float] = {}
_learned_lock = threading.Lock()


def observe(key: tuple[Any, ...], peak: int, nbytes: int, limit: int = 0) -> None:
    """Record a window's measured peak device bytes (``peak``, the budget's count) for ``nbytes``
    decoded (or raw, for writes) bytes, under the kind of window ``key`` (route, format, chunk size):
    the largest ratio seen sizes the next windows of that kind (:func:`learned_cost`). A window of
    less than half its ``limit`` (the last of a call, often) teaches nothing: what it shares with its
    predecessors (nvCOMP's cached scratch) would count many times over for its few bytes."""
    if nbytes <= 0 or peak <= 0 or nbytes < limit // 2:
        return
    with _learned_lock:
        if len(_learned) > 256 and key not in _learned:
            _learned.clear()  # a bounded table: kinds of windows are few in practice
        _learned[key] = max(_learned.get(key, 0.0), peak / nbytes)


def learned_cost(key: tuple[Any, ...], model: float) -> float:
    """Device bytes per byte for windows of kind ``key``: the measured ratio once one was measured
    (:func:`observe`), else ``model`` (:func:`gdsstore.gpu.plan.read_cost`)."""
    with _learned_lock:
        return _learned.get(key, model)


def forget_learned() -> None:
    """Forget every measured ratio (tests; a new budget needs none: ratios do not depend on it)."""
    with _learned_lock:
        _learned.clear()
