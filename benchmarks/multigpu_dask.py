"""Dask with one worker per GPU reading one zarr array through GDSStore (issue 8).

    python benchmarks/multigpu_dask.py --root /tmp/mg.zarr --gib 8 --gpus 1 2

For each GPU count: a distributed cluster whose workers each see one GPU (dask-cuda's LocalCUDACluster
when installed, otherwise Nannies with their own CUDA_VISIBLE_DEVICES), ``da.from_zarr`` over a GDSStore
with gdsstore.enable_gpu() in every task, and a per-chunk record of the device the bytes landed on.
Prints GB/s per GPU count and the scaling factor; asserts every worker's chunks landed on its own GPU.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
from typing import Any

import numpy as np


def _read_block(root: str, block: tuple[slice, ...]) -> dict[str, Any]:
    import cupy as cp
    import zarr

    import gdsstore

    with gdsstore.enable_gpu():
        z = zarr.open_array(gdsstore.GDSStore(root, read_only=True), mode="r")
        x = z[block]
    cp.cuda.runtime.deviceSynchronize()
    return {
        "nbytes": int(x.nbytes),
        "device": int(x.device.id),
        "visible": os.environ.get("CUDA_VISIBLE_DEVICES", ""),
        "checksum": float(x[:1, :1].sum()),
    }


def _cluster(n: int) -> Any:
    try:
        from dask_cuda import LocalCUDACluster

        return LocalCUDACluster(CUDA_VISIBLE_DEVICES=list(range(n)), threads_per_worker=4)
    except ImportError:
        from distributed import LocalCluster, Nanny

        cluster = LocalCluster(n_workers=0, processes=True)

        async def add() -> None:
            for i in range(n):
                await Nanny(cluster.scheduler_address, nthreads=4, env={"CUDA_VISIBLE_DEVICES": str(i)})

        asyncio.run_coroutine_threadsafe(add(), cluster.loop.asyncio_loop).result()
        return cluster


def run(root: str, gpus: int) -> dict[str, Any]:
    import zarr
    from distributed import Client

    import gdsstore

    z = zarr.open_array(gdsstore.GDSStore(root, read_only=True), mode="r")
    rows = z.chunks[0]
    blocks = [(slice(i, min(i + rows, z.shape[0])), slice(None)) for i in range(0, z.shape[0], rows)]
    with _cluster(gpus) as cluster, Client(cluster) as client:
        client.wait_for_workers(gpus)
        client.gather(client.map(_read_block, [root] * len(blocks), blocks, pure=False))  # warm
        t0 = time.perf_counter()
        out = client.gather(client.map(_read_block, [root] * len(blocks), blocks, pure=False))
        secs = time.perf_counter() - t0
    per_visible: dict[str, set[int]] = {}
    for r in out:
        per_visible.setdefault(r["visible"], set()).add(r["device"])
    # Each worker sees exactly one GPU (as its device 0): its chunks must all land there.
    assert all(devs == {0} for devs in per_visible.values()), per_visible
    assert len(per_visible) == gpus, per_visible
    total = sum(r["nbytes"] for r in out)
    return {"gpus": gpus, "bytes": total, "seconds": secs, "gbps": total / secs / 1e9, "workers": sorted(per_visible)}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--root", default="/tmp/gdsstore-multigpu.zarr")
    p.add_argument("--gib", type=float, default=4)
    p.add_argument("--gpus", type=int, nargs="+", default=[1, 2])
    p.add_argument("--out", default=os.environ.get("OUT", "."))
    a = p.parse_args()
    import zarr

    import gdsstore

    n = int((a.gib * (1 << 30) / 4) ** 0.5) // 1024 * 1024
    if not os.path.exists(a.root):
        z = zarr.create_array(gdsstore.GDSStore(a.root), shape=(n, n), chunks=(1024, n), dtype="f4", compressors=None)
        z[:] = np.random.default_rng(0).random((n, n), dtype=np.float32)
    results = [run(a.root, g) for g in a.gpus]
    for r in results:
        print(f"{r['gpus']} GPU(s): {r['gbps']:.2f} GB/s  workers={r['workers']}")
    if len(results) > 1:
        print(f"scaling {results[0]['gpus']}->{results[-1]['gpus']} GPUs: {results[-1]['gbps'] / results[0]['gbps']:.2f}x")
    with open(os.path.join(a.out, "multigpu.json"), "w") as fh:
        json.dump(results, fh, indent=2)


if __name__ == "__main__":
    main()
