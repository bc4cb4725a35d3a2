"""The wave alone: many GETs into one host buffer, through the native core and obstore, with the bytes checked, interleaved rounds, medians, and CPU-seconds per round.

Workloads: ``N x SIZE`` objects served by nginx (tests/servers/nginx.py) on loopback, over HTTP and, nginx
answering path-style S3 GETs (it ignores the signature, so each client's own S3 cost shows), over S3;
and ``2,048 x 64 KiB`` behind a server that answers every GET after ``--latency`` seconds (aiohttp), as
requests per second. Contenders: the core's wave, obstore's sync ``get()`` from 16 threads, gdsstore's
fsspec ``cat`` (the wave through the filesystem, sizes unknown, default settings) and, where
installed, tensorstore's ``http``/``s3`` kvstore (its default concurrency, and 256 in flight under
latency). ``--only`` keeps the contenders whose name holds one of its words.

    .venv/bin/python benchmarks/core_wave_bench.py --rounds 5 --out wave.json
    # fsspec cat against its anchors, HTTP and S3, no latency rows:
    .venv/bin/python benchmarks/core_wave_bench.py --only cat,tensorstore,obstore --protocols http,s3 --latency 0
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))

import gdsstore
from gdsstore.engine import native
from gdsstore.engine.remote import core
from gdsstore.engine.remote.retry import RetryPolicy

Reader = Callable[[], int]  # one round: returns the bytes landed (checked)


def _write(root: str, name: str, n: int, size: int) -> list[bytes]:
    os.makedirs(os.path.join(root, name), exist_ok=True)
    rng = np.random.default_rng(n)
    data = []
    for i in range(n):
        b = rng.integers(0, 256, size, dtype=np.uint8).tobytes()
        with open(os.path.join(root, name, str(i)), "wb") as f:
            f.write(b)
        data.append(b)
    return data


def _check(buf: np.ndarray, data: list[bytes], size: int) -> int:
    step = (size + 63) // 64 * 64
    for i in (0, len(data) // 2, len(data) - 1):  # spot checks: first, middle, last
        assert buf[i * step : i * step + size].tobytes() == data[i], f"wrong bytes in slot {i}"
    return len(data) * size


# nginx as a path-style S3 endpoint: any keys; the bucket is the directory ``BUCKET`` under its root.
BUCKET = "bench"
S3_KEYS = {"key": "bench-key", "secret": "bench-secret", "region_name": "us-east-1"}


def _s3_options(endpoint: str) -> dict[str, str]:
    return {**S3_KEYS, "endpoint_url": endpoint.rstrip("/")}


def core_reader(base: str, name: str, data: list[bytes], size: int, conc: int, s3: str | None = None) -> Reader:
    """The native core's wave (``s3``: nginx's endpoint, path-style and signed, the store gdsstore's S3
    backend hands the core)."""
    if s3:
        from gdsstore.engine.remote.s3 import S3Backend

        backend = S3Backend(f"s3://{BUCKET}", _s3_options(s3))
        store = backend.core.store()
        base = f"s3://{BUCKET}/"
    else:
        store = core.http_store(base, connect_timeout=10.0, pool_idle=conc)
    step = (size + 63) // 64 * 64
    pieces = core.PieceTable.of([(f"{name}/{i}", 0, None, size, i * step, size) for i in range(len(data))])
    buf = np.zeros(step * len(data), np.uint8)
    retry = RetryPolicy.from_settings()

    def run() -> int:
        res = core.read_table(store, base, pieces, buf, retry=retry, concurrency=conc, timeout=60.0)
        assert not res.failed and not res.missing
        return _check(buf, data, size)

    return run


def obstore_reader(base: str, name: str, data: list[bytes], size: int, conc: int, s3: str | None = None) -> Reader:
    """obstore's sync ``get()`` from 16 threads (its fastest form measured); ``s3``: the endpoint, for
    ``S3Store`` (path-style, signed)."""
    import obstore
    from obstore.store import HTTPStore, S3Store

    opts = {"allow_http": True, "pool_max_idle_per_host": str(conc)}
    store: Any = (S3Store(BUCKET, endpoint=s3.rstrip("/"), access_key_id=S3_KEYS["key"],
                          secret_access_key=S3_KEYS["secret"], region="us-east-1",
                          virtual_hosted_style_request=False, client_options=opts)
                  if s3 else HTTPStore.from_url(base, client_options=opts))
    step = (size + 63) // 64 * 64
    buf = np.zeros(step * len(data), np.uint8)
    pool = ThreadPoolExecutor(16)

    def one(i: int) -> None:
        body = obstore.get(store, f"{name}/{i}").bytes()
        buf[i * step : i * step + size] = np.frombuffer(body, np.uint8)

    def run() -> int:
        list(pool.map(one, range(len(data))))
        return _check(buf, data, size)

    return run


def tensorstore_reader(base: str, name: str, data: list[bytes], size: int, conc: int | None,
                       s3: str | None = None) -> Reader:
    """tensorstore's ``http`` (or ``s3``: the endpoint) kvstore: every read issued at once,
    ``http_request_concurrency`` in flight (its default where ``conc`` is None)."""
    import tensorstore as ts

    ctx = ts.Context({"http_request_concurrency": {"limit": conc}}) if conc else ts.Context()
    origin = base[: base.index("/", len("http://"))]  # the keys go under the base's path
    spec: dict[str, Any] = ({"driver": "s3", "bucket": BUCKET, "endpoint": s3.rstrip("/"), "aws_region": "us-east-1",
                             "aws_credentials": {"type": "anonymous"}}
                            if s3 else {"driver": "http", "base_url": origin, "path": base.removeprefix(origin)})
    kv = ts.KvStore.open(spec, context=ctx).result()
    step = (size + 63) // 64 * 64
    buf = np.zeros(step * len(data), np.uint8)

    def run() -> int:
        futures = [kv.read(f"{name}/{i}") for i in range(len(data))]
        for i, fut in enumerate(futures):
            buf[i * step : i * step + size] = np.frombuffer(fut.result().value, np.uint8)
        return _check(buf, data, size)

    return run


def fsspec_cat_reader(base: str, name: str, data: list[bytes], size: int, conc: int | None,
                      s3: str | None = None) -> Reader:
    """gdsstore's fsspec filesystem: one ``cat`` of every object's URL (one wave, sizes unknown), with
    ``remote.wave_concurrency`` ``conc`` (None: its default)."""
    import fsspec

    if s3:
        fs = fsspec.filesystem("gds", target_protocol="s3", target_options=_s3_options(s3))
        urls = [f"s3://{BUCKET}/{name}/{i}" for i in range(len(data))]
    else:
        fs, _ = fsspec.core.url_to_fs(f"gds::{base}")
        urls = [f"{base}{name}/{i}" for i in range(len(data))]

    def run() -> int:
        with gdsstore.config.set({"remote.wave_concurrency": conc} if conc else {}):
            got = fs.cat(urls)
        for i in (0, len(urls) // 2, len(urls) - 1):  # keys: the paths as the filesystem strips them
            assert got[fs._strip_protocol(urls[i])] == data[i], f"wrong bytes for {urls[i]}"
        return len(urls) * size

    return run


def _measure(readers: dict[str, Reader], rounds: int) -> dict[str, dict[str, Any]]:
    """Interleaved rounds (one of each contender per round) after one warm-up each; medians."""
    for r in readers.values():
        r()
    times: dict[str, list[float]] = {k: [] for k in readers}
    cpus: dict[str, list[float]] = {k: [] for k in readers}
    nbytes: dict[str, int] = {}
    for _ in range(rounds):
        for k, r in readers.items():
            c0, t0 = time.process_time(), time.perf_counter()
            nbytes[k] = r()
            times[k].append(time.perf_counter() - t0)
            cpus[k].append(time.process_time() - c0)
    out = {}
    for k in readers:
        t, c = statistics.median(times[k]), statistics.median(cpus[k])
        out[k] = {"seconds": t, "GB/s": nbytes[k] / t / 1e9, "cpu_s": c, "cpu_s_per_GB": c / (nbytes[k] / 1e9),
                  "all_seconds": times[k]}
    return out


class _SlowServer:
    """aiohttp: every GET answered after ``latency`` seconds with ``size`` bytes (an S3-like first byte)."""

    def __init__(self, latency: float, size: int) -> None:
        from aiohttp import web

        body = bytes(range(256)) * (size // 256)
        self.body = body

        async def handle(request: Any) -> Any:
            await asyncio.sleep(latency)
            return web.Response(body=body)

        self._loop = asyncio.new_event_loop()
        app = web.Application()
        app.router.add_get("/{tail:.*}", handle)
        self._runner = web.AppRunner(app, access_log=None)
        ready = threading.Event()

        def serve() -> None:
            asyncio.set_event_loop(self._loop)
            self._loop.run_until_complete(self._runner.setup())
            site = web.TCPSite(self._runner, "127.0.0.1", 0, backlog=4096)
            self._loop.run_until_complete(site.start())
            self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
            ready.set()
            self._loop.run_forever()

        threading.Thread(target=serve, daemon=True).start()
        ready.wait(10)


def latency_rows(latency: float, n: int, size: int, rounds: int, concs: list[int]) -> dict[str, Any]:
    srv = _SlowServer(latency, size)
    base = f"http://127.0.0.1:{srv.port}/"
    data = [srv.body] * n
    readers: dict[str, Reader] = {}
    for c in concs:
        readers[f"core c={c}"] = core_reader(base, "l", data, size, c)
    readers["obstore sync 16 threads"] = obstore_reader(base, "l", data, size, 64)
    if _has("tensorstore"):
        readers["tensorstore kvstore (default)"] = tensorstore_reader(base, "l", data, size, None)
        readers["tensorstore kvstore 256 in flight"] = tensorstore_reader(base, "l", data, size, 256)
    res = _measure(readers, rounds)
    for v in res.values():
        v["requests/s"] = n / v["seconds"]
    return res


def _has(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


def _contenders(base: str, label: str, data: list[bytes], size: int, s3: str | None) -> dict[str, Reader]:
    """Every contender of one workload; ``s3``: nginx's endpoint, the S3 rows (the same objects)."""
    if s3:
        readers = {
            "core c=256": core_reader(base, label, data, size, 256, s3),
            "gdsstore fsspec cat": fsspec_cat_reader(base, label, data, size, None, s3),
            "obstore sync 16 threads": obstore_reader(base, label, data, size, 64, s3),
        }
        if _has("tensorstore"):
            readers["tensorstore kvstore (default)"] = tensorstore_reader(base, label, data, size, None, s3)
        return readers
    readers = {
        "core c=64": core_reader(base, label, data, size, 64),
        "core c=256": core_reader(base, label, data, size, 256),
        "obstore sync 16 threads": obstore_reader(base, label, data, size, 64),
        "gdsstore fsspec cat": fsspec_cat_reader(base, label, data, size, None),
    }
    if _has("tensorstore"):
        readers["tensorstore kvstore (default)"] = tensorstore_reader(base, label, data, size, None)
    return readers


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--latency", type=float, default=0.020, help="seconds; 0: no latency rows")
    ap.add_argument("--loads", default="4096x16KiB,4096x256KiB,256x4MiB",
                    help="comma-separated workloads, N x SIZE (KiB or MiB): 4096x16KiB")
    ap.add_argument("--protocols", default="http", help="comma-separated: http, s3 (nginx as path-style S3)")
    ap.add_argument("--only", default="", help="comma-separated words: keep the contenders whose name holds one")
    ap.add_argument("--nginx-workers", type=int, default=2)
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    if not native.load():
        sys.exit(f"core_wave_bench: {native.unavailable_reason()}")
    from servers.nginx import NginxServer

    words = [w for w in args.only.split(",") if w]
    results: dict[str, Any] = {
        "machine": f"{platform.node()} {os.cpu_count()} cores", "python": sys.version.split()[0],
        "note": "other work may share the machine's cores: compare ratios of one run",
        "command": " ".join([os.path.basename(sys.executable), *sys.argv]), "rounds": args.rounds,
        "nginx workers": args.nginx_workers,
    }
    units = {"KiB": 10, "MiB": 20}
    with tempfile.TemporaryDirectory() as root:
        os.chmod(root, 0o755)
        srv = NginxServer(root, workers=args.nginx_workers)
        try:
            for label in args.loads.split(","):
                count, _, size_text = label.partition("x")  # "4096x16KiB": 4,096 objects of 16 KiB
                n, size = int(count), int(size_text[:-3]) << units[size_text[-3:]]
                data = _write(os.path.join(root, BUCKET), label, n, size)
                for proto in args.protocols.split(","):
                    readers = _contenders(srv.url(f"{BUCKET}/"), label, data, size, srv.url("") if proto == "s3" else None)
                    readers = {k: r for k, r in readers.items() if not words or any(w in k for w in words)}
                    row = f"{label} {proto}"
                    results[row] = _measure(readers, args.rounds)
                    print(row, json.dumps({k: round(v["GB/s"], 2) for k, v in results[row].items()}), flush=True)
        finally:
            srv.close()
    if args.latency > 0:
        lat = latency_rows(args.latency, 2048, 64 << 10, args.rounds, [64, 256, 1024])
        results[f"2048x64KiB latency {args.latency * 1e3:.0f} ms"] = lat
        print("latency", json.dumps({k: round(v["requests/s"]) for k, v in lat.items()}), flush=True)
    if args.out:
        os.makedirs(os.path.dirname(args.out), exist_ok=True)
        with open(args.out, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
