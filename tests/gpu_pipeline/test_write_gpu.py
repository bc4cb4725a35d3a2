"""The write path from CuPy arrays (GPU machine): one nvCOMP batch, crc32c kernel, one copy to pinned
memory, parallel publish; plain zarr on the CPU reads every result, byte-identical where the GPU's
bytes are defined to be the CPU's (no compressor, crc32c)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import zarr
from zarr.codecs import BloscCodec, BytesCodec, Crc32cCodec, GzipCodec, TransposeCodec, ZstdCodec
from zarr.codecs.numcodecs import LZ4
from zarr.storage import LocalStore

import gdsstore
from gdsstore.gpu import nvcomp

pytestmark = pytest.mark.gpu

SHAPE = (300, 170)
CHUNKS = (64, 32)
SHARDS = (128, 64)

CHAINS: dict[str, dict[str, Any]] = {
    "none": {"compressors": None},
    "crc32c": {"compressors": [Crc32cCodec()]},
    "zstd": {"compressors": [ZstdCodec(level=1)]},
    "zstd+crc32c": {"compressors": [ZstdCodec(level=1), Crc32cCodec()]},
    "lz4": {"compressors": [LZ4()]},
    "gzip": {"compressors": [GzipCodec(level=1)]},
    "blosc": {"compressors": [BloscCodec(cname="lz4")]},
    "transpose+zstd": {"filters": [TransposeCodec(order=(1, 0))], "compressors": [ZstdCodec(level=1)]},
    # write_gpu.pack_raw swaps the bytes of the whole batch on the device
    "big-endian+zstd": {"serializer": BytesCodec(endian="big"), "compressors": [ZstdCodec(level=1)]},
}
#: Chains whose GPU output is the CPU's, byte for byte.
EXACT = {"none", "crc32c"}
#: Chains the GPU encodes (the rest encode on the CPU, with the reason in the trace).
ON_GPU = {"none", "crc32c", "zstd", "zstd+crc32c", "lz4", "transpose+zstd", "big-endian+zstd"}


def _writes(z: zarr.Array, data: Any, xp: Any) -> None:
    z[...] = data
    z[0:64, 0:32] = 0.0  # all fill: deleted
    z[70:90, 10:150] = xp.asarray(data[:20, :140] * 2)  # partial chunks: read, merged, rewritten
    z[299, :] = xp.asarray(data[0])  # an edge row (dropped axis)


def _files(root: Path) -> dict[str, bytes]:
    return {
        str(Path(d, n).relative_to(root)): Path(d, n).read_bytes() for d, _, names in os.walk(root) for n in names
    }


@pytest.mark.parametrize("sharded", [False, True], ids=["chunks", "shards"])
@pytest.mark.parametrize("name", list(CHAINS))
def test_gpu_writes_read_back_with_plain_zarr(cp: Any, tmp_path: Path, name: str, sharded: bool) -> None:
    data = np.round(np.random.default_rng(1).standard_normal(SHAPE), 2).astype("f4")
    kw: dict[str, Any] = dict(CHAINS[name], shards=SHARDS) if sharded else dict(CHAINS[name])
    with gdsstore.enable_gpu():
        z = zarr.create_array(gdsstore.GDSStore(str(tmp_path / "a")), shape=SHAPE, chunks=CHUNKS, dtype="f4", fill_value=0.0, **kw)
        with gdsstore.trace() as t:
            _writes(z, cp.asarray(data), cp)
    ref = zarr.create_array(LocalStore(tmp_path / "b"), shape=SHAPE, chunks=CHUNKS, dtype="f4", fill_value=0.0, **kw)
    _writes(ref, data, np)
    np.testing.assert_array_equal(zarr.open_array(LocalStore(tmp_path / "a"), mode="r")[...], ref[...])
    ours, theirs = _files(tmp_path / "a"), _files(tmp_path / "b")
    assert sorted(ours) == sorted(theirs)
    if name in EXACT:
        assert ours == theirs
    # one publish per write call; the all-fill write (deletes only) may record one with no bytes
    assert t.totals["batch-put"]["ops"] in (3, 4), str(t)
    if name in ON_GPU and nvcomp.nvcomp_or_none() is not None:
        assert "gpu-encode" in t.routes, str(t)
    else:
        assert "cpu-codec" in t.routes, str(t)


def test_gpu_write_of_many_windows_overlaps_publish(cp: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from gdsstore.gpu import write as gwrite

    monkeypatch.setattr(gwrite, "WRITE_WINDOW_BYTES", 4 * 64 * 32 * 4)  # many windows in one batch
    monkeypatch.setattr(gwrite, "WRITE_DEVICE_WINDOW_BYTES", 4 * 64 * 32 * 4)
    data = cp.asarray(np.round(np.random.default_rng(2).standard_normal(SHAPE), 2).astype("f4"))
    with gdsstore.enable_gpu():
        z = zarr.create_array(
            gdsstore.GDSStore(str(tmp_path)), shape=SHAPE, chunks=CHUNKS, dtype="f4", compressors=[ZstdCodec()]
        )
        with gdsstore.trace() as t:
            z[...] = data
    np.testing.assert_array_equal(zarr.open_array(LocalStore(tmp_path), mode="r")[...], data.get())
    assert t.totals["batch-put"]["ops"] > 1


@pytest.mark.parametrize("fill, write_empty", [(1.5, False), (0.0, True)], ids=["nonzero-fill", "write-empty-chunks"])
def test_gpu_write_keeps_zarrs_empty_chunk_rule(cp: Any, tmp_path: Path, fill: float, write_empty: bool) -> None:
    """The packed route's one-reduction emptiness check applies only to an all-zero fill with
    write_empty_chunks off; otherwise zarr's rule decides, and the files are zarr's."""
    data = np.round(np.random.default_rng(3).standard_normal(SHAPE), 2).astype("f4")
    data[0:64, 0:32] = fill
    kw: dict[str, Any] = {"compressors": None, "fill_value": fill, "config": {"write_empty_chunks": write_empty}}
    with gdsstore.enable_gpu():
        z = zarr.create_array(gdsstore.GDSStore(str(tmp_path / "a")), shape=SHAPE, chunks=CHUNKS, dtype="f4", **kw)
        z[...] = cp.asarray(data)
    ref = zarr.create_array(LocalStore(tmp_path / "b"), shape=SHAPE, chunks=CHUNKS, dtype="f4", **kw)
    ref[...] = data
    assert _files(tmp_path / "a") == _files(tmp_path / "b")
    assert ("c/0/0" in _files(tmp_path / "a")) == write_empty
