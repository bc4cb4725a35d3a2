"""The native core's wave alone on this machine: 2,048 objects of SIZE bytes (argv[1], default 4096) behind
nginx (1 worker) as HTTP and as a path-style S3 endpoint, each wave four times: wall, requests per second,
and this process's CPU time per request. Run from the repository root; ``PYTHONPATH=DIR`` with another
core's wheel installed in DIR measures that core (``wave_cpu.txt``: the core of 3980756 and this one).
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time

sys.path[:0] = ["tests", "benchmarks"]

import numpy as np  # noqa: E402
from remote_zarr_bench import NginxS3  # noqa: E402

from gdsstore.engine.remote.http_transport import HTTPBackend  # noqa: E402
from gdsstore.engine.remote.s3 import S3Backend  # noqa: E402
from gdsstore.gpu import staging  # noqa: E402


def main() -> None:
    tmp = tempfile.mkdtemp()  # ours: removed at the end
    srv = NginxS3(tmp, 1)
    os.makedirs(os.path.join(srv.root, "w"), exist_ok=True)
    n, size = 2048, int(sys.argv[1]) if len(sys.argv) > 1 else 4096
    for i in range(n):
        with open(os.path.join(srv.root, "w", str(i)), "wb") as f:
            f.write(os.urandom(size))
    keys = [str(i) for i in range(n)]
    expect = np.full(n, size, np.int64)
    http = HTTPBackend(srv.gds_options["endpoint_url"] + "/" + srv.url("w")[len("s3://") :])
    for name, backend in [("s3", S3Backend(srv.url("w"), srv.gds_options)), ("http", http)]:
        for _ in range(4):
            c0, t0 = time.process_time(), time.perf_counter()
            staging.stage_wave(backend, keys, None, pinned=False, expect=expect)
            t, c = time.perf_counter() - t0, time.process_time() - c0
            print(name, f"wall {t * 1e3:.0f} ms, {n / t:.0f} req/s, CPU {c / n * 1e6:.1f} us/request")
    srv.close()
    shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
