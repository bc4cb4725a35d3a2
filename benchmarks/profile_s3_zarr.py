"""Where the time of one S3 zarr read goes: a float32 8192² array in square chunks (128²: 64 KiB; in shards
with ``--shard``), written under nginx serving a directory as a path-style S3 endpoint (``--http``: as an HTTP
server), read whole through ``GDSStore`` (host buffers, or CuPy with ``--device``). Prints GB/s, wall and CPU
per chunk over ``--rounds`` reads, the trace of one read, and a cProfile of one read (the calling thread; the
core's wave runs on its own threads).

The question it answers: how much of a chunk's time is the native core's request and how much is the Python
around it (zarr's indexing, gdsstore's planning, staging and scatter).

    python benchmarks/profile_s3_zarr.py --chunk 128 [--device] [--out profile.txt]
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import gc
import io
import os
import pstats
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))
sys.path.insert(0, str(HERE))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--chunk", type=int, default=128, help="chunk edge (128: 64 KiB chunks)")
    p.add_argument("--side", type=int, default=8192, help="array edge")
    p.add_argument("--http", action="store_true", help="nginx as an HTTP server (no S3 signing)")
    p.add_argument("--shard", type=int, default=0, help="shard edge (0: no shards)")
    p.add_argument("--coalesce-max-bytes", type=int, default=0,
                   help="zarr's array.sharding_coalesce_max_bytes (0: zarr's default, 16 MiB)")
    p.add_argument("--device", action="store_true", help="CuPy buffers (gdsstore.enable_gpu)")
    p.add_argument("--nginx-workers", type=int, default=2)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--out", default=None, help="write the report here too")
    p.add_argument("--no-profile", action="store_true", help="skip the cProfile read (under a sampling profiler)")
    args = p.parse_args()

    import zarr
    from remote_zarr_bench import NginxS3

    import gdsstore

    tmp = tempfile.mkdtemp(prefix="gdsstore-profile-")  # ours: removed at the end
    srv = NginxS3(tmp, args.nginx_workers)
    src = np.random.default_rng(0).standard_normal((args.side, args.side)).astype("float32")
    path = os.path.join(srv.root, "a.zarr")
    z = zarr.create_array(
        zarr.storage.LocalStore(path),
        shape=src.shape,
        chunks=(args.chunk, args.chunk),
        shards=(args.shard, args.shard) if args.shard else None,
        dtype="f4",
        compressors=None,
        fill_value=0,
    )
    z[:] = src
    n = (args.side // args.chunk) ** 2
    if args.coalesce_max_bytes:
        zarr.config.set({"array.sharding_coalesce_max_bytes": args.coalesce_max_bytes})

    from gdsstore.gpu import execute
    from gdsstore.gpu.pipeline import GDSCodecPipeline

    spent: dict[str, float] = {}  # seconds of the last read: where its wall went, stage by stage

    def timed(name: str, fn: Any) -> Any:
        def run(*a: Any, **k: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                spent[name] = spent.get(name, 0.0) + time.perf_counter() - t0
        return run

    def timed_async(name: str, fn: Any) -> Any:
        async def run(*a: Any, **k: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return await fn(*a, **k)
            finally:
                spent[name] = spent.get(name, 0.0) + time.perf_counter() - t0
        return run

    execute.one_call = timed("gdsstore's call (thread)", execute.one_call)  # type: ignore[assignment]
    GDSCodecPipeline.read = timed_async("pipeline.read (loop)", GDSCodecPipeline.read)  # type: ignore[method-assign]

    url, options = (f"{srv.endpoint}/bench/a.zarr", {}) if args.http else (srv.url("a.zarr"), srv.gds_options)

    def read() -> Any:
        spent.clear()
        t0 = time.perf_counter()
        with gdsstore.enable_gpu(buffers=args.device):
            store = gdsstore.GDSStore(url, read_only=True, storage_options=options)
            arr = zarr.open_array(store, mode="r")
            t1 = time.perf_counter()
            out = arr[:]
        if args.device:
            import cupy as cp

            cp.cuda.get_current_stream().synchronize()
        t2 = time.perf_counter()
        spent["open_array"], spent["a[:] (zarr and gdsstore)"] = t1 - t0, t2 - t1
        return out

    def stages() -> str:
        return ", ".join(f"{k} {v * 1e3:.1f} ms" for k, v in spent.items())

    lines: list[str] = []
    gc_time = [0.0, 0, 0.0]  # seconds in collections, full (generation 2) collections, the start of one

    def on_gc(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            gc_time[2] = time.perf_counter()
            return
        gc_time[0] += time.perf_counter() - gc_time[2]
        gc_time[1] += info["generation"] == 2

    gc.callbacks.append(on_gc)
    got = read()
    assert np.array_equal(got.get() if args.device else got, src), "wrong bytes"
    lines.append(
        f"{n} chunks of {args.chunk}² float32 ({args.chunk * args.chunk * 4 >> 10} KiB), "
        + (f"in shards of {args.shard}² (coalesced reads of at most "
           f"{zarr.config.get('array.sharding_coalesce_max_bytes') >> 20} MiB), " if args.shard else "")
        + f"{'CuPy' if args.device else 'host'} buffers, "
        f"nginx as {'HTTP' if args.http else 'S3'} with {args.nginx_workers} workers"
    )
    for _ in range(args.rounds):
        gc_time[:2] = [0.0, 0]
        t0, c0 = time.perf_counter(), time.process_time()
        read()
        t, c = time.perf_counter() - t0, time.process_time() - c0
        lines.append(
            f"{src.nbytes / t / 1e9:.2f} GB/s, {t / n * 1e6:.1f} us/chunk wall, "
            f"{c / n * 1e6:.1f} us/chunk CPU (all threads), garbage collection {gc_time[0] * 1e3:.1f} ms "
            f"({gc_time[1]} full); {stages()}"
        )
    with gdsstore.trace() as tr:
        read()
    lines.append(str(tr))
    if not args.no_profile:
        prof = cProfile.Profile()
        prof.enable()
        read()
        prof.disable()
        text = io.StringIO()
        stats = pstats.Stats(prof, stream=text)
        stats.sort_stats("tottime").print_stats(30)
        stats.sort_stats("cumulative").print_stats("gdsstore", 30)
        lines.append(text.getvalue())
    report = "\n".join(lines)
    print(report)
    if args.out:
        Path(args.out).write_text(report)
    with contextlib.suppress(Exception):
        srv.close()
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
