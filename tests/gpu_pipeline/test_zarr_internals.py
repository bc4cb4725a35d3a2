"""The private zarr internals the pipeline calls (each where zarr has no public way), pinned: a zarr
release that renames or changes one fails here first, not in a user's read."""

from __future__ import annotations

import numpy as np
import zarr
from zarr.abc.store import RangeByteRequest, SuffixByteRequest
from zarr.codecs import BytesCodec, Crc32cCodec, ShardingCodec, ZstdCodec
from zarr.core.buffer import default_buffer_prototype
from zarr.core.buffer.cpu import Buffer as CPUBuffer
from zarr.core.sync import sync
from zarr.storage import MemoryStore

from gdsstore.gpu.read_shards import inner_chunk_spec

SHAPE, SHARD, INNER = (8, 8), (8, 8), (4, 4)


def _sharded(index_location: str) -> tuple[MemoryStore, ShardingCodec, zarr.Array]:  # type: ignore[type-arg]
    store = MemoryStore()
    z = zarr.create_array(
        store, shape=SHAPE, shards=SHARD, chunks=INNER, dtype="i4", fill_value=0, compressors=None
    )
    z[:4, :] = np.arange(32, dtype="i4").reshape(4, 8) + 1  # inner chunks (0, 0) and (0, 1) stored
    codec = z.metadata.codecs[0]
    assert isinstance(codec, ShardingCodec)
    codec = ShardingCodec(chunk_shape=INNER, codecs=codec.codecs, index_location=index_location)
    return store, codec, z


def test_shard_index_byte_range_locates_the_index() -> None:
    # used by gdsstore.gpu.read_shards.read_shard_indexes
    _, end_codec, _ = _sharded("end")
    req = end_codec._shard_index_byte_range((2, 2))
    assert isinstance(req, SuffixByteRequest) and req.suffix == 4 * 16 + 4  # 4 entries + crc32c
    _, start_codec, _ = _sharded("start")
    req = start_codec._shard_index_byte_range((2, 2))
    assert isinstance(req, RangeByteRequest) and (req.start, req.end) == (0, 68)


def test_decode_shard_index_sync_gives_offsets_and_lengths() -> None:
    # used by gdsstore.gpu.read_shards.read_shard_indexes: a (chunks per shard..., 2) uint64 table
    store, codec, _ = _sharded("end")
    blob_buffer = sync(store.get("c/0/0", prototype=default_buffer_prototype()))
    assert blob_buffer is not None
    blob = blob_buffer.as_numpy_array()
    req = codec._shard_index_byte_range((2, 2))
    assert isinstance(req, SuffixByteRequest)
    index = codec._decode_shard_index_sync(CPUBuffer.from_array_like(blob[-req.suffix :].copy()), (2, 2))
    table = index.offsets_and_lengths
    assert table.shape == (2, 2, 2) and table.dtype == np.uint64
    assert table[0, 0, 1] == 64 and table[0, 1, 1] == 64  # two stored inner chunks of 16 int32
    assert (table[1] == np.uint64(2**64 - 1)).all()  # the others absent


def test_inner_chunk_transform_holds_the_evolved_inner_codecs() -> None:
    # used by gdsstore.gpu.read_shards.read_shards for the inner codec chain
    from zarr.core.array_spec import ArrayConfig, ArraySpec
    from zarr.core.dtype import Int32

    codec = ShardingCodec(chunk_shape=INNER, codecs=[BytesCodec(), ZstdCodec(), Crc32cCodec()])
    spec = ArraySpec(
        shape=SHARD,
        dtype=Int32(),
        fill_value=0,
        config=ArrayConfig.from_dict({}),
        prototype=default_buffer_prototype(),
    )
    transform = codec._get_inner_chunk_transform(spec)
    assert [type(c).__name__ for c in transform.codecs] == ["BytesCodec", "ZstdCodec", "Crc32cCodec"]
    assert tuple(inner_chunk_spec(codec, spec).shape) == INNER


def test_sync_codec_protocol_decode_sync() -> None:
    # used by gdsstore.gpu.decode.decode_bb_on_host: zarr's SupportsSyncCodec protocol
    from zarr.abc.codec import SupportsSyncCodec

    assert "_decode_sync" in SupportsSyncCodec.__dict__
    assert callable(getattr(ZstdCodec(), "_decode_sync", None))
