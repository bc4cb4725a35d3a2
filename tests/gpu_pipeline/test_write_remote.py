"""The pipeline's write path to S3 (moto on 127.0.0.1) and WebHDFS: one parallel wave of PUTs or
CREATEs through the engine, read back by plain zarr, object for object equal to what zarr writes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import zarr
from zarr.codecs import Crc32cCodec, ZstdCodec
from zarr.storage import LocalStore

import gdsstore

BUCKET = "write-bucket"


@pytest.fixture(scope="module")
def s3() -> Iterator[tuple[dict[str, Any], Any]]:
    pytest.importorskip("moto.server")
    import botocore.session
    from servers.moto_s3 import MotoServer

    srv = MotoServer()
    try:
        opts = srv.storage_options
        client = botocore.session.get_session().create_client(
            "s3", region_name="us-east-1", endpoint_url=opts["endpoint_url"],
            aws_access_key_id=opts["key"], aws_secret_access_key=opts["secret"],
        )
        client.create_bucket(Bucket=BUCKET)
        yield dict(opts), client
    finally:
        srv.close()


def _create(store: Any, sharded: bool, shape: tuple[int, int] = (40, 30), chunks: tuple[int, int] = (10, 10)) -> Any:
    kw: dict[str, Any] = {"shards": (20, 20)} if sharded else {}
    return zarr.create_array(
        store, shape=shape, chunks=chunks, dtype="f4", fill_value=0.0,
        compressors=[ZstdCodec(level=1), Crc32cCodec()], **kw,
    )


def _writes(z: Any, data: np.ndarray) -> None:
    z[...] = data
    z[0:10, 0:10] = 0.0  # all fill: deleted (a whole shard's worth of inner chunks stays)
    z[12:15, 3:27] = 9.5  # partial chunks: read, merged, rewritten


@pytest.mark.parametrize("sharded", [False, True], ids=["chunks", "shards"])
def test_s3_writes_read_back_with_plain_zarr_over_s3fs(s3: tuple[dict[str, Any], Any], tmp_path: Path, sharded: bool) -> None:
    pytest.importorskip("s3fs")
    opts, client = s3
    data = np.round(np.random.default_rng(4).standard_normal((40, 30)), 2).astype("f4")
    prefix = f"arr-{sharded}"
    with gdsstore.enable_gpu(buffers=False):
        z = _create(gdsstore.GDSStore(f"s3://{BUCKET}/{prefix}", storage_options=opts), sharded)
        with gdsstore.trace() as t:
            _writes(z, data)
    assert t.totals["batch-put"]["ops"] == 3, str(t)
    assert "s3" in t.routes, str(t)  # each object went through the engine's S3 writer
    ref = _create(LocalStore(tmp_path / "ref"), sharded)
    _writes(ref, data)
    s3fs_opts = {"endpoint_url": opts["endpoint_url"], "key": opts["key"], "secret": opts["secret"], "asynchronous": True}
    plain = zarr.open_array(
        zarr.storage.FsspecStore.from_url(f"s3://{BUCKET}/{prefix}", storage_options=s3fs_opts), mode="r"
    )
    np.testing.assert_array_equal(plain[...], ref[...])
    listed = client.list_objects_v2(Bucket=BUCKET, Prefix=f"{prefix}/c/").get("Contents", [])
    ours = {o["Key"][len(prefix) + 1 :]: client.get_object(Bucket=BUCKET, Key=o["Key"])["Body"].read() for o in listed}
    theirs = {
        str(p.relative_to(tmp_path / "ref")): p.read_bytes() for p in (tmp_path / "ref" / "c").rglob("*") if p.is_file()
    }
    assert ours == theirs


@pytest.mark.parametrize("sharded", [False, True], ids=["chunks", "shards"])
def test_webhdfs_writes_equal_zarrs_files(tmp_path: Path, sharded: bool) -> None:
    from servers.webhdfs import WebHDFSServer

    data = np.round(np.random.default_rng(8).standard_normal((40, 30)), 2).astype("f4")
    srv = WebHDFSServer(user="alice")
    try:
        with gdsstore.enable_gpu(buffers=False):
            z = _create(gdsstore.GDSStore(srv.url("/arr"), storage_options={"user": "alice"}), sharded)
            with gdsstore.trace() as t:
                _writes(z, data)
        assert t.totals["batch-put"]["ops"] == 3, str(t)
        ref = _create(LocalStore(tmp_path / "ref"), sharded)
        _writes(ref, data)
        # the server keeps its files on disk: plain zarr reads them there
        ours_root = Path(srv.root, "arr")
        np.testing.assert_array_equal(zarr.open_array(LocalStore(ours_root), mode="r")[...], ref[...])
        ours = {str(p.relative_to(ours_root)): p.read_bytes() for p in (ours_root / "c").rglob("*") if p.is_file()}
        theirs = {
            str(p.relative_to(tmp_path / "ref")): p.read_bytes()
            for p in (tmp_path / "ref" / "c").rglob("*")
            if p.is_file()
        }
        assert ours == theirs
    finally:
        srv.close()
