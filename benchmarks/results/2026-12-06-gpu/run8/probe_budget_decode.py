"""What bounds the 4 MiB zstd chunks at a 1 GiB gpu.memory_budget: the host's decode rate at 1-16 threads
(numcodecs, the bytes already in memory) and nvCOMP's exact scratch per decoded byte for those chunks.
Usage: python3 probe_budget_decode.py /root/table-data/c1024-s0-zstd.zarr"""

import os
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numcodecs
import numpy as np

root = Path(sys.argv[1])
files = sorted(p for p in root.rglob("*") if p.is_file() and p.parent.name != root.name and "zarr.json" not in p.name)
blobs = [p.read_bytes() for p in files]
size = len(numcodecs.Zstd().decode(blobs[0]))
outs = [np.empty(size, np.uint8) for _ in blobs]
print(f"{len(blobs)} chunks, {sum(map(len, blobs)) >> 20} MiB stored, {size >> 20} MiB each decoded")
z = numcodecs.Zstd()
for threads in (1, 4, 8, 16):
    with ThreadPoolExecutor(threads) as pool:
        times = []
        for _ in range(3):
            t = time.perf_counter()
            list(pool.map(lambda i: z.decode(blobs[i], out=outs[i]), range(len(blobs))))
            times.append(time.perf_counter() - t)
    print(f"host decode, {threads:2d} threads: {len(blobs) * size / statistics.median(times) / 1e9:.2f} GB/s (median of 3)")

os.environ["GDSSTORE_GPU__MEMORY_BUDGET"] = str(1 << 30)
import cupy as cp  # noqa: E402
import zarr  # noqa: E402

import gdsstore  # noqa: E402
from gdsstore.gpu import nvcomp_capi  # noqa: E402

host = zarr.open_array(gdsstore.GDSStore(str(root)), mode="r")
for _ in range(3):
    t, c = time.perf_counter(), time.process_time()
    x = host[:]
    print(f"gdsstore into numpy: {x.nbytes / (time.perf_counter() - t) / 1e9:.2f} GB/s, {time.process_time() - c:.2f} CPU-s")

with gdsstore.enable_gpu():
    a = zarr.open_array(gdsstore.GDSStore(str(root)), mode="r")
    for _ in range(2):
        with gdsstore.trace() as tr:
            t = time.perf_counter()
            x = a[:]
            cp.cuda.runtime.deviceSynchronize()
            print(f"gdsstore 1 GiB budget: {x.nbytes / (time.perf_counter() - t) / 1e9:.2f} GB/s")
    print(tr)
print("exact scratch ratios seen:", nvcomp_capi._seen)
