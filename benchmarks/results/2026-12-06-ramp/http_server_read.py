"""python -m http.server's own classes (tests/servers/stalls.py) serving an array of N chunks of 28 KB; three
reads under ``enable_pipeline()``, seconds each. Run from the project root with
``PYTHONPATH=/tmp/variants/pkg_<name>`` (``build_variants.sh``)."""

import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "tests"))

import numpy as np
import zarr
from servers.stalls import small_http_server

import gdsstore

n = int(sys.argv[1])
d = tempfile.mkdtemp()
src = np.arange(n * 7000, dtype="f4")
a = zarr.create_array(d + "/a.zarr", shape=src.shape, chunks=(7000,), dtype="f4", compressors=None)
a[:] = src
srv, thread = small_http_server(d)
url = f"http://127.0.0.1:{srv.server_address[1]}/a.zarr"
with gdsstore.config.set({"remote.timeout": 30.0}), gdsstore.enable_pipeline():
    for _ in range(3):
        z = zarr.open_array(gdsstore.GDSStore(url, read_only=True), mode="r")
        t0 = time.monotonic()
        got = z[:]
        elapsed = time.monotonic() - t0
        assert (np.asarray(got) == src).all()
        print(n, "chunks", f"{elapsed:.3f} s", flush=True)
srv.shutdown()
srv.server_close()
