"""The core's wave alone, 4,096 x 16 KiB over nginx on loopback, HTTP and S3, at 16, 64 and 256 in flight:
wall and CPU per request (run from the repository root: python <this file>)."""

import os
import sys
import tempfile
import time

sys.path.insert(0, "tests")
import numpy as np
from servers.nginx import NginxServer

from gdsstore.engine.remote import core
from gdsstore.engine.remote.retry import RetryPolicy

root = tempfile.mkdtemp()
os.makedirs(f"{root}/bench/o")
n, size = 4096, 16 << 10
for i in range(n):
    with open(f"{root}/bench/o/{i}", "wb") as f:
        f.write(os.urandom(size))
srv = NginxServer(root, 2, tcp_nopush=False)
ep = srv.url("").rstrip("/")
s3 = core.s3_store(
    {
        "aws_endpoint": ep,
        "aws_region": "us-east-1",
        "aws_bucket": "bench",
        "aws_access_key_id": "k",
        "aws_secret_access_key": "s",
        "aws_virtual_hosted_style_request": "false",
        "aws_allow_http": "true",
    },
    connect_timeout=5,
)
http = core.http_store(ep + "/", connect_timeout=5)
buf = np.empty(n * size, np.uint8)
R = RetryPolicy(max_attempts=1, retry_status=(503,), backoff_base=0.001, backoff_max=0.01)
for name, st, pre in (("http", http, "bench/o/"), ("s3", s3, "o/")):
    pieces = [core.CorePiece(f"{pre}{i}", 0, None, size, i * size, size) for i in range(n)]
    for c in (16, 64, 256):
        ts = []
        for _ in range(3):
            t0 = time.perf_counter()
            c0 = time.process_time()
            res = core.read_wave(st, "x", pieces, buf, retry=R, concurrency=c, timeout=30)
            ts.append((time.perf_counter() - t0, time.process_time() - c0))
            assert all(r.error is None for r in res), [r.error for r in res if r.error][:1]
        t, cpu = min(ts)
        print(
            f"{name} c={c}: {t * 1e3:.0f} ms, {t / n * 1e6:.1f} us/req, cpu {cpu / n * 1e6:.1f} us/req",
            flush=True,
        )
srv.close()
