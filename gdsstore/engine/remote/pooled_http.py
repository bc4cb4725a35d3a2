"""The urllib3 client WebHDFS talks through (the native core carries every HTTP(S) and S3 request;
object_store has no WebHDFS): connection pooling, TLS (verified by default) and timeouts. After ``os.fork()``
every client drops its pools in the child: a child never reads from a connection its parent also reads from.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from typing import Any

from gdsstore import policy
from gdsstore.engine.remote.keys import check_header_values
from gdsstore.engine.remote.redact import Scrubber, redact_url
from gdsstore.engine.remote.retry import RemoteIOError, TransientError, is_transient

__all__ = ["HTTPClient", "drop", "get_client"]

class HTTPClient:
    """A pooled HTTP(S) client shared by threads; timeouts come from the settings at each request."""

    def __init__(self, *, verify: bool | str = True, cert: str | tuple[str, str] | None = None,
                 maxsize: int = 16) -> None:
        self._kw = self._pool_kwargs(verify, cert, maxsize)
        self._pool: Any = None
        self._pid = -1

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

    @property
    def pool(self) -> Any:
        """This process's ``PoolManager``: a forked child makes its own, leaving the parent's (its sockets, and
        locks another thread may have held at the fork) untouched."""
        if self._pid != os.getpid():
            import urllib3

            self._pool, self._pid = urllib3.PoolManager(**self._kw), os.getpid()
        return self._pool

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
            return self.pool.request(
                method, url, headers=dict(headers or {}), body=body, preload_content=False,
                redirect=False, retries=False, timeout=timeout, decode_content=False,
            )
        except Exception as exc:
            text = (scrub or Scrubber())(f"{type(exc).__name__}: {exc}")
            if is_transient(exc):
                raise TransientError(f"{method} {redact_url(url)}: {text}") from None
            raise RemoteIOError(f"{method} {redact_url(url)}: {text}") from None


_clients: dict[tuple[Any, ...], HTTPClient] = {}
_clients_lock = threading.Lock()


def _after_fork_in_child() -> None:
    global _clients_lock
    _clients_lock = threading.Lock()  # another thread may have held it at the fork


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


def drop(resp: Any) -> None:
    """Close a response we will not read to the end, so its connection is not reused half-read."""
    resp.close()
    resp.release_conn()
