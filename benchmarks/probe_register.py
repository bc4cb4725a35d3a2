"""Can the GPU copy straight out of the page cache? (GPU machine)

python benchmarks/probe_register.py FILE

Maps FILE (warm in the page cache) read-only, registers the mapping with CUDA
(``cudaHostRegister`` with ``cudaHostRegisterReadOnly``) and copies it to the device: no CPU copy
at all, if registering costs less than the copy it saves. Times registration alone (whole file and
in 64 MiB pieces on 16 threads) and the full register + copy + unregister pipeline.
"""

from __future__ import annotations

import mmap
import os
import sys
import threading
import time

import cupy as cp
import numpy as np

RO = 8  # cudaHostRegisterReadOnly
PIECE = 64 << 20


def main() -> None:
    path = sys.argv[1]
    n = os.path.getsize(path)
    fd = os.open(path, os.O_RDONLY)
    mm = mmap.mmap(fd, n, prot=mmap.PROT_READ)
    arr = np.frombuffer(mm, dtype=np.uint8)  # the mapping's address (numpy takes read-only buffers)
    base = arr.ctypes.data
    dev = cp.empty(n, dtype=cp.uint8)
    rt = cp.cuda.runtime
    for flags, name in ((RO, "read-only"), (0, "default")):
        try:
            t0 = time.perf_counter()
            rt.hostRegister(base, n, flags)
            t1 = time.perf_counter()
            rt.memcpy(int(dev.data.ptr), base, n, rt.memcpyHostToDevice)
            t2 = time.perf_counter()
            rt.hostUnregister(base)
            t3 = time.perf_counter()
            print(
                f"{name}: register {1e3 * (t1 - t0):.1f} ms, copy {n / (t2 - t1) / 1e9:.1f} GB/s, "
                f"unregister {1e3 * (t3 - t2):.1f} ms, all {n / (t3 - t0) / 1e9:.1f} GB/s"
            )
        except Exception as exc:
            print(f"{name}: {type(exc).__name__}: {exc}")
    ref = cp.asarray(arr)
    print("equal:", bool((dev == ref).all()))

    # pipelined: 16 threads, each registers its 64 MiB pieces, copies on its stream, unregisters
    for threads in (8, 16):
        pieces = list(range(0, n, PIECE))

        def work(i: int, pieces: list[int] = pieces, threads: int = threads) -> None:
            s = cp.cuda.Stream(non_blocking=True)
            for k in pieces[i::threads]:
                m = min(PIECE, n - k)
                rt.hostRegister(base + k, m, RO)
                rt.memcpyAsync(int(dev.data.ptr) + k, base + k, m, rt.memcpyHostToDevice, s.ptr)
                s.synchronize()
                rt.hostUnregister(base + k)

        best = float("inf")
        for _ in range(4):
            dev[:] = 0
            cp.cuda.runtime.deviceSynchronize()
            t0 = time.perf_counter()
            ts = [threading.Thread(target=work, args=(i,)) for i in range(threads)]
            for t in ts:
                t.start()
            for t in ts:
                t.join()
            best = min(best, time.perf_counter() - t0)
        print(f"pipelined register+copy+unregister, {threads} threads, 64 MiB pieces: {n / best / 1e9:.1f} GB/s, "
              f"equal: {bool((dev == ref).all())}")


if __name__ == "__main__":
    main()
