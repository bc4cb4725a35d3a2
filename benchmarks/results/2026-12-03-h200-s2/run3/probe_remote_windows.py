"""Whether a GPU read of uncompressed chunks from S3 gains from being cut into windows, so that the next
window's wave runs while one window is copied to the device and scattered
(``REMOTE_WINDOW_BYTES``: measured with a build that had it, run 3 of
``benchmarks/results/2026-12-03-h200-s2``, and not taken: 64 KiB and 4 MiB chunks read slower, 256 KiB alike). Float32 8192²
arrays in square chunks (64 KiB, 256 KiB, 4 MiB), nginx as a path-style S3 endpoint; interleaved rounds,
medians, every read checked.

    python benchmarks/probe_remote_windows.py --nginx-workers 8 --rounds 5 [--windows 0,128,64]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))
sys.path.insert(0, str(HERE))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--nginx-workers", type=int, default=8)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--windows", default="0,128,64", help="MiB per window (0: as the budget allows)")
    p.add_argument("--chunks", default="128,256,1024", help="chunk edges")
    args = p.parse_args()

    import cupy as cp
    import zarr
    from remote_zarr_bench import NginxS3

    import gdsstore
    from gdsstore.gpu import execute

    tmp = tempfile.mkdtemp(prefix="gdsstore-probe-")  # ours: removed at the end
    srv = NginxS3(tmp, args.nginx_workers)
    src = np.random.default_rng(0).standard_normal((8192, 8192)).astype("float32")
    edges = [int(c) for c in args.chunks.split(",")]
    for c in edges:
        z = zarr.create_array(zarr.storage.LocalStore(os.path.join(srv.root, f"c{c}.zarr")), shape=src.shape,
                              chunks=(c, c), dtype="f4", compressors=None, fill_value=0)  # fmt: skip
        z[:] = src

    def read(c: int) -> Any:
        with gdsstore.enable_gpu():
            store = gdsstore.GDSStore(srv.url(f"c{c}.zarr"), read_only=True, storage_options=srv.gds_options)
            out = zarr.open_array(store, mode="r")[:]
        cp.cuda.get_current_stream().synchronize()
        return out

    variants = [int(w) << 20 for w in args.windows.split(",")]
    times: dict[tuple[int, int], list[float]] = {(c, w): [] for c in edges for w in variants}
    for c in edges:  # warm: kernels, connections, the check
        assert np.array_equal(read(c).get(), src), f"wrong bytes, chunks {c}²"
    for _ in range(args.rounds):
        for c in edges:
            for w in variants:
                execute.REMOTE_WINDOW_BYTES = w
                t0 = time.perf_counter()
                out = read(c)
                times[(c, w)].append(time.perf_counter() - t0)
                del out
    print(f"GB/s, median of {args.rounds} interleaved rounds; nginx as S3, {args.nginx_workers} workers")
    print("| chunks | " + " | ".join("budget's windows" if w == 0 else f"windows of {w >> 20} MiB" for w in variants) + " |")
    print("|---|" + "---:|" * len(variants))
    for c in edges:
        cells = [f"{src.nbytes / statistics.median(times[(c, w)]) / 1e9:.2f}" for w in variants]
        print(f"| {c}² ({c * c * 4 >> 10} KiB) | " + " | ".join(cells) + " |")
    srv.close()
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
