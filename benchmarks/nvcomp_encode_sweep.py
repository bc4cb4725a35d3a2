"""nvCOMP's batched zstd encode against the number of chunks per call (GPU machine), and two checks.

Encodes the 1 GiB float32 array of ``write_bench.py`` cut into pieces of 16 KiB to 4 MiB, all pieces in
one nvCOMP call (GB/s, the third of three calls), then checks whether numcodecs and nvCOMP decode a chunk
written as several concatenated zstd frames, and times numcodecs' ``Zstd(level=1)`` on 16 CPU threads.
The write path's device window (``gdsstore.gpu.write.WRITE_DEVICE_WINDOW_BYTES``) comes from this.

Usage (GPU machine)::

    python benchmarks/nvcomp_encode_sweep.py
"""

from __future__ import annotations

import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))


def main() -> int:
    import cupy as cp
    import nvidia.nvcomp as nv
    from numcodecs import Zstd
    from write_bench import _data

    src = cp.asarray(_data((16384, 16384)))
    flat = src.view(cp.uint8).reshape(-1)
    sync = cp.cuda.get_current_stream().synchronize
    total = int(flat.size)
    for sub in (16 << 10, 32 << 10, 64 << 10, 128 << 10, 256 << 10, 1 << 20, 4 << 20):
        pieces = [flat[o : o + sub] for o in range(0, total, sub)]
        codec = nv.Codec(algorithm="Zstd", bitstream_kind=nv.BitstreamKind.RAW, uncomp_chunk_size=sub)
        t = 0.0
        for _ in range(3):
            sync()
            t0 = time.perf_counter()
            enc = codec.encode(nv.as_arrays(pieces))
            sync()
            t = time.perf_counter() - t0
        k = min(64, len(pieces))
        sample = sum(int(cp.asarray(enc[i]).size) for i in range(k)) * len(pieces) / k
        print(f"zstd pieces of {sub >> 10:5d} KiB x {len(pieces):6d} in one call: {total / t / 1e9:6.2f} GB/s, "
              f"ratio ~{total / sample:.2f}", flush=True)
    sub = 64 << 10
    chunk = flat[: 4 << 20]
    codec = nv.Codec(algorithm="Zstd", bitstream_kind=nv.BitstreamKind.RAW, uncomp_chunk_size=sub)
    enc = codec.encode(nv.as_arrays([chunk[o : o + sub] for o in range(0, int(chunk.size), sub)]))
    frames = cp.concatenate([cp.asarray(enc[i]).view(cp.uint8).reshape(-1) for i in range(int(chunk.size) // sub)])
    print("numcodecs decodes a chunk of concatenated frames:", Zstd().decode(frames.get().tobytes()) == chunk.get().tobytes())
    try:
        out = nv.Codec(algorithm="Zstd", bitstream_kind=nv.BitstreamKind.RAW).decode(nv.as_arrays([frames]))
        got = cp.asarray(out[0]).view(cp.uint8).reshape(-1)
        print("nvCOMP decodes it:", bool(got.size == chunk.size and (got == chunk).all()), f"({int(got.size)} bytes out)")
    except Exception as exc:
        print("nvCOMP decode error:", type(exc).__name__, exc)
    host = src.get().view(np.uint8).reshape(-1)
    z = Zstd(level=1)
    parts = [host[o : o + (4 << 20)] for o in range(0, host.size, 4 << 20)]
    with ThreadPoolExecutor(16) as ex:
        for _ in range(2):
            t0 = time.perf_counter()
            list(ex.map(z.encode, parts))
            print(f"numcodecs Zstd(1), 16 threads, 4 MiB chunks: {host.size / (time.perf_counter() - t0) / 1e9:.2f} GB/s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
