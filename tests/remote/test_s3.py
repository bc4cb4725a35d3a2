"""The S3 transport and backend against moto's S3 server (a subprocess on 127.0.0.1)."""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import pytest
from servers.moto_s3 import ACCESS_KEY, SECRET_KEY
from servers.prefix_proxy import PrefixProxy

import gdsstore
from gdsstore.engine.backend import backend_for
from gdsstore.engine.ranges import ByteRange
from gdsstore.engine.remote import RemoteIOError
from gdsstore.engine.remote.s3 import S3Client, parse_s3_url

from .conftest import payload

DATA = payload(700 << 10, seed=3)


def opts(s3: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {k: v for k, v in s3.items() if k != "client"} | extra


def put(s3: dict[str, Any], key: str, data: bytes, **kw: Any) -> None:
    s3["client"].put_object(Bucket="test-bucket", Key=key, Body=data, **kw)


def assert_no_secrets(*texts: str) -> None:
    for text in texts:
        assert SECRET_KEY not in text and ACCESS_KEY not in text
        assert "X-Amz-Signature" not in text or "X-Amz-Signature=***" in text


def test_read_ranges(s3: dict[str, Any], caplog: pytest.LogCaptureFixture) -> None:
    put(s3, "dir/obj.bin", DATA)
    caplog.set_level(logging.DEBUG)
    with gdsstore.trace() as t, gdsstore.open("s3://test-bucket/dir/obj.bin", **opts(s3)) as f:
        assert f.size == len(DATA)
        buf = np.empty(f.size, "u1")
        assert f.read(buf) == len(DATA) and buf.tobytes() == DATA
        part = bytearray(100_001)
        assert f.read(part, offset=333_333) == 100_001 and bytes(part) == DATA[333_333:433_334]
    assert repr(f) == "RemoteFile('s3://test-bucket/dir/obj.bin', mode='rb')"
    assert {e.route for e in t.events} == {"s3"}
    assert all(e.path == "s3://test-bucket/dir/obj.bin" for e in t.events)
    assert_no_secrets(repr(f), str(t), repr(t.events), caplog.text)


def test_write_single_put_and_multipart(s3: dict[str, Any]) -> None:
    with gdsstore.open("s3://test-bucket/a.bin", "wb", **opts(s3)) as f:
        assert f.write(np.frombuffer(DATA, "u1")) == len(DATA)
        f.write(b"tail", offset=len(DATA))
    got = s3["client"].get_object(Bucket="test-bucket", Key="a.bin")["Body"].read()
    assert got == DATA + b"tail"
    big = payload(11 << 20, seed=4)
    with gdsstore.config.set({"remote.multipart_threshold": 5 << 20, "remote.multipart_chunksize": 5 << 20}):
        with gdsstore.trace() as t, gdsstore.open("s3://test-bucket/big.bin", "wb", **opts(s3)) as f:
            f.write(big)
    head = s3["client"].head_object(Bucket="test-bucket", Key="big.bin")
    assert head["ContentLength"] == len(big)
    assert head["ETag"].strip('"').endswith("-3")  # a 3-part multipart upload
    (w,) = [e for e in t.events if e.op == "write"]
    assert w.route == "s3" and w.reason.startswith("multipart upload (> remote.multipart_threshold 5 MiB, parts of 5 MiB); ")
    assert w.nbytes == len(big)  # the size is a column, never part of the reason (one row per route+reason)
    with gdsstore.open("s3://test-bucket/big.bin", **opts(s3)) as f:
        buf = bytearray(f.size)
        with gdsstore.config.set({"task_size": 1 << 20}):
            f.read(buf)
    assert bytes(buf) == big


def test_failed_writer_uploads_nothing(s3: dict[str, Any]) -> None:
    with pytest.raises(RuntimeError), gdsstore.open("s3://test-bucket/never.bin", "wb", **opts(s3)) as f:
        f.write(b"partial")
        raise RuntimeError("boom")
    with pytest.raises(FileNotFoundError):
        gdsstore.open("s3://test-bucket/never.bin", **opts(s3))


def test_errors(s3: dict[str, Any]) -> None:
    with pytest.raises(FileNotFoundError, match=r"s3://test-bucket/missing\.bin: 404"):
        gdsstore.open("s3://test-bucket/missing.bin", **opts(s3))
    with pytest.raises(FileNotFoundError):
        gdsstore.open("s3://no-such-bucket/x.bin", **opts(s3))
    with pytest.raises(ValueError, match="no object key"):
        gdsstore.open("s3://test-bucket/", **opts(s3))
    with pytest.raises(ValueError, match="credentials in the URL"):
        parse_s3_url("s3://AKIA:secret@bucket/x")
    with pytest.raises(TypeError, match="unknown storage options"):
        gdsstore.open("s3://test-bucket/x", **opts(s3, bogus=1))


def test_anonymous_and_presigned_passthrough(s3: dict[str, Any]) -> None:
    put(s3, "pub.bin", DATA, ACL="public-read")
    anon = {"endpoint_url": s3["endpoint_url"], "anon": True}
    with gdsstore.open("s3://test-bucket/pub.bin", **anon) as f:
        buf = bytearray(f.size)
        f.read(buf)
    assert bytes(buf) == DATA
    url = s3["client"].generate_presigned_url("get_object", Params={"Bucket": "test-bucket", "Key": "pub.bin"})
    assert "Signature" in url
    with gdsstore.trace() as t, gdsstore.open(url) as f:
        buf = bytearray(f.size)
        f.read(buf)
    assert bytes(buf) == DATA
    sig = url.split("Signature=")[1].split("&")[0]
    assert sig not in repr(f) and sig not in str(t)


def test_addressing_style_and_sigv4(s3: dict[str, Any]) -> None:
    c = S3Client(opts(s3, addressing_style="path"))
    assert c.client.meta.config.s3["addressing_style"] == "path"
    assert c.client.meta.config.signature_version == "s3v4"
    url = c.target("test-bucket").url  # botocore's presign of a probe key: where the core sends requests
    assert url.startswith(s3["endpoint_url"] + "/test-bucket/") and "X-Amz-Algorithm=AWS4-HMAC-SHA256" in url
    o = c.core_options("test-bucket")
    assert (o["aws_endpoint"], o["aws_virtual_hosted_style_request"]) == (s3["endpoint_url"], "false")
    assert c.client.meta.config.retries["total_max_attempts"] == 1  # one retry policy: ours


def test_backend_operations(s3: dict[str, Any]) -> None:
    b = backend_for("s3://test-bucket/root", opts(s3))
    assert repr(b) == "S3Backend('s3://test-bucket/root')"
    b.put("a/b/c.bin", np.frombuffer(DATA, "u1"))
    b.put("a/d.bin", b"hello")
    b.put("zarr.json", b"{}")
    put(s3, "outside.bin", b"not under root")
    assert sorted(b.list()) == ["a/b/c.bin", "a/d.bin", "zarr.json"]
    assert sorted(b.list("a/")) == ["a/b/c.bin", "a/d.bin"]
    assert sorted(b.list_dir()) == ["a", "zarr.json"]
    assert sorted(b.list_dir("a")) == ["b", "d.bin"]
    assert b.info("a/d.bin").size == 5 and b.exists("a/d.bin") and not b.exists("a/zz")
    assert bytes(b.get("a/b/c.bin", bytearray, ByteRange("offset", 700_000))) == DATA[700_000:]
    with pytest.raises(FileExistsError):
        b.put("a/d.bin", b"other", exclusive=True)
    assert bytes(b.get("a/d.bin", bytearray)) == b"hello"
    b.put("a/new.bin", b"x", exclusive=True)
    b.delete("a/d.bin")
    b.delete("a/d.bin")  # missing: not an error
    assert not b.exists("a/d.bin")
    b.delete_prefix("a")
    assert sorted(b.list()) == ["zarr.json"]
    assert s3["client"].head_object(Bucket="test-bucket", Key="outside.bin")["ContentLength"] == 14
    with pytest.raises(ValueError, match="invalid key"):
        b.put("../outside.bin", b"x")
    with pytest.raises(FileNotFoundError):
        b.info("missing")


def test_object_replaced_mid_read_fails(s3: dict[str, Any]) -> None:
    put(s3, "v.bin", DATA)
    with gdsstore.open("s3://test-bucket/v.bin", **opts(s3)) as f:
        put(s3, "v.bin", DATA[::-1])
        buf = np.zeros(f.size, "u1")
        with pytest.raises(RemoteIOError, match="changed while it was being read"):
            f.read(buf)


def test_list_dir_info_takes_sizes_from_the_listing(s3: dict[str, Any]) -> None:
    for key, n in [("dirinfo/a.bin", 10), ("dirinfo/b.bin", 2000), ("dirinfo/sub/c.bin", 5)]:
        put(s3, key, b"x" * n)
    backend = backend_for("s3://test-bucket", opts(s3))

    def no_head(key: str) -> Any:
        raise AssertionError(f"a size lookup for {key!r}: the listing already has it")

    backend.info = no_head  # type: ignore[method-assign]
    got = {(i.key, i.size, i.type) for i in backend.list_dir_info("dirinfo")}
    assert got == {("dirinfo/a.bin", 10, "file"), ("dirinfo/b.bin", 2000, "file"), ("dirinfo/sub", 0, "directory")}


def test_list_info_takes_sizes_from_the_listing(s3: dict[str, Any]) -> None:
    for key, n in [("li/a.bin", 3), ("li/sub/b.bin", 4000)]:
        put(s3, key, b"y" * n)
    backend = backend_for("s3://test-bucket", opts(s3))

    def no_head(key: str) -> Any:
        raise AssertionError(f"a size lookup for {key!r}: the listing already has it")

    backend.info = no_head  # type: ignore[method-assign]
    assert {(i.key, i.size) for i in backend.list_info("li/")} == {("li/a.bin", 3), ("li/sub/b.bin", 4000)}


def test_virtual_host_addressing_end_to_end(s3: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    endpoint = s3["endpoint_url"].replace("127.0.0.1", "localhost")
    o = opts(s3, endpoint_url=endpoint, addressing_style="virtual")
    c = S3Client(dict(o))
    bucket_host = endpoint.replace("localhost", "test-bucket.localhost")
    assert c.core_options("test-bucket")["aws_endpoint"] == bucket_host
    put(s3, "v/obj.bin", DATA)
    put(s3, "v/new.bin", DATA[:1000])
    # Names under .localhost do not resolve on every machine: the core's requests reach moto through an HTTP
    # proxy, which keeps their Host header (moto reads the bucket from it).
    proxy = PrefixProxy(s3["endpoint_url"], "")
    for name in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy", "HTTPS_PROXY", "https_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTP_PROXY", proxy.url)
    monkeypatch.setenv("http_proxy", proxy.url)
    try:
        b = backend_for("s3://test-bucket/v", o)
        assert sorted(b.list()) == ["new.bin", "obj.bin"]
        b.delete("new.bin")
        assert not b.exists("new.bin")
        assert bytes(b.get("obj.bin", bytearray)) == DATA
    finally:
        proxy.close()
    # every request went to the bucket's own host name, none to the path-style endpoint host
    assert {r.host for r in proxy.seen} == {bucket_host.split("//")[1]}
    assert {r.method for r in proxy.seen} >= {"GET", "HEAD", "DELETE"}


def test_a_suffix_longer_than_the_object_is_the_whole_object(s3: dict[str, Any]) -> None:
    """A suffix longer than the object asks for all of it (zarr's stateful store tests ask so); moto answers
    it for an empty object with a 200, which is exactly what was asked."""
    s3["client"].put_object(Bucket="test-bucket", Key="small", Body=b"0123456789")
    s3["client"].put_object(Bucket="test-bucket", Key="empty", Body=b"")
    s3["client"].put_object(Bucket="test-bucket", Key="other", Body=b"abcdefghijklmnopqrstuvwxyz")
    b = backend_for("s3://test-bucket", {k: v for k, v in s3.items() if k != "client"})
    w = b.get_many(["small", "other", "empty"], [ByteRange("suffix", 100), ByteRange("suffix", 4), ByteRange("suffix", 7)],
                   lambda n: (np.empty(n, np.uint8), None))
    assert [w.view(i).tobytes() for i in range(3)] == [b"0123456789", b"wxyz", b""]
    assert bytes(b.get("small", bytearray, ByteRange("suffix", 100))) == b"0123456789"
    assert bytes(b.get("other", bytearray, ByteRange("suffix", 4))) == b"wxyz"
    assert bytes(b.get("empty", bytearray, ByteRange("suffix", 100))) == b""
    # the last 0 bytes are none (zarr's stores answer b""), not the whole object
    assert bytes(b.get("small", bytearray, ByteRange("suffix", 0))) == b""
    w0 = b.get_many(["small"], [ByteRange("suffix", 0)], lambda n: (np.empty(n, np.uint8), None))
    assert w0.view(0).tobytes() == b""
