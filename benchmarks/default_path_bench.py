"""The default path: plain zarr over ``gdsstore.GDSStore`` against zarr's own stores (issue 26, part 2).

Host buffers, zarr's own codec pipeline, zarr's default settings (``async.concurrency`` 10), no
enable call: what ``zarr.open_array(gdsstore.GDSStore(path))[:]`` gets. Beside it, the same store
under ``gdsstore.enable_pipeline()`` (gdsstore's batched pipeline, host buffers). Rows:

- local read, 256 MiB float32, 1 MiB chunks, no compression
- local read, 256 MiB, 64 KiB chunks, no compression
- local read, 256 MiB, 1 MiB chunks, zstd (level 1; zarr's and gdsstore's codecs decode with numcodecs)
- local write, 256 MiB, 1 MiB chunks, no compression (a fresh directory per write)
- HTTP read over nginx (loopback, 2 workers), 1,024 chunks of 16 KiB; anchors zarr ``FsspecStore``
  (fsspec HTTP, aiohttp) and zarr ``ObjectStore`` (obstore ``HTTPStore``)

Every measurement runs in a fresh child process (its peak RSS is its own): the child imports, opens
and reads once to warm up, then times ``--repeat`` reads (or writes), each from ``zarr.open_array``
(or ``zarr.create_array``) to the last byte, and checks every result against the source array
(writes: read back with zarr's ``LocalStore``), outside the timed region. Rounds interleave the
contenders (rotated start), and the table shows medians over rounds of the child's median, with the
child's process CPU-seconds (all threads) per timed read and its peak RSS::

    python benchmarks/default_path_bench.py --rounds 11 --out benchmarks/results/cpu-2core/default_path.md
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]

# row -> (shape, chunks, codec, kind); 256 MiB of float32 is 8192 x 8192.
ROWS: dict[str, tuple[tuple[int, int], tuple[int, int], str, str]] = {
    "read-1m": ((8192, 8192), (512, 512), "none", "read"),
    "read-64k": ((8192, 8192), (128, 128), "none", "read"),
    "read-1m-zstd": ((8192, 8192), (512, 512), "zstd", "read"),
    "write-1m": ((8192, 8192), (512, 512), "none", "write"),
    "http-16k": ((2048, 2048), (64, 64), "none", "http"),
}
TITLES = {
    "read-1m": "local read, 256 MiB, 1 MiB chunks, none",
    "read-64k": "local read, 256 MiB, 64 KiB chunks, none",
    "read-1m-zstd": "local read, 256 MiB, 1 MiB chunks, zstd",
    "write-1m": "local write, 256 MiB, 1 MiB chunks, none",
    "http-16k": "HTTP (nginx) read, 1,024 chunks of 16 KiB",
}
TARGETS = {"read-1m": 1.2, "read-64k": 1.2, "read-1m-zstd": 0.97, "write-1m": 1.3, "http-16k": 1.5}
GDS = "gdsstore GDSStore"
GDS_PIPE = "gdsstore GDSStore + enable_pipeline()"
LOCAL = ["zarr LocalStore", GDS, GDS_PIPE]
HTTP = ["zarr FsspecStore", "zarr ObjectStore (obstore)", GDS, GDS_PIPE]


def source(shape: tuple[int, int]) -> np.ndarray:
    """A smooth field plus rounded noise: zstd finds structure in it (about 1.5-2x), unlike white noise."""
    rng = np.random.default_rng(0)
    y = np.sin(np.linspace(0, 8 * np.pi, shape[0], dtype="f4"))[:, None]
    x = np.cos(np.linspace(0, 8 * np.pi, shape[1], dtype="f4"))[None, :]
    out: np.ndarray = np.round(y * x + rng.standard_normal(shape, dtype="f4") * np.float32(0.05), 3).astype("f4")
    return out


def _create(store: Any, row: str) -> Any:
    import zarr
    from zarr.codecs import ZstdCodec

    shape, chunks, codec, _ = ROWS[row]
    compressors = [ZstdCodec(level=1)] if codec == "zstd" else None
    return zarr.create_array(store, shape=shape, chunks=chunks, dtype="f4", compressors=compressors,
                             fill_value=0.0, overwrite=True)


# -- the child: one contender, one row -----------------------------------------------------------------


def _store(contender: str, where: str) -> Any:
    """The store a contender reads or writes ``where`` (a path or an http:// URL) through."""
    import zarr

    import gdsstore

    if contender in (GDS, GDS_PIPE):
        return gdsstore.GDSStore(where, read_only=where.startswith("http"))
    if contender == "zarr LocalStore":
        return zarr.storage.LocalStore(where)
    if contender == "zarr FsspecStore":
        return zarr.storage.FsspecStore.from_url(where, read_only=True)
    if contender == "zarr ObjectStore (obstore)":
        from obstore.store import HTTPStore

        return zarr.storage.ObjectStore(HTTPStore.from_url(where, client_options={"allow_http": True}), read_only=True)
    raise ValueError(f"unknown contender {contender!r}")


def _once(contender: str, row: str, where: str, ref: np.ndarray, scratch: str, i: int) -> tuple[float, float]:
    """One timed read (or write) and its check: ``(wall seconds, process CPU seconds)``."""
    import zarr

    import gdsstore

    pipeline = gdsstore.enable_pipeline() if contender == GDS_PIPE else zarr.config.set({})
    if ROWS[row][3] == "write":
        target = os.path.join(scratch, f"w{i}.zarr")
        shutil.rmtree(target, ignore_errors=True)
        with pipeline:
            z = _create(_store(contender, target), row)
            t0, c0 = time.perf_counter(), time.process_time()
            z[...] = ref
            dt, dc = time.perf_counter() - t0, time.process_time() - c0
        got = zarr.open_array(zarr.storage.LocalStore(target), mode="r")[...]
        shutil.rmtree(target, ignore_errors=True)
    else:
        with pipeline:
            t0, c0 = time.perf_counter(), time.process_time()
            got = zarr.open_array(_store(contender, where), mode="r")[...]
            dt, dc = time.perf_counter() - t0, time.process_time() - c0
    if not (isinstance(got, np.ndarray) and np.array_equal(got, ref)):
        raise AssertionError(f"{contender}, {row}: wrong bytes from {where}")
    return dt, dc


def _status_mib(field: str) -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    return float("nan")


def child(contender: str, row: str, where: str, ref_path: str, repeat: int) -> dict[str, Any]:
    ref = np.load(ref_path)
    try:  # the peak from here on: the reads', not the source array's creation
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass
    base = _status_mib("VmRSS")
    scratch = tempfile.mkdtemp(prefix="dpb-")
    try:
        _once(contender, row, where, ref, scratch, 0)  # warm-up: pools, connections, first-call costs
        runs = [_once(contender, row, where, ref, scratch, i + 1) for i in range(repeat)]
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return {
        "seconds": statistics.median(r[0] for r in runs),
        "cpu": statistics.median(r[1] for r in runs),
        "rss_mib": _status_mib("VmHWM") - base,
        "checked_bytes": int(ref.nbytes) * (repeat + 1),
    }


# -- the parent: data, servers, interleaved rounds, the table ------------------------------------------


def prepare(tmp: str, rows: list[str]) -> dict[str, str]:
    """Write each read row's array once with zarr's LocalStore (the bytes every reader reads)."""
    import zarr

    paths = {}
    for row in rows:
        ref = source(ROWS[row][0])
        np.save(os.path.join(tmp, f"{row}.npy"), ref)
        if ROWS[row][3] == "write":
            paths[row] = ""
            continue
        path = os.path.join(tmp, f"{row}.zarr")
        _create(zarr.storage.LocalStore(path), row)[...] = ref
        paths[row] = path
    return paths


def run_child(contender: str, row: str, where: str, ref: str, repeat: int) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--child", contender, row, where, ref, str(repeat)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"{contender} / {row} failed:\n{out.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def measure(rows: list[str], where: dict[str, str], refs: str, rounds: int, repeat: int,
            log: Callable[[str], None]) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """``rounds`` interleaved rounds: each round runs every row's contenders once, the start rotated."""
    res: dict[str, dict[str, list[dict[str, Any]]]] = {r: {} for r in rows}
    for k in range(rounds):
        for row in rows:
            names = HTTP if ROWS[row][3] == "http" else LOCAL
            order = names[k % len(names):] + names[: k % len(names)]
            for name in order:
                got = run_child(name, row, where[row], os.path.join(refs, f"{row}.npy"), repeat)
                res[row].setdefault(name, []).append(got)
                log(f"round {k + 1}/{rounds} {row:13s} {name:40s} {got['seconds']:.3f} s  CPU {got['cpu']:.3f} s")
    return res


def _median(runs: list[dict[str, Any]], key: str) -> float:
    return float(statistics.median(r[key] for r in runs))


def table(res: dict[str, dict[str, list[dict[str, Any]]]]) -> list[str]:
    lines = [
        "| workload | contender | GB/s (median) | CPU-s per read | peak RSS MiB beyond the source | / best of zarr's stores | target |",
        "|---|---|---|---|---|---|---|",
    ]
    for row, by in res.items():
        nbytes = int(np.prod(ROWS[row][0])) * 4
        gbs = {n: nbytes / _median(runs, "seconds") / 1e9 for n, runs in by.items()}
        anchors = [n for n in by if not n.startswith("gdsstore")]
        best = max(gbs[n] for n in anchors)
        for n, runs in by.items():
            ratio = f"{gbs[n] / best:.2f}x" if n.startswith("gdsstore") else ""
            target = f"≥ {TARGETS[row]}x" if n == GDS else ""
            lines.append(f"| {TITLES[row]} | {n} | {gbs[n]:.3f} | {_median(runs, 'cpu'):.3f} | "
                         f"{_median(runs, 'rss_mib'):.0f} | {ratio} | {target} |")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=11)
    ap.add_argument("--repeat", type=int, default=3, help="timed reads per child (after one warm-up)")
    ap.add_argument("--rows", default=",".join(ROWS))
    ap.add_argument("--out", type=Path, help="the results file (markdown)")
    ap.add_argument("--child", nargs=5, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        contender, row, where, ref, repeat = args.child
        print(json.dumps(child(contender, row, where, ref, int(repeat))))
        return 0
    if args.out is None:
        ap.error("--out is required")
    rows = args.rows.split(",")
    command = "python " + " ".join(shlex.quote(a) for a in [os.path.relpath(__file__, ROOT), *(argv or sys.argv[1:])])
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    tmp = tempfile.mkdtemp(prefix="default-path-")
    server = None
    try:
        where = prepare(tmp, rows)
        if "http-16k" in rows:
            sys.path.insert(0, str(ROOT / "tests"))
            from servers.nginx import NginxServer

            server = NginxServer(tmp, workers=2, tcp_nopush=False)
            where["http-16k"] = server.url("http-16k.zarr")
        res = measure(rows, where, tmp, args.rounds, args.repeat, lambda m: print(m, flush=True))
    finally:
        if server is not None:
            server.close()
        shutil.rmtree(tmp, ignore_errors=True)
    text = [
        "# The default path: plain zarr over GDSStore vs zarr's own stores",
        "",
        f"`{command}`",
        "",
        f"Started {started}; {os.cpu_count()} CPUs ({platform.processor() or platform.machine()}), Python "
        f"{platform.python_version()}. Other work may share the machine's cores during a run, so absolute GB/s are "
        "noisy; compare the ratios of one run "
        f"(interleaved rounds, {args.rounds} rounds, each the median of {args.repeat} timed reads in a fresh "
        "process after a warm-up read). Every read was checked against the source array (writes read back "
        "with LocalStore). CPU-s: the process's CPU-seconds (all threads) per timed read or write; peak RSS: "
        "the child's peak resident memory during its reads (or writes) beyond what it held before them "
        "(the source array, loaded to check the bytes; the output array is part of the peak).",
        "",
        *table(res),
        "",
        "Raw per-round results:",
        "",
        "```json",
        json.dumps(res, indent=1),
        "```",
    ]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(text) + "\n")
    print("\n".join(table(res)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
