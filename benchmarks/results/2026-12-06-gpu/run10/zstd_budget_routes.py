"""4 MiB zstd chunks (1 GiB float32, 1024² chunks, zstd level 3, the local table's array) into the GPU at a
1 GiB gpu.memory_budget by each route, and into host memory, interleaved in one process, medians of 5 reads,
each checked, with the trace of the last read of each: the route as committed (the split of few chunks per
nvCOMP call), the CPU alone, nvCOMP alone; 4 GiB as committed beside them.
Usage: python3 zstd_budget_routes.py DIR"""

import os
import statistics
import sys
import time
from pathlib import Path

import cupy as cp
import numpy as np
import zarr
from zarr.codecs import ZstdCodec

import gdsstore

root = Path(sys.argv[1])
n = int(os.environ.get("N", 16384))  # smaller for a dry run without a GPU
x = np.linspace(0, 8 * np.pi, n, dtype="f4")
x = np.sin(x)[:, None] * np.cos(x)[None, :] + np.random.default_rng(0).normal(0, 1e-3, (n, n)).astype("f4")
p = root / "c1024-zstd.zarr"
if not p.exists():
    zarr.create_array(str(p), shape=x.shape, chunks=(1024, 1024), dtype="f4", compressors=[ZstdCodec(level=3)])[:] = x
want = cp.asarray(x)
GiB = 1 << 30
variants = {
    "4 GiB, as committed": {"gpu.memory_budget": 4 * GiB},
    "1 GiB, as committed": {"gpu.memory_budget": GiB},
    "1 GiB, CPU alone": {"gpu.memory_budget": GiB, "gpu.host_decode_chunks": 1 << 20, "gpu.split_decode_bytes": 0},
    "1 GiB, nvCOMP alone": {"gpu.memory_budget": GiB, "gpu.host_decode_chunks": 0},
}
times: dict[str, list[float]] = {}
traces: dict[str, str] = {}
h = zarr.open_array(gdsstore.GDSStore(str(p)), mode="r")
with gdsstore.enable_gpu():
    a = zarr.open_array(gdsstore.GDSStore(str(p)), mode="r")  # opened inside: the GPU pipeline's array
for rnd in range(6):
    with gdsstore.enable_gpu():
        for v, cfg in variants.items():
            with gdsstore.config.set(cfg), gdsstore.trace() as tr:
                cp.cuda.runtime.deviceSynchronize()
                t = time.perf_counter()
                got = a[:]
                cp.cuda.runtime.deviceSynchronize()
                dt = time.perf_counter() - t
            assert bool((got == want).all()), v
            del got
            if rnd:
                times.setdefault(v, []).append(dt)
                traces[v] = "; ".join(f"{e.op}/{e.route} {e.nbytes >> 20} MiB {e.seconds * 1e3:.1f} ms" for e in tr.events)
    with gdsstore.trace() as tr:
        t, c = time.perf_counter(), time.process_time()
        host = h[:]
        dt, cpu = time.perf_counter() - t, time.process_time() - c
    assert np.array_equal(host, x)
    if rnd:
        times.setdefault("into numpy", []).append(dt)
        traces["into numpy"] = f"{cpu:.2f} CPU-s; " + "; ".join(
            f"{e.op}/{e.route} {e.nbytes >> 20} MiB {e.seconds * 1e3:.1f} ms" for e in tr.events)
for v, ts in times.items():
    print(f"{v:22s} {x.nbytes / statistics.median(ts) / 1e9:6.2f} GB/s  {traces[v][:600]}")
