"""gdsstore's Python per zarr selection: CPU-seconds of every thread that runs gdsstore's pipeline code for one
``a[:]`` of 4,096 chunks of 64 x 64 float32 from nginx on loopback under ``gdsstore.enable_pipeline()`` (host
buffers), uncompressed and zstd, medians of ``--rounds`` reads, by phase:

- ``entry``: ``GDSCodecPipeline.read`` on zarr's event loop; zarr's own indexing and ``StorePath`` per chunk
  (its ``_get_selection`` less the pipeline's read: zarr 3.4 builds its list of chunks before it calls the
  pipeline, older zarr in the ``batch_info`` generator) are reported apart as ``zarr batch``, not gdsstore's;
- ``plan``: the route, the fetcher, ``read_chunks``' own planning, the windows and the chunk geometry;
- ``fetch``: the fetcher and ``land`` around the wave; ``wave``: ``read_wave``'s Python (the native call out);
- ``decode``: the decode dispatch on the calling thread and in the engine's threads, less the zstd decode
  itself (``numcodecs.zstd.decompress`` of every chunk, timed apart on one thread: native, not planning);
- ``scatter``: placing the chunks in the output.

Each wrapper counts its own thread's CPU (``time.thread_time``) less that of the wrapped calls inside it, so
the phases add up without double counting, whichever thread ran them.

    .venv/bin/python benchmarks/pipeline_python_cost.py --rounds 7
"""

from __future__ import annotations

import argparse
import collections
import functools
import inspect
import mmap
import os
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))

import gdsstore
from gdsstore.engine import native

_spent: dict[str, float] = collections.defaultdict(float)
_local = threading.local()
_lock = threading.Lock()

#: phase of each wrapped label (labels not here are their own phase)
PHASES = {
    "read_plan": "plan", "fetcher_for": "plan", "read_chunks": "plan", "read_windows": "plan",
    "plan_chunk_geometry": "plan", "host_geometry": "plan", "one_call": "plan",
    "EngineFetcher.whole": "fetch", "EngineFetcher.__call__": "fetch", "land": "fetch",
    "read_wave": "wave", "wave _plan": "wave", "wave _asks": "wave", "wave _core_done": "wave",
    "wave _one_version": "wave", "wave _place": "wave", "wave core.read_wave": "wave", "wave core.read_table": "wave",
    "decode_window": "decode", "decode_bb_on_host": "decode",
    "place_views": "scatter", "place_decoded": "scatter", "place_window": "scatter", "place_host": "scatter",
}


def _stack() -> list[float]:
    st = getattr(_local, "stack", None)
    if st is None:
        st = _local.stack = []
    return st


def _exclusive(label: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` counting its thread's CPU less that of the wrapped calls inside it, under ``label``."""

    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        st = _stack()
        st.append(0.0)  # CPU of the wrapped calls inside this one
        t0 = time.thread_time()
        try:
            return fn(*args, **kwargs)
        finally:
            took = time.thread_time() - t0
            inner = st.pop()
            if st:
                st[-1] += took
            with _lock:
                _spent[label] += took - inner

    return run


def _patch(owner: Any, name: str, label: str | None = None) -> None:
    setattr(owner, name, _exclusive(label or name, getattr(owner, name)))


def _thread_clocks(skip: int) -> dict[int, float]:
    """CPU-seconds so far of every Python thread but ``skip`` (zarr's event loop, timed on its own)."""
    out: dict[int, float] = {}
    for t in threading.enumerate():
        if t.ident is not None and t.ident != skip:
            try:
                out[t.ident] = time.clock_gettime(time.pthread_getcpuclockid(t.ident))
            except OSError:  # ended meanwhile
                continue
    return out


def _page_in(out: np.ndarray) -> None:
    """Touch one byte of each page of a new output: the kernel's page faults, not the scatter's work."""
    flat = out.reshape(-1, order="A").view(np.uint8)
    flat[:: mmap.PAGESIZE] = flat[:: mmap.PAGESIZE].copy()  # the same bytes back: nothing changes


_paged = _exclusive("native output page faults", _page_in)


def _output_paged_in(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` (a scatter), its output's pages faulted in first under their own label (every byte of the output
    is written by the read anyway). Where zarr's new output of 64 MiB is first written, its page faults cost
    15-150 ms on this shared machine: more than the scatter's own work, and as noisy."""

    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        for a in args:
            if isinstance(a, np.ndarray):
                _paged(a)
        return fn(*args, **kwargs)

    return run


def _instrument() -> None:
    import zarr.core.array as zarr_array

    from gdsstore.engine.remote import core, wave
    from gdsstore.gpu import decode, execute, fetch, output, pipeline

    mod = native.load()
    for name in ("read_wave", "read_table", "split_bytes", "zstd_decompress"):  # native calls, out of their phase
        if hasattr(mod, name):  # each build's names: this script times the tree before and after
            _patch(mod, name, f"native {name}")
    _patch(wave, "read_wave")
    for name in ("_plan", "_asks", "_core_done", "_one_version", "_place"):  # the wave's parts, in its phase
        _patch(wave, name, f"wave {name}")
    for name in ("read_wave", "read_table"):
        if hasattr(core, name):
            _patch(core, name, f"wave core.{name}")
    _patch(pipeline.GDSCodecPipeline, "read_plan")
    _patch(fetch, "fetcher_for")
    _patch(fetch, "land")
    _patch(fetch.EngineFetcher, "whole", "EngineFetcher.whole")
    _patch(fetch.EngineFetcher, "__call__", "EngineFetcher.__call__")
    for name in ("one_call", "read_chunks", "read_windows", "plan_chunk_geometry", "decode_window",
                 "place_views", "place_decoded", "place_host", "host_geometry"):
        if hasattr(execute, name):  # each build's names: this script times the tree before and after
            _patch(execute, name)
    for name in ("place_window", "place_views", "plan_chunk_geometry"):
        if hasattr(output, name):
            _patch(output, name)
    for owner in (execute, output):
        for name in ("place_views", "place_decoded", "place_window"):
            if hasattr(owner, name):
                setattr(owner, name, _output_paged_in(getattr(owner, name)))
    _patch(decode, "decode_bb_on_host")
    read = pipeline.GDSCodecPipeline.read
    assert inspect.iscoroutinefunction(read)

    async def timed_read(self: Any, batch_info: Any, *args: Any, **kwargs: Any) -> Any:
        # on zarr's loop, which runs nothing else meanwhile: its CPU during the awaits is this read's
        me = threading.get_ident()
        before = _thread_clocks(me)
        st = _stack()
        st.append(0.0)
        t0 = time.thread_time()
        batch = list(batch_info)  # a generator in zarr before 3.4: its indexing and StorePaths, per chunk
        zarr_batch = time.thread_time() - t0
        try:
            return await read(self, batch, *args, **kwargs)
        finally:
            took = time.thread_time() - t0
            inner = st.pop()
            after = _thread_clocks(me)
            with _lock:
                _spent["entry"] += took - inner - zarr_batch
                _spent["zarr batch"] += zarr_batch
                _spent["other threads"] += sum(after[k] - v for k, v in before.items() if k in after)
                _in_read[0] += took - zarr_batch

    pipeline.GDSCodecPipeline.read = timed_read  # type: ignore[method-assign]
    get_selection = zarr_array._get_selection

    async def timed_get_selection(*args: Any, **kwargs: Any) -> Any:
        # zarr 3.4 builds its list of chunks here, before it calls the pipeline: its share is this coroutine's
        # CPU on the loop less the pipeline's read
        was, t0 = _in_read[0], time.thread_time()
        try:
            return await get_selection(*args, **kwargs)
        finally:
            with _lock:
                _spent["zarr batch"] += time.thread_time() - t0 - (_in_read[0] - was)

    zarr_array._get_selection = timed_get_selection


_in_read = [0.0]  # the loop's CPU-seconds in the pipeline's read so far (less a batch generator's)


def _zstd_native(root: str) -> Callable[[], float]:
    """CPU-seconds of ``numcodecs.zstd.decompress`` of every stored chunk of ``root`` into its raw size, on as
    many threads as the pipeline decodes with (``num_threads``; two decoders on two cores take more CPU-seconds
    than one, sharing caches and memory)."""
    import numcodecs.zstd

    from gdsstore import policy

    frames = []
    for dirpath, _, files in os.walk(os.path.join(root, "c")):
        for f in files:
            with open(os.path.join(dirpath, f), "rb") as fh:
                frames.append(np.frombuffer(fh.read(), np.uint8))
    threads = policy.settings().num_threads

    def decode(part: list[np.ndarray], spent: list[float]) -> None:
        dst = np.empty(64 * 64 * 4, np.uint8)
        t0 = time.thread_time()
        for fr in part:
            numcodecs.zstd.decompress(fr, dst)
        spent.append(time.thread_time() - t0)

    def native() -> float:
        spent: list[float] = []
        workers = [threading.Thread(target=decode, args=(frames[k::threads], spent)) for k in range(threads)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        return sum(spent)

    return native


def _copy_floor(shape: tuple[int, ...], chunk: tuple[int, ...], dtype: str) -> Callable[[], float]:
    """CPU-seconds of one numpy copy of a whole regular grid's chunks, laid one after another, into an output
    already paged in: the bytes the scatter copies, taken out of its phase."""
    grid = [n // c for n, c in zip(shape, chunk)]
    nd = len(shape)
    out = np.zeros(shape, dtype)
    view = out.reshape([x for g, c in zip(grid, chunk) for x in (g, c)]).transpose(
        [2 * i for i in range(nd)] + [2 * i + 1 for i in range(nd)])

    def floor() -> float:
        src = np.ones(int(np.prod(shape)), dtype).reshape(*grid, *chunk)
        t0 = time.thread_time()
        view[...] = src
        return time.thread_time() - t0

    return floor


#: labels counted on zarr's event loop; every other one runs on the pipeline's threads
LOOP = ("entry", "zarr batch", "read_plan", "fetcher_for")


def _rounds(read: Callable[[], Any], rounds: int) -> Iterator[tuple[float, dict[str, float]]]:
    """``(wall-clock seconds, CPU-seconds per label)`` of each of ``rounds`` reads, after one not counted."""
    read()
    for _ in range(rounds):
        _spent.clear()
        t0 = time.perf_counter()
        read()
        yield time.perf_counter() - t0, dict(_spent)


def _measure(read: Callable[[], Any], rounds: int, native: dict[str, Callable[[], float]]) -> dict[str, float]:
    """Medians (ms) of each label and phase over ``rounds`` reads. ``native``: per phase, the CPU-seconds of
    its native work, measured apart right after each read (the load of a shared machine moves) and taken out
    of it (``decode``: the zstd decode; ``scatter``: the copy of the bytes)."""
    rows: dict[str, list[float]] = collections.defaultdict(list)
    for wall, spent in _rounds(read, rounds):
        rows["wall"].append(wall)
        floors = {k: fn() for k, fn in native.items()}
        phases: dict[str, float] = collections.defaultdict(float)
        wrapped = 0.0
        for k, v in spent.items():
            rows[k].append(v)
            if k not in LOOP and k != "other threads":
                wrapped += v
            if not k.startswith("native") and k not in ("zarr batch", "other threads"):
                phases[PHASES.get(k, k)] += v
        # the pipeline's threads outside every wrapped call: the engine's threads decoding chunks
        phases["decode"] += spent["other threads"] - wrapped
        for k, v in floors.items():
            phases[k] -= v
            rows[f"native {k} (apart)"].append(v)
        for k, v in phases.items():
            rows[f"phase {k}"].append(v)
        rows["gdsstore Python, all"].append(sum(phases.values()))
    return {k: round(statistics.median(v) * 1e3, 1) for k, v in sorted(rows.items())}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--codecs", default="none,zstd")
    args = ap.parse_args()
    import zarr
    from servers.nginx import NginxServer

    from gdsstore.gpu import decode as gdecode

    _instrument()
    codecs = args.codecs.split(",")
    with tempfile.TemporaryDirectory() as root:
        os.chmod(root, 0o755)
        x = np.random.default_rng(0).random((4096, 4096), dtype=np.float32)
        for codec in codecs:
            comp = None if codec == "none" else zarr.codecs.ZstdCodec(level=1)
            zarr.create_array(f"{root}/{codec}.zarr", shape=x.shape, chunks=(64, 64), dtype="float32",
                              compressors=comp)[:] = x
        srv = NginxServer(root, workers=2, tcp_nopush=False)
        try:
            with gdsstore.enable_pipeline():
                for codec in codecs:
                    a = zarr.open_array(gdsstore.GDSStore(srv.url(f"{codec}.zarr")), mode="r")
                    assert np.array_equal(a[:], x)
                    nat = {"scatter": _copy_floor(x.shape, (64, 64), "float32")}
                    if codec != "none" and not hasattr(gdecode, "_zstd_in_core"):  # else one native call, out
                        nat["decode"] = _zstd_native(f"{root}/{codec}.zarr")
                    print(f"zarr {codec} a[:], ms:", _measure(lambda a=a: a[:], args.rounds, nat), flush=True)
        finally:
            srv.close()


if __name__ == "__main__":
    main()
