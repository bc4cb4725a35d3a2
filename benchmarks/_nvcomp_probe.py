"""GPU-machine probe: where the zarr read pipeline spends its time, and nvCOMP/H2D/read variants.

    python benchmarks/_nvcomp_probe.py --data DIR [--size 8192] [--only decode,reads,h2d,stages]

Exploration tool for tuning (not part of the library). Expects the datasets that
``benchmarks/zarr_bench.py --keep-data`` writes (or writes them itself). Prints one line per
measurement; nothing here is asserted.
"""

from __future__ import annotations

import argparse
import cProfile
import functools
import glob
import io
import os
import pstats
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))


def _best(fn: Callable[[], Any], n: int = 3) -> float:
    fn()
    best = float("inf")
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def _chunk_files(path: str) -> list[str]:
    return sorted(f for f in glob.glob(os.path.join(path, "c", "*", "*")) if os.path.isfile(f))


def probe_decode(paths: dict[str, str]) -> None:
    """nvCOMP batched zstd decode of the bench's chunk files: call options and batch sizes."""
    import cupy as cp
    from nvidia import nvcomp as nv

    for name in ("chunks 1024², zstd", "chunks 256², zstd"):
        files = _chunk_files(paths[name])
        blobs = [np.fromfile(f, dtype="u1") for f in files]
        raw = int(np.prod([1024, 1024] if "1024" in name else [256, 256])) * 4
        for rep in (1, 4):
            bl = blobs * rep
            offs, pos = [], 0
            for b in bl:
                offs.append(pos)
                pos += (b.size + 63) // 64 * 64
            host = np.zeros(pos, "u1")
            for o, b in zip(offs, bl):
                host[o : o + b.size] = b
            src = cp.asarray(host)
            sizes = [int(b.size) for b in bl]
            out = cp.empty(raw * len(bl), "u1")
            oo = [i * raw for i in range(len(bl))]
            ol = [raw] * len(bl)
            variants: dict[str, Any] = {}
            for pol in ("CONCURRENCY", "LATENCY"):
                try:
                    variants[pol] = nv.Codec(
                        algorithm="zstd",
                        bitstream_kind=nv.BitstreamKind.RAW,
                        execution_policy=getattr(nv.ExecutionPolicy, pol),
                    )
                except Exception as exc:
                    print(f"  codec {pol}: {type(exc).__name__}: {exc}")
            for pol, codec in variants.items():
                ins = nv.as_arrays(src, offs, sizes)
                outs = nv.as_arrays(out, oo, ol)

                def plain(codec: Any = codec, ins: Any = ins, outs: Any = outs) -> None:
                    r = codec.decode(ins, out=outs)
                    list(r.buffer_sizes)
                    cp.cuda.Device().synchronize()

                t = _best(plain)
                print(
                    f"decode {name} x{len(bl)} {pol} out=: {raw * len(bl) / t / 1e9:.1f} GB/s ({t * 1e3:.1f} ms)"
                )
                try:
                    cfg = codec.decompression_config(codec.compression_config(ol))

                    def preconf(codec: Any = codec, ins: Any = ins, outs: Any = outs, cfg: Any = cfg) -> None:
                        codec.decode(ins, out=outs, decompression_config=cfg)
                        cp.cuda.Device().synchronize()

                    t = _best(preconf)
                    ok = bool(cp.all(out[:raw] == cp.asarray(np.frombuffer(_ref_chunk(files[0]), "u1"))))
                    print(
                        f"decode {name} x{len(bl)} {pol} preconfigured: {raw * len(bl) / t / 1e9:.1f} GB/s "
                        f"({t * 1e3:.1f} ms) correct={ok}"
                    )
                except Exception as exc:
                    print(f"  preconfigured {pol}: {type(exc).__name__}: {str(exc)[:200]}")
            try:
                t = _best(functools.partial(nv.as_arrays, src, offs, sizes), 3)
                print(f"  as_arrays of {len(bl)}: {t * 1e6:.0f} us")
            except Exception as exc:
                print(f"  as_arrays: {exc}")


def _ref_chunk(path: str) -> bytes:
    import numcodecs

    return bytes(numcodecs.Zstd().decode(open(path, "rb").read()))


def probe_h2d() -> None:
    import cupy as cp

    from gdsstore.engine import cuda

    for mib in (4, 64, 256):
        n = mib << 20
        pin = cuda.PinnedBuffer(n)
        dev = cp.empty(n, "u1")
        s = cp.cuda.Stream(non_blocking=True)

        def copy(pin: Any = pin, dev: Any = dev, n: int = n, s: Any = s) -> None:
            cp.cuda.runtime.memcpyAsync(int(dev.data.ptr), pin.ptr, n, 1, s.ptr)
            s.synchronize()

        t = _best(copy)
        print(f"h2d pinned {mib} MiB: {n / t / 1e9:.1f} GB/s")


def probe_reads(paths: dict[str, str]) -> None:
    """Batched reads of the chunk files into pinned memory: thread counts and the stat pass."""
    from gdsstore.engine import batch, cuda

    for name in ("chunks 1024², none", "chunks 256², none", "chunks 256², zstd"):
        files = _chunk_files(paths[name])
        sizes = np.array([os.path.getsize(f) for f in files], dtype=np.int64)
        dest_off = np.concatenate([[0], np.cumsum((sizes + 63) // 64 * 64)[:-1]]).astype(np.int64)
        total = int(dest_off[-1] + sizes[-1])
        pin = cuda.PinnedBuffer(total)
        dest = np.frombuffer(pin.view, dtype=np.uint8, count=total)
        for threads in (8, 16, 32):
            zeros = np.zeros(len(files), np.int64)
            t = _best(functools.partial(batch.read_batch, files, zeros, sizes, dest, dest_off, threads))
            print(f"read_batch {name} {len(files)} files threads={threads}: {sizes.sum() / t / 1e9:.1f} GB/s")
        t = _best(functools.partial(batch.stat_batch, files, 16))
        print(f"stat_batch {name}: {t / len(files) * 1e6:.1f} us/file")


def probe_stages(paths: dict[str, str], profile: set[str]) -> None:
    """gdsstore's pipeline per workload: wall time, trace stages, and a cProfile of chosen rows."""
    import _anchors as anchors

    import gdsstore

    read = anchors.zarr_gdsstore(True)
    for name, path in paths.items():
        if name.startswith("raw"):
            continue
        t = _best(lambda path=path: (read(path), anchors.sync(True)), 2)
        size = os.path.getsize(paths["raw file → memory"])
        with gdsstore.trace() as tr:
            read(path)
            anchors.sync(True)
        stages = {
            f"{op}/{route}": f"{v['seconds'] * 1e3:.1f}ms/{v['ops']}"
            for (op, route, _reason), v in tr.by_reason().items()
        }
        print(f"stages {name}: {size / t / 1e9:.2f} GB/s ({t * 1e3:.1f} ms) {stages}")
        if name in profile:
            pr = cProfile.Profile()
            pr.enable()
            read(path)
            anchors.sync(True)
            pr.disable()
            s = io.StringIO()
            pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(14)
            print("\n".join(s.getvalue().splitlines()[6:24]))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--data", required=True)
    p.add_argument("--size", type=int, default=8192)
    p.add_argument("--only", default="h2d,decode,reads,stages")
    p.add_argument("--profile", default="chunks 256², none;chunks 256², zstd;shards 4096² of 256², zstd")
    args = p.parse_args(argv)
    import zarr_bench

    paths = zarr_bench._write(Path(args.data), args.size, print)
    only = set(args.only.split(","))
    for key, fn in (
        ("h2d", probe_h2d),
        ("decode", lambda: probe_decode(paths)),
        ("reads", lambda: probe_reads(paths)),
        ("stages", lambda: probe_stages(paths, set(args.profile.split(";")))),
    ):
        if key in only:
            t0 = time.perf_counter()
            try:
                fn()
            except Exception as exc:
                import traceback

                traceback.print_exc()
                print(f"probe {key} failed: {type(exc).__name__}: {exc}")
            print(f"[probe {key}: {time.perf_counter() - t0:.1f} s]", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
