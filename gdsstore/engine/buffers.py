"""Destination/source buffers: host (buffer protocol) or device (``__cuda_array_interface__``).

:func:`as_io_buffer` turns what the user passed into an :class:`IOBuffer` (pointer, size, where it
lives) after checking it can take part in the operation; every check names the argument.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

__all__ = ["IOBuffer", "as_io_buffer", "check_request"]


@dataclass(frozen=True)
class IOBuffer:
    """A contiguous byte range of host or device memory."""

    obj: Any  # keeps the owner alive
    ptr: int
    nbytes: int
    device: int | None  # CUDA device ordinal, None for host memory
    host: memoryview | None  # byte view for host memory (format "B")

    @property
    def is_device(self) -> bool:
        return self.device is not None

    def host_slice(self, start: int, stop: int) -> memoryview:
        assert self.host is not None
        return self.host[start:stop]


def _typestr_itemsize(typestr: str) -> int:
    return int(typestr[2:])


def _device_of_pointer(ptr: int) -> int:
    from gdsstore.engine import cuda

    return cuda.device_of_pointer(ptr)


def as_io_buffer(buf: Any, *, writable: bool, where: str, argname: str = "buf") -> IOBuffer:
    """Check and describe ``buf``.

    Args:
        buf: numpy/cupy array, bytearray, memoryview, or anything with ``__cuda_array_interface__``
            or the buffer protocol.
        writable: the operation writes into the buffer (a read).
        where: ``"Class.method()"`` for error messages.
        argname: the argument's name for error messages.

    Raises:
        TypeError: not a buffer, or read-only when ``writable``.
        ValueError: not C-contiguous.
    """
    cai = getattr(buf, "__cuda_array_interface__", None)
    if cai is not None:
        shape = tuple(cai["shape"])
        itemsize = _typestr_itemsize(cai["typestr"])
        ptr, readonly = cai["data"]
        strides = cai.get("strides")
        if strides is not None:
            expected = []
            acc = itemsize
            for dim in reversed(shape):
                expected.append(acc)
                acc *= dim
            if tuple(reversed(expected)) != tuple(strides) and math.prod(shape) > 1:
                raise ValueError(f"{where}: `{argname}` must be C-contiguous device memory (strides {strides})")
        if writable and readonly:
            raise TypeError(f"{where}: `{argname}` is read-only device memory; a read needs a writable buffer")
        nbytes = math.prod(shape) * itemsize
        dev = _device_of_pointer(ptr) if nbytes else 0
        return IOBuffer(buf, int(ptr), nbytes, dev, None)
    try:
        mv = memoryview(buf)
    except TypeError:
        raise TypeError(
            f"{where}: `{argname}` must be a host buffer (bytes-like, numpy) or device memory "
            f"(__cuda_array_interface__); got {type(buf).__name__}"
        ) from None
    if not mv.c_contiguous:
        raise ValueError(f"{where}: `{argname}` must be C-contiguous; got a non-contiguous {type(buf).__name__}")
    if writable and mv.readonly:
        raise TypeError(f"{where}: `{argname}` is read-only ({type(buf).__name__}); a read needs a writable buffer")
    flat = mv.cast("B") if mv.ndim != 1 or mv.format != "B" else mv
    ptr = 0
    if flat.nbytes and not flat.readonly:
        import ctypes

        ptr = ctypes.addressof(ctypes.c_char.from_buffer(flat))
    return IOBuffer(buf, ptr, flat.nbytes, None, flat)


def check_request(where: str, buf: IOBuffer, size: int | None, offset: int) -> int:
    """Validate ``size``/``offset`` of a read or write against ``buf``; returns the size to transfer.

    Raises:
        TypeError: a non-integer ``size`` or ``offset``.
        ValueError: negative values, or ``size`` larger than the buffer.
    """
    if isinstance(offset, bool) or not isinstance(offset, int):
        raise TypeError(f"{where}: `offset` must be an int, got {type(offset).__name__}")
    if offset < 0:
        raise ValueError(f"{where}: `offset` must be >= 0, got {offset}")
    if size is None:
        return buf.nbytes
    if isinstance(size, bool) or not isinstance(size, int):
        raise TypeError(f"{where}: `size` must be an int or None, got {type(size).__name__}")
    if size < 0:
        raise ValueError(f"{where}: `size` must be >= 0, got {size}")
    if size > buf.nbytes:
        raise ValueError(f"{where}: buffer too small: `size`={size} but `buf` holds {buf.nbytes} bytes")
    return size
