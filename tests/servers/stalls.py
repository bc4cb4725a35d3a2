"""Servers that stall, count or refuse, for the native core's interrupt, ramp and TLS tests.

- :class:`StallingS3`: a path-style S3 endpoint that starts multipart uploads and then never answers a part
  (or a single PUT); it records every request, so a test sees whether the upload was aborted or completed.
- :class:`PacedServer`: answers every GET after ``delay`` seconds with a small body, and records how many
  requests were being served when each arrived (its listen backlog is generous: nothing is dropped).
- :class:`TLSCounter`: a TLS server with a self-signed certificate that counts TCP connections (every
  attempt of a client that refuses the certificate is one).
- :func:`small_http_server`: python's own ``ThreadingHTTPServer`` + ``SimpleHTTPRequestHandler`` over a
  directory, listen backlog 5, as ``python -m http.server`` runs.
"""

from __future__ import annotations

import functools
import socket
import ssl
import threading
from http.server import BaseHTTPRequestHandler, SimpleHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

__all__ = ["PacedServer", "StallingS3", "TLSCounter", "small_http_server"]


class _Quiet(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def _send(self, status: int, body: bytes = b"", ctype: str = "application/xml") -> None:
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Content-Type", ctype)
        self.end_headers()
        if body:
            self.wfile.write(body)

    def _drain(self) -> None:
        n = int(self.headers.get("Content-Length") or 0)
        while n > 0:
            got = self.rfile.read(min(n, 1 << 20))
            if not got:
                return
            n -= len(got)


class _S3Handler(_Quiet):
    server: _S3

    def _note(self, what: str) -> None:
        with self.server.lock:
            self.server.requests.append(what)

    def do_POST(self) -> None:
        q = parse_qs(urlsplit(self.path).query, keep_blank_values=True)
        self._drain()
        if "uploads" in q:
            self._note("create")
            key = urlsplit(self.path).path.split("/", 2)[2]
            self._send(200, (
                '<?xml version="1.0" encoding="UTF-8"?><InitiateMultipartUploadResult>'
                f"<Bucket>bkt</Bucket><Key>{key}</Key><UploadId>upload-1</UploadId>"
                "</InitiateMultipartUploadResult>").encode())
            return
        self._note("complete")
        self._send(200, b'<?xml version="1.0" encoding="UTF-8"?><CompleteMultipartUploadResult>'
                        b"<ETag>&quot;x-2&quot;</ETag></CompleteMultipartUploadResult>")

    def do_PUT(self) -> None:
        q = parse_qs(urlsplit(self.path).query)
        self._drain()
        self._note("part" if "partNumber" in q else "put")
        self.server.closing.wait(60)  # never answers while the test runs

    def do_DELETE(self) -> None:
        self._note("abort" if "uploadId" in self.path else "delete")
        self._send(204)


class _S3(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128
    lock: threading.Lock
    requests: list[str]
    closing: threading.Event


class _Serving:
    """Serve ``srv`` from a daemon thread until :meth:`close`."""

    def __init__(self, srv: ThreadingHTTPServer) -> None:
        self._srv = srv
        self.port = int(srv.server_address[1])
        self._thread = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._srv.shutdown()
        self._srv.server_close()
        self._thread.join(5)


class StallingS3(_Serving):
    """S3 (path style, bucket ``bkt``) that takes multipart uploads' creation, aborts and completions, and
    reads parts and single PUTs without ever answering them. :attr:`requests` lists what it received, in
    order: ``create``, ``part``, ``put``, ``abort``, ``complete``."""

    def __init__(self) -> None:
        srv = _S3(("127.0.0.1", 0), _S3Handler)
        srv.lock = threading.Lock()
        srv.requests = []
        srv.closing = threading.Event()
        self._s3 = srv
        super().__init__(srv)

    @property
    def requests(self) -> list[str]:
        with self._s3.lock:
            return list(self._s3.requests)

    def close(self) -> None:
        self._s3.closing.set()
        super().close()


class _PacedHandler(_Quiet):
    server: _Paced

    def do_GET(self) -> None:
        srv = self.server
        with srv.lock:
            srv.serving += 1
            srv.seen.append(srv.serving)
        try:
            srv.closing.wait(srv.delay)
            self._send(200, self.path.encode().ljust(16, b".")[:16], "application/octet-stream")
        finally:
            with srv.lock:
                srv.serving -= 1


class _Paced(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 1024  # nothing dropped: every request the client sends is seen
    lock: threading.Lock
    serving: int
    seen: list[int]
    delay: float
    closing: threading.Event


class PacedServer(_Serving):
    """Answers every GET after :attr:`delay` seconds with 16 bytes: the path, padded with dots (an object
    store's pace: each answer takes as long however many are in flight). :attr:`seen` holds, per request in
    arrival order, how many were being served once it arrived (itself included)."""

    def __init__(self, delay: float) -> None:
        srv = _Paced(("127.0.0.1", 0), _PacedHandler)
        srv.lock = threading.Lock()
        srv.serving = 0
        srv.seen = []
        srv.delay = delay
        srv.closing = threading.Event()
        self._paced = srv
        super().__init__(srv)

    @property
    def seen(self) -> list[int]:
        with self._paced.lock:
            return list(self._paced.seen)

    def close(self) -> None:
        self._paced.closing.set()
        super().close()


class TLSCounter:
    """HTTPS on ``127.0.0.1`` with the certificate ``(certfile, keyfile)``; :attr:`connections` counts the TCP
    connections accepted (each handshake is tried and the connection closed; no request is answered)."""

    def __init__(self, cert: tuple[str, str]) -> None:
        self._ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self._ctx.load_cert_chain(*cert)
        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(64)
        self._sock.settimeout(0.1)
        self.port = int(self._sock.getsockname()[1])
        self._lock = threading.Lock()
        self._count = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    @property
    def connections(self) -> int:
        with self._lock:
            return self._count

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except (TimeoutError, OSError):
                continue
            with self._lock:
                self._count += 1
            threading.Thread(target=self._handshake, args=(conn,), daemon=True).start()

    def _handshake(self, conn: socket.socket) -> None:
        conn.settimeout(5)
        try:
            with self._ctx.wrap_socket(conn, server_side=True):
                pass
        except OSError:
            pass  # the client refused the certificate: that is the point
        finally:
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(2)
        self._sock.close()


def small_http_server(directory: str) -> tuple[ThreadingHTTPServer, threading.Thread]:
    """``python -m http.server --directory DIR`` in a thread: socketserver's listen backlog of 5, one thread
    accepting, HTTP/1.0 (a connection per request). Returns the server and its thread (``shutdown()`` it)."""
    handler = functools.partial(_QuietFiles, directory=directory)
    srv = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    srv.daemon_threads = True
    assert srv.request_queue_size == 5  # python's own; the test is about a backlog this small
    t = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    t.start()
    return srv, t


class _QuietFiles(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass
