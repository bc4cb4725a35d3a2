"""What a GPU read under ``gpu.memory_budget`` allocates at its peak, split by who allocates it (issue #23: at
a 256 MiB budget the 1 GiB reads peaked at 360-434 MiB beyond the output, at 1 GiB at 1.38-1.48 GiB).

One process: a 512 MiB float32 array (8192 x 16384, zstd level 1) per chunk layout written under ``--root``,
one warm-up read (CuPy's and nvCOMP's kernels loaded), then per budget and layout one read whose device
memory is polled every 0.2 ms: ``cudaMemGetInfo`` (everything) and the call's private CuPy pool
(``gdsstore.gpu.memory.CallMemory``: staging, decoded chunks, scatter sources); the rest is nvCOMP's own
scratch and what else allocates outside CuPy. The trace's decode rows give the windows. ``--variant trim``
frees the pool's free blocks after every window (is the excess the pool's fragmentation? It was: the
pipeline does this itself since, :func:`gdsstore.gpu.memory.trim_call_pool`); ``--variant async`` gives each
call CUDA's stream-ordered pool (``cupy.cuda.MemoryAsyncPool``) instead.

    source .gpu/prelude.sh; python benchmarks/probe_budget.py
"""

from __future__ import annotations

import argparse
import os
import tempfile
import threading
import time
from typing import Any

import numpy as np

MiB = 1 << 20
LAYOUTS = {"4 MiB chunks": ((1024, 1024), None), "256 KiB chunks": ((256, 256), None),
           "shards of 256 KiB chunks": ((256, 256), (2048, 4096))}


def _poll(cp: Any, done: threading.Event, low: list[int], pool_top: list[int], pools: list[Any]) -> None:
    """Until ``done``: the least free device memory and the most bytes the calls' private pools held."""
    while not done.is_set():
        low[0] = min(low[0], cp.cuda.runtime.memGetInfo()[0])
        for p in list(pools):
            if p is not None and hasattr(p, "total_bytes"):
                pool_top[0] = max(pool_top[0], p.total_bytes())
        time.sleep(0.0002)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--budgets", default="256,1024,4096", help="MiB")
    ap.add_argument("--variant", default="default", choices=("default", "trim", "async"))
    ap.add_argument("--root", default=os.path.join(tempfile.gettempdir(), "gdsstore-probe-budget"))
    a = ap.parse_args()

    import cupy as cp
    import zarr
    from zarr.codecs import ZstdCodec

    import gdsstore
    from gdsstore.gpu import memory

    pools: list[Any] = []
    init = memory.CallMemory.__init__

    def spy(self: Any, cp_: Any) -> None:
        init(self, cp_)
        if a.variant == "async" and self.pool is not None:
            self.pool = cp.cuda.MemoryAsyncPool()
            self.allocator = self.pool.malloc
        pools.append(self.pool)

    memory.CallMemory.__init__ = spy  # type: ignore[method-assign]
    if a.variant == "trim":
        from gdsstore.gpu import staging

        release = staging.Staged.release

        def trimmed(self: Any) -> None:
            release(self)
            for p in list(pools):
                if p is not None:
                    p.free_all_blocks()

        staging.Staged.release = trimmed  # type: ignore[method-assign]
    data = np.round(np.random.default_rng(0).standard_normal((8192, 16384), dtype="f4"), 2)
    for name, (chunks, shards) in LAYOUTS.items():
        path = os.path.join(a.root, name.replace(" ", "_") + ".zarr")
        if not os.path.exists(path):
            z = zarr.create_array(path, shape=data.shape, chunks=chunks, shards=shards, dtype="f4",
                                  compressors=[ZstdCodec(level=1)])
            z[:] = data

    def read(path: str) -> Any:
        with gdsstore.enable_gpu():
            out = zarr.open_array(gdsstore.GDSStore(path), mode="r")[:]
        cp.cuda.runtime.deviceSynchronize()
        return out

    first = os.path.join(a.root, "256_KiB_chunks.zarr")
    read(first)
    print(f"variant: {a.variant}")
    print(f"{'layout':26} {'budget MiB':>10} {'GB/s':>6} {'peak beyond output':>18} {'call pool peak':>14} "
          f"{'outside the pool':>16} {'windows':>7}")
    for budget in [int(b) * MiB for b in a.budgets.split(",")]:
        for name in LAYOUTS:
            path = os.path.join(a.root, name.replace(" ", "_") + ".zarr")
            cp.get_default_memory_pool().free_all_blocks()
            cp.cuda.runtime.deviceSynchronize()
            free0 = cp.cuda.runtime.memGetInfo()[0]
            low, pool_top = [free0], [0]
            done = threading.Event()
            pools.clear()
            t = threading.Thread(target=_poll, args=(cp, done, low, pool_top, pools))
            t.start()
            t0 = time.perf_counter()
            with gdsstore.config.set({"gpu.memory_budget": budget}), gdsstore.trace() as tr:
                out = read(path)
            dt = time.perf_counter() - t0
            done.set()
            t.join()
            assert (out.get() == data).all(), f"{name}: wrong bytes"
            peak = free0 - low[0] - out.nbytes
            windows = sum(e.route == "gpu-decode" for e in tr.events)
            print(f"{name:26} {budget // MiB:10d} {out.nbytes / dt / 1e9:6.2f} {peak / MiB:18.0f} "
                  f"{pool_top[0] / MiB:14.0f} {(peak - pool_top[0]) / MiB:16.0f} {windows:7d}")
            del out


if __name__ == "__main__":
    main()
