"""Where a GPU zarr read spends its time (GPU machine): the trace and a profile of one ``z[:]``.

python benchmarks/probe_zarr.py DATA_DIR [ARRAY ...]   (DATA_DIR: zarr_bench.py's --data directory)

For each array (default: the 4 MiB-chunk arrays): best-of-5 GB/s, the trace of one read, and the
functions that take the most time in it (cProfile, by own time).
"""

from __future__ import annotations

import cProfile
import pstats
import sys
import time
from pathlib import Path

import cupy as cp
import zarr

import gdsstore


def main() -> None:
    root = Path(sys.argv[1])
    names = sys.argv[2:] or ["c1024-s0-none.zarr", "c1024-s0-zstd.zarr", "c256-s4096-none.zarr"]
    with gdsstore.enable_gpu():
        for name in names:
            z = zarr.open_array(gdsstore.GDSStore(str(root / name)), mode="r")
            z[:]
            best = float("inf")
            for _ in range(5):
                cp.cuda.runtime.deviceSynchronize()
                t0 = time.perf_counter()
                z[:]
                cp.cuda.runtime.deviceSynchronize()
                best = min(best, time.perf_counter() - t0)
            print(f"\n## {name}: {z.nbytes / best / 1e9:.2f} GB/s (best of 5)")
            with gdsstore.trace() as t:
                z[:]
            print(t)
            prof = cProfile.Profile()
            prof.enable()
            z[:]
            cp.cuda.runtime.deviceSynchronize()
            prof.disable()
            pstats.Stats(prof).sort_stats("tottime").print_stats(14)


if __name__ == "__main__":
    main()
