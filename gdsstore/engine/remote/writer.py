"""Remote writes: a file that buffers what is written (device buffers copied to the host) and uploads the whole
object on close, as S3 and WebHDFS publish whole objects; the contract (an error or interrupt uploads nothing)
is :class:`~gdsstore.engine.file.BaseFile`'s."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from gdsstore.engine.buffers import IOBuffer, as_io_buffer, check_request
from gdsstore.engine.file import BaseFile, WriteGuard
from gdsstore.engine.local import check_mode
from gdsstore.engine.pool import completed

__all__ = ["RemoteWriteFile", "check_remote_mode", "host_bytes"]


def check_remote_mode(mode: str, where: str) -> str:
    """Remote objects open ``"rb"`` (ranged reads) or ``"wb"`` (buffered, uploaded on close)."""
    use = " for a remote object; use 'rb' or 'wb' (objects are replaced whole, not updated in place)"
    return check_mode(mode, where, ("rb", "wb"), use)


def host_bytes(b: IOBuffer) -> memoryview:
    """The bytes of ``b`` in host memory: the buffer itself, or a device → host copy."""
    if b.host is not None:
        return b.host
    out = bytearray(b.nbytes)
    if b.nbytes:
        import ctypes

        from gdsstore.engine import cuda

        assert b.device is not None
        cuda.memcpy_dtoh(b.device, ctypes.addressof(ctypes.c_char.from_buffer(out)), b.ptr, b.nbytes)
    return memoryview(out)


class RemoteWriteFile(BaseFile):
    """A remote object opened ``"wb"``: writes land in a host buffer, ``close()`` uploads it.

    Use :func:`gdsstore.open` rather than constructing this directly::

        with gdsstore.open("s3://bucket/x.bin", "wb") as f:
            f.write(cupy.arange(10, dtype="u1"))
    """

    mode = "wb"

    def __init__(self, url: str, upload: Callable[[memoryview, int | None], None]) -> None:
        self._url = url
        self._upload = upload
        self._device: int | None = None  # device of the buffers written, for the trace
        self._data = bytearray()
        self._lock = threading.Lock()
        self._guard = WriteGuard()

    @property
    def url(self) -> str:
        return self._url

    @property
    def size(self) -> int:
        """Bytes written so far (the object's size once closed)."""
        return len(self._data)

    def pwrite(self, buf: Any, size: int | None = None, offset: int = 0) -> Future[int]:
        """Buffer ``size`` bytes (default: all) of ``buf`` at ``offset``; a future of bytes written."""
        where = "RemoteWriteFile.pwrite()"
        self._check_open("pwrite")
        b = as_io_buffer(buf, writable=False, where=where)
        n = check_request(where, b, size, offset)  # the local files' checks: TypeError for a non-int
        data = host_bytes(b)[:n]
        if b.device is not None:
            self._device = b.device
        with self._lock:
            if offset + n > len(self._data):
                self._data.extend(bytes(offset + n - len(self._data)))  # a gap reads back as zeros
            self._data[offset : offset + n] = data
        return completed(n)

    def _close(self) -> None:
        """Upload everything written (a failed or interrupted upload raises and publishes nothing)."""
        data, self._data = self._data, bytearray()
        self._upload(memoryview(data), self._device)

    def _discard(self) -> None:
        self._data = bytearray()
