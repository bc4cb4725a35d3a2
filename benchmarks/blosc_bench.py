"""zarr v2 arrays with blosc read whole: gdsstore against zarr ``enable_gpu`` and zarrs.

Arrays made here with zarr: float32, ``--size`` MiB raw (1024: a 16384 x 16384 array), chunks of
``--chunk`` rows x all columns (1024 x 1024 by default, 4 MiB), zarr v2 with numcodecs ``Blosc``
``lz4`` + byte shuffle and ``zstd`` + byte shuffle (clevel 5). The values are rounded normals
(compressible, as measured data are). Readers, each reading the whole array:

- ``gdsstore``: ``zarr.open_array(GDSStore(path))[:]`` under ``gdsstore.enable_gpu()`` (blosc frames
  parsed on the host, their streams decoded by nvCOMP, unshuffled on the GPU); host buffers
  (``enable_gpu(buffers=False)``) without ``--device``;
- ``zarr gpu``: zarr's ``LocalStore`` under ``zarr.config.enable_gpu()`` (numcodecs on the CPU);
  plain zarr without ``--device``;
- ``zarrs``: zarr with ``codec_pipeline.path = zarrs.ZarrsCodecPipeline`` (Rust, decodes on the CPU
  threads), then ``cupy.asarray`` with ``--device``.

Interleaved rounds (the readers' order rotates), medians of wall time and of process CPU-seconds,
every result checked equal to the first reader's (CRC-32 of the bytes). A markdown table is printed
and, with ``--out``, written (JSON beside it).

    .venv/bin/python benchmarks/blosc_bench.py --size 64 --rounds 3          # CPU machine, host buffers
    python benchmarks/blosc_bench.py --device --rounds 5 --out benchmarks/results/<date>-h200-blosc/blosc.md
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import statistics
import sys
import tempfile
import time
import zlib
from collections.abc import Callable
from typing import Any

import numpy as np

Reader = Callable[[str], Any]

#: The codecs of the arrays: name -> numcodecs Blosc arguments.
CODECS = {"lz4+shuffle": {"cname": "lz4", "shuffle": 1}, "zstd+shuffle": {"cname": "zstd", "shuffle": 1}}


def make_array(root: str, name: str, size_mib: int, chunk_rows: int) -> str:
    """A float32 zarr v2 array of ``size_mib`` MiB raw, 1024 columns x rows as needed (once; reused)."""
    import zarr
    from numcodecs import Blosc

    path = os.path.join(root, f"{name}-{size_mib}m-{chunk_rows}r.zarr")
    if os.path.exists(os.path.join(path, ".zarray")):
        return path
    cols = 16384 if size_mib >= 1024 else 1024
    rows = size_mib * (1 << 20) // 4 // cols
    z = zarr.create_array(path, shape=(rows, cols), chunks=(min(chunk_rows, rows), min(1024, cols)), dtype="<f4",
                          zarr_format=2, compressors=Blosc(clevel=5, **CODECS[name]), fill_value=0)
    rng = np.random.default_rng(0)
    step = max(1, (64 << 20) // (cols * 4))
    for r in range(0, rows, step):  # 64 MiB at a time: the machine's memory is not the bound here
        z[r : r + step] = np.round(rng.standard_normal((min(step, rows - r), cols)), 2).astype("<f4")
    return path


def readers(device: bool) -> dict[str, Reader]:
    import zarr
    from zarr.storage import LocalStore

    import gdsstore

    def up(a: Any) -> Any:
        if not device:
            return a
        import cupy as cp

        return cp.asarray(a)

    def ours(path: str) -> Any:
        with gdsstore.enable_gpu(buffers=device):
            return zarr.open_array(gdsstore.GDSStore(path), mode="r")[:]

    def zarr_gpu(path: str) -> Any:
        if device:
            with zarr.config.enable_gpu():
                return zarr.open_array(LocalStore(path), mode="r")[:]
        return zarr.open_array(LocalStore(path), mode="r")[:]

    def with_zarrs(path: str) -> Any:
        with zarr.config.set({"codec_pipeline.path": "zarrs.ZarrsCodecPipeline"}):
            return up(zarr.open_array(LocalStore(path), mode="r")[:])

    rs: dict[str, Reader] = {"gdsstore": ours, "zarr gpu" if device else "zarr": zarr_gpu}
    if importlib.util.find_spec("zarrs") is None:
        print("zarrs anchor left out: zarrs is not installed", file=sys.stderr)
    else:
        rs["zarrs"] = with_zarrs
    return rs


def _crc(a: Any) -> int:
    return zlib.crc32(memoryview(np.ascontiguousarray(a.get() if hasattr(a, "get") else a)).cast("B"))


def measure(rs: dict[str, Reader], path: str, rounds: int, device: bool) -> dict[str, dict[str, Any]]:
    times: dict[str, list[float]] = {k: [] for k in rs}
    cpu: dict[str, list[float]] = {k: [] for k in rs}
    names = list(rs)
    want: int | None = None
    nbytes = 0
    for r in range(rounds + 1):  # round 0 warms every reader up (imports, kernels, page cache): not counted
        for name in names[r % len(names) :] + names[: r % len(names)]:  # interleaved, order rotating
            t0, c0 = time.perf_counter(), time.process_time()
            out = rs[name](path)
            if device:
                import cupy as cp

                cp.cuda.runtime.deviceSynchronize()
            dt, dc = time.perf_counter() - t0, time.process_time() - c0
            got = _crc(out)
            want = got if want is None else want
            if got != want:
                raise AssertionError(f"{name}: bytes differ from {names[0]}'s")
            nbytes = int(out.nbytes)
            del out
            if r:
                times[name].append(dt)
                cpu[name].append(dc)
    return {
        k: {
            "seconds": statistics.median(times[k]),
            "cpu_seconds": statistics.median(cpu[k]),
            "gbps": nbytes / statistics.median(times[k]) / 1e9,
            "rounds": times[k],
            "nbytes": nbytes,
        }
        for k in rs
    }


def table(results: dict[str, dict[str, dict[str, Any]]]) -> str:
    """One row per array and reader; gdsstore against each anchor of the same array."""
    lines = ["| array | reader | GB/s | s (median) | CPU-s (median) | gdsstore vs this |",
             "|---|---|---:|---:|---:|---:|"]
    for arr, res in results.items():
        ours = res["gdsstore"]["gbps"]
        for k, v in res.items():
            ratio = "-" if k == "gdsstore" else f"{ours / v['gbps']:.2f}x"
            lines.append(f"| {arr} | {k} | {v['gbps']:.3f} | {v['seconds']:.3f} | {v['cpu_seconds']:.2f} | {ratio} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", type=int, default=1024, help="MiB of raw float32 per array (1024: 1 GiB)")
    ap.add_argument("--chunk", type=int, default=1024, help="rows per chunk (chunks are rows x 1024 columns)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--root", default=os.path.join(tempfile.gettempdir(), "gdsstore-blosc-bench"))
    ap.add_argument("--device", action="store_true", help="CuPy results (zarrs adds cupy.asarray)")
    ap.add_argument("--codecs", default=",".join(CODECS), help=f"comma-separated, of {sorted(CODECS)}")
    ap.add_argument("--out", help="write the table here (markdown) and the results beside it (.json)")
    a = ap.parse_args()
    os.makedirs(a.root, exist_ok=True)
    rs = readers(a.device)
    results = {}
    for name in a.codecs.split(","):
        path = make_array(a.root, name, a.size, a.chunk)
        results[f"{name}, {a.size} MiB"] = measure(rs, path, a.rounds, a.device)
    text = table(results)
    print(text)
    if a.out:
        os.makedirs(os.path.dirname(a.out) or ".", exist_ok=True)
        meta = {"command": " ".join([os.path.basename(sys.executable), *sys.argv]), "size_mib": a.size,
                "chunk_rows": a.chunk, "device": a.device, "machine": platform.platform(), "cpus": os.cpu_count()}
        with open(a.out, "w") as f:
            f.write(text + "\n")
        with open(os.path.splitext(a.out)[0] + ".json", "w") as f:
            json.dump({"meta": meta, "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
