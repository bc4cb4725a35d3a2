"""zarr v2 arrays with blosc read whole: gdsstore against zarr ``enable_gpu`` and zarrs.

Arrays made here with zarr: float32, ``--size`` MiB raw (1024: a 16384 x 16384 array), chunks of
``--chunk`` rows x all columns (1024 x 1024 by default, 4 MiB), zarr v2 with numcodecs ``Blosc``
``lz4`` + byte shuffle and ``zstd`` + byte shuffle (clevel 5). The values are rounded normals
(compressible, as measured data are). Readers, each reading the whole array:

- ``gdsstore``: ``zarr.open_array(GDSStore(path))[:]`` under ``gdsstore.enable_gpu()`` (blosc frames
  parsed on the host, their streams decoded by nvCOMP, unshuffled on the GPU); host buffers
  (``enable_gpu(buffers=False)``) without ``--device``;
- ``zarr gpu``: zarr's ``LocalStore`` under ``zarr.config.enable_gpu()``; plain zarr without
  ``--device``. zarr 3.4 cannot read a v2 blosc array so (its ``V2Codec`` hands numcodecs device
  memory): the row says so, and ``--formats 2,3`` adds v3 copies (zarr's ``blosc`` codec, the same
  settings), which it reads;
- ``zarr+cp.asarray`` (``--device``): zarr's host read (numcodecs), then ``cupy.asarray``;
- ``zarrs``: zarr with ``codec_pipeline.path = zarrs.ZarrsCodecPipeline`` (Rust, decodes on the CPU
  threads), then ``cupy.asarray`` with ``--device``.

Interleaved rounds (the readers' order rotates), medians of wall time and of process CPU-seconds,
every result checked equal to the first reader's (CRC-32 of the bytes). A markdown table is printed
and, with ``--out``, written (JSON beside it).

    .venv/bin/python benchmarks/blosc_bench.py --size 64 --rounds 3          # CPU machine, host buffers
    python benchmarks/blosc_bench.py --device --formats 2,3 --rounds 5 --out benchmarks/results/<date>-h200-blosc/blosc.md
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
CODECS: dict[str, dict[str, Any]] = {
    "lz4+shuffle": {"cname": "lz4", "shuffle": 1}, "zstd+shuffle": {"cname": "zstd", "shuffle": 1},
}


def make_array(root: str, name: str, size_mib: int, chunk_rows: int, zarr_format: int = 2) -> str:
    """A float32 zarr array of ``size_mib`` MiB raw, 1024 columns x rows as needed (once; reused):
    v2 with numcodecs' ``Blosc``, or v3 with zarr's ``blosc`` codec of the same settings."""
    import zarr
    from numcodecs import Blosc
    from zarr.codecs import BloscCodec

    path = os.path.join(root, f"{name}-{size_mib}m-{chunk_rows}r-v{zarr_format}.zarr")
    if os.path.exists(os.path.join(path, ".zarray" if zarr_format == 2 else "zarr.json")):
        return path
    cols = 16384 if size_mib >= 1024 else 1024
    rows = size_mib * (1 << 20) // 4 // cols
    cname, shuffle = CODECS[name]["cname"], CODECS[name]["shuffle"]
    comp: Any = (Blosc(cname=cname, clevel=5, shuffle=shuffle) if zarr_format == 2
                 else BloscCodec(cname=cname, clevel=5, shuffle="shuffle" if shuffle == 1 else "noshuffle"))
    z = zarr.create_array(path, shape=(rows, cols), chunks=(min(chunk_rows, rows), min(1024, cols)), dtype="<f4",
                          zarr_format=zarr_format, compressors=comp, fill_value=0)  # type: ignore[arg-type]
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

    def zarr_host(path: str) -> Any:
        return up(zarr.open_array(LocalStore(path), mode="r")[:])

    rs: dict[str, Reader] = {"gdsstore": ours, "zarr gpu" if device else "zarr": zarr_gpu}
    if device:
        rs["zarr+cp.asarray"] = zarr_host
    if importlib.util.find_spec("zarrs") is None:
        print("zarrs anchor left out: zarrs is not installed", file=sys.stderr)
    else:
        rs["zarrs"] = with_zarrs
    return rs


def _crc(a: Any) -> int:
    return zlib.crc32(memoryview(np.ascontiguousarray(a.get() if hasattr(a, "get") else a)).cast("B"))


def measure(rs: dict[str, Reader], path: str, rounds: int, device: bool) -> dict[str, dict[str, Any]]:
    """Medians per reader; a reader that fails in the warm-up round is reported with its error."""
    times: dict[str, list[float]] = {k: [] for k in rs}
    cpu: dict[str, list[float]] = {k: [] for k in rs}
    failed: dict[str, str] = {}
    names = list(rs)
    want: int | None = None
    nbytes = 0
    for r in range(rounds + 1):  # round 0 warms every reader up (imports, kernels, page cache): not counted
        for name in names[r % len(names) :] + names[: r % len(names)]:  # interleaved, order rotating
            if name in failed:
                continue
            t0, c0 = time.perf_counter(), time.process_time()
            try:
                out = rs[name](path)
            except Exception as exc:  # an anchor that cannot read these arrays: a row saying why
                if r or name == "gdsstore":
                    raise
                failed[name] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:100]}"
                continue
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
    res: dict[str, dict[str, Any]] = {k: {"failed": why} for k, why in failed.items()}
    for k in rs:
        if k not in failed:
            med = statistics.median(times[k])
            res[k] = {"seconds": med, "cpu_seconds": statistics.median(cpu[k]), "gbps": nbytes / med / 1e9,
                      "rounds": times[k], "nbytes": nbytes}
    return {k: res[k] for k in rs}


def table(results: dict[str, dict[str, dict[str, Any]]]) -> str:
    """One row per array and reader; gdsstore against each anchor of the same array."""
    lines = ["| array | reader | GB/s | s (median) | CPU-s (median) | gdsstore vs this |",
             "|---|---|---:|---:|---:|---:|"]
    for arr, res in results.items():
        ours = res["gdsstore"]["gbps"]
        for k, v in res.items():
            if "failed" in v:
                lines.append(f"| {arr} | {k} | fails: {v['failed']} | | | |")
                continue
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
    ap.add_argument("--formats", default="2", help="zarr formats of the arrays: 2, or 2,3 (v3: zarr's blosc codec)")
    ap.add_argument("--out", help="write the table here (markdown) and the results beside it (.json)")
    a = ap.parse_args()
    os.makedirs(a.root, exist_ok=True)
    rs = readers(a.device)
    results = {}
    for fmt in [int(f) for f in a.formats.split(",")]:
        for name in a.codecs.split(","):
            path = make_array(a.root, name, a.size, a.chunk, fmt)
            results[f"v{fmt} {name}, {a.size} MiB"] = measure(rs, path, a.rounds, a.device)
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
