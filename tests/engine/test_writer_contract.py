"""The writer contract of ``gdsstore.open`` (gdsstore/engine/file.py ``BaseFile``), local and S3 (moto):
published on a clean close only; an exception or an interrupt discards the bytes and leaves the old value
whole; a writer collected unclosed is discarded with a ``ResourceWarning`` naming it; ``"ab"`` appends."""

from __future__ import annotations

import gc
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from servers.moto_s3 import bucket_state, new_bucket
from writing import OLD, Boom, leftovers, write_old

import gdsstore


@pytest.fixture
def old_file(tmp_path: Path) -> Path:
    return write_old(tmp_path)


# -- "ab" ------------------------------------------------------------------------------------------


def test_ab_appends_at_the_end_in_call_order(old_file: Path) -> None:
    with gdsstore.open(old_file, "ab") as f:
        assert f.write(b"CC") == 2
        assert f.write(np.frombuffer(b"DDD", "u1")) == 3
        assert f.size == len(OLD) + 5
    assert old_file.read_bytes() == b"OLDCCDDD"  # never b"CCD": the old bytes stay, the new ones follow
    assert leftovers(old_file.parent) == []


def test_ab_starts_a_missing_file_and_keeps_the_mode_bits(tmp_path: Path, old_file: Path) -> None:
    p = tmp_path / "new.bin"
    with gdsstore.open(p, "ab") as f:
        f.write(b"first")
    assert p.read_bytes() == b"first"
    old_file.chmod(0o640)
    with gdsstore.open(old_file, "ab") as f:
        f.write(b"!")
    assert old_file.read_bytes() == OLD + b"!" and (old_file.stat().st_mode & 0o777) == 0o640


def test_ab_refuses_an_offset(old_file: Path) -> None:
    with gdsstore.open(old_file, "ab") as f:
        with pytest.raises(ValueError, match=r"mode 'ab'.*`offset` must be 0, got 1.*'r\+b'"):
            f.write(b"x", offset=1)
    assert old_file.read_bytes() == OLD  # nothing written: the clean close publishes the unchanged copy


def test_ab_that_raises_keeps_the_old_file(old_file: Path) -> None:
    with pytest.raises(Boom), gdsstore.open(old_file, "ab") as f:
        f.write(b"half")
        raise Boom
    assert old_file.read_bytes() == OLD and leftovers(old_file.parent) == []


def test_bad_modes_name_the_modes(old_file: Path, moto: Any) -> None:
    with pytest.raises(ValueError, match=r"unsupported mode 'a'; use 'rb'.*'r\+b'.*'wb'.*'xb'.*'ab' \(append\)"):
        gdsstore.open(old_file, "a")
    with pytest.raises(ValueError, match=r"unsupported mode 'ab' for a remote object; use 'rb' or 'wb'"):
        gdsstore.open("s3://bucket/x.bin", "ab", **moto.storage_options)


# -- local "wb" / "xb" -------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["wb", "ab"])
def test_local_writer_publishes_only_on_clean_close(old_file: Path, mode: str) -> None:
    f = gdsstore.open(old_file, mode)
    f.write(b"NEW")
    assert old_file.read_bytes() == OLD  # nothing published before close
    f.close()
    assert old_file.read_bytes() == (b"NEW" if mode == "wb" else OLD + b"NEW")
    assert leftovers(old_file.parent) == []


@pytest.mark.parametrize("exc", [Boom, KeyboardInterrupt])
def test_local_writer_discards_on_exception(old_file: Path, exc: type[BaseException]) -> None:
    with pytest.raises(exc), gdsstore.open(old_file, "wb") as f:
        f.write(bytes(1 << 20))
        raise exc
    assert old_file.read_bytes() == OLD and leftovers(old_file.parent) == []
    p = old_file.parent / "never.bin"
    with pytest.raises(exc), gdsstore.open(p, "xb") as f:
        f.write(b"x")
        raise exc
    assert not p.exists() and leftovers(old_file.parent) == []


def test_close_in_finally_during_an_error_discards(old_file: Path) -> None:
    """pandas' way: a plain close() in ``finally`` while the error propagates."""
    f = gdsstore.open(old_file, "wb")
    with pytest.raises(Boom):
        try:
            f.write(b"partial")
            raise Boom
        finally:
            f.close()
    assert f.closed and old_file.read_bytes() == OLD and leftovers(old_file.parent) == []


def test_writer_opened_while_handling_an_error_publishes(old_file: Path) -> None:
    """An error already being handled when the writer opened is not the writer's."""
    try:
        raise Boom
    except Boom:
        f = gdsstore.open(old_file, "wb")
        f.write(b"fallback")
        f.close()
    assert old_file.read_bytes() == b"fallback"


def test_unclosed_local_writer_is_discarded_with_a_warning(old_file: Path) -> None:
    f = gdsstore.open(old_file, "wb")
    f.write(b"NEW")
    with pytest.warns(ResourceWarning, match=rf"LocalWriteFile: '{old_file}' was opened for writing and never closed"):
        del f
        gc.collect()
    assert old_file.read_bytes() == OLD and leftovers(old_file.parent) == []


def test_local_writer_errors(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="no such directory"):
        gdsstore.open(tmp_path / "missing" / "x.bin", "wb")
    with pytest.raises(IsADirectoryError, match="is a directory"):
        gdsstore.open(tmp_path, "wb")
    assert leftovers(tmp_path) == []


# -- S3 (moto) ---------------------------------------------------------------------------------------


@pytest.fixture
def bucket(moto: Any) -> tuple[Any, str]:
    """A new bucket holding ``x.bin`` = OLD on the session's moto server, and a botocore client."""
    return new_bucket(moto, "writers", {"x.bin": OLD})


def _s3_state(client: Any, name: str) -> tuple[bytes, list[Any]]:
    return bucket_state(client, name, "x.bin")


SMALL_PARTS = {"remote.multipart_threshold": 5 << 20, "remote.multipart_chunksize": 5 << 20}


@pytest.mark.parametrize("exc", [Boom, KeyboardInterrupt])
def test_s3_writer_discards_on_exception(moto: Any, bucket: tuple[Any, str], exc: type[BaseException]) -> None:
    client, name = bucket
    with gdsstore.config.set(SMALL_PARTS):
        with pytest.raises(exc), gdsstore.open(f"s3://{name}/x.bin", "wb", **moto.storage_options) as f:
            f.write(bytes(11 << 20))  # a multipart upload's worth
            raise exc
        f = gdsstore.open(f"s3://{name}/x.bin", "wb", **moto.storage_options)
        with pytest.raises(exc):
            try:
                f.write(bytes(11 << 20))
                raise exc
            finally:
                f.close()
    assert _s3_state(client, name) == (OLD, [])


def test_s3_writer_publishes_multipart_on_clean_close(moto: Any, bucket: tuple[Any, str]) -> None:
    client, name = bucket
    data = np.random.default_rng(1).integers(0, 256, 11 << 20, dtype=np.uint8).tobytes()
    with gdsstore.config.set(SMALL_PARTS), gdsstore.open(f"s3://{name}/x.bin", "wb", **moto.storage_options) as f:
        f.write(data)
    assert _s3_state(client, name) == (data, [])


def test_unclosed_s3_writer_is_discarded_with_a_warning(moto: Any, bucket: tuple[Any, str]) -> None:
    client, name = bucket
    f = gdsstore.open(f"s3://{name}/x.bin", "wb", **moto.storage_options)
    f.write(b"NEW")
    with pytest.warns(ResourceWarning, match=rf"RemoteWriteFile: 's3://{name}/x.bin' was opened for writing and never closed"):
        del f
        gc.collect()
    assert _s3_state(client, name) == (OLD, [])
