"""LocalBackend: the engine-level backend under GDSStore (no zarr involved)."""

from __future__ import annotations

import errno
import os
import pickle
import threading
from pathlib import Path

import numpy as np
import pytest

import gdsstore
from gdsstore.engine.backend import backend_for
from gdsstore.engine.localfs import TMP_SUFFIX, LocalBackend
from gdsstore.engine.ranges import ByteRange


def _alloc(n: int) -> np.ndarray:
    return np.empty(n, dtype="u1")


def test_backend_for_local_roots(tmp_path: Path) -> None:
    b = backend_for(str(tmp_path))
    assert isinstance(b, LocalBackend)
    assert b == backend_for(f"file://{tmp_path}") == pickle.loads(pickle.dumps(b))
    assert b.url == f"file://{tmp_path}" and repr(b) == f"LocalBackend('file://{tmp_path}')"
    assert b.writable and b.listable
    with pytest.raises(TypeError, match=r"only the storage options \[.follow_symlinks.\], got \[.anon.\]"):
        backend_for(str(tmp_path), {"anon": True})


def test_put_get_ranges_info(tmp_path: Path) -> None:
    b = LocalBackend(tmp_path)
    data = np.arange(1000, dtype="u2").view("u1")
    b.put("a/b/c.bin", data)
    assert (tmp_path / "a" / "b" / "c.bin").read_bytes() == data.tobytes()
    assert bytes(b.get("a/b/c.bin", _alloc)) == data.tobytes()
    assert bytes(b.get("a/b/c.bin", _alloc, ByteRange("range", 10, 20))) == data.tobytes()[10:20]
    assert bytes(b.get("a/b/c.bin", _alloc, ByteRange("suffix", 5))) == data.tobytes()[-5:]
    assert bytes(b.get("a/b/c.bin", _alloc, ByteRange("offset", 1995))) == data.tobytes()[1995:]
    assert bytes(b.get("a/b/c.bin", _alloc, ByteRange("range", 5000, 6000))) == b""
    info = b.info("a/b/c.bin")
    assert (info.size, info.type) == (2000, "file") and info.mtime is not None
    assert b.info("a/b").type == "directory"
    assert b.exists("a/b/c.bin") and not b.exists("a/b/x")
    for missing in ("nope", "a/b/c.bin/deeper", "a/b"):
        with pytest.raises(FileNotFoundError):
            b.get(missing, _alloc)


def test_put_is_traced_through_the_engine(tmp_path: Path) -> None:
    b = LocalBackend(tmp_path)
    with gdsstore.trace() as t:
        b.put("k", np.ones(4096, "u1"))
        b.get("k", _alloc)
    assert [(e.op, e.route, e.nbytes) for e in t.events] == [
        ("write", "posix", 4096),
        ("read", "posix", 4096),
    ]


def test_exclusive_put(tmp_path: Path) -> None:
    b = LocalBackend(tmp_path)
    b.put("k", np.frombuffer(b"old", "u1"), exclusive=True)
    with pytest.raises(FileExistsError, match="already exists"):
        b.put("k", np.frombuffer(b"new", "u1"), exclusive=True)
    assert (tmp_path / "k").read_bytes() == b"old"
    assert os.listdir(tmp_path) == ["k"]


def test_exclusive_put_many_threads_one_winner(tmp_path: Path) -> None:
    b = LocalBackend(tmp_path)
    wins: list[int] = []
    barrier = threading.Barrier(8)

    def writer(i: int) -> None:
        barrier.wait()
        try:
            b.put("k", np.full(1 << 16, i, "u1"), exclusive=True)
            wins.append(i)
        except FileExistsError:
            pass

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert len(wins) == 1
    assert (tmp_path / "k").read_bytes() == bytes([wins[0]]) * (1 << 16)
    assert os.listdir(tmp_path) == ["k"]


def test_exclusive_put_without_hard_links(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Filesystems without hard links (FAT, some FUSE mounts) fail os.link with EPERM.
    def no_link(src: str, dst: str) -> None:
        raise OSError(errno.EPERM, "Operation not permitted", dst)

    monkeypatch.setattr(os, "link", no_link)
    b = LocalBackend(tmp_path)
    b.put("k", np.frombuffer(b"first", "u1"), exclusive=True)
    with pytest.raises(FileExistsError):
        b.put("k", np.frombuffer(b"second", "u1"), exclusive=True)
    assert (tmp_path / "k").read_bytes() == b"first"
    assert os.listdir(tmp_path) == ["k"]


def test_put_with_fsync_setting(tmp_path: Path) -> None:
    b = LocalBackend(tmp_path)
    with gdsstore.config.set({"fsync": True}):
        b.put("x/k", np.frombuffer(b"durable", "u1"))
    assert (tmp_path / "x" / "k").read_bytes() == b"durable"


def test_put_errors(tmp_path: Path) -> None:
    b = LocalBackend(tmp_path)
    b.put("file", np.zeros(1, "u1"))
    with pytest.raises(NotADirectoryError, match="a parent of it is a file"):
        b.put("file/child", np.zeros(1, "u1"))
    with pytest.raises(ValueError, match="needs a file name"):
        b.put("dir/", np.zeros(1, "u1"))
    with pytest.raises(ValueError, match="reserved"):
        b.put(".x.0123" + TMP_SUFFIX, np.zeros(1, "u1"))  # a temporary file's name
    with pytest.raises(TypeError, match=r"LocalFile\.pwrite\(\): `buf` must be"):
        b.put("k", object())
    # A failed write leaves no temp file and no key.
    assert sorted(os.listdir(tmp_path)) == ["file"]


def test_delete_and_delete_prefix(tmp_path: Path) -> None:
    b = LocalBackend(tmp_path)
    for k in ("a/x", "a/y/z", "ab", "b"):
        b.put(k, np.zeros(1, "u1"))
    b.delete("missing")
    b.delete("ab/under-a-file")
    b.delete("b")
    assert not (tmp_path / "b").exists()
    b.delete_prefix("a/")
    assert sorted(os.listdir(tmp_path)) == ["ab"]
    with pytest.raises(ValueError, match="refusing to delete the root"):
        b.delete("")
    b.delete_prefix("")
    assert tmp_path.is_dir() and os.listdir(tmp_path) == []


def test_listing(tmp_path: Path) -> None:
    b = LocalBackend(tmp_path)
    for k in ("zarr.json", "g/zarr.json", "g/c/0/0", "g/c/0/1", "gg/zarr.json"):
        b.put(k, np.zeros(2, "u1"))
    (tmp_path / "g" / f".zarr.json.abc{TMP_SUFFIX}").write_bytes(b"orphan")
    assert sorted(b.list()) == ["g/c/0/0", "g/c/0/1", "g/zarr.json", "gg/zarr.json", "zarr.json"]
    assert sorted(b.list("g/")) == ["g/c/0/0", "g/c/0/1", "g/zarr.json"]
    assert sorted(b.list("g")) == ["g/c/0/0", "g/c/0/1", "g/zarr.json", "gg/zarr.json"]
    assert sorted(b.list("g/c/0/")) == ["g/c/0/0", "g/c/0/1"]
    assert list(b.list("nothing/")) == []
    assert sorted(b.list_dir("")) == ["g", "gg", "zarr.json"]
    assert sorted(b.list_dir("g")) == sorted(b.list_dir("g/")) == ["c", "zarr.json"]
    assert list(b.list_dir("missing")) == [] and list(b.list_dir("zarr.json")) == []


def test_mkdir_and_root_creation(tmp_path: Path) -> None:
    b = LocalBackend(tmp_path / "new" / "root")
    b.mkdir("")
    b.mkdir("a/b")
    assert (tmp_path / "new" / "root" / "a" / "b").is_dir()


@pytest.mark.parametrize("key", ["../x", "/abs", "a//b", "a/../b", ".", "a\\b"])
def test_every_method_checks_keys(tmp_path: Path, key: str) -> None:
    b = LocalBackend(tmp_path / "root")
    for call in (
        lambda: b.open(key),
        lambda: b.info(key),
        lambda: b.get(key, _alloc),
        lambda: b.put(key, np.zeros(1, "u1")),
        lambda: b.delete(key),
        lambda: b.delete_prefix(key),
        lambda: list(b.list(key)),
        lambda: list(b.list_dir(key)),
        lambda: b.mkdir(key),
    ):
        with pytest.raises(ValueError, match="invalid key"):
            call()
    assert os.listdir(tmp_path) == []


def test_put_over_directories_left_by_deleted_keys(tmp_path: Path) -> None:
    """Found by zarr's stateful machine: set("a/x/y"), delete it, set("a") failed with IsADirectoryError."""
    b = LocalBackend(tmp_path)
    b.put("a/x/y", np.zeros(1, "u1"))
    b.delete("a/x/y")
    assert list(b.list()) == []
    b.put("a", np.ones(2, "u1"))
    assert list(b.list()) == ["a"] and (tmp_path / "a").read_bytes() == b"\x01\x01"
    b.put("d/k", np.zeros(1, "u1"))
    with pytest.raises(IsADirectoryError, match="'d' is a directory with files under it"):
        b.put("d", np.zeros(1, "u1"))
    assert sorted(b.list()) == ["a", "d/k"]
