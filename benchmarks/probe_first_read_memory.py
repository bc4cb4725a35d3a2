"""Where the device memory a first GPU read leaves behind comes from (issue #23: held after the first
16 MiB read <= 32 MiB; measured 66 MiB against zarr ``enable_gpu``'s 14).

In one fresh process, device memory in use (``cudaMemGetInfo``) after each step, as a delta from the
CUDA context with CuPy's first kernel: ``import gdsstore``; one nvCOMP zstd decode of a 64 KiB chunk
(its kernels' module loaded); the first read of a 16 MiB zarr array (512² zstd chunks) through
``GDSStore`` under ``gdsstore.enable_gpu()``; a second read; CuPy's default pools emptied. The same
process again with ``compat_mode="on"`` (never cuFile) shows what cuFile's own state holds.

    source .gpu/prelude.sh; python benchmarks/probe_first_read_memory.py          # both variants
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile

STEPS = r'''
import os, sys, time
import cupy as cp
import numpy as np
MiB = 1 << 20
def used():
    cp.cuda.runtime.deviceSynchronize()
    free, total = cp.cuda.runtime.memGetInfo()
    return total - free
cp.zeros(1).sum().get()
base = used()
rows = []
def step(name):
    rows.append((name, (used() - base) / MiB))
import zarr
from zarr.codecs import ZstdCodec
root = sys.argv[1]
data = np.round(np.random.default_rng(0).standard_normal((2048, 2048), dtype="f4"), 2)
if not os.path.exists(root):
    z = zarr.create_array(root, shape=data.shape, chunks=(512, 512), dtype="f4", compressors=[ZstdCodec(level=1)])
    z[:] = data
import gdsstore
step("import gdsstore")
from gdsstore.gpu import nvcomp
import numcodecs
chunk = numcodecs.Zstd(level=1).encode(data[:128, :128].tobytes())
src = cp.asarray(np.frombuffer(chunk, np.uint8))
out = cp.empty(64 << 10, dtype=cp.uint8)
nvcomp.decode_batch_into("zstd", src, [0], [len(chunk)], out, [0], [64 << 10])
step("one nvCOMP zstd decode (64 KiB)")
del src, out
for label in ("first read (16 MiB)", "second read"):
    t = time.perf_counter()
    with gdsstore.enable_gpu():
        x = zarr.open_array(gdsstore.GDSStore(root), mode="r")[:]
    cp.cuda.runtime.deviceSynchronize()
    dt = time.perf_counter() - t
    step(f"{label}, output alive ({dt:.3f} s)")
    assert (x.get() == data).all()
    del x
    step(f"{label}, output freed")
cp.get_default_memory_pool().free_all_blocks()
cp.get_default_pinned_memory_pool().free_all_blocks()
step("CuPy's default pools emptied")
pool = cp.get_default_memory_pool()
print(f"CuPy default pool: used {pool.used_bytes() / MiB:.1f} MiB, held {pool.total_bytes() / MiB:.1f} MiB")
for name, mib in rows:
    print(f"{mib:8.1f} MiB  {name}")
'''


def main() -> None:
    root = os.path.join(tempfile.mkdtemp(prefix="gdsstore-probe-"), "s.zarr")
    for label, env in (("default", {}), ('compat_mode="on" (never cuFile)', {"GDSSTORE_COMPAT_MODE": "on"})):
        print(f"== {label}: device memory beyond the CUDA context, after each step")
        r = subprocess.run([sys.executable, "-c", STEPS, root], env={**os.environ, **env}, capture_output=True,
                           text=True, timeout=120)
        print(r.stdout + (r.stderr[-3000:] if r.returncode else ""))


if __name__ == "__main__":
    main()
