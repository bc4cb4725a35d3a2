"""Python's share of a remote selection: CPU-seconds of the calling thread in gdsstore's wave (planning, the
core's call and what comes back) with the native call itself taken out, per read of 4,096 objects of 16 KiB
from nginx on loopback: fsspec ``cat`` through the ``gds`` filesystem, and a zarr array of 4,096 chunks of
64 x 64 float32 under ``gdsstore.enable_pipeline()`` (host buffers), uncompressed and zstd. Medians.
For ``cat`` also the whole of its Python: ``_cat`` on fsspec's event loop (the paths stripped, by fsspec's
``_expand_path`` or at once) and ``cat_wave`` (locating the paths, the wave, the bytes mapped back), the
native calls taken out.

    .venv/bin/python benchmarks/wave_python_cost.py --rounds 7
"""

from __future__ import annotations

import argparse
import collections
import functools
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))

import gdsstore
from gdsstore.engine import native
from gdsstore.engine.remote import wave

_spent: dict[str, float] = collections.defaultdict(float)


def _timed(label: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        t0 = time.thread_time()
        try:
            return fn(*args, **kwargs)
        finally:
            _spent[label] += time.thread_time() - t0

    return run


class _TimedCore:
    """The native core with its wave calls (``read_wave``, ``read_table``) and ``split_bytes`` timed (the calling
    thread's CPU)."""

    def __init__(self, mod: Any) -> None:
        self._mod = mod

    def __getattr__(self, name: str) -> Any:
        fn = getattr(self._mod, name)
        return _timed(f"native {name}", fn) if name in ("read_wave", "read_table", "split_bytes") else fn


def _measure(read: Callable[[], Any], rounds: int) -> dict[str, float]:
    read()
    rows: dict[str, list[float]] = collections.defaultdict(list)
    for _ in range(rounds):
        _spent.clear()
        t0 = time.perf_counter()
        read()
        rows["wall"].append(time.perf_counter() - t0)
        wave_call = _spent["native read_wave"] + _spent["native read_table"]
        native = wave_call + _spent["native split_bytes"]
        rows["wave, Python only"].append(_spent["wave"] - wave_call)
        if "cat_wave" in _spent:
            rows["cat, Python only"].append(_spent["cat_wave"] + _spent["_cat (event loop)"] - native)
        for k, v in _spent.items():
            rows[k].append(v)
    return {k: round(statistics.median(v) * 1e3, 1) for k, v in rows.items()}


def _time_cat(fs: Any) -> None:
    """Time ``fs``'s ``_cat`` on fsspec's event loop (fsspec's ``_expand_path`` or the paths stripped at once)
    and the filesystem's ``cat_wave`` on its worker thread."""
    from fsspec.asyn import sync_wrapper

    from gdsstore.adapters.fsspec import filesystem

    filesystem.cat_wave = _timed("cat_wave", filesystem.cat_wave)  # type: ignore[attr-defined]
    cat = fs._cat

    async def timed_cat(*args: Any, **kwargs: Any) -> Any:
        t0 = time.thread_time()  # the loop's thread: idle while cat_wave runs on its worker
        try:
            return await cat(*args, **kwargs)
        finally:
            _spent["_cat (event loop)"] += time.thread_time() - t0

    fs.cat = sync_wrapper(timed_cat, obj=fs)  # fs.cat wraps the _cat of the filesystem's making


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    import fsspec
    import zarr
    from servers.nginx import NginxServer

    mod = native.load()
    native.load = lambda: _TimedCore(mod)  # type: ignore[assignment]
    wave.read_wave = _timed("wave", wave.read_wave)  # type: ignore[assignment]
    with tempfile.TemporaryDirectory() as root:
        os.chmod(root, 0o755)
        os.makedirs(f"{root}/objects")
        for i in range(4096):
            with open(f"{root}/objects/{i}", "wb") as f:
                f.write(os.urandom(16 << 10))
        x = np.random.default_rng(0).random((4096, 4096), dtype=np.float32)
        for codec in ("none", "zstd"):
            comp = None if codec == "none" else zarr.codecs.ZstdCodec(level=1)
            zarr.create_array(f"{root}/{codec}.zarr", shape=x.shape, chunks=(64, 64), dtype="float32",
                              compressors=comp)[:] = x
        srv = NginxServer(root, workers=2, tcp_nopush=False)
        try:
            fs, _ = fsspec.core.url_to_fs(f"gds::{srv.url('')}")
            _time_cat(fs)
            urls = [srv.url(f"objects/{i}") for i in range(4096)]
            print("fsspec cat, ms:", _measure(lambda: fs.cat(urls), args.rounds), flush=True)
            with gdsstore.enable_pipeline():
                for codec in ("none", "zstd"):
                    a = zarr.open_array(gdsstore.GDSStore(srv.url(f"{codec}.zarr")), mode="r")
                    assert np.array_equal(a[:], x)
                    print(f"zarr {codec} a[:], ms:", _measure(lambda a=a: a[:], args.rounds), flush=True)
        finally:
            srv.close()


if __name__ == "__main__":
    main()
