"""A reverse proxy that serves another server under a path prefix (as an S3 gateway at ``https://host/s3/``).

``http://127.0.0.1:<port>{prefix}/rest`` is forwarded to ``{upstream}/rest``; a request outside the prefix
is answered ``404`` and recorded in :attr:`PrefixProxy.outside`. It also serves as an HTTP proxy (the
``HTTP_PROXY`` of a client): a request in absolute form (``GET http://any-host/rest``) is forwarded the same
way, its ``Host`` header kept, so names that do not resolve here still reach the upstream server.
:attr:`PrefixProxy.seen` records every request.
"""

from __future__ import annotations

import http.client
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, NamedTuple
from urllib.parse import urlsplit

__all__ = ["PrefixProxy", "Seen"]


class Seen(NamedTuple):
    """One request the proxy received: its method, ``Host`` header, path (origin form) and headers."""

    method: str
    host: str
    path: str
    headers: dict[str, str]

# Per-hop headers, never forwarded (RFC 9110 section 7.6.1).
_HOP = frozenset({"connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "trailer", "upgrade"})


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def _forward(self) -> None:
        srv = self.server
        path = self.path
        if not path.startswith("/"):  # absolute form: sent here as a client's HTTP proxy
            parts = urlsplit(path)
            path = parts.path + (f"?{parts.query}" if parts.query else "")
        seen = Seen(self.command, self.headers.get("Host", ""), path, dict(self.headers.items()))
        with srv.lock:
            srv.seen.append(seen)
            refused = srv.refuse is not None and srv.refuse(seen)
        if refused:  # a busy server's answer, the request not passed on
            self.send_response(503)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if not path.startswith(srv.prefix + "/"):
            with srv.lock:
                srv.outside.append(f"{self.command} {path}")
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if n else None
        headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP}
        up = http.client.HTTPConnection(srv.upstream_host, srv.upstream_port, timeout=30)
        try:
            up.request(self.command, path[len(srv.prefix):], body=body, headers=headers)
            resp = up.getresponse()
            data = resp.read()
            self.send_response(resp.status)
            head = self.command == "HEAD"  # its Content-Length is the object's, with no body
            for k, v in resp.getheaders():
                if k.lower() not in _HOP and (head or k.lower() != "content-length"):
                    self.send_header(k, v)
            if not head:
                self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if not head:
                self.wfile.write(data)
        finally:
            up.close()

    do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = _forward


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, upstream: str, prefix: str, refuse: Callable[[Seen], bool] | None) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.refuse = refuse
        parts = urlsplit(upstream)
        self.upstream_host, self.upstream_port = parts.hostname or "127.0.0.1", parts.port or 80
        self.prefix = prefix.rstrip("/")
        self.lock = threading.Lock()
        self.outside: list[str] = []
        self.seen: list[Seen] = []


class PrefixProxy:
    """``upstream`` (``http://host:port``) served under ``prefix``; :attr:`url` is the prefixed base URL.
    ``refuse(request)`` (called under a lock, in arrival order) picks requests answered ``503`` instead."""

    def __init__(self, upstream: str, prefix: str, refuse: Callable[[Seen], bool] | None = None) -> None:
        self._srv = _Server(upstream, prefix, refuse)
        port = int(self._srv.server_address[1])
        self.url = f"http://127.0.0.1:{port}{self._srv.prefix}"
        self._thread = threading.Thread(target=self._srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()

    @property
    def outside(self) -> list[str]:
        """``"METHOD path"`` of every request outside the prefix (answered 404)."""
        with self._srv.lock:
            return list(self._srv.outside)

    @property
    def seen(self) -> list[Seen]:
        """Every request received, in order."""
        with self._srv.lock:
            return list(self._srv.seen)

    def close(self) -> None:
        self._srv.shutdown()
        self._srv.server_close()
        self._thread.join(5)
