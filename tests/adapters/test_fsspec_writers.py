"""The writer contract through fsspec, as users write (``with fsspec.open(...)``, pandas): the ``gds`` file
locally and chained to S3 (moto). Published on a clean close only; an exception or a real SIGINT discards the
bytes and leaves the old value whole; a writer collected unclosed is discarded with a ``ResourceWarning``."""

from __future__ import annotations

import gc
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import fsspec
import pytest
from servers.moto_s3 import bucket_state, new_bucket
from writing import OLD, Boom, leftovers, write_old


@pytest.fixture
def old_file(tmp_path: Path) -> Path:
    return write_old(tmp_path)


@pytest.mark.parametrize("exc", [Boom, KeyboardInterrupt])
@pytest.mark.parametrize("mode", ["wb", "w", "ab"])
def test_fsspec_open_discards_on_exception(old_file: Path, exc: type[BaseException], mode: str) -> None:
    with pytest.raises(exc), fsspec.open(f"gds://{old_file}", mode) as f:
        f.write(("x" if "b" not in mode else b"x") * (12 << 20))  # blocks already in the temporary file
        raise exc
    assert old_file.read_bytes() == OLD and leftovers(old_file.parent) == []


def test_fsspec_open_publishes_on_clean_exit(old_file: Path) -> None:
    with fsspec.open(f"gds://{old_file}", "wb") as f:
        f.write(b"y" * (12 << 20))
        assert old_file.read_bytes() == OLD
    assert old_file.read_bytes() == b"y" * (12 << 20)
    with fsspec.open(f"gds://{old_file}", "ab") as f:
        f.write(b"CC")
    assert old_file.read_bytes() == b"y" * (12 << 20) + b"CC" and leftovers(old_file.parent) == []


def test_pandas_write_that_fails_keeps_the_old_file(old_file: Path) -> None:
    pd = pytest.importorskip("pandas")

    class Unprintable:
        def __str__(self) -> str:
            raise Boom("cannot format this row")

    df = pd.DataFrame({"a": [*range(50_000), Unprintable()]})
    with pytest.raises(Boom):
        df.to_csv(f"gds://{old_file}", chunksize=1000)  # pandas writes the first chunks, then fails
    assert old_file.read_bytes() == OLD and leftovers(old_file.parent) == []
    df.iloc[:3].to_csv(f"gds://{old_file}")
    assert old_file.read_bytes().splitlines()[1] == b"0,0"


def test_unclosed_gds_writer_is_discarded_with_a_warning(old_file: Path) -> None:
    fs = fsspec.filesystem("gds")
    f = fs.open(str(old_file), "wb", block_size=1 << 20)
    f.write(b"z" * (2 << 20))
    with pytest.warns(ResourceWarning, match=rf"GDSFile: '{old_file}' was opened for writing and never closed"):
        del f
        gc.collect()
    assert old_file.read_bytes() == OLD and leftovers(old_file.parent) == []


# -- a real SIGINT to a child that writes ------------------------------------------------------------

_WRITER = r"""
import signal, sys, fsspec
# Python's own handler, whatever this child inherited (a parent that ignores SIGINT passes that on)
signal.signal(signal.SIGINT, signal.default_int_handler)
path, when = sys.argv[1], sys.argv[2]
chunk = b"n" * (1 << 20)
with fsspec.open("gds://" + path, "wb") as f:
    if when == "early":
        print("started", flush=True)
        sys.stdin.readline()  # the parent never answers: SIGINT comes here, before any byte is written
    for i in range(256):  # 1 MiB at a time, past 64 MiB: SIGINT comes while this writes
        f.write(chunk)
        if i == 0:
            print("started", flush=True)
    sys.stdin.readline()  # or here: the parent closes stdin only after its SIGINT (never a full disk)
print("published", flush=True)
"""


@pytest.mark.parametrize("when", ["early", "writing"])
def test_sigint_discards_and_ends_with_keyboardinterrupt(tmp_path: Path, when: str) -> None:
    p = tmp_path / "x.bin"
    p.write_bytes(OLD * 1000)
    proc = subprocess.Popen([sys.executable, "-c", _WRITER, str(p), when], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline() == b"started\n"
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    text = err.decode()
    assert proc.returncode == -signal.SIGINT, text  # Python's exit on an unhandled KeyboardInterrupt
    assert text.rstrip().endswith("KeyboardInterrupt"), text
    assert "During handling" not in text and "AttributeError" not in text, text  # KeyboardInterrupt, nothing else
    assert b"published" not in out
    assert p.read_bytes() == OLD * 1000 and leftovers(tmp_path) == []


# -- gds::s3 (moto) ----------------------------------------------------------------------------------


@pytest.fixture
def bucket(moto: Any) -> tuple[Any, str]:
    """A new bucket holding ``x.bin`` = OLD on the session's moto server, and a botocore client."""
    return new_bucket(moto, "fsspec-writers", {"x.bin": OLD})


def _s3_state(client: Any, name: str) -> tuple[bytes, list[Any]]:
    return bucket_state(client, name, "x.bin")


@pytest.mark.parametrize("exc", [Boom, KeyboardInterrupt])
def test_gds_s3_discards_on_exception(moto: Any, bucket: tuple[Any, str], exc: type[BaseException]) -> None:
    import gdsstore

    client, name = bucket
    url = f"gds::s3://{name}/x.bin"
    cfg = {"remote.multipart_threshold": 5 << 20, "remote.multipart_chunksize": 5 << 20}
    with gdsstore.config.set(cfg):
        with pytest.raises(exc), fsspec.open(url, "wb", s3=moto.storage_options) as f:
            f.write(b"m" * (11 << 20))
            raise exc
        assert _s3_state(client, name) == (OLD, [])
        with fsspec.open(url, "wb", s3=moto.storage_options) as f:
            f.write(b"m" * (11 << 20))
    assert _s3_state(client, name) == (b"m" * (11 << 20), [])


def test_gds_s3_refuses_append(moto: Any, bucket: tuple[Any, str]) -> None:
    client, name = bucket
    with pytest.raises(NotImplementedError, match=r"mode 'ab' \(append\) is for local files.*'wb'.*'xb'"):
        fsspec.open(f"gds::s3://{name}/x.bin", "ab", s3=moto.storage_options).open()
    assert _s3_state(client, name) == (OLD, [])


def test_unclosed_gds_s3_writer_is_discarded_with_a_warning(moto: Any, bucket: tuple[Any, str]) -> None:
    client, name = bucket
    fs = fsspec.filesystem("gds", target_protocol="s3", target_options=moto.storage_options)
    f = fs.open(f"{name}/x.bin", "wb")
    f.write(b"NEW")
    with pytest.warns(ResourceWarning, match=r"GDSFile: .*x\.bin' was opened for writing and never closed"):
        del f
        gc.collect()
    assert _s3_state(client, name) == (OLD, [])
