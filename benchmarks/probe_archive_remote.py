"""Where a remote GPU archive read's time goes (issue #25: 1 MiB chunks over S3 as one dataset, 18.4x the
best anchor against 20x): the files of ``archive_bench.py`` read as one dataset over nginx (HTTP and
path-style S3) with the waves cut into more or fewer pieces (``gdsstore.archives.fetch.PIECES_PER_WAVE``;
1: each read one request, as before), ``--rounds`` interleaved rounds, medians, the bytes checked against
the local read; the time of the checks around a read (``Targets.check``, a ``HEAD`` per object after it);
then the trace of one read.

    source .gpu/prelude.sh; PATH=$PWD/.gpu/bin:$PATH python benchmarks/probe_archive_remote.py --chunk 1m
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--chunk", default="1m", choices=("64k", "1m"))
    ap.add_argument("--files", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--pieces", default="1,64,128,256", help="PIECES_PER_WAVE values")
    ap.add_argument("--root", default=os.path.join(tempfile.gettempdir(), "gdsstore-archive-bench"))
    ap.add_argument("--host", action="store_true", help="host buffers (a check of the probe without a GPU)")
    a = ap.parse_args()

    if a.host:
        def sync() -> None:
            pass
    else:
        import cupy as cp

        sync = cp.cuda.runtime.deviceSynchronize
    from archive_bench import make_files, remote_readers
    from servers.nginx import NginxServer

    import gdsstore
    from gdsstore.archives import fetch

    os.makedirs(a.root, exist_ok=True)
    paths = make_files(a.root, a.files, 64, a.chunk)
    os.chmod(a.root, 0o755)
    server = NginxServer(os.path.dirname(os.path.abspath(a.root)), 8, tcp_nopush=False)
    checks: list[float] = []
    check = fetch.Targets.check
    defaults = fetch.PIECES_PER_WAVE, fetch.MIN_PIECE

    def timed_check(self: Any, ends: Any, *, after: bool, seen: Any = None) -> None:
        t0 = time.perf_counter()
        try:
            check(self, ends, after=after, seen=seen)
        finally:
            checks.append(time.perf_counter() - t0)

    fetch.Targets.check = timed_check  # type: ignore[method-assign]
    try:
        reads = {}
        for scheme in ("http", "s3"):
            rs = remote_readers(paths, os.path.abspath(a.root), server, scheme, not a.host)
            reads[scheme] = rs[f"gdsstore, one dataset {scheme}"]
        want = reads["http"]()  # (on the device: compared there)
        pieces = [int(p) for p in a.pieces.split(",")]
        times: dict[tuple[str, int], list[float]] = {(s, p): [] for s in reads for p in pieces}
        spent: dict[tuple[str, int], list[float]] = {k: [] for k in times}
        for _ in range(a.rounds):
            for (scheme, p) in times:
                fetch.PIECES_PER_WAVE = p
                fetch.MIN_PIECE = 1 << 20 if p > 1 else 1 << 40  # 1: each read one request
                checks.clear()
                sync()
                t0 = time.perf_counter()
                got = reads[scheme]()
                sync()
                times[(scheme, p)].append(time.perf_counter() - t0)
                spent[(scheme, p)].append(sum(checks))
                assert all(bool((g == w).all()) for g, w in zip(got, want)), f"{scheme} {p}: wrong bytes"
        nbytes = sum(w.nbytes for w in want)
        print(f"{len(paths)} files, {a.chunk} chunks, one dataset on the {'host' if a.host else 'GPU'} ({nbytes / 2**30:.2f} GiB)")
        for (scheme, p), ts in times.items():
            med = statistics.median(ts)
            print(f"{scheme:4} pieces per wave {p:>4}: {nbytes / med / 1e9:6.2f} GB/s, median {med:.3f} s, "
                  f"checks {statistics.median(spent[(scheme, p)]) * 1e3:.1f} ms")
        fetch.PIECES_PER_WAVE, fetch.MIN_PIECE = defaults
        for scheme, read in reads.items():
            with gdsstore.trace() as t:
                read()
            print(f"\n{scheme}, {defaults[0]} pieces per wave:\n{t}")
    finally:
        server.close()


if __name__ == "__main__":
    main()
