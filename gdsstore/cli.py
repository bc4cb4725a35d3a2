"""The ``gdsstore`` command: ``doctor``, ``demo``, ``bench``."""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections.abc import Sequence
from typing import Any

__all__ = ["main"]


def _doctor(args: argparse.Namespace) -> int:
    from gdsstore.doctor import doctor, format_report

    report = doctor(probe=not args.no_probe)
    print(json.dumps(report, indent=2, default=str) if args.json else format_report(report))
    return 1 if "settings_error" in report else 0  # a setting that cannot be used is a failed check


def _demo(args: argparse.Namespace) -> int:
    import numpy as np
    import zarr

    import gdsstore
    from gdsstore.engine import cuda

    gpu = cuda.device_count() > 0 and not args.host
    root = args.path or os.path.join(tempfile.mkdtemp(prefix="gdsstore-demo-"), "demo.zarr")
    data = np.arange(args.n * args.n, dtype="float32").reshape(args.n, args.n)
    store = gdsstore.GDSStore(root)
    z = zarr.create_array(store, shape=data.shape, chunks=(args.n // 4, args.n // 4), dtype=data.dtype, overwrite=True)
    z[:] = data
    print(f"wrote {data.nbytes} bytes as a {data.shape} float32 zarr array at {root} ({z.nchunks} chunks)")
    print(f"reading it back into {'GPU (cupy)' if gpu else 'host (numpy)'} memory through gdsstore")
    x: Any
    with gdsstore.trace() as t:
        if gpu:
            with gdsstore.enable_gpu():
                x = zarr.open_array(gdsstore.GDSStore(root, read_only=True), mode="r")[:]
            ok = bool((x.get() == data).all())
        else:
            x = zarr.open_array(gdsstore.GDSStore(root, read_only=True), mode="r")[:]
            ok = bool((x == data).all())
    print(f"result: {type(x).__module__}.{type(x).__name__} {x.shape}, equal to the source: {ok}")
    print(t)
    return 0 if ok else 1


def _bench(args: argparse.Namespace) -> int:
    from gdsstore.bench import bench_file, bench_url, bench_zarr

    path = args.path
    device = False if args.host else None
    if path is not None and "://" in path and not path.startswith("file://"):
        results = bench_url(path, repeat=args.repeat, device=device)
        return _report(args, results, f"read of {path}")
    if path is not None and os.path.isdir(path):
        if not os.path.exists(os.path.join(path, "zarr.json")):
            raise ValueError(f"{path!r} is a directory without zarr.json: give a file, a zarr v3 array or a URL")
        results = bench_zarr(path, repeat=args.repeat, device=device)
        return _report(args, results, f"z[:] of the zarr array {path}")
    tmp = None
    if path is None:
        tmp = tempfile.NamedTemporaryFile(prefix="gdsstore-bench-", suffix=".bin", delete=False)  # noqa: SIM115
        chunk = os.urandom(1 << 20)
        for _ in range(args.size >> 20):
            tmp.write(chunk)
        tmp.close()
        path = tmp.name
    try:
        results = bench_file(path, repeat=args.repeat, cold=args.cold, threads=args.threads, device=device)
    finally:
        if tmp is not None:
            os.unlink(tmp.name)
    return _report(args, results, f"{'cold' if args.cold else 'warm'} read of {path}")


def _report(args: argparse.Namespace, results: Any, title: str) -> int:
    from gdsstore.bench import format_table

    if args.json:
        print(json.dumps([r.as_dict() for r in results], indent=2))
    else:
        print(format_table(results, title))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="gdsstore", description="gdsstore: storage <-> GPU I/O with provenance")
    sub = p.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("doctor", help="versions, cuFile/nvidia-fs/udev, resolved routes, traced probe read")
    d.add_argument("--json", action="store_true", help="machine-readable output")
    d.add_argument("--no-probe", action="store_true", help="skip the probe read")
    d.set_defaults(fn=_doctor)
    m = sub.add_parser("demo", help="write a small zarr array, read it back through gdsstore, print the trace")
    m.add_argument("--path", help="where to write the array (default: a temp dir)")
    m.add_argument("--n", type=int, default=1024, help="array is n x n float32 (default 1024)")
    m.add_argument("--host", action="store_true", help="host buffers even when a GPU is present")
    m.set_defaults(fn=_demo)
    b = sub.add_parser(
        "bench", help="throughput of each route reading a file, a zarr array or a URL, next to the usual anchors"
    )
    b.add_argument(
        "path", nargs="?", help="file, zarr v3 array directory, or s3:// / http(s):// / webhdfs:// URL "
        "(default: a temporary file of --size bytes)"
    )
    b.add_argument("--size", type=int, default=256 << 20, help="size of the temporary file (default 256 MiB)")
    b.add_argument("--repeat", type=int, default=3)
    b.add_argument("--threads", type=int, default=None, help="also measure gdsstore and kvikio at this thread count")
    b.add_argument("--cold", action="store_true", help="drop the file's page cache before each run")
    b.add_argument("--host", action="store_true", help="read into host memory even when a GPU is present")
    b.add_argument("--json", action="store_true")
    b.set_defaults(fn=_bench)
    args = p.parse_args(argv)
    try:
        return int(args.fn(args))
    except ValueError as exc:  # invalid settings and arguments: one clear line, no traceback
        print(f"gdsstore {args.cmd}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
