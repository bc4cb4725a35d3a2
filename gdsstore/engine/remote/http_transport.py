"""The HTTP(S) transport: a pooled, thread-safe client whose bodies are read in place.

urllib3's ``PoolManager`` gives connection pooling, TLS (verified by default) and timeouts; bodies are
read through the underlying ``http.client.HTTPResponse.readinto`` because it is about 3x faster than
urllib3's own ``readinto`` (loopback, 16 threads, 16 MiB ranges: 11.9 vs 4.0 GB/s). The S3 (presigned
GETs) and WebHDFS transports use the same client.

Storage options for ``http(s)://`` URLs:

- ``headers``: extra request headers (``Authorization``, cookies...); never shown anywhere.
- ``verify``: ``True`` (default), ``False``, or a CA bundle path.
- ``cert``: a client certificate path, or ``(cert, key)``.

Keys under an HTTP(S) root become URL paths by one rule (:func:`key_to_url_path`): every segment is
percent-encoded whole, so ``%``, ``#``, ``?``, spaces and non-ASCII reach the server as the key's own
characters, and a key that a server would decode into a path outside the root (``%2e%2e/x``,
``..%2fx``) is refused before any request.

After ``os.fork()`` every client drops its pools in the child (``os.register_at_fork``): a child
never reads from a connection its parent also reads from.
"""

from __future__ import annotations

import email.utils
import functools
import http.client
import json
import os
import re
import socket
import ssl
import threading
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any
from urllib.parse import quote, unquote, urljoin, urlsplit

from gdsstore import policy
from gdsstore.engine.backend import Backend, ObjectInfo, check_key
from gdsstore.engine.remote import rawhttp
from gdsstore.engine.remote.reader import (
    Body,
    FirstRange,
    NoBody,
    RangeMismatchError,
    RangeRequest,
    check_first_response,
    check_range_response,
    parse_content_range,
)
from gdsstore.engine.remote.redact import Scrubber, redact_url
from gdsstore.engine.remote.retry import RemoteIOError, RetryPolicy, TransientError, is_transient
from gdsstore.engine.remote.wave import WaveReads

__all__ = [
    "HTTPBackend",
    "HTTPBody",
    "HTTPClient",
    "HTTPSource",
    "check_header_values",
    "check_remote_key",
    "drop",
    "get_client",
    "key_to_url_path",
    "raise_for_status",
    "retry_after",
]

_PRESIGNED_PARAMS = ("x-amz-signature", "signature", "sig", "x-goog-signature")
_REDIRECTS = (301, 302, 303, 307, 308)
_MAX_REDIRECTS = 5
_CREDENTIAL_HEADERS = frozenset({"authorization", "cookie", "proxy-authorization"})


def check_remote_key(key: str, where: str) -> str:
    """:func:`~gdsstore.engine.backend.check_key`, then the same check on the key as a server would
    decode it once more (``%2e%2e`` → ``..``, ``..%2f`` → ``../``): a remote key must not name a path
    outside the root however the server decodes it.

    Raises:
        ValueError: naming ``where``, the key and what it decodes to.
    """
    check_key(key, where)
    decoded = unquote(key, errors="replace") if "%" in key else key
    if decoded != key:
        try:
            check_key(decoded, where)
        except ValueError:
            raise ValueError(
                f"{where}: invalid key {key!r}: a server decodes it to {decoded!r}, a path with '.', '..' or "
                "empty segments (outside the root); rename the key"
            ) from None
    return key


def key_to_url_path(key: str, where: str) -> str:
    """The URL path of ``key`` under a root: every segment percent-encoded whole (UTF-8).

    Examples:
        >>> key_to_url_path("a b/c#1?v=%/é", "example")
        'a%20b/c%231%3Fv%3D%25/%C3%A9'
    """
    check_remote_key(key, where)
    return "/".join(quote(seg, safe="") for seg in key.split("/"))


def check_header_values(headers: Mapping[str, str], where: str) -> None:
    """Refuse header names or values with CR, LF or NUL (they would inject headers or requests)."""
    for k, v in headers.items():
        if any(c in f"{k}{v}" for c in "\r\n\x00"):
            raise ValueError(f"{where}: header {k!r} has a CR, LF or NUL character; remove it")


def retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds a ``Retry-After`` header asks to wait (delta-seconds or an HTTP date), or None."""
    raw = (headers.get("Retry-After") or "").strip()
    if not raw:
        return None
    if raw.isdigit():
        return float(raw)
    try:
        when = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError):
        return None
    import datetime

    return max(0.0, (when - datetime.datetime.now(datetime.UTC)).total_seconds())


_all_clients: weakref.WeakSet[HTTPClient] = weakref.WeakSet()


class HTTPClient:
    """A pooled HTTP(S) client shared by threads; timeouts come from the settings at each request."""

    def __init__(self, *, verify: bool | str = True, cert: str | tuple[str, str] | None = None,
                 maxsize: int = 16) -> None:
        self._kw = self._pool_kwargs(verify, cert, maxsize)
        self._pool = self._new_pool()
        self.default_tls = verify is True and cert is None  # what the native core also does
        _all_clients.add(self)

    @staticmethod
    def _pool_kwargs(verify: bool | str, cert: str | tuple[str, str] | None, maxsize: int) -> dict[str, Any]:
        import urllib3

        kw: dict[str, Any] = {"num_pools": 32, "maxsize": maxsize, "block": False, "retries": False}
        if verify is False:
            kw["cert_reqs"] = "CERT_NONE"
            urllib3.disable_warnings(urllib3.exceptions.InsecureRequestWarning)
        else:
            kw["cert_reqs"] = "CERT_REQUIRED"
            if isinstance(verify, str):
                kw["ca_certs"] = verify
        if isinstance(cert, tuple):
            kw["cert_file"], kw["key_file"] = cert
        elif cert:
            kw["cert_file"] = cert
        return kw

    def _new_pool(self) -> Any:
        import urllib3

        return urllib3.PoolManager(**self._kw)

    def _after_fork(self) -> None:
        # The parent's pool (its sockets, and locks another thread may have held at the fork) stays
        # behind untouched: the child only drops its references and starts empty.
        self._pool = self._new_pool()

    def request(
        self,
        method: str,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        body: Any = None,
        scrub: Scrubber | None = None,
    ) -> Any:
        """Send one request (no redirects, no retries: callers decide); returns the unread response.

        Connection failures and timeouts become :class:`TransientError` with a scrubbed message.
        """
        import urllib3

        s = policy.settings()
        timeout = urllib3.Timeout(connect=s.remote_connect_timeout, read=s.remote_timeout)
        if headers:
            check_header_values(headers, f"{method} {redact_url(url)}")
        try:
            return self._pool.request(
                method, url, headers=dict(headers or {}), body=body, preload_content=False,
                redirect=False, retries=False, timeout=timeout, decode_content=False,
            )
        except Exception as exc:
            text = (scrub or Scrubber())(f"{type(exc).__name__}: {exc}")
            if is_transient(exc):
                raise TransientError(f"{method} {redact_url(url)}: {text}") from None
            raise RemoteIOError(f"{method} {redact_url(url)}: {text}") from None

    def clear(self) -> None:
        """Close every idle connection (urllib3's pools and the fast client's per-thread sockets)."""
        self._pool.clear()
        rawhttp.close_all()


_clients: dict[tuple[Any, ...], HTTPClient] = {}
_clients_lock = threading.Lock()


def _after_fork_in_child() -> None:
    global _clients_lock
    _clients_lock = threading.Lock()  # another thread may have held it at the fork
    for client in list(_all_clients):
        client._after_fork()


os.register_at_fork(after_in_child=_after_fork_in_child)


def get_client(verify: bool | str = True, cert: str | tuple[str, str] | None = None) -> HTTPClient:
    """The process-wide client for these TLS settings (one pool of connections per host)."""
    s = policy.settings()
    key = (verify, cert, s.remote_concurrency)
    with _clients_lock:
        c = _clients.get(key)
        if c is None:
            # Twice the workers: a worker may hold a connection while its next request starts.
            c = _clients[key] = HTTPClient(verify=verify, cert=cert, maxsize=2 * s.remote_concurrency)
        return c


# Ranges at least this large are read with recv(MSG_WAITALL) on plain-HTTP sockets.
_DIRECT_MIN = 1 << 20


def _plain_socket(fp: Any) -> socket.socket | None:
    """The TCP socket under an http.client response with a known length, or None (TLS, chunked)."""
    if not isinstance(fp, http.client.HTTPResponse) or fp.chunked or fp.length is None:
        return None
    raw = getattr(getattr(fp, "fp", None), "raw", None)
    sock = getattr(raw, "_sock", None)
    if not isinstance(sock, socket.socket) or isinstance(sock, ssl.SSLSocket):
        return None  # SSL sockets refuse recv flags
    return sock


class HTTPBody:
    """A response body read through http.client's ``readinto`` (no urllib3 layer in the hot loop)."""

    __slots__ = ("_expected", "_fp", "_read", "_resp", "_sock", "_what")

    def __init__(self, resp: Any, expected: int, what: str) -> None:
        self._resp = resp
        fp = getattr(resp, "_fp", None)
        # urllib3 2.x wraps an http.client.HTTPResponse; fall back to urllib3's readinto otherwise.
        self._fp = fp if isinstance(fp, http.client.HTTPResponse) else resp
        self._expected = expected
        self._what = what  # the request, for messages (no secrets)
        self._read = 0
        self._sock: socket.socket | None = _plain_socket(self._fp) if expected >= _DIRECT_MIN else None

    def readinto(self, dst: memoryview) -> int:
        try:
            if self._sock is not None and len(dst) >= _DIRECT_MIN:
                n = self._readinto_direct(dst)
            else:
                n = self._fp.readinto(dst)
        except (http.client.IncompleteRead, OSError) as exc:
            raise TransientError(
                f"{self._what}: body read failed after {self._read} bytes: {type(exc).__name__}"
            ) from None
        self._read += n
        return int(n)

    def _readinto_direct(self, dst: memoryview) -> int:
        """Bytes http.client has buffered, then the rest straight from the socket with one
        ``recv(MSG_WAITALL)``: the thread leaves the GIL once per range, not once per packet (16
        threads convoying on the GIL was the bottleneck of the buffered path)."""
        fp = self._fp
        assert self._sock is not None and fp.length is not None
        # peek() returns what is buffered without I/O (or does one read when nothing is); taking all of
        # it empties http.client's buffer, so the socket is next in the stream.
        buffered = len(fp.fp.peek(1))
        first = fp.readinto(dst[: min(buffered, len(dst))])
        want = min(len(dst) - first, fp.length)
        if first < buffered or want <= 0:
            return int(first)
        got = rawhttp.recv_waitall(self._sock, dst[first : first + want])
        fp.length -= got
        if fp.length == 0:
            fp.readinto(memoryview(bytearray(0)))  # http.client marks the response complete
        return int(first + got)

    def finish(self) -> None:
        if self._read != self._expected:
            raise RemoteIOError(f"{self._what}: body: read {self._read} bytes, expected {self._expected}")
        fp = self._fp
        # No declared length: the body must end exactly here.
        unbounded = getattr(fp, "length", 0) is None or getattr(fp, "chunked", False)
        if unbounded and fp.read(1):
            self.abort()
            raise RemoteIOError(f"{self._what}: body longer than the {self._expected} bytes asked for")
        self._resp.release_conn()

    def abort(self) -> None:
        # A half-read connection must never go back to the pool: the next response would be garbage.
        try:
            self._resp.close()
        finally:
            self._resp.release_conn()


def _error_detail(resp: Any) -> str:
    """A short, secret-free detail of an error response: S3's ``<Code>`` or Hadoop's exception name."""
    try:
        data = resp.read(65536, decode_content=False) or b""
    except Exception:
        return ""
    text = data.decode("utf-8", "replace")
    m = re.search(r"<Code>([A-Za-z0-9.]+)</Code>", text)
    if m:
        return m.group(1)
    try:
        doc = json.loads(text)
        exc = doc.get("RemoteException", {})
        return str(exc.get("exception", ""))
    except (ValueError, AttributeError):
        return ""


_NOT_FOUND_CODES = frozenset({"NoSuchKey", "NoSuchBucket", "NotFound", "FileNotFoundException"})


def raise_for_status(resp: Any, what: str, retry: RetryPolicy | None = None) -> None:
    """Map an error response to an exception (and drop its connection); no-op for 2xx/3xx.

    404 → FileNotFoundError, 401/403 → PermissionError, a ``remote.retry_status`` code →
    TransientError (retried), anything else → RemoteIOError. Messages name the code, never secrets.
    """
    status = int(resp.status)
    if status < 400:
        return
    detail = _error_detail(resp)
    drop(resp)
    label = f"{what}: HTTP {status}" + (f" ({detail})" if detail else "")
    if status == 404 or detail in _NOT_FOUND_CODES:
        raise FileNotFoundError(f"{label}: no such object")
    if status in (401, 403):
        raise PermissionError(f"{label}: access denied")
    if (retry or RetryPolicy.from_settings()).retryable_status(status):
        raise TransientError(label, retry_after=retry_after(resp.headers))
    raise RemoteIOError(label)


def drop(resp: Any) -> None:
    """Close a response we will not read to the end, so its connection is not reused half-read."""
    resp.close()
    resp.release_conn()


def _verified[T](resp: Any, what: str, check: Callable[[], T]) -> T:
    """Run ``check`` on a 200/206 response (dropping it on failure); map any other status to errors."""
    if resp.status not in (200, 206):
        raise_for_status(resp, what)
        drop(resp)
        raise RemoteIOError(f"{what}: unexpected status {resp.status}")
    try:
        return check()
    except BaseException:
        drop(resp)
        raise


def is_presigned(url: str) -> bool:
    """Whether ``url`` carries a query signature (it then allows only the signed method, GET)."""
    q = urlsplit(url).query.lower()
    return any(f"{p}=" in q for p in _PRESIGNED_PARAMS)


@functools.lru_cache(maxsize=256)
def _core_root(root: str) -> tuple[str, str] | None:
    """The base URL and the path prefix (decoded, with its trailing ``/``) of keys under ``root`` for the
    native core; None where the core may not fetch under it (credentials in the URL, a query or fragment)."""
    parts = urlsplit(root)
    if "@" in parts.netloc or parts.query or parts.fragment:
        return None
    prefix = unquote(parts.path).strip("/")
    return f"{parts.scheme}://{parts.netloc}/", f"{prefix}/" if prefix else ""


def _core_store(base: str) -> Any:
    """The native core's store of the objects under ``base`` (``scheme://host[:port]/``). Idle connections
    kept: as many as a wave has in flight, so descriptors stay bounded; the store comes from the core's own
    cache, which a forked child rebuilds."""
    from gdsstore.engine.remote import core

    s = policy.settings()
    return core.http_store(base, connect_timeout=s.remote_connect_timeout, pool_idle=s.remote_wave_concurrency)


class HTTPSource:
    """One object behind an HTTP(S) URL (a :class:`~gdsstore.engine.remote.reader.RangeSource`)."""

    route = "http"

    def __init__(self, url: str, client: HTTPClient, headers: Mapping[str, str] | None = None,
                 scrub: Scrubber | None = None, *, scheme: str | None = None, route: str | None = None,
                 register_url: bool = True) -> None:
        self._url = url
        self._opened_url = url  # a redirect changes _url: the native core then stays off for this object
        self._custom_headers = bool(headers)
        self._client = client
        check_header_values(headers or {}, f"HTTPSource({redact_url(url)!r})")
        self._headers = {**(headers or {}), "Accept-Encoding": "identity"}
        self._scrub = scrub or Scrubber()
        if register_url:  # a presigned URL's query is masked by pattern: nothing per object is kept
            self._scrub.add_url(url)
        for v in (headers or {}).values():
            self._scrub.add(str(v))
        self.url = redact_url(url)
        self.scheme = scheme or urlsplit(url).scheme
        if route:
            self.route = route
        self._etag: str | None = None
        self._modified: str | None = None  # Last-Modified, the identity when there is no strong ETag
        self.last_headers: Mapping[str, str] = {}  # of the first-range answer (S3 reads its version id)

    def __repr__(self) -> str:
        return f"HTTPSource({self.url!r})"

    def _get(self, req: RangeRequest) -> Any:
        h = dict(self._headers)
        h["Range"] = req.header
        if self._etag:
            h["If-Match"] = self._etag  # a replaced object answers 412 instead of mixing versions
        return self._client.request("GET", self._url, headers=h, scrub=self._scrub)

    def stat(self) -> int:
        """The object's size: HEAD, or ``GET bytes=0-0`` where HEAD is not allowed; follows redirects
        (the ranges then go to the final URL; credentials headers are dropped across origins)."""
        for _ in range(_MAX_REDIRECTS + 1):
            size = self._stat_once()
            if size is not None:
                return size
        raise RemoteIOError(f"HEAD {self.url}: more than {_MAX_REDIRECTS} redirects")

    def _follow(self, resp: Any, what: str) -> None:
        loc = resp.headers.get("Location")
        drop(resp)
        if not loc:
            raise RemoteIOError(f"{what}: redirect ({resp.status}) without a Location")
        new = urljoin(self._url, loc)
        old, nxt = urlsplit(self._url), urlsplit(new)
        if nxt.scheme not in ("http", "https"):
            raise RemoteIOError(f"{what}: redirect to a non-HTTP URL {redact_url(new)!r}")
        if (old.scheme, old.netloc) != (nxt.scheme, nxt.netloc):
            # Never hand the user's credentials to another origin (as browsers and requests do).
            self._headers = {k: v for k, v in self._headers.items() if k.lower() not in _CREDENTIAL_HEADERS}
        self._scrub.add_url(new)
        self._url = new

    def _stat_once(self) -> int | None:
        what = f"HEAD {self.url}"
        if not is_presigned(self._url):
            resp = self._client.request("HEAD", self._url, headers=self._headers, scrub=self._scrub)
            if resp.status in _REDIRECTS:
                self._follow(resp, what)
                return None
            if resp.status == 200 and resp.headers.get("Content-Length") is not None:
                self._remember_etag(resp.headers)
                resp.release_conn()
                return int(resp.headers["Content-Length"])
            if resp.status not in (403, 405, 501, 200):
                raise_for_status(resp, what)
            drop(resp)
        # Presigned URLs sign GET only, and some servers refuse HEAD: ask for the first byte instead.
        what = f"GET {self.url} bytes=0-0"
        resp = self._get(RangeRequest(0, 1))
        if resp.status in _REDIRECTS:
            self._follow(resp, what)
            return None
        try:
            if resp.status == 416:
                cr = resp.headers.get("Content-Range", "")
                if cr.strip().endswith("/0"):
                    return 0  # empty object: no byte 0 to send
            raise_for_status(resp, what)
            if resp.status == 206:
                try:
                    _, _, total = parse_content_range(resp.headers.get("Content-Range", ""))
                except ValueError as exc:
                    raise RemoteIOError(f"{what}: {exc}") from None
                if total is None:
                    raise RemoteIOError(f"{what}: server does not tell the object's size (Content-Range */*)")
                self._remember_etag(resp.headers)
                return total
            if resp.status == 200 and resp.headers.get("Content-Length") is not None:
                return int(resp.headers["Content-Length"])
            raise RemoteIOError(f"{what}: cannot tell the object's size (status {resp.status}, no length)")
        finally:
            drop(resp)

    def _remember_etag(self, headers: Mapping[str, str]) -> None:
        self.pin_etag(headers.get("ETag"))
        if self._etag is None and self._modified is None:
            self._modified = headers.get("Last-Modified")

    def core_target(self) -> tuple[Any, str, str] | None:
        """``(store, base URL, path)`` of this object for the native core, where it may fetch the URL as it
        is: no custom headers, the default TLS settings, no redirect seen, no credentials, query or fragment
        in the URL (:func:`_core_root`); None otherwise."""
        if self._custom_headers or not self._client.default_tls or self._url != self._opened_url:
            return None
        root = _core_root(self._url)
        if root is None or not root[1]:
            return None
        return _core_store(root[0]), root[0], root[1].rstrip("/")

    @property
    def version_token(self) -> str | None:
        """What identifies this version of the object: its ETag, else its Last-Modified (None until a
        response carried one). (``version()``, where a source has it, is the reader's own check.)"""
        return self._etag or self._modified

    @property
    def etag(self) -> str | None:
        """The strong ETag every response of this object must carry (None until one was seen)."""
        return self._etag

    def pin_etag(self, etag: str | None) -> None:
        """Send ``If-Match: etag`` with every range and check the ETag of every response: a replaced
        object then fails (:class:`RangeMismatchError`) instead of mixing, even where a server ignores
        ``If-Match``."""
        if etag and not etag.startswith("W/") and self._etag is None:  # weak tags never match under If-Match
            self._etag = etag

    def check_version(self, headers: Mapping[str, str], what: str) -> None:
        """Every response must belong to the version pinned by the first one (ETag, else Last-Modified).

        Raises:
            RangeMismatchError: the response is of another version, or does not say which it is.
        """
        if self._etag is not None:
            got, want, name = headers.get("ETag"), self._etag, "ETag"
        elif self._modified is not None:
            got, want, name = headers.get("Last-Modified"), self._modified, "Last-Modified"
        else:
            return
        if got != want:
            raise RangeMismatchError(
                f"{what}: the object changed while it was being read ({name} {want!r}, now {got!r}); "
                "its bytes would mix two versions: read it again"
            )

    def open_first(self, nbytes: int, offset: int = 0) -> FirstRange:
        """``GET bytes=offset-(offset+nbytes-1)`` before the size is known; follows redirects like
        :meth:`stat`. Past the end (416): an empty body."""
        req = RangeRequest(offset, nbytes)
        what = f"GET {self.url} {req.header}"
        for _ in range(_MAX_REDIRECTS + 1):
            resp = self._get_fast(req, what) or self._get(req)
            if resp.status not in _REDIRECTS:
                break
            self._follow(resp, what)
        else:
            raise RemoteIOError(f"{what}: more than {_MAX_REDIRECTS} redirects")
        if resp.status == 416:
            # No byte at the offset: an empty object, or a range past the end ("bytes */size"; S3 may
            # omit it, then the caller stats first).
            cr = resp.headers.get("Content-Range", "").strip()
            total = int(cr.rpartition("/")[2]) if cr.startswith("bytes */") and cr[8:].isdigit() else None
            drop(resp)
            return FirstRange(NoBody(), 0, total)
        n, total = _verified(
            resp, what, lambda: check_first_response(resp.status, resp.headers, nbytes, what, offset)
        )
        self._remember_etag(resp.headers)
        self.last_headers = resp.headers
        return FirstRange(HTTPBody(resp, n, what), n, total)

    def _get_fast(self, req: RangeRequest, what: str) -> Any:
        """The ranged GET through :mod:`rawhttp` (plain http, ``remote.fast_http``), or None to use
        urllib3 (TLS, a response it cannot take)."""
        s = policy.settings()
        if not s.remote_fast_http or not self._url.startswith("http://"):
            return None
        h = dict(self._headers)
        h["Range"] = req.header
        if self._etag:
            h["If-Match"] = self._etag
        try:
            return rawhttp.get(self._url, h, s.remote_connect_timeout, s.remote_timeout)
        except rawhttp.Unsupported:
            return None
        except Exception as exc:
            text = self._scrub(f"{type(exc).__name__}: {exc}")
            if is_transient(exc):
                raise TransientError(f"{what}: {text}") from None
            raise RemoteIOError(f"{what}: {text}") from None

    def open_range(self, req: RangeRequest, size: int) -> Body:
        what = f"GET {self.url} {req.header}"
        for _ in range(_MAX_REDIRECTS + 1):
            resp = self._get_fast(req, what) or self._get(req)
            if resp.status not in _REDIRECTS:
                break
            self._follow(resp, what)  # same rules as HEAD: credentials never cross origins
        else:
            raise RemoteIOError(f"{what}: more than {_MAX_REDIRECTS} redirects")
        if resp.status == 412:
            drop(resp)
            raise RangeMismatchError(
                f"{what}: the object changed while it was being read (If-Match {self._etag!r} failed); "
                "read it again"
            )

        def check() -> None:
            check_range_response(resp.status, resp.headers, req, size, what)
            self.check_version(resp.headers, what)

        _verified(resp, what, check)
        return HTTPBody(resp, req.nbytes, what)


class HTTPBackend(WaveReads, Backend):
    """Read-only objects under an HTTP(S) root (a web server: no listing, no writes)."""

    writable = False
    listable = False

    def __init__(self, root: str, *, headers: Mapping[str, str] | None = None, verify: bool | str = True,
                 cert: str | tuple[str, str] | None = None) -> None:
        parts = urlsplit(root)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError(f"HTTPBackend(): not an http(s) URL: {redact_url(root)!r}")
        self._root = root.rstrip("/")
        self._headers = dict(headers or {})
        self._client = get_client(verify, cert)

    @property
    def url(self) -> str:
        return redact_url(self._root)

    def _key_url(self, key: str, where: str) -> str:
        parts = urlsplit(self._root)
        if not parts.query and not parts.fragment:
            return f"{self._root}/{key_to_url_path(key, where)}"  # the same URL, without re-parsing the root
        path = parts.path.rstrip("/") + "/" + key_to_url_path(key, where)
        return parts._replace(path=path).geturl()

    def source(self, key: str, where: str) -> HTTPSource:
        return HTTPSource(self._key_url(key, where), self._client, self._headers)

    def core_paths(self, keys: Sequence[str], where: str) -> tuple[Any, str, list[str | None]] | None:
        """``(store, base URL, paths)`` of ``keys`` for the native core (:mod:`.core`), where it may fetch
        the URLs as they are (no custom headers, the default TLS settings, no credentials, query or fragment
        in the root); a key's path is None where the key is refused (the pure-Python way raises it in its
        place); None: the pure-Python transport reads them all.

        The root's part is worked out once per root and settings (:func:`_core_root`): per key, only the
        key's check and a concatenation (the path is the decoded URL path, which the key's is as it is;
        parsing each key's URL again cost ~100 µs of a 16 KiB chunk's read)."""
        if self._headers or not self._client.default_tls:
            return None
        root = _core_root(self._root)
        if root is None:
            return None
        base, prefix = root
        store = _core_store(base)
        paths: list[str | None] = []
        for key in keys:
            try:
                paths.append(prefix + check_remote_key(key, where))
            except (TypeError, ValueError):
                paths.append(None)
        return store, base, paths

    def open(self, key: str, mode: str = "rb") -> Any:
        from gdsstore.engine.remote.reader import RemoteFile

        if mode != "rb":
            raise PermissionError(f"HTTPBackend.open(): {self.url} is read-only; mode {mode!r} needs a writable backend")
        return RemoteFile(self.source(key, "HTTPBackend.open()"))

    def info(self, key: str) -> ObjectInfo:
        src = self.source(key, "HTTPBackend.info()")
        size = RetryPolicy.from_settings().call(src.stat, f"HEAD {src.url}")
        return ObjectInfo(key, size, etag=src.version_token)

    def put(self, key: str, buf: Any, *, exclusive: bool = False) -> None:
        raise PermissionError(f"HTTPBackend.put(): {self.url} is read-only (key {key!r})")

    def delete(self, key: str) -> None:
        raise PermissionError(f"HTTPBackend.delete(): {self.url} is read-only (key {key!r})")

    def list(self, prefix: str = "") -> Any:
        raise NotImplementedError(f"HTTPBackend.list(): a web server cannot list {self.url} (listable=False)")

    def list_dir(self, prefix: str = "") -> Any:
        raise NotImplementedError(f"HTTPBackend.list_dir(): a web server cannot list {self.url} (listable=False)")
