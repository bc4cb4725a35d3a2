"""What copying a wave on in parts while it runs (``gpu.wave_copy_bytes``: the core's ``segments``) costs the
wave itself, on the CPU: one wave of 4,096 objects of 64 KiB (256 MiB) from nginx on loopback into host
memory, three ways in interleaved rounds, medians of wall and process CPU time, every byte checked:

- ``no copy``: the wave alone;
- ``one copy after``: the wave, then one numpy copy of its buffer (what a device read did before, with a
  host-to-device copy);
- ``parts``: the wave with parts of ``--part`` bytes, each copied (numpy) into a second buffer on the calling
  thread once all its objects landed, the rest after the wave (``read_wave``'s ``copy``);
- ``parts told, not copied``: the same with a copy that does nothing (the notifications alone).

On a GPU machine the copy is a host-to-device copy on its own engine; here it is a memcpy on the same cores
as the wave and nginx, so ``parts`` can only show what the notifications and the GIL hand-overs cost.

    .venv/bin/python benchmarks/wave_parts_cost.py --rounds 7
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from typing import Any

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))

from servers.nginx import NginxServer

from gdsstore.engine.backend import backend_for
from gdsstore.engine.remote.wave import read_wave


class NumpyCopy:
    """``read_wave``'s copy into host memory (the host twin of ``gdsstore.engine.bounce.DeviceCopy``)."""

    def __init__(self, part: int, target: np.ndarray) -> None:
        self.part = part
        self.target = target  # reused, as the pipeline's device memory comes from a pool: no page faults timed
        self.parts = 0

    def copy(self, buf: np.ndarray, lo: int, hi: int) -> None:
        self.target[lo:hi] = buf[lo:hi]

    def result(self, nbytes: int, parts: int) -> np.ndarray:
        self.parts = parts
        return self.target[:nbytes]

    def abandon(self) -> None:
        pass


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--objects", type=int, default=4096)
    p.add_argument("--size", type=int, default=64 << 10)
    p.add_argument("--part", type=int, default=16 << 20)
    p.add_argument("--workers", type=int, default=2, help="nginx workers")
    args = p.parse_args()
    root = tempfile.mkdtemp(prefix="wave-parts-")
    data = np.random.default_rng(0).integers(0, 256, args.objects * args.size, dtype=np.uint8)
    keys = [f"o/{i}" for i in range(args.objects)]
    os.makedirs(os.path.join(root, "o"))
    for i, key in enumerate(keys):
        with open(os.path.join(root, key), "wb") as f:
            f.write(data[i * args.size : (i + 1) * args.size].tobytes())
    srv = NginxServer(root, args.workers)
    backend = backend_for(srv.url(""))
    expect = np.full(args.objects, args.size, np.int64)
    buffers: dict[int, np.ndarray] = {}

    def alloc(n: int) -> tuple[np.ndarray, Any]:  # one buffer, reused: no page faults in the timing
        if n not in buffers:
            buffers[n] = np.zeros(n, np.uint8)
        return buffers[n], None

    after = np.empty(args.objects * args.size + (64 << 10), np.uint8)

    def wave(copy: Any) -> Any:
        return read_wave(backend, backend.objects(keys, "bench"), keys, None, alloc, expect=expect, copy=copy)

    def no_copy() -> np.ndarray:
        return wave(None).host

    def one_copy_after() -> np.ndarray:
        host = wave(None).host
        after[: host.size] = host
        return after[: host.size]

    target = np.empty_like(after)

    def parts() -> np.ndarray:
        return wave(NumpyCopy(args.part, target)).dev

    class Told(NumpyCopy):  # the parts told, nothing copied: what the notifications alone cost
        def copy(self, buf: np.ndarray, lo: int, hi: int) -> None:
            pass

    def told_only() -> np.ndarray:
        wave(Told(args.part, target))
        return buffers[max(buffers)]

    ways = {"no copy": no_copy, "one copy after": one_copy_after, f"parts of {args.part >> 20} MiB": parts,
            "parts told, not copied": told_only}
    times: dict[str, list[tuple[float, float]]] = {k: [] for k in ways}
    try:
        for fn in ways.values():
            fn()  # warm: connections, page cache
        for _ in range(args.rounds):
            for name, fn in ways.items():
                c0, t0 = time.process_time(), time.perf_counter()
                out = fn()
                times[name].append((time.perf_counter() - t0, time.process_time() - c0))
                got = out[np.arange(args.objects)[:, None] * args.size + np.arange(0, args.size, 4096)]
                assert np.array_equal(got, data.reshape(args.objects, args.size)[:, ::4096]), name
    finally:
        srv.close()
    print(f"`python {' '.join(sys.argv)}`: {args.objects} x {args.size >> 10} KiB from nginx ({args.workers} workers), "
          f"{os.cpu_count()} CPUs, {args.rounds} interleaved rounds, medians")
    for name, ts in times.items():
        wall = statistics.median(t for t, _ in ts) * 1e3
        cpu = statistics.median(c for _, c in ts) * 1e3
        print(f"{name:>18}: {wall:7.1f} ms wall, {cpu:7.1f} ms CPU of this process")


if __name__ == "__main__":
    main()
