"""Ramp A/B on the remote rows the H100 run 2 found slower with the old ramp (S3 64 KiB chunks, HTTP 256 KiB
chunks plain and zstd, HTTP 4 MiB zstd), read from nginx on this machine into host memory under
``enable_pipeline()``. Each core variant (``build_variants.sh``) reads in its own process, rounds
interleaved; per row: the first read of the process, then the median of two more; every read is checked.

    .venv/bin/python benchmarks/results/2026-12-06-ramp/nginx_rows_ab.py cur,noramp,old 3 > nginx_rows.txt

``IDLE_GAP=1.5`` (seconds) waits before each read after a row's first, as the GPU benchmark's other readers
do between gdsstore's reads: every such read then finds its store idle.
"""

import json
import os
import statistics
import subprocess
import sys
import tempfile

sys.path[:0] = ["benchmarks", "tests"]
from remote_zarr_bench import write  # noqa: E402
from servers.nginx import NginxServer  # noqa: E402

ROWS = {  # name -> (url path under the server, shape, chunks, zstd)
    "S3 chunks 128² (64 KiB), none": ("s3", (8192, 8192), (128, 128), False),
    "HTTP chunks 256² (256 KiB), none": ("http", (8192, 8192), (256, 256), False),
    "HTTP chunks 256², zstd": ("http", (8192, 8192), (256, 256), True),
    "HTTP chunks 1024² (4 MiB), zstd": ("http", (8192, 8192), (1024, 1024), True),
}
CHILD = r"""
import json, os, statistics, sys, time
import numpy as np, zarr, gdsstore
gap = float(os.environ.get("IDLE_GAP", "0"))
endpoint, rows = sys.argv[1], json.loads(sys.argv[2])
s3 = {"key": "k", "secret": "s", "endpoint_url": endpoint, "region_name": "us-east-1"}
out = {}
for name, (kind, rel, checksum) in rows.items():
    url = f"s3://bench/{rel}" if kind == "s3" else f"{endpoint}/bench/{rel}"
    ts = []
    for k in range(3):
        if k:
            time.sleep(gap)
        t0 = time.perf_counter()
        with gdsstore.enable_pipeline():
            a = zarr.open_array(gdsstore.GDSStore(url, read_only=True, storage_options=s3 if kind == "s3" else None), mode="r")[:]
        ts.append(time.perf_counter() - t0)
        assert float(a.astype("f8").sum()) == checksum, name
    out[name] = {"first": ts[0], "then": statistics.median(ts[1:]), "gb": a.nbytes / 1e9}
print("RESULT", json.dumps(out))
"""


def main() -> None:
    variants, rounds = sys.argv[1].split(","), int(sys.argv[2])
    root = tempfile.mkdtemp(prefix="ramp_rows_")
    rows = {}
    for i, (name, (kind, shape, chunks, zstd)) in enumerate(ROWS.items()):
        ref = write(os.path.join(root, "bench", f"a{i}.zarr"), shape, chunks, None, zstd)
        rows[name] = (kind, f"a{i}.zarr", float(ref.astype("f8").sum()))
    srv = NginxServer(root, 2, tcp_nopush=False)
    endpoint = srv.url("").rstrip("/")
    res: dict[str, dict[str, list[tuple[float, float]]]] = {v: {n: [] for n in rows} for v in variants}
    try:
        for r in range(rounds):
            for v in variants:
                env = dict(os.environ, PYTHONPATH=f"/tmp/variants/pkg_{v}")
                p = subprocess.run([sys.executable, "-c", CHILD, endpoint, json.dumps(rows)], env=env,
                                   capture_output=True, text=True, check=True)
                got = json.loads(p.stdout.split("RESULT ", 1)[1])
                for n, g in got.items():
                    res[v][n].append((g["gb"] / g["first"], g["gb"] / g["then"]))
                print(f"round {r} {v}: " + ", ".join(f"{n}: {g['then']:.3f} s" for n, g in got.items()), flush=True)
    finally:
        srv.close()
    print("\n| row | " + " | ".join(f"{v} first / then (GB/s)" for v in variants) + " |")
    print("|---|" + "---|" * len(variants))
    for n in rows:
        cells = [f"{statistics.median(f for f, _ in res[v][n]):.2f} / {statistics.median(t for _, t in res[v][n]):.2f}"
                 for v in variants]
        print(f"| {n} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
