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

    with gdsstore.enable_gpu(), gdsstore.trace() as t:
        # Arrays pick their codec pipeline when opened: open under enable_gpu() (documented).
        z = zarr.open_array(GDSStore(str(tmp_path), read_only=True), mode="r")
        x = z[:]
    assert isinstance(x, cp.ndarray)
    cp.testing.assert_array_equal(x, cp.asarray(data))

    reads = [e for e in t.events if e.op == "read"]
    assert reads, t
    # Only engine routes read bytes; no chunk fell back to zarr's own per-chunk pipeline.
    assert {e.route for e in reads} <= ENGINE_ROUTES, t
    assert "zarr-pipeline" not in t.routes, t
    # Every byte of every chunk/shard file passed through the engine, and reached the device:
    # either read straight into device memory or staged in pinned memory and copied (h2d events).
    # (Uncompressed: chunk payloads are the data's bytes; shard files also hold an index, read to host.)
    chunk_bytes = sum(os.path.getsize(p) for p in _chunk_files(tmp_path))
    assert sum(e.nbytes for e in reads) >= chunk_bytes, t
    device_bytes = sum(e.nbytes for e in reads if e.device is not None)
    device_bytes += sum(e.nbytes for e in t.events if e.op == "h2d" and e.device is not None)
    assert device_bytes >= data.nbytes, t


def test_enable_gpu_writes_from_device(tmp_path: Path, cp: Any) -> None:
    data = cp.arange(100 * 30, dtype="i4").reshape(100, 30)
    store = GDSStore(str(tmp_path))
    with gdsstore.enable_gpu():
        z = zarr.create_array(store, shape=data.shape, chunks=(25, 30), dtype="i4", compressors=None)
        with gdsstore.trace() as t:
            z[...] = data
    writes = [e for e in t.events if e.op == "write"]
    # the pipeline's batched write: one device-to-host copy per pinned slot, then engine writes
    assert writes and {e.route for e in writes} <= ENGINE_ROUTES | {"batch-put"}
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
