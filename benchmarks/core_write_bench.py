"""Many S3 PUTs: botocore (``remote.core=off``) against the native core, interleaved rounds, medians,
client and server CPU-seconds per round.

Workloads: ``N x SIZE`` objects written by one ``S3Backend.put_batch`` call (what a batch of chunk writes
hands the backend): through botocore (one upload per object on the engine pool, ``remote.concurrency`` at
once, and with 16 threads), through the core (one call, ``remote.wave_concurrency`` PUTs in flight, GIL released), and through
the core one object per call from the engine pool (``backend.put`` per object, as the zarr store's remote
sets and ``gdsstore.gpu.write`` publish today). The server is moto's S3 server on loopback
(tests/servers/moto_s3.py), the only server in tests/servers that takes PUTs: a Python server, so its own
CPU (shown per round) can bound every contender. Three objects of every round are read back and compared.

    .venv/bin/python benchmarks/core_write_bench.py --rounds 5 --out /tmp/core_writes.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))

import gdsstore
from gdsstore.engine.backend import backend_for
from gdsstore.engine.pool import map_all

BUCKET = "bench-writes"
BOTO_THREADS = 16  # botocore at more than this machine's remote.concurrency default (its core count)


def _cpu_of(pid: int) -> float:
    """CPU-seconds (user + system) of process ``pid`` so far (Linux /proc)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _contenders(backend: Any, keys: list[str], bufs: list[bytes]) -> dict[str, Callable[[], None]]:
    def batch(mode: str, threads: int | None = None) -> Callable[[], None]:
        cfg: dict[str, Any] = {"remote.core": mode} | ({"remote.concurrency": threads} if threads else {})

        def run() -> None:
            with gdsstore.config.set(cfg):
                out = backend.put_batch(keys, bufs, [False] * len(keys))
            assert not out.errors, next(iter(out.errors.values()))

        return run

    def per_object() -> None:
        s = gdsstore.policy.settings()
        map_all(lambda i: backend.put(keys[i], bufs[i]), range(len(keys)), s.remote_concurrency)

    return {"botocore put_batch": batch("off"), f"botocore put_batch, {BOTO_THREADS} threads": batch("off", BOTO_THREADS),
            "core put_batch": batch("auto"), "core put per object": per_object}


def _check(client: Any, keys: list[str], bufs: list[bytes]) -> None:
    for i in (0, len(keys) // 2, len(keys) - 1):
        got = client.get_object(Bucket=BUCKET, Key=keys[i])["Body"].read()
        assert got == bufs[i], f"wrong bytes in {keys[i]}"


def bench(n: int, size: int, rounds: int, moto: Any, client: Any) -> list[dict[str, Any]]:
    rng = np.random.default_rng(n)
    opts = moto.storage_options
    backend = backend_for(f"s3://{BUCKET}", opts)
    rows: dict[str, list[tuple[float, float, float]]] = {}
    for r in range(rounds):
        # Fresh bytes per round: a store that dedups or caches cannot make a round cheap.
        bufs = [rng.integers(0, 256, size, dtype=np.uint8).tobytes() for _ in range(n)]
        keys = [f"w{n}x{size}/{i}" for i in range(n)]
        names = list(_contenders(backend, keys, bufs))
        order = names[r % len(names):] + names[: r % len(names)]  # rotate who goes first
        for name in order:
            run = _contenders(backend, keys, bufs)[name]
            srv0, cpu0, t0 = _cpu_of(moto._proc.pid), time.process_time(), time.perf_counter()
            run()
            wall = time.perf_counter() - t0
            rows.setdefault(name, []).append((wall, time.process_time() - cpu0, _cpu_of(moto._proc.pid) - srv0))
            _check(client, keys, bufs)
    out = []
    for name, vals in rows.items():
        wall = statistics.median(v[0] for v in vals)
        out.append({
            "workload": f"{n} x {size >> 10} KiB", "contender": name, "median_s": wall,
            "objects_per_s": n / wall, "MB_per_s": n * size / wall / 1e6,
            "client_cpu_s": statistics.median(v[1] for v in vals),
            "server_cpu_s": statistics.median(v[2] for v in vals), "rounds": [v[0] for v in vals],
        })
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--loads", default="1024x65536,16x8388608", help="comma-separated NxSIZE (bytes)")
    p.add_argument("--out", default=None, help="write the rows as JSON here")
    args = p.parse_args()
    import botocore.session
    from servers.moto_s3 import MotoServer

    moto = MotoServer()
    try:
        o = moto.storage_options
        client = botocore.session.get_session().create_client(
            "s3", region_name="us-east-1", endpoint_url=o["endpoint_url"],
            aws_access_key_id=o["key"], aws_secret_access_key=o["secret"])
        client.create_bucket(Bucket=BUCKET)
        rows = []
        for load in args.loads.split(","):
            n, size = (int(x) for x in load.split("x"))
            rows += bench(n, size, args.rounds, moto, client)
    finally:
        moto.close()
    s = gdsstore.policy.settings()
    print(f"{platform.node()}, {os.cpu_count()} cores; remote.concurrency {s.remote_concurrency}, "
          f"remote.wave_concurrency {s.remote_wave_concurrency}; medians of {args.rounds} interleaved rounds")
    print("| workload | contender | median s | objects/s | MB/s | client CPU-s | moto CPU-s |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['workload']} | {r['contender']} | {r['median_s']:.2f} | {r['objects_per_s']:.0f} | "
              f"{r['MB_per_s']:.1f} | {r['client_cpu_s']:.2f} | {r['server_cpu_s']:.2f} |")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
