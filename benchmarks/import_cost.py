"""What gdsstore adds to a plain zarr user's first array open: the modules zarr's entry points load.

zarr loads the ``zarr.codec_pipeline`` and ``zarr.codecs`` entry points of every installed package on its
first array open; with gdsstore installed that imports ``gdsstore.gpu.pipeline`` and ``gdsstore.gpu.codecs``
(and their parents). Each of ``--runs`` fresh interpreters imports zarr, then times importing exactly those
modules; the median is the added cost. Run it on an idle machine (a busy one doubles the figure) and with
bytecode caching on (``PYTHONDONTWRITEBYTECODE`` unset: otherwise every import compiles its source, as an
installed package never does).

Usage::

    python benchmarks/import_cost.py --runs 21
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys

CHILD = """
import sys, time, zarr, zarr.codecs
t0 = time.perf_counter()
import gdsstore.gpu.pipeline, gdsstore.gpu.codecs
dt = time.perf_counter() - t0
print(dt, len([m for m in sys.modules if m.startswith("gdsstore")]))
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--runs", type=int, default=21)
    args = ap.parse_args()
    times, modules = [], 0
    for _ in range(args.runs):
        out = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, check=True).stdout.split()
        times.append(float(out[0]))
        modules = int(out[1])
    print(f"gdsstore modules loaded: {modules}; added import time: median {statistics.median(times) * 1e3:.2f} ms, "
          f"best {min(times) * 1e3:.2f} ms over {args.runs} fresh interpreters")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
