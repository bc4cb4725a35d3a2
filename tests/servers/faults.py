"""An HTTP server with proper Range support and injectable faults.

Objects live in :attr:`FaultServer.objects` (name → bytes). A request path ``/{mode}/{count}/{name}``
makes the first ``count`` GETs of that path misbehave (``count`` ``always`` → every GET):

- ``ok``: no fault.
- ``ignore-range``: answers ``200`` with the whole object, whatever ``Range`` says.
- ``503``: answers ``503 Service Unavailable``.
- ``reset``: sends the headers and half the body, then resets the connection (RST).
- ``truncate``: declares the full ``Content-Length``, sends half, closes cleanly.
- ``slow``: waits :attr:`FaultServer.slow_seconds` before the first byte.
- ``wrong-range``: answers ``206`` with a Content-Range shifted by one byte (and those bytes).
- ``wrong-end``: answers ``206`` with the bytes asked for and their Content-Length, under a Content-Range
  that starts right and ends one byte late (only the range's end disagrees).
- ``short-range``: answers ``206`` with a correct Content-Range but a shorter Content-Length.
- ``chunked``: a correct ``206`` sent with ``Transfer-Encoding: chunked`` (no Content-Length).
- ``chunked-extra``: the same with one byte more than the range.

- ``replaced``: the object is replaced after ``count`` GETs: later GETs serve ``{name}.v2`` (its own
  ETag) and ignore ``If-Match``, as some servers do; ``replaced-412`` is the same with ``If-Match``
  honoured (``412``).
- ``queue-extra``: after each correct body, queues a well-formed ``206`` nobody asked for (the next
  range of the same size, wrong bytes, same ETag), as a broken proxy or a hostile server may.
- ``get-redirect``: HEAD answers ``200``; GETs answer ``302`` to ``{redirect_base}/ok/0/{name}``
  (default: this server).
- ``stall``: sends the headers and half the body, then stays silent for ``slow_seconds`` and closes.
- ``429``: answers ``429`` with ``Retry-After: {retry_after}``.
- ``drop-reused``: a GET on a connection that answered before is read and the connection closed without an
  answer, as a server whose keep-alive timeout fires as the request arrives (a stale pooled connection).
- ``drop``: every GET is read and its connection closed without an answer.
- ``close-some``: every third GET of the path is answered correctly, then its connection is closed
  without a ``Connection: close`` header (as servers with a keep-alive request limit do); ``count``
  is ignored.

``If-Match`` is honoured (``412`` when the object changed). HEAD requests are never faulty (they answer the object's size), except in mode ``nohead``
(``405``; size discovery must fall back to ``GET bytes=0-0``) ``forbidden`` (``403`` always) and ``redirect`` (``302`` to ``/ok/0/{name}``). :attr:`FaultServer.log` records
``(method, path, Range header, headers)`` of every request.
"""

from __future__ import annotations

import re
import socket
import struct
import threading
import time
from collections import defaultdict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["FaultServer", "parse_range"]

_RANGE = re.compile(r"^bytes=(\d*)-(\d*)$")


def parse_range(value: str, size: int) -> tuple[int, int] | None:
    """``Range`` header → inclusive ``(first, last)`` clamped to ``size``; ``None`` if unsatisfiable."""
    m = _RANGE.match(value.strip())
    if not m or (not m.group(1) and not m.group(2)):
        return None
    if not m.group(1):  # suffix: the last n bytes
        n = int(m.group(2))
        if n == 0 or size == 0:
            return None
        return max(0, size - n), size - 1
    first = int(m.group(1))
    last = int(m.group(2)) if m.group(2) else size - 1
    if first >= size or last < first:
        return None
    return first, min(last, size - 1)


def _response(status: int, headers: dict[str, str]) -> bytes:
    """A status line and headers, as bytes."""
    head = f"HTTP/1.1 {status} Partial Content\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    return head.encode() + b"\r\n"


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"
    answered = False  # this connection (one handler each) has answered a GET

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def _parse(self) -> tuple[str, int, bytes | None]:
        m = re.match(r"^/([a-z0-9-]+)/(\d+|always)/(.+)$", self.path.split("?")[0])
        if not m:
            return "ok", 0, self.server.objects.get(self.path.split("?")[0].lstrip("/"))
        count = -1 if m.group(2) == "always" else int(m.group(2))
        return m.group(1), count, self.server.objects.get(m.group(3))

    def _faulty(self, mode: str, count: int) -> bool:
        if mode == "ok":
            return False
        with self.server.lock:
            n = self.server.hits[self.path]
            self.server.hits[self.path] = n + 1
        return count < 0 or n < count

    def _redirected(self, mode: str, method: str = "HEAD") -> bool:
        if mode != "redirect" and not (mode == "get-redirect" and method == "GET"):
            return False
        name = self.path.split("?")[0].split("/", 3)[3]
        base = self.server.redirect_base if mode == "get-redirect" else ""
        self._send(302, {"Location": f"{base}/ok/0/{name}", "Content-Length": "0"})
        return True

    def _send(self, status: int, headers: dict[str, str], body: bytes = b"") -> None:
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        self.end_headers()
        if body:
            self.wfile.write(body)

    def do_HEAD(self) -> None:
        self.server.peers.add(self.client_address)
        self.server.log.append(("HEAD", self.path, self.headers.get("Range"), dict(self.headers)))
        mode, _, data = self._parse()
        if data is None:
            self._send(404, {"Content-Length": "0"})
            return
        if mode == "nohead":
            self._send(405, {"Content-Length": "0"})
            return
        if mode == "forbidden":
            self._send(403, {"Content-Length": "0"})
            return
        if self._redirected(mode):
            return
        self._send(200, {"Content-Length": str(len(data)), "Accept-Ranges": "bytes", "ETag": self.server.etag(data)})

    def do_GET(self) -> None:
        rng = self.headers.get("Range")
        self.server.peers.add(self.client_address)
        self.server.log.append(("GET", self.path, rng, dict(self.headers)))
        mode, count, data = self._parse()
        if data is None:
            self._send(404, {"Content-Length": "9"}, b"not found")
            return
        if mode == "forbidden":
            self._send(403, {"Content-Length": "9"}, b"forbidden")
            return
        if self._redirected(mode, "GET"):
            return
        if (mode == "drop" or (mode == "drop-reused" and self.answered)) and self._faulty(mode, count):
            self.close_connection = True
            return
        self.answered = True
        ignore_if_match = False
        if mode in ("replaced", "replaced-412"):
            if not self._faulty(mode, count):  # the first `count` GETs see the old object
                data = self.server.objects.get(f"{self._name()}.v2", data)
                ignore_if_match = mode == "replaced"
            mode = "ok"
        size = len(data)
        etag = self.server.etag(data)
        im = self.headers.get("If-Match")
        if im is not None and im != etag and not ignore_if_match:
            self._send(412, {"Content-Length": "0"})
            return
        faulty = self._faulty(mode, count)
        if faulty and mode == "429":
            self._send(429, {"Content-Length": "4", "Retry-After": self.server.retry_after}, b"slow")
            return
        if faulty and mode == "slow":
            time.sleep(self.server.slow_seconds)
            faulty = False
        if faulty and mode == "503":
            self._send(503, {"Content-Length": "4", "Retry-After": "0"}, b"busy")
            return
        if faulty and not rng and mode in ("reset", "truncate", "stall"):
            self._broken(mode, {"ETag": etag}, data, status=200)  # a whole-object GET breaks as a range does
            return
        if (faulty and mode == "ignore-range") or not rng:
            self._send(200, {"Content-Length": str(size), "ETag": etag}, data)
            return
        r = parse_range(rng, size)
        if r is None:
            self._send(416, {"Content-Range": f"bytes */{size}", "Content-Length": "0"})
            return
        first, last = r
        if faulty and mode == "wrong-range":
            first, last = min(first + 1, size - 1), min(last + 1, size - 1)
        headers = {"Content-Range": f"bytes {first}-{last}/{size}", "ETag": etag}
        part = data[first : last + 1]
        if faulty and mode == "wrong-end":
            headers["Content-Range"] = f"bytes {first}-{last + 1}/{size}"
        if faulty and mode == "short-range":
            headers["Content-Length"] = str(len(part) - 1)
            self._send(206, headers, part[:-1])
            return
        if faulty and mode in ("reset", "truncate", "stall"):
            self._broken(mode, headers, part)
            return
        if faulty and mode == "queue-extra":
            # The answer and the unasked one leave in one write: both are queued before the next request.
            n = len(part)
            extra = {"Content-Range": f"bytes {last + 1}-{last + n}/{size}", "ETag": etag, "Content-Length": str(n)}
            self.wfile.write(_response(206, {**headers, "Content-Length": str(n)}) + part
                             + _response(206, extra) + b"\xee" * n)
            self.wfile.flush()
            return
        if faulty and mode in ("chunked", "chunked-extra"):
            self._chunked(headers, part + (b"!" if mode == "chunked-extra" else b""))
            return
        self._body(206, headers, part)
        if mode == "close-some":
            with self.server.lock:
                n = self.server.hits[self.path]
                self.server.hits[self.path] = n + 1
            self.close_connection = n % 3 == 2

    def _name(self) -> str:
        return self.path.split("?")[0].split("/", 3)[3]

    def _body(self, status: int, headers: dict[str, str], body: bytes) -> None:
        self._send(status, {**headers, "Content-Length": str(len(body))}, body)

    def _chunked(self, headers: dict[str, str], body: bytes) -> None:
        self.send_response(206)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for i in range(0, len(body), 10_000):
            piece = body[i : i + 10_000]
            self.wfile.write(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
        self.wfile.write(b"0\r\n\r\n")

    def _broken(self, mode: str, headers: dict[str, str], part: bytes, status: int = 206) -> None:
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(part)))
        self.end_headers()
        self.wfile.write(part[: len(part) // 2])
        self.wfile.flush()
        if mode == "stall":
            time.sleep(self.server.slow_seconds)
        if mode == "reset":
            # SO_LINGER 0: close sends RST, the client sees "connection reset by peer" mid-body.
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.close_connection = True


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    # socketserver's listen backlog of 5 is kept: the tests' timings were set against it (a backlog of
    # 512 let queue-extra's unasked answers reach every client with its body, so none landed). A test
    # that opens more connections at once than that, under a timeout, keeps its wave below it.

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # clients hanging up on purpose (timeouts, aborted bodies) are not news
    objects: dict[str, bytes]
    hits: defaultdict[str, int]
    lock: threading.Lock
    log: list[tuple[str, str, str | None, dict[str, str]]]
    slow_seconds: float
    peers: set[tuple[str, int]]
    redirect_base: str
    retry_after: str

    @staticmethod
    def etag(data: bytes) -> str:
        return f'"{len(data)}-{hash(data) & 0xFFFFFFFF:x}"'



class FaultServer:
    """The server, serving on ``127.0.0.1:<port>`` from a daemon thread until :meth:`close`."""

    def __init__(self, tls: tuple[str, str] | None = None) -> None:
        self._srv = _Server(("127.0.0.1", 0), _Handler)
        self.scheme = "http"
        if tls is not None:  # (certfile, keyfile): serve HTTPS
            import ssl

            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(*tls)
            self._srv.socket = ctx.wrap_socket(self._srv.socket, server_side=True)
            self.scheme = "https"
        self._srv.objects = {}
        self._srv.hits = defaultdict(int)
        self._srv.lock = threading.Lock()
        self._srv.log = []
        self._srv.slow_seconds = 1.0
        self._srv.peers = set()  # client (host, port) pairs: one per TCP connection
        self.port = int(self._srv.server_address[1])
        self._srv.redirect_base = ""  # get-redirect: where GETs go (scheme://host:port), "" = here
        self._srv.retry_after = "0"
        self._thread = threading.Thread(target=self._srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()

    @property
    def objects(self) -> dict[str, bytes]:
        return self._srv.objects

    @property
    def log(self) -> list[tuple[str, str, str | None, dict[str, str]]]:
        return self._srv.log

    @property
    def peers(self) -> set[tuple[str, int]]:
        return self._srv.peers

    @property
    def slow_seconds(self) -> float:
        return self._srv.slow_seconds

    @slow_seconds.setter
    def slow_seconds(self, value: float) -> None:
        self._srv.slow_seconds = value

    @property
    def redirect_base(self) -> str:
        return self._srv.redirect_base

    @redirect_base.setter
    def redirect_base(self, value: str) -> None:
        self._srv.redirect_base = value

    @property
    def retry_after(self) -> str:
        return self._srv.retry_after

    @retry_after.setter
    def retry_after(self, value: str) -> None:
        self._srv.retry_after = value

    def url(self, name: str, mode: str = "ok", count: int | str = 0) -> str:
        return f"{self.scheme}://127.0.0.1:{self.port}/{mode}/{count}/{name}"

    def reset(self) -> None:
        """Forget fault counters and the request log."""
        with self._srv.lock:
            self._srv.hits.clear()
        self._srv.log.clear()
        self._srv.peers.clear()
        self._srv.redirect_base = ""
        self._srv.retry_after = "0"

    def close(self) -> None:
        self._srv.shutdown()
        self._srv.server_close()
        self._thread.join(5)
