"""Sweep task_size / threads / bounce size for both local routes on one file (GPU machine).

python benchmarks/sweep_raw.py FILE  -> prints a table; used to choose the defaults in gdsstore/_config.py.
"""

from __future__ import annotations

import sys
import time

import cupy as cp

import gdsstore
from gdsstore.engine import cufile


def best(path: str, buf: cp.ndarray, settings: dict[str, object], repeat: int = 4) -> float:
    t_best = float("inf")
    with gdsstore.config.set(settings):
        for _ in range(repeat):
            cp.cuda.runtime.deviceSynchronize()
            t0 = time.perf_counter()
            with gdsstore.open(path) as f:
                f.read(buf)
            cp.cuda.runtime.deviceSynchronize()
            t_best = min(t_best, time.perf_counter() - t0)
    return buf.nbytes / t_best / 1e9


def main() -> None:
    path = sys.argv[1]
    import os

    buf = cp.empty(os.path.getsize(path), dtype=cp.uint8)
    print("driver:", cufile.driver_probe())
    for mode in ("on", "off"):
        for threads in (8, 16, 32):
            for ts in (2, 4, 8, 16, 32):
                for bb in ((4, 16) if mode == "on" else (4,)):
                    s = {"compat_mode": mode, "num_threads": threads, "task_size": ts << 20,
                         "bounce_buffer_size": bb << 20}
                    print(f"compat={mode} threads={threads:2d} task={ts:2d}MiB bounce={bb:2d}MiB "
                          f"{best(path, buf, s):6.2f} GB/s", flush=True)


if __name__ == "__main__":
    main()
