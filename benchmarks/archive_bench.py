"""Archives through references: netCDF4/HDF5 files read whole through gdsstore.archives and the anchors.

Files made here with h5py: ``--files`` files, each a float32 variable ``t`` of ``--steps x 512 x 512``
in ``1 x 128 x 128`` chunks (64 KiB), zlib level 1 + shuffle. Readers, each reading every file's ``t``:

- ``gdsstore``: ``gdsstore.archives.open_virtual(ManifestStore)["t"][:]`` (``.read(..., device=True)``
  with ``--device``);
- ``VirtualStore+zarr``: ``zarr.open_group(gdsstore.archives.VirtualStore(ManifestStore))["t"][:]``
  (chunk reads batched per tick, zarr's decode), and the same under ``gdsstore.enable_pipeline()``;
- ``manifeststore+zarr``: ``zarr.open_group(ManifestStore)["t"][:]`` (VirtualiZarr's store);
- ``kerchunk+fsspec``: kerchunk references through zarr's ``FsspecStore`` over fsspec's reference
  filesystem;
- ``h5py``: ``h5py.File(path)["t"][:]``;
- ``gdsstore, one dataset`` and ``manifeststore+zarr, one dataset``: the files' ``t`` concatenated in
  time into one ManifestStore (VirtualiZarr's multi-file flow), read whole in one call.

With ``--http`` the same files are also served by nginx on 127.0.0.1 (``tests/servers/nginx.py``; nginx
must be installed) and read through references rewritten to their URLs: ``gdsstore http``
(``open_virtual`` over the ManifestStore with http:// paths: one wave per read; ``gdsstore, one dataset
http``: the files as one dataset, one read) and ``kerchunk+fsspec
http`` (zarr's ``FsspecStore`` over fsspec's reference filesystem, aiohttp underneath), and VirtualiZarr's own ``manifeststore+zarr http`` (obstore's
``HTTPStore`` in its registry). With ``--s3`` nginx answers the same files as path-style S3 GETs (it
ignores the signature, so the rows measure the S3 clients): ``gdsstore s3``, ``manifeststore+zarr s3``
(obstore's ``S3Store``) and ``kerchunk+fsspec s3`` where s3fs is installed. ``--chunk 1m`` makes the
files with 1 x 512 x 512 chunks (1 MiB) instead of 64 KiB.

With ``--device`` the anchors add ``cupy.asarray``. Interleaved rounds (the readers' order rotates),
medians of wall time and of process CPU-seconds, every result's bytes checked against h5py's (CRC-32).

    .venv/bin/python benchmarks/archive_bench.py --files 4 --steps 256 --rounds 5 \\
        --out benchmarks/results/2026-12-02-cpu-archives/archives.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
import warnings
import zlib
from collections.abc import Callable
from typing import Any

import numpy as np

Reader = Callable[[], list[Any]]  # one round: every file's array


#: ``--chunk``: the chunk shape of ``t`` (64 KiB or 1 MiB of float32) and the file names' suffix.
CHUNKS = {"64k": ((1, 128, 128), ""), "1m": ((1, 512, 512), "-1m")}


def _make_file(p: str, i: int, steps: int, shape: tuple[int, int, int]) -> str:
    import h5py

    y, x = np.mgrid[0:512, 0:512].astype("f4") / 512
    rng = np.random.default_rng(i)
    tmp = f"{p}.part{os.getpid()}"  # a file cut short by a timeout is never taken for a whole one
    with h5py.File(tmp, "w") as f:
        d = f.create_dataset(
            "t", shape=(steps, 512, 512), chunks=shape, dtype="f4",
            compression="gzip", compression_opts=1, shuffle=True,
        )
        for s in range(steps):
            # A smooth field plus noise at 1e-3: a climate-like compression ratio (about 1.6).
            field = np.sin(6 * x + s / 7) * np.cos(4 * y - i) + rng.standard_normal((512, 512)) * 1e-3
            d[s] = field.astype("f4")
    os.replace(tmp, p)
    return p


def make_files(root: str, files: int, steps: int, chunk: str = "64k") -> list[str]:
    """The files, made once (h5py compresses on one core: one process per file)."""
    from concurrent.futures import ProcessPoolExecutor

    shape, suffix = CHUNKS[chunk]
    paths = [os.path.join(root, f"f{i}{suffix}.nc") for i in range(files)]
    todo = [(p, i) for i, p in enumerate(paths) if not os.path.exists(p)]
    if todo:
        with ProcessPoolExecutor(min(len(todo), os.cpu_count() or 1)) as pool:
            list(pool.map(_make_file, *zip(*todo), [steps] * len(todo), [shape] * len(todo)))
    return paths


def manifest_store(path: str) -> Any:
    from obspec_utils.registry import ObjectStoreRegistry
    from obstore.store import LocalStore
    from virtualizarr.parsers import HDFParser

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return HDFParser()(f"file://{path}", registry=ObjectStoreRegistry({"file://": LocalStore()}))


def _to_device(device: bool) -> Callable[[Any], Any]:
    if not device:
        return lambda a: a
    import cupy as cp

    return cp.asarray


def _renamed(path: str, url: str, registry: Any = None) -> Any:
    """The ManifestStore of ``path`` with its chunks' file rewritten to ``url``."""
    from virtualizarr.manifests import ManifestGroup, ManifestStore

    g = manifest_store(path)._group
    arrays = {k: a.rename_paths(lambda old, u=url: u if old else old) for k, a in g.arrays.items()}
    return ManifestStore(ManifestGroup(arrays=arrays, attributes=dict(g.metadata.attributes)), registry=registry)


def remote_readers(paths: list[str], root: str, server: Any, scheme: str, device: bool) -> dict[str, Reader]:
    """The readers of the ``--http`` and ``--s3`` rows: the same files through nginx, which serves the
    directory above ``root`` (``root``'s name is the S3 bucket: nginx answers path-style S3 GETs as files
    and ignores the signature, so these rows measure the clients)."""
    import kerchunk.hdf
    import zarr
    from fsspec.implementations.reference import ReferenceFileSystem
    from obspec_utils.registry import ObjectStoreRegistry
    from zarr.storage import FsspecStore

    import gdsstore.archives as ga

    up = _to_device(device)
    base = server.url("").rstrip("/")
    bucket = os.path.basename(root)
    creds = {"key": "bench-key", "secret": "bench-secret"}
    if scheme == "http":
        from obstore.store import HTTPStore

        urls = [f"{base}/{bucket}/{os.path.basename(p)}" for p in paths]
        http = HTTPStore.from_url(f"{base}/{bucket}", client_options={"allow_http": True})
        registry = ObjectStoreRegistry({f"{base}/{bucket}": http})
        options: dict[str, Any] = {}
        fs_options: dict[str, Any] | None = {"asynchronous": True}
    else:
        from obstore.store import S3Store

        urls = [f"s3://{bucket}/{os.path.basename(p)}" for p in paths]
        s3 = S3Store(bucket, endpoint=base, access_key_id=creds["key"], secret_access_key=creds["secret"],
                     region="us-east-1", virtual_hosted_style_request=False, client_options={"allow_http": True})
        registry = ObjectStoreRegistry({f"s3://{bucket}": s3})
        options = {**creds, "endpoint_url": base, "region_name": "us-east-1"}
        try:
            import s3fs  # noqa: F401
            fs_options = {**creds, "endpoint_url": base, "asynchronous": True}
        except ImportError:  # kerchunk's S3 reads need s3fs: the row is left out where it is missing
            fs_options = None
    groups = [ga.open_virtual(_renamed(p, u), storage_options=options) for p, u in zip(paths, urls)]
    stores = [_renamed(p, u, registry) for p, u in zip(paths, urls)]
    refs = []
    for p, url in zip(paths, urls):
        body = kerchunk.hdf.SingleHdf5ToZarr(p, inline_threshold=0).translate()["refs"]
        refs.append({k: [url, *v[1:]] if isinstance(v, list) else v for k, v in body.items()})

    one = ga.open_virtual(_combined([_renamed(p, u) for p, u in zip(paths, urls)], registry), storage_options=options)
    steps = int(one["t"].shape[0]) // len(paths)

    def ours() -> list[Any]:
        return [g["t"].read(..., device=device) for g in groups]

    def ours_combined() -> list[Any]:
        a = one["t"].read(..., device=device)
        return [a[i * steps : (i + 1) * steps] for i in range(len(paths))]

    def manifest() -> list[Any]:
        return [up(zarr.open_group(ms, mode="r")["t"][:]) for ms in stores]

    def kerchunk_remote() -> list[Any]:
        out = []
        for r in refs:
            fs = ReferenceFileSystem({"version": 1, "refs": r}, remote_protocol=scheme,
                                     remote_options=fs_options, asynchronous=True)
            out.append(up(zarr.open_group(FsspecStore(fs, read_only=True), mode="r", zarr_format=2)["t"][:]))
        return out

    rs = {f"gdsstore {scheme}": ours, f"gdsstore, one dataset {scheme}": ours_combined,
          f"manifeststore+zarr {scheme}": manifest}
    if fs_options is not None:
        rs[f"kerchunk+fsspec {scheme}"] = kerchunk_remote
    return rs


def readers(paths: list[str], device: bool) -> dict[str, Reader]:
    import h5py
    import kerchunk.hdf
    import zarr
    from fsspec.implementations.reference import ReferenceFileSystem
    from zarr.storage import FsspecStore

    import gdsstore
    import gdsstore.archives as ga

    up = _to_device(device)
    stores = [manifest_store(p) for p in paths]
    groups = [ga.open_virtual(ms) for ms in stores]
    vstores = [ga.VirtualStore(ms) for ms in stores]
    refs = [kerchunk.hdf.SingleHdf5ToZarr(p, inline_threshold=0).translate() for p in paths]

    def ours() -> list[Any]:
        return [g["t"].read(..., device=device) for g in groups]

    def manifest() -> list[Any]:
        return [up(zarr.open_group(ms, mode="r")["t"][:]) for ms in stores]

    def vstore() -> list[Any]:
        return [up(zarr.open_group(s, mode="r")["t"][:]) for s in vstores]

    def vstore_pipeline() -> list[Any]:
        with gdsstore.enable_pipeline():
            return [up(zarr.open_group(s, mode="r")["t"][:]) for s in vstores]

    def kerchunk_fsspec() -> list[Any]:
        out = []
        for r in refs:
            fs = ReferenceFileSystem(r, asynchronous=True)
            store = FsspecStore(fs, read_only=True)
            out.append(up(zarr.open_group(store, mode="r", zarr_format=2)["t"][:]))
        return out

    def h5() -> list[Any]:
        out = []
        for p in paths:
            with h5py.File(p, "r") as f:
                out.append(up(f["t"][:]))
        return out

    combined = combined_store(paths)
    cgroup = ga.open_virtual(combined)
    with h5py.File(paths[0], "r") as f:
        steps = len(f["t"])

    def per_file(a: Any) -> list[Any]:
        return [a[i * steps : (i + 1) * steps] for i in range(len(paths))]

    def ours_combined() -> list[Any]:
        return per_file(cgroup["t"].read(..., device=device))

    def manifest_combined() -> list[Any]:
        return per_file(up(zarr.open_group(combined, mode="r")["t"][:]))

    rs = {
        "gdsstore": ours, "VirtualStore+zarr": vstore, "VirtualStore+enable_pipeline": vstore_pipeline,
        "manifeststore+zarr": manifest, "kerchunk+fsspec": kerchunk_fsspec, "h5py": h5,
        "gdsstore, one dataset": ours_combined, "manifeststore+zarr, one dataset": manifest_combined,
    }
    return rs


def combined_store(paths: list[str]) -> Any:
    """One ManifestStore of every file's ``t`` concatenated in time (VirtualiZarr's multi-file flow:
    the virtual datasets of many files combined into one), over the local filesystem."""
    from obspec_utils.registry import ObjectStoreRegistry
    from obstore.store import LocalStore

    return _combined([manifest_store(p) for p in paths], ObjectStoreRegistry({"file://": LocalStore()}))


def _combined(stores: list[Any], registry: Any) -> Any:
    from virtualizarr.manifests import ManifestGroup, ManifestStore

    cat = np.concatenate([ms._group.arrays["t"] for ms in stores], axis=0)
    return ManifestStore(ManifestGroup(arrays={"t": cat}, attributes={}), registry=registry)


def _crc(arrays: list[Any]) -> list[int]:
    return [zlib.crc32(memoryview(np.ascontiguousarray(a.get() if hasattr(a, "get") else a)).cast("B")) for a in arrays]


def measure(
    rs: dict[str, Reader], rounds: int, want: list[int], device: bool,
    anchor_rounds: int | None = None, partial: Callable[[dict[str, dict[str, Any]]], object] | None = None,
) -> dict[str, dict[str, Any]]:
    """Interleaved rounds (the order rotates); the anchors' rounds stop after ``anchor_rounds`` (one read of
    a slow anchor takes seconds: its median settles in fewer rounds). ``partial`` gets the results so far
    after every round, so a run cut by a timeout still leaves them."""
    times: dict[str, list[float]] = {k: [] for k in rs}
    cpu: dict[str, list[float]] = {k: [] for k in rs}
    names = list(rs)
    nbytes = 0
    wrong: dict[str, list[str]] = {}
    last = rounds if anchor_rounds is None else anchor_rounds
    for r in range(rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:  # interleaved, order rotating
            if r >= last and name.removesuffix(_group(name)) in ANCHORS:
                continue
            t0, c0 = time.perf_counter(), time.process_time()
            out = rs[name]()
            if device:
                import cupy as cp

                cp.cuda.runtime.deviceSynchronize()
            times[name].append(time.perf_counter() - t0)
            cpu[name].append(time.process_time() - c0)
            print(f"round {r}: {name}: {times[name][-1]:.3f} s", file=sys.stderr, flush=True)
            got = _crc(out)
            if got != want:  # recorded and reported, the other readers go on (a wrong result is no result)
                bad = [i for i, (g, w) in enumerate(zip(got, want)) if g != w]
                wrong.setdefault(name, []).append(f"round {r}: files {bad} differ from h5py's")
                print(f"{name}: round {r}: bytes of files {bad} differ from h5py's", file=sys.stderr, flush=True)
            nbytes = sum(int(a.nbytes) for a in out)
        if partial is not None:
            partial(_summary(times, cpu, wrong, nbytes))
    return _summary(times, cpu, wrong, nbytes)


def _summary(
    times: dict[str, list[float]], cpu: dict[str, list[float]], wrong: dict[str, list[str]], nbytes: int
) -> dict[str, dict[str, Any]]:
    return {
        k: {
            "seconds": statistics.median(times[k]),
            "cpu_seconds": statistics.median(cpu[k]),
            "gbps": nbytes / statistics.median(times[k]) / 1e9,
            "rounds": times[k],
            "nbytes": nbytes,
            **({"wrong": wrong[k]} if k in wrong else {}),
        }
        for k in times
        if times[k]
    }


#: The issue's anchors: VirtualiZarr's ManifestStore + zarr, kerchunk through FsspecStore, h5py.
ANCHORS = ("manifeststore+zarr", "kerchunk+fsspec", "h5py", "manifeststore+zarr, one dataset")


def _group(name: str) -> str:
    """``""`` for the local rows, ``" http"`` / ``" s3"`` for the remote ones."""
    return next((f" {g}" for g in ("http", "s3") if name.endswith(f" {g}")), "")


def table(res: dict[str, dict[str, Any]]) -> str:
    """One row per reader; each compared with the best anchor reading from the same place."""
    best: dict[str, float] = {}
    for k, v in res.items():
        if k.removesuffix(_group(k)) in ANCHORS:
            best[_group(k)] = max(best.get(_group(k), 0.0), v["gbps"])
    lines = ["| reader | GB/s | s (median) | CPU-s (median) | vs the best anchor of its place |",
             "|---|---:|---:|---:|---:|"]
    for k, v in res.items():
        ratio = f"{v['gbps'] / best[_group(k)]:.2f}x" if best.get(_group(k)) else "-"
        if v.get("wrong"):
            ratio = f"WRONG BYTES ({'; '.join(v['wrong'])})"
        lines.append(f"| {k} | {v['gbps']:.3f} | {v['seconds']:.3f} | {v['cpu_seconds']:.2f} | {ratio} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--files", type=int, default=4)
    ap.add_argument("--steps", type=int, default=256, help="time steps per file (256: 256 MiB raw... see --help)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--root", default=os.path.join(tempfile.gettempdir(), "gdsstore-archive-bench"))
    ap.add_argument("--device", action="store_true", help="CuPy results (the anchors add cupy.asarray)")
    ap.add_argument("--out", help="write the results as JSON (and the table beside it as .md)")
    ap.add_argument("--http", action="store_true", help="also read the files through nginx (the http rows)")
    ap.add_argument("--s3", action="store_true", help="also read them through nginx as a path-style S3 endpoint")
    ap.add_argument("--chunk", choices=sorted(CHUNKS), default="64k", help="chunks of 1x128x128 or 1x512x512")
    ap.add_argument("--nginx-workers", type=int, default=1)
    ap.add_argument("--skip", default="", help="comma-separated readers left out (e.g. VirtualStore+zarr)")
    ap.add_argument("--anchor-rounds", type=int, default=None,
                    help="rounds of the anchors (default: --rounds; one read of a slow anchor takes seconds)")
    a = ap.parse_args()
    os.makedirs(a.root, exist_ok=True)
    paths = make_files(a.root, a.files, a.steps, a.chunk)
    rs = readers(paths, a.device)
    server = None
    if a.http or a.s3:
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
        from servers.nginx import NginxServer

        os.chmod(a.root, 0o755)
        # nopush on: small ranged GETs stall ~40 ms
        server = NginxServer(os.path.dirname(os.path.abspath(a.root)), a.nginx_workers, tcp_nopush=False)
        for scheme in ("http", "s3") if a.http and a.s3 else ("http",) if a.http else ("s3",):
            rs.update(remote_readers(paths, os.path.abspath(a.root), server, scheme, a.device))
    for name in filter(None, a.skip.split(",")):
        rs.pop(name)
    meta = {
        "command": " ".join([os.path.basename(sys.executable), *sys.argv]),
        "files": a.files, "steps": a.steps, "chunk": a.chunk, "device": a.device, "http": a.http, "s3": a.s3,
        "rounds": a.rounds, "anchor_rounds": a.anchor_rounds or a.rounds,
        "machine": platform.platform(), "cpus": os.cpu_count(),
        "stored_bytes": sum(os.path.getsize(p) for p in paths),
    }
    try:
        want = _crc(rs["h5py"]())
        res = measure(rs, a.rounds, want, a.device, a.anchor_rounds, lambda r: _write(a.out, meta, r))
    finally:
        if server is not None:
            server.close()
    print(_write(a.out, meta, res))


def _write(out: str | None, meta: dict[str, Any], res: dict[str, dict[str, Any]]) -> str:
    """The table; with ``out`` also the JSON and the table beside it (rewritten after every round)."""
    text = table(res)
    if out:
        os.makedirs(os.path.dirname(out) or ".", exist_ok=True)
        with open(out, "w") as f:
            json.dump({"meta": meta, "results": res}, f, indent=1)
        with open(os.path.splitext(out)[0] + ".md", "w") as f:
            f.write(text + "\n")
    return text

if __name__ == "__main__":
    main()
