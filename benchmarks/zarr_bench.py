"""The DESIGN.md performance table in one run: gdsstore against kvikio, zarr, tensorstore and czarr.

    python benchmarks/zarr_bench.py --out DIR [--size 16384] [--repeat 3]
    python benchmarks/zarr_bench.py --out DIR --large [--rounds 3] [--repeat 2] [--time-limit S]
    python benchmarks/zarr_bench.py --out DIR --list

The table (default): writes the data once (a raw file and six zarr arrays of a float32 ``size x size``
array: chunks 1024² and 256², shards 4096² of 256² chunks; each uncompressed and zstd), warms the page
cache, then reads each whole array with every reader, best of ``--repeat``, each contender in its own
process. Results go to ``DIR``: ``results.json`` (numbers, notes, gdsstore's trace routes),
``results.md`` (the table) and ``results.png`` (the plot).

``--large``: the rows of czarr's kind, one array in few large chunks (64 of 16 MiB, 16 of 64 MiB, 8 of
128 MiB at the default size; each uncompressed and zstd level 1), with every anchor (kvikio's store,
zarr ``enable_gpu()``, zarrs, tensorstore, czarr through ``configure_gpu()`` and through
``czarr.core.Array``) and gdsstore. ``--rounds`` interleaved rounds, a fresh process per contender and
round; every read's result is compared element by element with the source array; GB/s and CPU-seconds
are medians, device memory the peak. A contender that raises, returns wrong data, crashes or hangs fails
its cells with the reason, and the run goes on. Results: ``large.json``, ``large.md``, and each worker's
output in ``DIR/workers/``.

``--list`` prints the rows and which contenders can run here (and why not), without touching data.

On a machine without a GPU it runs in host mode (numpy buffers) and the GPU-only anchors are skipped with
a note, so it can be tried anywhere at a small ``--size``.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import platform
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _anchors as anchors

# gdsstore last: the columns before it are the anchors it is compared with.
COLUMNS = ["kvikio", "zarr", "tensorstore", "czarr", "czarr core", "gdsstore"]
COLUMN_TITLES = {
    "kvikio": "kvikio 26.10 GDSStore / CuFile",
    "zarr": "zarr LocalStore + enable_gpu",
    "zarrs": "zarrs pipeline + cp.asarray",
    "tensorstore": "tensorstore + cp.asarray",
    "czarr": "czarr configure_gpu + zarr",
    "czarr core": "czarr.core.Array",
    "gdsstore": "gdsstore",
}
# contender -> its reader of a zarr array (benchmarks/_anchors.py)
ZARR_READERS: dict[str, Callable[[bool], anchors.Reader]] = {
    "kvikio": anchors.zarr_kvikio,
    "zarr": anchors.zarr_localstore,
    "zarrs": anchors.zarr_zarrs,
    "tensorstore": anchors.zarr_tensorstore,
    "czarr": anchors.zarr_czarr,
    "czarr core": anchors.zarr_czarr_core,
    "gdsstore": anchors.zarr_gdsstore,
}
# workload -> (chunk edge, shard edge or None, compressed, GB/s target on the GPU machine)
WORKLOADS: dict[str, tuple[int, int | None, bool, float]] = {
    "chunks 1024², none": (1024, None, False, 25),
    "chunks 1024², zstd": (1024, None, True, 12),
    "chunks 256², none": (256, None, False, 5),
    "chunks 256², zstd": (256, None, True, 4),
    "shards 4096² of 256², none": (256, 4096, False, 20),
    "shards 4096² of 256², zstd": (256, 4096, True, 10),
}
RAW = "raw file → memory"
FAST_WRITE = {"codec_pipeline.path": "zarr.core.codec_pipeline.FusedCodecPipeline", "async.concurrency": 64}
RAW_TARGET = 45.0


def _data(size: int) -> np.ndarray:
    # Smooth field + noise at 1e-3: zstd finds structure (about 1.5-2x), unlike white noise.
    rng = np.random.default_rng(0)
    x = np.linspace(0, 8 * np.pi, size, dtype="f4")
    a = np.sin(x)[:, None] * np.cos(x)[None, :]
    a += rng.standard_normal((size, size), dtype="f4") * np.float32(0.05)
    return np.round(a, 3).astype("f4")


def _write(root: Path, size: int, log: Callable[[str], None]) -> dict[str, str]:
    """Write the raw file and the zarr arrays (once: kept when the same size exists)."""
    import zarr
    from zarr.codecs import ZstdCodec
    from zarr.storage import LocalStore

    stamp = root / f"complete-{size}"
    paths = {RAW: str(root / "raw.bin")}
    for name, (chunk, shard, _, _) in WORKLOADS.items():
        paths[name] = str(root / f"c{chunk}-s{shard or 0}-{'zstd' if WORKLOADS[name][2] else 'none'}.zarr")
    if stamp.exists():
        log(f"data: reusing {root}")
        return paths
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    t0 = time.perf_counter()
    data = _data(size)
    data.tofile(paths[RAW])
    with zarr.config.set(FAST_WRITE):
        for name, (chunk, shard, zstd, _) in WORKLOADS.items():
            c = min(chunk, size)
            kw: dict[str, Any] = {"shards": (min(shard, size),) * 2} if shard else {}
            z = zarr.create_array(
                LocalStore(paths[name]),
                shape=data.shape,
                chunks=(c, c),
                dtype="f4",
                compressors=[ZstdCodec(level=3)] if zstd else None,
                fill_value=0.0,
                **kw,
            )
            z[:] = data
    stamp.touch()
    log(
        f"data: wrote {len(paths)} datasets of {data.nbytes / 2**20:.0f} MiB in {time.perf_counter() - t0:.1f} s"
    )
    return paths


def _warm(root: Path, log: Callable[[str], None]) -> None:
    """Read every data file once: all contenders start from the same warm page cache."""
    t0 = time.perf_counter()
    n = 0
    buf = bytearray(8 << 20)
    for dirpath, _, files in os.walk(root):
        for name in files:
            with open(os.path.join(dirpath, name), "rb", buffering=0) as f:
                while k := f.readinto(buf):
                    n += k
    log(f"data: {n / 2**30:.1f} GiB read once to warm the page cache in {time.perf_counter() - t0:.1f} s")


def _warm_gpu(log: Callable[[str], None], seconds: float = 1.0) -> None:
    """Copy to the GPU for a second first: the first timed cell then finds the GPU and its link out of
    their idle power states, as every later cell does."""
    cp = anchors._cupy()
    src = cp.cuda.alloc_pinned_memory(256 << 20)
    dst = cp.empty(256 << 20, dtype=cp.uint8)
    t0 = time.perf_counter()
    n = 0
    while time.perf_counter() - t0 < seconds:
        cp.cuda.runtime.memcpy(int(dst.data.ptr), src.ptr, 256 << 20, cp.cuda.runtime.memcpyHostToDevice)
        n += 1
    log(f"gpu: {n} warm-up copies of 256 MiB in {time.perf_counter() - t0:.1f} s")


def _du(path: str) -> int:
    if os.path.isfile(path):
        return os.path.getsize(path)
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs)


#: A cell whose warm-up read takes longer than this is timed once (slow anchors would otherwise
#: dominate the run; their spread is small next to their time).
SLOW_READ_S = 1.0


def _measure(read: anchors.Reader, path: str, nbytes: int, repeat: int, device: bool, check: Any) -> float:
    t0 = time.perf_counter()
    x = read(path)  # warm: page cache, imports, pools, kernels
    anchors.sync(device)
    warm = time.perf_counter() - t0
    if check is not None:
        check(x)
    del x
    best = float("inf")
    for _ in range(repeat if warm < SLOW_READ_S else 1):
        t0 = time.perf_counter()
        x = read(path)
        anchors.sync(device)
        best = min(best, time.perf_counter() - t0)
        del x
    return nbytes / best / 1e9


def _checker(ref: np.ndarray, raw: bool) -> Callable[[Any], None]:
    def check(x: Any) -> None:
        if raw:
            x = x.view("f4").reshape(ref.shape)
        # Spot checks, copied to the host one by one (a full compare of 1 GiB would dominate the run).
        for sl in (
            np.s_[:7, :5],
            np.s_[-3:, -9:],
            np.s_[ref.shape[0] // 2, ::97],
            np.s_[1000:1030, 3000:3030],
        ):
            part = x[sl]
            h = part.get() if hasattr(part, "get") else np.asarray(part)
            if not np.array_equal(h, ref[sl]):
                raise AssertionError("read returned wrong data")

    return check


def _trace_routes(read: anchors.Reader, path: str, device: bool) -> dict[str, Any]:
    import gdsstore

    with gdsstore.trace() as t:
        read(path)
        anchors.sync(device)
    routes: dict[str, Any] = {
        f"{op}/{route}: {reason}": {"ops": v["ops"], "bytes": v["bytes"], "seconds": round(v["seconds"], 6)}
        for (op, route, reason), v in t.by_reason().items()
    }
    routes["wall seconds"] = t.stats.get("wall", {}).get("seconds")
    return routes


def _plot(results: dict[str, Any], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = results["rows"]
    fig, ax = plt.subplots(figsize=(12, 5.5))
    width = 0.8 / len(COLUMNS)
    for k, col in enumerate(COLUMNS):
        vals = [r["gbps"].get(col) or 0.0 for r in rows]
        pos = [i + (k - (len(COLUMNS) - 1) / 2) * width for i in range(len(rows))]
        ax.bar(pos, vals, width, label=COLUMN_TITLES[col])
    for i, r in enumerate(rows):
        if r.get("target") and results["device"]:
            ax.hlines(r["target"], i - 0.4, i + 0.4, colors="k", linestyles="dashed", linewidth=1)
    ax.set_xticks(range(len(rows)))
    ax.set_xticklabels([r["workload"] for r in rows], rotation=20, ha="right")
    ax.set_ylabel(f"GB/s (best of {results['repeat']}, warm cache)")
    where = "GPU" if results["device"] else "host memory (no GPU)"
    ax.set_title(
        f"float32 {results['size']}² ({results['nbytes'] / 2**30:.2f} GiB) → {where}; dashed: target"
    )
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    plt.close(fig)


def _markdown(results: dict[str, Any]) -> str:
    head = ["workload", *[COLUMN_TITLES[c] for c in COLUMNS], "target", "gdsstore / best anchor"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in results["rows"]:
        cells = [r["workload"]]
        for c in COLUMNS:
            v = r["gbps"].get(c)
            why = r.get("failed", {}).get(c)
            cells.append(f"failed: {_short(why)}" if why else "-" if v is None else f"{v:.2f}")
        cells.append(f"≥ {r['target']:g}" if r.get("target") else "")
        anchors_ = [r["gbps"][c] for c in COLUMNS[:-1] if r["gbps"].get(c)]
        g = r["gbps"].get("gdsstore")
        cells.append(f"{g / max(anchors_):.2f}x" if g and anchors_ else "-")
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    where = "GPU (cupy)" if results["device"] else "host memory (numpy; no GPU here)"
    lines.append(
        f"float32 {results['size']}² = {results['nbytes'] / 2**30:.2f} GiB into {where}; warm page cache; "
        f"best of {results['repeat']}; {results['machine']}."
    )
    for n in results["notes"]:
        lines.append(f"- {n}")
    return "\n".join(lines) + "\n"


def _short(reason: str, width: int = 48) -> str:
    """A failure's reason for a table cell: one line, no pipes (the full text is in the notes)."""
    line = reason.splitlines()[0] if reason else "?"
    line = line.replace("|", "/")
    return line if len(line) <= width else line[: width - 1] + "…"


def _exit_reason(code: int) -> str:
    """Why a worker process ended, in words (a negative code is the signal that killed it)."""
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit status {code}"


COLUMN_TIMEOUT_S = 900


def _run_column(
    col: str, paths: dict[str, str], size: int, repeat: int, device: bool, log: Callable[[str], None]
) -> dict[str, Any]:
    """Measure one contender on every workload: ``{"gbps": {workload: GB/s or None}, "notes": [...],
    "traces": {workload: routes}}``."""
    if device:
        _warm_gpu(log)
    ref = np.fromfile(paths[RAW], dtype="f4").reshape(size, size)
    nbytes = ref.nbytes
    makers: dict[str, Callable[[], anchors.Reader]] = {
        c: functools.partial(ZARR_READERS[c], device) for c in COLUMNS
    }
    raw_makers: dict[str, Callable[[], anchors.Reader]] = {
        "kvikio": lambda: anchors.raw_kvikio(device, threads=int(os.environ["KVIKIO_NTHREADS"])),
        "gdsstore": lambda: anchors.raw_gdsstore(device),
    }
    gbps: dict[str, float | None] = {}
    failed: dict[str, str] = {}
    traces: dict[str, Any] = {}
    notes: list[str] = []
    for workload in [RAW, *WORKLOADS]:
        make = (raw_makers if workload == RAW else makers).get(col)
        if make is None:
            continue
        path = paths[workload]
        try:
            read = make()
            g = _measure(read, path, nbytes, repeat, device, _checker(ref, workload == RAW))
            gbps[workload] = round(g, 3)
            log(f"{workload:32s} {col:12s} {g:8.2f} GB/s")
            if col == "gdsstore":
                traces[workload] = _trace_routes(read, path, device)
        except anchors.Missing as exc:
            gbps[workload] = None
            note = f"{COLUMN_TITLES[col]}: skipped, {exc}"
            if note not in notes:
                notes.append(note)
        except Exception as exc:  # one failing cell must not lose the table
            gbps[workload] = None
            msg = f"{type(exc).__name__}: {str(exc)[:300]}"
            failed[workload] = msg
            notes.append(f"{workload} / {col}: failed: {msg}")
            log(f"{workload} / {col}: FAILED {msg}")
    if col == "kvikio" and device:
        try:
            g = _measure(anchors.raw_kvikio(device, threads=None), paths[RAW], nbytes, repeat, device, None)
            notes.append(f"kvikio CuFile with its default thread count: {g:.2f} GB/s (table: 16 threads)")
            import kvikio.defaults as kd

            notes.append(
                f"kvikio settings: compat_mode={kd.get('compat_mode')}, num_threads={kd.get('num_threads')}, "
                f"task_size={kd.get('task_size')}"
            )
        except Exception as exc:
            notes.append(f"kvikio default-threads raw read: {type(exc).__name__}: {str(exc)[:300]}")
    return {"gbps": gbps, "failed": failed, "notes": notes, "traces": traces}


def _worker_cmd(args: argparse.Namespace, root: Path, col: str, result: str, *extra: str) -> list[str]:
    """The command line of a worker: one contender in a fresh interpreter, its result written to ``result``."""
    return [
        sys.executable,
        os.path.abspath(__file__),
        "--out",
        str(args.out),
        "--data",
        str(root),
        "--size",
        str(args.size),
        "--repeat",
        str(args.repeat),
        "--column",
        col,
        "--result",
        result,
        *(["--host"] if args.host else []),
        *extra,
    ]


def _table_column(args: argparse.Namespace, root: Path, col: str) -> tuple[dict[str, Any] | None, str]:
    """Run one contender's worker over every workload: its result, or None and why there is none."""
    with tempfile.TemporaryDirectory() as tmp:
        res_path = os.path.join(tmp, "result.json")
        try:
            proc = subprocess.run(
                _worker_cmd(args, root, col, res_path), check=False, timeout=COLUMN_TIMEOUT_S
            )
        except subprocess.TimeoutExpired:
            return None, f"worker process timed out after {COLUMN_TIMEOUT_S} s"
        if proc.returncode != 0 or not os.path.exists(res_path):
            return None, f"worker process failed ({_exit_reason(proc.returncode)})"
        return json.loads(Path(res_path).read_text()), ""


def _table(
    args: argparse.Namespace,
    out: Path,
    root: Path,
    device: bool,
    notes: list[str],
    log: Callable[[str], None],
) -> dict[str, Any]:
    """The DESIGN.md table: each contender in its own process over every workload, one after the other."""
    paths = _write(root, args.size, log)
    os.sync()  # written data goes to disk now, not as writeback during the timed reads
    _warm(root, log)
    rows: list[dict[str, Any]] = [
        {
            "workload": w,
            "gbps": dict.fromkeys(COLUMNS),
            "failed": {},
            "stored_bytes": _du(paths[w]),
            "target": RAW_TARGET if w == RAW else WORKLOADS[w][3],
        }
        for w in [RAW, *WORKLOADS]
    ]
    only = set(args.only.split(",")) if args.only else set(COLUMNS)
    for col in COLUMNS:
        if col not in only:
            continue
        result, why = _table_column(args, root, col)
        if result is None:
            notes.append(f"{COLUMN_TITLES[col]}: {why}")
            for row in rows:
                if row["workload"] != RAW or col in ("kvikio", "gdsstore"):
                    row["failed"][col] = why
            continue
        for row in rows:
            row["gbps"][col] = result["gbps"].get(row["workload"])
            if row["workload"] in result.get("failed", {}):
                row["failed"][col] = result["failed"][row["workload"]]
            if row["workload"] in result.get("traces", {}):
                row["gdsstore_trace"] = result["traces"][row["workload"]]
        for note in result["notes"]:
            if note not in notes:
                notes.append(note)
    notes.append(f"cells whose warm-up read takes over {SLOW_READ_S:g} s are timed once")
    notes.append("each contender measured in its own process, one after the other")
    return {"rows": rows}


# -- rows of czarr's kind: one 1 GiB array in few large chunks ---------------------------------------------

LARGE_COLUMNS = ["kvikio", "zarr", "zarrs", "tensorstore", "czarr", "czarr core", "gdsstore"]
# chunk MiB at the default size -> chunks along (rows, columns); the chunk edges are the array's edge
# divided by these, so a smaller --size keeps the chunk counts (64, 16, 8) and the layout.
LARGE_CHUNKS: dict[int, tuple[int, int]] = {16: (8, 8), 64: (4, 4), 128: (4, 2)}
WORKER_TIMEOUT_S = 240.0
STARTED = time.perf_counter()  # --time-limit counts from here: the data's writing included


def _large_rows(size: int) -> dict[str, tuple[tuple[int, int], bool]]:
    """Row name -> (chunk shape, zstd level 1 or uncompressed)."""
    rows: dict[str, tuple[tuple[int, int], bool]] = {}
    for nr, nc in LARGE_CHUNKS.values():
        if size % nr or size % nc:
            raise SystemExit(f"--size {size}: the large-chunk rows need a multiple of 8 (default 16384)")
        chunk = (size // nr, size // nc)
        nbytes = chunk[0] * chunk[1] * 4
        label = f"{nbytes >> 20} MiB" if nbytes >= 1 << 20 else f"{nbytes >> 10} KiB"
        for zstd in (False, True):
            rows[f"{nr * nc} chunks of {label}, {'zstd 1' if zstd else 'none'}"] = (chunk, zstd)
    return rows


def _large_paths(root: Path, size: int) -> dict[str, str]:
    paths = {RAW: str(root / "raw.bin")}
    for name, ((cr, cc), zstd) in _large_rows(size).items():
        paths[name] = str(root / f"large-{cr}x{cc}-{'zstd1' if zstd else 'none'}.zarr")
    return paths


def _write_large(root: Path, size: int, log: Callable[[str], None]) -> dict[str, str]:
    """Write the raw file and the large-chunk arrays (once: kept when the same size exists)."""
    import zarr
    from zarr.codecs import ZstdCodec
    from zarr.storage import LocalStore

    paths = _large_paths(root, size)
    stamp = root / f"complete-large-{size}"
    if stamp.exists():
        log(f"data: reusing {root}")
        return paths
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    t0 = time.perf_counter()
    data = _data(size)
    data.tofile(paths[RAW])
    with zarr.config.set(FAST_WRITE):
        for name, (chunks, zstd) in _large_rows(size).items():
            z = zarr.create_array(
                LocalStore(paths[name]),
                shape=data.shape,
                chunks=chunks,
                dtype="f4",
                compressors=[ZstdCodec(level=1)] if zstd else None,
                fill_value=0.0,
            )
            z[:] = data
    stamp.touch()
    log(
        f"data: wrote {len(paths)} datasets of {data.nbytes / 2**20:.0f} MiB in {time.perf_counter() - t0:.1f} s"
    )
    return paths


class _DevicePeak:
    """Device memory in use above the level this process started from, sampled by a thread polling
    ``cudaMemGetInfo`` every 0.5 ms (only around untimed reads: the polling takes the GIL)."""

    def __init__(self, device: bool) -> None:
        self._runtime = anchors._cupy().cuda.runtime if device else None
        self.baseline = self._free()

    def _free(self) -> int:
        return int(self._runtime.memGetInfo()[0]) if self._runtime is not None else 0

    @contextmanager
    def sampled(self) -> Iterator[list[int | None]]:
        """Yield a box that holds, once the block ends, the most bytes in use above the baseline."""
        box: list[int | None] = [None]
        if self._runtime is None:
            yield box
            return
        least = [self._free()]
        stop = threading.Event()

        def poll() -> None:
            while not stop.is_set():
                least[0] = min(least[0], self._free())
                stop.wait(0.0005)

        thread = threading.Thread(target=poll, daemon=True)
        thread.start()
        try:
            yield box
        finally:
            stop.set()
            thread.join()
            box[0] = self.baseline - min(least[0], self._free())


def _mismatch(x: Any, ref: np.ndarray) -> str | None:
    """Why ``x`` is not the source array (every element compared), or None when it is."""
    if tuple(x.shape) != ref.shape or np.dtype(x.dtype) != ref.dtype:
        return f"wrong result: shape {tuple(x.shape)} {x.dtype}, expected {ref.shape} {ref.dtype}"
    if hasattr(x, "get"):
        cp = anchors._cupy()
        same = bool(cp.array_equal(x, cp.asarray(ref)))
    else:
        same = bool(np.array_equal(np.asarray(x), ref))
    return None if same else "wrong result: the data differ from the source array"


def _release(device: bool) -> None:
    """Free what the last read left in CuPy's pools: each row's warm-up read starts from the same state."""
    import gc

    gc.collect()
    if device:
        cp = anchors._cupy()
        cp.get_default_memory_pool().free_all_blocks()
        cp.get_default_pinned_memory_pool().free_all_blocks()


def _large_cell(
    read: anchors.Reader, path: str, ref: np.ndarray, repeat: int, device: bool, peak: _DevicePeak
) -> dict[str, Any]:
    """One untimed read (device memory sampled, every element checked), then ``repeat`` timed reads."""
    try:
        with peak.sampled() as used:
            t0 = time.perf_counter()
            x = read(path)
            anchors.sync(device)
            warm = time.perf_counter() - t0
        problem = _mismatch(x, ref)
        del x
        if problem:
            return {"failed": problem}
        seconds: list[float] = []
        cpu: list[float] = []
        for _ in range(repeat if warm < SLOW_READ_S else 1):
            t0, c0 = time.perf_counter(), time.process_time()
            x = read(path)
            anchors.sync(device)
            seconds.append(time.perf_counter() - t0)
            cpu.append(time.process_time() - c0)
            del x
        return {"seconds": seconds, "cpu_seconds": cpu, "peak_bytes": used[0], "warm_seconds": warm}
    except Exception as exc:  # MemoryError, an nVCOMP API mismatch...: this row fails, the others run
        return {"failed": f"{type(exc).__name__}: {str(exc)[:300]}"}
    finally:
        _release(device)


def _write_json(path: Path, obj: Any) -> None:
    """Replace ``path`` whole: a worker killed mid-write leaves its previous rows readable."""
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(obj, default=str))
    os.replace(tmp, path)


def _large_worker(args: argparse.Namespace, root: Path, device: bool, log: Callable[[str], None]) -> None:
    """A worker of the large-chunk rows: one contender, the rows in ``--order``, each row's result saved
    as soon as it is measured."""
    names = list(_large_rows(args.size))
    paths = _large_paths(root, args.size)
    ref = np.fromfile(paths[RAW], dtype="f4").reshape(args.size, args.size)
    out = Path(args.result)
    result: dict[str, Any] = {"cells": {}}
    if device:
        _warm_gpu(log, seconds=0.5)
    peak = _DevicePeak(device)
    try:
        read = ZARR_READERS[args.column](device)
    except anchors.Missing as exc:
        result["missing"] = str(exc)
    except Exception as exc:
        result["error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
    _write_json(out, result)
    if "missing" in result or "error" in result:
        return
    for i in (int(k) for k in args.order.split(",")):
        name = names[i]
        log(f"{name:32s} {args.column:12s} reading")
        cell = _large_cell(read, paths[name], ref, args.repeat, device, peak)
        if args.column == "gdsstore" and args.round == 0 and "failed" not in cell:
            cell["trace"] = _trace_routes(read, paths[name], device)
        result["cells"][name] = cell
        _write_json(out, result)
        log(f"{name:32s} {args.column:12s} {cell.get('failed') or cell['seconds']}")


_FAILURE_LINE = re.compile(r"^([\w.]*(Error|Exception)\b|Fatal Python error)")


def _failure_line(path: Path) -> str:
    """The last exception or fatal-error line a worker printed (a traceback's last line), if any."""
    lines = [ln.strip() for ln in path.read_text(errors="replace").splitlines()]
    found = [ln for ln in lines if _FAILURE_LINE.match(ln)]
    return found[-1][:300] if found else ""


def _large_process(
    args: argparse.Namespace, root: Path, col: str, order: list[int], rnd: int
) -> dict[str, Any]:
    """Run one contender's worker; one that dies or runs out of time keeps the rows it finished and says
    how it ended (its output, with the traceback, is in OUT/workers/)."""
    logs = Path(args.out) / "workers"
    logs.mkdir(parents=True, exist_ok=True)
    log_path = logs / f"{col.replace(' ', '-')}-round{rnd + 1}.log"
    with tempfile.TemporaryDirectory() as tmp:
        res = os.path.join(tmp, "result.json")
        extra = ("--large", "--round", str(rnd), "--order", ",".join(map(str, order)))
        ended = ""
        with open(log_path, "w") as f:
            try:
                proc = subprocess.run(  # faulthandler: a worker that crashes prints its Python stack
                    [sys.executable, "-X", "faulthandler", *_worker_cmd(args, root, col, res, *extra)[1:]],
                    stdout=f,
                    stderr=subprocess.STDOUT,
                    timeout=args.worker_timeout,
                    check=False,
                )
                if proc.returncode:
                    ended = _exit_reason(proc.returncode)
            except subprocess.TimeoutExpired:
                ended = f"timed out after {args.worker_timeout:g} s"
        result: dict[str, Any] = json.loads(Path(res).read_text()) if os.path.exists(res) else {"cells": {}}
    if ended:
        last = _failure_line(log_path)
        result["ended"] = f"worker {ended}" + (f": {last}" if last else "") + f" (output: {log_path.name})"
    return result


def _rotated(items: list[Any], k: int) -> list[Any]:
    k %= max(len(items), 1)
    return items[k:] + items[:k]


def _merge_large(
    cells: dict[str, dict[str, dict[str, list[Any]]]],
    names: list[str],
    col: str,
    order: list[int],
    res: dict[str, Any],
    rnd: int,
) -> None:
    """Add one worker's rows to the samples; rows it did not reach get why."""
    why = res.get("error") or res.get("ended")
    reached = True
    for i in order:
        slot = cells[names[i]][col]
        cell = res["cells"].get(names[i])
        if cell is None:
            if why:
                slot["failed"].append({"round": rnd + 1, "why": why if reached else f"not reached: {why}"})
            reached = False
        elif "failed" in cell:
            slot["failed"].append({"round": rnd + 1, "why": cell["failed"]})
        else:
            slot["seconds"] += cell["seconds"]
            slot["cpu_seconds"] += cell["cpu_seconds"]
            slot["peak_bytes"].append(cell["peak_bytes"])
            if "trace" in cell:
                slot["trace"].append(cell["trace"])


def _large_summary(slot: dict[str, list[Any]], nbytes: int) -> dict[str, Any]:
    """One cell: medians over every timed read of every round, the most device memory any round used."""
    if not slot["seconds"]:
        return {
            "failed": slot["failed"][0]["why"] if slot["failed"] else "not run",
            "failures": slot["failed"],
        }
    med = statistics.median(slot["seconds"])
    peaks = [p for p in slot["peak_bytes"] if p is not None]
    return {
        "gbps": round(nbytes / med / 1e9, 3),
        "seconds": round(med, 4),
        "cpu_seconds": round(statistics.median(slot["cpu_seconds"]), 3),
        "peak_mib": round(max(peaks) / 2**20) if peaks else None,
        "reads": len(slot["seconds"]),
        "failures": slot["failed"],
        **({"gdsstore_trace": slot["trace"][0]} if slot["trace"] else {}),
    }


def _large(
    args: argparse.Namespace,
    out: Path,
    root: Path,
    device: bool,
    notes: list[str],
    log: Callable[[str], None],
) -> dict[str, Any]:
    """The large-chunk rows: every contender, a fresh process per contender and round, the contenders'
    order and the rows' order rotated each round; medians of every timed read."""
    paths = _write_large(root, args.size, log)
    os.sync()
    _warm(root, log)
    names = list(_large_rows(args.size))
    only = set(args.only.split(",")) if args.only else set(LARGE_COLUMNS)
    cols = [c for c in LARGE_COLUMNS if c in only]
    cells: dict[str, dict[str, dict[str, list[Any]]]] = {
        n: {c: {k: [] for k in ("seconds", "cpu_seconds", "peak_bytes", "failed", "trace")} for c in cols}
        for n in names
    }
    skipped: dict[str, str] = {}
    for rnd, col in [(r, c) for r in range(args.rounds) for c in _rotated(cols, r)]:
        if col in skipped:
            continue
        if args.time_limit and time.perf_counter() - STARTED > args.time_limit:
            notes.append(
                f"time limit of {args.time_limit:g} s reached: round {rnd + 1} from {col} on not run"
            )
            break
        order = _rotated(list(range(len(names))), rnd)
        res = _large_process(args, root, col, order, rnd)
        if "missing" in res:
            skipped[col] = res["missing"]
            log(f"{col}: skipped, {res['missing']}")
            continue
        _merge_large(cells, names, col, order, res, rnd)
        log(f"round {rnd + 1} {col}: {len(res['cells'])} rows{'; ' + res['ended'] if 'ended' in res else ''}")
    nbytes = args.size * args.size * 4
    rows = [
        {
            "workload": n,
            "stored_bytes": _du(paths[n]),
            "readers": {
                c: {"skipped": skipped[c]} if c in skipped else _large_summary(cells[n][c], nbytes)
                for c in cols
            },
        }
        for n in names
    ]
    notes.append(
        f"{args.rounds} rounds; each round runs every contender in a fresh process (contenders' order and rows' "
        f"order rotated each round): an untimed read (device memory sampled, every element checked against the "
        f"source), then {args.repeat} timed reads (1 when the untimed one took over {SLOW_READ_S:g} s); GB/s and "
        f"CPU-seconds are medians of every timed read; device peak: the most memory in use above the process's "
        f"starting level during an untimed read, the output included, most of any round"
    )
    for c, why in skipped.items():
        notes.append(f"{COLUMN_TITLES[c]}: skipped, {why}")
    return {"columns": cols, "rows": rows}


def _large_cell_text(r: dict[str, Any]) -> str:
    if "skipped" in r:
        return "-"
    if "failed" in r:
        return f"failed: {_short(r['failed'])}"
    return f"{r['gbps']:.2f}"


def _ratio(g: float | None, others: list[float]) -> str:
    return f"{g / max(others):.2f}x" if g and others else "-"


def _large_markdown(results: dict[str, Any]) -> str:
    """The compact table (GB/s per contender), the details (CPU-seconds, device peak), then the notes."""
    cols = results["columns"]
    head = [
        "row",
        "stored MiB",
        *cols,
        "gdsstore / best anchor",
        "gdsstore / czarr",
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in results["rows"]:
        rs = row["readers"]
        g = rs.get("gdsstore", {}).get("gbps")
        anchors_ = [rs[c]["gbps"] for c in cols if c != "gdsstore" and rs[c].get("gbps")]
        czarrs = [rs[c]["gbps"] for c in ("czarr", "czarr core") if c in rs and rs[c].get("gbps")]
        cells = [
            row["workload"],
            f"{row['stored_bytes'] / 2**20:.0f}",
            *[_large_cell_text(rs[c]) for c in cols],
        ]
        lines.append("| " + " | ".join([*cells, _ratio(g, anchors_), _ratio(g, czarrs)]) + " |")
    lines += [
        "",
        "| row | reader | GB/s | seconds | CPU-seconds | device peak MiB | timed reads |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in results["rows"]:
        for c in cols:
            r = row["readers"][c]
            if "gbps" in r:
                peak = "-" if r["peak_mib"] is None else str(r["peak_mib"])
                lines.append(
                    f"| {row['workload']} | {c} | {r['gbps']:.2f} | {r['seconds']:.3f} | {r['cpu_seconds']:.2f} "
                    f"| {peak} | {r['reads']} |"
                )
    lines.append("")
    where = "GPU (cupy)" if results["device"] else "host memory (numpy; no GPU here)"
    lines.append(
        f"float32 {results['size']}² = {results['nbytes'] / 2**30:.2f} GiB into {where}; warm page cache; {results['machine']}."
    )
    lines.append("- columns: " + "; ".join(f"{c}: {COLUMN_TITLES[c]}" for c in cols))
    lines.append("- versions: " + ", ".join(f"{k} {v}" for k, v in results["versions"].items()))
    for n in results["notes"]:
        lines.append(f"- {n}")
    for row in results["rows"]:
        for c in cols:
            for f in row["readers"][c].get("failures", []):
                lines.append(f"- {row['workload']} / {c}, round {f['round']}: failed: {f['why']}")
    return "\n".join(lines) + "\n"


VERSIONED = ["gdsstore", "zarr", "numcodecs", "czarr", "nvidia-nvcomp-cu13", "kvikio-cu13", "zarrs", "tensorstore",
             "cupy-cuda13x", "rmm-cu13", "cuda-core", "cuda-bindings", "nvidia-cufile"]  # fmt: skip


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    found = {}
    for name in VERSIONED:
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            found[name] = "not installed"
    return found


def _listing(size: int, device: bool) -> str:
    """What a run would do, without writing or reading data: rows, chunk counts, contenders and why any
    of them would be skipped here."""
    lines = [
        f"float32 {size}² ({size * size * 4 / 2**30:.2f} GiB), {'GPU' if device else 'host mode (no GPU)'}"
    ]
    lines.append("table rows (default mode): " + "; ".join([RAW, *WORKLOADS]))
    lines.append("large-chunk rows (--large), zstd at level 1:")
    for name, ((cr, cc), zstd) in _large_rows(size).items():
        lines.append(
            f"  {name}: chunks {cr}x{cc}, {(size // cr) * (size // cc)} chunks, {'zstd' if zstd else 'no codec'}"
        )
    lines.append("contenders:")
    for col in LARGE_COLUMNS:
        try:
            ZARR_READERS[col](device)
            state = "available"
        except anchors.Missing as exc:
            state = f"skipped: {exc}"
        except Exception as exc:
            state = f"failed: {type(exc).__name__}: {str(exc)[:200]}"
        lines.append(f"  {col} ({COLUMN_TITLES[col]}): {state}")
    lines.append("versions: " + ", ".join(f"{k} {v}" for k, v in _versions().items()))
    return "\n".join(lines)


def _parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, help="directory for the results")
    p.add_argument(
        "--size", type=int, default=16384, help="edge of the float32 square array (default 16384: 1 GiB)"
    )
    p.add_argument("--repeat", type=int, default=3, help="timed reads per cell and process")
    p.add_argument(
        "--data",
        default=None,
        help="where to write the data (default: OUT/data or OUT/data-large; reused if complete)",
    )
    p.add_argument("--keep-data", action="store_true", help="keep the data directory afterwards")
    p.add_argument("--host", action="store_true", help="host buffers even when a GPU is present")
    p.add_argument("--only", default=None, help="comma-separated column names to run (default: all)")
    p.add_argument(
        "--large",
        action="store_true",
        help="the large-chunk rows (16/64/128 MiB chunks) instead of the table",
    )
    p.add_argument("--rounds", type=int, default=3, help="--large: processes per contender, interleaved")
    p.add_argument(
        "--time-limit",
        type=float,
        default=0.0,
        help="--large: start no worker after this many seconds (from the start, data writing included)",
    )
    p.add_argument(
        "--worker-timeout", type=float, default=WORKER_TIMEOUT_S, help="--large: seconds per process"
    )
    p.add_argument(
        "--list", action="store_true", help="print the rows and which contenders can run here, then exit"
    )
    p.add_argument("--column", default=None, help=argparse.SUPPRESS)  # worker mode (one contender)
    p.add_argument("--result", default=None, help=argparse.SUPPRESS)
    p.add_argument("--round", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--order", default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    unknown = (
        set(args.only.split(",")) - set(LARGE_COLUMNS if args.large else COLUMNS) if args.only else set()
    )
    if unknown:
        p.error(
            f"--only: unknown column(s) {', '.join(sorted(unknown))}; choose from {', '.join(LARGE_COLUMNS if args.large else COLUMNS)}"
        )
    if args.large:
        _large_rows(args.size)  # a size the rows cannot divide stops here, before any data is written
    return args


def _save(results: dict[str, Any], out: Path, large: bool, log: Callable[[str], None]) -> str:
    stem = "large" if large else "results"
    text = _large_markdown(results) if large else _markdown(results)
    (out / f"{stem}.json").write_text(json.dumps(results, indent=2, default=str))
    (out / f"{stem}.md").write_text(text)
    if not large:
        try:
            _plot(results, out / "results.png")
        except Exception as exc:
            log(f"plot failed: {type(exc).__name__}: {exc}")
    return text


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    root = Path(args.data) if args.data else out / ("data-large" if args.large else "data")

    def log(msg: str) -> None:
        print(f"[zarr_bench {time.strftime('%H:%M:%S')}] {msg}", flush=True)

    device = False
    if not args.host:
        try:
            anchors._cupy()
            device = True
        except anchors.Missing as exc:
            log(f"host mode: {exc}")
    # kvikio reads its thread count at import: give it the 16 threads DESIGN.md's anchors used
    # (its default of 1 is reported separately below). An explicit environment wins.
    os.environ.setdefault("KVIKIO_NTHREADS", "16")
    # kvikio's cuFile path opens files O_DIRECT (page cache bypassed: ~1.7 GB/s on this VM's disk, see
    # docs/performance.md); its compat (POSIX) mode reads the warm cache: its best configuration here.
    os.environ.setdefault("KVIKIO_COMPAT_MODE", "ON")
    if args.list:
        print(_listing(args.size, device))
        return 0
    if args.column and args.large:  # a worker of the large-chunk rows
        _large_worker(args, root, device, log)
        return 0
    if args.column:  # a worker of the table: one contender, every workload, in this fresh process
        result = _run_column(args.column, _write(root, args.size, log), args.size, args.repeat, device, log)
        Path(args.result).write_text(json.dumps(result, default=str))
        return 0
    notes = [
        f"kvikio anchors with KVIKIO_NTHREADS={os.environ['KVIKIO_NTHREADS']}, "
        f"KVIKIO_COMPAT_MODE={os.environ['KVIKIO_COMPAT_MODE']}",
    ]
    if not device:
        notes.append("host mode: no GPU, numbers are storage → host memory, not the GPU table")
    body = (_large if args.large else _table)(args, out, root, device, notes, log)

    import gdsstore

    results = {
        "size": args.size,
        "nbytes": args.size * args.size * 4,
        "repeat": args.repeat,
        "rounds": args.rounds if args.large else 1,
        "device": device,
        "machine": f"{platform.node()}, {os.cpu_count()} cores, Python {platform.python_version()}",
        "gdsstore_version": gdsstore.__version__,
        "versions": _versions(),
        "settings": {k: gdsstore.config.get(k) for k in ("compat_mode", "num_threads", "task_size")},
        **body,
        "notes": notes,
    }
    print(_save(results, out, args.large, log))
    if not args.keep_data and not args.data:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
