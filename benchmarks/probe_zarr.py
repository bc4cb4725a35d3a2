"""Where a GPU zarr read spends its time (GPU machine): A/B of the staging paths, and one trace.

python benchmarks/probe_zarr.py DATA_DIR [ARRAY ...]   (DATA_DIR: zarr_bench.py's --data directory)

For each array (default: the 4 MiB-chunk arrays and the sharded ones): GB/s with the stored bytes
staged on the GPU through the bounce ring and with pinned host staging + one copy per window
(``gdsstore.gpu.pipeline.DEVICE_STAGING``), alternating, best of 6 each (the first round warms up);
then the trace of one read. First the raw file through ``gdsstore.open`` on each route calibrates
the machine in the same run.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path

import cupy as cp
import zarr

import gdsstore
from gdsstore.gpu import pipeline


def _timed(fn: Callable[[], object]) -> float:
    cp.cuda.runtime.deviceSynchronize()
    t0 = time.perf_counter()
    fn()
    cp.cuda.runtime.deviceSynchronize()
    return time.perf_counter() - t0


def main() -> None:
    root = Path(sys.argv[1])
    names = sys.argv[2:] or [
        "c1024-s0-none.zarr",
        "c1024-s0-zstd.zarr",
        "c256-s4096-none.zarr",
        "c256-s4096-zstd.zarr",
        "c256-s0-none.zarr",
    ]
    raw = root / "raw.bin"
    if raw.exists():
        buf = cp.empty(raw.stat().st_size, dtype=cp.uint8)

        def read_raw() -> None:
            with gdsstore.open(raw) as f:
                f.read(buf)

        for route in ("auto", "on"):  # auto: cuFile (compat mode here); on: the POSIX bounce ring
            with gdsstore.config.set({"compat_mode": route}):
                read_raw()
                best = min(_timed(read_raw) for _ in range(7))
            print(f"raw file, compat_mode={route}: {buf.nbytes / best / 1e9:.2f} GB/s")
    with gdsstore.enable_gpu():
        for name in names:
            if not (root / name).exists():
                continue
            z = zarr.open_array(gdsstore.GDSStore(str(root / name)), mode="r")
            cases = {True: "device staging", False: "host staging"}
            best = dict.fromkeys(cases, float("inf"))
            for _ in range(6):
                for case in cases:
                    pipeline.DEVICE_STAGING = case
                    best[case] = min(best[case], _timed(lambda z=z: z[:]))
            pipeline.DEVICE_STAGING = True
            print(f"\n## {name}: " + ", ".join(f"{cases[c]} {z.nbytes / best[c] / 1e9:.2f}" for c in cases) + " GB/s")
            with gdsstore.trace() as t:
                z[:]
            print(t)


if __name__ == "__main__":
    main()
