"""The range reader: a read cut into ranges, fetched concurrently, every answer of the object opened.

How reads are split, landed and checked: docs/remote.md ("An opened object's reads").
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from concurrent.futures import Future
from functools import partial
from typing import TYPE_CHECKING, Any

import gdsstore.trace as _trace
from gdsstore import policy
from gdsstore.engine import cuda, landing
from gdsstore.engine.buffers import IOBuffer, as_io_buffer, check_request
from gdsstore.engine.file import BaseFile
from gdsstore.engine.pool import completed, run_pieces
from gdsstore.engine.ranges import RangeRequest
from gdsstore.engine.remote import core
from gdsstore.engine.remote.core import CoreSource
from gdsstore.engine.remote.retry import RetryPolicy
from gdsstore.errors import RangeMismatchError, RangeNotSupportedError, RemoteIOError

if TYPE_CHECKING:
    from gdsstore.engine.bounce import DeviceSink

__all__ = [
    "RangeMismatchError", "RangeNotSupportedError", "RangeRequest", "RemoteFile", "split_ranges",
]


def split_ranges(offset: int, nbytes: int, task_size: int) -> list[RangeRequest]:
    """Cut ``[offset, offset + nbytes)`` into consecutive ranges of at most ``task_size`` bytes.

    Examples:
        >>> [(r.offset, r.nbytes) for r in split_ranges(10, 25, 10)]
        [(10, 10), (20, 10), (30, 5)]
    """
    if task_size < 1:
        raise ValueError(f"split_ranges(): task_size must be >= 1, got {task_size}")
    return [RangeRequest(offset + a, min(task_size, nbytes - a)) for a in range(0, nbytes, task_size)]


class _Cancelled(RemoteIOError):
    """A range not fetched because another range of the same read already failed for good."""


class RemoteFile(BaseFile):
    """A remote object opened for concurrent range reads into host or device buffers.

    Use :func:`gdsstore.open` rather than constructing this directly::

        with gdsstore.open("https://host/x.bin") as f:
            n = f.read(cupy.empty(f.size, "u1"))
    """

    mode = "rb"

    def __init__(self, source: CoreSource, *, size: int | None = None) -> None:
        self._source = source
        self._size = RetryPolicy.from_settings().call(source.stat, f"stat {source.url}") if size is None else size

    @property
    def url(self) -> str:
        """The object's URL without secrets."""
        return self._source.url

    @property
    def size(self) -> int:
        """Size of the object in bytes (read once, at open)."""
        return self._size

    def pread(self, buf: Any, size: int | None = None, offset: int = 0) -> Future[int]:
        """Start reading ``size`` bytes (default: the buffer's size) at ``offset`` into ``buf``.

        Returns a future of the number of bytes read: fewer than ``size`` only at the end of the object.
        """
        where = "RemoteFile.pread()"
        self._check_open("pread")
        b = as_io_buffer(buf, writable=True, where=where)
        size = check_request(where, b, size, offset)
        avail = max(0, min(size, self._size - offset))
        if avail == 0:
            return completed(0)
        s = policy.settings()
        fetch = _RangeFetch(self, s)
        d = policy.decide_remote(scheme=self._source.scheme, device=b.is_device, nbytes=avail, s=s)
        traced = _trace.recorder("read", d.route, f"{core.wave_reason(s, fetch.store)}; {d.reason}", self.url, b.device)
        ranges = split_ranges(offset, avail, policy.remote_range_size(avail, s))
        first = self._run(b, ranges, offset, s, traced, fetch)
        if offset == 0 and avail == self._size:
            # The whole object, asked in ranges (several, or a device buffer's ring slots): a server that ignores
            # Range still serves it in one request. Its copy to the device waits for the caller's kernels queued
            # by now (the event is taken here, on the calling thread).
            after = cuda.current_event(b.device) if b.device is not None else None
            return _RangeFallback(first, lambda: self._read_whole(b, avail, s, traced, fetch, after))
        return first

    def _read_whole(self, b: IOBuffer, avail: int, s: policy.Settings,
                    on_done: Callable[[int, BaseException | None], None] | None, fetch: _RangeFetch,
                    after: Any) -> Future[int]:
        """The whole object in one request without a Range header: into ``b``, or for a device buffer into host
        memory and then one copy after ``after`` (the ring's slots would cut it into ranges again)."""
        whole = [RangeRequest(0, avail)]
        if b.device is None:
            return self._run(b, whole, 0, s, on_done, fetch)
        device, dst = b.device, b.ptr
        host, owner = landing.alloc_host(avail, True)

        def copied(n: int, exc: BaseException | None) -> None:
            failed: BaseException | None = None
            try:
                if exc is None:
                    cuda.memcpy_htod(device, dst, host.ctypes.data, n, after)
            except BaseException as err:  # the read's future fails with it
                failed = err
            finally:
                landing.release_host(owner)
            if on_done:
                on_done(n, exc or failed)
            if failed is not None:
                raise failed

        return self._run(as_io_buffer(host, writable=True, where="RemoteFile.pread()"), whole, 0, s, copied, fetch)

    def _run(self, b: IOBuffer, ranges: list[RangeRequest], base: int, s: policy.Settings,
             on_done: Callable[[int, BaseException | None], None] | None, fetch: _RangeFetch) -> Future[int]:
        """Fetch ``ranges`` concurrently into ``b`` (byte ``base`` of the object at ``b[0]``); a read of several
        ranges compares the object's :meth:`~gdsstore.engine.remote.core.CoreSource.version` before and after."""
        sink: DeviceSink | None = None
        if b.device is not None:  # through the engine's pinned ring, half the largest range a slot (docs/settings.md)
            from gdsstore.engine.bounce import DeviceSink

            slot = max(s.bounce_buffer_size, s.remote_max_range_size // 2)
            sink = DeviceSink(b.device, b.ptr, b.nbytes, slot, slot, 2 * s.remote_concurrency, blocking=True)
        failed = threading.Event()
        source = self._source
        before = source.version() if len(ranges) > 1 else None

        def landed(n: int, exc: BaseException | None) -> None:
            if sink is not None:
                sink.finish()  # device data is on the device before the future resolves
            changed = exc is None and len(ranges) > 1 and source.version() != before
            if changed:
                exc = RangeMismatchError(f"{self.url}: the object changed during a read of {len(ranges)} ranges "
                                         "(its bytes may mix two versions; read it again)")
            if on_done:
                on_done(n, exc)
            if changed:
                raise exc  # type: ignore[misc]

        pieces = [partial(self._fetch, r, b, base, sink, fetch, failed) for r in ranges]
        return run_pieces(pieces, [r.nbytes for r in ranges], s.remote_concurrency, landed)

    def _fetch(self, req: RangeRequest, b: IOBuffer, base: int, sink: DeviceSink | None, fetch: _RangeFetch,
               failed: threading.Event) -> int:
        """Fetch ``req`` into the caller's host buffer, or slot by slot through ``sink`` (a
        :class:`~gdsstore.engine.bounce.DeviceSink`); once any range of the read has failed for good
        (``failed``), the others are not asked."""
        if failed.is_set():
            raise _Cancelled(f"GET {self.url} {req.header}: cancelled, another range of this read failed")
        lo = req.offset - base
        try:
            if sink is None:
                fetch(req.offset, b.host_slice(lo, lo + req.nbytes))
                return req.nbytes
            for done in range(0, req.nbytes, sink.piece):
                want = min(sink.piece, req.nbytes - done)
                view, slot = sink.acquire()
                try:
                    fetch(req.offset + done, view[:want])
                except BaseException:
                    sink.discard(slot)
                    raise
                sink.flush(slot, 0, want, lo + done)
        except BaseException:
            failed.set()
            raise
        return req.nbytes


class _RangeFallback(Future[int]):
    """The future of a read of the whole object in ranges: where the server ignores ``Range``
    (:class:`RangeNotSupportedError`), ``whole()`` reads it in one request instead. ``result()`` runs the
    reads' pieces not yet started in the calling thread first, as the engine's futures do, so a wait never
    depends on a free pool worker."""

    def __init__(self, first: Future[int], whole: Callable[[], Future[int]]) -> None:
        super().__init__()
        self.set_running_or_notify_cancel()
        self._reads = [first]
        first.add_done_callback(lambda f: self._settle(f, whole))

    def _settle(self, f: Future[int], whole: Callable[[], Future[int]] | None = None) -> None:
        exc = f.exception()
        if whole is not None and isinstance(exc, RangeNotSupportedError):
            try:
                self._reads.append(whole())
            except BaseException as again:  # handed to the caller through the future
                self.set_exception(again)
                return
            self._reads[-1].add_done_callback(self._settle)
        elif exc is None:
            self.set_result(f.result())
        else:
            self.set_exception(exc)

    def result(self, timeout: float | None = None) -> int:
        for inner in self._reads:  # the second read, appended while the first is drained, is drained too
            with contextlib.suppress(BaseException):
                inner.result(timeout)  # drains its pieces here
        return super().result(timeout)


class _RangeFetch:
    """Fills a view with bytes ``[offset, offset + len(view))`` of one object, one piece of the core's wave,
    and checks that every answer of the read is of the object that was opened: its size, and one ETag (the
    one the source saw at open, else the first answer's; ``W/`` and quotes aside) — a replaced object fails,
    never mixes."""

    def __init__(self, f: RemoteFile, s: policy.Settings) -> None:
        src = f._source
        self.store = src.core.store()
        self._base, self._path, self._f, self._s = src.core.base, src.path, f, s
        self._lock = threading.Lock()
        self._tag = src.etag  # as the server wrote it at open, else the first answer's: sent as If-Match
        # version_aware: every range of the version opened (the object may be replaced meanwhile)
        self._version = src.version_id if src.pin_version else None

    def __call__(self, offset: int, view: Any) -> None:
        n = memoryview(view).nbytes
        whole = offset == 0 and n == self._f.size  # no Range header: a server may answer it only with a 200
        strong = self._tag if self._tag and not self._tag.startswith("W/") else None  # weak tags never match
        res = core.read_one(self.store, self._base, (self._path, offset, None if whole else offset + n, n, 0, n), view,
                            self._s, if_match=None if self._version else strong, version=self._version)
        if res.error is not None:
            raise res.error
        if res.total >= 0 and res.total != self._f.size:
            raise RangeMismatchError(f"{self._f.url}: the object is now {res.total} bytes, it was {self._f.size} "
                                     "when opened (it changed while it was read): read it again")
        with self._lock:
            self._tag = self._tag or res.etag
            was, now = (None if not t else t.removeprefix("W/").strip('"') for t in (self._tag, res.etag))
        if now is not None and now != was:
            raise RangeMismatchError(f"{self._f.url}: the object changed while it was being read (ETag {was!r}, now "
                                     f"{now!r}); its bytes would mix two versions: read it again")
