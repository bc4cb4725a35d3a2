"""A server without Range support (``python -m http.server``): whole objects read, partial reads say why
they cannot and what to do.

A whole-object read needs no Range: however large the object (it would be asked in ranges), it is read
in one request; a small one costs one request (an opened file asks its size first). A partial read fails with ``RangeNotSupportedError``
naming the fix. zarr through ``GDSStore`` reads whole chunk objects and works there too.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import zarr
from servers.net import free_port, stop_process, wait_port
from zarr.core.buffer import default_buffer_prototype

import gdsstore
from gdsstore.errors import RangeNotSupportedError


class PlainServer:
    """``python -m http.server`` over a directory; :meth:`gets` counts the GETs of one path in its log."""

    def __init__(self, root: Path, log: Path) -> None:
        self.port = free_port()
        self._log = log
        with open(log, "wb") as fh:
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "http.server", str(self.port), "--bind", "127.0.0.1", "-d", str(root)],
                stdout=subprocess.DEVNULL, stderr=fh,
            )
        wait_port(self.port, proc=self._proc)
        self.url = f"http://127.0.0.1:{self.port}"

    def gets(self, path: str) -> int:
        return sum(f'"GET {path} ' in line for line in self._log.read_text().splitlines())

    def close(self) -> None:
        stop_process(self._proc)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[PlainServer, Path]]:
    root = tmp_path / "www"
    root.mkdir()
    srv = PlainServer(root, tmp_path / "access.log")
    try:
        yield srv, root
    finally:
        srv.close()


def test_small_whole_object_is_one_request(server: tuple[PlainServer, Path]) -> None:
    srv, root = server
    data = os.urandom(100_000)
    (root / "small.bin").write_bytes(data)
    store = gdsstore.GDSStore(srv.url, read_only=True)
    got = store.get_sync("small.bin", prototype=default_buffer_prototype())
    assert got is not None and got.to_bytes() == data
    assert srv.gets("/small.bin") == 1
    with gdsstore.open(f"{srv.url}/small.bin") as f:  # an opened file asks its size first (a GET, no body taken)
        buf = np.empty(f.size, np.uint8)
        assert f.read(buf) == len(data)
    assert buf.tobytes() == data
    assert srv.gets("/small.bin") == 1 + 2


def test_large_whole_object_is_read(server: tuple[PlainServer, Path]) -> None:
    srv, root = server
    data = os.urandom(3 << 20)
    (root / "big.bin").write_bytes(data)
    # Ranges of 1 MiB: the whole object is asked in three, which this server answers with all of it.
    with gdsstore.config.set({"task_size": 1 << 20, "remote.max_range_size": 1 << 20}):
        with gdsstore.open(f"{srv.url}/big.bin") as f:
            buf = np.empty(f.size, np.uint8)
            assert f.read(buf) == len(data)
    assert buf.tobytes() == data


def test_partial_read_says_what_to_do(server: tuple[PlainServer, Path]) -> None:
    srv, root = server
    (root / "x.bin").write_bytes(os.urandom(10_000))
    buf = np.zeros(100, np.uint8)
    with gdsstore.open(f"{srv.url}/x.bin") as f:
        with pytest.raises(RangeNotSupportedError) as info:
            f.read(buf, offset=10)
    msg = str(info.value)
    assert "does not support HTTP range requests" in msg and "read whole objects" in msg
    assert not buf.any()  # nothing landed


def test_zarr_through_gdsstore_reads_there(server: tuple[PlainServer, Path]) -> None:
    srv, root = server
    zarr.create_array(str(root / "a.zarr"), shape=(64,), chunks=(16,), dtype="i4")[:] = np.arange(64)
    z = zarr.open_array(gdsstore.GDSStore(f"{srv.url}/a.zarr", read_only=True), mode="r")
    assert z[:].tolist() == list(range(64))
