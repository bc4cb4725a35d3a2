"""Why a GPU zarr read under a 1 GiB budget runs at a third of nvCOMP's rate: (1) does nvCOMP's decode
hold the GIL? (2) a timeline of the windows' stages (read on the pool thread, h2d, nvCOMP, scatter)."""

import sys
import threading
import time
from pathlib import Path

import cupy as cp
import numpy as np
import zarr

sys.path.insert(0, "benchmarks")
import memory_bench as mb
from numcodecs import Zstd

import gdsstore
from gdsstore.gpu import decode as gd
from gdsstore.gpu import execute as ge
from gdsstore.gpu import nvcomp, staging

# (1) GIL: a Python thread counts while nvCOMP decodes 64 x 4 MiB
raw = np.round(np.random.default_rng(0).standard_normal(1 << 20, dtype="f4"), 2)
p = np.frombuffer(Zstd(level=1).encode(raw), np.uint8)
k, n = 64, p.size
pad = (n + 63) // 64 * 64
src = cp.asarray(np.concatenate([np.pad(p, (0, pad - n))] * k))
out = cp.empty(k * (4 << 20), cp.uint8)
args = (
    "zstd",
    src,
    [i * pad for i in range(k)],
    [n] * k,
    out,
    [i * (4 << 20) for i in range(k)],
    [4 << 20] * k,
)
nvcomp.decode_batch_into(*args)
cp.cuda.runtime.deviceSynchronize()
count, stop = [0], [False]


def spin():
    while not stop[0]:
        count[0] += 1


th = threading.Thread(target=spin)
th.start()
time.sleep(0.05)
c0 = count[0]
t = time.perf_counter()
time.sleep(0.03)
idle_rate = (count[0] - c0) / (time.perf_counter() - t)
c0 = count[0]
t = time.perf_counter()
nvcomp.decode_batch_into(*args)
dt = time.perf_counter() - t
busy_rate = (count[0] - c0) / dt
stop[0] = True
th.join()
print(
    f"nvCOMP decode 64 x 4 MiB: {dt * 1e3:.1f} ms; spinning thread {busy_rate / idle_rate:.0%} of its idle rate during the call"
)

# (2) timeline of one 1 GiB read, 4 MiB zstd chunks, budget 1 GiB
paths = mb.write_data(Path("/tmp/mb"), print)
mb.warm(Path("/tmp/mb"))
EV = []


def wrap(mod, name, label):
    f = getattr(mod, name)

    def w(*a, **kw):
        t0 = time.perf_counter()
        try:
            return f(*a, **kw)
        finally:
            EV.append((label, threading.get_ident() % 1000, t0, time.perf_counter()))

    setattr(mod, name, w)


wrap(gd, "_to_device_traced", "h2d")
wrap(gd, "_nvcomp_decode", "nvcomp")
wrap(ge, "scatter", "scatter")
wrap(staging, "stage_local", "read(stage_local)")
wrap(ge, "sync", "sync")
wrap(gd, "decode_on_device", "decode_on_device")
for budget in (1 << 30, 4 << 30):
    gdsstore.config.set({"gpu.memory_budget": budget})
    for _rep in range(3):
        EV.clear()
        with gdsstore.enable_gpu():
            t0 = time.perf_counter()
            x = zarr.open_array(gdsstore.GDSStore(paths["4 MiB zstd chunks"]), mode="r")[:]
            cp.cuda.runtime.deviceSynchronize()
            wall = time.perf_counter() - t0
        del x
    print(
        f"\nbudget {budget >> 20} MiB: wall {wall * 1e3:.0f} ms ({(1 << 30) / wall / 1e9:.2f} GB/s); events (ms from start, thread):"
    )
    for label, tid, a, b in sorted(EV, key=lambda e: e[2])[:40]:
        print(
            f"  {label:18s} t{tid:03d} {1e3 * (a - t0):7.1f} .. {1e3 * (b - t0):7.1f}  ({1e3 * (b - a):6.1f})"
        )
    tot = {}
    for label, _, a, b in EV:
        tot[label] = tot.get(label, 0) + b - a
    print("  totals ms:", {k: round(v * 1e3, 1) for k, v in tot.items()})
