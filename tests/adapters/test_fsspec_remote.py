"""``gds::https://`` (nginx) and ``gds::webhdfs://`` (the namenode + datanode test server) through
fsspec's chained URLs, over the remote range reader."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import fsspec
import numpy as np
import pytest

import gdsstore
from gdsstore.adapters.fsspec import GDSFileSystem

# The shared test servers live in tests/servers (imported as ``servers``, as tests/remote does).
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from servers.nginx import NginxServer, nginx_binary
from servers.webhdfs import WebHDFSServer

DATA = bytes(range(256)) * 1024  # 256 KiB


@pytest.fixture(scope="module")
def nginx(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NginxServer]:
    if nginx_binary() is None:
        pytest.skip("nginx is not installed here (apt-get install nginx-light)")
    root = tmp_path_factory.mktemp("www")
    os.chmod(root, 0o755)
    (root / "d").mkdir()
    (root / "d" / "blob.bin").write_bytes(DATA)
    srv = NginxServer(str(root))
    try:
        yield srv
    finally:
        srv.close()


@pytest.fixture(scope="module")
def hdfs() -> Iterator[WebHDFSServer]:
    srv = WebHDFSServer(user="gds")
    try:
        yield srv
    finally:
        srv.close()


def test_https_chain_reads(nginx: NginxServer) -> None:
    url = nginx.url("d/blob.bin")
    with fsspec.open(f"gds::{url}", "rb") as f:
        assert isinstance(f.fs, GDSFileSystem) and f.fs.target_protocol == "http"
        f.seek(100_000)
        assert f.read(10) == DATA[100_000:100_010]
    fs, path = fsspec.core.url_to_fs(f"gds::{url}")
    assert path == url and fs.unstrip_protocol(path) == f"gds::{url}"
    assert fs.info(path)["size"] == len(DATA)
    with gdsstore.trace() as t:
        out = fs.cat_ranges([path] * 3, [0, 50, 200_000], [10, 60, 200_010])
    assert out == [DATA[0:10], DATA[50:60], DATA[200_000:200_010]]
    assert "http" in t.routes
    buf = np.zeros(4096, dtype="u1")
    assert fs.read_into(path, buf, start=1000) == 4096 and buf.tobytes() == DATA[1000:5096]
    with pytest.raises(FileNotFoundError):
        fs.cat_file(nginx.url("d/missing.bin"))
    with pytest.raises(PermissionError):
        fs.pipe_file(nginx.url("d/new.bin"), b"x")


def test_webhdfs_chain_read_write_list(hdfs: WebHDFSServer) -> None:
    opts: dict[str, Any] = {"webhdfs": {"user": "gds"}}
    base = f"webhdfs://127.0.0.1:{hdfs.port}/data"
    with fsspec.open(f"gds::{base}/x.bin", "wb", **opts) as f:
        f.write(DATA)
    fs, path = fsspec.core.url_to_fs(f"gds::{base}/x.bin", **opts)
    assert fs.target_protocol == "webhdfs" and path == "/data/x.bin"
    assert fs.cat_file(path, start=7, end=17) == DATA[7:17]
    fs.pipe_file("/data/sub/y.bin", b"why")
    assert fs.ls("/data", detail=False) == ["/data/sub", "/data/x.bin"]
    assert fs.find("/data") == ["/data/sub/y.bin", "/data/x.bin"]
    assert fs.info("/data/sub")["type"] == "directory"
    with fsspec.open(f"gds::{base}/x.bin", "rb", **opts) as f:
        f.seek(-5, 2)
        assert f.read() == DATA[-5:]
    fs.rm("/data", recursive=True)
    assert not fs.exists("/data/x.bin")
    with pytest.raises(FileNotFoundError):
        fs.cat_file("/data/x.bin")


def test_webhdfs_root_listing_names(hdfs: WebHDFSServer) -> None:
    fs = GDSFileSystem(
        target_protocol="webhdfs", target_options={"host": "127.0.0.1", "port": hdfs.port, "user": "gds"}
    )
    fs.pipe_file("/top/a.bin", b"a")
    try:
        assert "/top" in fs.ls("/", detail=False)
        assert "/top/a.bin" in fs.find("/")
        assert fs.find("/", withdirs=True, maxdepth=1) == ["/top"]
    finally:
        fs.rm("/top", recursive=True)
