"""Running read plans: fetch waves, staging, decode and scatter, one window at a time.

Each selection is read in windows (:mod:`gdsstore.gpu.windows`): while window ``k`` is decoded and
placed in the output (:mod:`gdsstore.gpu.output`), window ``k + 1`` is being fetched. Two entry points,
one per kind of chunk storage:

- :func:`read_chunks`: whole chunk objects;
- :func:`gdsstore.gpu.read_shards.read_shards`: one batched read of the shard indexes, then the
  coalesced byte ranges of the inner chunks a selection touches.

Every pipeline call (reads and writes) runs through :func:`one_call`; a read through a store's own
``get`` through :func:`read_loaded`.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from zarr.abc.codec import GetResult
from zarr.core.chunk_utils import scatter_chunk

from gdsstore import policy
from gdsstore.engine.landing import Landed
from gdsstore.gpu import codecs as _codecs
from gdsstore.gpu import read_shards as _shards
from gdsstore.gpu.decode import CodecChain, decode_window, is_device_spec, raw_nbytes
from gdsstore.gpu.fetch import Fetcher, StoreFetcher
from gdsstore.gpu.memory import call_memory
from gdsstore.gpu.output import (
    decode_scatter,
    host_geometry,
    kernel_scatter_ok,
    numpy_output,
    output_device,
    output_layout,
    place_decoded,
    place_host,
)
from gdsstore.gpu.plan import ChunkGeometry, plan_chunk_geometry
from gdsstore.gpu.windows import read_windows, run_windows

if TYPE_CHECKING:
    from zarr.core.array_spec import ArraySpec
    from zarr.core.buffer import NDBuffer

    from gdsstore.gpu.pipeline import BatchItem

__all__ = ["collections_paused", "decode_side", "one_call", "read_chunks", "read_loaded"]


def one_call[T](fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)``, one pipeline call: Python's cyclic garbage collector paused for it
    (:func:`collections_paused`), and its device memory from :func:`gdsstore.gpu.memory.call_memory` when one
    of its arrays (the output, or a write's values) lives on the GPU: given back when it returns."""
    with collections_paused():
        if not any(_on_gpu(a) for a in args):
            return fn(*args)
        with call_memory():
            return fn(*args)


_gc_lock = threading.Lock()
_gc_held = [False]  # a call holds the pause (one at most)


@contextlib.contextmanager
def collections_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off while the block runs (``pause_gc``), where it was on and no
    other call holds the pause; back on when the call that paused it returns.

    Why: a read of thousands of chunks allocates tens of thousands of small objects (zarr's batch, the
    requests, the results) that live for the whole call, so the collector promotes them and runs full
    collections of the whole heap in the middle of it (a third of a read's time: docs/performance.md).
    Reference counting still frees everything at once; cycles made meanwhile are collected once the
    pause ends. A forked child never inherits a pause
    (:func:`_after_fork`)."""
    take = False
    if policy.settings().pause_gc:
        with _gc_lock:
            take = not _gc_held[0] and gc.isenabled()
            if take:
                _gc_held[0] = True
                gc.disable()
    try:
        yield
    finally:
        if take:
            with _gc_lock:
                _gc_held[0] = False
                gc.enable()


def _after_fork() -> None:
    """In a child forked during a paused call: that call's thread is not there to end the pause."""
    if _gc_held[0]:
        _gc_held[0] = False
        gc.enable()


os.register_at_fork(after_in_child=_after_fork)


def _on_gpu(arg: Any) -> bool:
    """Whether ``arg`` is a zarr buffer in device memory (the other arguments of a call are not buffers)."""
    return hasattr(arg, "as_ndarray_like") and _codecs.is_device_buffer(arg)


async def read_loaded(
    plan: str,
    codecs: Sequence[Any],
    batch: list[BatchItem],
    out: NDBuffer,
    drop_axes: tuple[int, ...],
    fetch: StoreFetcher,
) -> tuple[GetResult, ...]:
    """A read through a store's own ``get`` (:class:`~gdsstore.gpu.fetch.StoreFetcher`): each step's
    bytes are awaited on the event loop (whole chunks; or the shard indexes, then the inner chunks'
    ranges), and only then the step's CPU part runs in the loop's executor, so no thread of that
    executor waits for the loop. ``plan``: ``"chunks"`` or ``"shards"`` (``codecs[0]`` the sharding codec)."""
    if plan == "chunks":
        await fetch.load([(item[0], None) for item in batch])
        return await asyncio.to_thread(one_call, read_chunks, codecs, batch, out, drop_axes, fetch)
    sharding = codecs[0]
    await fetch.load(_shards.shard_index_reads(sharding, batch))

    def plan_it() -> _shards.ShardRead:
        tables = _shards.read_shard_indexes(sharding, batch, fetch)
        return _shards.plan_shard_read(sharding, batch, drop_axes, tables)

    sr = await asyncio.to_thread(plan_it)
    await fetch.load(sr.range_reads())
    return await asyncio.to_thread(one_call, _shards.run_shard_read, sharding, sr, batch, out, drop_axes, fetch)


# -- whole chunk objects ------------------------------------------------------------------------------------


def decode_side(chain: CodecChain, sizes: Sequence[int]) -> CodecChain:
    """``chain`` as it is, or to decode on the CPU (with the reason) for a device read of ``sizes`` decoded
    bytes per chunk: a small read (``gpu.host_decode_bytes``), or zstd chunks of which each nvCOMP call would
    decode fewer than ``gpu.host_decode_chunks`` (one call lasts about one chunk's decode); large ones of those
    (``gpu.split_decode_bytes``) by nvCOMP alone where it finishes before the host's threads could help
    (:func:`nvcomp_finishes_first`), else by the CPU and nvCOMP at once (:mod:`gdsstore.gpu.decode_split`)."""
    s = policy.settings()
    total = sum(sizes)
    if total <= s.gpu_host_decode_bytes:
        return chain.on_host(f"small read ({total >> 10} KiB, gpu.host_decode_bytes): decoded on the CPU")
    most = max(sizes, default=0)
    if chain.device_plan()[0] != "zstd" or not most or not s.gpu_host_decode_chunks:
        return chain
    per_call = max(len(w) for w in read_windows(sizes, chain, True, most))
    if per_call < s.gpu_host_decode_chunks:
        if s.gpu_split_decode_bytes and most >= s.gpu_split_decode_bytes:
            if nvcomp_finishes_first(per_call, most, s.num_threads):
                return chain
            return chain.split(
                f"few large chunks ({per_call} of {most >> 10} KiB per nvCOMP call, gpu.split_decode_bytes "
                f"{s.gpu_split_decode_bytes >> 10} KiB): split between the CPU and nvCOMP"
            )
        return chain.on_host(
            f"few chunks per nvCOMP call ({per_call} of {most >> 10} KiB under gpu.memory_budget, "
            f"gpu.host_decode_chunks {s.gpu_host_decode_chunks}): decoded on the CPU"
        )
    return chain


def nvcomp_finishes_first(chunks: int, chunk_bytes: int, threads: int) -> bool:
    """Whether nvCOMP alone decodes ``chunks`` zstd chunks of ``chunk_bytes`` (one frame each) before the host's
    ``threads`` could take any of them off it: the split's model (:func:`gdsstore.gpu.decode_split.device_share`)
    gives the device them all. Then the read stays on the device path (staged there, no pinned detour)."""
    from gdsstore.gpu import decode_split as ds

    frames = [np.array([chunk_bytes])] * chunks
    return ds.device_share(frames, [chunk_bytes] * chunks, threads) >= chunks


def read_chunks(
    codecs: Sequence[Any], batch: list[BatchItem], out: NDBuffer, drop_axes: tuple[int, ...], fetch: Fetcher
) -> tuple[GetResult, ...]:
    """Read whole chunk objects, window by window, and place them in ``out``."""
    chain = CodecChain.of(codecs)
    spec0 = batch[0][1]
    device = is_device_spec(spec0)
    scatter_ok = kernel_scatter_ok(batch, drop_axes)
    layout = chain.view_layout(spec0) if device and scatter_ok else None
    results: list[GetResult] = [GetResult(status="missing")] * len(batch)
    sizes = _raw_sizes(batch)
    if device and chain.bb_codecs:
        chain = decode_side(chain, sizes)
    windows = read_windows(sizes, chain, device, max(sizes, default=0))
    # Host outputs: chunks placed with numpy slicing instead of zarr's per-chunk buffer objects; chunks whose
    # decoded bytes view as the array (no per-chunk codec call), a run of alike chunks in one copy.
    host_out = None if device or not scatter_ok else numpy_output(out)
    host_view = chain.view_layout(spec0) if host_out is not None else None
    geometry: ChunkGeometry | None = None
    out_ptr = 0

    def plan_geometry() -> None:  # where each chunk's block lands in the output
        nonlocal geometry, out_ptr
        if host_out is not None:
            geometry = host_geometry(batch, host_out)
            return
        out_ptr, out_layout = output_layout(out)
        chunk_sels = [item[2] for item in batch]
        geometry = plan_chunk_geometry(chunk_sels, [spec0.shape] * len(batch), [item[3] for item in batch], out_layout)

    raw_sizes = _expected_sizes(chain, batch, sizes, fetch)
    on_gpu = output_device(out) if layout is not None and chain.device_staged() else None

    def read(w: range) -> Landed:
        # whole objects by key (no range per chunk to plan), where the fetcher has that way
        expect = None if raw_sizes is None else raw_sizes[w.start : w.stop]
        st = fetch.whole([batch[i][0].path for i in w], expect, device, on_gpu)
        if st is not None:
            return st
        return fetch([(batch[i][0], None) for i in w], device)

    def process(w: range, staged: Landed) -> None:
        if host_view is not None and host_out is not None:
            rows = None if geometry is None else geometry.rows(slice(w.start, w.stop))
            place_host(chain, batch, w, staged, host_view, rows, host_out, results)
            return
        specs = [batch[i][1] for i in w]
        names = [batch[i][0].path for i in w]  # errors name the chunk
        if geometry is not None and layout is not None:
            rows = geometry.rows(slice(w.start, w.stop))
            ptrs = decode_scatter(chain, specs, staged, layout, rows, out_ptr, names)
            for k in np.flatnonzero(ptrs).tolist():
                results[w[k]] = GetResult(status="present")
            return
        decoded = decode_window(chain, specs, staged, device, names)
        if host_out is not None:
            place_decoded(batch, w, decoded, host_out, results)
            return
        for k, i in enumerate(w):
            _, spec, chunk_sel, out_sel, _ = batch[i]
            arr = decoded[k]
            results[i] = scatter_chunk(
                None if arr is None else arr[chunk_sel],
                out,
                chunk_spec=spec,
                out_selection=out_sel,
                drop_axes=drop_axes,
            )

    # The geometry is planned while the first window is read (a thread hop of about 0.1 ms; 1,024 chunks plan in ~4)
    prepare = None if layout is None and host_view is None else plan_geometry
    run_windows(windows, read, process, Landed.release, prepare=prepare)
    return tuple(results)


def _expected_sizes(chain: CodecChain, batch: Sequence[BatchItem], sizes: list[int], fetch: Fetcher) -> np.ndarray | None:
    """Each chunk's stored size where the codecs fix it (no compressor, no variable-length values: no size
    lookups), else None; compressed chunks tell ``fetch`` their raw size (the first guess of their sizes)."""
    spec0 = batch[0][1]
    stored = chain.stored_nbytes(spec0)
    if chain.bb_codecs:
        fetch.chunk_bound = raw_nbytes(spec0)
    return None if stored is None else np.array(_stored_sizes(chain, batch, sizes, spec0, stored), np.int64)


def _raw_sizes(batch: Sequence[BatchItem]) -> list[int]:
    """Each chunk's decoded bytes; zarr hands a regular grid's chunks one spec, so computed once per spec."""
    specs = [item[1] for item in batch]
    if specs and specs.count(specs[0]) == len(specs):  # one spec (list.count compares identity first, in C)
        return [raw_nbytes(specs[0])] * len(specs)
    seen: dict[int, int] = {}
    sizes: list[int] = []
    for item in batch:
        spec = item[1]
        n = seen.get(id(spec))
        if n is None:
            n = seen[id(spec)] = raw_nbytes(spec)
        sizes.append(n)
    return sizes


def _stored_sizes(
    chain: CodecChain, batch: Sequence[BatchItem], sizes: list[int], spec0: ArraySpec, stored0: int
) -> list[int]:
    """Each chunk's stored size where the codecs fix it (``stored0`` for ``spec0``'s chunks): its raw
    size (``sizes``) under a ``bytes`` codec, else computed once per spec."""
    if stored0 == sizes[0]:
        return sizes
    seen: dict[int, int] = {id(spec0): stored0}
    for item in batch:
        if id(item[1]) not in seen:
            seen[id(item[1])] = chain.stored_nbytes(item[1]) or 0
    return [seen[id(item[1])] for item in batch]
