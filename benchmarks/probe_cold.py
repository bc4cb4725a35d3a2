"""Cold and warm local reads: gdsstore (this checkout, and optionally another) against numpy.fromfile.

Each reader lives in its own worker process (one per checkout, so two gdsstore versions compare in
one run); the parent drops the file's pages before every cold read and runs the readers in a
shuffled order each round, so a busy machine's noise falls on every reader alike. Prints the
median GB/s, its ratio to numpy.fromfile and the range.

    python benchmarks/probe_cold.py f.bin --rounds 11 --before /path/to/old/checkout \
        --variant '1 stream={"num_threads": 1}'
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys

_WORKER = r"""
import sys, time
import numpy as np
sys.path.insert(0, sys.argv[1])
kind, path = sys.argv[2], sys.argv[3]
if kind == "gdsstore":
    import json
    import gdsstore
    gdsstore.config.set(json.loads(sys.argv[4]))
for line in sys.stdin:
    t = time.perf_counter()
    if kind == "fromfile":
        n = np.fromfile(path, dtype=np.uint8).nbytes
    else:
        buf = np.empty(int(line), np.uint8)
        with gdsstore.open(path) as f:
            n = f.read(buf)
    print(n, time.perf_counter() - t, flush=True)
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("path")
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--modes", default="cold,warm", help="which of cold,warm to measure")
    ap.add_argument("--before", help="another gdsstore checkout to compare ('before')")
    ap.add_argument("--variant", action="append", default=[], help="'NAME=JSON': this checkout with these settings")
    args = ap.parse_args()
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    sys.path.insert(0, here)
    from gdsstore import pagecache

    size = os.path.getsize(args.path)
    readers = {"numpy.fromfile": ("fromfile", here, "{}"), "gdsstore": ("gdsstore", here, "{}")}
    if args.before:
        readers["gdsstore before"] = ("gdsstore", args.before, "{}")
    for v in args.variant:
        name, cfg = v.split("=", 1)
        readers[name] = ("gdsstore", here, json.dumps(json.loads(cfg)))
    procs = {
        name: subprocess.Popen(
            [sys.executable, "-c", _WORKER, root, kind, args.path, cfg],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for name, (kind, root, cfg) in readers.items()
    }
    modes = args.modes.split(",")
    rates: dict[tuple[str, str], list[float]] = {(n, m): [] for n in readers for m in modes}
    for _ in range(args.rounds):
        order = list(rates)
        random.shuffle(order)
        for name, mode in order:
            if mode == "cold":
                pagecache.drop(args.path)
            else:
                pagecache.drop(args.path)
                with open(args.path, "rb") as f:  # warm: every page resident
                    while f.read(64 << 20):
                        pass
            p = procs[name]
            assert p.stdin is not None and p.stdout is not None
            p.stdin.write(f"{size}\n")
            p.stdin.flush()
            n, seconds = p.stdout.readline().split()
            assert int(n) == size, (name, n)
            rates[(name, mode)].append(size / float(seconds) / 1e9)
    for p in procs.values():
        assert p.stdin is not None
        p.stdin.close()
        p.wait()
    for mode in modes:
        base = statistics.median(rates[("numpy.fromfile", mode)])
        for name in readers:
            v = rates[(name, mode)]
            med = statistics.median(v)
            print(f"{mode}  {name:16s} median {med:.2f} GB/s  x{med / base:.2f}  range {min(v):.2f}-{max(v):.2f}")


if __name__ == "__main__":
    main()
