"""One trace row per (op, route, reason) on every remote route, whatever the object sizes: HTTP
(nginx), S3 (moto, single PUTs and multipart uploads), WebHDFS; opened files and backend gets."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from servers.moto_s3 import MotoServer
from servers.nginx import NginxServer
from servers.webhdfs import WebHDFSServer
from test_trace import assert_one_row_per_reason

import gdsstore
from gdsstore.engine.backend import backend_for

from .conftest import WEBHDFS_USER, payload

SIZES = [1, 17, 4096, 65_537, 100_000, 262_144, 300_001, 700_000]


@pytest.fixture(autouse=True)
def varied_ranges() -> Iterator[None]:
    """Range sizes that follow the read's size (64 KiB up to 256 KiB), as with the defaults."""
    with gdsstore.config.set({"remote.max_range_size": 256 << 10, "remote.concurrency": 2}):
        yield


def assert_one_read_row_per_transport(t: Any) -> None:
    """Opened files and a backend's single gets, both through the native core: one row for each kind of read,
    whatever the sizes."""
    reads = [reason for op, _, reason in t.by_reason() if op == "read"]
    assert all(r.startswith("native core") for r in reads), str(t)
    assert len(reads) == len({r.endswith("; one object") for r in reads}), str(t)


def _read_all(urls: list[str], sizes: list[int], data: bytes, **opts: Any) -> None:
    for url, n in zip(urls, sizes):
        out = np.empty(n, dtype=np.uint8)
        with gdsstore.open(url, **opts) as f:
            assert f.read(out) == n
        assert out.tobytes() == data[:n]


def test_nginx_reads_keep_one_row(nginx: NginxServer) -> None:
    data = payload(max(SIZES), seed=11)
    for n in SIZES:
        with open(os.path.join(nginx.root, f"rows-{n}.bin"), "wb") as f:
            f.write(data[:n])
    with gdsstore.trace() as t:
        _read_all([nginx.url(f"rows-{n}.bin") for n in SIZES], SIZES, data)
        b = backend_for(nginx.url(""))
        for n in SIZES:
            assert bytes(b.get(f"rows-{n}.bin", bytearray)) == data[:n]
    assert_one_row_per_reason(t, SIZES)
    assert {(op, route) for op, route, _ in t.by_reason()} == {("read", "http")}
    assert_one_read_row_per_transport(t)


def test_s3_writes_and_reads_keep_one_row_per_decision(moto: MotoServer, s3: dict[str, Any]) -> None:
    opts = {k: v for k, v in s3.items() if k != "client"}
    sizes = [*SIZES, (5 << 20) + 1, (6 << 20) + 7]  # the last two: multipart uploads
    data = payload(max(sizes), seed=12)
    urls = [f"s3://test-bucket/rows/{n}.bin" for n in sizes]
    cfg = {"remote.multipart_threshold": 5 << 20, "remote.multipart_chunksize": 5 << 20}
    with gdsstore.config.set(cfg), gdsstore.trace() as t:
        for url, n in zip(urls, sizes):
            with gdsstore.open(url, "wb", **opts) as f:
                f.write(data[:n])
        _read_all(urls, sizes, data, **opts)
        b = backend_for("s3://test-bucket/rows", opts)
        for n in sizes:
            assert bytes(b.get(f"{n}.bin", bytearray)) == data[:n]
    assert_one_row_per_reason(t, sizes)
    writes = sorted(r.split("; ")[0] for op, route, r in t.by_reason() if op == "write")  # shape; transport
    assert writes == [
        "multipart upload (> remote.multipart_threshold 5 MiB, parts of 5 MiB)",
        "single PUT (<= remote.multipart_threshold 5 MiB)",
    ]
    assert_one_read_row_per_transport(t)


def test_webhdfs_writes_and_reads_keep_one_row_each(webhdfs: WebHDFSServer) -> None:
    data = payload(max(SIZES), seed=13)
    urls = [webhdfs.url(f"/rows/{n}.bin") for n in SIZES]
    user = {"user": WEBHDFS_USER}
    with gdsstore.trace() as t:
        for url, n in zip(urls, SIZES):
            with gdsstore.open(url, "wb", **user) as f:
                f.write(data[:n])
        _read_all(urls, SIZES, data, **user)
    assert_one_row_per_reason(t, SIZES)
    assert sorted((op, route) for op, route, _ in t.by_reason()) == [("read", "webhdfs"), ("write", "webhdfs")]


@pytest.mark.gpu
def test_device_reads_keep_one_row(nginx: NginxServer, cp: Any) -> None:  # type: ignore[no-untyped-def]
    data = payload(max(SIZES), seed=14)
    for n in SIZES:
        with open(os.path.join(nginx.root, f"dev-{n}.bin"), "wb") as f:
            f.write(data[:n])
    with gdsstore.trace() as t:
        for n in SIZES:
            out = cp.empty(n, dtype=cp.uint8)
            with gdsstore.open(nginx.url(f"dev-{n}.bin")) as f:
                assert f.read(out) == n
            assert cp.asnumpy(out).tobytes() == data[:n]
    assert_one_row_per_reason(t, SIZES)
    assert len(t.by_reason()) == 1, str(t)
