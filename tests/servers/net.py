"""Loopback networking helpers for the test servers."""

from __future__ import annotations

import socket
import subprocess
import threading
import time

__all__ = ["Blackhole", "closed_port", "free_port", "stop_process", "wait_port"]


def stop_process(proc: subprocess.Popen[bytes]) -> None:
    """Terminate a server process we started, then kill it if it lingers."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def closed_port() -> int:
    """A port nobody listens on (connections are refused at once)."""
    return free_port()


def wait_port(port: int, timeout: float = 20.0, proc: object = None) -> None:
    """Wait until something accepts connections on ``127.0.0.1:port``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and getattr(proc, "poll", lambda: None)() is not None:
            raise RuntimeError(f"server process exited with {proc.poll()} before listening on {port}")  # type: ignore[attr-defined]
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(f"nothing listens on 127.0.0.1:{port} after {timeout} s")


class Blackhole:
    """A server that accepts connections and never answers (reads are the client's problem)."""

    def __init__(self) -> None:
        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(64)
        self.port = int(self._sock.getsockname()[1])
        self._conns: list[socket.socket] = []
        self._stop = False
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        self._sock.settimeout(0.1)
        while not self._stop:
            try:
                conn, _ = self._sock.accept()
            except (TimeoutError, OSError):
                continue
            self._conns.append(conn)

    def close(self) -> None:
        self._stop = True
        self._thread.join(2)
        for c in self._conns:
            c.close()
        self._sock.close()
