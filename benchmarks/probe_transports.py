"""Transport A/B for many small objects (GPU machine): how fast can each client fetch a zarr array's chunks?

nginx (``--workers`` processes, ``tcp_nopush off``, loopback) serves ``--small`` objects of 256 KiB and
``--large`` objects of 4 MiB; each client fetches every object of a set into host memory, in interleaved
rounds (median of ``--rounds``), and every byte is checked against the source. Clients:

- gdsstore's wave (``Backend.get_many``, sizes known) through the native core (``remote.core="auto"``)
  and through the pure-Python transport (``remote.core="off"``);
- obstore ``get_async`` for every object in one ``asyncio.gather``;
- kvikio ``RemoteFile.open_http(url, nbytes=size)`` + ``pread`` futures (libcurl pool, 16 threads);
- tensorstore's ``http`` kvstore, every read issued then awaited (C++, libcurl).

Usage (GPU machine)::

    PATH=$PWD/.gpu/bin:$PATH python benchmarks/probe_transports.py
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))

Fetch = Callable[[list[str], list[int]], list[Any]]


def gds_wave(url: str, transport: str) -> Fetch:
    """The wave (``Backend.get_many``) with sizes known, through the native core (``"core"``) or the
    pure-Python transport (``"python"``)."""
    import gdsstore
    from gdsstore.engine.backend import backend_for

    backend = backend_for(url, read_only=True)
    opts = {"remote.core": "auto" if transport == "core" else "off"}

    def run(keys: list[str], sizes: list[int]) -> list[Any]:
        with gdsstore.config.set(opts):
            w = backend.get_many(keys, None, lambda n: (np.empty(n, np.uint8), None), expect=np.array(sizes))
        return [w.view(i) for i in range(len(keys))]

    return run


def obstore_gather(url: str) -> Fetch:
    import obstore
    from obstore.store import HTTPStore

    store = HTTPStore.from_url(url, client_options={"allow_http": True})
    loop = asyncio.new_event_loop()

    async def all_of(keys: list[str]) -> list[Any]:
        async def one(k: str) -> Any:
            r = await obstore.get_async(store, k)
            return np.frombuffer(await r.bytes_async(), np.uint8)

        return await asyncio.gather(*[one(k) for k in keys])

    return lambda keys, sizes: loop.run_until_complete(all_of(keys))


def kvikio_reads(url: str, openers: int | None = None) -> Fetch | str:
    """kvikio ``RemoteFile`` reads on its 16-thread pool. ``openers`` None: the sizes are given
    (``open_http(url, nbytes=...)``, no request); else each size is asked of the server (a HEAD, in C++),
    the opens spread over ``openers`` Python threads."""
    try:
        import kvikio
        import kvikio.defaults
    except Exception as exc:
        return f"kvikio not importable ({type(exc).__name__})"
    from concurrent.futures import ThreadPoolExecutor

    kvikio.defaults.set({"num_threads": 16})
    ex = ThreadPoolExecutor(openers or 1)

    def run(keys: list[str], sizes: list[int]) -> list[Any]:
        outs = [np.empty(n, np.uint8) for n in sizes]
        if openers is None:
            files = [kvikio.RemoteFile.open_http(f"{url}/{k}", nbytes=n) for k, n in zip(keys, sizes)]
        else:
            files = list(ex.map(lambda k: kvikio.RemoteFile.open_http(f"{url}/{k}"), keys))
            assert [f.nbytes() for f in files] == sizes
        futs = [f.pread(o) for f, o in zip(files, outs)]
        for fu in futs:
            fu.get()
        for f in files:
            f.close()
        return outs

    return run


def tensorstore_reads(url: str) -> Fetch | str:
    try:
        import tensorstore as ts
    except Exception as exc:
        return f"tensorstore not importable ({type(exc).__name__})"
    kv = ts.KvStore.open({"driver": "http", "base_url": url}).result()

    def run(keys: list[str], sizes: list[int]) -> list[Any]:
        futs = [kv.read(k) for k in keys]
        return [np.frombuffer(f.result().value, np.uint8) for f in futs]

    return run


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--small", type=int, default=1024)
    ap.add_argument("--large", type=int, default=256)
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    import remote_bench

    root = tempfile.mkdtemp(prefix="probe-transports-")
    rng = np.random.default_rng(0)
    sets: dict[str, tuple[list[str], list[int], list[np.ndarray]]] = {}
    for name, count, size in (("1,024 x 256 KiB", args.small, 256 << 10), ("256 x 4 MiB", args.large, 4 << 20)):
        keys, srcs = [], []
        for i in range(count):
            k = f"{size}/c{i}"
            os.makedirs(os.path.join(root, str(size)), exist_ok=True)
            data = rng.integers(0, 255, size, dtype=np.uint8)
            data.tofile(os.path.join(root, k))
            keys.append(k)
            srcs.append(data)
        sets[name] = (keys, [size] * count, srcs)
    try:
        with remote_bench.nginx_server(root, args.workers) as url:
            clients: dict[str, Fetch | str] = {
                "gdsstore wave, native core": gds_wave(url, "core"),
                "gdsstore wave, pure-Python": gds_wave(url, "python"),
                "obstore get_async gather": obstore_gather(url),
                "kvikio RemoteFile pread, 16 threads": kvikio_reads(url),
                "kvikio open_http (HEAD) + pread, 1 opener": kvikio_reads(url, 1),
                "kvikio open_http (HEAD) + pread, 16 openers": kvikio_reads(url, 16),
                "tensorstore http kvstore": tensorstore_reads(url),
            }
            for name, (keys, sizes, srcs) in sets.items():
                total = sum(sizes)
                times: dict[str, list[float]] = {c: [] for c, f in clients.items() if not isinstance(f, str)}
                for _ in range(args.rounds + 1):  # the first round warms connections
                    for c in times:
                        fetch = clients[c]
                        assert not isinstance(fetch, str)
                        t0 = time.perf_counter()
                        got = fetch(keys, sizes)
                        times[c].append(time.perf_counter() - t0)
                        bad = [k for k, g, s in zip(keys, got, srcs) if not np.array_equal(np.asarray(g), s)]
                        assert not bad, f"{c}: wrong bytes for {bad[:3]}"
                print(f"== {name} (nginx, {args.workers} workers, tcp_nopush off; GB/s, median of {args.rounds})")
                for c, ts_ in times.items():
                    med = statistics.median(ts_[1:])
                    print(f"  {c:42s} {total / med / 1e9:7.2f}   ({len(keys) / med:8.0f} objects/s)")
                for c, f in clients.items():
                    if isinstance(f, str):
                        print(f"  {c:42s} skipped: {f}")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
