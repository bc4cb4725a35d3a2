"""A corrupt zstd payload through nvCOMP: the C API binding vs the Python API (each in its own process),
and a pipeline read checked byte for byte under the C API."""

import subprocess
import sys

CODE = r"""
import sys, numpy as np, cupy as cp
from numcodecs import Zstd
from gdsstore.gpu import nvcomp, nvcomp_capi
if sys.argv[1] == "python":
    nvcomp_capi.library.cache_clear(); nvcomp_capi.library = lambda: None
raws = [bytes(range(256)) * 64] * 3
p = [bytes(Zstd(level=1).encode(r)) for r in raws]
p[1] = p[1][:10] + b"\xff" * 20 + p[1][30:]
offs, at = [], 0
for x in p:
    offs.append(at); at += -(-len(x) // 256) * 256
host = np.zeros(at, np.uint8)
for o, x in zip(offs, p):
    host[o:o + len(x)] = np.frombuffer(x, np.uint8)
out = cp.zeros(3 * 16384, cp.uint8)
try:
    nvcomp.decode_batch_into("zstd", cp.asarray(host), offs, [len(x) for x in p], out, [0, 16384, 32768], [16384] * 3)
    print(sys.argv[1], "no error raised")
except Exception as e:
    print(sys.argv[1], "raised", type(e).__name__, str(e)[:150])
try:
    cp.zeros(4).sum().get(); print(sys.argv[1], "context usable after")
except Exception as e:
    print(sys.argv[1], "context broken after:", type(e).__name__)
"""
for mode in ("python", "capi"):
    r = subprocess.run([sys.executable, "-c", CODE, mode], capture_output=True, text=True, timeout=60)
    print((r.stdout + r.stderr[-300:]).strip())
READ = r"""
import numpy as np, cupy as cp, zarr, tempfile, gdsstore
from zarr.codecs import ZstdCodec
d = tempfile.mkdtemp()
data = np.round(np.random.default_rng(0).standard_normal((4096, 4096), dtype="f4"), 2)
for chunks in ((256, 256), (1024, 1024)):
    z = zarr.create_array(d + f"/a{chunks[0]}.zarr", shape=data.shape, chunks=chunks, dtype="f4", compressors=[ZstdCodec(level=1)])
    z[:] = data
    with gdsstore.enable_gpu(), gdsstore.trace() as t:
        x = zarr.open_array(gdsstore.GDSStore(d + f"/a{chunks[0]}.zarr"), mode="r")[:]
    print(chunks, "equal:", bool((x.get() == data).all()), [r for r in t.routes])
"""
r = subprocess.run([sys.executable, "-c", READ], capture_output=True, text=True, timeout=90)
print((r.stdout + r.stderr[-500:]).strip())
