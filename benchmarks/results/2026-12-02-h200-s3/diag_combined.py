"""Where the combined (one dataset) GPU read of archive_bench differs from h5py."""

import os
import sys
import time

sys.path.insert(0, "benchmarks")
import archive_bench as ab
import cupy as cp
import h5py
import numpy as np

import gdsstore
import gdsstore.archives as ga
from gdsstore.archives import reader as R

root = "/tmp/gdsstore-archive-bench"
os.makedirs(root, exist_ok=True)
paths = ab.make_files(root, 16, 64, "64k")
ref = np.concatenate([h5py.File(p, "r")["t"][:] for p in paths])
g = ga.open_virtual(ab.combined_store(paths))


def check(label, settings=None, sel=...):
    with gdsstore.config.set(settings or {}):
        t0 = time.perf_counter()
        a = g["t"].read(sel, device=True)
        cp.cuda.runtime.deviceSynchronize()
        dt = time.perf_counter() - t0
    h = a.get()
    r = ref[sel]
    bad = np.flatnonzero((h != r).reshape(h.shape[0], -1).any(axis=1))
    print(f"{label}: {dt:.3f}s bad steps {bad.size}/{h.shape[0]} first {bad[:12].tolist()}", flush=True)
    if bad.size:
        s = int(bad[0])
        bb = h[s] != r[s]
        cy, cx = np.nonzero(bb.reshape(4, 128, 4, 128).any(axis=(1, 3)))
        print(
            "   step",
            s,
            "bad chunk tiles",
            list(zip(cy.tolist(), cx.tolist()))[:8],
            "matches another step?",
            [int(k) for k in range(ref.shape[0]) if np.array_equal(h[s], ref[k])][:3],
            flush=True,
        )


check("default")
check("default again")
check("budget 64 GiB (one window)", {"gpu.memory_budget": 64 << 30})
check("budget 256 MiB (many windows)", {"gpu.memory_budget": 256 << 20})
R.WINDOW_BYTES = 4 << 30
check("WINDOW_BYTES 4 GiB, budget 64 GiB (one window)", {"gpu.memory_budget": 64 << 30})
R.WINDOW_BYTES = 256 << 20
orig = R._read_ahead


def seq(windows, land, decode):
    for w in windows:
        decode(land(w))


R._read_ahead = seq
check("no read-ahead, default budget")
check("no read-ahead, 256 MiB")
R._read_ahead = orig
check("first file only via combined", None, np.s_[0:64])
g1 = ga.open_virtual(ab.manifest_store(paths[0]))
with gdsstore.config.set({"gpu.memory_budget": 64 << 20}):
    a = g1["t"].read(..., device=True)
    cp.cuda.runtime.deviceSynchronize()
print("one file, budget 64 MiB: equal", np.array_equal(a.get(), ref[:64]))
with gdsstore.config.set({"archive.read_ahead": False} if False else {}):
    pass
print("host batch combined equal:", np.array_equal(g["t"].read(..., batch=True), ref))
