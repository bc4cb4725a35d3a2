"""S3 requests go where botocore sends them: the native core's and botocore's own.

moto is the configured endpoint, set each way botocore can be told (``AWS_ENDPOINT_URL``,
``AWS_ENDPOINT_URL_S3``, a profile's ``endpoint_url`` or ``services`` section chosen by ``AWS_PROFILE``, by
the ``profile`` storage option or by a ``session`` of that profile, the ``endpoint_url`` option,
``client_kwargs``). Every other host is the decoy:
it is the HTTP(S) proxy of every host but moto's loopback address (the native core and botocore both honour
the proxy variables), so a request for ``https://BUCKET.s3.REGION.amazonaws.com`` arrives there as a
``CONNECT``, and a test fails if the decoy received anything.

The environment is the test's own (monkeypatch): no ``AWS_*`` variable, ``~/.aws`` file or instance metadata
from the machine running it.
"""

from __future__ import annotations

import contextlib
import itertools
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import zarr
from servers.decoy import Decoy
from servers.moto_s3 import ACCESS_KEY, SECRET_KEY, MotoServer
from servers.net import closed_port
from servers.prefix_proxy import PrefixProxy

import gdsstore
from gdsstore.engine.remote.s3 import S3Client, S3Target, get_s3_client

from .conftest import payload

DATA = payload(200_000, seed=35)
#: Each way botocore can be given the endpoint (see ``_configure``).
WAYS = [
    "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "profile endpoint_url", "profile services", "profile option",
    "session option", "endpoint_url option", "client_kwargs endpoint_url",
]
_PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY")
_buckets = itertools.count()
# A profile named explicitly takes its keys from the profile, never from the environment (botocore's rule).
_KEYS = f"aws_access_key_id = {ACCESS_KEY}\naws_secret_access_key = {SECRET_KEY}\n"


@pytest.fixture(scope="module")
def decoy() -> Iterator[Decoy]:
    srv = Decoy()
    try:
        yield srv
    finally:
        srv.close()


@pytest.fixture
def aws_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, decoy: Decoy) -> Path:
    """A clean AWS environment with moto's keys, every proxy pointing at the decoy but for 127.0.0.1;
    returns the path of the (not yet written) shared config file."""
    for name in list(os.environ):
        if name.startswith("AWS_") or name.upper() in (*_PROXY_VARIABLES, "NO_PROXY"):
            monkeypatch.delenv(name)
    config = tmp_path / "aws-config"
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "aws-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", ACCESS_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
    for name in _PROXY_VARIABLES:
        monkeypatch.setenv(name, decoy.url)
        monkeypatch.setenv(name.lower(), decoy.url)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    monkeypatch.setenv("no_proxy", "127.0.0.1")
    return config


def _configure(way: str, endpoint: str, config: Path, monkeypatch: pytest.MonkeyPatch, decoy: Decoy) -> dict[str, Any]:
    """Point botocore at ``endpoint`` the way named ``way``; the storage options that go with it."""
    if way == "AWS_ENDPOINT_URL":
        monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
    elif way == "AWS_ENDPOINT_URL_S3":
        monkeypatch.setenv("AWS_ENDPOINT_URL_S3", endpoint)
        monkeypatch.setenv("AWS_ENDPOINT_URL", decoy.url)  # the service's own variable wins over the global one
    elif way == "profile services":
        config.write_text(f"[profile moto]\n{_KEYS}services = local-s3\n\n[services local-s3]\ns3 =\n"
                          f"  endpoint_url = {endpoint}\n")
        monkeypatch.setenv("AWS_PROFILE", "moto")
    elif way.startswith(("profile", "session")):
        config.write_text(f"[profile moto]\n{_KEYS}endpoint_url = {endpoint}\n")
        if way == "profile option":
            return {"profile": "moto"}
        if way == "session option":
            import botocore.session

            return {"session": botocore.session.Session(profile="moto")}
        monkeypatch.setenv("AWS_PROFILE", "moto")
    elif way == "endpoint_url option":
        monkeypatch.setenv("AWS_ENDPOINT_URL", decoy.url)  # an explicit endpoint wins over the environment
        return {"endpoint_url": endpoint}
    elif way == "client_kwargs endpoint_url":
        return {"client_kwargs": {"endpoint_url": endpoint}}
    return {}


def _new_bucket(moto: MotoServer, moto_client: Any) -> str:
    """A fresh bucket (a new name per test: the core caches a store per bucket and options)."""
    name = f"endpoint-{os.getpid()}-{next(_buckets)}"
    moto_client.create_bucket(Bucket=name)
    return name


def _arrange(moto_client: Any, bucket: str) -> np.ndarray:
    """``raw.bin`` (:data:`DATA`) and a zarr array ``a.zarr`` (returned) in ``bucket``, put by plain botocore."""
    want = np.arange(600, dtype="i4").reshape(20, 30)
    objects: dict[str, Any] = {}
    zarr.create_array(zarr.storage.MemoryStore(objects), shape=want.shape, chunks=(10, 10), dtype=want.dtype)[:] = want
    for key, buf in objects.items():
        moto_client.put_object(Bucket=bucket, Key=f"a.zarr/{key}", Body=buf.to_bytes())
    moto_client.put_object(Bucket=bucket, Key="raw.bin", Body=DATA)
    return want


def _assert_core(t: Any) -> None:
    """Reads and writes went through the core."""
    reasons = [(op, reason) for op, _, reason in t.by_reason()]
    reads = [r for op, r in reasons if op == "read"]
    writes = [r for op, r in reasons if op == "write"]
    assert reads and writes, reasons
    assert any(r.startswith("native core") for r in reads), reads
    assert all("; native core" in r for r in writes), writes


@pytest.mark.parametrize("way", WAYS)
def test_reads_and_writes_go_to_the_configured_endpoint(
    way: str, moto: MotoServer, moto_client: Any, decoy: Decoy, aws_env: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    bucket = _new_bucket(moto, moto_client)
    want = _arrange(moto_client, bucket)
    opts = _configure(way, moto.endpoint_url, aws_env, monkeypatch, decoy)
    _read_and_write(bucket, want, opts, decoy)
    assert moto_client.get_object(Bucket=bucket, Key="new.bin")["Body"].read() == DATA[:1000]
    assert moto_client.get_object(Bucket=bucket, Key="w.zarr/c/1/2")["ContentLength"] > 0


@contextlib.contextmanager
def _nothing_sent_to(decoy: Decoy) -> Iterator[None]:
    """Fail if the decoy receives anything in the block, also when the block raised (then it says where its
    requests went)."""
    before = len(decoy.received)
    try:
        yield
    finally:
        stray = decoy.received[before:]
        assert stray == [], f"requests sent where botocore does not send them: {stray}"


def _read_and_write(bucket: str, want: np.ndarray, opts: dict[str, Any], decoy: Decoy) -> None:
    """Read ``a.zarr`` and ``raw.bin`` (:func:`_arrange`), write ``new.bin`` and ``w.zarr``: all of it through
    the core, and nothing to the decoy (checked first, so a failed read names where its requests went)."""
    with _nothing_sent_to(decoy), gdsstore.trace() as t:
        got = zarr.open_array(gdsstore.GDSStore(f"s3://{bucket}/a.zarr", read_only=True, storage_options=opts))
        np.testing.assert_array_equal(got[:], want)
        with gdsstore.open(f"s3://{bucket}/raw.bin", **opts) as f:
            buf = np.empty(f.size, "u1")
            f.read(buf)
        assert buf.tobytes() == DATA
        with gdsstore.open(f"s3://{bucket}/new.bin", "wb", **opts) as f:
            f.write(DATA[:1000])
        written = zarr.create_array(gdsstore.GDSStore(f"s3://{bucket}/w.zarr", storage_options=opts),
                                    shape=(20, 30), chunks=(10, 10), dtype="i4")
        written[:] = want
    _assert_core(t)


@pytest.mark.parametrize("way", ["AWS_ENDPOINT_URL", "endpoint_url option"])
def test_an_endpoint_with_a_path_prefix_keeps_it(
    way: str, moto: MotoServer, moto_client: Any, decoy: Decoy, aws_env: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # moto behind a gateway at /gateway/s3: every request must carry the prefix, path-style after it
    bucket = _new_bucket(moto, moto_client)
    want = _arrange(moto_client, bucket)
    proxy = PrefixProxy(moto.endpoint_url, "/gateway/s3")
    try:
        opts = _configure(way, proxy.url, aws_env, monkeypatch, decoy)
        _read_and_write(bucket, want, opts, decoy)
        assert proxy.outside == []
    finally:
        proxy.close()
    assert moto_client.get_object(Bucket=bucket, Key="new.bin")["Body"].read() == DATA[:1000]


@pytest.mark.parametrize("way", ["AWS_ENDPOINT_URL_S3", "profile services"])
def test_multipart_upload_goes_to_the_configured_endpoint(
    way: str, moto: MotoServer, moto_client: Any, decoy: Decoy, aws_env: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    bucket = _new_bucket(moto, moto_client)
    opts = _configure(way, moto.endpoint_url, aws_env, monkeypatch, decoy)
    big = payload((5 << 20) + 1000, seed=36)  # two parts of the smallest size S3 takes
    small_parts = {"remote.multipart_threshold": 5 << 20, "remote.multipart_chunksize": 5 << 20}
    with _nothing_sent_to(decoy), gdsstore.config.set(small_parts), gdsstore.trace() as t:
        with gdsstore.open(f"s3://{bucket}/big.bin", "wb", **opts) as f:
            f.write(big)
    assert moto_client.get_object(Bucket=bucket, Key="big.bin")["Body"].read() == big
    writes = [e.reason for e in t.events if e.op == "write"]
    assert writes and all("multipart upload" in r for r in writes), writes
    assert all("; native core" in r for r in writes), writes


def test_a_changed_environment_is_seen_by_the_next_client(
    moto: MotoServer, moto_client: Any, decoy: Decoy, aws_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The same options in another environment: a new client resolving the new endpoint, not the cached one.
    bucket = _new_bucket(moto, moto_client)
    moto_client.put_object(Bucket=bucket, Key="raw.bin", Body=DATA)
    url = f"s3://{bucket}/raw.bin"

    def read(options: dict[str, Any]) -> bytes:
        with gdsstore.open(url, **options) as f:
            buf = np.empty(f.size, "u1")
            f.read(buf)
        return buf.tobytes()

    def refused_by_decoy(options: dict[str, Any]) -> None:
        before = len(decoy.received)
        with pytest.raises(PermissionError):  # the decoy answers 403
            read(options)
        assert decoy.received[before:], "the decoy, configured, got nothing"

    opts = {"region_name": "us-east-1"}
    monkeypatch.setenv("AWS_ENDPOINT_URL", decoy.url)
    refused_by_decoy(opts)
    first = get_s3_client(opts)
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto.endpoint_url)
    before = len(decoy.received)
    assert read(opts) == DATA and decoy.received[before:] == []
    assert get_s3_client(opts) is not first and get_s3_client(opts) is get_s3_client(opts)
    # the shared config file rewritten: the next client reads it again
    monkeypatch.delenv("AWS_ENDPOINT_URL")
    with_profile = {**opts, "profile": "late"}
    aws_env.write_text(f"[profile late]\n{_KEYS}endpoint_url = {decoy.url}\n")
    refused_by_decoy(with_profile)
    aws_env.write_text(f"# moved\n[profile late]\n{_KEYS}endpoint_url = {moto.endpoint_url}\n")
    before = len(decoy.received)
    assert read(with_profile) == DATA and decoy.received[before:] == []


def test_core_takes_what_botocore_resolved(aws_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Nothing is sent for these: each is botocore's presign of a probe key, read into object_store's options.
    def opts(**kw: Any) -> dict[str, str]:
        o = S3Client(kw).core_options("bkt")
        assert o is not None
        return {k: v for k, v in o.items() if k not in ("aws_access_key_id", "aws_secret_access_key", "aws_bucket")}

    # AWS itself: virtual-hosted, signed for the given region; a dotted bucket name goes path-style
    assert opts(region_name="eu-west-1") == {
        "aws_region": "eu-west-1", "aws_endpoint": "https://bkt.s3.amazonaws.com",
        "aws_virtual_hosted_style_request": "true",
    }
    assert S3Client({"region_name": "eu-west-1"}).core_options("my.bkt")["aws_endpoint"] == (  # type: ignore[index]
        "https://s3.eu-west-1.amazonaws.com")
    # without region_name, a bucket that does not tell its region is signed for botocore's (the environment's)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "ap-south-1")
    assert opts(endpoint_url=f"http://127.0.0.1:{closed_port()}")["aws_region"] == "ap-south-1"
    # an endpoint with a path prefix, path-style and virtual-hosted
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", "http://objects.example:9000/s3/api")
    assert opts(region_name="minio-1", addressing_style="path") == {
        "aws_region": "minio-1", "aws_endpoint": "http://objects.example:9000/s3/api",
        "aws_virtual_hosted_style_request": "false",
    }
    assert opts(region_name="minio-1", addressing_style="virtual")["aws_endpoint"] == (
        "http://bkt.objects.example:9000/s3/api")
    # the anonymous client: no signature, the client's region
    assert opts(anon=True, region_name="us-west-2")["aws_skip_signature"] == "true"


@pytest.mark.parametrize(
    ("url", "want"),
    [
        ("https://bkt.s3.amazonaws.com/gdsstore-probe/x?X-Amz-Credential=K%2F20260101%2Feu-west-1%2Fs3%2Faws4_request",
         ("https://bkt.s3.amazonaws.com", False, "eu-west-1")),
        ("http://127.0.0.1:9000/pre/bkt/gdsstore-probe/x", ("http://127.0.0.1:9000/pre", True, "us-east-1")),
        ("http://h:1/bkt/bkt/gdsstore-probe/x", ("http://h:1/bkt", True, "us-east-1")),
    ],
)
def test_target_is_read_off_the_probe_url(url: str, want: tuple[str, bool, str]) -> None:
    t = S3Target.from_probe(url, "bkt", "us-east-1")
    assert t is not None and (t.endpoint, t.path_style, t.region) == want


@pytest.mark.parametrize(
    "url",
    [
        "https://bkt.s3.amazonaws.com/other/key",  # not the probe key: a shape the core cannot reproduce
        "https://bkt.s3express-use1-az4.us-east-1.amazonaws.com/gdsstore-probe/x"
        "?X-Amz-Credential=K%2F20260101%2Fus-east-1%2Fs3express%2Faws4_request",
    ],
)
def test_target_refuses_what_the_core_cannot_reproduce(url: str) -> None:
    assert S3Target.from_probe(url, "bkt", "us-east-1") is None
