"""The WebHDFS transport and backend against the namenode + datanode test server."""

from __future__ import annotations

import logging
import os
from typing import Any

import numpy as np
import pytest
from servers.webhdfs import WebHDFSServer

import gdsstore
from gdsstore.engine.backend import backend_for
from gdsstore.engine.ranges import ByteRange

from .conftest import WEBHDFS_TOKEN, WEBHDFS_USER, payload

DATA = payload(300 << 10, seed=5)
USER = {"user": WEBHDFS_USER}
TOKEN = {"delegation": WEBHDFS_TOKEN}


def test_write_then_read_through_datanode(webhdfs: WebHDFSServer) -> None:
    url = webhdfs.url("/d/x.bin")
    with gdsstore.trace() as t:
        with gdsstore.open(url, "wb", **USER) as f:
            f.write(np.frombuffer(DATA, "u1"))
        with gdsstore.open(url, **USER) as f:
            assert f.size == len(DATA)
            buf = np.empty(f.size, "u1")
            assert f.read(buf) == len(DATA)
            part = bytearray(1001)
            assert f.read(part, offset=99_999) == 1001
    assert buf.tobytes() == DATA and bytes(part) == DATA[99_999:101_000]
    assert {e.route for e in t.events} == {"webhdfs"}
    # Data went through the datanode: CREATE and every OPEN range were redirected there.
    dn = [p for m, port, p in webhdfs.log if port == webhdfs.datanode_port]
    assert any("op=CREATE" in p for p in dn)
    assert sum("op=OPEN" in p for p in dn) == 5 + 1  # 300 KiB in 64 KiB ranges, then one 1001-byte read
    nn_opens = [p for m, port, p in webhdfs.log if port == webhdfs.port and "op=OPEN" in p]
    assert any("offset=65536&length=65536" in p for p in nn_opens)


def test_delegation_token_is_used_and_never_shown(webhdfs: WebHDFSServer, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    url = webhdfs.url("/t.bin")
    with gdsstore.trace() as t:
        with gdsstore.open(url, "wb", **TOKEN) as f:
            f.write(DATA[:1000])
        with gdsstore.open(url, **TOKEN) as f:
            buf = bytearray(f.size)
            f.read(buf)
    assert bytes(buf) == DATA[:1000]
    assert all(f"delegation={WEBHDFS_TOKEN}" in p for _, _, p in webhdfs.log)
    with pytest.raises(FileNotFoundError) as missing:
        gdsstore.open(webhdfs.url("/nope.bin"), **TOKEN)
    with pytest.raises(PermissionError) as bad:
        gdsstore.open(url, delegation=WEBHDFS_TOKEN[::-1])
    for text in (repr(f), str(t), repr(t.events), str(missing.value), str(bad.value), caplog.text):
        assert WEBHDFS_TOKEN not in text and WEBHDFS_TOKEN[::-1] not in text


def test_auth_and_errors(webhdfs: WebHDFSServer) -> None:
    backend_for(webhdfs.url("/"), USER).put("f.bin", b"abc")
    with pytest.raises(PermissionError, match="401"):
        gdsstore.open(webhdfs.url("/f.bin"))  # no user.name
    with pytest.raises(PermissionError):
        gdsstore.open(webhdfs.url("/f.bin"), user="mallory")
    with pytest.raises(FileNotFoundError, match=r"FileNotFoundException|404"):
        gdsstore.open(webhdfs.url("/missing.bin"), **USER)
    backend_for(webhdfs.url("/"), USER).mkdir("dir")
    with pytest.raises(IsADirectoryError):
        gdsstore.open(webhdfs.url("/dir"), **USER)
    with pytest.raises(ValueError, match="not a remote URL"):
        gdsstore.open("webhdfs:///x", **USER)
    with pytest.raises(ValueError, match="not a webhdfs"):
        backend_for("webhdfs://:8/x", USER)
    with pytest.raises(TypeError, match="unknown storage options"):
        gdsstore.open(webhdfs.url("/f.bin"), username="x")
    with pytest.raises(ValueError, match="mode"):
        gdsstore.open(webhdfs.url("/f.bin"), "r+b", **USER)


def test_backend_operations(webhdfs: WebHDFSServer) -> None:
    b = backend_for(webhdfs.url("/root"), USER)
    assert repr(b) == f"WebHDFSBackend('webhdfs://127.0.0.1:{webhdfs.port}/root')"
    b.put("a/b/c.bin", DATA)
    b.put("a/d.bin", b"hello")
    b.put("zarr.json", b"{}")
    assert sorted(b.list()) == ["a/b/c.bin", "a/d.bin", "zarr.json"]
    assert sorted(b.list("a/")) == ["a/b/c.bin", "a/d.bin"]
    assert sorted(b.list("a/d")) == ["a/d.bin"]
    assert sorted(b.list("zz")) == []
    assert sorted(b.list_dir()) == ["a", "zarr.json"]
    assert sorted(b.list_dir("a")) == ["b", "d.bin"]
    assert b.info("a/d.bin").size == 5 and b.info("a").type == "directory"
    assert b.exists("a/d.bin") and not b.exists("a/zz")
    assert bytes(b.get("a/b/c.bin", bytearray, ByteRange("suffix", 77))) == DATA[-77:]
    with pytest.raises(FileExistsError):
        b.put("a/d.bin", b"other", exclusive=True)
    assert bytes(b.get("a/d.bin", bytearray)) == b"hello"
    b.put("a/d.bin", b"other")
    assert bytes(b.get("a/d.bin", bytearray)) == b"other"
    b.delete("a/d.bin")
    b.delete("a/d.bin")  # missing: not an error
    assert not b.exists("a/d.bin")
    b.delete_prefix("a")
    assert sorted(b.list()) == ["zarr.json"]
    with pytest.raises(ValueError, match="invalid key"):
        b.get("../x", bytearray)


def test_small_get_skips_the_status_call(webhdfs: WebHDFSServer) -> None:
    b = backend_for(webhdfs.url("/r"), USER)
    b.put("small.bin", DATA[:5000])
    b.put("big.bin", DATA)
    webhdfs.log.clear()
    assert bytes(b.get("small.bin", bytearray)) == DATA[:5000]
    assert not any("GETFILESTATUS" in p for _, _, p in webhdfs.log)
    assert bytes(b.get("big.bin", bytearray)) == DATA  # a full first range: then the size is asked
    assert any("GETFILESTATUS" in p for _, _, p in webhdfs.log)
    with pytest.raises(FileNotFoundError):
        b.get("missing.bin", bytearray)


def test_file_replaced_during_a_multi_range_read_is_an_error(
    webhdfs: WebHDFSServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """WebHDFS has no ETag: a read of several ranges compares the file's (fileId, length,
    modificationTime) before and after, so bytes of two versions are never returned as one."""
    from gdsstore.engine.remote import webhdfs as wh
    from gdsstore.engine.remote.reader import RangeMismatchError

    url = webhdfs.url("/v.bin")
    with gdsstore.open(url, "wb", **USER) as f:
        f.write(DATA)
    local = os.path.join(webhdfs.root, "v.bin")
    new = bytes(reversed(DATA))
    real = wh.WebHDFSClient._read
    calls: list[int] = []

    def read(self: wh.WebHDFSClient, path: str, offset: int, *args: Any) -> int:
        calls.append(offset)
        if len(calls) == 2:  # another writer replaces the file after the first range (same size)
            with open(local + ".tmp", "wb") as fh:
                fh.write(new)
            os.replace(local + ".tmp", local)
        return real(self, path, offset, *args)

    monkeypatch.setattr(wh.WebHDFSClient, "_read", read)
    with gdsstore.config.set({"remote.concurrency": 1}), gdsstore.open(url, **USER) as f:
        with pytest.raises(RangeMismatchError, match="changed during a read of 5 ranges"):
            f.read(np.empty(f.size, "u1"))
        buf = np.empty(f.size, "u1")  # unchanged since: the same read succeeds, all new bytes
        assert f.read(buf) == len(DATA) and buf.tobytes() == new
    webhdfs.log.clear()
    with gdsstore.open(url, **USER) as f:
        f.read(bytearray(1000))  # one range: no version calls
    assert sum("GETFILESTATUS" in p for _, _, p in webhdfs.log) == 1  # the open's size lookup only


def test_a_writer_checks_size_and_offset_as_a_local_file_does(webhdfs: WebHDFSServer, tmp_path: Any) -> None:
    """Remote and local writers take the same ``size``/``offset`` (a non-int is a TypeError in both)."""
    for url in (webhdfs.url("/w.bin"), str(tmp_path / "w.bin")):
        with gdsstore.open(url, "wb", **(USER if url.startswith("webhdfs") else {})) as f:
            with pytest.raises(TypeError, match="`offset` must be an int"):
                f.pwrite(b"abc", offset=1.5)
            with pytest.raises(TypeError, match="`size` must be an int"):
                f.pwrite(b"abc", size="3")
            with pytest.raises(ValueError, match="buffer too small"):
                f.pwrite(b"abc", size=4)
            f.pwrite(b"abc", offset=2).result()
    assert bytes(backend_for(webhdfs.url("/"), USER).get("w.bin", bytearray)) == b"\0\0abc"


def test_a_wave_lands_every_object_whole_and_asks_sizes_only_where_needed(webhdfs: WebHDFSServer) -> None:
    """WebHDFS answers the core's pieces: an object that fits its room is one OPEN (one byte more than the
    room tells it fits), a larger one is asked its size and read again whole, a suffix asks the size first,
    an offset past the end reads nothing, a missing file is a -1 size."""
    from gdsstore.engine.backend import host_alloc

    b = backend_for(webhdfs.url("/wave"), USER)
    for name, data in (("small.bin", DATA[:100]), ("big.bin", DATA), ("empty.bin", b"")):
        b.put(name, data)
    webhdfs.log.clear()
    keys = ["small.bin", "big.bin", "empty.bin", "missing.bin", "small.bin", "small.bin"]
    brs = [None, None, None, None, ByteRange("suffix", 10), ByteRange("offset", 1000)]
    w = b.get_many(keys, brs, host_alloc, room=4 * 2048)
    got = [None if v is None else v.tobytes() for v in map(w.view, range(len(keys)))]
    assert got == [DATA[:100], DATA, b"", None, DATA[90:100], b""]
    namenode = [p for _, port, p in webhdfs.log if port == webhdfs.port]
    assert sum("op=OPEN" in p for p in namenode) == 4 + 1 + 1  # each whole object, the big one again, the suffix
    assert sum("op=GETFILESTATUS" in p for p in namenode) == 3  # the big one, the suffix, the offset


def test_reads_register_no_secret_per_request(webhdfs: WebHDFSServer) -> None:
    """Every datanode redirect differs (its offset and length): registered whole, each read added one entry
    to the bounded registry of secrets, until the secrets registered earlier (keys, tokens) were forgotten
    and no longer masked. Its secret values are registered, once."""
    from gdsstore.engine.remote.redact import known_secret_count, scrub_text

    backend_for(webhdfs.url("/"), TOKEN).put("many.bin", DATA[:4096])
    with gdsstore.open(webhdfs.url("/many.bin"), **TOKEN) as f:
        f.read(bytearray(10))
        registered = known_secret_count()
        for i in range(1, 41):
            f.read(bytearray(10), offset=i)
        assert known_secret_count() == registered
    assert WEBHDFS_TOKEN not in scrub_text(f"token {WEBHDFS_TOKEN} in a message")
