"""The scatter on the GPU: ``scatter_runs`` (a warp per run segment) against ``scatter_blocks`` alone (a thread
per element, the only kernel before 2026-12-07), on the layouts the pipeline builds: float32 outputs of 4096²
(64 MiB) and 16384² (1 GiB) from chunks of 128², 256² and 1024² staged back to back (as a wave lands them), the
same from transposed chunks, and 1 GiB of 1-D byte segments of 256 KiB (blosc's copies, itemsize 1). Two
times per way: the whole ``scatter_arrays`` call (the tables built in numpy, copied to the device, launched)
and its launches alone (the tables built beforehand). Interleaved rounds, CUDA events, medians; each
result checked against numpy.

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


def _segments(cp: Any, total: int, seg: int) -> tuple[Any, Any, tuple[np.ndarray, ...], np.ndarray]:
    """``total`` bytes in segments of ``seg`` bytes, staged in reverse order, copied to their places."""
    n = total // seg
    host = np.random.default_rng(1).integers(0, 256, total, dtype=np.uint8)
    staged = cp.asarray(host)
    out = cp.empty(total, cp.uint8)
    k = np.arange(n, dtype=np.int64)
    src = _ptr(staged) + (n - 1 - k) * seg
    dst = _ptr(out) + k * seg
    ones = np.ones((n, 1), dtype=np.int64)
    want = host.reshape(n, seg)[::-1].reshape(-1)
    return staged, out, (src, dst, np.full((n, 1), seg, dtype=np.int64), ones, ones), want


def _ptr(a: Any) -> int:
    return int(a.data.ptr) if hasattr(a.data, "ptr") else int(a.ctypes.data)


def _time(cp: Any, fn: Any) -> float:
    start, stop = cp.cuda.Event(), cp.cuda.Event()
    start.record()
    fn()
    stop.record()
    stop.synchronize()
    return float(cp.cuda.get_elapsed_time(start, stop)) / 1e3


def main() -> None:
    import cupy as cp

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    rows: list[tuple[str, int, Any]] = []
    for side in (4096, 16384):
        for chunk in (128, 256, 1024):
            for transposed in (False, True):
                name = f"{side}² float32 from {chunk}² chunks{' (transposed)' if transposed else ''}"
                rows.append((name, 4, functools.partial(_layout, cp, side, chunk, transposed)))
    rows.append(("1 GiB of 1-D byte segments of 256 KiB", 1, functools.partial(_segments, cp, 1 << 30, 256 << 10)))
    print(f"device: {cp.cuda.runtime.getDeviceProperties(0)['name'].decode()}; rounds {args.rounds}, medians")
    print("| layout | runs kernel (as committed): call / launches | elements kernel alone: call / launches | speed-up |")
    print("|---|---|---|---|")
    ways = {"runs": kernels.MIN_RUN, "elements": 1 << 62}  # MIN_RUN beyond any run: every block by element
    for name, itemsize, make in rows:
        staged, out, blocks, want = make()
        fill = bytes(itemsize)
        tables = {}
        for way, min_run in ways.items():
            kernels.MIN_RUN = min_run
            tables[way] = kernels.scatter_meta(blocks[0], blocks[1], blocks[2], blocks[3], blocks[4], itemsize)
        kernels.MIN_RUN = ways["runs"]
        times: dict[tuple[str, str], list[float]] = {(w, k): [] for w in ways for k in ("call", "launches")}
        for r in range(args.rounds + 1):
            for way, min_run in ways.items():
                out.fill(0)
                kernels.MIN_RUN = min_run
                t_call = _time(cp, functools.partial(kernels.scatter_arrays, *blocks, itemsize=itemsize, fill=fill))
                kernels.MIN_RUN = ways["runs"]
                got = cp.asnumpy(out).reshape(-1).view(np.uint8)
                assert np.array_equal(got, want.reshape(-1).view(np.uint8)), f"{name}: wrong bytes ({way})"
                launches = functools.partial(kernels.launch_scatter, *tables[way], blocks[2].shape[1], itemsize, fill)
                t_launch = _time(cp, launches)
                if r:  # the first round compiles and loads the kernels
                    times[(way, "call")].append(t_call)
                    times[(way, "launches")].append(t_launch)
        med = {k: statistics.median(v) for k, v in times.items()}
        nbytes = out.nbytes
        cell = {w: f"{med[(w, 'call')] * 1e3:.2f} / {med[(w, 'launches')] * 1e3:.2f} ms "
                   f"({nbytes / med[(w, 'launches')] / 1e9:.0f} GB/s)" for w in ways}
        speed = med[("elements", "launches")] / med[("runs", "launches")]
        print(f"| {name} | {cell['runs']} | {cell['elements']} | {speed:.1f}x |", flush=True)
        del staged, out


if __name__ == "__main__":
    main()
