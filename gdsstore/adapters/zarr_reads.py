"""The read side of :class:`~gdsstore.adapters.zarr_store.GDSStore`: its blocking work as engine calls.

Every read allocates its destination from the caller's ``prototype`` (host memory for zarr's default
buffers, device memory for ``zarr.core.buffer.gpu.Buffer``) and the engine fills it. Each async method
of the store runs one of these functions in a thread; each sync method calls it directly.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from zarr.core.buffer import Buffer, BufferPrototype

from gdsstore.engine.backend import Backend, BatchResult, host_alloc
from gdsstore.engine.ranges import ByteRange, start_range_reads

# zarr's own defaults for Store.get_ranges (zarr/abc/store.py): merge ranges closer than 1 MiB,
# into fetches of at most 16 MiB.
MAX_GAP_BYTES = 1 << 20
MAX_COALESCED_BYTES = 16 << 20

# What a read of a key that is not there raises: the store answers None (zarr's contract).
MISSING = (FileNotFoundError, IsADirectoryError, NotADirectoryError)

#: A read of many ranges, as zarr's ``get_ranges`` yields it: groups of ``(input_index, Buffer)``.
RangeGroups = list[list[tuple[int, Buffer]]]

# Buffer class -> its memory is on the device (decided once per class from a zero-length buffer).
_DEVICE_BUFFER_CLASSES: dict[type[Buffer], bool] = {}


def is_device_buffer(cls: type[Buffer]) -> bool:
    """Whether buffers of ``cls`` hold device memory."""
    known = _DEVICE_BUFFER_CLASSES.get(cls)
    if known is None:
        known = hasattr(cls.create_zero_length().as_array_like(), "__cuda_array_interface__")
        _DEVICE_BUFFER_CLASSES[cls] = known
    return known


def _allocator(prototype: BufferPrototype) -> Callable[[int], Any]:
    """``alloc(nbytes)`` giving an uninitialised 1-d byte array in the prototype's memory."""
    if is_device_buffer(prototype.buffer):
        from gdsstore._optional import require  # only reachable when the caller asked for device buffers

        cupy = require("cupy", purpose="GDSStore reads into device buffers")

        return lambda n: cupy.empty(n, dtype=np.uint8)
    return lambda n: np.empty(n, dtype=np.uint8)


def get_key(backend: Backend, key: str, prototype: BufferPrototype, byte_range: ByteRange | None) -> Buffer | None:
    """One key (or a range of it) into a buffer of ``prototype``; None if the key is absent."""
    try:
        arr = backend.get(key, _allocator(prototype), byte_range)
    except MISSING:
        return None
    return prototype.buffer.from_array_like(arr)


def read_ranges(
    backend: Backend,
    key: str,
    prototype: BufferPrototype,
    ranges: Sequence[ByteRange | None],
    *,
    one_wave: bool,
    max_gap: int = MAX_GAP_BYTES,
    max_coalesced: int = MAX_COALESCED_BYTES,
) -> RangeGroups | None:
    """Read many ranges of one key with few engine reads; None if ``key`` is absent.

    ``one_wave``: a remote backend into host buffers sends every range in one wave (one group, no size
    lookup). Otherwise the object is opened once (one size lookup for all offset/suffix ranges and EOF
    clamping), every group of nearby ranges is read into one buffer from the prototype (the engine's
    range reader, shared with the fsspec filesystem's ``cat_ranges``), and each range is a view of it.
    """
    where = f"GDSStore.get_ranges({key!r})"
    if one_wave:
        bufs = read_wave(backend, prototype, [key] * len(ranges), ranges, where, max_gap, max_coalesced)
        if ranges and all(b is None for b in bufs):
            return None
        return [[(i, b) for i, b in enumerate(bufs) if b is not None]]
    try:
        f = backend.open(key, "rb")
    except MISSING:
        return None
    with f:
        size = f.size
        spans = [r.resolve(size) if r is not None else (0, size) for r in ranges]
        reads = start_range_reads(
            f, spans, _allocator(prototype), max_gap=max_gap, max_bytes=max_coalesced, where=where
        )
        return [
            [(i, prototype.buffer.from_array_like(buf[a:b])) for i, a, b in read.slices()]
            for read, buf in ((read, read.result()) for read in reads)
        ]


def read_wave(
    backend: Backend,
    prototype: BufferPrototype,
    keys: Sequence[str],
    ranges: Sequence[ByteRange | None],
    where: str,
    max_gap: int = 0,
    max_coalesced: int | None = None,
) -> list[Buffer | None]:
    """Many keys or ranges of a remote backend in one wave of concurrent requests, no size lookups
    (:meth:`~gdsstore.engine.backend.Backend.get_many`); each item a view of the wave's one buffer
    (None: missing)."""
    w = backend.get_many(keys, ranges, host_alloc, max_gap=max_gap, max_bytes=max_coalesced, where=where)
    views = [w.view(i) for i in range(len(keys))]
    return [None if v is None else prototype.buffer.from_array_like(v) for v in views]


def found(groups: RangeGroups | None, key: str) -> RangeGroups:
    """zarr's get_ranges contract: a missing key is a FileNotFoundError inside an exception group."""
    if groups is None:
        raise BaseExceptionGroup("chunk read failed", [FileNotFoundError(key)])
    return groups


def get_batch(backend: Backend, items: Sequence[tuple[str, ByteRange | None, BufferPrototype]]) -> BatchResult:
    """The gets of one event-loop tick as one engine batch (host buffers): a local batch of reads,
    or a remote wave. Each item comes back as a Buffer of its prototype, None (missing), or its error."""
    out = backend.get_batch([key for key, _, _ in items], [br for _, br, _ in items])
    bufs = out.bufs
    for i, (_, _, prototype) in enumerate(items):
        if bufs[i] is not None:
            bufs[i] = prototype.buffer.from_array_like(bufs[i])
    return out
