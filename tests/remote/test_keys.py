"""Keys on every remote transport: one encoding rule (each segment percent-encoded whole), so any
key a user can write round-trips — ``%``, ``#``, ``?``, spaces, non-ASCII — and any key that a server
would decode into a path outside the root is refused before a request is sent.

Issue 16: on an HTTP root, ``%2e%2e/secret.bin``, ``..%2fsecret.bin``, ``%2E%2E%2Fsecret.bin`` and
``.%2e/secret.bin`` reached a file outside the root through nginx; ``a#frag`` and ``a?v=1`` returned
object ``a``; a key with a space failed with HTTP 400 on ranged reads.
"""

from __future__ import annotations

import itertools
import os
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from servers.nginx import NginxServer
from servers.webhdfs import WebHDFSServer

import gdsstore
from gdsstore.engine.backend import backend_for
from gdsstore.engine.remote.keys import check_remote_key

from .conftest import WEBHDFS_USER, payload

ESCAPES = ["%2e%2e/secret.bin", "..%2fsecret.bin", "%2E%2E%2Fsecret.bin", ".%2e/secret.bin", "%2e./secret.bin",
           "a/%2e%2e/%2e%2e/secret.bin", "%2e%2e%2f%2e%2e%2fsecret.bin"]
SPECIAL = ["a#frag", "a?v=1", "with space.bin", "100%.bin", "%41.bin", "é/日本.bin", "a+b=c&d.bin", "~x;y,z'.bin"]

_counter = itertools.count()


@pytest.fixture(scope="module")
def www(nginx: NginxServer, nginx_root: str) -> tuple[NginxServer, str]:
    """nginx, with ``secret.bin`` in its document root, outside every backend root used here."""
    with open(os.path.join(nginx_root, "secret.bin"), "wb") as f:
        f.write(b"TOP SECRET")
    return nginx, nginx_root


def _http_backend(www: tuple[NginxServer, str], files: dict[str, bytes]) -> Any:
    """An HTTP backend over a fresh directory that holds ``files`` (nginx only serves, never writes)."""
    nginx, root = www
    sub = f"keys/{next(_counter)}"
    for key, data in files.items():
        path = os.path.join(root, sub, *key.split("/"))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)
    return backend_for(nginx.url(sub))


def _read_all_ways(backend: Any, key: str) -> list[bytes]:
    """The object through a whole get, and through a ranged open (2 ranges)."""
    whole = bytes(backend.get(key, bytearray))
    with gdsstore.config.set({"task_size": 1000}), backend.open(key) as f:
        buf = np.empty(f.size, "u1")
        f.read(buf)
    return [whole, buf.tobytes()]


@pytest.mark.parametrize("key", ESCAPES)
def test_keys_that_decode_outside_the_root_are_refused_on_http(www: tuple[NginxServer, str], key: str) -> None:
    backend = _http_backend(www, {"inside.bin": b"ok"})
    for call in (lambda: backend.get(key, bytearray), lambda: backend.open(key), lambda: backend.info(key)):
        with pytest.raises(ValueError, match="invalid key"):
            call()


@pytest.mark.parametrize("key", ESCAPES)
def test_keys_that_decode_outside_the_root_are_refused_on_s3_and_webhdfs(
    s3: dict[str, Any], webhdfs: WebHDFSServer, key: str
) -> None:
    s3b = backend_for("s3://test-bucket/root", {k: v for k, v in s3.items() if k != "client"})
    hdfs = backend_for(webhdfs.url("/root"), {"user": WEBHDFS_USER})
    for b in (s3b, hdfs):
        with pytest.raises(ValueError, match="invalid key"):
            b.get(key, bytearray)
        with pytest.raises(ValueError, match="invalid key"):
            b.put(key, b"x")
        with pytest.raises(ValueError, match="invalid key"):
            b.delete(key)
    assert "Contents" not in s3["client"].list_objects_v2(Bucket="test-bucket")  # nothing was written


@pytest.mark.parametrize("key", SPECIAL)
def test_special_characters_round_trip_on_http(www: tuple[NginxServer, str], key: str) -> None:
    data = payload(2500, seed=len(key))
    backend = _http_backend(www, {key: data, key.split("#")[0].split("?")[0] + ".other": b"wrong object"})
    assert _read_all_ways(backend, key) == [data, data]


# Segments a user can write: letters, digits, the characters that mean something in URLs, spaces,
# non-ASCII, and dots (a segment of only dots is refused by the key check).
# "2eEfF5c" make percent-escapes of '.', '/' and '\\' likely ("%2e%2E", "..%2f", "%5c").
_SEGMENT = st.text(alphabet="aZ09._-~%#?&=+;, 'é日\u00a02eEfF5c", min_size=1, max_size=8)
_KEYS = st.lists(_SEGMENT, min_size=1, max_size=3).map("/".join)


def _accepted(key: str) -> bool:
    try:
        check_remote_key(key, "test")
    except ValueError:
        return False
    return True


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(key=_KEYS)
@example(key="%2e%2e/secret.bin")
@example(key="a/.%2e/b")
@example(key="100%/%a0/%zz")
def test_any_key_round_trips_or_is_refused_on_every_transport(
    www: tuple[NginxServer, str], s3: dict[str, Any], webhdfs: WebHDFSServer, key: str
) -> None:
    data = payload(1500, seed=hash(key) & 0xFFFF)
    n = next(_counter)
    s3b = backend_for(f"s3://test-bucket/p{n}", {k: v for k, v in s3.items() if k != "client"})
    hdfs = backend_for(webhdfs.url(f"/p{n}"), {"user": WEBHDFS_USER})
    if not _accepted(key):
        # A key that names a path outside the root, as written or as a server decodes it.
        for b in (s3b, hdfs, _http_backend(www, {})):
            with pytest.raises(ValueError, match="invalid key"):
                b.get(key, bytearray)
        return
    http = _http_backend(www, {key: data})
    # nginx serves the file at root + key: the path the server decoded is exactly that, nothing outside.
    assert _read_all_ways(http, key) == [data, data]
    for b in (s3b, hdfs):
        b.put(key, data)
        assert _read_all_ways(b, key) == [data, data]
        assert key in set(b.list())


def _reference_bad(key: str) -> bool:
    """The key rule as first written (a split per key), which :func:`check_key`'s one search replaced."""
    return key != "" and (
        key.startswith("/")
        or "\\" in key
        or "\x00" in key
        or any(seg in ("", ".", "..") for seg in key.rstrip("/").split("/"))
    )


@settings(max_examples=600, deadline=None)
@given(st.lists(st.sampled_from(["", ".", "..", "...", "a", ".a", "a.", "..b", "c\\d", "\x00", "/", "%2e"]),
                max_size=6).map("/".join))  # fmt: skip
@example("a//b")
@example("a/./b/")
@example("a/b/")
@example("/")
def test_check_key_refuses_exactly_what_the_reference_rule_refuses(key: str) -> None:
    from gdsstore.engine.backend import check_key

    if _reference_bad(key):
        with pytest.raises(ValueError, match="invalid key"):
            check_key(key, "test")
    else:
        assert check_key(key, "test") == key
