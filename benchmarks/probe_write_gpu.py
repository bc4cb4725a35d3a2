"""Where a GPU zstd write spends its time (GPU machine): stage timings and a profile.

For the 1 GiB float32 array of ``write_bench.py`` (16384², 1024² chunks, zstd level 1) and its sharded
variant (4096² shards of 256² chunks), prints:

- nvCOMP's batched zstd encode alone (one call per 64-chunk window, as the write path makes it), the
  compression ratio, the device-to-host copy of the encoded bytes, and 16 threads writing the encoded
  objects as files (tmp + rename), each timed alone;
- the whole ``GDSStore`` + ``enable_gpu`` write, timed, then once more under ``cProfile`` (top functions
  by cumulative and by own time) with gdsstore's trace rows.

Usage (GPU machine, from the project root)::

    python benchmarks/probe_write_gpu.py [--size 16384]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import shutil
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

sys.path.insert(0, os.path.dirname(__file__))


def _t(fn: Any, sync: Any) -> float:
    sync()
    t0 = time.perf_counter()
    fn()
    sync()
    return time.perf_counter() - t0


def stages(src: Any, chunk: int, log: Any) -> None:
    import cupy as cp
    import numpy as np

    from gdsstore.gpu import nvcomp

    sync = cp.cuda.get_current_stream().synchronize
    n = src.shape[0] // chunk
    raws = [cp.ascontiguousarray(src[i * chunk : (i + 1) * chunk, j * chunk : (j + 1) * chunk]).view(cp.uint8).reshape(-1)
            for i in range(n) for j in range(n)]
    per_window = max(1, (256 << 20) // int(raws[0].size))
    windows = [raws[k : k + per_window] for k in range(0, len(raws), per_window)]
    enc: list[Any] = []
    nvcomp.encode_batch("zstd", windows[0])  # warm: codec objects, nvCOMP scratch
    for rep in range(2):
        enc.clear()
        t = _t(lambda: [enc.extend(nvcomp.encode_batch("zstd", w)) for w in windows], sync)
        log(f"  nvCOMP zstd encode, {len(windows)} calls of {per_window} chunks: {t:.3f} s = {src.nbytes / t / 1e9:.2f} GB/s (rep {rep})")
    total = sum(int(e.size) for e in enc)
    log(f"  ratio {src.nbytes / total:.2f} ({total / 2**20:.0f} MiB encoded of {src.nbytes / 2**20:.0f} MiB)")
    t = _t(lambda: cp.concatenate(enc), sync)
    log(f"  pack {len(enc)} encoded chunks into one device buffer (cp.concatenate): {t * 1e3:.1f} ms")
    packed = cp.concatenate(enc)
    host = cp.cuda.alloc_pinned_memory(total)
    hv = np.frombuffer(host, dtype=np.uint8, count=total)
    t = _t(lambda: packed.get(out=hv), sync)
    log(f"  D2H {total / 2**20:.0f} MiB into pinned: {t * 1e3:.1f} ms = {total / t / 1e9:.1f} GB/s")
    offs = np.concatenate([[0], np.cumsum([int(e.size) for e in enc])])
    tmp = tempfile.mkdtemp(prefix="probe-write-", dir=os.environ.get("TMPDIR", "/tmp"))

    def put(i: int) -> None:
        p = os.path.join(tmp, f"c{i}")
        with open(p + ".tmp", "wb") as f:
            f.write(memoryview(hv[offs[i] : offs[i + 1]]))
        os.replace(p + ".tmp", p)

    with ThreadPoolExecutor(16) as ex:
        for rep in range(2):
            t = _t(lambda: list(ex.map(put, range(len(enc)))), sync)
            log(f"  16 threads write {len(enc)} files (tmp+rename): {t * 1e3:.1f} ms = {total / t / 1e9:.2f} GB/s of encoded, "
                f"{src.nbytes / t / 1e9:.2f} GB/s of raw (rep {rep})")
    shutil.rmtree(tmp, ignore_errors=True)


def whole(src: Any, chunk: int, shard: int | None, log: Any) -> None:
    import cupy as cp
    import zarr
    from zarr.codecs import ZstdCodec

    import gdsstore
    from gdsstore import GDSStore, enable_gpu

    sync = cp.cuda.get_current_stream().synchronize
    tmp = tempfile.mkdtemp(prefix="probe-write-", dir=os.environ.get("TMPDIR", "/tmp"))

    def write(k: int) -> None:
        with enable_gpu():
            a = zarr.create_array(GDSStore(os.path.join(tmp, f"a{k}.zarr")), shape=src.shape, dtype="f4",
                                  chunks=(chunk, chunk), shards=(shard, shard) if shard else None,
                                  compressors=[ZstdCodec(level=1)])
            a[...] = src

    try:
        for k in range(2):
            t = _t(lambda k=k: write(k), sync)
            log(f"  whole write: {t:.3f} s = {src.nbytes / t / 1e9:.2f} GB/s (rep {k})")
        prof = cProfile.Profile()
        with gdsstore.trace() as tr:
            prof.enable()
            t = _t(lambda: write(9), sync)
            prof.disable()
        log(f"  profiled write: {t:.3f} s")
        log(str(tr))
        for key in ("cumulative", "tottime"):
            s = io.StringIO()
            pstats.Stats(prof, stream=s).sort_stats(key).print_stats(28)
            log(s.getvalue())
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--size", type=int, default=16384)
    args = ap.parse_args()
    import cupy as cp
    from write_bench import _data

    def log(msg: str) -> None:
        print(msg, flush=True)

    src = cp.asarray(_data((args.size, args.size)))
    log("== chunks 1024², zstd: stages")
    stages(src, 1024, log)
    log("== chunks 1024², zstd: whole write")
    whole(src, 1024, None, log)
    log("== shards 4096² of 256², zstd: stages (inner chunks)")
    stages(src, 256, log)
    log("== shards 4096² of 256², zstd: whole write")
    whole(src, 256, 4096, log)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
