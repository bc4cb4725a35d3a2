"""The urllib3 client WebHDFS talks through: the one HTTP stack beside the native core, which carries every
HTTP(S) and S3 request (object_store has no WebHDFS).

urllib3's ``PoolManager`` gives connection pooling, TLS (verified by default) and timeouts; bodies are read
through the underlying ``http.client.HTTPResponse.readinto`` (in place, about 3x urllib3's own ``readinto``).
After ``os.fork()`` every client drops its pools in the child (``os.register_at_fork``): a child never reads
from a connection its parent also reads from.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import threading
import weakref
from collections.abc import Mapping
from typing import Any

from gdsstore import policy
from gdsstore.engine.remote.keys import check_header_values
from gdsstore.engine.remote.redact import Scrubber, redact_url
from gdsstore.engine.remote.retry import RemoteIOError, RetryPolicy, TransientError, is_transient, retry_after

__all__ = ["HTTPBody", "HTTPClient", "drop", "get_client", "raise_for_status"]

_all_clients: weakref.WeakSet[HTTPClient] = weakref.WeakSet()


class HTTPClient:
    """A pooled HTTP(S) client shared by threads; timeouts come from the settings at each request."""

    def __init__(self, *, verify: bool | str = True, cert: str | tuple[str, str] | None = None,
                 maxsize: int = 16) -> None:
        self._kw = self._pool_kwargs(verify, cert, maxsize)
        self._pool = self._new_pool()
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

    def request(self, method: str, url: str, *, headers: Mapping[str, str] | None = None, body: Any = None,
                scrub: Scrubber | None = None) -> Any:
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
        """Close every idle connection."""
        self._pool.clear()


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


class HTTPBody:
    """A response body read through http.client's ``readinto`` (no urllib3 layer in the hot loop)."""

    __slots__ = ("_expected", "_fp", "_read", "_resp", "_what")

    def __init__(self, resp: Any, expected: int, what: str) -> None:
        self._resp = resp
        fp = getattr(resp, "_fp", None)
        # urllib3 2.x wraps an http.client.HTTPResponse; fall back to urllib3's readinto otherwise.
        self._fp = fp if isinstance(fp, http.client.HTTPResponse) else resp
        self._expected = expected
        self._what = what  # the request, for messages (no secrets)
        self._read = 0

    def readinto(self, dst: memoryview) -> int:
        try:
            n = self._fp.readinto(dst)
        except (http.client.IncompleteRead, OSError) as exc:
            raise TransientError(
                f"{self._what}: body read failed after {self._read} bytes: {type(exc).__name__}"
            ) from None
        self._read += n
        return int(n)

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
    """A short, secret-free detail of an error response: Hadoop's exception name (or an XML ``<Code>``)."""
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
