"""zarr on GPU buffers through GDSStore: device arrays out, and only engine routes in the trace."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import zarr

import gdsstore
from gdsstore import GDSStore

pytestmark = pytest.mark.gpu

ENGINE_ROUTES = {"posix", "cufile"}


def _chunk_files(root: Path) -> set[str]:
    return {os.path.join(dirpath, name) for dirpath, _, files in os.walk(root / "c") for name in files}


@pytest.mark.parametrize(
    "layout",
    [
        {"chunks": (64, 64), "compressors": None},
        {"chunks": (32, 32), "shards": (128, 128), "compressors": None},
    ],
    ids=["chunks", "shards"],
)
def test_enable_gpu_reads_cupy_through_engine(tmp_path: Path, cp: Any, layout: dict[str, Any]) -> None:
    data = np.arange(256 * 192, dtype="f4").reshape(256, 192)
    store = GDSStore(str(tmp_path))
    zarr.create_array(store, shape=data.shape, dtype="f4", **layout)[...] = data
    z = zarr.open_array(GDSStore(str(tmp_path), read_only=True), mode="r")

    with gdsstore.enable_gpu(), gdsstore.trace() as t:
        x = z[:]
    assert isinstance(x, cp.ndarray)
    cp.testing.assert_array_equal(x, cp.asarray(data))

    reads = [e for e in t.events if e.op == "read"]
    assert reads, t
    assert {e.route for e in reads} <= ENGINE_ROUTES, t
    chunk_dir = str(tmp_path / "c") + os.sep
    chunk_reads = [e for e in reads if e.path.startswith(chunk_dir)]
    # Every chunk/shard file was read, into device memory, by the engine.
    assert {e.path for e in chunk_reads} == _chunk_files(tmp_path), t
    assert all(e.device is not None for e in chunk_reads), t


def test_enable_gpu_writes_from_device(tmp_path: Path, cp: Any) -> None:
    data = cp.arange(100 * 30, dtype="i4").reshape(100, 30)
    store = GDSStore(str(tmp_path))
    with gdsstore.enable_gpu():
        z = zarr.create_array(store, shape=data.shape, chunks=(25, 30), dtype="i4", compressors=None)
        with gdsstore.trace() as t:
            z[...] = data
    writes = [e for e in t.events if e.op == "write"]
    assert writes and {e.route for e in writes} <= ENGINE_ROUTES
    assert any(e.device is not None for e in writes)
    # Host read-back (no GPU config) sees the same values.
    np.testing.assert_array_equal(zarr.open_array(store, mode="r")[...], cp.asnumpy(data))


def test_device_prototype_allocates_on_device(tmp_path: Path, cp: Any) -> None:
    from zarr.core.buffer import gpu
    from zarr.core.buffer.core import BufferPrototype

    store = GDSStore(str(tmp_path))
    store.set_sync("k", gpu.Buffer.from_bytes(b"abcdefgh"))
    proto = BufferPrototype(buffer=gpu.Buffer, nd_buffer=gpu.NDBuffer)
    with gdsstore.trace() as t:
        got = store.get_sync("k", prototype=proto)
    assert got is not None and isinstance(got.as_array_like(), cp.ndarray)
    assert got.to_bytes() == b"abcdefgh"
    # Straight into device memory: the engine read carries the device ordinal (no host read + copy).
    assert [e.device for e in t.events if e.op == "read"] == [cp.cuda.Device().id]
