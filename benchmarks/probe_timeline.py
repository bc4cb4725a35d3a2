"""Where the wall time of a 1 GiB GPU read goes, window by window (issue #23: at the default 4 GiB budget
the 4 MiB zstd row read at 6.8 GB/s where one unbounded window read 15.6; nvCOMP's decode of 128 such
chunks alone takes about 28 ms).

One process, the memory benchmark's arrays (``memory_bench.write_data``), page cache warm, one warm-up read
per layout, then per budget ``--reads`` timed reads. The last read of each cell is timed span by span:
every window's read (on the read-ahead thread) and processing, nvCOMP's decode calls, the call pool's
trims, the allocations that went to the device (the call pool's ``malloc`` calls that took over 0.1 ms,
summed), and the call's exit (synchronize, free). ``--variant async`` gives each call CUDA's stream-ordered
pool instead of a private CuPy pool.

    source .gpu/prelude.sh; python benchmarks/probe_timeline.py [--budgets 4096,1024] [--variant async]
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

MiB = 1 << 20


class Timeline:
    """Spans (label, thread, start, end) of one read, relative to its start."""

    def __init__(self) -> None:
        self.t0 = time.perf_counter()
        self.spans: list[tuple[str, str, float, float]] = []
        self.malloc_s = 0.0
        self.mallocs = 0
        self.lock = threading.Lock()

    def add(self, label: str, t0: float, t1: float) -> None:
        with self.lock:
            self.spans.append((label, threading.current_thread().name[:14], t0 - self.t0, t1 - self.t0))

    def timed(self, label: str, fn: Any) -> Any:
        def run(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.add(label, t0, time.perf_counter())
        return run

    def table(self, wall: float) -> str:
        rows = [f"  {'span':28} {'thread':14} {'start ms':>9} {'end ms':>9} {'ms':>8}"]
        for label, th, a, b in sorted(self.spans, key=lambda s: s[2]):
            rows.append(f"  {label:28} {th:14} {a * 1e3:9.1f} {b * 1e3:9.1f} {(b - a) * 1e3:8.1f}")
        rows.append(f"  slow mallocs (> 0.1 ms): {self.mallocs}, {self.malloc_s * 1e3:.1f} ms; wall {wall * 1e3:.1f} ms")
        return "\n".join(rows)


CURRENT: list[Timeline | None] = [None]


def instrument(variant: str) -> None:
    """Wrap the pipeline's window loop, nvCOMP's decode, the pool trim and the call's memory."""
    import cupy as cp

    from gdsstore.archives import reader
    from gdsstore.gpu import execute, memory, nvcomp_capi

    loop = execute.run_windows

    def run_windows(windows: Any, read: Any, process: Any, release: Any, pool: Any = None) -> None:
        tl = CURRENT[0]
        if tl is None:
            return loop(windows, read, process, release, pool)
        index = {id(w): k for k, w in enumerate(windows)}

        def r(w: Any) -> Any:
            return tl.timed(f"read w{index.get(id(w), '?')}", read)(w)

        def p(w: Any, cur: Any) -> None:
            tl.timed(f"process w{index.get(id(w), '?')}", process)(w, cur)

        return loop(windows, r, p, release, pool)

    execute.run_windows = run_windows  # type: ignore[assignment]
    reader.run_windows = run_windows  # type: ignore[assignment]
    decode = nvcomp_capi.decode_into

    def decode_into(fmt: str, src: Any, src_offsets: list[int], *rest: Any) -> Any:
        tl = CURRENT[0]
        fn = decode if tl is None else tl.timed(f"  nvCOMP {len(src_offsets)} chunks", decode)
        return fn(fmt, src, src_offsets, *rest)

    nvcomp_capi.decode_into = decode_into  # type: ignore[assignment]
    trim = memory.trim_call_pool

    def trim_call_pool() -> None:
        tl = CURRENT[0]
        (trim if tl is None else tl.timed("  trim", trim))()

    memory.trim_call_pool = trim_call_pool  # type: ignore[assignment]
    execute.trim_call_pool = trim_call_pool  # type: ignore[attr-defined]
    init, leave = memory.CallMemory.__init__, memory.CallMemory.__exit__

    def spy(self: Any, cp_: Any) -> None:
        init(self, cp_)
        if variant == "async" and self.pool is not None:
            self.pool = cp.cuda.MemoryAsyncPool()
        base = self.pool.malloc if self.pool is not None else self.allocator

        def malloc(n: int) -> Any:
            t0 = time.perf_counter()
            m = base(n)
            dt = time.perf_counter() - t0
            tl = CURRENT[0]
            if tl is not None and dt > 1e-4:
                with tl.lock:
                    tl.malloc_s += dt
                    tl.mallocs += 1
            return m

        self.allocator = malloc

    def exit_(self: Any, *exc: object) -> None:
        tl = CURRENT[0]
        (leave if tl is None else tl.timed("call exit", leave))(self, *exc)

    memory.CallMemory.__init__ = spy  # type: ignore[method-assign]
    memory.CallMemory.__exit__ = exit_  # type: ignore[method-assign]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--budgets", default="4096,1024", help="MiB")
    ap.add_argument("--reads", type=int, default=3)
    ap.add_argument("--variant", default="default", choices=("default", "async"))
    ap.add_argument("--data", default=os.path.join(tempfile.gettempdir(), "gdsstore-memory-bench"))
    a = ap.parse_args()

    import cupy as cp
    import zarr
    from memory_bench import LAYOUTS, warm, write_data

    import gdsstore

    paths = write_data(Path(a.data), print)
    warm(Path(a.data))
    instrument(a.variant)

    def read(path: str) -> Any:
        with gdsstore.enable_gpu():
            out = zarr.open_array(gdsstore.GDSStore(path), mode="r")[:]
        cp.cuda.runtime.deviceSynchronize()
        return out

    expect = {name: read(paths[name]).get() for name in LAYOUTS}  # warm-up, and the reference bytes
    print(f"variant: {a.variant}")
    for budget in [int(b) * MiB for b in a.budgets.split(",")]:
        for name in LAYOUTS:
            walls, tl = [], None
            for k in range(a.reads):
                cp.cuda.runtime.deviceSynchronize()
                tl = Timeline() if k == a.reads - 1 else None
                CURRENT[0] = tl
                t0 = time.perf_counter()
                with gdsstore.config.set({"gpu.memory_budget": budget}):
                    out = read(paths[name])
                walls.append(time.perf_counter() - t0)
                CURRENT[0] = None
                assert (out.get() == expect[name]).all(), f"{name}: wrong bytes"
                del out
            assert tl is not None
            med = statistics.median(walls)
            print(f"\n{name}, budget {budget // MiB} MiB: median {med * 1e3:.1f} ms "
                  f"({(1 << 30) / med / 1e9:.2f} GB/s), reads {' '.join(f'{w * 1e3:.0f}' for w in walls)} ms")
            print(tl.table(walls[-1]))


if __name__ == "__main__":
    main()
