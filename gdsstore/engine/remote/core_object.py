"""One object (or a range of it) through the native core: one request into a scratch of ``task_size``, copied
into the caller's buffer; a larger object is read again as concurrent ranges by
:class:`~gdsstore.engine.remote.reader.RemoteFile`. Apart from :mod:`~gdsstore.engine.remote.core` so that the
core's module does not import the reader that stands on it."""

from __future__ import annotations

import time
from typing import Any

import numpy as np

import gdsstore.trace as _trace
from gdsstore import policy
from gdsstore.engine.buffers import as_io_buffer
from gdsstore.engine.ranges import ByteRange
from gdsstore.engine.remote.core import CorePiece, CoreSource, read_wave, wave_reason
from gdsstore.engine.remote.reader import RemoteFile, _copy_h2d_async, with_range_fix
from gdsstore.engine.remote.retry import RetryPolicy
from gdsstore.errors import RangeNotSupportedError, RemoteIOError

__all__ = ["get_object"]


def get_object(src: CoreSource, alloc: Any, byte_range: ByteRange | None, where: str) -> Any:
    """The object (or a range of it, zarr's clamping) into ``alloc(n)``: one request into a scratch of
    ``task_size``, copied; a larger one is read again as concurrent ranges straight into ``alloc(n)``
    (:class:`~gdsstore.engine.remote.reader.RemoteFile`, each range asked with the first answer's ETag)."""
    s = policy.settings()
    t0 = time.perf_counter()
    br = byte_range
    if br is not None and br.kind == "suffix" and br.start == 0:
        return alloc(0)  # the last 0 bytes: nothing to ask ("-0" would be the whole object)
    start, end = (0, None) if br is None else (-br.start, None) if br.kind == "suffix" else (br.start, br.end)
    scratch = np.empty(s.task_size, np.uint8)
    (res,) = read_wave(src.core.store(), src.core.base, [CorePiece(src.path, start, end, None, 0, s.task_size)],
                       scratch, retry=RetryPolicy.from_settings(s), concurrency=1, timeout=s.remote_timeout or 1e9)
    if res.error is None or (res.kind == "status" and "HTTP 416" in str(res.error)):
        n = res.size if res.error is None else 0  # 416: nothing at that offset (zarr's clamp)
        buf = _copy_into(alloc(n), scratch[:n], where)
    elif res.kind == "too_large" and res.total >= 0:
        offset, n = br.resolve(res.total) if br is not None else (0, res.total)
        src.etag = res.etag
        buf = alloc(n)
        if n:
            with RemoteFile(src, size=res.total) as f:
                f.read(buf, n, offset)
    elif res.kind == "range_ignored":
        if br is not None and br.kind == "suffix" and src.stat() <= br.start:
            return get_object(src, alloc, None, where)  # the whole object is the suffix (moto answers so)
        raise with_range_fix(RangeNotSupportedError(str(res.error)))
    else:
        raise res.error or RemoteIOError(f"{where}: {src.url}: no answer")
    if _trace.active():
        _trace.record("read", src.route, f"{wave_reason(s)}; one object", n, time.perf_counter() - t0, src.url)
    return buf


def _copy_into(buf: Any, data: Any, where: str) -> Any:
    """``data`` (a uint8 array) into ``buf`` (host or device memory); returns ``buf``."""
    b = as_io_buffer(buf, writable=True, where=where)
    if b.host is not None:
        b.host_slice(0, data.nbytes)[:] = data
    elif data.nbytes:
        assert b.device is not None
        _copy_h2d_async(b.device, b.ptr, data.ctypes.data, data.nbytes).synchronize()
    return buf
