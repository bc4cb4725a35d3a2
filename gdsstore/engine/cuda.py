"""Lazy CUDA helpers over CuPy: device presence, pinned memory, per-thread streams, async copies.

Nothing here imports CuPy at module import; every function does it on first use, so
``import gdsstore`` works on machines with no GPU and no CUDA driver.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, NamedTuple

__all__ = [
    "DriverCalls",
    "PinnedBuffer",
    "check_driver",
    "copy_calls",
    "cupy_or_none",
    "device_count",
    "device_of_pointer",
    "driver_calls",
    "memcpy_dtoh",
    "memcpy_htod",
    "runtime_calls",
]


@functools.cache
def cupy_or_none() -> Any:
    """The ``cupy`` module, or ``None`` when it is not installed or cannot load."""
    try:
        import cupy
    except Exception:
        return None
    return cupy


@functools.cache
def device_count() -> int:
    """Number of visible CUDA devices; 0 without CuPy, a driver or a GPU (never raises)."""
    cp = cupy_or_none()
    if cp is None:
        return 0
    try:
        return int(cp.cuda.runtime.getDeviceCount())
    except Exception:
        return 0


def gpu_available() -> bool:
    return device_count() > 0


def device_of_pointer(ptr: int) -> int:
    """CUDA device ordinal owning ``ptr``."""
    cp = cupy_or_none()
    if cp is None:
        from gdsstore._optional import install_hint

        raise TypeError(f"device memory given but CuPy is not installed; {install_hint('cuda13')}")
    attrs = cp.cuda.runtime.pointerGetAttributes(ptr)
    return int(attrs.device)


class PinnedBuffer:
    """Page-aligned page-locked host memory (``cudaHostAlloc``), viewable as a memoryview."""

    def __init__(self, nbytes: int) -> None:
        import ctypes

        cp = cupy_or_none()
        assert cp is not None
        self.nbytes = nbytes
        # cudaHostAlloc returns page-aligned memory (needed for O_DIRECT), unlike pool sub-allocations.
        self.ptr = int(cp.cuda.runtime.hostAlloc(nbytes, 0))
        self.view = memoryview((ctypes.c_ubyte * nbytes).from_address(self.ptr)).cast("B")

    def __del__(self) -> None:
        cp = cupy_or_none()
        ptr = getattr(self, "ptr", 0)
        if cp is not None and ptr:
            try:
                cp.cuda.runtime.freeHost(ptr)
            except Exception:
                pass
            self.ptr = 0


def on_device(device: int | None) -> AbstractContextManager[Any]:
    """``with on_device(d):`` makes GPU ``d`` current (no-op for ``None``: host memory)."""
    if device is None:
        return contextlib.nullcontext()
    cp = cupy_or_none()
    assert cp is not None
    return cp.cuda.Device(device)  # type: ignore[no-any-return]


_tls = threading.local()


def thread_stream(device: int, after: Any = None) -> Any:
    """A non-blocking stream owned by the calling thread on ``device`` (copies of different
    threads overlap each other and the reads); with ``after`` (an event, :func:`current_event`), the
    stream's next work waits for it."""
    streams: dict[int, Any] | None = getattr(_tls, "streams", None)
    if streams is None:
        streams = _tls.streams = {}
    s = streams.get(device)
    if s is None:
        cp = cupy_or_none()
        assert cp is not None
        with cp.cuda.Device(device):
            s = streams[device] = cp.cuda.Stream(non_blocking=True)
    if after is not None:
        s.wait_event(after)
    return s


def current_event(device: int) -> Any:
    """An event after the work queued so far on the calling thread's current CuPy stream on ``device``.

    Why: a copy into device memory runs on a thread's non-blocking stream (:func:`thread_stream`), which has
    no order with the caller's. CuPy's pool hands out memory freed on the caller's stream at once, while a
    kernel queued there may still read it; a copy into it must wait for that kernel, or it changes the
    bytes the kernel reads (wrong bytes in a multi-window archive read). Taken
    in the caller's thread when an operation starts, waited for by every stream that copies into its memory.
    """
    cp = cupy_or_none()
    assert cp is not None
    with cp.cuda.Device(device):
        return record_event(cp.cuda.get_current_stream())


def record_event(stream: Any, *, blocking: bool = False) -> Any:
    """An event recorded on ``stream``, without timing.

    ``blocking``: waiting for it sleeps (``cudaEventBlockingSync``) instead of spinning: a sleeping
    thread leaves its core to the receivers of remote reads; local reads are faster spinning
    (docs/performance.md, "Measurements behind the engine's choices").
    """
    cp = cupy_or_none()
    assert cp is not None
    ev = cp.cuda.Event(block=blocking, disable_timing=True)
    ev.record(stream)
    return ev


def _memcpy(device: int, dst: int, src: int, nbytes: int, to_device: bool, after: Any = None) -> None:
    cp = cupy_or_none()
    assert cp is not None
    rt = cp.cuda.runtime
    with cp.cuda.Device(device):
        # After the caller's kernels (current_event): taken here, on the calling thread, unless given.
        s = thread_stream(device, after=after if after is not None else current_event(device))
        rt.memcpyAsync(dst, src, nbytes, rt.memcpyHostToDevice if to_device else rt.memcpyDeviceToHost, s.ptr)
        s.synchronize()


def memcpy_htod(device: int, dst: int, src: int, nbytes: int, after: Any = None) -> None:
    """Copy pinned host → device on the thread's stream, after ``after`` (default: the work queued on this
    thread's current stream), and wait for it."""
    _memcpy(device, dst, src, nbytes, True, after)


def memcpy_dtoh(device: int, dst: int, src: int, nbytes: int, after: Any = None) -> None:
    """Copy device → pinned host on the thread's stream, after ``after`` (default: the work queued on this
    thread's current stream), and wait for it."""
    _memcpy(device, dst, src, nbytes, False, after)


class DriverCalls(NamedTuple):
    """CUDA driver entry points for the bounce loop's per-piece calls (raw handles and pointers).

    ``copy_htod(dst, src, nbytes, stream)``, ``record(event, stream)`` and ``query(event)`` return at
    once and keep the GIL (``ctypes.PyDLL``): a thread that let go of the GIL for a call of a few
    microseconds would queue behind the other readers to get it back. ``synchronize(event)`` waits,
    so it lets go (``ctypes.CDLL``). Each returns a ``CUresult``: 0 is success, 600 "not ready".
    """

    copy_htod: Callable[[int, int, int, int], int]
    record: Callable[[int, int], int]
    query: Callable[[int], int]
    synchronize: Callable[[int], int]


@functools.cache
def driver_calls() -> DriverCalls | None:
    """The driver's calls of :class:`DriverCalls`, or ``None`` where ``libcuda.so.1`` does not load
    (callers then use CuPy's runtime calls). Only called with device buffers, so never on a machine
    without a CUDA driver."""
    try:
        keep = ctypes.PyDLL("libcuda.so.1")
        free = ctypes.CDLL("libcuda.so.1")
        u64, size, ptr = ctypes.c_uint64, ctypes.c_size_t, ctypes.c_void_p
        copy = keep.cuMemcpyHtoDAsync_v2
        copy.argtypes, copy.restype = [u64, ptr, size, ptr], ctypes.c_int
        record = keep.cuEventRecord
        record.argtypes, record.restype = [ptr, ptr], ctypes.c_int
        query = keep.cuEventQuery
        query.argtypes, query.restype = [ptr], ctypes.c_int
        sync = free.cuEventSynchronize
        sync.argtypes, sync.restype = [ptr], ctypes.c_int
    except (OSError, AttributeError):
        return None
    return DriverCalls(copy, record, query, sync)


@functools.cache
def runtime_calls() -> DriverCalls:
    """The calls of :class:`DriverCalls` through CuPy's runtime API: each lets go of the GIL, and a
    failure raises CuPy's error (a success returns 0, like the driver's)."""
    cp = cupy_or_none()
    assert cp is not None
    rt = cp.cuda.runtime

    def copy_htod(dst: int, src: int, nbytes: int, stream: int) -> int:
        rt.memcpyAsync(dst, src, nbytes, rt.memcpyHostToDevice, stream)
        return 0

    def record(event: int, stream: int) -> int:
        rt.eventRecord(event, stream)
        return 0

    def synchronize(event: int) -> int:
        rt.eventSynchronize(event)
        return 0

    return DriverCalls(copy_htod, record, rt.eventQuery, synchronize)


def copy_calls() -> DriverCalls:
    """:func:`driver_calls` where ``libcuda.so.1`` loads through ctypes, else :func:`runtime_calls`."""
    return driver_calls() or runtime_calls()


def check_driver(status: int, call: str) -> None:
    """Raise CuPy's driver error for a failed driver call (names the call and the CUDA error)."""
    if status != 0:
        cp = cupy_or_none()
        cause: BaseException | None = None
        if cp is not None:
            try:
                cause = cp.cuda.driver.CUDADriverError(status)
            except Exception as exc:  # CuPy without libcuda cannot name the error: the call's error still names it
                cause = exc
        raise RuntimeError(f"{call} failed with CUDA driver error {status}") from cause
