"""The core's wave alone, repeated for perf: 4,096 objects of 16 KiB from nginx (2 workers) on loopback through
``core.read_table`` into one buffer, ``N`` waves (default 20) after one not counted.

    perf record -F 2999 -o perf.data .venv/bin/python benchmarks/results/2026-12-06-cpu/s2_core_wave_perf.py 20
    perf report -i perf.data --sort comm,dso --stdio
"""

from __future__ import annotations

import os
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "tests"))

from servers.nginx import NginxServer

from gdsstore.engine.remote import core
from gdsstore.engine.remote.retry import RetryPolicy

N, SIZE = 4096, 16 << 10


def main() -> None:
    waves = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    root = tempfile.mkdtemp()
    os.chmod(root, 0o755)
    os.makedirs(f"{root}/o")
    for i in range(N):
        with open(f"{root}/o/{i}", "wb") as f:
            f.write(os.urandom(SIZE))
    srv = NginxServer(root, workers=2, tcp_nopush=False)
    try:
        base = srv.url("")
        store = core.http_store(base.rstrip("/"), connect_timeout=5)
        table = core.PieceTable([f"o/{i}" for i in range(N)], np.zeros(N, np.int64), np.full(N, -1, np.int64),
                                np.full(N, SIZE, np.int64), np.arange(N, dtype=np.int64) * SIZE,
                                np.full(N, SIZE, np.int64))
        buf = np.empty(N * SIZE, np.uint8)
        retry = RetryPolicy(3, (), 0.0, 0.0)
        core.read_table(store, base, table, buf, retry=retry, concurrency=256, timeout=30)
        t0, c0 = time.perf_counter(), time.process_time()
        for _ in range(waves):
            assert not core.read_table(store, base, table, buf, retry=retry, concurrency=256, timeout=30).failed
        print(f"s per wave {(time.perf_counter() - t0) / waves:.3f}, CPU-s per wave {(time.process_time() - c0) / waves:.3f}")
    finally:
        srv.close()


if __name__ == "__main__":
    main()
