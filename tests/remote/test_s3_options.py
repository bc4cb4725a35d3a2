"""S3 against moto: s3fs's option names with s3fs's meaning (issue 17), the bucket's region found before
signing, and a per-object cost that does not grow with the number of objects read (issue 14/16)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from servers.prefix_proxy import PrefixProxy

import gdsstore
from gdsstore.engine.backend import backend_for
from gdsstore.engine.remote.redact import MAX_SECRETS, known_secret_count
from gdsstore.engine.remote.s3 import S3Source, get_s3_client
from gdsstore.errors import RangeMismatchError

from .conftest import payload

DATA = payload(300_000, seed=31)


def opts(s3: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {**{k: v for k, v in s3.items() if k != "client"}, **extra}


def test_s3fs_and_fsspec_option_names_are_accepted(s3: dict[str, Any]) -> None:
    import botocore.session

    o = opts(s3, requester_pays=True, use_ssl=False, version_aware=True, session=botocore.session.Session(),
             skip_instance_cache=True, use_listings_cache=False, listings_expiry_time=10, max_paths=5,
             default_block_size=1 << 20, default_fill_cache=False, default_cache_type="none",
             cache_regions=True, asynchronous=False, loop=None)
    b = backend_for("s3://test-bucket/opts", o)
    b.put("a.bin", DATA)
    assert bytes(b.get("a.bin", bytearray)) == DATA
    with gdsstore.open("s3://test-bucket/opts/a.bin", **o) as f:
        buf = np.empty(f.size, "u1")
        assert f.read(buf) == len(DATA) and buf.tobytes() == DATA
    assert sorted(b.list()) == ["a.bin"]


def test_meaningless_option_values_are_refused(s3: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="asynchronous=True"):
        backend_for("s3://test-bucket", opts(s3, asynchronous=True))
    with pytest.raises(TypeError, match=r"botocore\.session\.Session"):
        backend_for("s3://test-bucket", opts(s3, session=object()))
    with pytest.raises(TypeError, match="s3_additional_kwargs must be a dict"):
        backend_for("s3://test-bucket", opts(s3, s3_additional_kwargs="AES256"))
    with pytest.raises(TypeError, match="unknown storage options"):
        backend_for("s3://test-bucket", opts(s3, requester_payz=True))


@pytest.mark.parametrize("size", [1000, 6 << 20])  # one PUT; a multipart upload
def test_s3_additional_kwargs_apply_server_side_encryption(s3: dict[str, Any], size: int) -> None:
    b = backend_for("s3://test-bucket", opts(s3, s3_additional_kwargs={"ServerSideEncryption": "AES256"}))
    data = payload(size, seed=3)
    with gdsstore.config.set({"remote.multipart_threshold": 5 << 20, "remote.multipart_chunksize": 5 << 20}):
        b.put("enc.bin", data)
    head = s3["client"].head_object(Bucket="test-bucket", Key="enc.bin")
    assert head["ServerSideEncryption"] == "AES256"
    assert bytes(b.get("enc.bin", bytearray)) == data


def test_requester_pays_is_sent_with_every_request(s3: dict[str, Any]) -> None:
    proxy = PrefixProxy(s3["endpoint_url"], "")  # records every request's headers on its way to moto
    try:
        b = backend_for("s3://test-bucket", opts(s3, requester_pays=True, endpoint_url=proxy.url, region_name="us-east-1"))
        b.put("rp.bin", DATA)
        assert b.info("rp.bin").size == len(DATA)
        assert sorted(b.list()) == ["rp.bin"]
        assert bytes(b.get("rp.bin", bytearray)) == DATA
        b.delete("rp.bin")
    finally:
        proxy.close()
    sent = {(r.method, r.headers.get("x-amz-request-payer")) for r in proxy.seen}
    # PUT, HEAD, LIST, GET and DELETE, all the core's: each says who pays
    assert {m for m, _ in sent} >= {"PUT", "HEAD", "GET", "DELETE"} and {p for _, p in sent} == {"requester"}
    assert b.client.core_options("test-bucket")["aws_request_payer"] == "true"


@pytest.mark.parametrize("version_aware", [True, False])
def test_version_aware_reads_the_version_opened(s3: dict[str, Any], version_aware: bool) -> None:
    s3["client"].put_bucket_versioning(Bucket="test-bucket", VersioningConfiguration={"Status": "Enabled"})
    b = backend_for("s3://test-bucket", opts(s3, version_aware=version_aware))
    b.put("v.bin", DATA)
    new = payload(len(DATA), seed=32)
    with gdsstore.config.set({"task_size": 64 << 10, "remote.concurrency": 2}), b.open("v.bin") as f:
        b.put("v.bin", new)  # replaced after the open, before any range is read
        buf = np.zeros(f.size, "u1")
        if version_aware:
            assert f.read(buf) == len(DATA)
            assert buf.tobytes() == DATA  # the version that was opened, whole
        else:
            with pytest.raises(RangeMismatchError):
                f.read(buf)
            old = np.frombuffer(DATA, "u1")
            assert np.all((buf == 0) | (buf == old))  # never the new version's bytes


def test_bucket_region_is_discovered_before_signing(s3: dict[str, Any]) -> None:
    s3["client"].create_bucket(Bucket="eu-bucket", CreateBucketConfiguration={"LocationConstraint": "eu-west-1"})
    b = backend_for("s3://eu-bucket/x", opts(s3))
    assert b.client.target("eu-bucket").region == "eu-west-1"
    assert b.client.target("test-bucket").region == "us-east-1"
    b.put("a.bin", DATA)
    assert bytes(b.get("a.bin", bytearray)) == DATA
    assert b.client.core_options("eu-bucket")["aws_region"] == "eu-west-1"  # what the core signs for
    given = backend_for("s3://eu-bucket/x", opts(s3, region_name="ap-south-1"))
    assert given.client.target("eu-bucket").region == "ap-south-1"  # an explicit region is never second-guessed


def test_preparing_gets_registers_nothing_per_object(s3: dict[str, Any]) -> None:
    """10,000 distinct keys sourced, as reads do: the secret-masking registries stay the size they were
    (once, every presigned URL's secrets went into a list re-sorted per registration, and the cost of a GET
    grew with the objects a process had read)."""
    client = get_s3_client(opts(s3))
    registered = known_secret_count()
    for i in range(10_000):
        S3Source(client, "test-bucket", f"k/{i // 1000}/{i}.bin").core.store()  # the store a read takes
    assert known_secret_count() == registered  # nothing registered per object
    assert known_secret_count() <= MAX_SECRETS


def test_anonymous_requests_are_not_signed(s3: dict[str, Any]) -> None:
    s3["client"].put_object(Bucket="test-bucket", Key="pub.bin", Body=DATA, ACL="public-read")
    b = backend_for("s3://test-bucket", {"endpoint_url": s3["endpoint_url"], "anon": True})
    o = b.client.core_options("test-bucket")
    assert o["aws_skip_signature"] == "true" and "aws_access_key_id" not in o
    assert bytes(b.get("pub.bin", bytearray)) == DATA  # an unsigned GET of a public object


def test_s3fs_options_through_the_fsspec_filesystem(s3: dict[str, Any]) -> None:
    """What an s3fs user passes as target options has s3fs's meaning here too."""
    from gdsstore.adapters.fsspec import GDSFileSystem

    s3opts = opts(s3, requester_pays=True, s3_additional_kwargs={"ServerSideEncryption": "AES256"},
                  version_aware=True, use_listings_cache=False, skip_instance_cache=True)
    fs = GDSFileSystem(target_protocol="s3", target_options=s3opts)
    fs.pipe_file("test-bucket/fs/a.bin", DATA)
    assert s3["client"].head_object(Bucket="test-bucket", Key="fs/a.bin")["ServerSideEncryption"] == "AES256"
    assert fs.cat_file("test-bucket/fs/a.bin") == DATA


def test_writes_of_many_sizes_make_one_trace_row(s3: dict[str, Any]) -> None:
    """Issue 18 item 4: the object size was part of the reason, so a 64-chunk zarr write made a
    43-row trace table. Reasons are route + why; sizes are the byte column."""
    b = backend_for("s3://test-bucket/trace", opts(s3))
    with gdsstore.trace() as t:
        for i in range(64):
            b.put(f"c/{i}", payload(1000 + 37 * i, seed=i))
    writes = [e for e in t.events if e.op == "write"]
    assert len(writes) == 64
    rows = {(e.route, e.reason) for e in writes}
    assert len(rows) == 1
    ((route, reason),) = rows
    assert route == "s3" and reason.startswith("single PUT (<= remote.multipart_threshold")
    assert sum(e.nbytes for e in writes) == sum(1000 + 37 * i for i in range(64))
