"""GDSCodecPipeline reads equal zarr's own for random selections (host buffers: no GPU needed)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import zarr
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from zarr.codecs import Crc32cCodec, GzipCodec, ZstdCodec
from zarr.storage import LocalStore, MemoryStore

import gdsstore
from gdsstore import policy
from gdsstore.engine import batch
from gdsstore.gpu import pipeline as gpipe
from gdsstore.gpu import plan as gplan

SHAPE = (50, 37)
CHUNKS = (8, 10)
FILL = 3.5

COMPRESSORS: dict[str, Any] = {
    "none": None,
    "zstd+crc32c": [ZstdCodec(level=1), Crc32cCodec()],
    "gzip": [GzipCodec(level=1)],
}


def _fill_array(z: zarr.Array) -> np.ndarray:
    rng = np.random.default_rng(1)
    ref = np.full(SHAPE, FILL, dtype="f4")
    # Only part of the array is written: the rest stays missing chunks (or missing shards).
    block = rng.standard_normal((30, 25)).astype("f4")
    block[8:16, :10] = FILL  # an all-fill chunk: zarr does not store it
    ref[3:33, 2:27] = block
    z[3:33, 2:27] = block
    z[45:50, 30:37] = 7.0  # a partial edge chunk
    ref[45:50, 30:37] = 7.0
    return ref


def _make(store: Any, compressors: Any, sharded: bool) -> np.ndarray:
    kw: dict[str, Any] = {"shards": (16, 20)} if sharded else {}
    z = zarr.create_array(
        store, shape=SHAPE, chunks=CHUNKS, dtype="f4", fill_value=FILL, compressors=compressors, **kw
    )
    return _fill_array(z)


CASES = [(c, s, k) for c in COMPRESSORS for s in (False, True) for k in ("gds", "local", "memory")]


@pytest.fixture(scope="module")
def arrays(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, bool, str], tuple[Any, np.ndarray]]:
    out = {}
    for comp, sharded, kind in CASES:
        root = tmp_path_factory.mktemp(f"{comp}-{sharded}-{kind}")
        store: Any = (
            gdsstore.GDSStore(str(root))
            if kind == "gds"
            else LocalStore(root)
            if kind == "local"
            else MemoryStore()
        )
        ref = _make(store, COMPRESSORS[comp], sharded)
        out[(comp, sharded, kind)] = (store, ref)
    return out


def _dim_selector(n: int) -> st.SearchStrategy[Any]:
    ints = st.integers(-n, n - 1)
    slices = st.builds(
        slice,
        st.none() | st.integers(-n - 2, n + 2),
        st.none() | st.integers(-n - 2, n + 2),
        st.none() | st.integers(1, 4),
    )
    return ints | slices


basic = st.tuples(*(_dim_selector(n) for n in SHAPE))
orthogonal = st.tuples(
    *(st.lists(st.integers(0, n - 1), min_size=1, max_size=6).map(np.array) for n in SHAPE)
)
coords = st.integers(1, 12).flatmap(
    lambda k: st.tuples(
        *(st.lists(st.integers(0, n - 1), min_size=k, max_size=k).map(np.array) for n in SHAPE)
    )
)


def _open(store: Any) -> zarr.Array:
    return zarr.open_array(store, mode="r")


@pytest.mark.parametrize(("comp", "sharded", "kind"), CASES)
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sel=basic, osel=orthogonal, csel=coords)
def test_random_selections_equal_zarr(
    arrays: dict[Any, Any], comp: str, sharded: bool, kind: str, sel: Any, osel: Any, csel: Any
) -> None:
    store, ref = arrays[(comp, sharded, kind)]
    plain = _open(store)
    with gdsstore.enable_gpu(buffers=False):
        ours = _open(store)
        assert type(ours._async_array.codec_pipeline).__name__ == "GDSCodecPipeline"
        np.testing.assert_array_equal(ours[sel], plain[sel])
        np.testing.assert_array_equal(ours[sel], ref[sel])
        np.testing.assert_array_equal(ours.oindex[osel], plain.oindex[osel])
        np.testing.assert_array_equal(ours.vindex[csel], plain.vindex[csel])


@pytest.mark.parametrize(("comp", "sharded", "kind"), [c for c in CASES if c[2] != "memory"])
def test_full_read_and_missing_status(arrays: dict[Any, Any], comp: str, sharded: bool, kind: str) -> None:
    store, ref = arrays[(comp, sharded, kind)]
    with gdsstore.enable_gpu(buffers=False):
        z = _open(store)
        np.testing.assert_array_equal(z[:], ref)
        # A region with no stored chunk at all reads as the fill value.
        np.testing.assert_array_equal(z[40:44, 0:5], np.full((4, 5), FILL, "f4"))


# The engine's batch into host memory, and who ran it (the native core where it is built).
HOST_BATCH = (
    "batch of reads into host buffer; "
    f"{policy.decide_local_batch(core_missing=batch._core_missing(), reads=1).reason}"
)

def test_gdsstore_reads_go_through_the_engine(arrays: dict[Any, Any]) -> None:
    store, ref = arrays[("zstd+crc32c", False, "gds")]
    with gdsstore.enable_gpu(buffers=False):
        z = _open(store)
        with gdsstore.trace() as t:
            np.testing.assert_array_equal(z[:], ref)
    assert "posix" in t.routes  # the engine's route for host buffers
    assert t.totals["cpu-codec"]["ops"] >= 1
    # one batch, reading every stored chunk once: missing chunks cost a size lookup only
    stored = [k for k in store.backend.list("") if k.startswith("c/")]
    reads = {r: v for (op, route, r), v in t.by_reason().items() if op == "read" and route == "posix"}
    assert list(reads) == [HOST_BATCH]
    assert sum(v["ops"] for v in reads.values()) == 1
    assert sum(v["bytes"] for v in reads.values()) == sum(store.backend.size(k) for k in stored)


def test_sharded_reads_coalesce_inner_chunks(arrays: dict[Any, Any]) -> None:
    store, ref = arrays[("none", True, "gds")]
    with gdsstore.enable_gpu(buffers=False):
        z = _open(store)
        with gdsstore.trace() as t:
            np.testing.assert_array_equal(z[0:16, 0:20], ref[0:16, 0:20])
    # one shard: one batch of index reads + one batch holding one coalesced read of its inner chunks
    reasons = sorted(r for (op, route, r) in t.by_reason() if op == "read")
    assert reasons == [HOST_BATCH], reasons
    assert t.totals["posix"]["ops"] == 2


def test_read_missing_chunks_false_still_raises(tmp_path: Path) -> None:
    store = gdsstore.GDSStore(str(tmp_path / "a"))
    zarr.create_array(store, shape=(10,), chunks=(5,), dtype="i4", fill_value=0)
    with gdsstore.enable_gpu(buffers=False), zarr.config.set({"array.read_missing_chunks": False}):
        z = _open(store)
        with pytest.raises(zarr.errors.ChunkNotFoundError, match=r"chunk 'c/0' \(grid position \(0,\)\)"):
            z[:]


def test_writes_through_the_pipeline_are_readable_by_zarr(tmp_path: Path) -> None:
    data = np.arange(50 * 37, dtype="f4").reshape(SHAPE)
    for sharded in (False, True):
        root = tmp_path / f"w{sharded}"
        kw: dict[str, Any] = {"shards": (16, 20)} if sharded else {}
        with gdsstore.enable_gpu(buffers=False):
            z = zarr.create_array(
                gdsstore.GDSStore(str(root)),
                shape=SHAPE,
                chunks=CHUNKS,
                dtype="f4",
                compressors=[ZstdCodec()],
                **kw,
            )
            z[:] = data
            z[5:9, 3:4] = -1
        data[5:9, 3:4] = -1
        np.testing.assert_array_equal(zarr.open_array(LocalStore(root), mode="r")[:], data)


def test_delegates_when_store_path_is_not_a_byte_getter() -> None:
    pipe = gpipe.GDSCodecPipeline.from_codecs([zarr.codecs.BytesCodec()])
    assert pipe.read_plan(object())[0] == "delegate"


def test_coalesce_groups_adjacent_ranges() -> None:
    from gdsstore.engine.ranges import coalesce_ranges

    groups = coalesce_ranges([(100, 200), (0, 50), (60, 100), (10_000, 10_010)], max_gap=20, max_bytes=1000)
    assert [(a, b, sorted(m)) for a, b, m in groups] == [(0, 200, [0, 1, 2]), (10_000, 10_010, [3])]


def test_windows_split_by_bytes() -> None:
    assert gplan.split_windows([10, 10, 10, 10, 10], 25) == [range(0, 2), range(2, 4), range(4, 5)]
    assert gplan.split_windows([100], 25) == [range(0, 1)]
    assert gplan.split_windows([], 25) == []


def test_small_windows_give_the_same_result(arrays: dict[Any, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    # Many windows: exercises the read-ahead of window k+1 while k decodes.
    monkeypatch.setattr(gplan, "WINDOW_BYTES", 1024)
    for sharded in (False, True):
        store, ref = arrays[("zstd+crc32c", sharded, "gds")]
        with gdsstore.enable_gpu(buffers=False):
            np.testing.assert_array_equal(_open(store)[:], ref)


def test_pipeline_is_immutable_hashable_and_pickles() -> None:
    """dask ships the pipeline to worker processes: it must pickle, and stay equal and immutable."""
    import pickle

    from zarr.codecs import BytesCodec, ZstdCodec

    from gdsstore.gpu.pipeline import GDSCodecPipeline

    p = GDSCodecPipeline.from_codecs([BytesCodec(), ZstdCodec(level=3)])
    q = pickle.loads(pickle.dumps(p))
    assert q == p and hash(q) == hash(p) and q.codecs == p.codecs
    with pytest.raises(AttributeError, match="immutable"):
        q.delegate = p.delegate  # type: ignore[misc]


def test_zarr_v2_filters_go_to_zarrs_pipeline(tmp_path: Path) -> None:
    """A zarr v2 array with numcodecs filters (Delta) and a compressor: reads under the pipeline equal
    zarr's (they failed on the stored size: the filters were taken for no codec), the trace says who read
    them and why, and a write through the pipeline reads back with plain zarr."""
    from numcodecs import Delta, Zstd

    want = np.arange(100 * 80, dtype="<i4").reshape(100, 80)
    kw: dict[str, Any] = {"chunks": (32, 32), "dtype": "<i4", "zarr_format": 2,
                          "filters": [Delta(dtype="<i4")], "compressors": Zstd(level=1)}
    zarr.create_array(str(tmp_path / "a.zarr"), shape=want.shape, **kw)[:] = want
    with gdsstore.enable_pipeline(), gdsstore.trace() as t:
        got = zarr.open_array(gdsstore.GDSStore(str(tmp_path / "a.zarr")), mode="r")[:]
    np.testing.assert_array_equal(got, want)
    assert ("read-plan", "zarr-pipeline", "zarr v2 filters") in t.by_reason()
    with gdsstore.enable_pipeline():
        zarr.create_array(gdsstore.GDSStore(str(tmp_path / "b.zarr")), shape=want.shape, **kw)[:] = want
    np.testing.assert_array_equal(zarr.open_array(str(tmp_path / "b.zarr"), mode="r")[:], want)


ROUTES: dict[str, tuple[dict[str, Any], tuple[str, str], tuple[str, str]]] = {
    "chunks": (
        {"compressors": [ZstdCodec()]},
        ("chunks", "whole chunk objects, batched"),
        ("chunks", "chunks encoded as one batch, published in parallel"),
    ),
    "shards": (
        {"shards": (16, 20), "compressors": [ZstdCodec()]},
        ("shards", "sharded: batched index reads + coalesced inner-chunk ranges"),
        ("shards", "sharded: inner chunks encoded as one batch, each shard written once"),
    ),
    "nested": (
        {"serializer": "nested", "compressors": None},
        ("delegate", "nested sharding"),
        ("zarr-pipeline", "nested sharding"),
    ),
    "outside": (
        {"serializer": "sharding", "compressors": [ZstdCodec()]},
        ("delegate", "codecs outside the sharding codec"),
        ("zarr-pipeline", "codecs outside the sharding codec"),
    ),
}


@pytest.mark.parametrize("name", sorted(ROUTES))
@pytest.mark.filterwarnings("ignore:Combining a `sharding_indexed` codec")
def test_read_and_write_routes_of_one_array_come_from_the_policy(tmp_path: Path, name: str) -> None:
    """One array's read route (``read_plan``) and write route (the trace's ``write-plan`` row) are the
    policy's two ladders over the facts of the same codecs and store."""
    from zarr.codecs import BytesCodec, ShardingCodec
    from zarr.storage import StorePath

    kw, read, write = ROUTES[name]
    kw = dict(kw)
    if kw.get("serializer") == "nested":
        inner = ShardingCodec(chunk_shape=(4, 5), codecs=[BytesCodec()])
        kw["serializer"] = ShardingCodec(chunk_shape=(8, 10), codecs=[inner])
    elif kw.get("serializer") == "sharding":
        kw["serializer"] = ShardingCodec(chunk_shape=(8, 10), codecs=[BytesCodec()])
    data = np.arange(32 * 40, dtype="f4").reshape(32, 40)
    with gdsstore.enable_pipeline():
        chunks = (16, 20) if "serializer" in kw else (8, 10)
        z = zarr.create_array(gdsstore.GDSStore(str(tmp_path)), shape=data.shape, chunks=chunks, dtype="f4", **kw)
        pipeline = z._async_array.codec_pipeline
        assert isinstance(pipeline, gpipe.GDSCodecPipeline)
        assert pipeline.read_plan(StorePath(z.store, "c/0/0")) == read
        with gdsstore.trace() as t:
            z[...] = data
        np.testing.assert_array_equal(z[...], data)
    assert ("write-plan", *write) in t.by_reason()
