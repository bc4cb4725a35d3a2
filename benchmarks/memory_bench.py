"""Device and pinned memory of GPU reads and writes: gdsstore against zarr ``enable_gpu()`` and tensorstore.

    source .gpu/prelude.sh; python benchmarks/memory_bench.py [--rounds 2] [--reads 3] [--quick]

Writes the test arrays once (float32 16384² = 1 GiB: 4 MiB zstd chunks, 256 KiB zstd chunks, shards
4096² of 256 KiB zstd chunks; and a 16 MiB array of 512² zstd chunks) under ``$DATA`` (default
``/tmp/gdsstore-memory-bench``), warms the page cache, then runs every cell in a fresh Python process:

- **reads** (gdsstore, zarr ``enable_gpu()`` over ``LocalStore``, tensorstore + ``cupy.asarray``): one
  sampled call (the process's first), ``--reads`` timed calls, one more sampled call. Device memory is
  sampled by a thread polling ``cudaMemGetInfo`` every 0.5 ms during the sampled calls (never during
  timed ones). Columns: GB/s (median of the timed calls of ``--rounds`` processes per cell, the cells
  interleaved in a rotated order each round), peak device memory beyond the output (most of the two
  sampled calls), device memory held once the call returned (output excluded), gdsstore's own count
  of its allocations (``gdsstore.gpu.memory.budget_stats``: ``top``), pinned host memory peak / held
  (gdsstore's ``bounce.ring.stats()``; the anchors' pinned memory is not visible from outside);
- **budget sweep**: gdsstore's reads under ``gpu.memory_budget`` 128 MiB ... 4 GiB;
- **first read** of the 16 MiB array in a fresh process (gdsstore with CuPy's kernel cache warm and
  empty, zarr, tensorstore), from before the array is opened to the synchronized result, and with imports;
- **first 1 GiB GPU write** (4 MiB zstd chunks) in a fresh process, then a second one.

Results: ``$OUT`` (default ``./memory_results``): ``memory.json`` and ``memory.md``. One full run takes
about 6-8 minutes on the H200 machine (16 cores); ``--quick`` runs one round and a shorter sweep.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SIZE = 16384
SMALL = 2048
# layout -> (chunk edge, shard edge or None)
LAYOUTS: dict[str, tuple[int, int | None]] = {
    "4 MiB zstd chunks": (1024, None),
    "256 KiB zstd chunks": (256, None),
    "shards of 256 KiB zstd": (256, 4096),
}
READERS = ("gdsstore", "zarr enable_gpu", "tensorstore")
BUDGETS = (256 << 20, 512 << 20, 1 << 30, 2 << 30, 4 << 30, 64 << 30)  # 64 GiB: bounds nothing
MiB = 1 << 20

# -- the worker: one cell in a fresh process ---------------------------------------------------------------

WORKER = r'''
import json, os, sys, threading, time
T_START = time.perf_counter()
cell = json.loads(sys.argv[1])
sys.path.insert(0, cell["root"])
import numpy as np
import cupy as cp
import zarr
T_IMPORTED = time.perf_counter()
cp.zeros(1).sum().get()  # the CUDA context exists before any baseline
MiB = 1 << 20


class Sampler:
    """Least free device memory while running (cudaMemGetInfo every 0.5 ms)."""

    def __enter__(self):
        cp.cuda.runtime.deviceSynchronize()
        self.before = cp.cuda.runtime.memGetInfo()[0]
        self.least = self.before
        self.stop = False
        self.t = threading.Thread(target=self.run, daemon=True)
        self.t.start()
        return self

    def run(self):
        while not self.stop:
            self.least = min(self.least, cp.cuda.runtime.memGetInfo()[0])
            time.sleep(0.0005)

    def __exit__(self, *exc):
        cp.cuda.runtime.deviceSynchronize()
        self.stop = True
        self.t.join()
        self.after = cp.cuda.runtime.memGetInfo()[0]
        self.least = min(self.least, self.after)


def reader(kind):
    if kind == "gdsstore":
        import gdsstore
        gdsstore.config.set(cell.get("settings") or {})
        if cell.get("budget"):
            gdsstore.config.set({"gpu.memory_budget": cell["budget"]})
        def read(path):
            with gdsstore.enable_gpu():
                return zarr.open_array(gdsstore.GDSStore(path), mode="r")[:]
        return read
    if kind == "zarr enable_gpu":
        from zarr.storage import LocalStore
        def read(path):
            with zarr.config.enable_gpu():
                return zarr.open_array(LocalStore(path), mode="r")[:]
        return read
    import tensorstore as ts
    def read(path):
        arr = ts.open({"driver": "zarr3", "kvstore": {"driver": "file", "path": path}}, open=True).result()
        return cp.asarray(arr.read().result())
    return read


def pinned():
    if cell["reader"] != "gdsstore":
        return None
    from gdsstore.engine import bounce
    return bounce.ring.stats()


def sampled(read, path, out):
    pool = cp.get_default_memory_pool()
    with Sampler() as s:
        t0 = time.perf_counter()
        x = read(path)
        cp.cuda.runtime.deviceSynchronize()
        dt = time.perf_counter() - t0
    nbytes = int(x.nbytes)
    out.append({"seconds": dt, "peak_beyond": s.before - s.least - nbytes,
                "held": s.before - s.after - nbytes, "pinned": pinned()})
    del x
    pool.free_all_blocks()  # the user drops the output: what is left is what the reader keeps


def read_cell():
    read = reader(cell["reader"])
    path = cell["path"]
    samples, times = [], []
    sampled(read, path, samples)
    for _ in range(cell["reads"]):
        t0 = time.perf_counter()
        x = read(path)
        cp.cuda.runtime.deviceSynchronize()
        times.append(time.perf_counter() - t0)
        del x
        cp.get_default_memory_pool().free_all_blocks()
    sampled(read, path, samples)
    return {"times": times, "samples": samples}


def first_read_cell():
    read = reader(cell["reader"])  # imports the reader's library (counted in with_imports only)
    t0 = time.perf_counter()
    with Sampler() as s:
        x = read(cell["path"])
        cp.cuda.runtime.deviceSynchronize()
        dt = time.perf_counter() - t0
    nbytes = int(x.nbytes)
    return {"seconds": dt, "with_imports": time.perf_counter() - T_START,
            "imports": T_IMPORTED - T_START, "held": s.before - s.after - nbytes,
            "peak_beyond": s.before - s.least - nbytes, "pinned": pinned()}


def first_write_cell():
    import gdsstore
    from zarr.codecs import ZstdCodec
    rng = cp.random.default_rng(0)
    n = cell["size"]
    x = cp.linspace(0, 8 * np.pi, n, dtype=cp.float32)
    data = cp.sin(x)[:, None] * cp.cos(x)[None, :] + rng.standard_normal((n, n), dtype=cp.float32) * 0.05
    data = cp.round(data, 3).astype(cp.float32)
    cp.cuda.runtime.deviceSynchronize()
    out = {}
    for k, name in enumerate(("first", "second")):
        root = os.path.join(cell["tmp"], f"w{k}.zarr")
        with Sampler() as s:
            t0 = time.perf_counter()
            with gdsstore.enable_gpu():
                z = zarr.create_array(gdsstore.GDSStore(root), shape=data.shape, chunks=(1024, 1024),
                                      dtype="f4", compressors=[ZstdCodec(level=3)], fill_value=0.0)
                z[:] = data
            cp.cuda.runtime.deviceSynchronize()
            dt = time.perf_counter() - t0
        out[name] = {"seconds": dt, "peak_beyond": s.before - s.least, "held": s.before - s.after,
                     "pinned": pinned()}
    return out


kind = cell["kind"]
res = {"read": read_cell, "first_read": first_read_cell, "first_write": first_write_cell}[kind]()
print("RESULT " + json.dumps(res), flush=True)
'''


def run_cell(cell: dict[str, Any], timeout: float, env: dict[str, str] | None = None) -> dict[str, Any]:
    """One cell in a fresh process; its result, or the error."""
    cell = {**cell, "root": str(ROOT)}
    try:
        p = subprocess.run(
            [sys.executable, "-c", WORKER, json.dumps(cell)],
            capture_output=True, text=True, timeout=timeout, env=env or os.environ.copy(),
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}
    for line in p.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])  # type: ignore[no-any-return]
    tail = (p.stderr or p.stdout).strip().splitlines()[-3:]
    return {"error": " | ".join(tail) or f"exit {p.returncode}"}


# -- data ---------------------------------------------------------------------------------------------------


def _field(size: int) -> np.ndarray:
    # Smooth field + noise at 1e-3, as benchmarks/zarr_bench.py: zstd finds structure (about 1.5-2x).
    rng = np.random.default_rng(0)
    x = np.linspace(0, 8 * np.pi, size, dtype="f4")
    a = np.sin(x)[:, None] * np.cos(x)[None, :]
    a += rng.standard_normal((size, size), dtype="f4") * np.float32(0.05)
    return np.round(a, 3).astype("f4")


def write_data(root: Path, log: Any) -> dict[str, str]:
    """The arrays, written once with zarr on the CPU (kept when a complete set exists)."""
    import zarr
    from zarr.codecs import ZstdCodec
    from zarr.storage import LocalStore

    paths = {name: str(root / f"c{c}-s{s or 0}.zarr") for name, (c, s) in LAYOUTS.items()}
    paths["16 MiB"] = str(root / "small.zarr")
    stamp = root / "complete"
    if stamp.exists():
        return paths
    root.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    fast = {"codec_pipeline.path": "zarr.core.codec_pipeline.FusedCodecPipeline", "async.concurrency": 64}
    with zarr.config.set(fast):
        data = _field(SIZE)
        for name, (chunk, shard) in LAYOUTS.items():
            kw: dict[str, Any] = {"shards": (shard, shard)} if shard else {}
            z = zarr.create_array(LocalStore(paths[name]), shape=data.shape, chunks=(chunk, chunk), dtype="f4",
                                  compressors=[ZstdCodec(level=3)], fill_value=0.0, overwrite=True, **kw)
            z[:] = data
        small = zarr.create_array(LocalStore(paths["16 MiB"]), shape=(SMALL, SMALL), chunks=(512, 512),
                                  dtype="f4", compressors=[ZstdCodec(level=3)], fill_value=0.0, overwrite=True)
        small[:] = data[:SMALL, :SMALL]
    stamp.touch()
    log(f"data: written in {time.perf_counter() - t0:.0f} s under {root}")
    return paths


def warm(root: Path) -> None:
    buf = bytearray(8 << 20)
    for dirpath, _, files in os.walk(root):
        for name in files:
            with open(os.path.join(dirpath, name), "rb", buffering=0) as f:
                while f.readinto(buf):
                    pass


# -- the runs -----------------------------------------------------------------------------------------------


def main_table(
    paths: dict[str, str], rounds: int, reads: int, log: Any, settings: dict[str, Any] | None = None
) -> dict[str, Any]:
    cells = [(layout, r) for layout in LAYOUTS for r in READERS]
    out: dict[str, Any] = {f"{layout} | {r}": [] for layout, r in cells}
    for k in range(rounds):
        order = cells[k % len(cells):] + cells[: k % len(cells)]  # rotated: every cell meets other neighbours
        if k % 2:
            order.reverse()
        for layout, r in order:
            t0 = time.perf_counter()
            cell = {"kind": "read", "reader": r, "path": paths[layout], "reads": reads, "settings": settings}
            res = run_cell(cell, 240)
            out[f"{layout} | {r}"].append(res)
            log(f"  {layout:<24} {r:<16} round {k + 1}: {_brief(res)} ({time.perf_counter() - t0:.0f} s)")
    return out


def sweep(
    paths: dict[str, str], budgets: tuple[int, ...], reads: int, log: Any, settings: dict[str, Any] | None = None
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for layout, path in paths.items():
        for b in budgets:
            cell = {"kind": "read", "reader": "gdsstore", "path": path, "reads": reads, "budget": b, "settings": settings}
            res = run_cell(cell, 180)
            out[f"{layout} | {b >> 20} MiB"] = res
            log(f"  sweep {layout:<24} budget {b >> 20:>5} MiB: {_brief(res)}")
    return out


def served(data: Path, paths: dict[str, str]) -> tuple[Any, dict[str, str]]:
    """nginx (8 workers) serving ``data``, and the arrays' URLs (the ``--http`` rows)."""
    sys.path.insert(0, str(ROOT / "tests"))
    from servers.nginx import NginxServer

    srv = NginxServer(str(data), 8, tcp_nopush=False)
    return srv, {f"{k} over HTTP": srv.url(os.path.relpath(paths[k], data)) for k in LAYOUTS}


def first_reads(path: str, rounds: int, log: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    empty = tempfile.mkdtemp(prefix="cupy-cache-")
    variants = [("gdsstore", None), ("gdsstore, empty CuPy kernel cache", empty),
                ("zarr enable_gpu", None), ("tensorstore", None)]
    for name, cache in variants:
        runs = []
        for _ in range(rounds):
            env = os.environ.copy()
            if cache:
                env["CUPY_CACHE_DIR"] = tempfile.mkdtemp(dir=cache)  # empty for every process
            reader = "gdsstore" if name.startswith("gdsstore") else name
            runs.append(run_cell({"kind": "first_read", "reader": reader, "path": path}, 120, env))
        out[name] = runs
        log(f"  first read 16 MiB, {name}: {[_brief(r) for r in runs]}")
    return out


def first_writes(tmp: str, rounds: int, log: Any) -> list[dict[str, Any]]:
    runs = []
    for k in range(rounds):
        d = tempfile.mkdtemp(dir=tmp, prefix=f"write{k}-")
        res = run_cell({"kind": "first_write", "reader": "gdsstore", "size": SIZE, "tmp": d}, 180)
        runs.append(res)
        log(f"  first 1 GiB GPU write, process {k + 1}: {json.dumps(res)[:200]}")
    return runs


def _brief(res: dict[str, Any]) -> str:
    if "error" in res:
        return "ERROR " + str(res["error"])[:160]
    if "times" in res:
        gbs = [(1 << 30) / t / 1e9 for t in res["times"]]
        peak = max(s["peak_beyond"] for s in res["samples"]) / MiB
        return f"{statistics.median(gbs):.2f} GB/s, peak +{peak:.0f} MiB, held {res['samples'][-1]['held'] / MiB:.0f} MiB"
    return f"{res.get('seconds', 0):.3f} s"


# -- the results --------------------------------------------------------------------------------------------


def _ok(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in runs if "error" not in r]


def summarize_reads(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """One row: median GB/s over every timed call, memory as the worst of the sampled calls: the process's
    first call (which also loads the reader's GPU code) apart from a later one."""
    good = _ok(runs)
    if not good:
        return {"error": runs[0].get("error", "no run") if runs else "no run"}
    gbs = [(1 << 30) / t / 1e9 for r in good for t in r["times"]]
    samples = [s for r in good for s in r["samples"]]
    row: dict[str, Any] = {
        "gbs": statistics.median(gbs),
        "gbs_range": [min(gbs), max(gbs)],
        "peak_beyond": max(r["samples"][-1]["peak_beyond"] for r in good),  # a later call
        "peak_first_call": max(r["samples"][0]["peak_beyond"] for r in good),  # + loading kernels, libraries
        "held": max(r["samples"][-1]["held"] for r in good),  # a later call: what the reader keeps
        "held_first_call": max(r["samples"][0]["held"] for r in good),  # + one-time loads (kernels, libraries)
    }
    pinned = [s["pinned"] for s in samples if s.get("pinned")]
    if pinned:
        row["pinned_held"] = max(p["total"] for p in pinned)
    return row


def _mib(n: Any) -> str:
    return "-" if n is None else f"{n / MiB:.0f}"


def _peak(row: dict[str, Any]) -> str:
    """A later call's peak, the first call's in parentheses (rows of older results have one peak)."""
    first = row.get("peak_first_call")
    return _mib(row["peak_beyond"]) + ("" if first is None else f" ({_mib(first)})")


def _reads_md(results: dict[str, Any]) -> list[str]:
    lines = ["## 1 GiB float32 16384² into a CuPy array (local, warm page cache)", "",
             "| array | reader | GB/s | peak beyond output MiB (first call) | held after MiB (first call) "
             "| pinned held MiB |", "|---|---|---|---|---|---|"]
    for key, row in results["reads"].items():
        layout, reader = key.split(" | ")
        if "error" in row:
            lines.append(f"| {layout} | {reader} | error: {row['error'][:80]} | | | |")
            continue
        lines.append(f"| {layout} | {reader} | {row['gbs']:.2f} | {_peak(row)} "
                     f"| {_mib(row['held'])} ({_mib(row['held_first_call'])}) | {_mib(row.get('pinned_held'))} |")
    return [*lines, ""]


def _sweep_md(results: dict[str, Any]) -> list[str]:
    lines = ["## gdsstore: GB/s against gpu.memory_budget", "",
             "| array | budget MiB | GB/s | peak beyond output MiB (first call) | held after MiB | pinned held MiB |",
             "|---|---|---|---|---|---|"]
    for key, row in results["sweep"].items():
        layout, budget = key.split(" | ")
        if "error" in row:
            lines.append(f"| {layout} | {budget} | error: {row['error'][:80]} | | | |")
            continue
        lines.append(f"| {layout} | {budget.split()[0]} | {row['gbs']:.2f} | {_peak(row)} "
                     f"| {_mib(row['held'])} | {_mib(row.get('pinned_held'))} |")
    return [*lines, ""]


def _first_read_md(results: dict[str, Any]) -> list[str]:
    lines = ["## First read of a 16 MiB array (512² zstd chunks) in a fresh process", "",
             "| reader | seconds (median) | with imports | held after MiB | peak beyond output MiB |",
             "|---|---|---|---|---|"]
    for name, runs in results["first_read"].items():
        good = _ok(runs)
        if not good:
            lines.append(f"| {name} | error: {runs[0]['error'][:80] if runs else '-'} | | | |")
            continue
        med = statistics.median(r["seconds"] for r in good)
        imp = statistics.median(r["with_imports"] for r in good)
        lines.append(f"| {name} | {med:.3f} | {imp:.3f} | {_mib(max(r['held'] for r in good))} "
                     f"| {_mib(max(r['peak_beyond'] for r in good))} |")
    return [*lines, ""]


def _first_write_md(results: dict[str, Any]) -> list[str]:
    lines = ["## 1 GiB GPU write (4 MiB zstd chunks), gdsstore, fresh process", "",
             "| write | seconds (median) | peak device MiB beyond the input | held after MiB | pinned held MiB |",
             "|---|---|---|---|---|"]
    good = _ok(results["first_write"])
    for name in ("first", "second"):
        if not good:
            break
        rows = [r[name] for r in good]
        pin = [r["pinned"]["total"] for r in rows if r.get("pinned")]
        lines.append(f"| {name} in the process | {statistics.median(r['seconds'] for r in rows):.3f} "
                     f"| {_mib(max(r['peak_beyond'] for r in rows))} | {_mib(max(r['held'] for r in rows))} "
                     f"| {_mib(max(pin) if pin else None)} |")
    if not good and results["first_write"]:
        lines.append(f"| first | error: {results['first_write'][0].get('error', '')[:80]} | | | |")
    return [*lines, ""]


def markdown(results: dict[str, Any]) -> str:
    lines = ["# Device and pinned memory of GPU reads and writes", "", results["machine"], ""]
    if results.get("settings"):
        lines += [f"gdsstore's settings: `{json.dumps(results['settings'])}`", ""]
    for part, md in (("reads", _reads_md), ("sweep", _sweep_md), ("first_read", _first_read_md),
                     ("first_write", _first_write_md)):
        if part in results:
            lines += md(results)
    lines += ["Peak and held: `cudaMemGetInfo` sampled every 0.5 ms in the reading process, the output "
              "(or the write's input) excluded; peak: a later call's, the process's first call's (which also "
              "loads the reader's GPU code) in parentheses; held: right after the call returned, the output alive. "
              "Pinned held: gdsstore's pinned account after the call (bounce slots and staging, "
              "`gdsstore.engine.bounce.ring.stats()`). Targets (issue 23): 1 GiB reads peak beyond "
              "the output <= 1024 MiB, held <= 64 MiB, at >= 90 % of 15.6 / 6.3 / 17.7 GB/s; 16 MiB first "
              "read <= 1.5x zarr enable_gpu's, held <= 32 MiB; first 1 GiB write <= 1.0 s."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=2, help="processes per cell of the main table")
    ap.add_argument("--reads", type=int, default=3, help="timed reads per process")
    ap.add_argument("--quick", action="store_true", help="one round, budgets 256 MiB, 1 GiB and 4 GiB only")
    ap.add_argument("--parts", default="reads,sweep,first_read,first_write", help="what to run (comma-separated)")
    ap.add_argument("--budgets", default=None, help="sweep budgets in MiB, comma-separated")
    ap.add_argument("--http", action="store_true", help="sweep the arrays over nginx as well (8 workers)")
    ap.add_argument("--settings", default="{}", help="gdsstore settings of every gdsstore cell (JSON)")
    args = ap.parse_args(argv)
    parts = set(args.parts.split(","))
    out = Path(os.environ.get("OUT") or "memory_results")
    out.mkdir(parents=True, exist_ok=True)
    data = Path(os.environ.get("DATA") or "/tmp/gdsstore-memory-bench")
    t_start = time.perf_counter()
    log_file = open(out / "memory.log", "w")  # noqa: SIM115 (open for the whole run)

    def log(msg: str) -> None:
        line = f"[{time.perf_counter() - t_start:6.0f} s] {msg}"
        print(line, flush=True)
        log_file.write(line + "\n")

    paths = write_data(data, log)
    warm(data)
    log("data: page cache warm")
    rounds = 1 if args.quick else args.rounds
    budgets = (256 << 20, 1 << 30, 4 << 30) if args.quick else BUDGETS
    if args.budgets:
        budgets = tuple(int(b) << 20 for b in args.budgets.split(","))
    results: dict[str, Any] = {"machine": f"{platform.node()}, {os.cpu_count()} cores, Python {platform.python_version()}",
                               "settings": json.loads(args.settings)}
    raw: dict[str, Any] = {}
    if "reads" in parts:
        raw["reads"] = main_table(paths, rounds, args.reads, log, json.loads(args.settings))
        results["reads"] = {k: summarize_reads(v) for k, v in raw["reads"].items()}
    if "sweep" in parts:
        local = {k: paths[k] for k in LAYOUTS}
        srv, remote = served(data, paths) if args.http else (None, {})
        try:
            raw["sweep"] = sweep({**local, **remote}, budgets, 2, log, json.loads(args.settings))
        finally:
            if srv is not None:
                srv.close()
        results["sweep"] = {k: summarize_reads([v]) for k, v in raw["sweep"].items()}
    if "first_read" in parts:
        results["first_read"] = first_reads(paths["16 MiB"], 1 if args.quick else 3, log)
    if "first_write" in parts:
        tmp = tempfile.mkdtemp(prefix="gdsstore-write-", dir="/tmp")
        results["first_write"] = first_writes(tmp, 1 if args.quick else 2, log)
    results["raw"] = raw
    (out / "memory.json").write_text(json.dumps(results, indent=1))
    md = markdown(results)
    (out / "memory.md").write_text(md)
    print(md)
    log(f"done in {time.perf_counter() - t_start:.0f} s: {out / 'memory.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
