"""Where a 1 GiB GPU read / write spends its time, per setting: the trace per stage (run on the H200:
``source .gpu/prelude.sh; python gpu_pipeline_diag.py``). Written against the memory-budget attempt; on
a tree without ``gdsstore.gpu.memory.budget_stats`` its stats are ``null``."""
import collections
import json
import os
import time

import cupy as cp
import numpy as np
import zarr

import gdsstore

try:
    from gdsstore.gpu import memory
except ImportError:
    memory = None
root = "/tmp/diag"
os.makedirs(root, exist_ok=True)
n = 16384
src = cp.asarray(np.random.default_rng(0).standard_normal((n, n), dtype="f4").round(2))
def summarize(t):
    acc = collections.defaultdict(lambda: [0, 0.0, 0])
    for e in t.events:
        k = (e.op, e.route)
        acc[k][0] += 1
        acc[k][1] += e.seconds
        acc[k][2] += e.nbytes
    return {f"{k[0]}/{k[1]}": (v[0], round(v[1], 3), v[2] >> 20) for k, v in sorted(acc.items(), key=lambda kv: -kv[1][1])[:12]}
for setting in [{}, {"gpu.memory_budget": 8 << 30}, {"gpu.memory_budget": 8 << 30, "pinned_memory_limit": 8 << 30}]:
    with gdsstore.config.set(setting):
        for chunks in [(1024, 1024), (256, 256)]:
            path = f"{root}/a{chunks[0]}.zarr"
            with gdsstore.enable_gpu():
                t0 = time.perf_counter()
                with gdsstore.trace() as tw:
                    z = zarr.create_array(gdsstore.GDSStore(path), shape=(n, n), chunks=chunks, dtype="f4",
                                          compressors=[zarr.codecs.ZstdCodec(level=1)], overwrite=True)
                    z[:] = src
                cp.cuda.runtime.deviceSynchronize()
                tw_s = time.perf_counter() - t0
                ts = []
                for _i in range(3):
                    t0 = time.perf_counter()
                    with gdsstore.trace() as tr:
                        x = zarr.open_array(gdsstore.GDSStore(path, read_only=True), mode="r")[:]
                    cp.cuda.runtime.deviceSynchronize()
                    ts.append(time.perf_counter() - t0)
                assert bool((x == src).all())
            print(json.dumps({"setting": setting, "chunks": chunks, "write_s": round(tw_s, 3), "read_s": [round(t, 3) for t in ts],
                              "stats": ({k: v for k, v in memory.budget_stats().items() if not isinstance(v, dict)} if memory and hasattr(memory, "budget_stats") else None)}), flush=True)
            print("  write:", summarize(tw), flush=True)
            print("  read:", summarize(tr), flush=True)
