"""Where a GPU archive read's time goes, and whether its window size bounds it (issue #25: 1 MiB chunks,
the 16 files read as one dataset, 6.4-6.8 GB/s against the 7.4 that 20x the best anchor needs).

The files of ``archive_bench.py`` (``--files`` x 64 MiB, zlib level 1 + shuffle) read on the GPU as one
dataset (one ManifestStore) with the reader's window (``gdsstore.archives.reader._window_bytes``, stored
bytes per window) at several sizes, ``--rounds`` interleaved rounds, medians; bytes checked against h5py;
peak device memory beyond the output (``cudaMemGetInfo`` polled every 0.5 ms during one more read of each);
then the trace of one read at the default window and of one file's read.

    source .gpu/prelude.sh; python benchmarks/probe_archive_windows.py --chunk 1m
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import zlib
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def _peak(read: Any, cp: Any) -> float:
    """Device memory in use at most during ``read()``, beyond its result and what was in use before."""
    import threading

    from probe_budget import _poll

    cp.get_default_memory_pool().free_all_blocks()
    cp.cuda.runtime.deviceSynchronize()
    free0 = cp.cuda.runtime.memGetInfo()[0]
    low, done = [free0], threading.Event()
    t = threading.Thread(target=_poll, args=(cp, done, low, [0], []))
    t.start()
    out = read()
    cp.cuda.runtime.deviceSynchronize()
    done.set()
    t.join()
    return float(free0 - low[0] - out.nbytes)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--chunk", default="1m", choices=("64k", "1m"))
    ap.add_argument("--files", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--windows", default="256,384,512,1024", help="window sizes in MiB")
    ap.add_argument("--root", default=os.path.join(tempfile.gettempdir(), "gdsstore-archive-bench"))
    a = ap.parse_args()

    import cupy as cp
    import h5py
    from archive_bench import combined_store, make_files

    import gdsstore
    import gdsstore.archives as ga
    from gdsstore.archives import reader

    os.makedirs(a.root, exist_ok=True)
    paths = make_files(a.root, a.files, 64, a.chunk)
    want = []
    for p in paths:
        with h5py.File(p, "r") as f:
            want.append(f["t"][:])
    want_crc = zlib.crc32(np.concatenate(want).tobytes())
    arr = ga.open_virtual(combined_store(paths))["t"]
    pick = reader._window_bytes
    default = pick()
    sizes = [int(w) << 20 for w in a.windows.split(",")]
    times: dict[int, list[float]] = {w: [] for w in sizes}
    peaks: dict[int, float] = {}
    for r in range(a.rounds + 1):
        for w in sizes[r % len(sizes) :] + sizes[: r % len(sizes)]:
            reader._window_bytes = lambda w=w: w
            if r == a.rounds:
                peaks[w] = _peak(lambda: arr.read(..., device=True), cp)
                continue
            t0 = time.perf_counter()
            got = arr.read(..., device=True)
            cp.cuda.runtime.deviceSynchronize()
            times[w].append(time.perf_counter() - t0)
            assert zlib.crc32(got.get().tobytes()) == want_crc, f"window {w >> 20} MiB: wrong bytes"
            del got
    nbytes = sum(x.nbytes for x in want)
    print(f"{a.files} files, {a.chunk} chunks, read as one dataset on the GPU ({nbytes / 2**30:.2f} GiB)")
    for w in sizes:
        med = statistics.median(times[w])
        print(f"window {w >> 20:5d} MiB{' (default)' if w == default else ''}: {nbytes / med / 1e9:.2f} GB/s, "
              f"median {med:.3f} s of {[round(t, 3) for t in times[w]]}, peak beyond the output "
              f"{peaks[w] / 2**20:.0f} MiB")
    reader._window_bytes = pick
    with gdsstore.trace() as tr:
        arr.read(..., device=True)
        cp.cuda.runtime.deviceSynchronize()
    print("\none dataset, default window:\n" + str(tr))
    one = ga.open_virtual(combined_store(paths[:1]))["t"]
    with gdsstore.trace() as tr:
        one.read(..., device=True)
        cp.cuda.runtime.deviceSynchronize()
    print("\none file:\n" + str(tr))


if __name__ == "__main__":
    main()
