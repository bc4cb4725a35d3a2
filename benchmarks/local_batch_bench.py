"""The local many-file batch: N files of SIZE read into one buffer through the engine's batch
(``gdsstore.engine.batch.read_batch``) on its Python threads and through the native core, beside plain
Python and (where installed) tensorstore's ``file`` kvstore. Warm page cache, interleaved rounds, medians,
every byte checked each round, CPU-seconds of the process.

Then a breakdown of where a file's time goes on one thread (``open``/``close``, ``fstat``, ``preadv`` alone,
the Python route's per-file function, the core) and the batch's fixed costs (planning and thread hand-offs:
a batch of size-0 reads, which opens nothing), with the machine's memory-copy bandwidth as the ceiling.

``--device N``: the batch lands in GPU N's memory the way ``stage_local(..., device=N)`` does it (slots of
the POSIX route's pinned bounce ring, each copied asynchronously while the next is read); bytes are checked
after a copy back.

    .venv/bin/python benchmarks/local_batch_bench.py --rounds 7 --out local_batch.json
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
from collections.abc import Callable
from typing import Any

import numpy as np

import gdsstore
from gdsstore import policy
from gdsstore.engine import batch

Reader = Callable[[], Any]  # one round: reads every file into the destination
WORKLOADS = {
    "4096x256KiB": (4096, 256 << 10),
    "8192x64KiB": (8192, 64 << 10),
    "16384x16KiB": (16384, 16 << 10),
    "64x16KiB": (64, 16 << 10),
}


def make_files(root: str, name: str, n: int, size: int) -> tuple[list[str], np.ndarray]:
    """``n`` files of ``size`` random bytes (kept between runs) and their bytes end to end."""
    d = os.path.join(root, name)
    os.makedirs(d, exist_ok=True)
    ref = np.frombuffer(np.random.default_rng(n * 7 + size).bytes(n * size), np.uint8)
    paths = [os.path.join(d, str(i)) for i in range(n)]
    for i, p in enumerate(paths):
        if not os.path.exists(p) or os.path.getsize(p) != size:
            with open(p, "wb") as f:
                f.write(ref[i * size : (i + 1) * size])
    return paths, ref


class Host:
    """A host destination (sizes are multiples of 64: the slots are the files end to end)."""

    def __init__(self, nbytes: int) -> None:
        self.buf = np.zeros(nbytes, np.uint8)

    def target(self) -> Any:
        return self.buf

    def reset(self) -> None:
        self.buf.fill(0xA5)

    def fetch(self) -> np.ndarray:
        return self.buf


class Device:
    """GPU memory, filled through the pinned bounce ring as ``stage_local(..., device=N)`` fills it."""

    def __init__(self, nbytes: int, device: int, threads: int) -> None:
        import cupy as cp

        from gdsstore.engine import bounce

        self.cp, self.device, self.nbytes, self.threads = cp, device, nbytes, threads
        with cp.cuda.Device(device):
            self.buf = cp.empty(nbytes, dtype=cp.uint8)
        self.slot, self.limit = bounce.bounce_slots(policy.settings())
        self.bounce = bounce

    def target(self) -> Any:
        piece = batch.piece_size(self.nbytes, self.threads, self.slot)
        return self.bounce.DeviceSink(self.device, int(self.buf.data.ptr), self.nbytes, piece, self.slot, self.limit)

    def reset(self) -> None:
        with self.cp.cuda.Device(self.device):
            self.buf.fill(0xA5)
            self.cp.cuda.Device(self.device).synchronize()

    def fetch(self) -> np.ndarray:
        with self.cp.cuda.Device(self.device):
            return self.cp.asnumpy(self.buf)  # type: ignore[no-any-return]


def contenders(paths: list[str], size: int, dest: Host | Device, threads: int) -> dict[str, Reader]:
    n = len(paths)
    offs, sizes = np.zeros(n, np.int64), np.full(n, size, np.int64)
    slots = np.arange(n, dtype=np.int64) * size

    def engine(core: bool) -> Reader:
        return lambda: batch.read_batch(paths, offs, sizes, dest.target(), slots, threads, core=core)

    def whole_files(core: bool) -> Reader:
        """As ``stage_local`` reads chunks of unknown size: a stat of every file, then the batch."""

        def run() -> None:
            found = batch.stat_batch(paths, threads, core=core)
            padded = (found.clip(0) + 63) // 64 * 64
            batch.read_batch(paths, offs, found, dest.target(), np.cumsum(padded) - padded, threads, core=core)

        return run

    out: dict[str, Reader] = {
        f"engine, python threads ({threads})": engine(False),
        f"engine, native core ({threads})": engine(True),
        f"stat + engine, python threads ({threads})": whole_files(False),
        f"stat + engine, native core ({threads})": whole_files(True),
    }
    if isinstance(dest, Host):
        core, host = batch._core_module(), dest.buf
        got = np.zeros(n, np.int64)

        def direct(t: int) -> Reader:
            return lambda: core.read_files(paths, offs, sizes, host, slots, got, threads=t)

        for t in sorted({1, 2, threads}) if core is not None else []:
            out[f"core read_files, {t} threads"] = direct(t)
        out["plain python, 1 thread (open/readinto)"] = lambda: _plain(paths, size, host)
        ts = _tensorstore(paths, size, host, threads)
        if ts is not None:
            out["tensorstore file kvstore"] = ts
    return out


def _plain(paths: list[str], size: int, buf: np.ndarray) -> None:
    view = memoryview(buf)
    for i, p in enumerate(paths):
        with open(p, "rb", buffering=0) as f:
            f.readinto(view[i * size : (i + 1) * size])


def _tensorstore(paths: list[str], size: int, buf: np.ndarray, threads: int) -> Reader | None:
    try:
        import tensorstore as ts
    except ImportError:
        return None
    root = os.path.dirname(paths[0])
    ctx = ts.Context({"file_io_concurrency": {"limit": threads}})
    kv = ts.KvStore.open({"driver": "file", "path": root + "/"}, context=ctx).result()
    names = [os.path.basename(p) for p in paths]

    def run() -> None:
        futs = [kv.read(k) for k in names]
        for i, fut in enumerate(futs):
            buf[i * size : (i + 1) * size] = np.frombuffer(fut.result().value, np.uint8)

    return run


def timed_rounds(cs: dict[str, Reader], dest: Host | Device, ref: np.ndarray, rounds: int) -> dict[str, Any]:
    """Each contender once untimed (warm-up), then ``rounds`` interleaved rounds, each starting one
    contender later (no contender always follows the same one); bytes checked every round."""
    rows: dict[str, list[tuple[float, float]]] = {k: [] for k in cs}
    names = list(cs)
    for r in range(rounds + 1):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            run = cs[name]
            dest.reset()
            t0, c0 = time.perf_counter(), time.process_time()
            run()
            wall, cpu = time.perf_counter() - t0, time.process_time() - c0
            if not np.array_equal(dest.fetch(), ref):
                raise AssertionError(f"{name}: wrong bytes in round {r}")
            if r:
                rows[name].append((wall, cpu))
    return {
        k: {"s": statistics.median(w for w, _ in v), "cpu_s": statistics.median(c for _, c in v),
            "all_s": [round(w, 5) for w, _ in v]}
        for k, v in rows.items()
    }


def _steps(paths: list[str], size: int, threads: int, buf: np.ndarray, fds: list[int]) -> dict[str, Callable[[], object]]:
    """The breakdown's steps, each a loop over every file (or one batch of them)."""
    n, view, flags = len(paths), memoryview(buf), os.O_RDONLY | os.O_CLOEXEC

    def open_close() -> None:
        for p in paths:
            os.close(os.open(p, flags))

    def fstat() -> None:
        for fd in fds:
            os.fstat(fd)

    def preadv() -> None:
        for i, fd in enumerate(fds):
            os.preadv(fd, [view[i * size : (i + 1) * size]], 0)

    def pread_path() -> None:
        for i, p in enumerate(paths):
            batch._pread_path(p, view, i * size, size, 0)

    src = np.frombuffer(np.random.default_rng(0).bytes(size), np.uint8)

    def copy() -> None:
        for i in range(n):
            np.copyto(buf[i * size : (i + 1) * size], src)

    offs, sizes, zeros = np.zeros(n, np.int64), np.full(n, size, np.int64), np.zeros(n, np.int64)
    slots = np.arange(n, dtype=np.int64) * size

    def read(t: int, core: bool, szs: np.ndarray = sizes) -> Callable[[], object]:
        return lambda: batch.read_batch(paths, offs, szs, buf, slots, t, core=core)

    steps: dict[str, Callable[[], object]] = {
        "open + close": open_close,
        "fstat (open fd)": fstat,
        "preadv (open fd)": preadv,
        "python route's per-file function (open, preadv, close)": pread_path,
    }
    for core in (False, True):
        who = "core" if core else "python threads"
        for t in sorted({1, threads}):
            steps[f"read_batch, {who}, {t} thread(s)"] = read(t, core)
        steps[f"read_batch of size-0 reads (planning, hand-offs), {who}, {threads} threads"] = read(threads, core, zeros)
    steps["memory copy of one file's bytes (np.copyto, in cache)"] = copy
    def stat(core: bool) -> Callable[[], object]:
        return lambda: batch.stat_batch(paths, threads, core=core)

    for core in (False, True):
        steps[f"stat_batch, {'core' if core else 'python threads'}, {threads} threads"] = stat(core)
    return steps


def breakdown(paths: list[str], size: int, threads: int, reps: int) -> dict[str, float]:
    """Median microseconds per file of each step, the steps interleaved within each of ``reps`` rounds."""
    n = len(paths)
    buf = np.zeros(n * size, np.uint8)  # touched: no page faults inside the timings
    fds = [os.open(p, os.O_RDONLY | os.O_CLOEXEC) for p in paths]
    try:
        steps = _steps(paths, size, threads, buf, fds)
        times: dict[str, list[float]] = {k: [] for k in steps}
        for _ in range(reps):
            for k, fn in steps.items():
                t0 = time.perf_counter()
                fn()
                times[k].append((time.perf_counter() - t0) / n * 1e6)
    finally:
        for fd in fds:
            os.close(fd)
    return {k: statistics.median(v) for k, v in times.items()}


def markdown(results: dict[str, Any]) -> str:
    lines = ["| workload | contender | GB/s | s | CPU-s | vs python threads |", "|---|---|---|---|---|---|"]
    for wl, rows in results["workloads"].items():
        n, size = WORKLOADS[wl]
        base = next(v["s"] for k, v in rows.items() if k.startswith("engine, python threads"))
        for k, v in rows.items():
            lines.append(f"| {wl} | {k} | {n * size / v['s'] / 1e9:.2f} | {v['s']:.4f} | {v['cpu_s']:.3f} "
                         f"| {base / v['s']:.2f}x |")
    for wl, steps in results.get("breakdown", {}).items():
        lines += ["", f"Breakdown, {wl}: microseconds per file", "", "| step | us/file |", "|---|---|"]
        lines += [f"| {k} | {v:.1f} |" for k, v in steps.items()]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--data", default=os.path.join(tempfile.gettempdir(), "gdsstore-local-batch"))
    ap.add_argument("--threads", type=int, default=None, help="default: the policy's num_threads")
    ap.add_argument("--device", type=int, default=None, help="land the batch in this GPU's memory")
    ap.add_argument("--workloads", nargs="*", default=list(WORKLOADS), choices=list(WORKLOADS))
    ap.add_argument("--no-breakdown", action="store_true")
    ap.add_argument("--out", default=None, help="JSON results (a .md table beside it)")
    a = ap.parse_args()
    threads = a.threads or policy.settings().num_threads
    results: dict[str, Any] = {
        "machine": {"cores": os.cpu_count(), "python": sys.version.split()[0], "platform": platform.platform(),
                    "load_before": os.getloadavg(), "threads": threads, "device": a.device,
                    "core": batch._core_missing() or "built", "gdsstore": gdsstore.__version__},
        "workloads": {}, "breakdown": {},
    }
    for wl in a.workloads:
        n, size = WORKLOADS[wl]
        paths, ref = make_files(a.data, wl, n, size)
        dest: Host | Device = Host(n * size) if a.device is None else Device(n * size, a.device, threads)
        results["workloads"][wl] = timed_rounds(contenders(paths, size, dest, threads), dest, ref, a.rounds)
        if not a.no_breakdown and wl in ("4096x256KiB", "16384x16KiB"):
            results["breakdown"][wl] = breakdown(paths, size, threads, a.rounds)
        del dest
    results["machine"]["load_after"] = os.getloadavg()
    table = markdown(results)
    print(table)
    if a.out:
        os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
        with open(a.out, "w") as f:
            json.dump(results, f, indent=1)
        with open(os.path.splitext(a.out)[0] + ".md", "w") as f:
            f.write(table + "\n")


if __name__ == "__main__":
    main()
