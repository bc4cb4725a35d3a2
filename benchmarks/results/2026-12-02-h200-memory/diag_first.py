"""First read of a 16 MiB array and first 1 GiB write in a fresh process, with the trace and a profile."""
import cProfile, io, os, pstats, sys, tempfile, time
T0 = time.perf_counter()
import numpy as np, cupy as cp, zarr
from zarr.codecs import ZstdCodec
import gdsstore
what = sys.argv[1]
d = tempfile.mkdtemp()
if what == "read":
    root = os.path.join(d, "s.zarr")
    data = np.round(np.random.default_rng(0).standard_normal((2048, 2048), dtype="f4"), 2)
    zarr.create_array(root, shape=data.shape, chunks=(512, 512), dtype="f4", compressors=[ZstdCodec(level=1)])[:] = data
    cp.zeros(1).sum().get()
    t = time.perf_counter(); pr = cProfile.Profile(); pr.enable()
    with gdsstore.enable_gpu(), gdsstore.trace() as tr:
        x = zarr.open_array(gdsstore.GDSStore(root), mode="r")[:]
        cp.cuda.runtime.deviceSynchronize()
    pr.disable(); dt = time.perf_counter() - t
    assert (x.get() == data).all()
    print(f"first 16 MiB read {dt:.3f} s (since start {time.perf_counter()-T0:.2f})"); print(tr)
    t = time.perf_counter()
    with gdsstore.enable_gpu():
        x = zarr.open_array(gdsstore.GDSStore(root), mode="r")[:]; cp.cuda.runtime.deviceSynchronize()
    print(f"second read {time.perf_counter()-t:.3f} s")
else:
    n = 16384
    data = cp.round(cp.random.default_rng(0).standard_normal((n, n), dtype=cp.float32), 2)
    cp.cuda.runtime.deviceSynchronize()
    root = os.path.join(d, "w.zarr")
    t = time.perf_counter(); pr = cProfile.Profile(); pr.enable()
    with gdsstore.enable_gpu(), gdsstore.trace() as tr:
        z = zarr.create_array(gdsstore.GDSStore(root), shape=data.shape, chunks=(1024, 1024), dtype="f4", compressors=[ZstdCodec(level=3)])
        z[:] = data
        cp.cuda.runtime.deviceSynchronize()
    pr.disable(); dt = time.perf_counter() - t
    print(f"first 1 GiB write {dt:.3f} s"); print(tr)
    t = time.perf_counter()
    with gdsstore.enable_gpu():
        zarr.open_array(gdsstore.GDSStore(root), mode="r+")[:] = data; cp.cuda.runtime.deviceSynchronize()
    print(f"second write {time.perf_counter()-t:.3f} s")
s = io.StringIO(); pstats.Stats(pr, stream=s).sort_stats("cumulative").print_stats(35); print(s.getvalue()[:6000])
