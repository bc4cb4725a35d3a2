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
- ``h5py``: ``h5py.File(path)["t"][:]``.

With ``--http`` the same files are also served by nginx on 127.0.0.1 (``tests/servers/nginx.py``; nginx
must be installed) and read through references rewritten to their URLs: ``gdsstore http``
(``open_virtual`` over the ManifestStore with http:// paths: one wave per read) and ``kerchunk+fsspec
http`` (zarr's ``FsspecStore`` over fsspec's reference filesystem, aiohttp underneath).

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


def make_files(root: str, files: int, steps: int) -> list[str]:
    import h5py

    paths = []
    y, x = np.mgrid[0:512, 0:512].astype("f4") / 512
    for i in range(files):
        p = os.path.join(root, f"f{i}.nc")
        if not os.path.exists(p):
            rng = np.random.default_rng(i)
            with h5py.File(p, "w") as f:
                d = f.create_dataset(
                    "t", shape=(steps, 512, 512), chunks=(1, 128, 128), dtype="f4",
                    compression="gzip", compression_opts=1, shuffle=True,
                )
                for s in range(steps):
                    # A smooth field plus noise at 1e-3: a climate-like compression ratio (about 1.6).
                    field = np.sin(6 * x + s / 7) * np.cos(4 * y - i) + rng.standard_normal((512, 512)) * 1e-3
                    d[s] = field.astype("f4")
        paths.append(p)
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


def http_readers(paths: list[str], root: str, base_url: str, device: bool) -> dict[str, Reader]:
    """The readers of the ``--http`` rows: the same files through nginx at ``base_url``."""
    import kerchunk.hdf
    import zarr
    from fsspec.implementations.reference import ReferenceFileSystem
    from virtualizarr.manifests import ManifestGroup, ManifestStore
    from zarr.storage import FsspecStore

    import gdsstore.archives as ga

    up = _to_device(device)
    urls = [f"{base_url}/{os.path.relpath(p, root)}" for p in paths]
    groups = []
    for p, url in zip(paths, urls):
        g = manifest_store(p)._group
        arrays = {k: a.rename_paths(lambda old, u=url: u if old else old) for k, a in g.arrays.items()}
        groups.append(ga.open_virtual(ManifestStore(ManifestGroup(arrays=arrays, attributes=dict(g.metadata.attributes)))))
    refs = []
    for p, url in zip(paths, urls):
        body = kerchunk.hdf.SingleHdf5ToZarr(p, inline_threshold=0).translate()["refs"]
        refs.append({k: [url, *v[1:]] if isinstance(v, list) else v for k, v in body.items()})

    def ours() -> list[Any]:
        return [g["t"].read(..., device=device) for g in groups]

    def kerchunk_http() -> list[Any]:
        out = []
        for r in refs:
            fs = ReferenceFileSystem({"version": 1, "refs": r}, remote_protocol="http",
                                     remote_options={"asynchronous": True}, asynchronous=True)
            out.append(up(zarr.open_group(FsspecStore(fs, read_only=True), mode="r", zarr_format=2)["t"][:]))
        return out

    return {"gdsstore http": ours, "kerchunk+fsspec http": kerchunk_http}


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

    return {
        "gdsstore": ours, "VirtualStore+zarr": vstore, "VirtualStore+enable_pipeline": vstore_pipeline,
        "manifeststore+zarr": manifest, "kerchunk+fsspec": kerchunk_fsspec, "h5py": h5,
    }


def _crc(arrays: list[Any]) -> list[int]:
    return [zlib.crc32(memoryview(np.ascontiguousarray(a.get() if hasattr(a, "get") else a)).cast("B")) for a in arrays]


def measure(rs: dict[str, Reader], rounds: int, want: list[int], device: bool) -> dict[str, dict[str, Any]]:
    times: dict[str, list[float]] = {k: [] for k in rs}
    cpu: dict[str, list[float]] = {k: [] for k in rs}
    names = list(rs)
    nbytes = 0
    for r in range(rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:  # interleaved, order rotating
            t0, c0 = time.perf_counter(), time.process_time()
            out = rs[name]()
            if device:
                import cupy as cp

                cp.cuda.runtime.deviceSynchronize()
            times[name].append(time.perf_counter() - t0)
            cpu[name].append(time.process_time() - c0)
            if _crc(out) != want:
                raise AssertionError(f"{name}: bytes differ from h5py's")
            nbytes = sum(int(a.nbytes) for a in out)
    return {
        k: {
            "seconds": statistics.median(times[k]),
            "cpu_seconds": statistics.median(cpu[k]),
            "gbps": nbytes / statistics.median(times[k]) / 1e9,
            "rounds": times[k],
            "nbytes": nbytes,
        }
        for k in rs
    }


def table(res: dict[str, dict[str, Any]]) -> str:
    base = res["manifeststore+zarr"]["gbps"]
    lines = ["| reader | GB/s | s (median) | CPU-s (median) | vs ManifestStore + zarr |", "|---|---:|---:|---:|---:|"]
    for k, v in res.items():
        lines.append(f"| {k} | {v['gbps']:.3f} | {v['seconds']:.3f} | {v['cpu_seconds']:.2f} | {v['gbps'] / base:.2f}x |")
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
    a = ap.parse_args()
    os.makedirs(a.root, exist_ok=True)
    paths = make_files(a.root, a.files, a.steps)
    rs = readers(paths, a.device)
    server = None
    if a.http:
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
        from servers.nginx import NginxServer

        os.chmod(a.root, 0o755)
        server = NginxServer(a.root, tcp_nopush=False)  # nopush on: small ranged GETs stall ~40 ms
        rs.update(http_readers(paths, a.root, server.url().rstrip("/"), a.device))
    try:
        want = _crc(rs["h5py"]())
        res = measure(rs, a.rounds, want, a.device)
    finally:
        if server is not None:
            server.close()
    text = table(res)
    print(text)
    if a.out:
        os.makedirs(os.path.dirname(a.out) or ".", exist_ok=True)
        meta = {
            "command": " ".join([os.path.basename(sys.executable), *sys.argv]),
            "files": a.files, "steps": a.steps, "chunk_bytes": 65536, "device": a.device, "http": a.http,
            "machine": platform.platform(), "cpus": os.cpu_count(),
            "stored_bytes": sum(os.path.getsize(p) for p in paths),
        }
        with open(a.out, "w") as f:
            json.dump({"meta": meta, "results": res}, f, indent=1)
        with open(os.path.splitext(a.out)[0] + ".md", "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
