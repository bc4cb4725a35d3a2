"""A fresh process's reads of 1 GiB of 4 MiB zstd chunks at a 1 GiB gpu.memory_budget: whether the first read
(planned at nvCOMP's scratch bound, so split between the CPU and nvCOMP) learns the frames' scratch, and how the
next reads are then planned and how fast they go; then a fresh process at the 4 GiB default for comparison.
Usage: python3 probe_budget_learn.py ROOT BUDGET_BYTES (writes ROOT/c1024-zstd.zarr once)"""

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # benchmarks/
root, budget = Path(sys.argv[1]), int(sys.argv[2])

import os  # noqa: E402

os.environ["GDSSTORE_GPU__MEMORY_BUDGET"] = str(budget)
import zarr  # noqa: E402
from zarr.codecs import BytesCodec, ZstdCodec  # noqa: E402

import gdsstore  # noqa: E402
from gdsstore.gpu import nvcomp_capi  # noqa: E402

path = root / "c1024-zstd.zarr"
if not path.exists():
    from zarr_bench import _data

    ref = _data(int(os.environ.get("PROBE_SIZE", "16384")))
    gdsstore.enable_pipeline()
    z = zarr.create_array(gdsstore.GDSStore(str(path)), shape=ref.shape, chunks=(1024, 1024), dtype="f4",
                          serializer=BytesCodec(), compressors=[ZstdCodec(level=1)])
    z[:] = ref
    print(f"wrote {path}", flush=True)
    sys.exit(0)
import cupy as cp  # noqa: E402

ref_sum = None
with gdsstore.enable_gpu():
    a = zarr.open_array(gdsstore.GDSStore(str(path), read_only=True), mode="r")
    for k in range(4):
        with gdsstore.trace() as tr:
            t = time.perf_counter()
            x = a[:]
            cp.cuda.runtime.deviceSynchronize()
            dt = time.perf_counter() - t
        s = float(x[::97, ::89].sum())
        ref_sum = s if ref_sum is None else ref_sum
        assert s == ref_sum
        routes = sorted({f"{r.op}/{r.route}: {r.reason}"[:150] for r in tr.events if r.op == "decode"})
        print(f"budget {budget >> 20} MiB, read {k}: {x.nbytes / dt / 1e9:.2f} GB/s; ratio seen "
              f"{nvcomp_capi.scratch_ratio('zstd', 4 << 20):.2f}; {routes}", flush=True)
