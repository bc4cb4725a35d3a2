"""icechunk repositories through gdsstore's codec pipeline: arrays written and read in an icechunk session
with ``gdsstore.enable_gpu()`` (host buffers here, device buffers on the GPU machine), versioned by commits,
and equal to what plain zarr reads from the same snapshot."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

icechunk = pytest.importorskip("icechunk")
import zarr  # noqa: E402

import gdsstore  # noqa: E402

DATA = np.arange(128 * 96, dtype="f4").reshape(128, 96)


def _write(repo: Any, *, buffers: bool, data: Any) -> str:
    session = repo.writable_session("main")
    with gdsstore.enable_gpu(buffers=buffers), gdsstore.trace() as t:
        z = zarr.create_array(session.store, name="chunked", shape=DATA.shape, chunks=(32, 32), dtype="f4",
                              compressors=[zarr.codecs.ZstdCodec()], overwrite=True)
        assert type(z._async_array.codec_pipeline).__name__ == "GDSCodecPipeline"
        z[:] = data
        s = zarr.create_array(session.store, name="sharded", shape=DATA.shape, chunks=(16, 16), shards=(64, 48),
                              dtype="f4", compressors=[zarr.codecs.ZstdCodec()], overwrite=True)
        s[:] = data
    assert "encode" in {op for op, _, _ in t.by_reason()}, "encodes went through gdsstore's codecs"
    return str(session.commit("write through gdsstore"))


def _read(repo: Any, snapshot: str, *, buffers: bool) -> tuple[Any, Any]:
    session = repo.readonly_session(snapshot_id=snapshot)
    with gdsstore.enable_gpu(buffers=buffers), gdsstore.trace() as t:
        chunked = zarr.open_array(session.store, path="chunked", mode="r")
        assert type(chunked._async_array.codec_pipeline).__name__ == "GDSCodecPipeline"
        got = chunked[:], zarr.open_array(session.store, path="sharded", mode="r")[3:100, 5:90]
    assert "decode" in {op for op, _, _ in t.by_reason()}, "decodes went through gdsstore's codecs"
    return got


def test_icechunk_read_write_through_gdsstore_pipeline(tmp_path: Path) -> None:
    repo = icechunk.Repository.create(icechunk.local_filesystem_storage(str(tmp_path / "repo")))
    first = _write(repo, buffers=False, data=DATA)
    second = _write(repo, buffers=False, data=DATA * 2)
    chunked, sharded = _read(repo, first, buffers=False)
    np.testing.assert_array_equal(chunked, DATA)
    np.testing.assert_array_equal(sharded, DATA[3:100, 5:90])
    chunked, _ = _read(repo, second, buffers=False)
    np.testing.assert_array_equal(chunked, DATA * 2)  # each snapshot keeps its own version
    # plain zarr (its own pipeline) reads what gdsstore's pipeline wrote, and the other way round
    plain = zarr.open_array(repo.readonly_session(snapshot_id=first).store, path="sharded", mode="r")
    np.testing.assert_array_equal(plain[:], DATA)


@pytest.mark.gpu
def test_icechunk_on_gpu_buffers(tmp_path: Path, cp: Any) -> None:
    repo = icechunk.Repository.create(icechunk.local_filesystem_storage(str(tmp_path / "repo")))
    snapshot = _write(repo, buffers=True, data=cp.asarray(DATA))
    chunked, sharded = _read(repo, snapshot, buffers=True)
    assert isinstance(chunked, cp.ndarray) and isinstance(sharded, cp.ndarray)
    np.testing.assert_array_equal(chunked.get(), DATA)
    np.testing.assert_array_equal(sharded.get(), DATA[3:100, 5:90])
