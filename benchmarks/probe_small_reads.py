"""Small GPU reads: nvCOMP on the device against the CPU codecs plus a copy (the setting
``gpu.host_decode_bytes``), warm, in one process (issue #23: a process's first small read should not pay for
loading nvCOMP, and one nvCOMP call lasts about one chunk's decode whatever the number of chunks).

Reads of 1-64 MiB from the memory benchmark's arrays (``memory_bench.write_data``: 512² zstd chunks of the
16 MiB array, 256² and 1024² zstd chunks of the 1 GiB ones), each route ``--reads`` times interleaved,
median milliseconds and the bytes checked against the other route.

    source .gpu/prelude.sh; python benchmarks/probe_small_reads.py
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reads", type=int, default=9)
    a = ap.parse_args()

    import cupy as cp
    import zarr
    from memory_bench import write_data

    import gdsstore

    paths = write_data(Path(os.path.join(tempfile.gettempdir(), "gdsstore-memory-bench")), print)
    cases: list[tuple[str, str, Any]] = [
        ("16 MiB array, 512² chunks, all", paths["16 MiB"], (slice(None), slice(None))),
        ("16 MiB array, one 1 MiB chunk", paths["16 MiB"], (slice(0, 512), slice(0, 512))),
        ("256 KiB chunks, 4 MiB", paths["256 KiB zstd chunks"], (slice(0, 256), slice(0, 4096))),
        ("256 KiB chunks, 16 MiB", paths["256 KiB zstd chunks"], (slice(0, 256), slice(0, 16384))),
        ("256 KiB chunks, 64 MiB", paths["256 KiB zstd chunks"], (slice(0, 1024), slice(0, 16384))),
        ("4 MiB chunks, 16 MiB", paths["4 MiB zstd chunks"], (slice(0, 1024), slice(0, 4096))),
        ("4 MiB chunks, 64 MiB", paths["4 MiB zstd chunks"], (slice(0, 1024), slice(0, 16384))),
    ]
    print(f"{'read':34} {'CPU codecs ms':>13} {'nvCOMP ms':>10}")
    with gdsstore.enable_gpu():
        for name, path, sel in cases:
            z = zarr.open_array(gdsstore.GDSStore(path), mode="r")
            times: dict[str, list[float]] = {"cpu": [], "gpu": []}
            got: dict[str, Any] = {}
            for _ in range(a.reads + 1):
                for route in ("cpu", "gpu"):
                    cp.cuda.runtime.deviceSynchronize()
                    t0 = time.perf_counter()
                    cpu = route == "cpu"
                    with gdsstore.config.set({"gpu.host_decode_bytes": 1 << 40 if cpu else 0,
                                              "gpu.host_decode_chunks": 0}):
                        x = z[sel]
                    cp.cuda.runtime.deviceSynchronize()
                    times[route].append(time.perf_counter() - t0)
                    got[route] = x
            assert bool((got["cpu"] == got["gpu"]).all()), f"{name}: the routes disagree"
            med = {k: statistics.median(v[1:]) * 1e3 for k, v in times.items()}
            print(f"{name:34} {med['cpu']:13.2f} {med['gpu']:10.2f}")


if __name__ == "__main__":
    main()
