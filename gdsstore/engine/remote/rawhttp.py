"""A minimal HTTP/1.1 keep-alive client for the pure-Python transport's ranged GETs over plain HTTP.

Why: with 16 threads, every request's Python work (urllib3's request plumbing, ``http.client``'s
``email``-based header parsing) runs under the GIL and the threads convoy on it between their socket
reads; the measured remote throughput rose 3x when the same bytes took 4x fewer requests. This client
does one ``sendall``, parses the status line and headers with ``bytes.split``, and reads the body with
``recv(MSG_WAITALL)``; idle connections are shared by all threads, at most the engine pool's size per
host (:class:`IdleConnections`). It handles only what the range
reader needs — ``GET`` with ``Content-Length`` bodies over ``http://`` — and the caller uses the urllib3
client for everything else (TLS, redirects, HEAD, chunked bodies, writes). It serves one request at a
time (``remote.fast_http``): the ranges of ``gdsstore.open(url).read``, a single get, and the requests of
a wave sent the pure-Python way; a wave's requests go through the native core where it is built.

Safety rules: a kept-alive connection is reused only when nothing is waiting on it (a response the
server queued after the last body would otherwise be taken for the next request's answer); header
values with CR or LF are refused (no header injection); the idle connections are closed
by :func:`close_all` (on :meth:`HTTPClient.clear`, at exit) and dropped in a forked child, which
must never share a socket with its parent. ``timeout`` is the longest silence between bytes, as in
urllib3, also inside one ``recv(MSG_WAITALL)`` (measured with ``TCP_INFO``).
"""

from __future__ import annotations

import atexit
import os
import select
import socket
import struct
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

__all__ = [
    "IdleConnections", "RawResponse", "Unsupported", "close_all", "get", "idle", "idle_bound", "recv_waitall",
    "request_bytes",
]

_MAX_HEADER = 64 << 10


class Unsupported(Exception):
    """The response needs a full HTTP client (no Content-Length, chunked...): use urllib3 instead."""


class _Headers(dict[str, str]):
    """Response headers with case-insensitive ``get`` (keys are stored lower-case)."""

    def get(self, key: str, default: Any = None) -> Any:  # type: ignore[override]
        return super().get(key.lower(), default)

    def __getitem__(self, key: str) -> str:
        return super().__getitem__(key.lower())

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and super().__contains__(key.lower())


@dataclass
class _Conn:
    sock: socket.socket
    key: tuple[str, int]
    used: bool = False


class IdleConnections:
    """The process's idle kept-alive connections, per host, shared by every thread.

    At most :func:`idle_bound` per host are kept (the engine pool's size: the most requests the engine
    runs at once); a connection handed back beyond that is closed, so the process's descriptors stop
    at that bound whatever threads made the requests and whatever the server does with its
    connections. The most recently used is reused first (the likeliest still open at the server).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._idle: dict[tuple[str, int], list[_Conn]] = {}

    def take(self, key: tuple[str, int]) -> _Conn | None:
        """An idle connection to ``key`` (now the caller's), or None."""
        with self._lock:
            conns = self._idle.get(key)
            return conns.pop() if conns else None

    def give_back(self, conn: _Conn) -> None:
        """Keep ``conn`` for the next request to its host, or close it when the bound is reached."""
        bound = idle_bound()
        with self._lock:
            conns = self._idle.setdefault(conn.key, [])
            if len(conns) < bound:
                conns.append(conn)
                return
        conn.sock.close()

    def count(self, key: tuple[str, int] | None = None) -> int:
        """Idle connections kept (to ``key``, or to every host)."""
        with self._lock:
            return sum(len(v) for k, v in self._idle.items() if key is None or k == key)

    def sockets(self) -> list[socket.socket]:
        """The idle connections' sockets (for tests and ``close_all``)."""
        with self._lock:
            return [c.sock for conns in self._idle.values() for c in conns]

    def close_all(self) -> None:
        """Close every idle connection (one in use is not here)."""
        with self._lock:
            conns = [c for v in self._idle.values() for c in v]
            self._idle.clear()
        for conn in conns:
            conn.sock.close()


def idle_bound() -> int:
    """Idle kept-alive connections kept per host: the engine pool's size, ``max(num_threads,
    remote.concurrency, the pure-Python wave's concurrency)``."""
    from gdsstore import policy

    s = policy.settings()
    return max(s.num_threads, s.remote_concurrency, policy.python_wave_concurrency(s))


idle = IdleConnections()


def close_all() -> None:
    """Close every idle kept-alive connection (a connection in use is not in the pool)."""
    idle.close_all()


def _after_fork_in_child() -> None:
    """A forked child starts with no connections: the parent's sockets are the parent's. Closing the
    inherited descriptors here only drops the child's copies (no FIN while the parent holds them)."""
    global idle
    old = idle
    idle = IdleConnections()
    old._lock = threading.Lock()  # another thread may have held it at the fork
    old.close_all()


os.register_at_fork(after_in_child=_after_fork_in_child)
atexit.register(close_all)


def _idle_and_alive(sock: socket.socket) -> bool:
    """Whether a kept-alive connection can carry the next request: nothing readable on it. Bytes
    waiting there (a response the server queued unasked) or a close would be taken for the next answer."""
    try:
        poller = select.poll()  # poll, not select: no FD_SETSIZE limit in processes with many files
        poller.register(sock, select.POLLIN | select.POLLPRI)
        return not poller.poll(0)
    except (OSError, ValueError):
        return False


def _connect(key: tuple[str, int], connect_timeout: float, timeout: float) -> _Conn:
    sock = socket.create_connection(key, timeout=connect_timeout)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.settimeout(timeout)
    return _Conn(sock, key)


class RawResponse:
    """The status, headers and unread body of one response on a kept-alive connection."""

    chunked = False

    def __init__(self, conn: _Conn, status: int, headers: _Headers, rest: bytes, length: int, close: bool) -> None:
        self._conn: _Conn | None = conn
        self.status = status
        self.headers = headers
        self._rest = memoryview(rest)  # body bytes that arrived with the headers
        self.length = length  # body bytes not yet read
        self._close_after = close

    def readinto(self, dst: memoryview) -> int:
        """Read up to ``len(dst)`` body bytes; 0 at the end of the body (or of the connection)."""
        want = min(len(dst), self.length)
        if want <= 0 or self._conn is None:
            return 0
        got = 0
        if self._rest:
            got = min(want, len(self._rest))
            dst[:got] = self._rest[:got]
            self._rest = self._rest[got:]
        if got < want:
            got += recv_waitall(self._conn.sock, dst[got:want])
        self.length -= got
        return got

    def read(self, amt: int = 1 << 16, decode_content: bool = False) -> bytes:
        buf = bytearray(min(amt, self.length))
        n = self.readinto(memoryview(buf))
        return bytes(buf[:n])

    def release_conn(self) -> None:
        """Back to the idle connections when the body was read whole; closed otherwise."""
        conn, self._conn = self._conn, None
        if conn is None:
            return
        if self.length == 0 and not self._rest and not self._close_after:
            idle.give_back(conn)
        else:
            conn.sock.close()

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.sock.close()


def recv_waitall(sock: socket.socket, dst: memoryview) -> int:
    """Fill ``dst`` from ``sock`` in as few blocking ``recv`` calls as the kernel allows.

    A socket with a timeout is non-blocking underneath (MSG_WAITALL would return at once), so it is
    made blocking for the call, with the same timeout as SO_RCVTIMEO. Returns the bytes received
    (fewer only when the peer closed); a timeout with nothing received raises TimeoutError.
    """
    timeout = sock.gettimeout()
    _set_rcvtimeo(sock, timeout or 0.0)
    sock.settimeout(None)
    got = 0
    try:
        while got < len(dst):
            t0 = time.monotonic()
            try:
                k = sock.recv_into(dst[got:], len(dst) - got, socket.MSG_WAITALL)
            except BlockingIOError:
                raise TimeoutError(f"no data within {timeout} s") from None
            if k == 0:
                break
            got += k
            if got < len(dst) and timeout:
                # A short return: the call's timer ran out (or a signal). The silence is what counts,
                # not the call's length: wait only what is left of `timeout` since the last byte.
                idle = _idle_seconds(sock, time.monotonic() - t0)
                if idle >= timeout:
                    raise TimeoutError(f"no data within {timeout} s (after {got} bytes)")
                _set_rcvtimeo(sock, timeout - idle)
    finally:
        sock.settimeout(timeout)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, struct.pack("ll", 0, 0))
    return got


def _timeval(seconds: float) -> tuple[int, int]:
    sec = int(seconds)
    return sec, max(0, int((seconds - sec) * 1e6))


def _set_rcvtimeo(sock: socket.socket, seconds: float) -> None:
    sec, usec = _timeval(seconds)
    if seconds > 0 and sec == 0 and usec == 0:
        usec = 1  # zero would mean "wait forever"
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, struct.pack("ll", sec, usec))


# struct tcp_info: 8 one-byte fields, then u32s; tcpi_last_data_recv (ms since data last arrived) is
# the twelfth u32 (Linux, stable since 2.6).
_TCP_INFO_LAST_RECV = 8 + 4 * 11


def _idle_seconds(sock: socket.socket, fallback: float) -> float:
    """Seconds since data last arrived on ``sock`` (``TCP_INFO``), or ``fallback`` where unavailable."""
    opt = getattr(socket, "TCP_INFO", None)
    if opt is None:
        return fallback
    try:
        info = sock.getsockopt(socket.IPPROTO_TCP, opt, 104)
        (ms,) = struct.unpack_from("I", info, _TCP_INFO_LAST_RECV)
    except (OSError, struct.error):
        return fallback
    return float(ms) / 1000.0


def _parse_head(head: bytes) -> tuple[int, _Headers]:
    lines = head.split(b"\r\n")
    parts = lines[0].split(b" ", 2)
    if len(parts) < 2 or not parts[0].startswith(b"HTTP/1."):
        raise ConnectionError(f"bad HTTP status line {lines[0][:80]!r}")
    headers = _Headers()
    for line in lines[1:]:
        name, sep, value = line.partition(b":")
        if sep:
            k = name.strip().decode("latin-1").lower()
            v = value.strip().decode("latin-1")
            headers[k] = f"{headers[k]}, {v}" if k in headers else v
    return int(parts[1]), headers


def _exchange(conn: _Conn, request: bytes) -> RawResponse:
    sock = conn.sock
    sock.sendall(request)
    buf = bytearray()
    while True:
        end = buf.find(b"\r\n\r\n")
        if end >= 0:
            break
        if len(buf) > _MAX_HEADER:
            raise ConnectionError("HTTP response headers larger than 64 KiB")
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionResetError("connection closed before the response headers")
        buf += chunk
    status, headers = _parse_head(bytes(buf[:end]))
    rest = bytes(buf[end + 4 :])
    te = headers.get("transfer-encoding")
    cl = headers.get("content-length")
    close = "close" in headers.get("connection", "").lower()
    if te or cl is None:
        raise Unsupported("no Content-Length")
    length = int(cl)
    if len(rest) > length:
        raise ConnectionError("more bytes than Content-Length")  # pipelined garbage: never trust it
    return RawResponse(conn, status, headers, rest, length, close)


def request_bytes(url: str, headers: Mapping[str, str]) -> tuple[tuple[str, int], bytes]:
    """The connection key and the bytes of ``GET url`` with ``headers``.

    Raises:
        Unsupported: not plain HTTP.
        ValueError: CR, LF or NUL in the request line or a header.
    """
    parts = urlsplit(url)
    if parts.scheme != "http" or not parts.hostname:
        raise Unsupported(parts.scheme)
    key = (parts.hostname, parts.port or 80)
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    lines = [f"GET {target} HTTP/1.1", f"Host: {parts.netloc.rpartition('@')[2]}"]
    lines += [f"{k}: {v}" for k, v in headers.items()]
    text = "\r\n".join(lines)
    # Exactly the separators just joined: no CR, LF or NUL inside a line (one pass over the text).
    if "\x00" in text or text.count("\n") != len(lines) - 1 or text.count("\r") != len(lines) - 1:
        raise ValueError("rawhttp.get(): CR, LF or NUL in the request line or a header; refusing to send it")
    return key, (text + "\r\n\r\n").encode("latin-1")


def get(url: str, headers: Mapping[str, str], connect_timeout: float, timeout: float) -> RawResponse:
    """``GET url`` on an idle kept-alive connection to its host (a new one when needed).

    Raises:
        Unsupported: not plain HTTP, or a response the caller must read with a full client
            (the connection is closed; nothing was consumed from any other request).
        OSError: connection failures and timeouts (the caller's retry policy decides).
    """
    key, request = request_bytes(url, headers)
    conn = idle.take(key)
    if conn is not None and not _idle_and_alive(conn.sock):
        conn.sock.close()  # closed by the server, or bytes nobody asked for: never reuse it
        conn = None
    if conn is not None:
        conn.sock.settimeout(timeout)
        try:
            return _exchange(conn, request)
        except (ConnectionResetError, BrokenPipeError, ConnectionAbortedError):
            conn.sock.close()  # an idle keep-alive the server closed: one fresh connection below
        except BaseException:
            conn.sock.close()
            raise
    conn = _connect(key, connect_timeout, timeout)
    try:
        return _exchange(conn, request)
    except BaseException:
        conn.sock.close()
        raise
