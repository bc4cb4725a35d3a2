"""Device buffers over the loopback servers (GPU machine: ``pytest -m gpu``): bodies land in the
pinned bounce ring and reach the device by async H2D copies; results equal host reads."""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pytest
from servers.faults import FaultServer
from servers.nginx import NginxServer
from servers.webhdfs import WebHDFSServer

import gdsstore
from gdsstore.engine.remote import RangeNotSupportedError

from .conftest import WEBHDFS_USER, payload

pytestmark = pytest.mark.gpu

DATA = payload(3 << 20, seed=7)


def host_read(url: str, **opts: Any) -> bytes:
    with gdsstore.open(url, **opts) as f:
        buf = bytearray(f.size)
        f.read(buf)
    return bytes(buf)


def device_read(cp: Any, url: str, offset: int = 0, size: int | None = None, **opts: Any) -> bytes:
    with gdsstore.open(url, **opts) as f:
        n = f.size - offset if size is None else size
        buf = cp.zeros(n, dtype=cp.uint8)
        with gdsstore.trace() as t:
            got = f.read(buf, n, offset)
        assert got == n
        (ev,) = t.events
        assert ev.device == buf.device.id and "pinned bounce ring" in ev.reason
    return bytes(cp.asnumpy(buf))


@pytest.mark.parametrize("mode", ["ok", "reset", "truncate", "503"])
def test_device_reads_equal_host_reads_http(cp: Any, faults: FaultServer, mode: str) -> None:
    faults.objects["g.bin"] = DATA
    with gdsstore.config.set({"task_size": 256 << 10, "bounce_buffer_size": 64 << 10}):
        url = faults.url("g.bin", mode, 2)
        got = device_read(cp, url)
        faults.reset()
        assert got == host_read(url) == DATA
        assert device_read(cp, url, offset=12345, size=1_000_000) == DATA[12345:1_012_345]


def test_device_read_never_wrong_bytes(cp: Any, faults: FaultServer) -> None:
    faults.objects["g.bin"] = DATA
    ref = np.frombuffer(DATA, "u1")
    with gdsstore.open(faults.url("g.bin", "ignore-range", "always")) as f:
        whole = cp.full(f.size, 0xA5, dtype=cp.uint8)
        f.read(whole)  # the whole object needs no Range: read in one request without it
        part = cp.full(1000, 0xA5, dtype=cp.uint8)
        with pytest.raises(RangeNotSupportedError):
            f.read(part, offset=10)  # a part of it does: refused, never the wrong bytes
    assert np.array_equal(cp.asnumpy(whole), ref)
    assert np.all(cp.asnumpy(part) == 0xA5)


@pytest.mark.parametrize("ranges", [1, 3], ids=["one-range", "three-ranges"])
def test_device_whole_read_larger_than_a_slot_from_a_server_without_ranges(cp: Any, faults: FaultServer,
                                                                         ranges: int) -> None:
    """A whole object read into device memory from a server that ignores Range, larger than the ring's slots
    (which would cut even one range into ranged requests): read once more in one request, through host memory."""
    faults.objects["g.bin"] = DATA
    small = {"task_size": len(DATA) // ranges, "remote.max_range_size": len(DATA) // ranges,
             "bounce_buffer_size": 256 << 10}  # slots of half a range: ranged requests whatever the ranges
    with gdsstore.config.set(small), gdsstore.open(faults.url("g.bin", "ignore-range", "always")) as f:
        whole = cp.full(f.size, 0xA5, dtype=cp.uint8)
        assert f.read(whole) == len(DATA)
    assert bytes(cp.asnumpy(whole)) == DATA


def test_device_reads_nginx(cp: Any, nginx: NginxServer) -> None:
    with open(os.path.join(nginx.root, "gpu.bin"), "wb") as f:
        f.write(DATA)
    assert device_read(cp, nginx.url("gpu.bin")) == host_read(nginx.url("gpu.bin")) == DATA


def test_device_s3_write_and_read(cp: Any, s3: dict[str, Any]) -> None:
    opts = {k: v for k, v in s3.items() if k != "client"}
    with gdsstore.trace() as t, gdsstore.open("s3://test-bucket/g.bin", "wb", **opts) as f:
        f.write(cp.asarray(np.frombuffer(DATA, "u1")))
    (w,) = t.events
    assert w.op == "write" and w.device == 0 and w.reason.startswith("device buffer copied to host, single PUT")
    assert device_read(cp, "s3://test-bucket/g.bin", **opts) == host_read("s3://test-bucket/g.bin", **opts) == DATA


def test_device_webhdfs_write_and_read(cp: Any, webhdfs: WebHDFSServer) -> None:
    url = webhdfs.url("/g.bin")
    with gdsstore.open(url, "wb", user=WEBHDFS_USER) as f:
        f.write(cp.asarray(np.frombuffer(DATA, "u1")))
    assert device_read(cp, url, user=WEBHDFS_USER) == host_read(url, user=WEBHDFS_USER) == DATA


def test_device_whole_object_get(cp: Any, faults: FaultServer) -> None:
    from gdsstore.engine.backend import backend_for

    faults.objects["g.bin"] = DATA
    faults.objects["s.bin"] = DATA[:1000]
    b = backend_for(f"http://127.0.0.1:{faults.port}/reset/1")
    with gdsstore.config.set({"task_size": 1 << 20}):
        for name, want in (("g.bin", DATA), ("s.bin", DATA[:1000])):
            got = b.get(name, lambda n: cp.empty(n, dtype=cp.uint8))
            assert isinstance(got, cp.ndarray) and bytes(cp.asnumpy(got)) == want
