"""GDSStore over the remote backends: zarr's shared store contract over moto S3 and the WebHDFS
server, and zarr arrays written remotely and read back over S3, WebHDFS and nginx."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import zarr
from servers.nginx import NginxServer
from servers.webhdfs import WebHDFSServer
from zarr.core.buffer import Buffer, cpu
from zarr.testing.store import StoreTests

import gdsstore
from gdsstore import GDSStore

from .conftest import WEBHDFS_USER

BUCKET = "test-bucket"


class TestS3Store(StoreTests[GDSStore, cpu.Buffer]):
    store_cls = GDSStore
    buffer_cls = cpu.Buffer

    @pytest.fixture
    def store_kwargs(self, s3: dict[str, Any]) -> dict[str, Any]:
        self._client = s3["client"]
        opts = {k: v for k, v in s3.items() if k != "client"}
        return {"root": f"s3://{BUCKET}/store", "storage_options": opts}

    async def set(self, store: GDSStore, key: str, value: Buffer) -> None:
        self._client.put_object(Bucket=BUCKET, Key=f"store/{key}", Body=value.to_bytes())

    async def get(self, store: GDSStore, key: str) -> Buffer:
        body = self._client.get_object(Bucket=BUCKET, Key=f"store/{key}")["Body"].read()
        return self.buffer_cls.from_bytes(body)

    def test_store_repr(self, store: GDSStore) -> None:
        assert repr(store) == f"GDSStore('s3://{BUCKET}/store')"
        assert "secret" not in repr(store).lower()

    def test_store_supports_writes(self, store: GDSStore) -> None:
        assert store.supports_writes and store.supports_deletes

    def test_store_supports_listing(self, store: GDSStore) -> None:
        assert store.supports_listing


class TestWebHDFSStore(StoreTests[GDSStore, cpu.Buffer]):
    store_cls = GDSStore
    buffer_cls = cpu.Buffer

    @pytest.fixture
    def store_kwargs(self, webhdfs: WebHDFSServer) -> dict[str, Any]:
        self._root = Path(webhdfs.root, "store")
        return {"root": webhdfs.url("/store"), "storage_options": {"user": WEBHDFS_USER}}

    async def set(self, store: GDSStore, key: str, value: Buffer) -> None:
        p = self._root.joinpath(*key.split("/"))
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(value.to_bytes())

    async def get(self, store: GDSStore, key: str) -> Buffer:
        return self.buffer_cls.from_bytes(self._root.joinpath(*key.split("/")).read_bytes())

    def test_store_repr(self, store: GDSStore) -> None:
        assert repr(store).startswith("GDSStore('webhdfs://127.0.0.1:") and repr(store).endswith("/store')")

    def test_store_supports_writes(self, store: GDSStore) -> None:
        assert store.supports_writes and store.supports_deletes

    def test_store_supports_listing(self, store: GDSStore) -> None:
        assert store.supports_listing


# -- arrays end to end ------------------------------------------------------------------------------

SOURCE = np.arange(64 * 48, dtype="float32").reshape(64, 48) * 0.5


def _write_array(store: GDSStore) -> None:
    z = zarr.create_array(store, shape=SOURCE.shape, chunks=(16, 16), dtype="float32", overwrite=True)
    z[:] = SOURCE


def _read(store: GDSStore) -> np.ndarray:
    return np.asarray(zarr.open_array(store, mode="r")[:])


def test_array_roundtrip_s3(s3: dict[str, Any]) -> None:
    opts = {k: v for k, v in s3.items() if k != "client"}
    _write_array(GDSStore(f"s3://{BUCKET}/arr", storage_options=opts))
    with gdsstore.trace() as t:
        got = _read(GDSStore(f"s3://{BUCKET}/arr", read_only=True, storage_options=opts))
    np.testing.assert_array_equal(got, SOURCE)
    assert "s3" in t.routes


@pytest.fixture
def hdfs_on_www(nginx: NginxServer) -> Iterator[WebHDFSServer]:
    """A WebHDFS server whose files nginx serves too (same directory)."""
    root = os.path.join(nginx.root, "hdfs")
    os.makedirs(root, exist_ok=True)
    srv = WebHDFSServer(root, user=WEBHDFS_USER)
    try:
        yield srv
    finally:
        srv.close()


def test_array_written_to_webhdfs_reads_back_over_webhdfs_and_nginx(
    hdfs_on_www: WebHDFSServer, nginx: NginxServer
) -> None:
    opts = {"user": WEBHDFS_USER}
    _write_array(GDSStore(hdfs_on_www.url("/arr"), storage_options=opts))
    with gdsstore.trace() as t:
        over_hdfs = _read(GDSStore(hdfs_on_www.url("/arr"), read_only=True, storage_options=opts))
        over_http = _read(GDSStore(nginx.url("hdfs/arr"), read_only=True))
    np.testing.assert_array_equal(over_hdfs, SOURCE)
    np.testing.assert_array_equal(over_http, SOURCE)
    assert {"webhdfs", "http"} <= t.routes
