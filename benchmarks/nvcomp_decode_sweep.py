"""nvCOMP's batched zstd decode: GB/s against the chunks in one call, and the device memory that takes.

A window of the GPU pipeline decodes its chunks in one nvCOMP call; the decoded bytes in flight are what a
window costs in device memory. This measures, on the GPU alone (data already on the device, no I/O), how
the decode rate grows with the number of chunks per call, for the chunk sizes of the memory benchmark
(4 MiB and 256 KiB float32 chunks, zstd level 1, the same rounded-normal data), so that the memory
budget's cost in speed is a measurement rather than a guess.

    source .gpu/prelude.sh; python3 benchmarks/nvcomp_decode_sweep.py --out sweep.md
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import cupy as cp
import numpy as np
from numcodecs import Zstd

from gdsstore.gpu import nvcomp

CHUNKS = {"4 MiB": 4 << 20, "256 KiB": 256 << 10}
BATCHES = {"4 MiB": [4, 8, 16, 32, 64, 128, 256], "256 KiB": [16, 64, 256, 1024, 4096]}
DISTINCT = 8  # distinct chunks compressed on the host, tiled to the batch


def _payloads(nbytes: int) -> list[bytes]:
    rng = np.random.default_rng(0)
    codec = Zstd(level=1)
    out = []
    for _ in range(DISTINCT):
        raw = np.round(rng.standard_normal(nbytes // 4, dtype="f4"), 2)
        out.append(bytes(codec.encode(raw)))
    return out


def _batch(payloads: list[bytes], k: int) -> tuple[Any, list[int], list[int]]:
    """One device buffer holding ``k`` compressed chunks at 64-byte-aligned offsets."""
    offs, sizes, pos = [], [], 0
    for i in range(k):
        n = len(payloads[i % len(payloads)])
        offs.append(pos)
        sizes.append(n)
        pos += (n + 63) // 64 * 64
    host = np.zeros(pos, np.uint8)
    for i, (o, n) in enumerate(zip(offs, sizes)):
        host[o : o + n] = np.frombuffer(payloads[i % len(payloads)], np.uint8)
    return cp.asarray(host), offs, sizes


def _one(src: Any, offs: list[int], sizes: list[int], raw: int, k: int, reps: int) -> dict[str, float]:
    out = cp.empty(raw * k, cp.uint8)
    out_offs = [i * raw for i in range(k)]
    free0 = cp.cuda.runtime.memGetInfo()[0]
    nvcomp.decode_batch_into("zstd", src, offs, sizes, out, out_offs, [raw] * k)  # warm: codec, scratch
    cp.cuda.runtime.deviceSynchronize()
    scratch = free0 - cp.cuda.runtime.memGetInfo()[0]
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        nvcomp.decode_batch_into("zstd", src, offs, sizes, out, out_offs, [raw] * k)
        cp.cuda.runtime.deviceSynchronize()
        times.append(time.perf_counter() - t)
    dt = statistics.median(times)
    return {"seconds": dt, "gbps": raw * k / dt / 1e9, "scratch": max(scratch, 0)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    lines = [
        "| chunk | chunks per call | decoded MiB in flight | compressed MiB | GB/s (median) | ms per call |"
        " nvCOMP scratch MiB |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, raw in CHUNKS.items():
        payloads = _payloads(raw)
        for k in BATCHES[name]:
            src, offs, sizes = _batch(payloads, k)
            r = _one(src, offs, sizes, raw, k, a.reps)
            row = (f"| {name} | {k} | {raw * k >> 20} | {sum(sizes) / 2**20:.0f} | {r['gbps']:.2f} |"
                   f" {r['seconds'] * 1e3:.2f} | {r['scratch'] / 2**20:.0f} |")
            print(row, flush=True)
            lines.append(row)
            del src
            nvcomp.forget_codecs()
            cp.get_default_memory_pool().free_all_blocks()
    text = "\n".join(lines) + "\n"
    if a.out:
        with open(a.out, "w") as f:
            f.write("# nvCOMP zstd decode against chunks per call (device only, no I/O)\n\n" + text)


if __name__ == "__main__":
    main()
