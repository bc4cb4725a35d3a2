"""What holds gdsstore at about 21 GB/s on 1 GiB arrays of few large uncompressed chunks (64 x 16 MiB, 16 x 64 MiB,
8 x 128 MiB) where kvikio's store reads 34 (run 9), when one raw 1 GiB file reads at 40: the settings that could
(one window instead of two: gpu.memory_budget; larger bounce slots and pieces: bounce_buffer_size, task_size),
interleaved in one process, medians of 5 reads, each read checked; the raw read of the same bytes beside them.
Usage: python3 large_none_knobs.py DIR"""

import os
import statistics
import sys
import time
from pathlib import Path

import cupy as cp
import numpy as np
import zarr

import gdsstore

root = Path(sys.argv[1])
n = int(os.environ.get("N", 16384))  # smaller for a dry run without a GPU
x = np.random.default_rng(0).random((n, n), dtype=np.float32)
shapes = {"64 x 16 MiB": (2048, 2048), "16 x 64 MiB": (4096, 4096), "8 x 128 MiB": (4096, 8192)}
for chunks in shapes.values():
    p = root / f"none-{chunks[0]}x{chunks[1]}.zarr"
    if not p.exists():
        zarr.create_array(str(p), shape=x.shape, chunks=chunks, dtype="f4", compressors=None)[:] = x
raw = root / "raw.bin"
if not raw.exists():
    x.tofile(raw)
want = cp.asarray(x)
variants = {
    "defaults": {},
    "budget 16 GiB (one window)": {"gpu.memory_budget": 16 << 30},
    "slots and pieces 32 MiB": {"bounce_buffer_size": 32 << 20, "task_size": 32 << 20},
    "both": {"gpu.memory_budget": 16 << 30, "bounce_buffer_size": 32 << 20, "task_size": 32 << 20},
}
times: dict[tuple[str, str], list[float]] = {}
traces: dict[tuple[str, str], str] = {}
buf = cp.empty(x.nbytes, cp.uint8)
with gdsstore.enable_gpu():
    for rnd in range(6):
        for name, chunks in shapes.items():
            a = zarr.open_array(gdsstore.GDSStore(str(root / f"none-{chunks[0]}x{chunks[1]}.zarr")), mode="r")
            for v, cfg in variants.items():
                with gdsstore.config.set(cfg), gdsstore.trace() as tr:
                    cp.cuda.runtime.deviceSynchronize()
                    t = time.perf_counter()
                    got = a[:]
                    cp.cuda.runtime.deviceSynchronize()
                    dt = time.perf_counter() - t
                assert bool((got == want).all()), (name, v)
                del got
                if rnd:
                    times.setdefault((name, v), []).append(dt)
                    traces[(name, v)] = "; ".join(f"{e.op} {e.nbytes >> 20} MiB {e.seconds * 1e3:.1f} ms" for e in tr.events)
        with gdsstore.open(str(raw)) as f:
            cp.cuda.runtime.deviceSynchronize()
            t = time.perf_counter()
            f.read(buf)
            cp.cuda.runtime.deviceSynchronize()
            if rnd:
                times.setdefault(("raw file", "defaults"), []).append(time.perf_counter() - t)
for (name, v), ts in times.items():
    print(f"{name:12s} {v:28s} {x.nbytes / statistics.median(ts) / 1e9:6.2f} GB/s  {traces.get((name, v), '')}")
