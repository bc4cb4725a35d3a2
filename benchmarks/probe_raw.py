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
from gdsstore.engine import cuda, posix

GiB = 1 << 30
MiB = 1 << 20
ROUNDS = int(os.environ.get("ROUNDS", "9"))

_tls = threading.local()


class _LocalSlot:
    __slots__ = ("buf", "event", "used")

    def __init__(self, nbytes: int) -> None:
        self.buf = cuda.PinnedBuffer(nbytes)
        self.event = cp.cuda.Event(block=False, disable_timing=True)
        self.used = False


NSLOTS = 2


def _local_slots(size: int) -> list[Any]:
    d: dict[tuple[int, int], list[Any]] | None = getattr(_tls, "slots", None)
    if d is None:
        d = _tls.slots = {}
    s = d.get((size, NSLOTS))
    if s is None:
        s = d[(size, NSLOTS)] = [[_LocalSlot(size) for _ in range(NSLOTS)], 0]
    return s


def read_to_device_local2(
    fd: int,
    device: int,
    dst_ptr: int,
    nbytes: int,
    offset: int,
    slot_size: int,
    ring_limit: int,
    direct_fd: int = -1,
    *,
    skip_done: bool = False,
) -> tuple[int, list[Any]]:
    """The bare loop with CuPy's calls. ``skip_done`` (local2q): a slot whose copy is done is reused
    without a wait call (one GIL release fewer)."""
    rt = cp.cuda.runtime
    slots = _local_slots(slot_size)
    done = 0
    events: list[Any] = []
    stream = cuda.thread_stream(device)
    while done < nbytes:
        want = min(slot_size, nbytes - done)
        ring, j = slots
        slots[1] = (j + 1) % len(ring)
        slot = ring[j]
        if slot.used and not (skip_done and slot.event.done):
            slot.event.synchronize()
        got = posix.pread_full(fd, slot.buf.view[:want], offset + done)
        if got:
            rt.memcpyAsync(dst_ptr + done, slot.buf.ptr, got, rt.memcpyHostToDevice, stream.ptr)
            slot.event.record(stream)
            slot.used = True
            events.append(slot.event)
        done += got
        if got < want:
            break
    return done, events


read_to_device_local2q = functools.partial(read_to_device_local2, skip_done=True)


_drv: Any = None


def _driver() -> Any:
    """libcuda through ctypes.PyDLL for the calls that return at once (copy launch, event record and
    query): PyDLL keeps the GIL, so they cost no GIL hand-over; the wait goes through CDLL (releases)."""
    global _drv
    if _drv is None:
        import ctypes

        keep = ctypes.PyDLL("libcuda.so.1")
        free = ctypes.CDLL("libcuda.so.1")
        u64, sz, vp = ctypes.c_uint64, ctypes.c_size_t, ctypes.c_void_p
        keep.cuMemcpyHtoDAsync_v2.argtypes = [u64, vp, sz, vp]
        keep.cuEventRecord.argtypes = [vp, vp]
        keep.cuEventQuery.argtypes = [vp]
        free.cuEventSynchronize.argtypes = [vp]
        _drv = (keep.cuMemcpyHtoDAsync_v2, keep.cuEventRecord, keep.cuEventQuery, free.cuEventSynchronize)
    return _drv


def read_to_device_local2_drv(
    fd: int,
    device: int,
    dst_ptr: int,
    nbytes: int,
    offset: int,
    slot_size: int,
    ring_limit: int,
    direct_fd: int = -1,
) -> tuple[int, list[Any]]:
    """local2 with driver calls that keep the GIL: per piece, the pread is the only GIL release
    (plus a wait when the slot's copy is still running)."""
    copy, record, query, wait = _driver()
    slots = _local_slots(slot_size)
    done = 0
    events: list[Any] = []
    stream = cuda.thread_stream(device)
    sp = stream.ptr
    while done < nbytes:
        want = min(slot_size, nbytes - done)
        ring, j = slots
        slots[1] = (j + 1) % len(ring)
        slot = ring[j]
        ev = slot.event.ptr
        if slot.used and query(ev) != 0:
            wait(ev)
        got = os.preadv(fd, [slot.buf.view[:want]], offset + done)
        if got:
            if copy(dst_ptr + done, slot.buf.ptr, got, sp) != 0:
                raise RuntimeError("cuMemcpyHtoDAsync failed")
            record(ev, sp)
            slot.used = True
            events.append(slot.event)
        done += got
        if got < want:
            break
    return done, events


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

    shipped = posix.read_to_device

    def g(
        mode: str, task: int, bounce: int, rtd: Callable[..., Any] = shipped, nslots: int = 2, threads: int = 16
    ) -> Callable[[], None]:
        def run() -> None:
            global NSLOTS
            NSLOTS = nslots
            posix.read_to_device = rtd  # type: ignore[assignment]
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
                posix.read_to_device = shipped  # type: ignore[assignment]

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
