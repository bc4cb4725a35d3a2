"""Print nvCOMP's Python API surface and time batched decode variants (GPU machine exploration)."""

from __future__ import annotations

import time

import cupy as cp
import numcodecs
import numpy as np
from nvidia import nvcomp

print("nvcomp", nvcomp.__version__, nvcomp.__cuda_version__)
print("module:", [n for n in dir(nvcomp) if not n.startswith("_")])
for name in ("Codec", "BatchArray", "Array"):
    obj = getattr(nvcomp, name, None)
    if obj is not None:
        print(f"== {name}:", [n for n in dir(obj) if not n.startswith("_")])
        print((obj.__doc__ or "")[:1500])
for meth in ("decode", "encode", "__init__"):
    print(f"== Codec.{meth}", (getattr(nvcomp.Codec, meth).__doc__ or "")[:3000])
for name in ("as_array", "as_arrays"):
    print(f"== {name}", (getattr(nvcomp, name).__doc__ or "")[:1500])
ba = getattr(nvcomp, "BatchArray", None)
if ba is not None:
    for n in dir(ba):
        if not n.startswith("__"):
            print(f"== BatchArray.{n}", (getattr(ba, n).__doc__ or "")[:1200])

rng = np.random.default_rng(0)
chunk = 256 * 1024
n = 512
raw = np.round(rng.standard_normal(n * chunk // 4), 2).astype("f4").view("u1")
for alg, nc in (("zstd", numcodecs.Zstd(level=3)), ("lz4", numcodecs.LZ4())):
    encs = [np.frombuffer(bytes(nc.encode(raw[i * chunk : (i + 1) * chunk])), "u1") for i in range(n)]
    if alg == "lz4":
        encs = [e[4:] for e in encs]
    tot = sum(e.size for e in encs)
    dev = [cp.asarray(e) for e in encs]
    for name in (alg, alg.capitalize(), alg.upper()):
        try:
            codec = nvcomp.Codec(algorithm=name, bitstream_kind=nvcomp.BitstreamKind.RAW)
            print("algorithm name ok:", name)
            break
        except Exception as exc:
            print("algorithm name", name, "->", type(exc).__name__, exc)
    arrs = [nvcomp.as_array(d) for d in dev]
    for _rep in range(3):
        cp.cuda.Device().synchronize()
        t0 = time.perf_counter()
        out = codec.decode(arrs, data_type="|u1")
        xs = [cp.asarray(o) for o in out]
        cp.cuda.Device().synchronize()
        dt = time.perf_counter() - t0
    ok = all(np.array_equal(x.get(), raw[i * chunk : (i + 1) * chunk]) for i, x in enumerate(xs[:8]))
    print(
        f"{alg} list decode {n}x256KiB: {n * chunk / dt / 1e9:.1f} GB/s (ratio {n * chunk / tot:.2f}) ok={ok}"
    )
