"""Remote zarr arrays: gdsstore (``GDSStore`` + its pipeline, one wave of requests per window)
against zarr ``FsspecStore`` (fsspec HTTP / s3fs) and zarr ``ObjectStore`` (obstore), over nginx
and moto S3 on loopback; plus one large object through ``gdsstore.open(url).read()`` vs obstore.

CPU machine (host buffers; the committed results come from this command)::

    python benchmarks/remote_zarr_bench.py --servers nginx --rounds 5 --out benchmarks/results/remote_zarr_cpu_nginx.md

GPU machine (CuPy buffers, ``gdsstore.enable_gpu()`` and zarr's ``enable_gpu`` for the anchors, a
tensorstore ``http``/``s3`` kvstore and zarrs anchors when importable; nginx with 8 workers, also as a
path-style S3 endpoint; no moto there)::

    python benchmarks/remote_zarr_bench.py --device --servers nginx-s3,nginx --nginx-workers 8 --rounds 3 \\
        --out remote_zarr.md   # the Performance page's: benchmarks/results/2026-12-03-h200-s2/run4/

nginx runs with ``tcp_nopush off`` (on, each small ranged GET can stall about 40 ms on loopback) and
``worker_processes`` ``--nginx-workers``; moto is ``python -m moto.server``. Rounds are interleaved
(every reader once per round, in turn), figures are medians; every result is checked against the
source. GB/s counts the array's bytes; CPU-s/GB is this process's CPU time (all its threads, not the
server's) per GB read. ``zarr.config`` ``async.concurrency`` is ``--zarr-concurrency`` (64) for every reader.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

# name -> (shape, chunks, shards or None, compressed); CPU rows, then GPU rows (float32 8192²).
CPU_ROWS: dict[str, tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...] | None, bool]] = {
    "1,024 chunks of 16 KiB": ((1024 * 4096,), (4096,), None, False),
    "256 MiB, chunks of 64 KiB": ((64 << 20,), (16384,), None, False),
}
GPU_ROWS: dict[str, tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...] | None, bool]] = {
    "chunks 1024² (4 MiB), none": ((8192, 8192), (1024, 1024), None, False),
    "chunks 1024², zstd": ((8192, 8192), (1024, 1024), None, True),
    "chunks 256² (256 KiB), none": ((8192, 8192), (256, 256), None, False),
    "chunks 256², zstd": ((8192, 8192), (256, 256), None, True),
    "shards 2048² of 256², zstd": ((8192, 8192), (256, 256), (2048, 2048), True),
}
# S3 rows (float32 8192², uncompressed), read from nginx answering path-style S3 GETs (--servers nginx-s3).
S3_ROWS: dict[str, tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...] | None, bool]] = {
    "S3 chunks 128² (64 KiB), none": ((8192, 8192), (128, 128), None, False),
    "S3 chunks 256² (256 KiB), none": ((8192, 8192), (256, 256), None, False),
    "S3 chunks 1024² (4 MiB), none": ((8192, 8192), (1024, 1024), None, False),
    "S3 shards 2048² of 256², none": ((8192, 8192), (256, 256), (2048, 2048), False),
}
SINGLE = 256 << 20  # the single object


def data(shape: tuple[int, ...]) -> np.ndarray:
    """A smooth field with noise (zstd finds some structure), float32 (uint32 counters for 1-d)."""
    if len(shape) == 1:
        return np.arange(shape[0], dtype="u4")
    x = np.linspace(0, 8 * np.pi, shape[1], dtype="f4")
    a = np.sin(x)[:, None] * np.cos(x)[None, : shape[1]]
    a = a + np.random.default_rng(0).standard_normal(shape, dtype="f4") * np.float32(0.05)
    return np.round(a, 3).astype("f4")


def write(path: str, shape: tuple[int, ...], chunks: tuple[int, ...], shards: Any, zstd: bool) -> np.ndarray:
    import zarr
    from zarr.codecs import ZstdCodec
    from zarr.storage import LocalStore

    ref = data(shape)
    z = zarr.create_array(LocalStore(path), shape=shape, chunks=chunks, shards=shards, dtype=ref.dtype,
                          compressors=[ZstdCodec(level=1)] if zstd else None, fill_value=0)
    z[:] = ref
    return ref


# -- readers: name -> factory(url of the array, server) -> read() -> array -----------------------------


def _sync(device: bool) -> None:
    if device:
        import cupy

        cupy.cuda.runtime.deviceSynchronize()


def _gpu_config(device: bool) -> Any:
    import contextlib

    if not device:
        return contextlib.nullcontext()
    import zarr

    return zarr.config.enable_gpu()


def reader_gdsstore(url: str, srv: Server, device: bool, settings: dict[str, Any] | None = None) -> Callable[[], Any]:
    import zarr

    import gdsstore

    def read() -> Any:
        with gdsstore.config.set(settings or {}), gdsstore.enable_gpu(buffers=device):
            return zarr.open_array(gdsstore.GDSStore(url, read_only=True, storage_options=srv.gds_options or None), mode="r")[:]

    return read


def gdsstore_variant(spec: str) -> tuple[str, Callable[[str, Server, bool], Callable[[], Any]]]:
    """A second gdsstore reader under other settings (``--gds-variant KEY=VALUE[,KEY=VALUE]``), interleaved
    with the others in every round (an A/B on one instance); its label names the settings."""
    settings = {}
    for pair in spec.split(","):
        key, value = pair.split("=", 1)
        settings[key] = int(value) if value.lstrip("-").isdigit() else value
    return f"gdsstore ({spec})", lambda url, srv, device: reader_gdsstore(url, srv, device, settings)


def reader_fsspec(url: str, srv: Server, device: bool) -> Callable[[], Any]:
    import zarr
    from zarr.storage import FsspecStore

    store = FsspecStore.from_url(srv.fsspec_url(url), storage_options=srv.fsspec_options, read_only=True)

    def read() -> Any:
        with _gpu_config(device):
            return zarr.open_array(store, mode="r")[:]

    return read


def reader_obstore(url: str, srv: Server, device: bool) -> Callable[[], Any]:
    import zarr
    from zarr.storage import ObjectStore

    store = ObjectStore(srv.obstore(url), read_only=True)

    def read() -> Any:
        with _gpu_config(device):
            return zarr.open_array(store, mode="r")[:]

    return read


def reader_zarrs(url: str, srv: Server, device: bool) -> Callable[[], Any]:
    """zarrs (zarr's Rust codec pipeline) over zarr ``ObjectStore``, then ``cupy.asarray``."""
    import zarr
    import zarrs  # noqa: F401  (the pipeline must be importable)
    from zarr.storage import ObjectStore

    store = ObjectStore(srv.obstore(url), read_only=True)

    def read() -> Any:
        with zarr.config.set({"codec_pipeline.path": "zarrs.ZarrsCodecPipeline"}):
            x = zarr.open_array(store, mode="r")[:]
        if device:
            import cupy

            return cupy.asarray(x)
        return x

    return read


def reader_tensorstore(url: str, srv: Server, device: bool) -> Callable[[], Any]:
    import tensorstore as ts

    if url.startswith("s3://"):
        bucket, _, path = url.removeprefix("s3://").partition("/")
        kvstore = {"driver": "s3", "bucket": bucket, "path": path.rstrip("/") + "/",
                   "endpoint": srv.endpoint, "aws_region": "us-east-1",  # type: ignore[attr-defined]
                   "aws_credentials": {"type": "anonymous"}}
    else:
        kvstore = {"driver": "http", "base_url": url}
    arr = ts.open({"driver": "zarr3", "kvstore": kvstore}, read=True).result()

    def read() -> Any:
        x = arr.read().result()
        if device:
            import cupy

            return cupy.asarray(x)
        return x

    return read


READERS: dict[str, Callable[[str, Server, bool], Callable[[], Any]]] = {
    "gdsstore": reader_gdsstore,
    "zarr FsspecStore": reader_fsspec,
    "zarr ObjectStore (obstore)": reader_obstore,
    "zarrs (ObjectStore)": reader_zarrs,
    "tensorstore": reader_tensorstore,
}


# -- servers -------------------------------------------------------------------------------------------


class Server:
    """Where the arrays live: URLs and options per reader."""

    name = ""
    gds_options: dict[str, Any] = {}
    fsspec_options: dict[str, Any] = {}

    def url(self, rel: str) -> str:
        raise NotImplementedError

    def fsspec_url(self, url: str) -> str:
        return url

    def obstore(self, url: str) -> Any:
        raise NotImplementedError

    def close(self) -> None:
        pass


class Nginx(Server):
    name = "nginx"

    def __init__(self, root: str, workers: int) -> None:
        from servers.nginx import NginxServer

        self.srv = NginxServer(root, workers, tcp_nopush=False)
        self.root = root

    def url(self, rel: str) -> str:
        return self.srv.url(rel)

    def obstore(self, url: str) -> Any:
        from obstore.store import HTTPStore

        return HTTPStore.from_url(url, client_options={"allow_http": True})

    def put_tree(self, local: str, rel: str) -> None:
        pass  # written straight under the root

    def close(self) -> None:
        self.srv.close()


class NginxS3(Server):
    """nginx serving a directory as a path-style S3 endpoint (``/bench/key``): it ignores signatures, so
    a read measures the S3 clients' own signing and request cost, not a slow S3 server's."""

    name = "nginx as S3"

    def __init__(self, root: str, workers: int) -> None:
        from servers.nginx import NginxServer

        os.makedirs(os.path.join(root, "bench"), exist_ok=True)
        self.srv = NginxServer(root, workers, tcp_nopush=False)
        self.root = os.path.join(root, "bench")
        self.endpoint = self.srv.url("").rstrip("/")
        creds = {"key": "bench-key", "secret": "bench-secret"}
        self.gds_options = {**creds, "endpoint_url": self.endpoint, "region_name": "us-east-1"}
        self.fsspec_options = {**creds, "endpoint_url": self.endpoint}

    def url(self, rel: str) -> str:
        return f"s3://bench/{rel}"

    def obstore(self, url: str) -> Any:
        from obstore.store import S3Store

        return S3Store("bench", prefix=url.removeprefix("s3://bench/"), endpoint=self.endpoint,
                       access_key_id="bench-key", secret_access_key="bench-secret", region="us-east-1",
                       virtual_hosted_style_request=False, client_options={"allow_http": True})

    def put_tree(self, local: str, rel: str) -> None:
        pass  # written straight under the bucket's directory

    def close(self) -> None:
        self.srv.close()


class Moto(Server):
    name = "moto S3"

    def __init__(self) -> None:
        import botocore.session
        from servers.moto_s3 import MotoServer

        self.srv = MotoServer()
        o = self.srv.storage_options
        self.gds_options = dict(o)
        self.fsspec_options = {"key": o["key"], "secret": o["secret"], "endpoint_url": o["endpoint_url"]}
        self.client = botocore.session.get_session().create_client(
            "s3", region_name="us-east-1", endpoint_url=o["endpoint_url"],
            aws_access_key_id=o["key"], aws_secret_access_key=o["secret"],
        )
        self.client.create_bucket(Bucket="bench")

    def url(self, rel: str) -> str:
        return f"s3://bench/{rel}"

    def obstore(self, url: str) -> Any:
        from obstore.store import S3Store

        o = self.srv.storage_options
        return S3Store("bench", prefix=url.removeprefix("s3://bench/"), endpoint=o["endpoint_url"],
                       access_key_id=o["key"], secret_access_key=o["secret"], region="us-east-1",
                       virtual_hosted_style_request=False, client_options={"allow_http": True})

    def put_tree(self, local: str, rel: str) -> None:
        files = [p for p in Path(local).rglob("*") if p.is_file()]

        def put(p: Path) -> None:
            self.client.put_object(Bucket="bench", Key=f"{rel}/{p.relative_to(local)}", Body=p.read_bytes())

        with ThreadPoolExecutor(16) as ex:
            list(ex.map(put, files))

    def close(self) -> None:
        self.srv.close()


# -- measuring -----------------------------------------------------------------------------------------


def measure(read: Callable[[], Any], ref: np.ndarray, device: bool) -> tuple[float, float]:
    """One read: (seconds, CPU seconds of this process); the result is checked against ``ref``."""
    c0, t0 = time.process_time(), time.perf_counter()
    x = read()
    _sync(device)
    dt, cpu = time.perf_counter() - t0, time.process_time() - c0
    host = x.get() if hasattr(x, "get") and not isinstance(x, np.ndarray) else np.asarray(x)
    if not np.array_equal(host, ref):
        raise AssertionError("wrong result")
    return dt, cpu


def run_rows(rows: dict[str, Any], srv: Server, tmp: str, args: argparse.Namespace) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for i, (name, (shape, chunks, shards, zstd)) in enumerate(rows.items()):
        rel = f"a{i}.zarr"
        local = (os.path.join(tmp, rel) if isinstance(srv, Nginx)
                 else os.path.join(srv.root, rel) if isinstance(srv, NginxS3) else os.path.join(tmp, "up", rel))
        ref = write(local, shape, chunks, shards, zstd)
        srv.put_tree(local, rel)
        readers: dict[str, Callable[[], Any]] = {}
        notes: dict[str, str] = {}
        for label, make in READERS.items():
            try:
                readers[label] = make(srv.url(rel), srv, args.device)
                measure(readers[label], ref, args.device)  # warm-up (connections, metadata, JIT)
            except Exception as exc:
                readers.pop(label, None)
                notes[label] = f"{type(exc).__name__}: {str(exc)[:80]}"
        times: dict[str, list[tuple[float, float]]] = {k: [] for k in readers}
        for _ in range(args.rounds):
            for label, read in list(readers.items()):
                try:
                    times[label].append(measure(read, ref, args.device))
                except Exception as exc:  # a server overloaded by one reader: note it, keep the others
                    readers.pop(label)
                    notes[label] = f"failed in round {len(times[label]) + 1}: {type(exc).__name__}: {str(exc)[:80]}"
        times = {k: v for k, v in times.items() if v}
        out.append(summarize(name, srv.name, ref.nbytes, times, notes))
        print(format_rows(out[-1:]), flush=True)
    return out


def summarize(name: str, server: str, nbytes: int, times: dict[str, list[tuple[float, float]]],
              notes: dict[str, str]) -> dict[str, Any]:
    cells = {}
    for label, ts in times.items():
        sec = statistics.median(t for t, _ in ts)
        cpu = statistics.median(c for _, c in ts)
        cells[label] = {"GB/s": nbytes / sec / 1e9, "CPU-s/GB": cpu / (nbytes / 1e9), "s": sec}
    return {"row": name, "server": server, "bytes": nbytes, "cells": cells, "notes": notes}


def single_object(srv: Server, tmp: str, args: argparse.Namespace) -> dict[str, Any]:
    """One 256 MiB object: ``gdsstore.open(url).read()`` vs obstore ``get`` (host buffers)."""
    import obstore

    import gdsstore

    blob = np.random.default_rng(3).integers(0, 256, SINGLE, dtype=np.uint8)
    rel = "single.bin"
    if isinstance(srv, Nginx):
        blob.tofile(os.path.join(srv.root, rel))
        store = srv.obstore(srv.url(""))
    else:
        srv.client.put_object(Bucket="bench", Key=rel, Body=blob.tobytes())  # type: ignore[attr-defined]
        store = srv.obstore("s3://bench/")

    def ours() -> Any:
        with gdsstore.open(srv.url(rel), **srv.gds_options) as f:
            buf = np.empty(f.size, dtype=np.uint8)
            f.read(buf)
        return buf

    def theirs() -> Any:
        return np.frombuffer(obstore.get(store, rel).bytes(), dtype=np.uint8)

    readers = {"gdsstore.open().read()": ours, "obstore get": theirs}
    for read in readers.values():
        measure(read, blob, False)
    times: dict[str, list[tuple[float, float]]] = {k: [] for k in readers}
    for _ in range(args.rounds):
        for label, read in readers.items():
            times[label].append(measure(read, blob, False))
    row = summarize("one 256 MiB object", srv.name, SINGLE, times, {})
    print(format_rows([row]), flush=True)
    return row


def format_rows(rows: list[dict[str, Any]]) -> str:
    lines = []
    for r in rows:
        cells = r["cells"]
        best_other = max((c["GB/s"] for k, c in cells.items() if not k.startswith("gdsstore")), default=0.0)
        ours = next((c for k, c in cells.items() if k.startswith("gdsstore")), None)
        ratio = f"{ours['GB/s'] / best_other:.2f}x" if ours and best_other else "-"
        text = "; ".join(f"{k} {c['GB/s']:.3f} GB/s, {c['CPU-s/GB']:.1f} CPU-s/GB" for k, c in cells.items())
        notes = "; ".join(f"{k}: {v}" for k, v in r["notes"].items())
        lines.append(f"| {r['server']} | {r['row']} | {text} | {ratio} | {notes} |")
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", action="store_true", help="CuPy buffers and the GPU rows (GPU machine)")
    p.add_argument("--servers", default="nginx,moto", help="comma-separated: nginx, nginx-s3, moto")
    p.add_argument("--nginx-workers", type=int, default=2)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--zarr-concurrency", type=int, default=64)
    p.add_argument("--wave-concurrency", type=int, default=None, help="gdsstore remote.wave_concurrency")
    p.add_argument("--no-single", action="store_true", help="skip the single-object row")
    p.add_argument("--gds-variant", action="append", default=[],
                   help="also gdsstore under these settings, KEY=VALUE[,KEY=VALUE] (repeatable)")
    p.add_argument("--out", default=None, help="write the table (Markdown) here too")
    args = p.parse_args()

    import zarr

    import gdsstore

    zarr.config.set({"async.concurrency": args.zarr_concurrency})
    if args.wave_concurrency:
        gdsstore.config.set({"remote.wave_concurrency": args.wave_concurrency})
    for spec in args.gds_variant:
        label, make = gdsstore_variant(spec)
        READERS[label] = make
    p_rows = GPU_ROWS if args.device else CPU_ROWS
    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="remote-zarr-bench-") as tmp:
        os.chmod(tmp, 0o755)
        for name in args.servers.split(","):
            srv: Server = (Nginx(tmp, args.nginx_workers) if name == "nginx"
                           else NginxS3(tmp, args.nginx_workers) if name == "nginx-s3" else Moto())
            try:
                results += run_rows(S3_ROWS if name == "nginx-s3" and args.device else p_rows, srv, tmp, args)
                if not args.no_single and not args.device:
                    results.append(single_object(srv, tmp, args))
            finally:
                srv.close()
    head = ["| server | row | GB/s and CPU-s/GB per reader (median) | gdsstore / best other | notes |",
            "|---|---|---|---|---|"]
    cmd = "python " + " ".join([os.path.relpath(sys.argv[0]), *sys.argv[1:]])
    text = "\n".join([f"`{cmd}`", "", f"rounds {args.rounds} (interleaved), nginx tcp_nopush off, "
                      f"{args.nginx_workers} nginx workers, zarr async.concurrency {args.zarr_concurrency}, "
                      f"{os.cpu_count()} CPUs", "", *head, format_rows(results), ""])
    print(text)
    if args.out:
        Path(args.out).write_text(text)


if __name__ == "__main__":
    main()
