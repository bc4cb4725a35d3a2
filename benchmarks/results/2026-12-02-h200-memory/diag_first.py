"""First read of a 16 MiB array, or first 1 GiB write, in a fresh process: the trace and a profile.

    source .gpu/prelude.sh; python diag_first.py read|write
"""

import cProfile
import io
import os
import pstats
import sys
import tempfile
import time

T0 = time.perf_counter()
import cupy as cp  # noqa: E402
import numpy as np  # noqa: E402
import zarr  # noqa: E402
from zarr.codecs import ZstdCodec  # noqa: E402

import gdsstore  # noqa: E402


def first_read(d: str) -> cProfile.Profile:
    root = os.path.join(d, "s.zarr")
    data = np.round(np.random.default_rng(0).standard_normal((2048, 2048), dtype="f4"), 2)
    z = zarr.create_array(root, shape=data.shape, chunks=(512, 512), dtype="f4", compressors=[ZstdCodec(level=1)])
    z[:] = data
    cp.zeros(1).sum().get()
    t = time.perf_counter()
    pr = cProfile.Profile()
    pr.enable()
    with gdsstore.enable_gpu(), gdsstore.trace() as tr:
        x = zarr.open_array(gdsstore.GDSStore(root), mode="r")[:]
        cp.cuda.runtime.deviceSynchronize()
    pr.disable()
    dt = time.perf_counter() - t
    assert (x.get() == data).all()
    print(f"first 16 MiB read {dt:.3f} s (since start {time.perf_counter() - T0:.2f})")
    print(tr)
    t = time.perf_counter()
    with gdsstore.enable_gpu():
        zarr.open_array(gdsstore.GDSStore(root), mode="r")[:]
        cp.cuda.runtime.deviceSynchronize()
    print(f"second read {time.perf_counter() - t:.3f} s")
    return pr


def first_write(d: str) -> cProfile.Profile:
    n = 16384
    data = cp.round(cp.random.default_rng(0).standard_normal((n, n), dtype=cp.float32), 2)
    cp.cuda.runtime.deviceSynchronize()
    root = os.path.join(d, "w.zarr")
    t = time.perf_counter()
    pr = cProfile.Profile()
    pr.enable()
    with gdsstore.enable_gpu(), gdsstore.trace() as tr:
        z = zarr.create_array(gdsstore.GDSStore(root), shape=data.shape, chunks=(1024, 1024), dtype="f4",
                              compressors=[ZstdCodec(level=3)])
        z[:] = data
        cp.cuda.runtime.deviceSynchronize()
    pr.disable()
    print(f"first 1 GiB write {time.perf_counter() - t:.3f} s")
    print(tr)
    t = time.perf_counter()
    with gdsstore.enable_gpu():
        zarr.open_array(gdsstore.GDSStore(root), mode="r+")[:] = data
        cp.cuda.runtime.deviceSynchronize()
    print(f"second write {time.perf_counter() - t:.3f} s")
    return pr


if __name__ == "__main__":
    pr = (first_read if sys.argv[1] == "read" else first_write)(tempfile.mkdtemp())
    s = io.StringIO()
    pstats.Stats(pr, stream=s).sort_stats("cumulative").print_stats(35)
    print(s.getvalue()[:6000])
