"""The pipeline over a remote GDSStore (moto S3 on 127.0.0.1; nginx for the device reads, which run on the GPU
machine, where moto is not): batched reads through the engine."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import zarr
from zarr.codecs import Crc32cCodec, ZstdCodec

import gdsstore

BUCKET = "pipeline-bucket"


@pytest.fixture(scope="module")
def s3_opts() -> Iterator[dict[str, Any]]:
    pytest.importorskip("moto.server")
    import botocore.session
    from servers.moto_s3 import MotoServer

    srv = MotoServer()
    try:
        opts = srv.storage_options
        client = botocore.session.get_session().create_client(
            "s3",
            region_name="us-east-1",
            endpoint_url=opts["endpoint_url"],
            aws_access_key_id=opts["key"],
            aws_secret_access_key=opts["secret"],
        )
        client.create_bucket(Bucket=BUCKET)
        yield dict(opts)
    finally:
        srv.close()


@pytest.mark.parametrize("sharded", [False, True])
def test_remote_reads_equal_zarr(s3_opts: dict[str, Any], sharded: bool) -> None:
    data = np.round(np.random.default_rng(2).standard_normal((40, 30)), 2).astype("f4")
    url = f"s3://{BUCKET}/arr-{sharded}"
    kw: dict[str, Any] = {"shards": (20, 20)} if sharded else {}
    z = zarr.create_array(
        gdsstore.GDSStore(url, storage_options=s3_opts),
        shape=data.shape,
        chunks=(10, 10),
        dtype="f4",
        compressors=[ZstdCodec(), Crc32cCodec()],
        fill_value=0.0,
        **kw,
    )
    z[:30] = data[:30]
    ref = data.copy()
    ref[30:] = 0
    with gdsstore.enable_gpu(buffers=False):
        ours = zarr.open_array(gdsstore.GDSStore(url, read_only=True, storage_options=s3_opts), mode="r")
        assert type(ours._async_array.codec_pipeline).__name__ == "GDSCodecPipeline"
        with gdsstore.trace() as t:
            np.testing.assert_array_equal(ours[:], ref)
            np.testing.assert_array_equal(ours[3:37:2, 5:29], ref[3:37:2, 5:29])
    assert "s3" in t.routes, str(t)  # bytes came through the engine's S3 transport


@pytest.mark.timeout(120)
def test_concurrent_remote_reads_on_a_one_thread_pool(s3_opts: dict[str, Any]) -> None:
    """Staging runs inside pool tasks (the window prefetch) and waits on nested work: with one engine
    thread and several readers at once (dask's threads), every read still finishes (it deadlocked when
    staging waited on ``Executor.map`` futures of the same pool)."""
    from concurrent.futures import ThreadPoolExecutor

    data = np.arange(64 * 64, dtype="f4").reshape(64, 64)
    url = f"s3://{BUCKET}/one-thread"
    z = zarr.create_array(
        gdsstore.GDSStore(url, storage_options=s3_opts), shape=data.shape, chunks=(8, 8), shards=(32, 32), dtype="f4"
    )
    z[:] = data
    with gdsstore.config.set({"num_threads": 1, "remote.concurrency": 1}), gdsstore.enable_gpu(buffers=False):
        ours = zarr.open_array(gdsstore.GDSStore(url, read_only=True, storage_options=s3_opts), mode="r")
        with ThreadPoolExecutor(4) as readers:
            got = list(readers.map(lambda i: ours[i * 16 : i * 16 + 16], range(4)))
    np.testing.assert_array_equal(np.concatenate(got), data)


@pytest.mark.gpu
@pytest.mark.parametrize("codec", ["none", "zstd", "shards"])
def test_device_reads_copy_in_parts_during_the_wave(cp: Any, nginx: Any, codec: str) -> None:
    """Device buffers over HTTP (nginx): the wave's bytes reach the device in parts while the wave runs
    (``gpu.wave_copy_bytes``, here 16 KiB: several parts), the same array as one copy after the wave (0)."""
    data = np.random.default_rng(3).standard_normal((96, 64)).astype("f4")
    name = f"parts-{codec}"
    kw: dict[str, Any] = {"compressors": [ZstdCodec()] if codec == "zstd" else None}
    if codec == "shards":
        kw["shards"] = (32, 64)
    z = zarr.create_array(gdsstore.GDSStore(str(Path(nginx.root) / name)), shape=data.shape, chunks=(16, 16),
                          dtype="f4", **kw)
    z[:] = data
    url = nginx.url(name)
    rows: dict[int, list[str]] = {}
    on_device = {"gpu.host_decode_bytes": 0, "gpu.host_decode_chunks": 0}  # nvCOMP decodes, however few chunks
    for part in (16 << 10, 0):
        with gdsstore.config.set({"gpu.wave_copy_bytes": part, **on_device}), gdsstore.enable_gpu():
            ours = zarr.open_array(gdsstore.GDSStore(url, read_only=True), mode="r")
            with gdsstore.trace() as t:
                got = ours[:]
                assert isinstance(got, cp.ndarray)
                np.testing.assert_array_equal(cp.asnumpy(got), data)
                np.testing.assert_array_equal(cp.asnumpy(ours[5:90:3, 7:60]), data[5:90:3, 7:60])
        rows[part] = [e.reason for e in t.events if e.op == "h2d"]
    assert rows[16 << 10] and all("during the wave" in r for r in rows[16 << 10]), rows
    assert any(not r.startswith("1 copies") and ", 0 of them" not in r for r in rows[16 << 10]), rows
    assert rows[0] and not any("during the wave" in r for r in rows[0]), rows
