"""A server that must receive nothing: every request line it is sent is recorded and refused.

Put it where a request must never go (as the proxy of every host but the configured one, or as an endpoint
nobody configured) and assert :attr:`Decoy.received` is empty: a client that sends anything there went
somewhere it was not told to.
"""

from __future__ import annotations

import socket
import socketserver
import threading

__all__ = ["Decoy"]


class _Handler(socketserver.BaseRequestHandler):
    server: _Server

    def handle(self) -> None:
        conn: socket.socket = self.request
        conn.settimeout(5)
        head = b""
        try:
            while b"\r\n" not in head and len(head) < 65536:
                got = conn.recv(4096)
                if not got:
                    break
                head += got
        except OSError:
            pass
        line = head.split(b"\r\n", 1)[0].decode("latin-1") or "(connection without a request line)"
        with self.server.lock:
            self.server.received.append(line)
        try:  # a plain refusal, so the client fails at once instead of waiting
            conn.sendall(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        except OSError:
            pass


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.lock = threading.Lock()
        self.received: list[str] = []


class Decoy:
    """On ``127.0.0.1:<port>``; :attr:`url` is ``http://127.0.0.1:<port>``; :meth:`close` stops it."""

    def __init__(self) -> None:
        self._srv = _Server()
        self.port = int(self._srv.server_address[1])
        self.url = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self._srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()

    @property
    def received(self) -> list[str]:
        """The request lines received so far (``CONNECT host:443 HTTP/1.1`` from a client using it as proxy)."""
        with self._srv.lock:
            return list(self._srv.received)

    def close(self) -> None:
        self._srv.shutdown()
        self._srv.server_close()
        self._thread.join(5)
