"""Running read plans: fetch waves, staging, decode and scatter, one window at a time.

Each selection is read in windows (:func:`gdsstore.gpu.plan.split_windows`): while window ``k`` is
decoded and scattered, window ``k + 1`` is being fetched (:func:`run_windows`). Two entry points, one
per kind of chunk storage:

- :func:`read_chunks`: whole chunk objects;
- :func:`read_shards`: one batched read of the shard indexes, then the coalesced byte ranges of the
  inner chunks a selection touches (:func:`gdsstore.gpu.plan.plan_shard_reads`).

Device outputs whose chunks decode to views (``bytes``/``transpose``) and whose selections are slices
are assembled by one scatter kernel launch per window; every other output by zarr's ``scatter_chunk``.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import gc
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Executor, Future
from typing import TYPE_CHECKING, Any

import numpy as np
from zarr.abc.codec import GetResult
from zarr.core.chunk_utils import fill_value_or_default, scatter_chunk

import gdsstore.trace as _trace
from gdsstore import policy
from gdsstore.engine.landing import Landed
from gdsstore.engine.pool import engine_pool
from gdsstore.engine.ranges import ByteRange
from gdsstore.gpu import codecs as _codecs
from gdsstore.gpu import decode as _decode
from gdsstore.gpu import nvcomp_capi
from gdsstore.gpu import plan as _plan
from gdsstore.gpu.decode import CodecChain, decode_window, device_pointer, is_device_spec, raw_nbytes
from gdsstore.gpu.fetch import Fetcher, StoreFetcher
from gdsstore.gpu.memory import call_memory, in_callers_allocator, trim_call_pool, window_budget
from gdsstore.gpu.plan import (
    Blocks,
    ChunkGeometry,
    InnerChunks,
    Layout,
    ShardReadPlan,
    chunk_blocks,
    inner_chunks_of_selection,
    inner_chunks_of_slices,
    is_slice_selection,
    plan_chunk_geometry,
    plan_shard_reads,
    shard_geometry,
    slice_arrays,
    split_windows,
)

if TYPE_CHECKING:
    from zarr.codecs.sharding import ShardingCodec
    from zarr.core.array_spec import ArraySpec
    from zarr.core.buffer import NDBuffer
    from zarr.core.indexing import SelectorTuple

__all__ = [
    "BatchItem", "ShardRead", "collections_paused", "one_call", "plan_shard_read", "read_chunks", "read_loaded",
    "read_shards", "read_windows", "run_shard_read", "run_windows", "shard_index_reads", "window_bytes",
]

#: One item of zarr's read batch: ``(byte getter, chunk spec, chunk selection, output selection, is complete)``.
BatchItem = tuple[Any, "ArraySpec", "SelectorTuple", "SelectorTuple", bool]


# -- windows --------------------------------------------------------------------------------------------


def window_bytes(chain: CodecChain, device: bool, chunk_bytes: int = 0, alone: bool = False) -> int:
    """Large windows where the GPU decodes or the bytes are staged on the GPU (each window's read
    starts with no copy to overlap); host staging keeps windows small enough to stay in cache, and a device
    read's chunks decoded on the CPU within ``gpu.memory_budget``.
    ``chunk_bytes``: the decoded size of the largest chunk (the decode scratch nvCOMP needs per decoded
    byte depends on it, :func:`gdsstore.gpu.nvcomp_capi.scratch_ratio`); ``alone``: the read's only window."""
    if not device:
        return _plan.WINDOW_BYTES
    fmt = chain.device_plan()[0]
    if fmt not in (None, "-") or chain.device_staged():
        free = 0
        cp = _codecs._cupy()
        if cp is not None:
            try:
                free = int(cp.cuda.runtime.memGetInfo()[0])
            except Exception:  # no usable device: the smallest large window
                free = 0
        budget = policy.settings().gpu_memory_budget
        limit = _plan.large_window(free, budget, scratch=nvcomp_capi.scratch_ratio(fmt, chunk_bytes), alone=alone)
        if limit < nvcomp_capi.EXACT_SCRATCH_BATCH:  # such a window decodes with the bound's scratch
            limit = _plan.large_window(free, budget, alone=alone)
        return limit
    # Decoded on the CPU: the window's decoded bytes are its device memory (staged on the host).
    return min(_plan.WINDOW_BYTES, window_budget(policy.settings().gpu_memory_budget, scratch=0.0))


def decode_side(chain: CodecChain, sizes: Sequence[int]) -> CodecChain:
    """``chain`` as it is, or to decode on the CPU (with the reason) for a device read of ``sizes`` decoded
    bytes per chunk: a small read (``gpu.host_decode_bytes``), or zstd chunks of which each nvCOMP call would
    decode fewer than ``gpu.host_decode_chunks`` (one call lasts about one chunk's decode); large ones of those
    (``gpu.split_decode_bytes``) by the CPU and nvCOMP at once (:mod:`gdsstore.gpu.decode_split`)."""
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
            return chain.split(
                f"few large chunks ({per_call} of {most >> 10} KiB per nvCOMP call, gpu.split_decode_bytes "
                f"{s.gpu_split_decode_bytes >> 10} KiB): split between the CPU and nvCOMP"
            )
        return chain.on_host(
            f"few chunks per nvCOMP call ({per_call} of {most >> 10} KiB under gpu.memory_budget, "
            f"gpu.host_decode_chunks {s.gpu_host_decode_chunks}): decoded on the CPU"
        )
    return chain


def read_windows(sizes: Sequence[int], chain: CodecChain, device: bool, chunk_bytes: int) -> list[range]:
    """The windows of a read of items of ``sizes`` decoded bytes (chunks of ``chunk_bytes``): one where the
    whole read fits the budget with nothing staged beside it, else :func:`gdsstore.gpu.plan.split_windows`
    under :func:`window_bytes`."""
    most = chunk_bytes
    limit = window_bytes(chain, device, most)
    if device and limit < sum(sizes) <= window_bytes(chain, device, most, alone=True):
        return [range(len(sizes))]
    return split_windows(sizes, limit)


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
    collections of the whole heap in the middle of it: on the H200, one every second read of 4,096 chunks,
    41-58 ms each, a third of the read. Reference counting still frees everything at once; cycles made
    meanwhile are collected once the pause ends. A forked child never inherits a pause
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


def run_windows[W, T](
    windows: Sequence[W],
    read: Callable[[W], T],
    process: Callable[[W, T], None],
    release: Callable[[T], None],
    pool: Executor | None = None,
    prepare: Callable[[], None] | None = None,
) -> None:
    """Run ``process`` on each window while the next window's ``read`` runs in the background (``pool``, the
    engine's by default: one read ahead; a single window is read on the calling thread, unless ``prepare``,
    work of the calling thread that needs no window's bytes, runs meanwhile). Each window read is given back
    with ``release`` once processed, or when a failure stops the loop before it is (the one read ahead
    included): a failed read never keeps pinned staging."""
    if not windows:
        if prepare is not None:
            prepare()
        return
    ahead = engine_pool() if pool is None else pool
    read_there = in_callers_allocator(read)  # the window's device staging comes from the call's memory
    aside = len(windows) > 1 or prepare is not None
    nxt: Future[T] | None = ahead.submit(read_there, windows[0]) if aside else None
    try:
        if prepare is not None:
            prepare()
        for k, w in enumerate(windows):
            cur = read(w) if nxt is None else nxt.result()
            nxt = ahead.submit(read_there, windows[k + 1]) if k + 1 < len(windows) else None
            try:
                process(w, cur)
            finally:
                release(cur)
            if nxt is not None:
                trim_call_pool()  # the next window's memory from the device, not beside idle blocks
    finally:
        if nxt is not None:
            with contextlib.suppress(BaseException):  # the first failure is the one raised
                release(nxt.result())


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
    await fetch.load(shard_index_reads(sharding, batch))

    def plan_it() -> ShardRead:
        return plan_shard_read(sharding, batch, drop_axes, read_shard_indexes(sharding, batch, fetch))

    sr = await asyncio.to_thread(plan_it)
    await fetch.load(sr.range_reads())
    return await asyncio.to_thread(one_call, run_shard_read, sharding, sr, batch, out, drop_axes, fetch)


# -- output and scatter -----------------------------------------------------------------------------------


def output_layout(out: NDBuffer) -> tuple[int, Layout]:
    """The output's first byte and its strided layout."""
    a: Any = out.as_ndarray_like()
    return device_pointer(a), (tuple(a.shape), tuple(a.strides))


def output_device(out: NDBuffer) -> int | None:
    """The GPU ordinal of a device output (``None`` for host memory)."""
    a: Any = out.as_ndarray_like()
    dev = getattr(a, "device", None)
    return int(dev.id) if hasattr(a, "__cuda_array_interface__") and dev is not None else None


def sync() -> None:
    _codecs._cupy().cuda.get_current_stream().synchronize()


def scatter(blocks: Blocks, itemsize: int, fill: bytes) -> str:
    """Copy the blocks on the current stream; returns the route: ``"gpu-copy"`` (few blocks, each a
    ``cudaMemcpy2DAsync``: no kernel to compile or load, :func:`~gdsstore.gpu.plan.copies_2d`) or
    ``"gpu-kernel"`` (one scatter launch)."""
    from gdsstore.gpu.kernels import scatter_arrays

    copies = _plan.copies_2d(blocks, itemsize)
    if copies is not None and _copy_2d(copies):
        return "gpu-copy"
    scatter_arrays(*blocks, itemsize=itemsize, fill=fill)
    return "gpu-kernel"


def _copy_2d(copies: np.ndarray) -> bool:
    """Issue the 2-D copies; ``False`` when the runtime refused one (the kernel then copies every block
    again: the same bytes to the same places)."""
    cp = _codecs._cupy()
    rt = cp.cuda.runtime
    stream = cp.cuda.get_current_stream().ptr
    try:
        for dst, dpitch, src, spitch, width, height in copies.tolist():
            rt.memcpy2DAsync(dst, dpitch, src, spitch, width, height, rt.memcpyDeviceToDevice, stream)
    except Exception:
        return False
    return True


def fill_bytes(spec: ArraySpec) -> bytes:
    """The fill value of ``spec`` as the bytes of one element."""
    return np.asarray(fill_value_or_default(spec), dtype=spec.dtype.to_native_dtype()).tobytes()


def kernel_scatter_ok(batch: Sequence[BatchItem], drop_axes: tuple[int, ...]) -> bool:
    """Whether a batch's selections fit the scatter kernel: slices only, no dropped axis, <= 8 axes."""
    if drop_axes or not batch:
        return False
    for _, _, chunk_sel, out_sel, _ in batch:
        if not is_slice_selection(chunk_sel) or not is_slice_selection(out_sel):
            return False
    return len(batch[0][1].shape) <= 8


def decode_scatter(
    chain: CodecChain,
    specs: list[ArraySpec],
    staged: Landed,
    layout: Layout,
    geometry: ChunkGeometry,
    out_ptr: int,
    t0: float,
    names: Sequence[str] | None = None,
) -> np.ndarray:
    """One window of a kernel-scattered read: decode its chunks on the device, then copy every
    chunk's block into the output in one launch (waited for: the window's buffers are freed next;
    traced). Returns the decoded chunks' device pointers, 0 for a missing chunk (presence only)."""
    raw = _decode.decode_on_device(chain, specs, staged, names)
    ptrs = raw.ptrs()
    itemsize = specs[0].dtype.to_native_dtype().itemsize
    route = scatter(chunk_blocks(ptrs, layout, geometry, out_ptr), itemsize, fill_bytes(specs[0]))
    sync()
    nbytes = sum(raw_nbytes(sp) for sp in specs)
    why = "one launch per window" if route == "gpu-kernel" else "few blocks: 2-D copies, no kernel"
    _trace.record("scatter", route, why, nbytes, time.perf_counter() - t0)
    return ptrs


# -- whole chunk objects ------------------------------------------------------------------------------------


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
    geometry: ChunkGeometry | None = None
    out_ptr = 0

    def plan_geometry() -> None:  # where each chunk's block lands in the output
        nonlocal geometry, out_ptr
        out_ptr, out_layout = output_layout(out)
        chunk_sels = [item[2] for item in batch]
        geometry = plan_chunk_geometry(chunk_sels, [spec0.shape] * len(batch), [item[3] for item in batch], out_layout)

    # Where the codecs fix a stored chunk's size (no compressor, no variable-length values): no size lookups.
    stored = chain.stored_nbytes(spec0)
    raw_sizes = None if stored is None else np.array(_stored_sizes(chain, batch, sizes, spec0, stored), np.int64)
    if chain.bb_codecs:
        fetch.chunk_bound = raw_nbytes(spec0)
    on_gpu = output_device(out) if layout is not None and chain.device_staged() else None
    # Host outputs: chunks placed with numpy slicing instead of zarr's per-chunk buffer objects, and
    # uncompressed chunks as views of the staging buffer (no per-chunk codec call).
    host_out = None if device or not scatter_ok else _numpy_output(out)
    host_view = chain.view_layout(spec0) if host_out is not None and not chain.bb_codecs else None

    def read(w: range) -> Landed:
        if raw_sizes is not None or on_gpu is not None:
            expect = None if raw_sizes is None else raw_sizes[w.start : w.stop]
            st = fetch.whole([batch[i][0].path for i in w], expect, device, on_gpu)
            if st is not None:
                return st
        return fetch([(batch[i][0], None) for i in w], device)

    def process(w: range, staged: Landed) -> None:
        specs = [batch[i][1] for i in w]
        names = [batch[i][0].path for i in w]  # errors name the chunk
        if geometry is not None and layout is not None:
            rows = geometry.rows(slice(w.start, w.stop))
            ptrs = decode_scatter(chain, specs, staged, layout, rows, out_ptr, time.perf_counter(), names)
            for k in np.flatnonzero(ptrs).tolist():
                results[w[k]] = GetResult(status="present")
            return
        if host_view is not None and host_out is not None:
            _place_views(batch, w, staged, host_view, host_out, results)
            return
        decoded = decode_window(chain, specs, staged, device, names)
        if host_out is not None:
            _place_decoded(batch, w, decoded, host_out, results)
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
    run_windows(windows, read, process, Landed.release, prepare=None if layout is None else plan_geometry)
    return tuple(results)


def _raw_sizes(batch: Sequence[BatchItem]) -> list[int]:
    """Each chunk's decoded bytes; zarr hands a regular grid's chunks one spec, so computed once per spec."""
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


def _numpy_output(out: NDBuffer) -> np.ndarray | None:
    """The output as a numpy array, or ``None`` where it is another kind of array."""
    a = out.as_ndarray_like()
    return a if isinstance(a, np.ndarray) else None


def _place_views(
    batch: list[BatchItem], w: range, staged: Landed, layout: Layout, out: np.ndarray,
    results: list[GetResult],
) -> None:
    """Uncompressed chunks of a host window into ``out``: each a strided view of its staged bytes
    (``layout``: the bytes codec in native order, then transposes), missing ones the fill value.

    Raises:
        ValueError: a stored chunk of another size than its codecs produce, naming its key.
    """
    shape, strides = layout
    dt = batch[w.start][1].dtype.to_native_dtype()
    want = int(np.prod(shape)) * dt.itemsize
    for k, i in enumerate(w):
        getter, spec, chunk_sel, out_sel, _ = batch[i]
        raw = staged.view(k)
        if raw is None:
            out[out_sel] = fill_value_or_default(spec)
            continue
        if raw.nbytes != want:
            raise ValueError(
                f"GDSCodecPipeline.read(): chunk {getattr(getter, 'path', i)!r} is {raw.nbytes} bytes, not the "
                f"{want} bytes its codecs produce"
            )
        # np.ndarray over the bytes: ~1 us, where np.lib.stride_tricks.as_strided took ~18 (its checks)
        chunk = np.ndarray(shape, dtype=dt, buffer=raw, strides=strides)
        out[out_sel] = chunk[chunk_sel]
        results[i] = GetResult(status="present")


def _place_decoded(
    batch: list[BatchItem], w: range, decoded: list[NDBuffer | None], out: np.ndarray, results: list[GetResult]
) -> None:
    """Decoded chunks of a host window into ``out`` with numpy slicing, missing ones the fill value."""
    for k, i in enumerate(w):
        _, spec, chunk_sel, out_sel, _ = batch[i]
        arr = decoded[k]
        if arr is None:
            out[out_sel] = fill_value_or_default(spec)
            continue
        out[out_sel] = np.asarray(arr.as_ndarray_like())[chunk_sel]
        results[i] = GetResult(status="present")


# -- shards -------------------------------------------------------------------------------------------------


def inner_chunk_spec(codec: ShardingCodec, shard_spec: ArraySpec) -> ArraySpec:
    """The spec of an inner chunk of a shard of ``shard_spec``."""
    from zarr.core.array_spec import ArraySpec

    return ArraySpec(
        shape=tuple(codec.chunk_shape),
        dtype=shard_spec.dtype,
        fill_value=shard_spec.fill_value,
        config=shard_spec.config,
        prototype=shard_spec.prototype,
    )


def shard_index_reads(codec: ShardingCodec, batch: list[BatchItem]) -> list[tuple[Any, ByteRange | None]]:
    """The read of each shard's index: ``(byte getter, byte range)`` per batch item."""
    from zarr.abc.store import RangeByteRequest

    ranges: dict[tuple[int, ...], ByteRange] = {}
    items: list[tuple[Any, ByteRange | None]] = []
    for item in batch:
        chunks_per_shard = _chunks_per_shard(codec, item)
        br = ranges.get(chunks_per_shard)
        if br is None:
            # private: the index's size and place follow its codecs, which zarr exposes through no public call
            req = codec._shard_index_byte_range(chunks_per_shard)
            br = ranges[chunks_per_shard] = (
                ByteRange("range", req.start, req.end)
                if isinstance(req, RangeByteRequest)
                else ByteRange("suffix", req.suffix)
            )
        items.append((item[0], br))
    return items


def _chunks_per_shard(codec: ShardingCodec, item: BatchItem) -> tuple[int, ...]:
    return tuple(s // c for s, c in zip(item[1].shape, codec.chunk_shape))


def read_shard_indexes(
    codec: ShardingCodec, batch: list[BatchItem], fetch: Fetcher
) -> list[np.ndarray | None]:
    """Every shard's index table (``offsets_and_lengths``; ``None`` for a missing shard) in one batched read."""
    from zarr.core.buffer.cpu import Buffer as CPUBuffer

    staged = fetch(shard_index_reads(codec, batch), False)
    try:
        tables: list[np.ndarray | None] = []
        for i, item in enumerate(batch):
            view = staged.view(i)
            if view is None:
                tables.append(None)
                continue
            # private: decoding an index (its codecs, its size check) has no public zarr call
            index = codec._decode_shard_index_sync(
                CPUBuffer.from_array_like(view.copy()), _chunks_per_shard(codec, item)
            )
            tables.append(index.offsets_and_lengths)
    finally:
        staged.release()
    return tables


def _members(plan: ShardReadPlan, w: range, staged: Landed) -> tuple[Landed, np.ndarray]:
    """The inner chunks of the reads ``w`` as items of their window's staging buffer, and their member ids."""
    lo, hi = int(plan.bounds[w.start]), int(plan.bounds[w.stop])
    local = plan.read[lo:hi] - w.start
    base_sizes = staged.sizes[local]
    sub = staged.sub(
        staged.offsets[local] + plan.offset[lo:hi], np.where(base_sizes < 0, -1, plan.nbytes[lo:hi])
    )
    return sub, np.arange(lo, hi, dtype=np.int64)


@dataclasses.dataclass
class ShardRead:
    """A planned read of a batch of shards: the inner chunks it touches, the coalesced byte ranges
    that hold them (:func:`gdsstore.gpu.plan.plan_shard_reads`) and how they are decoded and placed."""

    tables: list[np.ndarray | None]
    shards: list[InnerChunks | None]
    plan: ShardReadPlan
    chain: CodecChain
    inner_spec: ArraySpec
    layout: Layout | None  # set: device output, placed by the scatter kernel
    getters: list[Any]  # the byte getter of each coalesced read

    def range_reads(self) -> list[tuple[Any, ByteRange]]:
        """Every coalesced read as ``(byte getter, byte range)``."""
        starts, stops = self.plan.read_start.tolist(), self.plan.read_stop.tolist()
        return [(g, ByteRange("range", a, b)) for g, a, b in zip(self.getters, starts, stops)]


def plan_shard_read(
    codec: ShardingCodec, batch: list[BatchItem], drop_axes: tuple[int, ...], tables: list[np.ndarray | None]
) -> ShardRead:
    """Plan the inner-chunk reads of ``batch`` from its shards' index ``tables``."""
    spec0 = batch[0][1]
    device = is_device_spec(spec0)
    # private: the inner codecs evolved for the inner chunk spec; zarr has no public accessor
    chain = CodecChain.of(codec._get_inner_chunk_transform(spec0).codecs)
    inner_spec = inner_chunk_spec(codec, spec0)
    layout = chain.view_layout(inner_spec) if device and kernel_scatter_ok(batch, drop_axes) else None
    shards: list[InnerChunks | None]
    if layout is not None:
        start, count, step = slice_arrays([item[2] for item in batch], [item[1].shape for item in batch])
        shards = [
            inner_chunks_of_slices(start[i], count[i], step[i], codec.chunk_shape) for i in range(len(batch))
        ]
    else:
        shards = [
            None if table is None else inner_chunks_of_selection(item[2], item[1].shape, codec.chunk_shape)
            for item, table in zip(batch, tables)
        ]
    config = spec0.config
    plan = plan_shard_reads(
        shards, tables, config.sharding_coalesce_max_gap_bytes, config.sharding_coalesce_max_bytes
    )
    getters = [batch[i][0] for i in plan.read_item.tolist()]
    return ShardRead(tables, shards, plan, chain, inner_spec, layout, getters)


def read_shards(
    codec: ShardingCodec, batch: list[BatchItem], out: NDBuffer, drop_axes: tuple[int, ...], fetch: Fetcher
) -> tuple[GetResult, ...]:
    """Read the inner chunks a selection touches in each shard, coalesced into few reads per shard,
    decode them window by window, and place them in ``out``."""
    tables = read_shard_indexes(codec, batch, fetch)
    return run_shard_read(codec, plan_shard_read(codec, batch, drop_axes, tables), batch, out, drop_axes, fetch)


def run_shard_read(
    codec: ShardingCodec,
    sr: ShardRead,
    batch: list[BatchItem],
    out: NDBuffer,
    drop_axes: tuple[int, ...],
    fetch: Fetcher,
) -> tuple[GetResult, ...]:
    """Fetch, decode and place the inner chunks of a planned shard read, window by window."""
    device = is_device_spec(batch[0][1])
    plan = sr.plan
    member = raw_nbytes(sr.inner_spec)
    windows = read_windows(plan.window_nbytes(member), sr.chain, device, member)
    on_gpu = output_device(out) if sr.layout is not None and sr.chain.device_staged() else None

    def read(w: range) -> Landed:
        sl = slice(w.start, w.stop)
        return fetch.ranges(sr.getters[sl], plan.read_start[sl], plan.read_stop[sl], device, on_gpu)

    if sr.layout is not None:
        _scatter_shards(plan, sr.shards, sr.chain, sr.inner_spec, sr.layout, batch, out, windows, read)
    else:
        _assemble_shards(codec, plan, sr.shards, sr.chain, batch, out, drop_axes, windows, read, device)
    return tuple(GetResult(status="missing" if t is None else "present") for t in sr.tables)


def _scatter_shards(
    plan: ShardReadPlan,
    shards: list[InnerChunks | None],
    chain: CodecChain,
    inner_spec: ArraySpec,
    layout: Layout,
    batch: list[BatchItem],
    out: NDBuffer,
    windows: list[range],
    read: Callable[[range], Landed],
) -> None:
    """Device outputs: fills first, then per window one decode and one scatter launch."""
    out_ptr, out_layout = output_layout(out)
    geometry, fills = shard_geometry(shards, plan, [item[3] for item in batch], out_layout)
    if fills is not None:
        itemsize = inner_spec.dtype.to_native_dtype().itemsize
        scatter((fills[0], fills[1] + out_ptr, *fills[2:]), itemsize, fill_bytes(inner_spec))

    def process(w: range, staged: Landed) -> None:
        t0 = time.perf_counter()
        sub, ids = _members(plan, w, staged)
        decode_scatter(chain, [inner_spec] * len(ids), sub, layout, geometry.rows(ids), out_ptr, t0)

    run_windows(windows, read, process, Landed.release)
    sync()


def _assemble_shards(
    codec: ShardingCodec,
    plan: ShardReadPlan,
    shards: list[InnerChunks | None],
    chain: CodecChain,
    batch: list[BatchItem],
    out: NDBuffer,
    drop_axes: tuple[int, ...],
    windows: list[range],
    read: Callable[[range], Landed],
    device: bool,
) -> None:
    """Any output: decode every window to zarr buffers, then assemble each shard's selection with
    zarr's ``scatter_chunk`` and copy it into the output."""
    inner_specs: dict[int, ArraySpec] = {}  # inner specs follow each shard's spec (prototype, fill value)

    def inner_spec_of(spec: ArraySpec) -> ArraySpec:
        if id(spec) not in inner_specs:
            inner_specs[id(spec)] = inner_chunk_spec(codec, spec)
        return inner_specs[id(spec)]

    member_specs = [inner_spec_of(batch[i][1]) for i in plan.item.tolist()]
    decoded: list[NDBuffer | None] = [None] * len(plan.item)

    def process(w: range, staged: Landed) -> None:
        sub, ids = _members(plan, w, staged)
        res = decode_window(chain, [member_specs[k] for k in ids.tolist()], sub, device)
        for k, arr in zip(ids.tolist(), res):
            decoded[k] = arr

    run_windows(windows, read, process, Landed.release)
    for i, (_, spec, _, out_sel, _) in enumerate(batch):
        inner, mine = shards[i], plan.member_of[i]
        if inner is None or mine is None or inner.selectors is None:
            out[out_sel] = fill_value_or_default(spec)
            continue
        inner_spec = inner_spec_of(spec)
        tmp = spec.prototype.nd_buffer.empty(
            shape=inner.out_shape, dtype=spec.dtype.to_native_dtype(), order=spec.order
        )
        for (chunk_sel, sel_out), member in zip(inner.selectors, mine.tolist()):
            arr = None if member < 0 else decoded[member]
            scatter_chunk(
                None if arr is None else arr[chunk_sel],
                tmp,
                chunk_spec=inner_spec,
                out_selection=sel_out,
                drop_axes=(),
            )
        if inner.sel_shape is not None:
            tmp = tmp.reshape(inner.sel_shape)
        if drop_axes:
            tmp = tmp.squeeze(axis=drop_axes)
        out[out_sel] = tmp
