"""Would two windows decoding at once, each on its own CUDA stream, beat one window (issue #23)? A 1 GiB read
of 4 MiB zstd chunks fits the default budget as one window: its read (about 23 ms on the H200) overlaps
nothing, then nvCOMP decodes all 256 chunks in one call. Split in two halves, the second half's read and
the first half's decode could overlap, in the same memory (both halves' decoded bytes and scratch alive at
once, as in the one window).

A probe, not the pipeline: ``--variant halves`` cuts every one-window read in two (the halves one after
the other, as the pipeline would run them); ``--variant overlap`` also runs each window's processing on a
thread of its own with a non-blocking stream of its own, the next window's processing starting while the
previous one's decode runs. Every read's bytes are checked against the first read's.

    source .gpu/prelude.sh; python benchmarks/probe_overlap.py
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def patch(variant: str) -> None:
    """Cut one-window reads in two; with ``overlap``, process windows on their own threads and streams."""
    import cupy as cp

    from gdsstore.gpu import execute, memory

    windows_of = execute.read_windows

    def read_windows(sizes: Any, chain: Any, device: bool, chunk_bytes: int) -> list[range]:
        got = windows_of(sizes, chain, device, chunk_bytes)
        if variant == "default" or len(got) != 1 or len(got[0]) < 2:
            return got
        half = len(got[0]) // 2
        return [range(0, half), range(half, len(got[0]))]

    execute.read_windows = read_windows  # type: ignore[assignment]
    if variant != "overlap":
        return
    loop = execute.run_windows

    def run_windows(windows: Any, read: Any, process: Any, release: Any, pool: Any = None) -> None:
        if len(windows) < 2:
            return loop(windows, read, process, release, pool)
        errors: list[BaseException] = []

        def on_stream(w: Any, cur: Any) -> None:
            try:
                with cp.cuda.Stream(non_blocking=True) as s:
                    process(w, cur)
                    s.synchronize()
            except BaseException as exc:
                errors.append(exc)
            finally:
                release(cur)

        threads: list[threading.Thread] = []
        for w in windows:
            cur = read(w)
            t = threading.Thread(target=memory.in_callers_allocator(on_stream), args=(w, cur))
            t.start()
            threads.append(t)
        for t in threads:
            t.join()
        if errors:
            raise errors[0]

    execute.run_windows = run_windows  # type: ignore[assignment]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--variant", default="default", choices=("default", "halves", "overlap"))
    ap.add_argument("--reads", type=int, default=5)
    a = ap.parse_args()

    import cupy as cp
    import zarr
    from memory_bench import LAYOUTS, warm, write_data

    import gdsstore

    data = Path(os.path.join(tempfile.gettempdir(), "gdsstore-memory-bench"))
    paths = write_data(data, print)
    warm(data)

    def read(path: str) -> Any:
        with gdsstore.enable_gpu():
            out = zarr.open_array(gdsstore.GDSStore(path), mode="r")[:]
        cp.cuda.runtime.deviceSynchronize()
        return out

    expect = {name: read(paths[name]).get() for name in LAYOUTS}  # before the patch: the reference
    patch(a.variant)
    for name in LAYOUTS:
        read(paths[name])  # warm, and the exact scratch ratio seen
        walls = []
        for _ in range(a.reads):
            t0 = time.perf_counter()
            out = read(paths[name])
            walls.append(time.perf_counter() - t0)
            assert (out.get() == expect[name]).all(), f"{name}: wrong bytes"
            del out
        med = statistics.median(walls)
        print(f"{a.variant:8} {name:24} {(1 << 30) / med / 1e9:6.2f} GB/s  median {med * 1e3:6.1f} ms  "
              f"({' '.join(f'{w * 1e3:.0f}' for w in walls)})")


if __name__ == "__main__":
    main()
