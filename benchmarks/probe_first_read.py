"""Where a process's first GPU read of a small array goes (issue #23: 0.17-0.24 s for a 16 MiB array of 512²
zstd chunks, against 0.079 s for zarr ``enable_gpu``; the second read takes 0.021 s, and loading nvCOMP
first does not shorten the first read).

A fresh process per run (``-X importtime``), the CUDA context made before the clock starts as in the memory
benchmark's first-read cell; then ``enable_gpu`` + ``GDSStore`` + ``open_array`` + ``[:]`` + synchronize,
profiled on every thread (Python 3.12's ``cProfile`` sees them all). Prints the wall time, the modules imported
during the read (their own and cumulative import time), and the functions with the most cumulative time.

    source .gpu/prelude.sh; python benchmarks/probe_first_read.py [--host]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile

WORKER = r"""
import cProfile, io, pstats, sys, time
host = sys.argv[2] == "host"
import numpy as np
import zarr
if not host:
    import cupy as cp
    cp.zeros(1).sum().get()
import gdsstore
main = cProfile.Profile()  # Python 3.12: sys.monitoring, every thread
print("@@start", file=sys.stderr, flush=True)
t0 = time.perf_counter()
main.enable()
with gdsstore.enable_gpu(buffers=not host):
    x = zarr.open_array(gdsstore.GDSStore(sys.argv[1]), mode="r")[:]
if not host:
    cp.cuda.runtime.deviceSynchronize()
main.disable()
dt = time.perf_counter() - t0
print("@@stop", file=sys.stderr, flush=True)
t1 = time.perf_counter()
with gdsstore.enable_gpu(buffers=not host):
    zarr.open_array(gdsstore.GDSStore(sys.argv[1]), mode="r")[:]
if not host:
    cp.cuda.runtime.deviceSynchronize()
print(f"first read {dt * 1e3:.1f} ms (profiled), second {1e3 * (time.perf_counter() - t1):.1f} ms")
s = io.StringIO()
st = pstats.Stats(main, stream=s)
st.sort_stats("cumulative").print_stats(45)
print(s.getvalue())
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--host", action="store_true", help="host buffers (no GPU): checks the probe itself")
    ap.add_argument("--path", default=os.path.join(tempfile.gettempdir(), "gdsstore-memory-bench", "small.zarr"))
    a = ap.parse_args()
    if not os.path.exists(a.path):
        import numpy as np
        import zarr
        from zarr.codecs import ZstdCodec

        z = zarr.create_array(a.path, shape=(2048, 2048), chunks=(512, 512), dtype="f4",
                              compressors=[ZstdCodec(level=3)], fill_value=0.0)
        z[:] = np.round(np.random.default_rng(0).standard_normal((2048, 2048), dtype="f4"), 2)
    r = subprocess.run([sys.executable, "-X", "importtime", "-c", WORKER, a.path, "host" if a.host else "gpu"],
                       capture_output=True, text=True, timeout=120)
    print(r.stdout)
    inside, rows = False, []
    for line in r.stderr.splitlines():
        if line.startswith("@@"):
            inside = line == "@@start"
            continue
        if inside and line.startswith("import time:") and "|" in line:
            own, cum, name = (f.strip() for f in line[len("import time:"):].split("|"))
            if own.isdigit():
                rows.append((int(cum), int(own), name))
        elif inside and not line.startswith("import time:"):
            print("stderr:", line[:200])
    print(f"imports during the first read: {len(rows)}, own time {sum(o for _, o, _ in rows) / 1e3:.1f} ms")
    for cum, own, name in sorted(rows, reverse=True)[:25]:
        print(f"  {cum / 1e3:8.1f} ms cumulative {own / 1e3:8.1f} ms own  {name}")


if __name__ == "__main__":
    main()
