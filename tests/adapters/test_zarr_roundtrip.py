"""Arrays written through GDSStore are byte-identical on disk to zarr's LocalStore, and read back equal."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import zarr
from zarr.codecs import (
    BloscCodec,
    BytesCodec,
    Crc32cCodec,
    GzipCodec,
    ZstdCodec,
)
from zarr.storage import LocalStore

import gdsstore
from gdsstore import GDSStore


def _tree(root: Path) -> dict[str, bytes]:
    out = {}
    for dirpath, _, files in os.walk(root):
        for name in files:
            p = Path(dirpath, name)
            out[p.relative_to(root).as_posix()] = p.read_bytes()
    return out


def _data(dtype: str, shape: tuple[int, ...]) -> np.ndarray:
    rng = np.random.default_rng(42)
    n = int(np.prod(shape))
    dt = np.dtype(dtype)
    if dt.kind == "b":
        return (rng.integers(0, 2, n) == 1).reshape(shape)
    if dt.kind in "iu":
        info = np.iinfo(dt)
        return rng.integers(max(info.min, -1000), min(info.max, 1000), n).astype(dt).reshape(shape)
    if dt.kind == "c":
        return (rng.standard_normal(n) + 1j * rng.standard_normal(n)).astype(dt).reshape(shape)
    # Runs of equal values so that compressors have something to do.
    return np.repeat(rng.standard_normal(n // 4 + 1), 4)[:n].astype(dt).reshape(shape)


CODECS: dict[str, dict[str, Any]] = {
    "none": {"compressors": None},
    "zstd": {"compressors": ZstdCodec(level=3)},
    "gzip": {"compressors": GzipCodec(level=5)},
    "blosc": {"compressors": BloscCodec(cname="lz4", clevel=5, shuffle="shuffle")},
    "crc32c": {"compressors": [ZstdCodec(level=1), Crc32cCodec()]},
    "big-endian": {"filters": None, "serializer": BytesCodec(endian="big"), "compressors": None},
    "sharding": {"shards": "auto"},  # filled in per case
}

CASES = [
    ("uint8", (37,), (8,)),
    ("int16", (20, 33), (7, 10)),
    ("float32", (64, 48), (16, 16)),
    ("float64", (9, 10, 11), (4, 5, 3)),
    ("complex64", (30,), (30,)),
    ("bool", (17, 5), (6, 5)),
    ("int64", (100,), (1,)),  # many tiny chunks
]


def _create(store: Any, data: np.ndarray, chunks: tuple[int, ...], codec: str) -> zarr.Array:
    kwargs = dict(CODECS[codec])
    if codec == "sharding":
        kwargs = {"shards": tuple(c * 2 for c in chunks), "compressors": ZstdCodec(level=1)}
    z = zarr.create_array(
        store,
        shape=data.shape,
        chunks=chunks,
        dtype=data.dtype,
        fill_value=0,
        attributes={"codec": codec, "units": "m/s"},
        **kwargs,
    )
    z[...] = data
    return z


@pytest.mark.parametrize("codec", list(CODECS))
@pytest.mark.parametrize(("dtype", "shape", "chunks"), CASES, ids=[c[0] for c in CASES])
def test_same_bytes_as_localstore(
    tmp_path: Path, codec: str, dtype: str, shape: tuple[int, ...], chunks: tuple[int, ...]
) -> None:
    data = _data(dtype, shape)
    _create(LocalStore(tmp_path / "local"), data, chunks, codec)
    _create(GDSStore(str(tmp_path / "gds")), data, chunks, codec)

    local, ours = _tree(tmp_path / "local"), _tree(tmp_path / "gds")
    assert sorted(ours) == sorted(local)
    assert len(ours) > 1  # metadata and at least one chunk/shard
    for key in local:
        a, b = ours[key], local[key]
        if codec == "gzip" and key.startswith("c/"):
            # A gzip header holds its write time (bytes 4-7): equal up to the second it was written in.
            a, b = a[:4] + a[8:], b[:4] + b[8:]
        assert a == b, key

    # Read back through GDSStore (and its data through LocalStore too: same format both ways).
    back = zarr.open_array(GDSStore(str(tmp_path / "gds"), read_only=True), mode="r")
    np.testing.assert_array_equal(back[...], data)
    np.testing.assert_array_equal(zarr.open_array(LocalStore(tmp_path / "gds"), mode="r")[...], data)
    # A partial selection (touches edge chunks, and partial shard reads for sharding).
    sel = tuple(slice(1, max(2, s - 1)) for s in shape)
    np.testing.assert_array_equal(back[sel], data[sel])


def test_sharded_partial_read_uses_coalesced_engine_reads(tmp_path: Path) -> None:
    data = np.arange(64 * 64, dtype="f4").reshape(64, 64)
    store = GDSStore(str(tmp_path))
    zarr.create_array(store, shape=data.shape, chunks=(8, 8), shards=(64, 64), dtype="f4", compressors=None)[
        ...
    ] = data
    z = zarr.open_array(store, mode="r")
    with gdsstore.trace() as t:
        np.testing.assert_array_equal(z[0:16, 0:16], data[0:16, 0:16])
    reads = [e for e in t.events if e.op == "read" and e.path.endswith(os.path.join("c", "0", "0"))]
    # The shard index, then one coalesced read for the 4 chunks asked for (not one read per chunk).
    assert len(reads) == 2, t
    assert reads[1].nbytes == 4 * 8 * 8 * 4
    assert t.routes == {"posix"}


def test_overwrite_and_delete_chunks(tmp_path: Path) -> None:
    store = GDSStore(str(tmp_path))
    z = zarr.create_array(store, shape=(10,), chunks=(5,), dtype="i4", fill_value=7, compressors=None)
    z[:] = np.arange(10)
    assert sorted(os.listdir(tmp_path / "c")) == ["0", "1"]
    z[:5] = 7  # all fill value: zarr deletes the chunk (delete_sync / delete)
    assert sorted(os.listdir(tmp_path / "c")) == ["1"]
    np.testing.assert_array_equal(z[:], [7] * 5 + list(range(5, 10)))


def test_groups_and_listing(tmp_path: Path) -> None:
    store = GDSStore(str(tmp_path))
    root = zarr.open_group(store, mode="w", attributes={"title": "t"})
    root.create_group("a").create_array("x", shape=(3,), dtype="u1")[:] = [1, 2, 3]
    root.create_array("y", shape=(2,), dtype="f8")[:] = [0.5, 1.5]
    g = zarr.open_group(GDSStore(str(tmp_path), read_only=True), mode="r")
    assert g.attrs["title"] == "t"
    assert sorted(g.group_keys()) == ["a"] and sorted(g.array_keys()) == ["y"]
    assert g["a/x"][:].tolist() == [1, 2, 3]
    # mode="w" on an existing path replaces the node
    zarr.open_group(store, path="a", mode="w")
    assert "x" not in zarr.open_group(store, path="a", mode="r")


def test_read_only_store_refuses_zarr_writes(tmp_path: Path) -> None:
    zarr.create_array(GDSStore(str(tmp_path)), shape=(4,), dtype="u1")[:] = 1
    ro = GDSStore(str(tmp_path), read_only=True)
    with pytest.raises(ValueError, match="read-only"):
        zarr.open_array(ro, mode="a")
    before = _tree(tmp_path)
    z = zarr.open_array(ro, mode="r")
    with pytest.raises(ValueError, match="read-only"):
        z[:] = 2
    assert _tree(tmp_path) == before
