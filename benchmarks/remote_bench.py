"""Remote read throughput: one object over loopback HTTP into GPU memory (host memory without a GPU).

Starts a loopback HTTP server that is not the bottleneck — nginx with ``--workers`` worker processes
when nginx exists, else ``--workers`` Python processes sharing one ``SO_REUSEPORT`` socket and
answering with ``os.sendfile`` — writes an object of ``--size`` bytes, and measures GB/s for:

- gdsstore with its defaults (``gdsstore.open(url).read(buf)``), and with 16 MiB tasks;
- kvikio ``RemoteFile.open_http`` at 16 threads and at its default thread count (skipped without kvikio);
- fsspec ``HTTPFileSystem.cat_file`` + ``cupy.asarray`` (``numpy.frombuffer`` copy without a GPU).

Contenders are measured in interleaved rounds (each once per round, ``--repeat`` rounds; the median
counts). Writes ``remote_bench.json`` under ``--out`` and prints a table. Compare ratios within one run.

Usage::

    python benchmarks/remote_bench.py --size 1GiB --out results/           # GPU machine
    python benchmarks/remote_bench.py --size 64MiB --server python          # quick check on CPU
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

_UNITS = {"": 1, "b": 1, "k": 1 << 10, "kib": 1 << 10, "m": 1 << 20, "mib": 1 << 20, "g": 1 << 30, "gib": 1 << 30}


def parse_size(text: str) -> int:
    m = re.fullmatch(r"\s*(\d+)\s*([a-zA-Z]*)\s*", text)
    if not m or m.group(2).lower() not in _UNITS:
        raise argparse.ArgumentTypeError(f"--size: not a size: {text!r} (e.g. 1GiB, 64MiB, 1048576)")
    return int(m.group(1)) * _UNITS[m.group(2).lower()]


# -- servers -----------------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_port(port: int, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(f"no server on 127.0.0.1:{port}")


def _nginx_binary() -> str | None:
    for cand in (shutil.which("nginx"), "/usr/sbin/nginx", "/usr/local/sbin/nginx"):
        if cand and os.access(cand, os.X_OK):
            return cand
    return None


@contextlib.contextmanager
def nginx_server(root: str, workers: int) -> Iterator[str]:
    binary = _nginx_binary()
    assert binary is not None
    port = _free_port()
    tmp = tempfile.mkdtemp(prefix="bench-nginx-")
    user = "user root;" if os.geteuid() == 0 else ""
    conf = os.path.join(tmp, "nginx.conf")
    with open(conf, "w") as f:
        f.write(
            f"{user}\nworker_processes {workers};\ndaemon off;\npid {tmp}/nginx.pid;\nerror_log {tmp}/error.log;\n"
            "events { worker_connections 4096; }\n"
            f"http {{ access_log off; sendfile on; tcp_nopush off; keepalive_requests 1000000;\n"
            f"  client_body_temp_path {tmp}/b; proxy_temp_path {tmp}/p; fastcgi_temp_path {tmp}/f;\n"
            f"  uwsgi_temp_path {tmp}/u; scgi_temp_path {tmp}/s; default_type application/octet-stream;\n"
            f"  server {{ listen 127.0.0.1:{port} reuseport; root {root}; location / {{ }} }} }}\n"
        )
    proc = subprocess.Popen([binary, "-p", tmp, "-c", conf], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_port(port)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(10)
        shutil.rmtree(tmp, ignore_errors=True)


def _serve_connection(conn: socket.socket, root: str) -> None:
    """HTTP/1.1 keep-alive: HEAD/GET with Range, bodies by os.sendfile from the page cache."""
    rfile = conn.makefile("rb")
    try:
        while True:
            line = rfile.readline(65537)
            if not line:
                return
            method, target, _ = line.decode("latin-1").split(" ", 2)
            headers: dict[str, str] = {}
            while True:
                h = rfile.readline(65537)
                if h in (b"\r\n", b"\n", b""):
                    break
                k, _, v = h.decode("latin-1").partition(":")
                headers[k.strip().lower()] = v.strip()
            path = os.path.join(root, target.split("?")[0].lstrip("/"))
            try:
                fd = os.open(path, os.O_RDONLY)
            except OSError:
                conn.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
                continue
            try:
                size = os.fstat(fd).st_size
                start, end, status = 0, size - 1, "200 OK"
                extra = ""
                m = re.fullmatch(r"bytes=(\d+)-(\d*)", headers.get("range", ""))
                if m:
                    start = int(m.group(1))
                    end = min(int(m.group(2)) if m.group(2) else size - 1, size - 1)
                    status = "206 Partial Content"
                    extra = f"Content-Range: bytes {start}-{end}/{size}\r\n"
                n = max(0, end - start + 1)
                conn.sendall(
                    f"HTTP/1.1 {status}\r\nContent-Length: {n}\r\nAccept-Ranges: bytes\r\n{extra}\r\n".encode()
                )
                if method == "GET":
                    sent = 0
                    while sent < n:
                        sent += os.sendfile(conn.fileno(), fd, start + sent, n - sent)
            finally:
                os.close(fd)
    except (OSError, ValueError):
        return
    finally:
        rfile.close()
        conn.close()


def _worker(sock: socket.socket, root: str) -> None:
    while True:
        conn, _ = sock.accept()
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        threading.Thread(target=_serve_connection, args=(conn, root), daemon=True).start()


@contextlib.contextmanager
def python_server(root: str, workers: int) -> Iterator[str]:
    """``workers`` forked processes, each with its own SO_REUSEPORT socket on one port."""
    port = _free_port()
    pids = []
    for _ in range(workers):
        pid = os.fork()
        if pid == 0:  # child: serve until killed
            try:
                s = socket.socket()
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
                s.bind(("127.0.0.1", port))
                s.listen(1024)
                _worker(s, root)
            finally:
                os._exit(0)
        pids.append(pid)
    try:
        _wait_port(port)
        yield f"http://127.0.0.1:{port}"
    finally:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
        for pid in pids:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)


# -- contenders ----------------------------------------------------------------------------------------


def _cupy() -> Any:
    try:
        import cupy

        if cupy.cuda.runtime.getDeviceCount() > 0:
            return cupy
    except Exception:
        pass
    return None


def _alloc(cp: Any, n: int) -> Any:
    import numpy as np

    return cp.empty(n, dtype=cp.uint8) if cp is not None else np.empty(n, dtype=np.uint8)


def _sync(cp: Any) -> None:
    if cp is not None:
        cp.cuda.runtime.deviceSynchronize()


def gdsstore_reader(
    url: str, cp: Any, size: int, settings: dict[str, Any] | None = None
) -> Callable[[], int]:
    import gdsstore

    buf = _alloc(cp, size)

    def run() -> int:
        with gdsstore.config.set(settings or {}), gdsstore.open(url) as f:
            n = int(f.read(buf))
        _sync(cp)
        return n

    return run


def kvikio_reader(url: str, cp: Any, size: int, threads: int | None) -> Callable[[], int] | str:
    try:
        import kvikio
        import kvikio.defaults
    except Exception as exc:
        return f"kvikio not importable ({type(exc).__name__})"
    if not hasattr(kvikio, "RemoteFile"):
        return "kvikio has no RemoteFile (kvikio >= 24.12 needed)"
    buf = _alloc(cp, size)

    def set_threads(n: int) -> None:
        if hasattr(kvikio.defaults, "set"):
            kvikio.defaults.set({"num_threads": n})
        else:
            kvikio.defaults.num_threads_reset(n)

    def run() -> int:
        if threads is not None:
            set_threads(threads)
        else:
            set_threads(_KVIKIO_DEFAULT_THREADS[0])
        with kvikio.RemoteFile.open_http(url) as f:
            n = int(f.read(buf))
        _sync(cp)
        return n

    return run


_KVIKIO_DEFAULT_THREADS = [1]


def fsspec_reader(url: str, cp: Any, size: int) -> Callable[[], int] | str:
    try:
        import fsspec
        import numpy as np
    except Exception as exc:
        return f"fsspec not importable ({type(exc).__name__})"
    fs = fsspec.filesystem("http")

    def run() -> int:
        data = fs.cat_file(url)
        arr = cp.asarray(np.frombuffer(data, dtype=np.uint8)) if cp is not None else np.frombuffer(data, "u1").copy()
        _sync(cp)
        return int(arr.size)

    return run


# -- main ------------------------------------------------------------------------------------------------


def measure(run: Callable[[], int], size: int, repeat: int, warm: bool = True) -> list[float]:
    if warm:
        run()  # warm-up: connections, pinned ring, page cache
    rates = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        n = run()
        dt = time.perf_counter() - t0
        if n != size:
            raise RuntimeError(f"read {n} bytes, expected {size}")
        rates.append(size / dt / 1e9)
    return rates


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", type=parse_size, default=1 << 30, help="object size (default 1GiB)")
    ap.add_argument("--out", default="benchmarks/results", help="directory for remote_bench.json")
    ap.add_argument("--server", choices=["auto", "nginx", "python"], default="auto")
    ap.add_argument("--workers", type=int, default=8, help="server processes (default 8)")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--sweep", action="store_true", help="also gdsstore under other settings, and host memory")
    args = ap.parse_args(argv)

    cp = _cupy()
    kind = args.server
    if kind == "auto":
        kind = "nginx" if _nginx_binary() else "python"
    if kind == "nginx" and not _nginx_binary():
        ap.error("--server nginx: nginx is not installed")
    try:
        import kvikio.defaults

        got = kvikio.defaults.get("num_threads") if hasattr(kvikio.defaults, "get") else kvikio.defaults.get_num_threads()
        _KVIKIO_DEFAULT_THREADS[0] = int(got)
    except Exception:
        pass

    root = tempfile.mkdtemp(prefix="remote-bench-")
    results: list[dict[str, Any]] = []
    try:
        path = os.path.join(root, "object.bin")
        chunk = os.urandom(1 << 20)
        with open(path, "wb") as f:
            for _ in range(args.size // len(chunk)):
                f.write(chunk)
            f.write(chunk[: args.size % len(chunk)])
        with open(path, "rb") as f:  # into the page cache: measure the network path, not the disk
            while f.read(64 << 20):
                pass
        server = nginx_server if kind == "nginx" else python_server
        with server(root, args.workers) as base:
            url = f"{base}/object.bin"
            contenders: list[tuple[str, Callable[[], int] | str]] = [
                ("gdsstore (defaults)", gdsstore_reader(url, cp, args.size)),
                ("gdsstore (remote.max_range_size 64 MiB)",
                 gdsstore_reader(url, cp, args.size, {"remote.max_range_size": 64 << 20})),
                ("kvikio RemoteFile, 16 threads", kvikio_reader(url, cp, args.size, 16)),
                (f"kvikio RemoteFile, default ({_KVIKIO_DEFAULT_THREADS[0]} threads)",
                 kvikio_reader(url, cp, args.size, None)),
                ("fsspec HTTPFileSystem + " + ("cupy.asarray" if cp is not None else "numpy copy"),
                 fsspec_reader(url, cp, args.size)),
            ]
            if args.sweep:
                for label, s in [
                    ("ranges of 16 MiB in 8 MiB slots", {"remote.max_range_size": 16 << 20}),
                    ("whole ranges in 32 MiB slots", {"bounce_buffer_size": 32 << 20}),
                    ("ranges of 4 MiB", {"remote.max_range_size": 4 << 20}),
                    ("32 ranges in flight", {"remote.concurrency": 32}),
                ]:
                    contenders.append((f"gdsstore ({label})", gdsstore_reader(url, cp, args.size, s)))
                contenders.append(("gdsstore (defaults, host memory)", gdsstore_reader(url, None, args.size)))
            # Interleaved rounds (every contender once per round): a slow drift of the machine, or
            # the server's connection-to-worker luck of one moment, weighs on all of them alike.
            ready: list[tuple[str, Callable[[], int]]] = []
            for name, run in contenders:
                if isinstance(run, str):
                    results.append({"name": name, "skipped": run})
                    continue
                try:
                    measure(run, args.size, 0)  # warm-up: connections, pinned ring, page cache
                    ready.append((name, run))
                except Exception as exc:
                    results.append({"name": name, "error": f"{type(exc).__name__}: {exc}"})
            rates: dict[str, list[float]] = {name: [] for name, _ in ready}
            failed: dict[str, str] = {}
            for _ in range(args.repeat):
                for name, run in ready:
                    if name in failed:
                        continue
                    try:
                        rates[name] += measure(run, args.size, 1, warm=False)
                    except Exception as exc:
                        failed[name] = f"{type(exc).__name__}: {exc}"
            for name, _ in ready:
                if name in failed:
                    results.append({"name": name, "error": failed[name]})
                else:
                    r = rates[name]
                    results.append({"name": name, "gbps": r, "best": max(r), "median": statistics.median(r)})
    finally:
        shutil.rmtree(root, ignore_errors=True)

    import gdsstore

    report = {
        "benchmark": "remote_bench",
        "size": args.size,
        "server": f"{kind} x{args.workers}",
        "destination": "cupy (device)" if cp is not None else "numpy (host; no GPU/cupy)",
        "gdsstore_defaults": {k: gdsstore.config.get(k) for k in ("task_size", "remote.concurrency")},
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(), "host": platform.node()},
        "results": results,
    }
    os.makedirs(args.out, exist_ok=True)
    out = os.path.join(args.out, "remote_bench.json")
    with open(out, "w") as f:
        json.dump(report, f, indent=2)

    anchor = next((r["median"] for r in results if r["name"].startswith("kvikio RemoteFile, 16") and "median" in r),
                  None)
    print(f"{args.size / (1 << 30):.2f} GiB over {report['server']} into {report['destination']}")
    print(f"{'contender':<44} {'median GB/s':>11} {'best GB/s':>10} {'vs kvikio16':>11}")
    for r in results:
        if "median" in r:
            ratio = f"{r['median'] / anchor:.2f}x" if anchor else "-"
            print(f"{r['name']:<44} {r['median']:>11.2f} {r['best']:>10.2f} {ratio:>11}")
        else:
            print(f"{r['name']:<44} {'skipped: ' + r.get('skipped', r.get('error', '')):>33}")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
