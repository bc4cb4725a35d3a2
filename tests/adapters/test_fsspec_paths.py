"""Path dialects of the ``gds`` filesystem (gdsstore/adapters/fsspec/paths.py): every protocol's
URL forms become one (backend root, key), and the way back gives the same URL."""

from __future__ import annotations

import tomllib
from importlib import import_module
from pathlib import Path
from typing import Any

import fsspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from gdsstore.adapters.fsspec import GDSFileSystem, GDSLocalFileSystem
from gdsstore.adapters.fsspec.paths import (
    REMOTE_PROTOCOLS,
    parent_path,
    split_path,
    strip_path,
    transport_options,
    unstrip_path,
)

HDFS = {"host": "nn", "port": 9870}

# (protocol, what a user writes, stripped path, (root, key), options)
CASES: list[tuple[str, str, str, tuple[str, str], dict[str, Any]]] = [
    ("file", "gds:///data/x.bin", "/data/x.bin", ("/", "data/x.bin"), {}),
    ("file", "gds::file:///data/x.bin", "/data/x.bin", ("/", "data/x.bin"), {}),
    ("file", "local:///data/d/", "/data/d", ("/", "data/d"), {}),
    ("file", "/data/x.bin", "/data/x.bin", ("/", "data/x.bin"), {}),
    ("s3", "gds::s3://bucket/a/b.bin", "bucket/a/b.bin", ("s3://bucket", "a/b.bin"), {}),
    ("s3", "s3a://bucket/a/", "bucket/a", ("s3://bucket", "a"), {}),
    ("s3", "bucket/k", "bucket/k", ("s3://bucket", "k"), {}),
    ("http", "gds::http://h:8080/d/x.bin", "http://h:8080/d/x.bin", ("http://h:8080", "d/x.bin"), {}),
    ("https", "h/d/x.bin", "https://h/d/x.bin", ("https://h", "d/x.bin"), {}),
    ("webhdfs", "gds::webhdfs://nn:9870/d/x", "/d/x", ("webhdfs://nn:9870", "d/x"), HDFS),
    ("webhdfs", "/d/x/", "/d/x", ("swebhdfs://nn:9870", "d/x"), {**HDFS, "use_https": True}),
    ("swebhdfs", "swebhdfs://nn/d", "/d", ("swebhdfs://nn", "d"), {"host": "nn"}),
]


def test_webhdfs_urls_keep_their_host() -> None:
    assert unstrip_path("webhdfs", "/d/x", HDFS) == "gds::webhdfs://nn:9870/d/x"
    assert unstrip_path("webhdfs", "/d/x") == "gds::webhdfs://d/x"  # no host known: fsspec's own form


@pytest.mark.parametrize(("protocol", "given_path", "stripped", "located", "options"), CASES)
def test_each_protocol_splits_into_root_and_key(
    protocol: str, given_path: str, stripped: str, located: tuple[str, str], options: dict[str, Any]
) -> None:
    assert strip_path(protocol, given_path) == stripped
    assert split_path(protocol, stripped, options) == located
    # Back to a gds URL, and stripping that gives the same path.
    url = unstrip_path(protocol, stripped, options)
    assert url.startswith("gds:") and strip_path(protocol, url) == stripped


def test_split_path_errors_name_the_fix() -> None:
    with pytest.raises(ValueError, match="names no bucket; use gds::s3://bucket/key"):
        split_path("s3", "", {})
    with pytest.raises(ValueError, match="webhdfs needs a host"):
        split_path("webhdfs", "/d/x", {})


def test_parents_and_transport_options() -> None:
    assert parent_path("s3", "bucket/a/b") == "bucket/a"
    assert parent_path("s3", "bucket") == ""
    assert parent_path("webhdfs", "/d") == "/"
    opts = {"host": "nn", "port": 1, "use_https": False, "token": "t", "user": "u"}
    assert transport_options("webhdfs", opts) == {"delegation": "t", "user": "u"}
    assert transport_options("s3", {"anon": True}) == {"anon": True}


@given(st.lists(st.text("abcXYZ019_-.", min_size=1, max_size=8).filter(lambda s: s not in (".", "..")), min_size=1, max_size=4))
def test_s3_keys_round_trip(parts: list[str]) -> None:
    key = "/".join(parts)
    stripped = strip_path("s3", f"gds::s3://bucket/{key}")
    assert split_path("s3", stripped, {}) == ("s3://bucket", key)
    assert unstrip_path("s3", stripped) == f"gds::s3://bucket/{key}"


def test_filesystem_uses_the_same_dialect(tmp_path: Path) -> None:
    fs = GDSFileSystem(target_protocol="s3", target_options={"anon": True}, skip_instance_cache=True)
    assert fs._strip_protocol("gds::s3://bucket/a/b") == "bucket/a/b"
    assert fs._parent("gds::s3://bucket/a/b") == "bucket/a"
    assert fs.unstrip_protocol("bucket/a/b") == "gds::s3://bucket/a/b"
    backend, key = fs._locate("s3://bucket/a/b")
    assert backend.url.startswith("s3://bucket") and key == "a/b"
    assert fs._locate("bucket/c")[0] is backend  # one backend per root
    assert set(REMOTE_PROTOCOLS) == {"s3", "s3a", "http", "https", "webhdfs", "swebhdfs"}


def test_entry_point_names_the_filesystem() -> None:
    """pyproject's ``fsspec.specs`` entry point resolves to the class that serves ``gds``."""
    pyproject = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())
    target = pyproject["project"]["entry-points"]["fsspec.specs"]["gds"]
    module, _, name = target.partition(":")
    assert getattr(import_module(module), name) is GDSFileSystem
    assert fsspec.get_filesystem_class("gds") is GDSFileSystem
    assert isinstance(fsspec.filesystem("gds"), GDSLocalFileSystem)
