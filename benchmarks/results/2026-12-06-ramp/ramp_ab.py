"""Ramp A/B behind a 20 ms-per-GET server (S3's first byte): zarr's own pipeline (one get per chunk) and
gdsstore's pipeline (one wave per window). Each variant in its own process; interleaved rounds."""

import json
import os
import statistics
import subprocess
import sys
import tempfile

import numpy as np
import zarr

VARIANTS = sys.argv[1].split(",")
ROUNDS = int(sys.argv[2])
CHILD = r"""
import asyncio, contextlib, json, os, sys, threading, time, statistics
import numpy as np, zarr, gdsstore
from aiohttp import web
root, lat = sys.argv[1], float(sys.argv[2])
async def handle(req):
    await asyncio.sleep(lat)
    p = os.path.join(root, req.match_info["tail"])
    if not os.path.isfile(p):
        return web.Response(status=404)
    data = open(p, "rb").read()
    rng = req.http_range
    if rng.start is not None or rng.stop is not None:
        data = data[rng]
        return web.Response(status=206, body=data, headers={"Content-Range": f"bytes {rng.start}-{rng.start+len(data)-1}/{os.path.getsize(p)}"})
    return web.Response(body=data)
loop = asyncio.new_event_loop()
app = web.Application(); app.router.add_get("/{tail:.*}", handle)
runner = web.AppRunner(app, access_log=None); loop.run_until_complete(runner.setup())
site = web.TCPSite(runner, "127.0.0.1", 0, backlog=1024); loop.run_until_complete(site.start())
port = site._server.sockets[0].getsockname()[1]
threading.Thread(target=loop.run_forever, daemon=True).start()
out = {}
for mode in ("zarr", "pipeline"):
    ts = []
    for rep in range(4):
        t0 = time.perf_counter()
        with (gdsstore.enable_pipeline() if mode == "pipeline" else contextlib.nullcontext()):
            z = zarr.open_array(gdsstore.GDSStore(f"http://127.0.0.1:{port}/a.zarr", read_only=True), mode="r")
            a = z[:]
        ts.append(time.perf_counter() - t0)
        assert int(a[-1]) == a.size - 1
    out[mode] = {"first": ts[0], "then": statistics.median(ts[1:])}
print("RESULT", json.dumps(out))
"""
tmp = tempfile.mkdtemp()
z = zarr.create_array(f"{tmp}/a.zarr", shape=(512 * 16384,), chunks=(16384,), dtype="u4", compressors=None)
z[:] = np.arange(512 * 16384, dtype="u4")
res = {v: {} for v in VARIANTS}
for r in range(ROUNDS):
    for v in VARIANTS:
        env = dict(os.environ, PYTHONPATH=f"/tmp/variants/pkg_{v}")
        p = subprocess.run(
            [sys.executable, "-c", CHILD, tmp, "0.02"],
            env=env,
            cwd="/tmp",
            capture_output=True,
            text=True,
            timeout=600,
        )
        line = [ln for ln in p.stdout.splitlines() if ln.startswith("RESULT")]
        if not line:
            print(v, "FAILED", p.stderr[-1500:])
            continue
        got = json.loads(line[0][7:])
        print(r, v, {m: {k: round(x, 3) for k, x in d.items()} for m, d in got.items()}, flush=True)
        for m, d in got.items():
            for k, x in d.items():
                res[v].setdefault(f"{m} {k}", []).append(x)
print("512 chunks of 64 KiB, 20 ms per GET; seconds per read (median of rounds)")
for v in VARIANTS:
    print(v, {k: round(statistics.median(x), 3) for k, x in res[v].items()}, flush=True)
