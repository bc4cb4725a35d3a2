"""The minimal keep-alive client of the ranged-GET hot path (remote.fast_http): byte-exact bodies,
connection reuse, a server that drops idle keep-alive connections, and fallbacks."""

from __future__ import annotations

import re
import socket
import threading
from collections.abc import Iterator

import numpy as np
import pytest

import gdsstore
from gdsstore.engine.remote import rawhttp

DATA = bytes(range(256)) * 16384  # 4 MiB


class OneShotServer:
    """Answers Range GETs; closes each connection after ``per_conn`` responses *without* saying so
    (like a server whose keep-alive timeout expired). Counts connections."""

    def __init__(self, per_conn: int, chunked: bool = False) -> None:
        self.per_conn = per_conn
        self.chunked = chunked
        self.connections = 0
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self._stop = False
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while not self._stop:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _handle(self, conn: socket.socket) -> None:
        f = conn.makefile("rb")
        try:
            for _ in range(self.per_conn):
                head = b""
                while not head.endswith(b"\r\n\r\n"):
                    line = f.readline()
                    if not line:
                        return
                    head += line
                m = re.search(rb"Range: bytes=(\d+)-(\d+)", head)
                assert m
                a, b = int(m.group(1)), int(m.group(2))
                body = DATA[a : b + 1]
                if self.chunked:
                    conn.sendall(b"HTTP/1.1 206 Partial Content\r\nTransfer-Encoding: chunked\r\n"
                                 + f"Content-Range: bytes {a}-{b}/{len(DATA)}\r\n\r\n".encode()
                                 + f"{len(body):x}\r\n".encode() + body + b"\r\n0\r\n\r\n")
                else:
                    conn.sendall(f"HTTP/1.1 206 Partial Content\r\nContent-Length: {len(body)}\r\n"
                                 f"Content-Range: bytes {a}-{b}/{len(DATA)}\r\n\r\n".encode() + body)
        finally:
            f.close()
            conn.close()

    def close(self) -> None:
        self._stop = True
        self.sock.close()


@pytest.fixture
def keepalive() -> Iterator[OneShotServer]:
    srv = OneShotServer(per_conn=1000)
    yield srv
    srv.close()


def test_bodies_are_exact_and_connections_reused(keepalive: OneShotServer) -> None:
    url = f"http://127.0.0.1:{keepalive.port}/obj"
    for a, n in [(0, 10), (5, 1 << 20), (len(DATA) - 7, 7), (123_457, 2_000_001)]:
        resp = rawhttp.get(url, {"Range": f"bytes={a}-{a + n - 1}"}, 2.0, 5.0)
        assert resp.status == 206 and resp.headers.get("CONTENT-RANGE").startswith(f"bytes {a}-")
        buf = bytearray(n)
        got = 0
        while got < n:
            k = resp.readinto(memoryview(buf)[got:])
            assert k
            got += k
        assert resp.readinto(memoryview(bytearray(4))) == 0  # end of this body, nothing of the next
        resp.release_conn()
        assert bytes(buf) == DATA[a : a + n]
    assert keepalive.connections == 1  # one thread, one kept-alive connection


def test_idle_connection_closed_by_the_server_is_replaced() -> None:
    srv = OneShotServer(per_conn=1)  # closes after every response, without "Connection: close"
    try:
        url = f"http://127.0.0.1:{srv.port}/obj"
        for i in range(3):
            resp = rawhttp.get(url, {"Range": f"bytes={i}-{i + 99}"}, 2.0, 5.0)
            buf = bytearray(100)
            assert resp.readinto(memoryview(buf)) == 100
            resp.release_conn()
            assert bytes(buf) == DATA[i : i + 100]
        assert srv.connections == 3
    finally:
        srv.close()


def test_chunked_response_is_left_to_the_full_client() -> None:
    srv = OneShotServer(per_conn=10, chunked=True)
    try:
        with pytest.raises(rawhttp.Unsupported):
            rawhttp.get(f"http://127.0.0.1:{srv.port}/obj", {"Range": "bytes=0-9"}, 2.0, 5.0)
    finally:
        srv.close()
    with pytest.raises(rawhttp.Unsupported):
        rawhttp.get("https://127.0.0.1:1/obj", {}, 2.0, 5.0)  # TLS: urllib3's job


@pytest.mark.parametrize("fast", [True, False])
def test_engine_reads_equal_with_and_without_fast_http(keepalive: OneShotServer, fast: bool) -> None:
    from gdsstore.engine.remote.http_transport import HTTPClient, HTTPSource
    from gdsstore.engine.remote.reader import RemoteFile

    src = HTTPSource(f"http://127.0.0.1:{keepalive.port}/obj", HTTPClient())
    # The Python transport (its two clients are the subject; this toy server speaks only what they send).
    settings = {"remote.fast_http": fast, "task_size": 256 << 10, "remote.max_range_size": 1 << 20, "remote.core": "off"}
    with gdsstore.config.set(settings):
        f = RemoteFile(src, size=len(DATA))
        buf = np.zeros(len(DATA), "u1")
        assert f.read(buf) == len(DATA)
    assert buf.tobytes() == DATA
