"""HEAD, LIST and DELETE of the S3 backend go through the native core, on the bucket's core store (the one
its reads and writes use): a proxy in front of moto counts each request, botocore sends none of them (its
``before-send`` hook sees nothing), a listing pages and takes sizes and mtimes from its answers, errors map
as a read's do, and Ctrl-C stops a listing that a server never answers."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from servers.moto_s3 import SECRET_KEY
from servers.net import Blackhole
from servers.prefix_proxy import PrefixProxy, Seen

import gdsstore
from gdsstore.engine import native
from gdsstore.engine.backend import Backend, backend_for

from .test_core_interrupts import _interrupt

pytestmark = pytest.mark.skipif(not native.load(), reason=f"native core not built: {native.unavailable_reason()}")


@pytest.fixture
def gateway(s3: dict[str, Any]) -> Iterator[PrefixProxy]:
    """moto behind a proxy at ``/s3``, which records every request."""
    proxy = PrefixProxy(s3["endpoint_url"], "/s3")
    try:
        yield proxy
    finally:
        proxy.close()


class _Requests:
    """The requests the gateway received since the last look."""

    def __init__(self, gateway: PrefixProxy) -> None:
        self.gateway = gateway
        self.mark = len(gateway.seen)

    def since(self) -> list[Seen]:
        seen = self.gateway.seen
        new, self.mark = seen[self.mark :], len(seen)
        return new


def _backend(s3: dict[str, Any], gateway: PrefixProxy, root: str = "s3://test-bucket/root") -> tuple[Backend, list[str]]:
    """The backend over ``root`` through the gateway, and what its botocore client sends (nothing, we want)."""
    o = {k: v for k, v in s3.items() if k != "client"} | {"endpoint_url": gateway.url, "region_name": "us-east-1"}
    b = backend_for(root, o)
    sent: list[str] = []
    client = b.client.client  # type: ignore[attr-defined]
    client.meta.events.register("before-send.s3", lambda request, **_: sent.append(f"{request.method} {request.url}"))
    return b, sent


def _query(r: Seen) -> dict[str, list[str]]:
    return parse_qs(urlsplit(r.path).query)


def test_head_list_delete_are_the_cores_requests(s3: dict[str, Any], gateway: PrefixProxy) -> None:
    for key in ["root/a/b/c.bin", "root/a/d.bin", "root/ab.bin", "root/zarr.json", "outside.bin"]:
        s3["client"].put_object(Bucket="test-bucket", Key=key, Body=b"x" * len(key))
    b, sent = _backend(s3, gateway)
    log = _Requests(gateway)

    info = b.info("a/d.bin")
    assert (info.size, info.type) == (len("root/a/d.bin"), "file") and info.etag and info.mtime
    assert [(r.method, r.path) for r in log.since()] == [("HEAD", "/s3/test-bucket/root/a/d.bin")]

    assert sorted(b.list("a")) == ["a/b/c.bin", "a/d.bin", "ab.bin"]  # a string prefix, as S3's
    (listing,) = log.since()
    assert listing.method == "GET" and _query(listing)["prefix"] == ["root/a"] and "delimiter" not in _query(listing)

    listed = {i.key: i for i in b.list_info("a/")}
    assert {k: i.size for k, i in listed.items()} == {"a/b/c.bin": 14, "a/d.bin": 12}
    assert listed["a/d.bin"].mtime is not None and abs(listed["a/d.bin"].mtime - info.mtime) < 1.0
    assert len(log.since()) == 1  # sizes and mtimes from the listing: no HEAD per object

    assert sorted(b.list_dir("a")) == ["b", "d.bin"]
    (listing,) = log.since()
    assert _query(listing)["delimiter"] == ["/"] and _query(listing)["prefix"] == ["root/a/"]

    b.delete("a/d.bin")
    assert [(r.method, r.path) for r in log.since()] == [("DELETE", "/s3/test-bucket/root/a/d.bin")]
    b.delete("a/d.bin")  # missing: not an error
    assert not b.exists("a/d.bin")
    log.since()

    b.delete_prefix("a")
    assert [r.method for r in log.since()] == ["GET", "DELETE"]  # a listing, then one DELETE (one key left)
    assert sorted(b.list()) == ["ab.bin", "zarr.json"]
    assert s3["client"].head_object(Bucket="test-bucket", Key="outside.bin")["ContentLength"] == 11
    assert sent == []  # botocore sent none of them


def test_a_long_listing_pages_and_a_prefix_is_deleted_in_batches(s3: dict[str, Any]) -> None:
    n = 1001  # S3 answers at most 1000 keys a page, and DeleteObjects takes at most 1000
    refused: list[Seen] = []

    def second_page_once(r: Seen) -> bool:  # a 503 to the first request of a second page
        if refused or "continuation-token" not in _query(r):
            return False
        refused.append(r)
        return True

    gateway = PrefixProxy(s3["endpoint_url"], "/s3", refuse=second_page_once)
    try:
        b, sent = _backend(s3, gateway)
        assert not b.put_batch([f"many/k{i:05d}" for i in range(n)], [b"x"] * n, [False] * n).errors
        log = _Requests(gateway)
        with gdsstore.config.set({"remote.backoff_base": 0.01, "remote.backoff_max": 0.01}):
            assert sorted(b.list("many/")) == [f"many/k{i:05d}" for i in range(n)]
        pages = log.since()
        # object_store's pagination; the failed page asked again, the first one not
        assert ["continuation-token" in _query(r) for r in pages] == [False, True, True]
        assert pages[1].path == pages[2].path == refused[0].path
        assert [i.key for i in b.list_dir_info("")] == ["many"]
        assert len(log.since()) == 1  # one page of one common prefix
        b.delete_prefix("many")
        deletes = sorted((r.method, r.path) for r in log.since() if r.method != "GET")
        # DeleteObjects of the first 1000 keys, a DELETE of the one left
        assert deletes == [("DELETE", f"/s3/test-bucket/root/many/k{n - 1:05d}"), ("POST", "/s3/test-bucket?delete")]
        assert list(b.list()) == [] and sent == []
    finally:
        gateway.close()


def test_errors_of_head_list_delete_are_the_cores(moto_auth: str, s3: dict[str, Any]) -> None:
    secret = "WRONG-secret-DoNotLeak-43"
    wrong = backend_for("s3://test-bucket", {"endpoint_url": moto_auth, "key": "AKIAWRONGKEY", "secret": secret,
                                            "region_name": "us-east-1"})
    for call, what in [(lambda: wrong.info("a.bin"), "HEAD s3://test-bucket/a.bin: 403"),
                       (lambda: list(wrong.list("p/")), "LIST s3://test-bucket/p/: 403"),
                       (lambda: wrong.delete("a.bin"), "DELETE s3://test-bucket/a.bin: 403")]:
        with pytest.raises(PermissionError) as info:
            call()
        assert what in str(info.value) and secret not in str(info.value)
    o = {k: v for k, v in s3.items() if k != "client"} | {"region_name": "us-east-1"}
    with pytest.raises(FileNotFoundError, match="LIST s3://no-such-bucket/: 404"):
        list(backend_for("s3://no-such-bucket", o).list())
    assert SECRET_KEY not in repr(backend_for("s3://test-bucket", o))


_LIST = """
import sys
from concurrent.futures import ThreadPoolExecutor
import gdsstore
from gdsstore.engine.backend import backend_for

port, where = int(sys.argv[1]), sys.argv[2]
b = backend_for("s3://bkt/x", {"endpoint_url": f"http://127.0.0.1:{port}", "key": "AKIDEXAMPLE",
                                "secret": "secret", "region_name": "us-east-1"})
with gdsstore.config.set({"remote.timeout": 300.0}):
    if where == "main":
        list(b.list())
    else:  # zarr and asyncio list on a pool's thread while the main thread waits
        with ThreadPoolExecutor(1) as pool:
            pool.submit(lambda: list(b.list())).result()
"""


@pytest.mark.parametrize("where", ["main", "pool"])
def test_sigint_stops_a_listing_on_a_stalled_server(where: str) -> None:
    hole = Blackhole()
    try:
        done = _interrupt(_LIST, [str(hole.port), where], lambda: len(hole._conns) >= 1)
    finally:
        hole.close()
    assert done.returncode != 0
    assert done.stderr.rstrip().endswith("KeyboardInterrupt"), done.stderr[-2000:]
