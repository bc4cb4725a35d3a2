"""Where a remote zarr read of gdsstore's spends its time on the GPU machine: per row, reads back to back and
with a 1.5 s gap before each (the store idle, as in the interleaved benchmark), each with its trace: the wave's
seconds and requests against the whole read. Usage: python3 probe_remote_phases.py [--host] (CuPy buffers
unless --host)."""

import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # benchmarks/
sys.path.insert(0, str(Path(__file__).resolve().parents[4] / "tests"))
import zarr
from remote_zarr_bench import Nginx, NginxS3, write

import gdsstore

device = "--host" not in sys.argv
rows = [("HTTP 256 KiB", Nginx, (256, 256), False), ("HTTP 256 KiB zstd", Nginx, (256, 256), True),
        ("S3 64 KiB", NginxS3, (128, 128), False)]
only = os.environ.get("PROBE_ROWS")  # a comma-separated choice of the rows' names
for name, kind, chunks, zstd in rows:
    if only and name not in only.split(","):
        continue
    root = tempfile.mkdtemp()
    srv = kind(root, 8)
    local = os.path.join(root, "bench", "a.zarr") if kind is NginxS3 else os.path.join(root, "a.zarr")
    ref = write(local, (8192, 8192), chunks, None, zstd)
    url = srv.url("a.zarr")
    for gap in [float(g) for g in os.environ.get("PROBE_GAPS", "0,0,0,1.5,1.5,1.5").split(",")]:
        time.sleep(gap)
        with gdsstore.enable_gpu(buffers=device), gdsstore.trace() as t:
            t0 = time.perf_counter()
            x = zarr.open_array(gdsstore.GDSStore(url, read_only=True, storage_options=srv.gds_options or None), mode="r")[:]
            if device:
                import cupy

                cupy.cuda.runtime.deviceSynchronize()
            dt = time.perf_counter() - t0
        parts = {}
        for (op, route, _reason), v in t.by_reason().items():
            key = f"{op}/{route}"
            p = parts.setdefault(key, [0, 0, 0.0])
            p[0] += v["ops"]
            p[1] += v["requests"]
            p[2] += v["seconds"]
        phases = ", ".join(f"{k} {o}x {n} req {s * 1e3:.1f} ms" for k, (o, n, s) in sorted(parts.items()))
        print(f"{name}, gap {gap}: {ref.nbytes / dt / 1e9:.2f} GB/s, {dt * 1e3:.1f} ms; {phases}", flush=True)
    srv.close()
