"""The executor of the pipeline's write path: merge, encode as one batch, publish many objects at once.

:meth:`GDSCodecPipeline.write <gdsstore.gpu.pipeline.GDSCodecPipeline.write>` hands its whole batch
to :func:`write`, which

1. reads the old contents of every chunk the selection covers only in part, as one batched read
   through the pipeline's own read path (read-modify-write); for shards written in part, fetches
   the stored shards in one parallel batch through the engine and keeps the inner chunks the write
   does not touch as they are stored (zarr's partial shard encode does the same);
2. merges the new values in (zarr's ``_merge_chunk_array``) and drops chunks that end up all fill
   value when ``write_empty_chunks`` is off (zarr's ``chunk_is_empty`` rule: they are deleted);
3. encodes the chunks — for sharded arrays, every inner chunk of every shard — as one batch:
   device chunks whose bytes-to-bytes stage nvCOMP writes (zstd, lz4; crc32c by a GPU kernel) in
   one nvCOMP call, then one device-to-host copy into one pinned buffer; everything else with the
   codecs' own synchronous encode, in parallel on the engine's thread pool;
4. assembles each shard once (its chunks in zarr's write order, then its index, laid out by
   :func:`gdsstore.gpu.write_plan.shard_layout`);
5. publishes all objects in parallel through the store's engine backend (``put``: temporary file +
   rename locally, PUT/multipart on S3, CREATE on WebHDFS — each object atomic) and deletes the
   empty ones. Host chunks are checked, encoded and put by one pool task each (their bytes are
   still in cache when written); on the device route a window's publish runs while the next window
   encodes (windows of :data:`WRITE_WINDOW_BYTES`).

Batches it cannot take go to zarr's own pipeline, and the trace says why (``write-plan`` /
``zarr-pipeline`` / reason). Each batch records one ``encode`` row per route and one ``write`` row
(``batch-put``), sizes in the columns.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

import gdsstore.trace as _trace
from gdsstore import policy
from gdsstore.engine.backend import Backend
from gdsstore.engine.pool import engine_pool, map_all
from gdsstore.gpu import write_plan
from gdsstore.gpu.decode import raw_nbytes
from gdsstore.gpu.fetch import backend_of
from gdsstore.gpu.memory import in_callers_allocator
from gdsstore.gpu.plan import large_window, split_windows
from gdsstore.gpu.write_gpu import Encoded

if TYPE_CHECKING:
    from zarr.codecs.sharding import ShardingCodec
    from zarr.core.array_spec import ArraySpec
    from zarr.core.buffer import NDBuffer
    from zarr.core.indexing import SelectorTuple

__all__ = ["WRITE_DEVICE_WINDOW_BYTES", "WRITE_WINDOW_BYTES", "encode_device_or_elide", "write", "write_route"]

WriteItem = tuple[Any, "ArraySpec", "SelectorTuple", "SelectorTuple", bool]

#: Raw (decoded) bytes encoded and published per window: bounds the memory a batch holds at once.
WRITE_WINDOW_BYTES = 256 << 20
#: Window of the device route: nvCOMP's batched zstd encode ran 1.9 GB/s with 64 chunks of 4 MiB per
#: call and 5.8 GB/s with 256 on the H200 (benchmarks/results), so a device window is larger,
#: bounded by a quarter of the free device memory.
WRITE_DEVICE_WINDOW_BYTES = 1 << 30

def write_route(delegate: Any, batch: Sequence[WriteItem]) -> tuple[str, str]:
    """``(route, reason)`` for a write batch: ``"chunks"``, ``"shards"`` or ``"delegate"`` (zarr's
    own pipeline), from the codecs (``delegate``: zarr's ``FusedCodecPipeline``) and the byte setters.
    """
    from zarr.codecs.sharding import ShardingCodec
    from zarr.storage._common import StorePath

    bs = batch[0][0]
    if not isinstance(bs, StorePath):
        return "delegate", f"byte setter {type(bs).__name__} is not a store path"
    backend = backend_of(bs)
    if backend is None:
        return "delegate", f"store {type(bs.store).__name__} has no gdsstore engine backend"
    if any(backend_of(item[0]) is not backend for item in batch):
        return "delegate", "byte setters on more than one store"
    if bs.store.read_only or not backend.writable:
        return "delegate", "store not writable (zarr's pipeline raises the error)"
    if delegate.sync_transform is None:
        return "delegate", "a codec has no synchronous encode"
    if any(len(item[1].shape) == 0 for item in batch):
        return "delegate", "0-d array"
    ab = delegate.array_bytes_codec
    if isinstance(ab, ShardingCodec):
        if delegate.array_array_codecs or delegate.bytes_bytes_codecs:
            return "delegate", "codecs outside the sharding codec"
        if any(isinstance(c, ShardingCodec) for c in ab.codecs):
            return "delegate", "nested sharding"
        return "shards", "sharded: inner chunks encoded as one batch, each shard written once"
    return "chunks", "chunks encoded as one batch, published in parallel"


async def write(pipeline: Any, batch_info: Any, value: NDBuffer, drop_axes: tuple[int, ...] = ()) -> None:
    """Write ``value`` into the chunks of ``batch_info`` (zarr's ``CodecPipeline.write`` contract).

    Args:
        pipeline: the :class:`~gdsstore.gpu.pipeline.GDSCodecPipeline` (its ``delegate`` is zarr's
            ``FusedCodecPipeline``; its ``read`` fetches old contents).
        batch_info: ``(byte setter, chunk spec, chunk selection, value selection, is complete)``.
        value: the values, host or device.
        drop_axes: axes of the chunk selection that ``value`` does not have.
    """
    batch: list[WriteItem] = list(batch_info)
    if not batch:
        return
    route, reason = write_route(pipeline.delegate, batch)
    if route == "delegate":
        _trace.record("write-plan", "zarr-pipeline", reason, 0, 0.0)
        await pipeline.delegate.write(batch, value, drop_axes)
        return
    t0 = time.perf_counter()
    # Chunks written in part: their old contents, decoded, from one batched read. Shards: the stored
    # shards are fetched by the executor, which keeps the inner chunks this write does not touch.
    old = await _read_old(pipeline, batch) if route == "chunks" else {}
    backend = backend_of(batch[0][0])
    assert backend is not None
    from gdsstore.gpu.execute import one_call

    await asyncio.to_thread(one_call, _execute, pipeline.delegate, route, batch, value, drop_axes, backend, old)
    _trace.record("write-plan", route, reason, _raw_total(batch), time.perf_counter() - t0)


def _raw_total(batch: Sequence[WriteItem]) -> int:
    return sum(raw_nbytes(item[1]) for item in batch)


async def _read_old(pipeline: Any, batch: list[WriteItem]) -> dict[int, NDBuffer]:
    """The decoded old contents of the items written in part, through the pipeline's batched read:
    one read per chunk shape, into one buffer of the chunks stacked along the first axis."""
    groups = write_plan.partial_items([it[4] for it in batch], [tuple(it[1].shape) for it in batch])
    old: dict[int, NDBuffer] = {}
    for shape, idx in groups.items():
        spec0 = batch[idx[0]][1]
        out = spec0.prototype.nd_buffer.empty(
            shape=(len(idx) * shape[0], *shape[1:]), dtype=spec0.dtype.to_native_dtype(), order=spec0.order
        )
        whole = tuple(slice(0, n) for n in shape)
        sels = [write_plan.stacked_selection(k, shape) for k in range(len(idx))]
        await pipeline.read([(batch[i][0], batch[i][1], whole, sel, True) for i, sel in zip(idx, sels)], out, ())
        for i, sel in zip(idx, sels):
            old[i] = out[sel]
    return old


def _merged(batch: list[WriteItem], value: NDBuffer, drop_axes: tuple[int, ...], old: dict[int, NDBuffer]) -> list[Any]:
    """Each item's new full contents (views of ``value`` where a chunk is written whole)."""
    from zarr.core.chunk_utils import _merge_chunk_array

    return [
        _merge_chunk_array(old.get(i), value, out_sel, spec, chunk_sel, complete, drop_axes)
        for i, (_, spec, chunk_sel, out_sel, complete) in enumerate(batch)
    ]


def _on_device(value: NDBuffer, old: dict[int, NDBuffer]) -> bool:
    """Whether the chunks are on the GPU (device route) or on the host."""
    from gdsstore.gpu.codecs import is_device_buffer

    return is_device_buffer(value) or any(is_device_buffer(o) for o in old.values())


def _window_bytes(device: bool) -> int:
    """How many raw bytes one window encodes: :data:`WRITE_WINDOW_BYTES` on the host,
    :data:`WRITE_DEVICE_WINDOW_BYTES` on the GPU, at most a quarter of the free device memory and the
    window's share of ``gpu.memory_budget``."""
    from gdsstore.engine import cuda

    if not device or not cuda.gpu_available():
        return WRITE_WINDOW_BYTES
    from gdsstore.gpu.memory import device_free_bytes

    budget = policy.settings().gpu_memory_budget
    return large_window(device_free_bytes(), budget, floor=WRITE_WINDOW_BYTES, ceiling=WRITE_DEVICE_WINDOW_BYTES)


def _execute(
    delegate: Any,
    route: str,
    batch: list[WriteItem],
    value: NDBuffer,
    drop_axes: tuple[int, ...],
    backend: Backend,
    old: dict[int, NDBuffer],
) -> None:
    device = _on_device(value, old)
    windows = split_windows([raw_nbytes(item[1]) for item in batch], _window_bytes(device))
    pending: Future[None] | None = None  # the previous window's publish, overlapping this one's encode
    try:
        for w in windows:
            part = [batch[i] for i in w]
            if route == "chunks":
                arrays = _merged(part, value, drop_axes, {i - w.start: old[i] for i in w if i in old})
                job = _write_chunks(delegate.sync_transform, part, arrays, backend, device)
            else:
                job = _write_shards(delegate.array_bytes_codec, part, value, backend, device)
            if pending is not None:
                pending.result()
                pending = None
            if job is not None:
                pending = engine_pool().submit(in_callers_allocator(job))
    finally:
        if pending is not None:
            pending.result()


# -- encoding ------------------------------------------------------------------------------------------


def _zero_fill(spec: ArraySpec) -> bool:
    """Whether the fill value's bit pattern is all zero bytes for a plain numeric dtype."""
    from zarr.core.chunk_utils import fill_value_or_default

    dt = spec.dtype.to_native_dtype()
    if dt.kind not in "biuf" or dt.itemsize not in (1, 2, 4, 8):
        return False
    fill = np.asarray(fill_value_or_default(spec), dtype=dt)
    return not fill.view(f"u{dt.itemsize}").any()


def is_empty(array: Any, spec: ArraySpec) -> bool:
    """zarr's ``chunk_is_empty`` (all fill value and ``write_empty_chunks`` off), without its
    full-size temporaries when the fill value is all zero bits: then "empty" is "no non-zero word"."""
    from zarr.core.chunk_utils import chunk_is_empty

    if spec.config.write_empty_chunks:
        return False
    if _zero_fill(spec):
        data = array.as_ndarray_like()
        return not bool(data.view(f"u{data.dtype.itemsize}").any())
    return chunk_is_empty(array, spec)


def _all_zero(buf: Any) -> bool:
    """Whether every byte of a host ``Buffer`` is zero (read as 8-byte words where aligned)."""
    data = np.asarray(buf.as_numpy_array()).view(np.uint8).reshape(-1)
    n8 = data.size // 8 * 8 if data.ctypes.data % 8 == 0 else 0
    return not (data[:n8].view(np.uint64).any() or data[n8:].any())


def encode_or_elide(transform: Any, array: Any, spec: ArraySpec) -> Any:
    """zarr's ``encode_or_elide_chunk`` for one host chunk: ``None`` when the chunk is empty (see
    :func:`is_empty`), else its encoded bytes. With an all-zero fill value and a ``bytes`` codec, the
    emptiness check runs on the contiguous bytes that codec made anyway, instead of on the strided view
    (other array-to-bytes codecs, such as a zarr v2 chunk's with its compressor, do not make raw bytes)."""
    from zarr.codecs import BytesCodec

    if spec.config.write_empty_chunks or not _zero_fill(spec) or not isinstance(transform._ab_codec, BytesCodec):
        return None if is_empty(array, spec) else transform.encode_chunk(array, spec)
    aa_specs, ab_spec = transform._resolve_specs(spec)
    data = array
    for codec, aa_spec in zip(transform._aa_codecs, aa_specs, strict=True):
        data = codec._encode_sync(data, aa_spec)
        if data is None:
            return None
    raw = transform._ab_codec._encode_sync(data, ab_spec)
    if raw is None or _all_zero(raw):
        return None
    for codec in transform._bb_codecs:
        raw = codec._encode_sync(raw, ab_spec)
        if raw is None:
            return None
    return raw


def _empty_flags(arrays: Sequence[Any], specs: Sequence[ArraySpec]) -> list[bool]:
    """:func:`is_empty` of each chunk; device chunks are checked with one reduction each and a single
    device-to-host copy of all the answers (no sync per chunk)."""
    from gdsstore.gpu.codecs import is_device_buffer

    if not arrays or any(s.config.write_empty_chunks for s in specs):
        return [False] * len(arrays)
    if is_device_buffer(arrays[0]):
        from gdsstore.engine import cuda

        cp = cuda.cupy_or_none()
        assert cp is not None
        flags = cp.stack([_device_all_fill(cp, a.as_ndarray_like(), s) for a, s in zip(arrays, specs)])
        return [bool(x) for x in flags.get().tolist()]
    return [is_empty(a, s) for a, s in zip(arrays, specs)]


def _device_all_fill(cp: Any, data: Any, spec: ArraySpec) -> Any:
    """A device scalar: whether every element of ``data`` is the fill value (NaN matches NaN), zarr's
    ``chunk_is_empty`` without a host round trip (its ``all_equal`` does not take CuPy arrays)."""
    from zarr.core.chunk_utils import fill_value_or_default

    if _zero_fill(spec):
        return ~data.view(f"u{data.dtype.itemsize}").any()
    fill = np.asarray(fill_value_or_default(spec), dtype=data.dtype)
    if data.dtype.kind in "fc" and np.isnan(fill):
        return cp.isnan(data).all()
    return (data == fill).all()


def _pool_map(fn: Callable[[int], Any], n: int, backend: Backend | None = None) -> list[Any]:
    """``[fn(0), ..., fn(n - 1)]`` on the engine pool (inline for one item): ``num_threads`` at a time
    for local work, ``remote.concurrency`` for tasks that wait on a remote ``backend``. Through
    :func:`~gdsstore.engine.pool.map_all`, whose waiting thread runs pieces itself, so puts that run
    their own pieces (multipart parts) on the same pool cannot deadlock it."""
    if n <= 1:
        return [fn(i) for i in range(n)]
    s = policy.settings()
    if backend is not None and not _is_local(backend):
        return map_all(fn, range(n), s.remote_concurrency)
    return map_all(fn, range(n), s.num_threads)


def _is_local(backend: Backend) -> bool:
    from gdsstore.engine.localfs import LocalBackend

    return isinstance(backend, LocalBackend)


def encode_host(
    transform: Any, arrays: Sequence[Any], specs: Sequence[ArraySpec], reason: str = "host buffer"
) -> Encoded:
    """Encode chunks with the codecs' own synchronous encode, in parallel; one trace row (``reason``:
    why the CPU encodes them)."""
    from gdsstore.gpu.codecs import quiet_records

    t0 = time.perf_counter()

    def one(i: int) -> np.ndarray | None:
        with quiet_records():
            buf = transform.encode_chunk(arrays[i], specs[i])
        return None if buf is None else np.asarray(buf.as_numpy_array()).view(np.uint8).reshape(-1)

    views = _pool_map(one, len(arrays))
    if arrays:
        _trace.record("encode", "cpu-codec", reason, sum(raw_nbytes(s) for s in specs), time.perf_counter() - t0)
    return Encoded(views)


def encode(transform: Any, arrays: Sequence[Any], specs: Sequence[ArraySpec], device: bool) -> Encoded:
    """Encode chunks as one batch: on the GPU where :func:`gdsstore.gpu.write_gpu.encode_device`
    can, else on the CPU (:func:`encode_host`, with the reason)."""
    if device and arrays:
        from gdsstore.gpu import write_gpu

        enc = write_gpu.encode_device(transform, arrays, specs)
        if not isinstance(enc, str):
            return enc
        return encode_host(transform, arrays, specs, enc)
    return encode_host(transform, arrays, specs)


def encode_device_or_elide(
    transform: Any, arrays: Sequence[Any], specs: Sequence[ArraySpec]
) -> tuple[list[np.ndarray | None], Encoded]:
    """Device chunks: their encoded bytes (``None``: empty, to be deleted) and the batch that owns them.

    Where :func:`gdsstore.gpu.write_gpu.pack_raw` can lay the raw bytes out in one buffer, emptiness is
    one reduction over it and nvCOMP reads the packed slices; otherwise each chunk goes through zarr's
    encode (:func:`encode`) after :func:`_empty_flags`.
    """
    from gdsstore.gpu import write_gpu

    packed = write_gpu.pack_raw(transform, arrays)
    if packed is None:
        empty = _empty_flags(arrays, specs)
        keep = [i for i, e in enumerate(empty) if not e]
        enc = encode(transform, [arrays[i] for i in keep], [specs[i] for i in keep], True)
    else:
        buf, offsets, sizes = packed
        empty = _packed_empty(buf, offsets, sizes, arrays, specs)
        keep = [i for i, e in enumerate(empty) if not e]
        got = write_gpu.encode_packed(transform, buf, [offsets[i] for i in keep], [sizes[i] for i in keep],
                                      [specs[i] for i in keep])
        enc = got if not isinstance(got, str) else encode_host(
            transform, [arrays[i] for i in keep], [specs[i] for i in keep], got)
    views: list[np.ndarray | None] = [None] * len(arrays)
    for i, v in zip(keep, enc.views):
        views[i] = v
    return views, enc


def _packed_empty(buf: Any, offsets: Sequence[int], sizes: Sequence[int], arrays: Sequence[Any],
                  specs: Sequence[ArraySpec]) -> list[bool]:
    """:func:`_empty_flags` from packed raw bytes: chunks of one size with an all-zero fill value are
    checked by one reduction over the buffer (one row per chunk) and one small copy back."""
    if not specs or any(s.config.write_empty_chunks for s in specs):
        return [False] * len(specs)
    n = sizes[0]
    regular = all(z == n for z in sizes) and all(o == k * n for k, o in enumerate(offsets))
    if not (regular and n and all(_zero_fill(s) for s in specs)):
        return _empty_flags(arrays, specs)
    word = 8 if n % 8 == 0 else 1
    rows = buf[: n * len(sizes)].view(f"u{word}").reshape(len(sizes), n // word)
    return [not bool(x) for x in _row_max(rows).get().tolist()]


def _row_max(rows: Any) -> Any:
    """Each row's largest (unsigned) word: CUB's segmented reduction, compiled into CuPy's wheel, where
    it takes the rows; ``.max(axis=1)`` otherwise. (CuPy's own reduction compiles a kernel on a machine
    whose kernel cache is empty: measured 2.0 s of the first 1 GiB GPU write on the H200.)"""
    try:
        from cupy.cuda import cub

        got = cub.cub_reduction(rows, cub.CUPY_CUB_MAX, axis=1)
    except Exception:  # no CUB in this CuPy build, or rows it does not take
        got = None
    return rows.max(axis=1) if got is None else got


# -- publishing ----------------------------------------------------------------------------------------


def publish(backend: Backend, puts: Sequence[tuple[str, Any]], deletes: Sequence[str], device: bool) -> None:
    """Put every ``(key, host bytes)`` and delete every key, in parallel on the engine's write pool;
    one ``write`` trace row for the batch (each put is atomic: see the backend's ``put``)."""
    t0 = time.perf_counter()
    jobs: list[Callable[[], None]] = [functools.partial(backend.put, k, b) for k, b in puts]
    jobs += [functools.partial(backend.delete, k) for k in deletes]
    _pool_map(lambda i: jobs[i](), len(jobs), backend)
    nbytes = sum(int(np.asarray(b).nbytes) for _, b in puts)
    reason = f"{type(backend).__name__}.put, parallel, atomic per object"
    _trace.record("write", "batch-put", reason, nbytes, time.perf_counter() - t0, backend.url, 0 if device else None)


# -- the two routes ------------------------------------------------------------------------------------


def _write_chunks(
    transform: Any, batch: list[WriteItem], arrays: list[Any], backend: Backend, device: bool
) -> Callable[[], None] | None:
    """Write host chunks; encode device chunks and return their publish step (the caller runs it
    while the next window encodes)."""
    if not device:
        _write_chunks_host(transform, batch, arrays, backend)
        return None
    views, enc = encode_device_or_elide(transform, arrays, [item[1] for item in batch])
    puts = [(batch[i][0].path, v) for i, v in enumerate(views) if v is not None]
    gone = [batch[i][0].path for i, v in enumerate(views) if v is None]

    def run() -> None:
        try:
            publish(backend, puts, gone, device)
        finally:
            enc.release()

    return run


def _write_chunks_host(transform: Any, batch: list[WriteItem], arrays: list[Any], backend: Backend) -> None:
    """Host chunks: each pool task checks, encodes and publishes one chunk, so a chunk's bytes are
    written while they are still in the CPU's cache; one ``encode`` and one ``write`` trace row."""
    from gdsstore.gpu.codecs import quiet_records

    t0 = time.perf_counter()
    spent = np.zeros((len(batch), 2))  # encode, publish seconds of each chunk
    written = np.zeros(len(batch), dtype=np.int64)

    def one(i: int) -> None:
        bs, spec, *_ = batch[i]
        ta = time.perf_counter()
        with quiet_records():
            buf = encode_or_elide(transform, arrays[i], spec)
        tb = time.perf_counter()
        if buf is None:
            backend.delete(bs.path)
        else:
            data = np.asarray(buf.as_numpy_array()).view(np.uint8).reshape(-1)
            backend.put(bs.path, data)
            written[i] = data.nbytes
        spent[i] = (tb - ta, time.perf_counter() - tb)

    _pool_map(one, len(batch), backend)
    wall = time.perf_counter() - t0
    share = spent.sum(axis=0) / max(float(spent.sum()), 1e-12) * wall  # wall time split by work done
    _trace.record("encode", "cpu-codec", "host buffer", _raw_total(batch), float(share[0]))
    reason = f"{type(backend).__name__}.put, parallel, atomic per object"
    _trace.record("write", "batch-put", reason, int(written.sum()), float(share[1]), backend.url)


@dataclass(frozen=True)
class _ShardGeometry:
    """What every shard of one shape shares: inner chunk grid, write order, index size."""

    chunks_per_shard: tuple[int, ...]
    order: np.ndarray  # inner chunk coordinates in the codec's write order
    order_rows: np.ndarray  # for each row of ``order``, its position in C order
    index_nbytes: int
    index_at_start: bool

    @classmethod
    def of(cls, codec: ShardingCodec, shard_spec: ArraySpec) -> _ShardGeometry:
        cps = tuple(int(n) for n in codec._get_chunks_per_shard(shard_spec))
        order = write_plan.as_coords(codec._subchunk_order_iter(cps, codec.subchunk_write_order))
        rows = np.ravel_multi_index(tuple(order.T), cps) if len(order) else np.zeros(0, np.int64)
        at_start = str(getattr(codec.index_location, "value", codec.index_location)) == "start"
        return cls(cps, order, np.asarray(rows, np.int64), int(codec._shard_index_size(cps)), at_start)


def _fetch_stored(backend: Backend, keys: Sequence[str]) -> list[np.ndarray | None]:
    """The stored bytes of ``keys`` (``None``: missing), fetched in parallel through the engine."""

    def one(i: int) -> np.ndarray | None:
        try:
            return np.asarray(backend.get(keys[i], lambda n: np.empty(n, dtype=np.uint8)))
        except FileNotFoundError:
            return None

    return _pool_map(one, len(keys), backend)


@dataclass
class _Shard:
    """One shard being written: its stored inner chunks (encoded, by C-order position) and the inner
    chunks this write changes (merged arrays, encoded later as part of one batch)."""

    key: str
    geometry: _ShardGeometry
    chunks: dict[int, np.ndarray]
    touched: list[tuple[int, Any]]


def _plan_shards(codec: ShardingCodec, batch: list[WriteItem], value: NDBuffer, backend: Backend) -> list[_Shard]:
    """Each shard's inner chunk projections (zarr's own indexer, as its partial encode uses it), the
    stored shards that are written in part (fetched as one parallel batch), and the merged inner chunks."""
    from zarr.core.chunk_utils import _merge_chunk_array

    geoms: dict[tuple[int, ...], _ShardGeometry] = {}
    plans = []
    for bs, spec, chunk_sel, out_sel, _ in batch:
        g = geoms.get(tuple(spec.shape))
        if g is None:
            g = geoms[tuple(spec.shape)] = _ShardGeometry.of(codec, spec)
        shard_value = value if len(value.shape) == 0 else value[out_sel]
        proj, shard_value = codec._get_shard_indexer_and_value(chunk_sel, spec, shard_value)
        complete = codec._is_complete_shard_write(proj, g.chunks_per_shard)
        plans.append((bs.path, spec, g, proj, shard_value, complete))
    partial = [k for k, p in enumerate(plans) if not p[5]]
    stored = dict(zip(partial, _fetch_stored(backend, [plans[k][0] for k in partial])))
    shards = []
    for k, (key, spec, g, proj, shard_value, _) in enumerate(plans):
        chunks = _stored_chunks(codec, g, stored.get(k))
        inner_spec = codec._get_chunk_spec(spec)
        transform = codec._get_inner_chunk_transform(spec)
        touched = []
        for coords, csel, osel, inner_complete in proj:
            pos = int(np.ravel_multi_index(coords, g.chunks_per_shard))
            old = None if inner_complete else chunks.get(pos)
            existing = None if old is None else _decode_stored(transform, inner_spec, old)
            merged = _merge_chunk_array(existing, shard_value, osel, inner_spec, csel, inner_complete, ())
            touched.append((pos, merged))
            chunks.pop(pos, None)
        shards.append(_Shard(key, g, chunks, touched))
    return shards


def _decode_stored(transform: Any, spec: ArraySpec, stored: np.ndarray) -> NDBuffer:
    """A stored inner chunk decoded into ``spec``'s buffer type. A ``bytes`` codec of the other byte
    order decodes on the host (CuPy has no non-native dtypes: zarr's view there reads them as native)."""
    import dataclasses

    from gdsstore.gpu.decode import bytes_swap_width

    if not bytes_swap_width(transform._ab_codec, spec.dtype.to_native_dtype()):
        return transform.decode_chunk(spec.prototype.buffer.from_bytes(stored.tobytes()), spec)  # type: ignore[no-any-return]
    from zarr.core.buffer import cpu

    host_spec = dataclasses.replace(spec, prototype=cpu.buffer_prototype)
    host = transform.decode_chunk(cpu.Buffer.from_bytes(stored.tobytes()), host_spec).as_numpy_array()
    return spec.prototype.nd_buffer.from_numpy_array(host.astype(host.dtype.newbyteorder("=")))  # type: ignore[no-any-return]


def _stored_chunks(codec: ShardingCodec, g: _ShardGeometry, blob: np.ndarray | None) -> dict[int, np.ndarray]:
    """The encoded inner chunks of a stored shard, by C-order position (zarr's shard reader)."""
    if blob is None:
        return {}
    from zarr.core.buffer.cpu import Buffer as HostBuffer

    reader = codec._shard_reader_from_bytes_sync(HostBuffer.from_array_like(blob), g.chunks_per_shard)
    out = {}
    for pos, b in enumerate(reader.to_dict_vectorized().values()):
        if b is not None:
            out[pos] = np.asarray(b.as_numpy_array()).view(np.uint8).reshape(-1)
    return out


def _write_shards(
    codec: ShardingCodec, batch: list[WriteItem], value: NDBuffer, backend: Backend, device: bool
) -> Callable[[], None] | None:
    """Merge, encode every changed inner chunk of every shard as one batch, assemble, publish; on the
    device route the assembly and publish step is returned (it overlaps the next window's encode)."""
    from gdsstore.gpu.codecs import quiet_records

    shards = _plan_shards(codec, batch, value, backend)
    spec0 = batch[0][1]
    inner_spec = codec._get_chunk_spec(spec0)
    transform = codec._get_inner_chunk_transform(spec0)
    owners = [(s, pos) for s, sh in enumerate(shards) for pos, _ in sh.touched]
    arrays = [a for sh in shards for _, a in sh.touched]
    shard_specs = [codec._get_chunk_spec(item[1]) for item in batch] if len(shards) > 1 else [inner_spec]
    specs = [shard_specs[s if len(shards) > 1 else 0] for s, _ in owners]
    if device:
        views, enc = encode_device_or_elide(transform, arrays, specs)
    else:
        t0 = time.perf_counter()

        def one(i: int) -> np.ndarray | None:
            with quiet_records():
                buf = encode_or_elide(transform, arrays[i], specs[i])
            return None if buf is None else np.asarray(buf.as_numpy_array()).view(np.uint8).reshape(-1)

        views = _pool_map(one, len(arrays))
        _trace.record("encode", "cpu-codec", "host buffer", sum(raw_nbytes(s) for s in specs), time.perf_counter() - t0)
        enc = Encoded([])

    def run() -> None:
        try:
            for (s, pos), v in zip(owners, views):
                if v is not None and v.nbytes:
                    shards[s].chunks[pos] = v
            _publish_shards(codec, shards, backend, device)
        finally:
            enc.release()

    if device:
        return run
    run()
    return None


def _assemble(codec: ShardingCodec, shard: _Shard) -> np.ndarray | None:
    """One shard's bytes: its inner chunks in the codec's write order and its encoded index, laid out
    by :func:`gdsstore.gpu.write_plan.shard_layout`; ``None`` when no inner chunk is present."""
    from zarr.codecs.sharding import _ShardIndex

    g, chunks = shard.geometry, shard.chunks
    lengths = np.array([chunks[r].nbytes if r in chunks else 0 for r in g.order_rows.tolist()], np.int64)
    lay = write_plan.shard_layout(g.order, lengths, index_nbytes=g.index_nbytes, index_at_start=g.index_at_start)
    if lay.total == 0:
        return None
    index = codec._encode_shard_index_sync(_ShardIndex(g.chunks_per_shard, lay.offsets_and_lengths))
    out = np.empty(lay.total, dtype=np.uint8)
    idx = np.asarray(index.as_numpy_array()).view(np.uint8).reshape(-1)
    out[lay.index_offset : lay.index_offset + idx.nbytes] = idx
    for pos, off in zip(lay.data_order.tolist(), lay.data_offsets.tolist()):
        v = chunks[int(g.order_rows[pos])]
        out[off : off + v.nbytes] = v
    return out


def _publish_shards(codec: ShardingCodec, shards: list[_Shard], backend: Backend, device: bool) -> None:
    """Assemble and publish each shard in one pool task (its bytes still in cache when written)."""
    t0 = time.perf_counter()
    spent = np.zeros((len(shards), 2))
    written = np.zeros(len(shards), dtype=np.int64)

    def one(s: int) -> None:
        ta = time.perf_counter()
        blob = _assemble(codec, shards[s])
        tb = time.perf_counter()
        if blob is None:
            backend.delete(shards[s].key)
        else:
            backend.put(shards[s].key, blob)
            written[s] = blob.nbytes
        spent[s] = (tb - ta, time.perf_counter() - tb)

    _pool_map(one, len(shards), backend)
    wall = time.perf_counter() - t0
    share = spent.sum(axis=0) / max(float(spent.sum()), 1e-12) * wall
    _trace.record("encode", "shard-assembly", "chunks in write order + index", int(written.sum()), float(share[0]))
    reason = f"{type(backend).__name__}.put, parallel, atomic per object"
    _trace.record("write", "batch-put", reason, int(written.sum()), float(share[1]), backend.url, 0 if device else None)
