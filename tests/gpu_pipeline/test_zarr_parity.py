"""What zarr's own pipeline does, the pipeline does too (issue 35, from zarr-python's and xarray's suites run under
``enable_pipeline()``): variable-length values, ``write_empty_chunks=False`` on zarr v2, the sharding codec's
``subchunk_write_order``, and codec objects that stay zarr's own. Each case is compared with zarr's own
pipeline doing the same (``FusedCodecPipeline``, outside ``enable_pipeline()``), or with the values written."""

from __future__ import annotations

import pickle
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pytest
import zarr
from zarr.codecs import BloscCodec, BytesCodec, Crc32cCodec, ShardingCodec, ZstdCodec

import gdsstore
from gdsstore import GDSStore


def _mode(pipeline: bool) -> AbstractContextManager[Any]:
    return gdsstore.enable_pipeline() if pipeline else nullcontext()


def _stored(root: Path) -> list[str]:
    """The chunk objects under an array's root (metadata left out)."""
    return sorted(
        str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and not p.name.startswith((".z", "zarr.json"))
    )


# -- variable-length values: no size is known before a chunk is read -------------------------------------

VLEN: dict[str, tuple[str, np.ndarray]] = {
    "str": ("str", np.array(["a", "bb", "", "dddd", "é€𝄞", "ffffff"], dtype=object)),
    "bytes": ("bytes", np.array([b"a", b"bb", b"", b"dddd", b"\x00\xff", b"ffffff"], dtype=object)),
}


@pytest.mark.parametrize("sharded", [False, True], ids=["chunks", "shards"])
@pytest.mark.parametrize("kind", sorted(VLEN))
@pytest.mark.parametrize("writer", ["zarr", "pipeline"])
def test_vlen_values_without_compressor_read_back(tmp_path: Path, kind: str, writer: str, sharded: bool) -> None:
    dtype, values = VLEN[kind]
    kw: dict[str, Any] = {"shards": (6,)} if sharded else {}
    with _mode(writer == "pipeline"):
        z = zarr.create_array(GDSStore(tmp_path / "a"), shape=(6,), chunks=(3,), dtype=dtype, compressors=None, **kw)
        z[:] = values
    with gdsstore.enable_pipeline():
        got = zarr.open_array(GDSStore(tmp_path / "a"), mode="r")
        assert list(np.asarray(got[:])) == list(values)
        assert list(np.asarray(got[2:5])) == list(values[2:5])


# (0-d variable-length bytes: zarr's own vlen-bytes codec cannot encode them, numcodecs gets an array)
@pytest.mark.parametrize(("dtype", "value"), [("str", "hello"), ("f8", 3.5)])
def test_zero_dimensional_arrays_without_compressor_read_back(tmp_path: Path, dtype: str, value: Any) -> None:
    with gdsstore.enable_pipeline():
        z = zarr.create_array(GDSStore(tmp_path / "a"), shape=(), dtype=dtype, compressors=None)
        z[...] = value
        assert zarr.open_array(GDSStore(tmp_path / "a"), mode="r")[...] == value


# -- write_empty_chunks=False: chunks all fill value are not stored, and are deleted when overwritten -----

EMPTY_CASES = [
    pytest.param(2, "auto", id="v2-default-compressor"),
    pytest.param(2, None, id="v2-no-compressor"),
    pytest.param(3, "auto", id="v3-default-compressor"),
]


def _empty_chunk_writes(root: Path, zarr_format: Literal[2, 3], compressors: Any) -> list[list[str]]:
    """The chunk objects stored after each step of writes with ``write_empty_chunks=False``, fill 0."""
    z = zarr.create_array(
        GDSStore(root), shape=(8, 4), chunks=(2, 4), dtype="f4", fill_value=0, zarr_format=zarr_format,
        compressors=compressors, config={"write_empty_chunks": False},
    )
    steps = []
    z[:] = np.array([[0] * 4, [0] * 4, [1, 2, 0, 0], [0] * 4, [0] * 4, [0] * 4, [0, 0, 0, 3], [0] * 4], "f4")
    steps.append(_stored(root))
    z[2:4] = 0  # a stored chunk overwritten with the fill value: zarr deletes it
    steps.append(_stored(root))
    z[0, 1] = 5  # a chunk written in part
    steps.append(_stored(root))
    return steps


@pytest.mark.parametrize(("zarr_format", "compressors"), EMPTY_CASES)
def test_write_empty_chunks_false_stores_what_zarr_stores(tmp_path: Path, zarr_format: Literal[2, 3], compressors: Any) -> None:
    expected = _empty_chunk_writes(tmp_path / "zarr", zarr_format, compressors)
    with gdsstore.enable_pipeline():
        got = _empty_chunk_writes(tmp_path / "pipeline", zarr_format, compressors)
    assert got == expected
    assert len(expected[0]) == 2 and len(expected[1]) == 1  # the case is the one it means to be


# -- the sharding codec's subchunk_write_order ------------------------------------------------------------


@pytest.mark.parametrize("order", ["morton", "lexicographic", "colexicographic"])
def test_shards_are_written_in_the_codecs_subchunk_order(tmp_path: Path, order: str) -> None:
    data = np.arange(12 * 8, dtype="i4").reshape(12, 8)
    blobs = {}
    for writer in ("zarr", "pipeline"):
        sharding = ShardingCodec(
            chunk_shape=(2, 2), codecs=[BytesCodec(), ZstdCodec(level=1)], subchunk_write_order=order  # type: ignore[arg-type]
        )
        with _mode(writer == "pipeline"):
            z = zarr.create_array(
                GDSStore(tmp_path / writer), shape=data.shape, chunks=(12, 8), dtype="i4", serializer=sharding,
                compressors=None,
            )
            z[:] = data
        blobs[writer] = (tmp_path / writer / "c" / "0" / "0").read_bytes()
    assert blobs["pipeline"] == blobs["zarr"]


def test_upgraded_sharding_codec_keeps_its_subchunk_write_order() -> None:
    from gdsstore.gpu.codecs import upgrade

    codec = ShardingCodec(chunk_shape=(2,), codecs=[BytesCodec(), ZstdCodec()], subchunk_write_order="lexicographic")
    assert upgrade(codec).subchunk_write_order == "lexicographic"


# -- codec objects stay zarr's own ------------------------------------------------------------------------

SHARDING = ShardingCodec(chunk_shape=(2, 2), codecs=[BytesCodec(), ZstdCodec(level=3)], index_codecs=[BytesCodec(), Crc32cCodec()])


def test_a_pickled_sharding_codec_comes_back_equal_under_the_pipeline() -> None:
    with gdsstore.enable_pipeline():
        back = pickle.loads(pickle.dumps(SHARDING))
    assert back == SHARDING
    assert [type(c) for c in back.codecs] == [type(c) for c in SHARDING.codecs]


CODEC_ARRAYS: dict[str, Callable[[Path], Any]] = {
    "zstd": lambda p: zarr.create_array(GDSStore(p), shape=(8,), chunks=(4,), dtype="f4", compressors=[ZstdCodec(level=3)]),
    "blosc": lambda p: zarr.create_array(GDSStore(p), shape=(8,), chunks=(4,), dtype="f4", compressors=[BloscCodec()]),
    "sharded": lambda p: zarr.create_array(GDSStore(p), shape=(4, 4), chunks=(4, 4), dtype="f4", serializer=SHARDING),
    "v2": lambda p: zarr.create_array(GDSStore(p), shape=(8,), chunks=(4,), dtype="f4", zarr_format=2),
}


@pytest.mark.parametrize("name", sorted(CODEC_ARRAYS))
def test_codecs_parsed_under_the_pipeline_equal_zarrs_own(tmp_path: Path, name: str) -> None:
    CODEC_ARRAYS[name](tmp_path / "a")
    plain = zarr.open_array(GDSStore(tmp_path / "a"), mode="r")
    with gdsstore.enable_pipeline():
        ours = zarr.open_array(GDSStore(tmp_path / "a"), mode="r")
        created = CODEC_ARRAYS[name](tmp_path / "b")
    for got in (ours, created):
        assert got.metadata == plain.metadata
        assert (got.serializer, got.compressors, got.filters) == (plain.serializer, plain.compressors, plain.filters)
        assert [type(c) for c in got.compressors] == [type(c) for c in plain.compressors]


def test_xarray_compressor_encoding_round_trips_under_the_pipeline(tmp_path: Path) -> None:
    """xarray's ``ZarrBase.test_compressor_encoding``: the encoding read back equals the one written."""
    xr = pytest.importorskip("xarray")
    encoding = {"var": {"compressors": (ZstdCodec(level=3),)}}
    with gdsstore.enable_pipeline():
        xr.Dataset({"var": ("x", np.arange(10.0))}).to_zarr(tmp_path / "d.zarr", encoding=encoding, consolidated=False)
        with xr.open_zarr(tmp_path / "d.zarr", consolidated=False) as ds:
            assert ds["var"].encoding["compressors"] == encoding["var"]["compressors"]


def test_upgraded_blosc_keeps_its_open_settings() -> None:
    """zarr leaves blosc's ``typesize`` and ``shuffle`` open until the dtype is known; the pipeline's copy too."""
    from gdsstore.gpu import codecs as gcodecs

    codec = BloscCodec(cname="lz4", clevel=3)
    ours = gcodecs.upgrade(codec)
    assert type(ours) is gcodecs.BloscCodec
    assert (ours.typesize, ours.shuffle, ours.cname, ours.clevel) == (codec.typesize, codec.shuffle, codec.cname, codec.clevel)
