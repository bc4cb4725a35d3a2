"""Where local reads into GPU memory spend their time (GPU machine): the pieces measured alone.

python benchmarks/probe_local.py [--quick]  -> prints tables; used to choose the bounce sizes and
the chunk-batch design (docs/performance.md, "What bounds each row").

1. page cache -> pinned memory alone, 16 threads: into one large buffer vs a small per-thread slot
   reused (whether slots that stay in the CPU's last-level cache copy faster);
2. pread + async H2D, a minimal loop per thread with two slots of S bytes (the ceiling of the
   design), next to one slot with a wait for each copy (kvikio's and libcufile's compat pattern);
3. gdsstore's own routes over task_size x bounce_buffer_size;
4. 256 files of 4 MiB: batched reads into pinned staging, one large H2D alone, and the per-file bounce
   route straight into device memory.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable

import cupy as cp
import numpy as np

import gdsstore
from gdsstore.engine import batch, cuda

GiB = 1 << 30
MiB = 1 << 20
KiB = 1 << 10
THREADS = 16


def sh(cmd: str) -> str:
    try:
        return subprocess.run(cmd, shell=True, capture_output=True, text=True, timeout=20).stdout
    except Exception as exc:  # a missing tool is information too
        return f"({exc})"


def best(fn: Callable[[], None], repeat: int = 4) -> float:
    fn()  # warm-up: slots, pools, handles
    t = float("inf")
    for _ in range(repeat):
        cp.cuda.runtime.deviceSynchronize()
        t0 = time.perf_counter()
        fn()
        cp.cuda.runtime.deviceSynchronize()
        t = min(t, time.perf_counter() - t0)
    return t


def in_threads(work: Callable[[int], None], n: int = THREADS) -> None:
    ts = [threading.Thread(target=work, args=(i,)) for i in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()


def main() -> None:
    quick = "--quick" in sys.argv
    print(sh("lscpu | grep -iE 'model name|^cpu\\(s\\)|numa|l3|l2|socket|thread'"))
    print("THP:", sh("cat /sys/kernel/mm/transparent_hugepage/enabled").strip())
    print(sh("nvidia-smi topo -m 2>/dev/null | head -5"))
    print(sh("free -g | head -2"))

    path = "/root/probe-1g.bin"
    if not os.path.exists(path) or os.path.getsize(path) != GiB:
        with open(path, "wb") as fh:
            fh.write(np.random.default_rng(0).integers(0, 255, GiB, dtype=np.uint8).tobytes())
    sh(f"cat {path} > /dev/null")
    fd = os.open(path, os.O_RDONLY)
    dev = cp.empty(GiB, dtype=cp.uint8)
    big = cuda.PinnedBuffer(GiB)

    print("\n## 1. page cache -> pinned, 16 threads, no H2D (GB/s)")
    for s in (256 * KiB, 1 * MiB, 4 * MiB, 8 * MiB):
        n = GiB // s

        def into_big(i: int, s: int = s, n: int = n) -> None:
            for k in range(i, n, THREADS):
                os.preadv(fd, [big.view[k * s : (k + 1) * s]], k * s)

        slots = [cuda.PinnedBuffer(s) for _ in range(THREADS)]

        def into_slot(i: int, s: int = s, n: int = n, slots: list[cuda.PinnedBuffer] = slots) -> None:
            v = slots[i].view
            for k in range(i, n, THREADS):
                os.preadv(fd, [v], k * s)

        tb = best(lambda f=into_big: in_threads(f))
        tr = best(lambda f=into_slot: in_threads(f))
        print(
            f"piece {s // KiB:6d} KiB   into 1 GiB buffer {GiB / tb / 1e9:6.2f}   into reused slot {GiB / tr / 1e9:6.2f}"
        )
        del slots

    print("\n## 2. pread + async H2D: 2 slots per thread (a copy overlaps the next read) vs wait per copy (GB/s)")
    for threads in (8, 16):
        for s in (256 * KiB, 512 * KiB, 1 * MiB, 2 * MiB, 4 * MiB, 8 * MiB):
            n = GiB // s
            slots2 = [[cuda.PinnedBuffer(s), cuda.PinnedBuffer(s)] for _ in range(threads)]
            streams = [cp.cuda.Stream(non_blocking=True) for _ in range(threads)]

            def loop(
                i: int,
                s: int = s,
                n: int = n,
                threads: int = threads,
                slots2: list = slots2,
                streams: list = streams,
            ) -> None:
                rt = cp.cuda.runtime
                st = streams[i]
                evs: list[object] = [None, None]
                j = 0
                for k in range(i, n, threads):
                    slot = slots2[i][j]
                    if evs[j] is not None:
                        evs[j].synchronize()  # type: ignore[attr-defined]
                    os.preadv(fd, [slot.view], k * s)
                    rt.memcpyAsync(int(dev.data.ptr) + k * s, slot.ptr, s, rt.memcpyHostToDevice, st.ptr)
                    evs[j] = st.record()
                    j ^= 1
                st.synchronize()

            def wait_each(
                i: int,
                s: int = s,
                n: int = n,
                threads: int = threads,
                slots2: list = slots2,
                streams: list = streams,
            ) -> None:
                # kvikio's and libcufile's pattern: one slot, wait for each copy before the next read
                rt = cp.cuda.runtime
                st = streams[i]
                slot = slots2[i][0]
                for k in range(i, n, threads):
                    os.preadv(fd, [slot.view], k * s)
                    rt.memcpyAsync(int(dev.data.ptr) + k * s, slot.ptr, s, rt.memcpyHostToDevice, st.ptr)
                    st.synchronize()

            t = best(lambda f=loop, k=threads: in_threads(f, k))
            t1 = best(lambda f=wait_each, k=threads: in_threads(f, k))
            print(
                f"threads {threads:2d} slot {s // KiB:6d} KiB  two slots {GiB / t / 1e9:6.2f}"
                f"   one slot, wait per copy {GiB / t1 / 1e9:6.2f}"
            )
            del slots2

    print("\n## 3. gdsstore routes, 16 threads (GB/s)")

    def g_read() -> None:
        with gdsstore.open(path) as f:
            f.read(dev)

    for mode in ("on", "off"):
        for task in (1, 2, 4, 8, 16):
            bounces = (256 * KiB, 1 * MiB, 4 * MiB, 8 * MiB) if mode == "on" else (8 * MiB,)
            for bb in bounces:
                if bb > task * MiB or (quick and task not in (2, 8)):
                    continue
                with gdsstore.config.set(
                    {
                        "compat_mode": mode,
                        "num_threads": 16,
                        "task_size": task * MiB,
                        "bounce_buffer_size": bb,
                    }
                ):
                    t = best(g_read)
                route = "posix " if mode == "on" else "cufile"
                print(f"{route} task {task:2d} MiB bounce {bb // KiB:5d} KiB  {GiB / t / 1e9:6.2f}")
    t = best(g_read)
    print(f"defaults  {GiB / t / 1e9:6.2f}")

    print("\n## 4. 256 files of 4 MiB")
    d = "/root/probe-files"
    os.makedirs(d, exist_ok=True)
    paths = [f"{d}/c{i}" for i in range(256)]
    if not all(os.path.exists(p) for p in paths):
        data = np.fromfile(path, dtype=np.uint8)
        for i, p in enumerate(paths):
            data[i * 4 * MiB : (i + 1) * 4 * MiB].tofile(p)
    sh(f"cat {d}/* > /dev/null")
    stage = np.frombuffer(big.view, dtype=np.uint8)
    sizes = np.full(256, 4 * MiB, dtype=np.int64)
    offs = np.arange(256, dtype=np.int64) * 4 * MiB
    zero = np.zeros(256, dtype=np.int64)
    t = best(lambda: batch.read_batch(paths, zero, sizes, stage, offs, 16))
    print(f"read_batch 256 x 4 MiB into pinned staging       {GiB / t / 1e9:6.2f}")
    for w in (32, 64):
        t = best(
            lambda w=w: [
                batch.read_batch(paths[a : a + w], zero[:w], sizes[:w], stage, offs[:w], 16)
                for a in range(0, 256, w)
            ]
        )
        print(f"read_batch windows of {w} files                     {GiB / t / 1e9:6.2f}")
    for w in (32 * 4 * MiB, GiB):

        def h2d(w: int = w) -> None:
            for a in range(0, GiB, w):
                cuda.memcpy_htod(0, int(dev.data.ptr) + a, big.ptr + a, w)

        t = best(h2d)
        print(f"H2D alone in copies of {w // MiB:5d} MiB               {GiB / t / 1e9:6.2f}")
    for s in (512 * KiB, 1 * MiB, 4 * MiB):
        slots3 = [[cuda.PinnedBuffer(s), cuda.PinnedBuffer(s)] for _ in range(THREADS)]
        streams = [cp.cuda.Stream(non_blocking=True) for _ in range(THREADS)]

        def per_file(i: int, s: int = s, slots3: list = slots3, streams: list = streams) -> None:
            rt = cp.cuda.runtime
            st = streams[i]
            evs: list[object] = [None, None]
            j = 0
            for f in range(i * 16, (i + 1) * 16):
                fd2 = os.open(paths[f], os.O_RDONLY)
                for k in range(0, 4 * MiB, s):
                    slot = slots3[i][j]
                    if evs[j] is not None:
                        evs[j].synchronize()  # type: ignore[attr-defined]
                    os.preadv(fd2, [slot.view], k)
                    rt.memcpyAsync(
                        int(dev.data.ptr) + f * 4 * MiB + k, slot.ptr, s, rt.memcpyHostToDevice, st.ptr
                    )
                    evs[j] = st.record()
                    j ^= 1
                os.close(fd2)
            st.synchronize()

        t = best(lambda f=per_file: in_threads(f))
        print(f"per-file bounce, slot {s // KiB:5d} KiB, into device  {GiB / t / 1e9:6.2f}")
        del slots3
    ref = cp.asarray(np.fromfile(path, dtype=np.uint8))
    print("device copy equals the file:", bool((dev == ref).all()))


if __name__ == "__main__":
    main()
