"""Reading sharded arrays: one batched read of the shard indexes, then the coalesced byte ranges of the
inner chunks a selection touches (:func:`gdsstore.gpu.plan.plan_shard_reads`), window by window.

Device outputs of slice selections are placed by the scatter kernel (:func:`_scatter_shards`: fills
first, then one decode and one launch per window); any other output is assembled shard by shard with
zarr's ``scatter_chunk`` (:func:`_assemble_shards`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
from zarr.abc.codec import GetResult
from zarr.core.chunk_utils import fill_value_or_default, scatter_chunk

from gdsstore.engine.landing import Landed
from gdsstore.engine.ranges import ByteRange
from gdsstore.gpu.decode import CodecChain, decode_window, is_device_spec, raw_nbytes
from gdsstore.gpu.fetch import Fetcher
from gdsstore.gpu.output import (
    decode_scatter,
    fill_bytes,
    kernel_scatter_ok,
    output_device,
    output_layout,
    scatter,
    sync,
)
from gdsstore.gpu.plan import (
    InnerChunks,
    Layout,
    ShardReadPlan,
    inner_chunks_of_selection,
    inner_chunks_of_slices,
    plan_shard_reads,
    shard_geometry,
    slice_arrays,
)
from gdsstore.gpu.windows import read_windows, run_windows

if TYPE_CHECKING:
    from zarr.codecs.sharding import ShardingCodec
    from zarr.core.array_spec import ArraySpec
    from zarr.core.buffer import NDBuffer

    from gdsstore.gpu.pipeline import BatchItem

__all__ = [
    "ShardRead", "inner_chunk_spec", "plan_shard_read", "read_shard_indexes", "read_shards", "run_shard_read",
    "shard_index_reads",
]


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
        sub, ids = _members(plan, w, staged)
        decode_scatter(chain, [inner_spec] * len(ids), sub, layout, geometry.rows(ids), out_ptr)

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
