"""Where an archive read's time goes on the GPU: stage times of one 64 MiB file (1024 chunks of 64 KiB,
zlib + shuffle), each stage synchronized, and the adler32 kernel checked against zlib."""

import cProfile
import functools
import io
import pstats
import statistics
import sys
import time
import zlib

import cupy as cp
import numpy as np

sys.path.insert(0, "benchmarks")
import archive_bench as ab

import gdsstore.archives as ga
from gdsstore.archives import codecs as ac
from gdsstore.archives import reader as ar
from gdsstore.gpu import nvcomp

rows = cp.asarray(np.random.default_rng(0).integers(0, 256, (37, 65536 + 3), dtype=np.uint8))
got = ac.adler32_rows(rows).get().tolist()
assert got == [zlib.adler32(r.tobytes()) for r in rows.get()], "adler32 kernel differs from zlib"
print("adler32 kernel == zlib.adler32: ok")

T = {}


def timed(mod, name):
    f = getattr(mod, name)

    @functools.wraps(f)
    def w(*a, **k):
        cp.cuda.runtime.deviceSynchronize()
        t = time.perf_counter()
        try:
            return f(*a, **k)
        finally:
            cp.cuda.runtime.deviceSynchronize()
            T.setdefault(name, []).append(time.perf_counter() - t)

    setattr(mod, name, w)


for mod, name in [
    (ar, "_upload"),
    (ac, "_inflate_rows"),
    (ac, "adler32_rows"),
    (ac, "unshuffle_rows"),
    (ar.VirtualArray, "_land"),
    (ar, "_decode_batched"),
    (nvcomp, "decode_batch_into"),
    (ar.VirtualArray, "_window"),
]:
    timed(mod, name)
paths = ab.make_files("/root/gab", 16, 64)
groups = [ga.open_virtual(ab.manifest_store(p)) for p in paths[:4]]
for g in groups:
    g["t"].read(..., device=True)
T.clear()
walls = []
for _ in range(3):
    for g in groups:
        cp.cuda.runtime.deviceSynchronize()
        t = time.perf_counter()
        g["t"].read(..., device=True)
        cp.cuda.runtime.deviceSynchronize()
        walls.append(time.perf_counter() - t)
print(f"one file (64 MiB): wall median {statistics.median(walls) * 1e3:.1f} ms over {len(walls)} reads")
for k, v in sorted(T.items(), key=lambda kv: -sum(kv[1])):
    print(
        f"  {k:20s} calls {len(v):3d}  median {statistics.median(v) * 1e3:7.2f} ms  total {sum(v) * 1e3:7.1f} ms"
    )
pr = cProfile.Profile()
pr.enable()
for g in groups:
    g["t"].read(..., device=True)
cp.cuda.runtime.deviceSynchronize()
pr.disable()
s = io.StringIO()
pstats.Stats(pr, stream=s).sort_stats("cumulative").print_stats(25)
print(s.getvalue()[:6000])
