"""WebHDFS under faults: a busy node (503) is retried, a datanode that resets or sends a short body is
retried from where the body broke, and one that keeps failing is an error after ``remote.max_attempts``,
never wrong bytes. Every count is of the requests the namenode and the datanode received."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest
from servers.webhdfs import WebHDFSServer

import gdsstore
from gdsstore.engine.remote import RemoteIOError

from .conftest import WEBHDFS_USER, payload

DATA = payload(40_000, seed=9)  # one range (task_size 64 KiB): one OPEN per attempt
USER = {"user": WEBHDFS_USER}
FILL = 0xA5


@pytest.fixture(scope="module")
def server() -> Iterator[WebHDFSServer]:
    srv = WebHDFSServer(user=WEBHDFS_USER)
    try:
        yield srv
    finally:
        srv.close()


@pytest.fixture
def hdfs(server: WebHDFSServer) -> WebHDFSServer:
    """The server holding ``/f.bin``, no fault armed, an empty request log."""
    server.reset_faults()
    with open(f"{server.root}/f.bin", "wb") as f:
        f.write(DATA)
    server.log.clear()
    return server


def requests(srv: WebHDFSServer, node: str, op: str) -> int:
    port = srv.port if node == "namenode" else srv.datanode_port
    return sum(1 for _, p, path in srv.log if p == port and f"op={op}&" in path + "&")


def read(srv: WebHDFSServer) -> np.ndarray:
    with gdsstore.open(srv.url("/f.bin"), **USER) as f:
        buf = np.full(len(DATA), FILL, "u1")
        srv.log.clear()  # the read's requests, not the open's size lookup
        assert f.read(buf) == len(DATA)
    return buf


@pytest.mark.parametrize(("node", "op"), [("namenode", "OPEN"), ("datanode", "OPEN")])
def test_a_busy_node_is_retried(hdfs: WebHDFSServer, node: str, op: str) -> None:
    hdfs.fail(node, op, "503", 2)
    assert read(hdfs).tobytes() == DATA
    assert requests(hdfs, node, op) == 3  # two 503s, then the answer


def test_a_busy_namenode_is_retried_for_the_size(hdfs: WebHDFSServer) -> None:
    hdfs.fail("namenode", "GETFILESTATUS", "503", 2)
    with gdsstore.open(hdfs.url("/f.bin"), **USER) as f:
        assert f.size == len(DATA)
    assert requests(hdfs, "namenode", "GETFILESTATUS") == 3


@pytest.mark.parametrize("mode", ["reset", "short"])
def test_a_broken_datanode_body_is_retried_from_where_it_broke(hdfs: WebHDFSServer, mode: str) -> None:
    hdfs.fail("datanode", "OPEN", mode, 2)
    assert read(hdfs).tobytes() == DATA
    assert requests(hdfs, "datanode", "OPEN") == 3 and requests(hdfs, "namenode", "OPEN") == 3
    opens = [path for _, p, path in hdfs.log if p == hdfs.port and "op=OPEN" in path]
    assert "offset=0&" in opens[0] and "offset=0&" not in opens[-1]  # the last asks only what was missing


@pytest.mark.parametrize(("node", "mode"), [("datanode", "reset"), ("datanode", "short"), ("namenode", "503")])
def test_a_node_that_keeps_failing_is_an_error_after_max_attempts(hdfs: WebHDFSServer, node: str, mode: str) -> None:
    hdfs.fail(node, "OPEN", mode, -1)
    with gdsstore.open(hdfs.url("/f.bin"), **USER) as f:
        buf = np.full(len(DATA), FILL, "u1")
        hdfs.log.clear()
        with pytest.raises(RemoteIOError, match=r"failed after 4 attempt\(s\) \(remote\.max_attempts=4\)"):
            f.read(buf)
    assert requests(hdfs, node, "OPEN") == 4
    ref = np.frombuffer(DATA, "u1")
    assert np.all((buf == FILL) | (buf == ref))  # untouched or right, never another byte


@pytest.mark.parametrize("node", ["namenode", "datanode"])
def test_a_write_to_a_busy_node_is_retried_and_whole(hdfs: WebHDFSServer, node: str) -> None:
    hdfs.fail(node, "CREATE", "503", 2)
    with gdsstore.open(hdfs.url("/w.bin"), "wb", **USER) as f:
        f.write(DATA)
    with open(f"{hdfs.root}/w.bin", "rb") as fh:
        assert fh.read() == DATA
    assert requests(hdfs, node, "CREATE") == 3
