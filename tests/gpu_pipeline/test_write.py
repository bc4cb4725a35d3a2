"""The pipeline's write path (gdsstore.gpu.write) on host buffers: what it writes, plain zarr reads.

Every case runs the same writes through gdsstore (``GDSStore`` + ``enable_gpu(buffers=False)``) and
through plain zarr (``LocalStore``, zarr's own pipeline), then checks that plain zarr reads gdsstore's
array as the numpy reference, and that both directories hold the same files, byte for byte (every
codec here is deterministic on the CPU).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import zarr
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from zarr.codecs import (
    BloscCodec,
    BytesCodec,
    Crc32cCodec,
    GzipCodec,
    ShardingCodec,
    TransposeCodec,
    ZstdCodec,
)
from zarr.codecs.numcodecs import LZ4
from zarr.codecs.numcodecs import Zstd as NumcodecsZstd
from zarr.storage import LocalStore, MemoryStore

import gdsstore
from gdsstore.gpu import write as gwrite
from gdsstore.gpu import write_plan

SHAPE = (30, 23)
CHUNKS = (8, 10)
SHARDS = (16, 20)

# name -> create_array keywords
CODECS: dict[str, dict[str, Any]] = {
    "none": {"compressors": None},
    "zstd": {"compressors": [ZstdCodec(level=1)]},
    "zstd+crc32c": {"compressors": [ZstdCodec(level=1), Crc32cCodec()]},
    "gzip": {"compressors": [GzipCodec(level=1)]},
    "blosc": {"compressors": [BloscCodec(cname="lz4", clevel=3)]},
    "crc32c": {"compressors": [Crc32cCodec()]},
    "transpose": {"filters": [TransposeCodec(order=(1, 0))], "compressors": [ZstdCodec(level=1)]},
    "big-endian": {"serializer": BytesCodec(endian="big"), "compressors": None},
    "numcodecs.zstd": {"compressors": [NumcodecsZstd(level=1)]},
    "numcodecs.lz4": {"compressors": [LZ4()]},
}


def _create(store: Any, codec: str, sharded: bool, fill: float, shape: tuple[int, ...] = SHAPE) -> zarr.Array:
    kw: dict[str, Any] = dict(CODECS[codec])
    if sharded:
        kw["shards"] = SHARDS
    return zarr.create_array(store, shape=shape, chunks=CHUNKS, dtype="f4", fill_value=fill, **kw)


def _files(root: Path) -> dict[str, bytes]:
    out = {}
    for dirpath, _, names in os.walk(root):
        for n in names:
            p = Path(dirpath) / n
            out[str(p.relative_to(root))] = p.read_bytes()
    return out


#: Codecs whose bytes depend on more than the data: gzip stores the time in its header.
NOT_DETERMINISTIC = {"gzip"}


def _assert_same_files(ours: Path, theirs: Path, same_bytes: bool = True) -> None:
    a, b = _files(ours), _files(theirs)
    assert sorted(a) == sorted(b)
    for k in a if same_bytes else ["zarr.json"]:
        assert a[k] == b[k], f"{k} differs"


# -- operations: a sequence of writes (and resizes), applied to gdsstore, zarr and numpy alike --------


def _dim_slice(n: int) -> st.SearchStrategy[slice]:
    return st.tuples(st.integers(0, n), st.integers(0, n)).map(lambda ab: slice(min(ab), max(ab)))


def _op(shape: tuple[int, ...]) -> st.SearchStrategy[tuple[Any, ...]]:
    sel = st.tuples(*(_dim_slice(n) for n in shape))
    kind = st.sampled_from(["random", "fill", "scalar", "zeros"])
    return st.tuples(st.just("set"), sel, kind, st.integers(0, 2**16))


resize = st.tuples(st.just("resize"), st.tuples(st.integers(5, 40), st.integers(5, 30)))
row = st.tuples(st.just("row"), st.integers(0, 29), st.integers(0, 2**16))  # an integer index: a dropped axis
orthogonal = st.tuples(
    st.just("oindex"), st.lists(st.integers(0, 29), min_size=1, max_size=5, unique=True),
    st.lists(st.integers(0, 22), min_size=1, max_size=5, unique=True), st.integers(0, 2**16),
)
ops = st.lists(_op(SHAPE) | resize | row | orthogonal, min_size=1, max_size=4)


def _value(kind: str, shape: tuple[int, ...], seed: int, fill: float) -> Any:
    if kind == "scalar":
        return np.float32(seed % 7)
    if kind == "fill":
        return np.full(shape, fill, "f4")
    if kind == "zeros":
        return np.zeros(shape, "f4")
    return np.round(np.random.default_rng(seed).standard_normal(shape), 2).astype("f4")


def _apply(z: zarr.Array, ref: np.ndarray, op: tuple[Any, ...], fill: float) -> np.ndarray:
    if op[0] == "resize":
        new = np.full(op[1], fill, "f4")
        keep = tuple(slice(0, min(a, b)) for a, b in zip(op[1], ref.shape))
        new[keep] = ref[keep]
        z.resize(op[1])
        return new
    if op[0] == "row":
        r = op[1] % ref.shape[0]
        v = _value("random", (ref.shape[1],), op[2], fill)
        z[r, :] = v
        ref[r, :] = v
        return ref
    if op[0] == "oindex":
        rows = sorted({i % ref.shape[0] for i in op[1]})
        cols = sorted({j % ref.shape[1] for j in op[2]})
        v = _value("random", (len(rows), len(cols)), op[3], fill)
        z.oindex[rows, cols] = v
        ref[np.ix_(rows, cols)] = v
        return ref
    _, sel, kind, seed = op
    sel = tuple(slice(min(s.start, n), min(s.stop, n)) for s, n in zip(sel, ref.shape))
    shape = tuple(s.stop - s.start for s in sel)
    v = _value(kind, shape, seed, fill)
    z[sel] = v
    ref[sel] = v
    return ref


@pytest.mark.parametrize("sharded", [False, True], ids=["chunks", "shards"])
@pytest.mark.parametrize("codec", list(CODECS))
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=ops, fill=st.sampled_from([0.0, 3.5]))
def test_writes_read_back_with_plain_zarr_and_equal_zarrs_bytes(
    tmp_path_factory: pytest.TempPathFactory, codec: str, sharded: bool, ops: list[Any], fill: float
) -> None:
    ours_dir = tmp_path_factory.mktemp("ours")
    theirs_dir = tmp_path_factory.mktemp("theirs")
    with gdsstore.enable_gpu(buffers=False):
        ours = _create(gdsstore.GDSStore(str(ours_dir)), codec, sharded, fill)
        assert type(ours._async_array.codec_pipeline).__name__ == "GDSCodecPipeline"
        ref = np.full(SHAPE, fill, "f4")
        for op in ops:
            ref = _apply(ours, ref, op, fill)
    theirs = _create(LocalStore(theirs_dir), codec, sharded, fill)
    ref2 = np.full(SHAPE, fill, "f4")
    for op in ops:
        ref2 = _apply(theirs, ref2, op, fill)
    plain = zarr.open_array(LocalStore(ours_dir), mode="r")
    np.testing.assert_array_equal(plain[...], theirs[...])
    if not any(op[0] == "resize" for op in ops):
        # (zarr keeps stale values past a shrunk edge inside kept chunks; numpy has no such memory)
        np.testing.assert_array_equal(plain[...], ref)
    _assert_same_files(ours_dir, theirs_dir, codec not in NOT_DETERMINISTIC)


@pytest.mark.parametrize("sharded", [False, True], ids=["chunks", "shards"])
def test_device_route_plumbing_with_host_arrays(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sharded: bool
) -> None:
    """The device route's steps (batch encode, then the publish of each window overlapping the next
    window's encode) on host arrays: without a GPU its encode falls back to the CPU, as it says."""
    monkeypatch.setattr(gwrite, "_on_device", lambda value, old: True)
    monkeypatch.setattr(gwrite, "WRITE_WINDOW_BYTES", 2 * 8 * 10 * 4)  # several windows
    data = np.round(np.random.default_rng(6).standard_normal(SHAPE), 2).astype("f4")
    data[0:8, 0:10] = 0.0

    def writes(z: zarr.Array) -> None:
        z[...] = data
        z[3:20, 4:17] = 1.5

    with gdsstore.enable_gpu(buffers=False), gdsstore.trace() as t:
        writes(_create(gdsstore.GDSStore(str(tmp_path / "a")), "zstd+crc32c", sharded, 0.0))
    writes(_create(LocalStore(tmp_path / "b"), "zstd+crc32c", sharded, 0.0))
    _assert_same_files(tmp_path / "a", tmp_path / "b")
    assert t.totals["batch-put"]["ops"] >= 2
    assert ("encode", "cpu-codec", "no usable GPU") in t.by_reason()  # why the device route encoded on the CPU


def test_batched_route_in_the_trace_and_empty_chunks_deleted(tmp_path: Path) -> None:
    with gdsstore.enable_gpu(buffers=False):
        z = _create(gdsstore.GDSStore(str(tmp_path)), "zstd", False, 0.0)
        z[...] = np.arange(np.prod(SHAPE), dtype="f4").reshape(SHAPE) + 1
        assert len(list((tmp_path / "c").rglob("*"))) > 12
        with gdsstore.trace() as t:
            z[0:8, 0:10] = 0.0  # now all fill: deleted
            z[8:9, 0:3] = 5.0  # part of a chunk: read, merged, rewritten
    rows = t.by_reason()
    plans = {(op, route) for (op, route, _reason) in rows if op == "write-plan"}
    assert plans == {("write-plan", "chunks")}
    assert rows[("write-plan", "chunks", "chunks encoded as one batch, published in parallel")]["ops"] == 2
    assert t.totals["batch-put"]["ops"] == 2
    # sizes live in the columns, never in the reasons
    assert not any(ch.isdigit() for (_op, _route, reason) in rows for ch in reason if _route == "batch-put")
    assert not (tmp_path / "c" / "0" / "0").exists()
    assert zarr.open_array(LocalStore(tmp_path), mode="r")[8, 2] == 5.0


def test_write_empty_chunks_true_stores_fill_chunks(tmp_path: Path) -> None:
    with gdsstore.enable_gpu(buffers=False), zarr.config.set({"array.write_empty_chunks": True}):
        z = _create(gdsstore.GDSStore(str(tmp_path)), "none", False, 0.0)
        z[0:8, 0:10] = 0.0
    assert (tmp_path / "c" / "0" / "0").stat().st_size == 8 * 10 * 4


def test_index_location_start_equals_zarr(tmp_path: Path) -> None:
    def make(store: Any) -> zarr.Array:
        sharding = ShardingCodec(chunk_shape=CHUNKS, codecs=[BytesCodec(), ZstdCodec(level=1)], index_location="start")
        return zarr.create_array(
            store, shape=SHAPE, chunks=SHARDS, dtype="f4", fill_value=0.0, serializer=sharding, compressors=None
        )

    data = np.round(np.random.default_rng(5).standard_normal(SHAPE), 2).astype("f4")
    data[0:8, 0:10] = 0  # one inner chunk absent from its shard
    with gdsstore.enable_gpu(buffers=False), gdsstore.trace() as t:
        make(gdsstore.GDSStore(str(tmp_path / "a")))[...] = data
    assert t.totals["shards"]["ops"] == 1  # the batched route, not zarr's
    make(LocalStore(tmp_path / "b"))[...] = data
    _assert_same_files(tmp_path / "a", tmp_path / "b")
    np.testing.assert_array_equal(zarr.open_array(LocalStore(tmp_path / "a"), mode="r")[...], data)


@pytest.mark.parametrize(
    ("store_kind", "reason"),
    [("memory", "store MemoryStore has no gdsstore engine backend"), ("nested", "nested sharding")],
)
def test_batches_it_cannot_take_go_to_zarr_with_the_reason(tmp_path: Path, store_kind: str, reason: str) -> None:
    data = np.arange(np.prod(SHAPE), dtype="f4").reshape(SHAPE)
    with gdsstore.enable_gpu(buffers=False):
        if store_kind == "memory":
            z = _create(MemoryStore(), "zstd", False, 0.0)
        else:
            inner = ShardingCodec(chunk_shape=(4, 5), codecs=[BytesCodec()])
            outer = ShardingCodec(chunk_shape=CHUNKS, codecs=[inner])
            z = zarr.create_array(
                gdsstore.GDSStore(str(tmp_path)), shape=SHAPE, chunks=SHARDS, dtype="f4", serializer=outer,
                compressors=None,
            )
        with gdsstore.trace() as t:
            z[...] = data
        np.testing.assert_array_equal(z[...], data)
    assert ("write-plan", "zarr-pipeline", reason) in t.by_reason()


def test_fsync_setting_syncs_every_object(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    synced: list[int] = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real(fd))[1])
    with gdsstore.enable_gpu(buffers=False):
        z = _create(gdsstore.GDSStore(str(tmp_path)), "zstd", False, 0.0)
        n0 = len(synced)
        z[...] = 1.0
        assert len(synced) == n0  # fsync off (the default): no fsync
        with gdsstore.config.set({"fsync": True}):
            z[...] = 2.0
    n_chunks = 4 * 3
    assert len(synced) - n0 >= 2 * n_chunks  # each file, and the directory of each rename


# -- the pure plan --------------------------------------------------------------------------------------


@pytest.mark.parametrize("order", ["morton", "lexicographic", "colexicographic"])
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_shard_layout_equals_zarrs(order: str, data: st.DataObject) -> None:
    from zarr.codecs.sharding import _ShardIndex

    cps = data.draw(st.tuples(st.integers(1, 5), st.integers(1, 5), st.integers(1, 3)))
    at_start = data.draw(st.booleans())
    codec = ShardingCodec(chunk_shape=(2, 2, 2), index_location="start" if at_start else "end")
    object.__setattr__(codec, "subchunk_write_order", order)
    n = int(np.prod(cps))
    lengths = data.draw(st.lists(st.integers(0, 50), min_size=n, max_size=n))
    coords = list(np.ndindex(cps))
    from zarr.core.buffer.cpu import Buffer

    shard = {c: Buffer.from_bytes(b"x" * k) if k else None for c, k in zip(coords, lengths)}
    want = codec._build_shard_layout(shard, cps)
    seq = write_plan.as_coords(codec._subchunk_order_iter(cps, order))
    by = dict(zip(coords, lengths))
    lay = write_plan.shard_layout(
        seq, np.array([by[tuple(c)] for c in seq.tolist()]), index_nbytes=codec._shard_index_size(cps),
        index_at_start=at_start,
    )
    if want is None:
        assert lay.total == 0
        return
    index, bufs = want
    assert isinstance(index, _ShardIndex)
    np.testing.assert_array_equal(lay.offsets_and_lengths, index.offsets_and_lengths)
    assert lay.total == sum(len(b) for b in bufs) + codec._shard_index_size(cps)


def test_gpu_encode_plan_names_what_cannot_batch() -> None:
    from gdsstore.gpu import codecs as gcodecs
    from gdsstore.gpu.write_gpu import gpu_encode_plan

    zstd = gcodecs.upgrade(ZstdCodec(level=1))
    assert "not batchable" in str(gpu_encode_plan([zstd, gcodecs.upgrade(GzipCodec())], [100]))
    assert gpu_encode_plan([], [100]) == (None, False, "no compressor")
    assert gpu_encode_plan([Crc32cCodec()], [100]) == (None, True, "crc32c GPU kernel")


def test_stacked_selection_rejects_0d() -> None:
    with pytest.raises(ValueError, match="0-d chunks"):
        write_plan.stacked_selection(0, ())
