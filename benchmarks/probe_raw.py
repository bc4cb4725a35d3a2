"""Raw 1 GiB file -> GPU (warm cache): gdsstore's route variants next to kvikio compat, interleaved.

python benchmarks/probe_raw.py [FILE]  -> one table (median and best GB/s over interleaved rounds).
ROUNDS=n sets the rounds (default 9); PROBE_ONLY=a,b keeps the variants whose names contain a or b.

Every variant reads the same file into the same cupy array, round after round in a shuffled order,
so a slow spell of the machine hits all of them alike:

- ``route t/b``: the POSIX device route of the gdsstore imported, task_size t MiB,
  bounce_buffer_size b MiB (put an older checkout first on PYTHONPATH to A/B two versions);
- ``local2 t/b``: a minimal loop with two thread-local slots of b MiB, alternated, each with its own
  reusable CUDA event (the ceiling of the design: nothing but pread, copy, record per piece);
- ``cufile task t``: the cuFile route (compat mode where nvidia-fs is absent), task_size t MiB.

Results of session 3 and what they decided: docs/bench/probe_raw.txt, docs/performance.md.
"""

from __future__ import annotations

import functools
import os
import random
import statistics
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

os.environ.setdefault("KVIKIO_COMPAT_MODE", "ON")
os.environ.setdefault("KVIKIO_NTHREADS", "16")

import cupy as cp
import numpy as np

import gdsstore
from gdsstore.engine import bounce, cuda, posix

GiB = 1 << 30
MiB = 1 << 20
ROUNDS = int(os.environ.get("ROUNDS", "9"))

_tls = threading.local()


class _LocalSlot:
    __slots__ = ("buf", "event")

    def __init__(self, nbytes: int) -> None:
        self.buf = cuda.PinnedBuffer(nbytes)
        self.event = cp.cuda.Event(block=False, disable_timing=True)


NSLOTS = 2


def _local_slots(size: int) -> list[Any]:
    d: dict[tuple[int, int], list[Any]] | None = getattr(_tls, "slots", None)
    if d is None:
        d = _tls.slots = {}
    s = d.get((size, NSLOTS))
    if s is None:
        s = d[(size, NSLOTS)] = [[_LocalSlot(size) for _ in range(NSLOTS)], 0]
    return s


def read_to_device_bare(
    fd: int,
    device: int,
    dst_ptr: int,
    nbytes: int,
    offset: int,
    slot_size: int,
    ring_limit: int,
    direct_fd: int = -1,
    *,
    calls_of: Callable[[], cuda.DriverCalls] = cuda.runtime_calls,
    always_wait: bool = True,
) -> tuple[int, list[Any]]:
    """The bare loop: NSLOTS thread-local slots in turn; per piece pread, copy, record.

    ``calls_of``: CuPy's runtime calls (local2, local2q) or the driver's calls that keep the GIL
    (local2drv). ``always_wait`` (local2): a wait call before each reuse of a slot; otherwise
    (local2q, local2drv) only when the slot's copy is not done yet.
    """
    calls = calls_of()
    slots = _local_slots(slot_size)
    done = 0
    events: list[Any] = []
    sp = cuda.thread_stream(device).ptr
    while done < nbytes:
        want = min(slot_size, nbytes - done)
        ring, j = slots
        slots[1] = (j + 1) % len(ring)
        slot = ring[j]
        ev = slot.event.ptr
        if always_wait or calls.query(ev) != 0:
            cuda.check_driver(calls.synchronize(ev), "cuEventSynchronize")
        got = posix.pread_full(fd, slot.buf.view[:want], offset + done)
        if got:
            cuda.check_driver(calls.copy_htod(dst_ptr + done, slot.buf.ptr, got, sp), "cuMemcpyHtoDAsync")
            cuda.check_driver(calls.record(ev, sp), "cuEventRecord")
            events.append(slot.event)
        done += got
        if got < want:
            break
    return done, events


def _driver_calls() -> cuda.DriverCalls:
    calls = cuda.driver_calls()
    assert calls is not None, "libcuda.so.1 does not load through ctypes"
    return calls


read_to_device_local2 = read_to_device_bare
read_to_device_local2q = functools.partial(read_to_device_bare, always_wait=False)
read_to_device_local2_drv = functools.partial(read_to_device_bare, calls_of=_driver_calls, always_wait=False)


def main() -> None:
    path = sys.argv[1] if len(sys.argv) > 1 else "/root/probe_raw.bin"
    if not os.path.exists(path) or os.path.getsize(path) != GiB:
        block = np.random.default_rng(0).integers(0, 255, 64 * MiB, dtype=np.uint8).tobytes()
        with open(path, "wb") as f:
            for _ in range(16):
                f.write(block)
            os.fsync(f.fileno())
    with open(path, "rb") as fr:
        ref = np.frombuffer(fr.read(), np.uint8)
    dev = cp.empty(GiB, cp.uint8)
    cp.asarray(ref)  # warm the link and the allocator

    shipped = bounce.read_to_device

    def g(
        mode: str, task: int, bounce: int, rtd: Callable[..., Any] = shipped, nslots: int = 2, threads: int = 16
    ) -> Callable[[], None]:
        def run() -> None:
            global NSLOTS
            NSLOTS = nslots
            bounce.read_to_device = rtd  # type: ignore[assignment]
            try:
                with gdsstore.config.set(
                    {
                        "compat_mode": mode,
                        "task_size": task * MiB,
                        "bounce_buffer_size": bounce * MiB,
                        "num_threads": threads,
                    }
                ), gdsstore.open(path) as f:
                    f.read(dev)
            finally:
                bounce.read_to_device = shipped  # type: ignore[assignment]

        return run

    def g_defaults() -> None:
        with gdsstore.open(path) as f:
            f.read(dev)

    variants: dict[str, Callable[[], None]] = {
        "gdsstore defaults": g_defaults,
        "posix route 8/8": g("on", 8, 8),
        "posix route 8/4": g("on", 8, 4),
        "posix local2 16/4": g("on", 16, 4, read_to_device_local2),
        "posix local2 64/4": g("on", 64, 4, read_to_device_local2),
        "posix local2q 64/4": g("on", 64, 4, read_to_device_local2q),
        "posix local2drv 64/4": g("on", 64, 4, read_to_device_local2_drv),
        "posix local2drv 16/4": g("on", 16, 4, read_to_device_local2_drv),
        "posix local2drv 64/2": g("on", 64, 2, read_to_device_local2_drv),
        "posix local2drv 64/8": g("on", 64, 8, read_to_device_local2_drv),
        "cufile task 4": g("auto", 4, 4),
        "cufile task 8": g("auto", 8, 4),
        "cufile task 64": g("auto", 64, 4),
        "cufile task 8, 24 threads": g("auto", 8, 8, threads=24),
        "cufile task 8, 32 threads": g("auto", 8, 8, threads=32),
        "cufile task 4, 32 threads": g("auto", 4, 8, threads=32),
        "posix route 8/8, 24 threads": g("on", 8, 8, threads=24),
    }
    only = os.environ.get("PROBE_ONLY")
    if only:
        variants = {k: v for k, v in variants.items() if any(w in k for w in only.split(","))}
    try:
        import kvikio

        def kv() -> None:
            with kvikio.CuFile(path, "r") as f:
                f.read(dev)

        variants["kvikio compat ON, 16 threads"] = kv
        try:
            info = f"compat {kvikio.defaults.get('compat_mode')}, threads {kvikio.defaults.get('num_threads')}"
        except Exception as exc:  # the settings API moved between releases
            info = repr(exc)
        print("kvikio", kvikio.__version__, info)
    except ImportError as exc:
        print("kvikio missing:", exc)

    times: dict[str, list[float]] = {k: [] for k in variants}
    for name, fn in variants.items():  # warm-up and check each variant once
        dev.fill(0)
        fn()
        cp.cuda.runtime.deviceSynchronize()
        ok = bool((dev[: 64 * MiB].get() == ref[: 64 * MiB]).all() and (dev[-MiB:].get() == ref[-MiB:]).all())
        if not ok:
            print("WRONG BYTES:", name)
    rng = random.Random(0)
    for _ in range(ROUNDS):
        order = list(variants.items())
        rng.shuffle(order)  # no variant always runs right after another's leftovers
        for name, fn in order:
            cp.cuda.runtime.deviceSynchronize()
            t0 = time.perf_counter()
            fn()
            cp.cuda.runtime.deviceSynchronize()
            times[name].append(time.perf_counter() - t0)
    print(f"{'variant':34s} {'median':>7s} {'best':>7s}  (GB/s, {ROUNDS} interleaved rounds)")
    for name, ts in times.items():
        print(f"{name:34s} {GiB / statistics.median(ts) / 1e9:7.2f} {GiB / min(ts) / 1e9:7.2f}")


if __name__ == "__main__":
    main()
