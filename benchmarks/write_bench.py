"""Writes through gdsstore's pipeline against zarr's own, in one run (issue 15's tables).

CPU machine (host buffers; local path, then S3 on a moto server on loopback)::

    python benchmarks/write_bench.py --mode local,s3 --out /tmp/write-bench [--mib 256] [--s3-mib 64] [--rounds 5]

GPU machine (CuPy source array; ``gdsstore.enable_gpu()`` vs zarr ``LocalStore`` + ``zarr.config.enable_gpu()``;
float32 16384² into 1024² chunks none/zstd, and zstd 4096² shards of 256² chunks; plus the 16-thread
page-cache write ceiling measured in the same run)::

    python benchmarks/write_bench.py --mode gpu --out /tmp/write-bench-gpu [--size 16384] [--rounds 3]

Each round writes every contender once (interleaved, fresh array each time); the table shows medians
(GB/s of raw array bytes) and the ratio gdsstore / anchor. Every written array is read back with plain
zarr on the CPU and compared with the source: a wrong result fails the run. ``--out`` receives
``results.json`` and ``results.md``.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

Writer = Callable[[str, Any], None]  # (where, source array) -> writes it, blocking


def _data(shape: tuple[int, int]) -> np.ndarray:
    # A smooth field + rounded noise: zstd finds structure (about 1.5-2x), unlike white noise.
    rng = np.random.default_rng(0)
    y = np.sin(np.linspace(0, 8 * np.pi, shape[0], dtype="f4"))[:, None]
    x = np.cos(np.linspace(0, 8 * np.pi, shape[1], dtype="f4"))[None, :]
    return np.round(y * x + rng.standard_normal(shape, dtype="f4") * np.float32(0.05), 3).astype("f4")


def _compressors(codec: str) -> Any:
    from zarr.codecs import ZstdCodec

    return None if codec == "none" else [ZstdCodec(level=1)]


def _create(store: Any, shape: tuple[int, ...], chunk: int, shard: int | None, codec: str) -> Any:
    import zarr

    kw: dict[str, Any] = {"shards": (shard, shard)} if shard else {}
    return zarr.create_array(
        store, shape=shape, chunks=(chunk, chunk), dtype="f4", compressors=_compressors(codec),
        fill_value=0.0, overwrite=True, **kw,
    )


# -- contenders ----------------------------------------------------------------------------------------


def gdsstore_writer(
    chunk: int, shard: int | None, codec: str, gpu: bool, opts: dict[str, Any] | None = None,
    settings: dict[str, Any] | None = None,
) -> Writer:
    import gdsstore

    def write(where: str, src: Any) -> None:
        with gdsstore.enable_gpu(buffers=gpu), gdsstore.config.set(settings or {}):
            z = _create(gdsstore.GDSStore(where, storage_options=opts), src.shape, chunk, shard, codec)
            with _Timed():
                z[...] = src
                _sync(gpu)

    return write


def zarr_local_writer(chunk: int, shard: int | None, codec: str, gpu: bool) -> Writer:
    import zarr

    def write(where: str, src: Any) -> None:
        cfg = zarr.config.enable_gpu() if gpu else zarr.config.set({})
        with cfg:
            z = _create(zarr.storage.LocalStore(where), src.shape, chunk, shard, codec)
            with _Timed():
                z[...] = src
                _sync(gpu)

    return write


def zarr_s3fs_writer(chunk: int, codec: str, opts: dict[str, Any]) -> Writer:
    import zarr

    s3fs_opts = {"endpoint_url": opts["endpoint_url"], "key": opts["key"], "secret": opts["secret"], "asynchronous": True}

    def write(where: str, src: Any) -> None:
        store = zarr.storage.FsspecStore.from_url(where, storage_options=s3fs_opts)
        z = _create(store, src.shape, chunk, None, codec)
        with _Timed():
            z[...] = src

    return write


_TIMES: list[float] = []
_CPU: list[float] = []  # this process's CPU seconds (all threads) per write: the cost under contention


class _Timed:
    """Times one write: wall seconds into ``_TIMES``, process CPU seconds into ``_CPU``."""

    def __enter__(self) -> None:
        self.t0, self.c0 = time.perf_counter(), time.process_time()

    def __exit__(self, *exc: object) -> None:
        _TIMES.append(time.perf_counter() - self.t0)
        _CPU.append(time.process_time() - self.c0)


def _sync(gpu: bool) -> None:
    if gpu:
        import cupy as cp

        cp.cuda.Device().synchronize()


# -- checks and the measuring loop ---------------------------------------------------------------------


def _check_local(path: str, ref: np.ndarray) -> None:
    import zarr

    got = zarr.open_array(zarr.storage.LocalStore(path), mode="r")[...]
    if not np.array_equal(got, ref):
        raise AssertionError(f"wrong data read back from {path}")


def _check_s3(url: str, ref: np.ndarray, opts: dict[str, Any]) -> None:
    import zarr

    s3fs_opts = {"endpoint_url": opts["endpoint_url"], "key": opts["key"], "secret": opts["secret"], "asynchronous": True}
    got = zarr.open_array(zarr.storage.FsspecStore.from_url(url, storage_options=s3fs_opts), mode="r")[...]
    if not np.array_equal(got, ref):
        raise AssertionError(f"wrong data read back from {url}")


def measure(
    contenders: dict[str, tuple[Writer, Callable[[int], str], Callable[[str], None]]],
    src: Any,
    rounds: int,
    log: Callable[[str], None],
) -> dict[str, list[float]]:
    """Interleaved rounds: each round writes every contender once to a fresh place, then checks it.
    A first round warms every contender up and is not counted: on a fresh GPU machine it compiles
    CuPy's kernels and pins the staging memory (gdsstore's first 1 GiB write took 3.9 s on the H200).

    ``contenders[name] = (writer, place for round r, check of a written place)``.
    """
    times: dict[str, list[float]] = {k: [] for k in contenders}
    cpu: dict[str, list[float]] = {k: [] for k in contenders}
    for name, (writer, place, check) in contenders.items():
        where = place(-1)
        writer(where, src)
        check(where)
        log(f"  warm-up {name}: {_TIMES[-1]:.3f} s (not counted)")
    for r in range(rounds):
        for name, (writer, place, check) in contenders.items():
            where = place(r)
            _TIMES.clear()
            writer(where, src)
            times[name].append(_TIMES[-1])
            cpu[name].append(_CPU[-1])
            check(where)
            log(f"  round {r + 1}/{rounds} {name}: {_TIMES[-1]:.3f} s (CPU {_CPU[-1]:.3f} s)")
    return {**times, **{f"{k} (CPU)": v for k, v in cpu.items()}}


def _fresh_place(tmp: str, name: str) -> Callable[[int], str]:
    """Round ``r`` of contender ``name`` writes to ``tmp/name-r`` (emptied first)."""

    def place(r: int) -> str:
        path = os.path.join(tmp, f"{name}-{r}")
        shutil.rmtree(path, ignore_errors=True)
        return path

    return place


def _check_and_remove(ref: np.ndarray) -> Callable[[str], None]:
    """Check a written local array against ``ref``, then remove it (the next round writes fresh files)."""

    def check(path: str) -> None:
        _check_local(path, ref)
        shutil.rmtree(path, ignore_errors=True)

    return check


def _gbps(nbytes: int, times: list[float]) -> float:
    return nbytes / statistics.median(times) / 1e9


# -- modes ---------------------------------------------------------------------------------------------


def run_local(args: argparse.Namespace, log: Callable[[str], None]) -> list[dict[str, Any]]:
    edge = int(np.sqrt(args.mib * (1 << 20) // 4))
    src = _data((edge, edge))
    rows = []
    for codec in ("none", "zstd"):
        tmp = tempfile.mkdtemp(prefix="write-bench-", dir=args.tmp)
        try:
            place, check = functools.partial(_fresh_place, tmp), _check_and_remove(src)
            log(f"local, {src.nbytes >> 20} MiB in 1 MiB chunks, {codec}")
            contenders = {
                "gdsstore": (gdsstore_writer(512, None, codec, False), place("gds"), check),
                "zarr LocalStore": (zarr_local_writer(512, None, codec, False), place("zarr"), check),
            }
            t = measure(contenders, src, args.rounds, log)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        rows.append(_row(f"local, 1 MiB chunks, {codec}", src.nbytes, t, "zarr LocalStore", 1.3))
    return rows


def _moto_put_rate(opts: dict[str, Any], nbytes: int, threads: int) -> float:
    """moto's own PUT rate: ``threads`` botocore clients' PUTs of 1 MiB objects (GB/s)."""
    import botocore.session

    client = botocore.session.get_session().create_client(
        "s3", region_name="us-east-1", endpoint_url=opts["endpoint_url"],
        aws_access_key_id=opts["key"], aws_secret_access_key=opts["secret"],
    )
    body = os.urandom(1 << 20)
    n = max(1, nbytes >> 20)
    t0 = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(lambda i: client.put_object(Bucket="bench", Key=f"ceiling/{i}", Body=body), range(n)))
    return n * len(body) / (time.perf_counter() - t0) / 1e9


def run_s3(args: argparse.Namespace, log: Callable[[str], None]) -> list[dict[str, Any]]:
    import botocore.session
    from servers.moto_s3 import MotoServer

    edge = int(np.sqrt(args.s3_mib * (1 << 20) // 4))
    src = _data((edge, edge))
    srv = MotoServer()
    rows = []
    try:
        opts = srv.storage_options
        client = botocore.session.get_session().create_client(
            "s3", region_name="us-east-1", endpoint_url=opts["endpoint_url"],
            aws_access_key_id=opts["key"], aws_secret_access_key=opts["secret"],
        )
        client.create_bucket(Bucket="bench")
        for codec in ("none",):
            log(f"S3 (moto), {src.nbytes >> 20} MiB in 1 MiB chunks, {codec}")
            contenders = {
                "gdsstore": (
                    # as many requests in flight as moto's ceiling below uses (the default is the core count)
                    gdsstore_writer(512, None, codec, False, opts, {"remote.concurrency": 16}),
                    lambda r, c=codec: f"s3://bench/gds-{c}-{r}",
                    lambda url: _check_s3(url, src, opts),
                ),
                "zarr FsspecStore (s3fs)": (
                    zarr_s3fs_writer(512, codec, opts),
                    lambda r, c=codec: f"s3://bench/zarr-{c}-{r}",
                    lambda url: _check_s3(url, src, opts),
                ),
            }
            t = measure(contenders, src, args.rounds, log)
            row = _row(f"S3 (moto), 1 MiB chunks, {codec}, remote.concurrency 16", src.nbytes, t, "zarr FsspecStore (s3fs)", 1.3)
            row["ceiling"] = {"moto PUT 1 MiB x 16 threads": _moto_put_rate(opts, src.nbytes, 16)}
            rows.append(row)
    finally:
        srv.close()
    return rows


def page_cache_ceiling(nbytes: int, threads: int, where: str) -> float:
    """``threads`` threads pwrite one file of ``nbytes`` into the page cache (GB/s, median of 3)."""
    buf = np.ones(nbytes, dtype=np.uint8)
    piece = nbytes // threads
    times = []
    for _ in range(3):
        path = os.path.join(where, "ceiling.bin")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            start = threading.Barrier(threads)

            def one(i: int, fd: int = fd, start: threading.Barrier = start) -> None:
                start.wait()
                os.pwrite(fd, memoryview(buf)[i * piece : (i + 1) * piece], i * piece)

            t0 = time.perf_counter()
            with ThreadPoolExecutor(threads) as pool:
                list(pool.map(one, range(threads)))
            times.append(time.perf_counter() - t0)
        finally:
            os.close(fd)
            os.unlink(path)
    return nbytes / statistics.median(times) / 1e9


def files_ceiling(nbytes: int, threads: int, where: str, files: int = 256, rename: bool = False) -> float:
    """``threads`` threads write ``files`` new files of ``nbytes / files`` each into the page cache (the
    shape of a chunked array's write: one object per chunk; ``rename``: each through a temporary name, as
    an atomic publish does), GB/s, median of 3."""
    piece = nbytes // files
    buf = memoryview(np.ones(piece, dtype=np.uint8))
    times = []
    for rep in range(3):
        folder = os.path.join(where, f"ceiling-{rep}")
        os.makedirs(folder)

        def one(i: int, folder: str = folder) -> None:
            path = os.path.join(folder, str(i))
            with open(path + ".tmp" if rename else path, "wb") as f:
                f.write(buf)
            if rename:
                os.replace(path + ".tmp", path)

        t0 = time.perf_counter()
        with ThreadPoolExecutor(threads) as pool:
            list(pool.map(one, range(files)))
        times.append(time.perf_counter() - t0)
        shutil.rmtree(folder)
    return piece * files / statistics.median(times) / 1e9


GPU_WORKLOADS: dict[str, tuple[int, int | None, str, float]] = {
    "chunks 1024², none": (1024, None, "none", 1.3),
    "chunks 1024², zstd": (1024, None, "zstd", 5.0),
    "shards 4096² of 256², zstd": (256, 4096, "zstd", 5.0),
}


def run_gpu(args: argparse.Namespace, log: Callable[[str], None]) -> list[dict[str, Any]]:
    import cupy as cp

    host = _data((args.size, args.size))
    src = cp.asarray(host)
    tmp = tempfile.mkdtemp(prefix="write-bench-gpu-", dir=args.tmp)
    rows = []
    try:
        ceilings = {"page cache, 16 threads, one file": page_cache_ceiling(src.nbytes, 16, tmp),
                    "page cache, 16 threads, 256 files": files_ceiling(src.nbytes, 16, tmp),
                    "page cache, 16 threads, 256 files, tmp + rename": files_ceiling(src.nbytes, 16, tmp, rename=True)}
        ceiling = max(ceilings.values())
        log(f"16-thread page-cache write ceilings: {ceilings}")
        place, check = functools.partial(_fresh_place, tmp), _check_and_remove(host)
        for name, (chunk, shard, codec, target) in GPU_WORKLOADS.items():
            log(f"GPU {name}")
            contenders = {
                "gdsstore": (gdsstore_writer(chunk, shard, codec, True), place("gds"), check),
                "zarr LocalStore + enable_gpu": (zarr_local_writer(chunk, shard, codec, True), place("zarr"), check),
            }
            t = measure(contenders, src, args.rounds, log)
            row = _row(name, int(src.nbytes), t, "zarr LocalStore + enable_gpu", target)
            row["ceiling"] = ceilings
            row["of_ceiling"] = row["gbps"]["gdsstore"] / ceiling
            rows.append(row)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return rows


def _row(name: str, nbytes: int, times: dict[str, list[float]], anchor: str, target: float) -> dict[str, Any]:
    wall = {k: v for k, v in times.items() if not k.endswith(" (CPU)")}
    gbps = {k: _gbps(nbytes, v) for k, v in wall.items()}
    cpu = {k[: -len(" (CPU)")]: statistics.median(v) for k, v in times.items() if k.endswith(" (CPU)")}
    return {
        "workload": name,
        "bytes": nbytes,
        "seconds": wall,
        "cpu_seconds": cpu,
        "gbps": gbps,
        "anchor": anchor,
        "ratio": gbps["gdsstore"] / gbps[anchor],
        "cpu_ratio": cpu[anchor] / max(cpu["gdsstore"], 1e-9),
        "target_ratio": target,
    }


def markdown(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| workload | gdsstore GB/s | anchor | anchor GB/s | ratio (target) | CPU s: gdsstore / anchor | ceiling |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        ceil = ", ".join(f"{k}: {v:.2f} GB/s" for k, v in r.get("ceiling", {}).items())
        if "of_ceiling" in r:
            ceil += f" ({r['of_ceiling']:.0%} of the higher)"
        lines.append(
            f"| {r['workload']} | {r['gbps']['gdsstore']:.3f} | {r['anchor']} | {r['gbps'][r['anchor']]:.3f} "
            f"| {r['ratio']:.2f}x (≥{r['target_ratio']}x) "
            f"| {r['cpu_seconds']['gdsstore']:.2f} / {r['cpu_seconds'][r['anchor']]:.2f} | {ceil} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    ap.add_argument("--mode", default="local,s3", help="comma-separated: local, s3, gpu")
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--mib", type=int, default=256, help="local mode: array size in MiB")
    ap.add_argument("--s3-mib", type=int, default=64, help="s3 mode: array size in MiB")
    ap.add_argument("--size", type=int, default=16384, help="gpu mode: array edge")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--tmp", default=None, help="directory for the written arrays (default: the system's)")
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    modes = {"local": run_local, "s3": run_s3, "gpu": run_gpu}
    rows: list[dict[str, Any]] = []
    for mode in args.mode.split(","):
        if mode not in modes:
            ap.error(f"--mode: unknown mode {mode!r} (local, s3, gpu)")
        rows += modes[mode](args, log)
    table = markdown(rows)
    print(table)
    (args.out / "results.md").write_text(table + "\n")
    meta = {"argv": sys.argv, "cpus": os.cpu_count(), "rows": rows}
    (args.out / "results.json").write_text(json.dumps(meta, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
