"""The range reader: split a read into ranges, fetch them concurrently, verify every response.

One reader serves every transport. A transport (:class:`RangeSource`) knows how to ask for bytes
``[offset, offset + n)`` of one object and hands back a :class:`Body` whose ``readinto`` fills
memory in place; this module decides the ranges, runs them on the engine pool with
``remote.concurrency`` workers, checks each response is the range asked for, lands host reads
straight in the caller's buffer and device reads in the pinned bounce ring (then an async H2D copy),
and retries failed ranges from the first byte not yet landed.

HTTP(S) and S3 objects (sources with a native core root, :class:`~gdsstore.engine.remote.core.CoreSource`)
have each range fetched by the core, which checks every answer (status, ``Content-Range``, length, ETag): a
server that ignores ``Range`` fails loudly (:class:`RangeNotSupportedError`) and never yields wrong bytes.
WebHDFS sources (no core route) hand back bodies that this module lands and checks
(:func:`check_length_response`).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass
from functools import partial
from typing import Any, Protocol

import gdsstore.trace as _trace
from gdsstore import policy
from gdsstore.engine.buffers import IOBuffer, as_io_buffer, check_request
from gdsstore.engine.file import BaseFile
from gdsstore.engine.pool import completed, run_pieces
from gdsstore.engine.ranges import RangeRequest
from gdsstore.engine.remote import core
from gdsstore.engine.remote.core import CoreSource
from gdsstore.engine.remote.retry import RetryPolicy, is_transient
from gdsstore.errors import RangeMismatchError, RangeNotSupportedError, RemoteIOError, TransientError

__all__ = [
    "Body", "FirstRange", "RangeMismatchError", "RangeNotSupportedError", "RangeRequest", "RangeSource", "RemoteFile",
    "check_length_response", "get_object", "read_exact", "split_ranges",
]


#: What to do about a server that answers range requests with the whole object.
RANGE_FIX = (
    "this server does not support HTTP range requests (python -m http.server does not): read whole objects "
    "(offset 0, f.size bytes: one request without a Range header), or serve the data with a server that "
    "supports ranges (nginx, Apache, caddy, an object store)"
)


def with_range_fix(exc: RangeNotSupportedError) -> RangeNotSupportedError:
    """``exc`` with :data:`RANGE_FIX` added (once) to its message."""
    if RANGE_FIX in str(exc):
        return exc
    out = RangeNotSupportedError(f"{exc}; {RANGE_FIX}")
    out.__cause__ = exc
    return out


def split_ranges(offset: int, nbytes: int, task_size: int) -> list[RangeRequest]:
    """Cut ``[offset, offset + nbytes)`` into consecutive ranges of at most ``task_size`` bytes.

    Examples:
        >>> [(r.offset, r.nbytes) for r in split_ranges(10, 25, 10)]
        [(10, 10), (20, 10), (30, 5)]
    """
    if task_size < 1:
        raise ValueError(f"split_ranges(): task_size must be >= 1, got {task_size}")
    return [RangeRequest(offset + a, min(task_size, nbytes - a)) for a in range(0, nbytes, task_size)]


def _content_length(headers: Mapping[str, str], what: str) -> int | None:
    raw = headers.get("Content-Length")
    if raw is None:
        return None
    try:
        return int(raw)
    except ValueError:
        raise RangeMismatchError(f"{what}: bad Content-Length {raw!r}") from None


def _check_identity(headers: Mapping[str, str], what: str) -> None:
    enc = (headers.get("Content-Encoding") or "identity").strip().lower()
    if enc not in ("identity", ""):
        # We ask for identity; compressed bytes would be the wrong bytes.
        raise RangeMismatchError(f"{what}: server sent Content-Encoding {enc!r} although identity was asked")


def check_length_response(status: int, headers: Mapping[str, str], nbytes: int, what: str) -> int | None:
    """Check a ``200`` answer to an explicit offset/length request (WebHDFS ``op=OPEN``)."""
    if status != 200:
        raise RangeMismatchError(f"{what}: unexpected status {status}")
    _check_identity(headers, what)
    length = _content_length(headers, what)
    if length is not None and length != nbytes:
        raise RangeMismatchError(f"{what}: Content-Length {length} for a {nbytes}-byte request")
    return length


class Body(Protocol):
    """A response body being read: fill memory in place, then finish (verify the end) or abort."""

    def readinto(self, dst: memoryview) -> int: ...
    def finish(self) -> None: ...
    def abort(self) -> None: ...


@dataclass
class FirstRange:
    """The answer to "the first ``n`` bytes", sent before the size is known."""

    body: Body
    nbytes: int  # bytes this body carries, from the offset asked
    total: int | None  # the object's size when the answer tells it


class NoBody:
    """The body of an empty object."""

    def readinto(self, dst: memoryview) -> int:
        return 0

    def finish(self) -> None:
        pass

    def abort(self) -> None:
        pass


class RangeSource(Protocol):
    """One remote object as a transport sees it."""

    route: str  # "http" | "s3" | "webhdfs"
    scheme: str  # for the policy decision
    url: str  # redacted: safe for messages and the trace

    def stat(self) -> int:
        """The object's size in bytes (raises FileNotFoundError/PermissionError/IsADirectoryError)."""
        ...

    def open_range(self, req: RangeRequest, size: int) -> Body:
        """Ask for ``req``; return its verified body (raise TransientError to be retried)."""
        ...

    def open_first(self, nbytes: int, offset: int = 0) -> FirstRange:
        """Ask for ``nbytes`` from ``offset`` (clamped to the object) without knowing its size; past
        the end: an empty body (``total`` the size when the answer tells it)."""
        ...

    # Optional: ``version() -> Hashable``, the object's identity now (one request). Sources whose
    # range requests cannot say "only this version" (WebHDFS has no ETag/If-Match) provide it, and a
    # read of several ranges compares it before and after: a changed object is an error, never a mix
    # of two versions. HTTP and S3 ranges carry If-Match instead.


#: What :class:`RemoteFile` reads: an object through the native core (HTTP(S), S3), or a WebHDFS file.
Source = RangeSource | CoreSource


def read_exact(body: Body, dst: memoryview, what: str, progress: Callable[[int], None] | None = None) -> None:
    """Fill all of ``dst`` from ``body``; a body that ends early is a :class:`TransientError`.

    ``progress(k)`` is called after each ``k`` bytes landed (they come from a verified response).
    """
    n = len(dst)
    got = 0
    while got < n:
        k = body.readinto(dst[got:])
        if not k:
            raise TransientError(f"{what}: body ended after {got} of {n} bytes")
        got += k
        if progress is not None:
            progress(k)


def _copy_h2d_async(device: int, dst_ptr: int, src_ptr: int, nbytes: int, after: Any = None) -> Any:
    """Queue a pinned → device copy on the calling thread's stream (after the event ``after``); returns its event."""
    from gdsstore.engine import cuda

    cp = cuda.cupy_or_none()
    assert cp is not None
    with cp.cuda.Device(device):
        stream = cuda.thread_stream(device, after=after)
        cp.cuda.runtime.memcpyAsync(dst_ptr, src_ptr, nbytes, cp.cuda.runtime.memcpyHostToDevice, stream.ptr)
        return cuda.record_event(stream, blocking=True)


class _Cancelled(RemoteIOError):
    """A range not fetched because another range of the same read already failed for good."""


class RemoteFile(BaseFile):
    """A remote object opened for concurrent range reads into host or device buffers.

    Use :func:`gdsstore.open` rather than constructing this directly::

        with gdsstore.open("https://host/x.bin") as f:
            n = f.read(cupy.empty(f.size, "u1"))
    """

    mode = "rb"

    def __init__(
        self, source: Source, *, size: int | None = None, on_close: Callable[[], None] | None = None
    ) -> None:
        self._source = source
        if size is None:
            size = RetryPolicy.from_settings().call(source.stat, f"stat {source.url}")
        self._size = size
        self._on_close = on_close

    @property
    def url(self) -> str:
        """The object's URL without secrets."""
        return self._source.url

    @property
    def size(self) -> int:
        """Size of the object in bytes (read once, at open)."""
        return self._size

    def _close(self) -> None:
        if self._on_close is not None:
            self._on_close()

    # -- reads --------------------------------------------------------------------------------------

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
        d = policy.decide_remote(scheme=self._source.scheme, device=b.is_device, nbytes=avail, s=s)
        target: CoreTarget | None = None
        if isinstance(self._source, CoreSource):  # HTTP(S), S3: the core fetches every range
            src = self._source
            target = (src.core.store(), src.core.base, src.path)
            d = policy.Decision(d.route, f"{core.wave_reason(s)}; {d.reason}")
        ranges = split_ranges(offset, avail, policy.remote_range_size(avail, s))
        traced = self._traced(d, b)
        first = self._run(b, ranges, offset, s, traced, core_target=target)
        if offset == 0 and avail == self._size and len(ranges) > 1:
            # The whole object, asked in ranges: a server that ignores Range still serves it in one request.
            return _RangeFallback(first, lambda: self._run(b, [RangeRequest(0, avail)], 0, s, traced,
                                                           core_target=target))
        return _RangeFallback(first, None)

    def _run(
        self,
        b: IOBuffer,
        ranges: list[RangeRequest],
        base: int,
        s: policy.Settings,
        on_done: Callable[[int, BaseException | None], None] | None,
        landing: _Landing | None = None,
        first_attempts_used: int = 0,
        core_target: CoreTarget | None = None,
    ) -> Future[int]:
        """Fetch ``ranges`` concurrently into ``b`` (byte ``base`` of the object at ``b[0]``).

        ``first_attempts_used``: attempts the first range already spent (it continues a broken body).
        ``core_target``: the native core fetches each range (one call per range or pinned slot, the GIL
        released) instead of the source's Python transport.
        """
        retry = RetryPolicy.from_settings(s)
        landing = landing or _Landing(b, base, s)
        failed = threading.Event()
        version = getattr(self._source, "version", None) if len(ranges) > 1 else None
        before = version() if version is not None else None

        def landed(n: int, exc: BaseException | None) -> None:
            landing.wait()  # device data is on the device before the future resolves
            if exc is None and version is not None and version() != before:
                exc = RangeMismatchError(
                    f"{self.url}: the object changed during a read of {len(ranges)} ranges "
                    "(its bytes may mix two versions; read it again)"
                )
                if on_done:
                    on_done(n, exc)
                raise exc
            if on_done:
                on_done(n, exc)

        if core_target is not None:
            assert isinstance(self._source, CoreSource)
            fetch = _CoreFetch(core_target, self, retry, s, self._source.etag)
            pieces = [partial(self._fetch_core, r, fetch, landing, failed) for r in ranges]
        else:
            pieces = [
                partial(self._fetch, r, retry, landing, failed, first_attempts_used if i == 0 else 0)
                for i, r in enumerate(ranges)
            ]
        return run_pieces(pieces, [r.nbytes for r in ranges], s.remote_concurrency, landed)

    def _traced(self, d: policy.Decision, b: IOBuffer) -> Callable[[int, BaseException | None], None] | None:
        if not _trace.active():
            return None
        t0 = time.perf_counter()
        url = self.url

        def done(n: int, exc: BaseException | None) -> None:
            if exc is None:
                _trace.record("read", d.route, d.reason, n, time.perf_counter() - t0, url, b.device)

        return done

    def _what(self, req: RangeRequest) -> str:
        return f"GET {self.url} {req.header}"

    def _fetch(
        self, req: RangeRequest, retry: RetryPolicy, landing: _Landing, failed: threading.Event, used: int = 0
    ) -> int:
        """Fetch ``req`` with retries. The landing consumes a verified body and reports bytes landed for
        good, so that a retry asks only for the rest. Once any range of the read has failed for good
        (``failed``), the others stop at their next attempt. WebHDFS only (the core fetches the others')."""
        source = self._source
        assert not isinstance(source, CoreSource)
        landed = [0]

        def progress(n: int) -> None:
            landed[0] += n

        def attempt() -> int:
            if failed.is_set():
                raise _Cancelled(f"{self._what(req)}: cancelled, another range of this read failed")
            if landed[0] == req.nbytes:
                return req.nbytes
            rest = RangeRequest(req.offset + landed[0], req.nbytes - landed[0])
            body = source.open_range(rest, self._size)
            try:
                landing.land(body, rest, progress, self._what(rest))
                body.finish()
            except BaseException:
                body.abort()
                raise
            return req.nbytes

        try:
            return retry.call(attempt, self._what(req), attempts_used=used)
        except BaseException:
            failed.set()
            raise

    def _fetch_core(self, req: RangeRequest, fetch: _CoreFetch, landing: _Landing, failed: threading.Event) -> int:
        """Fetch ``req`` through the native core (its own retries: :func:`.core.read_wave`)."""
        if failed.is_set():
            raise _Cancelled(f"{self._what(req)}: cancelled, another range of this read failed")
        try:
            landing.land_with(fetch, req)
        except BaseException:
            failed.set()
            raise
        return req.nbytes


class _RangeFallback(Future[int]):
    """The future of a read whose server may ignore ``Range``: its :class:`RangeNotSupportedError` carries
    :data:`RANGE_FIX`, or, where ``whole`` is given (the read is the whole object), ``whole()`` reads it in
    one request instead. ``result()`` runs the reads' pieces not yet started in the calling thread first,
    as the engine's futures do, so a wait never depends on a free pool worker."""

    def __init__(self, first: Future[int], whole: Callable[[], Future[int]] | None) -> None:
        super().__init__()
        self.set_running_or_notify_cancel()
        self._first, self._whole = first, whole
        self._second: Future[int] | None = None
        first.add_done_callback(self._first_done)

    def _first_done(self, f: Future[int]) -> None:
        exc = f.exception()
        if isinstance(exc, RangeNotSupportedError) and self._whole is not None:
            try:
                self._second = self._whole()
            except BaseException as again:  # handed to the caller through the future
                self.set_exception(again)
                return
            self._second.add_done_callback(self._settle)
            return
        self._settle(f)

    def _settle(self, f: Future[int]) -> None:
        exc = f.exception()
        if exc is None:
            self.set_result(f.result())
        else:
            self.set_exception(with_range_fix(exc) if isinstance(exc, RangeNotSupportedError) else exc)

    def result(self, timeout: float | None = None) -> int:
        for inner in (self._first, self._second):
            if inner is not None and not inner.done():
                with contextlib.suppress(BaseException):
                    inner.result(timeout)  # drains its pieces here
        return super().result(timeout)


#: The native core's ``(store, base URL for messages, object path)`` of one object.
CoreTarget = tuple[Any, str, str]


def _identity(etag: str | None) -> str | None:
    """An ETag as compared across answers: without ``W/`` and quotes (servers and clients differ there)."""
    return None if not etag else etag.removeprefix("W/").strip('"')


class _CoreFetch:
    """Fills a view with bytes ``[offset, offset + len(view))`` of one object through the native core, and
    checks that every answer of the read is of the object that was opened: its size, and one ETag (the one
    the source saw at open, else the first answer's) — a replaced object fails, never mixes."""

    def __init__(self, target: CoreTarget, f: RemoteFile, retry: RetryPolicy, s: policy.Settings,
                 etag: str | None) -> None:
        self._store, self._base, self._path = target
        self._f, self._retry = f, retry
        self._timeout = s.remote_timeout or 1e9
        self._lock = threading.Lock()
        self._tag = etag  # as the server wrote it at open: sent as If-Match
        self._etag = _identity(self._tag)
        src = f._source
        # version_aware: every range of the version opened (the object may be replaced meanwhile)
        self._version = src.version_id if isinstance(src, CoreSource) and src.pin_version else None

    def __call__(self, offset: int, view: Any) -> None:
        """Fill ``view`` with the object's bytes from ``offset``."""
        n = memoryview(view).nbytes
        whole = offset == 0 and n == self._f.size  # no Range header: a server may answer it only with a 200
        strong = self._tag if self._tag and not self._tag.startswith("W/") else None  # weak tags never match
        version = self._version
        piece = core.CorePiece(self._path, offset, None if whole else offset + n, n, 0, n,
                               if_match=None if version else strong, version=version)
        (res,) = core.read_wave(self._store, self._base, [piece], view, retry=self._retry, concurrency=1,
                                timeout=self._timeout)
        if res.error is not None:
            raise res.error
        url = self._f.url
        if res.total >= 0 and res.total != self._f.size:
            raise RangeMismatchError(f"{url}: the object is now {res.total} bytes, it was {self._f.size} when opened "
                                     "(it changed while it was read): read it again")
        got = _identity(res.etag)
        with self._lock:
            if self._etag is None:
                self._tag, self._etag = res.etag, got
            elif got is not None and got != self._etag:
                raise RangeMismatchError(
                    f"{url}: the object changed while it was being read (ETag {self._etag!r}, now {got!r}); "
                    "its bytes would mix two versions: read it again"
                )


def get_object(
    source: RangeSource,
    alloc: Callable[[int], Any],
    *,
    offset: int = 0,
    limit: int | None = None,
    traced: bool = True,
) -> Any:
    """Read a whole object (or its bytes from ``offset``, at most ``limit`` of them) into ``alloc(n)``:
    one request when it fits in ``task_size``.

    The first range is asked before the size is known (its answer tells the size), so a small object
    (a zarr chunk or metadata document) costs one round trip instead of a stat plus a read; the rest of
    a larger object follows as concurrent ranges. ``n`` is what the object holds there (zarr's
    clamping: 0 from an offset past its end). ``traced=False``: no trace row (a wave records one for
    all its requests). Raises FileNotFoundError/PermissionError as the server says.
    """
    s = policy.settings()
    retry = RetryPolicy.from_settings(s)
    what = f"GET {source.url}"
    t0 = time.perf_counter()
    attempts = [0]
    want = s.task_size if limit is None else min(limit, s.task_size)

    def open_first() -> FirstRange:
        attempts[0] += 1
        return source.open_first(want, offset) if offset else source.open_first(want)

    first = retry.call(open_first, what) if want else FirstRange(NoBody(), 0, None)
    got = [0]
    try:
        total = first.total
        if total is None and (limit is None or first.nbytes < limit):
            # WebHDFS: a full first range does not tell whether more follows
            total = retry.call(source.stat, f"stat {source.url}")
        end = offset + first.nbytes if total is None else min(total, offset + (limit if limit is not None else total))
        nbytes = max(0, end - offset)
        if first.nbytes > nbytes:
            raise RangeNotSupportedError(
                f"{what}: the server sent {first.nbytes} bytes for a {nbytes}-byte range (it ignored the Range "
                f"header); {RANGE_FIX}"
            )
        buf = alloc(nbytes)
        b = as_io_buffer(buf, writable=True, where="Backend.get()")
        landing = _Landing(b, offset, s)
        try:
            landing.land(
                first.body, RangeRequest(offset, first.nbytes), lambda k: got.__setitem__(0, got[0] + k), what
            )
            first.body.finish()
        except Exception as exc:
            if not is_transient(exc):
                raise
            first.body.abort()  # the rest of the first range is fetched below, with retries
            if attempts[0] >= retry.max_attempts:
                raise RemoteIOError(
                    f"{what}: failed after {attempts[0]} attempt(s) (remote.max_attempts={retry.max_attempts}): "
                    f"{type(exc).__name__}: {exc}"
                ) from exc
        else:
            attempts[0] = 0  # the first range is done: the other ranges have their own attempts
    except BaseException:
        first.body.abort()
        raise
    if got[0] < nbytes:
        rest = split_ranges(offset + got[0], nbytes - got[0], policy.remote_range_size(nbytes - got[0], s))
        size = total if total is not None else end
        RemoteFile(source, size=size)._run(b, rest, offset, s, None, landing, first_attempts_used=attempts[0]).result()
    landing.wait()
    if traced and _trace.active():
        d = policy.decide_remote(scheme=source.scheme, device=b.is_device, nbytes=nbytes, s=s)
        _trace.record("read", d.route, d.reason, nbytes, time.perf_counter() - t0, source.url, b.device)
    return buf


class _Landing:
    """Where verified body bytes go: the caller's host buffer in place, or device memory through the
    engine's pinned bounce ring (:data:`gdsstore.engine.bounce.ring`) and async H2D copies."""

    def __init__(self, b: IOBuffer, base: int, s: policy.Settings) -> None:
        self._b = b
        self._base = base  # object offset of b[0]
        # Pinned slots of half the largest range, two per worker: the first half's copy runs while the
        # second half arrives (docs/settings.md: remote.max_range_size); as much pinned memory as one slot each.
        self._slot_size = max(s.bounce_buffer_size, s.remote_max_range_size // 2)
        self._limit = 2 * s.remote_concurrency
        self._events: list[Any] = []
        self._lock = threading.Lock()
        self._after: Any = None
        if b.device is not None:  # the copies wait for kernels the caller queued on this memory
            from gdsstore.engine import cuda

            self._after = cuda.current_event(b.device)

    def land(self, body: Body, rest: RangeRequest, progress: Callable[[int], None], what: str) -> None:
        lo = rest.offset - self._base
        if self._b.host is not None:
            # Straight into the caller's buffer, no intermediate bytes; bytes of a verified response
            # are right where they land, so a retry resumes after them.
            read_exact(body, self._b.host_slice(lo, lo + rest.nbytes), what, progress)
            return
        self._through_ring(rest, lambda view, _: read_exact(body, view, what), progress)

    def land_with(self, fetch: Callable[[int, Any], None], rest: RangeRequest) -> None:
        """Land ``rest`` with ``fetch(offset, view)``, which fills ``view`` with the object's bytes from
        ``offset`` (the native core): in the caller's host buffer, or slot by slot through the pinned ring."""
        lo = rest.offset - self._base
        if self._b.host is not None:
            fetch(rest.offset, self._b.host_slice(lo, lo + rest.nbytes))
            return
        self._through_ring(rest, lambda view, done: fetch(rest.offset + done, view), None)

    def _through_ring(self, rest: RangeRequest, fill: Callable[[Any, int], None],
                      progress: Callable[[int], None] | None) -> None:
        """Device buffer: ``fill(view, done)`` each pinned slot with ``rest``'s bytes from ``done`` on, and
        queue its copy to the device."""
        from gdsstore.engine.bounce import ring  # the engine's one pinned ring (needs CuPy)

        assert self._b.device is not None
        lo = rest.offset - self._base
        done = 0
        while done < rest.nbytes:
            want = min(self._slot_size, rest.nbytes - done)
            slot = ring.acquire(self._slot_size, self._limit)
            event = None
            try:
                fill(slot.buf.view[:want], done)
                event = _copy_h2d_async(self._b.device, self._b.ptr + lo + done, slot.buf.ptr, want, self._after)
                with self._lock:
                    self._events.append(event)
            finally:
                ring.release(slot, event)
            done += want
            if progress is not None:
                progress(want)  # this slot's bytes are on their way to the device for good

    def wait(self) -> None:
        """Wait for every queued H2D copy."""
        with self._lock:
            events, self._events = self._events, []
        for ev in events:
            ev.synchronize()
