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
   :func:`gdsstore.gpu.write_plan.shard_layout`; :mod:`gdsstore.gpu.write_shards`);
5. publishes all objects in parallel through the store's engine backend (``put``: temporary file +
   rename locally, PUT/multipart on S3, CREATE on WebHDFS — each object atomic) and deletes the
   empty ones. Host chunks are checked, encoded and put by one pool task each (their bytes are
   still in cache when written); on the device route a window's publish runs while the next window
   encodes (windows of :data:`WRITE_WINDOW_BYTES`).

Whether a batch goes this way is the policy's :func:`~gdsstore.policy.decide_zarr_write`, beside the
read's :func:`~gdsstore.policy.decide_zarr_read`; batches it cannot take go to zarr's own pipeline, and
the trace says why (``write-plan`` / ``zarr-pipeline`` / reason). Each batch records one ``encode`` row per route and one ``write`` row
(``batch-put``), sizes in the columns.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

import gdsstore.trace as _trace
from gdsstore import policy
from gdsstore.engine.backend import Backend
from gdsstore.engine.pool import engine_pool
from gdsstore.gpu import write_plan
from gdsstore.gpu.decode import raw_nbytes
from gdsstore.gpu.fetch import backend_of
from gdsstore.gpu.memory import in_callers_allocator
from gdsstore.gpu.plan import large_window, split_windows
from gdsstore.gpu.routes import write_route
from gdsstore.gpu.write_encode import encode_device_or_elide, host_chunk_bytes
from gdsstore.gpu.write_publish import publish, publish_each
from gdsstore.gpu.write_shards import write_shards

if TYPE_CHECKING:
    from collections.abc import Sequence

    from zarr.core.buffer import NDBuffer

    from gdsstore.gpu.pipeline import BatchItem

__all__ = ["WRITE_DEVICE_WINDOW_BYTES", "WRITE_WINDOW_BYTES", "write"]

#: Raw (decoded) bytes encoded and published per window: bounds the memory a batch holds at once.
WRITE_WINDOW_BYTES = 256 << 20
#: Window of the device route, bounded by a quarter of the free device memory: nvCOMP's batched encode
#: runs several times faster with more chunks per call (docs/performance.md, "Writing zarr arrays").
WRITE_DEVICE_WINDOW_BYTES = 1 << 30


async def write(pipeline: Any, batch_info: Any, value: NDBuffer, drop_axes: tuple[int, ...] = ()) -> None:
    """Write ``value`` into the chunks of ``batch_info`` (zarr's ``CodecPipeline.write`` contract).

    Args:
        pipeline: the :class:`~gdsstore.gpu.pipeline.GDSCodecPipeline` (its ``delegate`` is zarr's
            ``FusedCodecPipeline``; its ``read`` fetches old contents).
        batch_info: ``(byte setter, chunk spec, chunk selection, value selection, is complete)``.
        value: the values, host or device.
        drop_axes: axes of the chunk selection that ``value`` does not have.
    """
    batch: list[BatchItem] = list(batch_info)
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


def _raw_total(batch: Sequence[BatchItem]) -> int:
    return sum(raw_nbytes(item[1]) for item in batch)


async def _read_old(pipeline: Any, batch: list[BatchItem]) -> dict[int, NDBuffer]:
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


def _merged(batch: list[BatchItem], value: NDBuffer, drop_axes: tuple[int, ...], old: dict[int, NDBuffer]) -> list[Any]:
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
    batch: list[BatchItem],
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
                job = write_shards(delegate.array_bytes_codec, part, value, backend, device)
            if pending is not None:
                pending.result()
                pending = None
            if job is not None:
                pending = engine_pool().submit(in_callers_allocator(job))
    finally:
        if pending is not None:
            pending.result()


# -- whole chunks ---------------------------------------------------------------------------------------


def _write_chunks(
    transform: Any, batch: list[BatchItem], arrays: list[Any], backend: Backend, device: bool
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


def _write_chunks_host(transform: Any, batch: list[BatchItem], arrays: list[Any], backend: Backend) -> None:
    """Host chunks: each pool task checks, encodes and publishes one chunk, so a chunk's bytes are
    written while they are still in the CPU's cache; one ``encode`` and one ``write`` trace row."""
    keys = [item[0].path for item in batch]
    made = ("cpu-codec", "host buffer", _raw_total(batch))
    publish_each(backend, keys, lambda i: host_chunk_bytes(transform, arrays[i], batch[i][1]), made)
