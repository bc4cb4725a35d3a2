"""nvCOMP's zstd decode scratch: the bound (``nvcompBatchedZstdDecompressGetTempSize``, what the pipeline
allocates: about 3.1x the decoded bytes) against the size computed from the frames themselves
(``...GetTempSizeSync``), and the decode's time with each (issue #23: under a device memory budget the
scratch decides how many chunks decode at once, and a 4 MiB zstd chunk takes 45-60 ms whatever the count).

The memory benchmark's arrays (``memory_bench.write_data``: 4 MiB and 256 KiB zstd chunks of 16384²
float32), their chunk files read as they are stored, uploaded once, then per batch size: both sizes, the
Sync call's own time, and the decode's median time with each scratch (bytes checked against numcodecs).

    source .gpu/prelude.sh; python benchmarks/probe_zstd_scratch.py
"""

from __future__ import annotations

import ctypes
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
MiB = 1 << 20


def main() -> None:
    import cupy as cp
    import numcodecs
    from memory_bench import write_data

    from gdsstore.gpu import nvcomp_capi

    paths = write_data(Path(os.path.join(tempfile.gettempdir(), "gdsstore-memory-bench")), print)
    lib = nvcomp_capi.library()
    assert lib is not None
    sync = lib.nvcompBatchedZstdDecompressGetTempSizeSync
    vp, sz = ctypes.c_void_p, ctypes.c_size_t
    sync.argtypes = [vp, vp, sz, sz, ctypes.POINTER(sz), sz, nvcomp_capi._Opts, vp, vp]
    sync.restype = ctypes.c_int
    bound = lib.nvcompBatchedZstdDecompressGetTempSize
    stream = cp.cuda.get_current_stream()
    print(f"{'chunks':>22} {'n':>5} {'decoded MiB':>11} {'bound MiB':>9} {'sync MiB':>8} {'sync ms':>7} "
          f"{'decode ms bound':>15} {'decode ms sync':>14}")
    for name, edge, counts in (("4 MiB zstd chunks", 1024, (16, 64, 256)),
                               ("256 KiB zstd chunks", 256, (64, 1024, 4096))):
        root = Path(paths[name]) / "c"
        files = sorted(p for p in root.rglob("*") if p.is_file())[: max(counts)]
        blobs = [p.read_bytes() for p in files]
        want = [np.frombuffer(numcodecs.Zstd().decode(b), np.uint8) for b in blobs[:4]]
        raw = edge * edge * 4
        for n in counts:
            offs = np.cumsum([0] + [(len(b) + 255) // 256 * 256 for b in blobs[:n]])
            host = np.zeros(int(offs[-1]), np.uint8)
            for k, b in enumerate(blobs[:n]):
                host[offs[k]: offs[k] + len(b)] = np.frombuffer(b, np.uint8)
            src = cp.asarray(host)
            out = cp.empty(n * raw, np.uint8)
            meta = np.empty((4, n), np.uint64)
            meta[0] = np.uint64(int(src.data.ptr)) + offs[:n].astype(np.uint64)
            meta[1] = [len(b) for b in blobs[:n]]
            meta[2] = raw
            meta[3] = np.uint64(int(out.data.ptr)) + np.arange(n, dtype=np.uint64) * np.uint64(raw)
            d = cp.asarray(meta)
            row = d.strides[0]
            base = int(d.data.ptr)
            tb = ctypes.c_size_t(0)
            assert bound(n, raw, nvcomp_capi._Opts(), ctypes.byref(tb), n * raw, vp(stream.ptr)) == 0
            ts = ctypes.c_size_t(0)
            st = cp.zeros(n, cp.int32)
            t0 = time.perf_counter()
            rc = sync(base, base + row, n, raw, ctypes.byref(ts), n * raw, nvcomp_capi._Opts(), int(st.data.ptr),
                      vp(stream.ptr))
            sync_ms = (time.perf_counter() - t0) * 1e3
            assert rc == 0, rc
            times: dict[int, list[float]] = {}
            for temp_bytes in (tb.value, ts.value) * 3:
                temp = cp.empty(max(temp_bytes, 1), cp.uint8)
                got, status = cp.empty(n, cp.uint64), cp.zeros(n, cp.int32)
                out.fill(0)
                stream.synchronize()
                t0 = time.perf_counter()
                assert lib.nvcompBatchedZstdDecompressAsync(
                    base, base + row, base + 2 * row, int(got.data.ptr), n, int(temp.data.ptr), temp_bytes,
                    base + 3 * row, nvcomp_capi._Opts(), int(status.data.ptr), vp(stream.ptr)) == 0
                stream.synchronize()
                times.setdefault(temp_bytes, []).append((time.perf_counter() - t0) * 1e3)
                assert not status.get().any(), f"{name}: decode failed with {temp_bytes} bytes of scratch"
                for k in range(min(n, 4)):
                    assert (out[k * raw: (k + 1) * raw].get() == want[k]).all(), f"{name}: wrong bytes"
                del temp
            med = {k: statistics.median(v) for k, v in times.items()}
            print(f"{name:>22} {n:5d} {n * raw / MiB:11.0f} {tb.value / MiB:9.0f} {ts.value / MiB:8.0f} "
                  f"{sync_ms:7.2f} {med[tb.value]:15.1f} {med[ts.value]:14.1f}")
            del src, out, d


if __name__ == "__main__":
    main()
