"""Writing sharded arrays: each shard a write touches is merged, its changed inner chunks encoded as
part of one batch, and the shard assembled and written once.

Shards written in part are fetched from the store in one parallel batch, and the inner chunks the
write does not touch are kept as they are stored (zarr's partial shard encode does the same); each
shard's bytes are its inner chunks in the codec's write order and its index, laid out by
:func:`gdsstore.gpu.write_plan.shard_layout`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from gdsstore.engine.backend import Backend
from gdsstore.gpu import write_plan
from gdsstore.gpu.write_encode import encode_device_or_elide, encode_host_or_elide, host_bytes
from gdsstore.gpu.write_publish import map_on_pool, publish_each

if TYPE_CHECKING:
    from zarr.codecs.sharding import ShardingCodec
    from zarr.core.array_spec import ArraySpec
    from zarr.core.buffer import NDBuffer

    from gdsstore.gpu.pipeline import BatchItem

__all__ = ["write_shards"]


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

    return map_on_pool(one, len(keys), backend)


@dataclass
class _Shard:
    """One shard being written: its stored inner chunks (encoded, by C-order position) and the inner
    chunks this write changes (merged arrays, encoded later as part of one batch)."""

    key: str
    geometry: _ShardGeometry
    chunks: dict[int, np.ndarray]
    touched: list[tuple[int, Any]]


def _plan_shards(codec: ShardingCodec, batch: list[BatchItem], value: NDBuffer, backend: Backend) -> list[_Shard]:
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
            out[pos] = host_bytes(b)
    return out


def write_shards(
    codec: ShardingCodec, batch: list[BatchItem], value: NDBuffer, backend: Backend, device: bool
) -> Callable[[], None] | None:
    """Merge, encode every changed inner chunk of every shard as one batch, assemble, publish; on the
    device route the assembly and publish step is returned (it overlaps the next window's encode)."""
    shards = _plan_shards(codec, batch, value, backend)
    spec0 = batch[0][1]
    inner_spec = codec._get_chunk_spec(spec0)
    transform = codec._get_inner_chunk_transform(spec0)
    owners = [(s, pos) for s, sh in enumerate(shards) for pos, _ in sh.touched]
    arrays = [a for sh in shards for _, a in sh.touched]
    shard_specs = [codec._get_chunk_spec(item[1]) for item in batch] if len(shards) > 1 else [inner_spec]
    specs = [shard_specs[s if len(shards) > 1 else 0] for s, _ in owners]
    views, enc = (encode_device_or_elide if device else encode_host_or_elide)(transform, arrays, specs)

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
    idx = host_bytes(index)
    out[lay.index_offset : lay.index_offset + idx.nbytes] = idx
    for pos, off in zip(lay.data_order.tolist(), lay.data_offsets.tolist()):
        v = chunks[int(g.order_rows[pos])]
        out[off : off + v.nbytes] = v
    return out


def _publish_shards(codec: ShardingCodec, shards: list[_Shard], backend: Backend, device: bool) -> None:
    """Assemble and publish each shard in one pool task (its bytes still in cache when written)."""
    made = ("shard-assembly", "chunks in write order + index", None)
    keys = [shard.key for shard in shards]
    publish_each(backend, keys, lambda s: _assemble(codec, shards[s]), made, 0 if device else None)
