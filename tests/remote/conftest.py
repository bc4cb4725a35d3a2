"""Fixtures for the remote engine: real servers on 127.0.0.1 (moto S3, nginx, WebHDFS, fault
injection), started once per session, torn down after; fast retry settings for each test."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from servers.faults import FaultServer
from servers.moto_s3 import MotoServer
from servers.net import Blackhole, free_port, stop_process, wait_port
from servers.webhdfs import WebHDFSServer

import gdsstore

WEBHDFS_USER = "alice"
WEBHDFS_TOKEN = "HDFSdelegationTOKEN-gdsstore-DoNotLeak-0123456789"


def payload(n: int, seed: int = 0) -> bytes:
    """``n`` reproducible random bytes."""
    return np.random.default_rng(seed).integers(0, 256, n, dtype=np.uint8).tobytes()


def read_pieces(store: Any, where: str, rows: list[Any], buffer: Any, *, if_match: str | None = None,
                **options: Any) -> list[Any]:
    """``core.read_table`` of ``rows`` (``core.Piece`` s), each piece's ``CoreResult`` (a missing object fails
    its piece, as ``core.read_one`` has it); ``options``: ``retry``, ``concurrency``, ``timeout``."""
    from gdsstore.engine.remote import core

    res = core.read_table(store, where, core.PieceTable.of(rows, if_match=if_match), buffer, missing=False, **options)
    return [res.result(i) for i in range(len(rows))]


@pytest.fixture(autouse=True)
def fast_retries() -> Iterator[None]:
    """Small tasks and quick, bounded retries, so fault tests exercise many ranges and stay fast."""
    with gdsstore.config.set(
        {
            "task_size": 64 << 10,
            "remote.max_range_size": 64 << 10,  # ranges of exactly task_size: many of them
            "remote.backoff_base": 0.001,
            "remote.backoff_max": 0.01,
            "remote.max_attempts": 4,
            "remote.timeout": 5.0,
            "remote.connect_timeout": 2.0,
        }
    ):
        yield


@pytest.fixture(scope="session")
def fault_server() -> Iterator[FaultServer]:
    srv = FaultServer()
    try:
        yield srv
    finally:
        srv.close()


@pytest.fixture
def faults(fault_server: FaultServer) -> FaultServer:
    """The fault server with fresh counters and log."""
    fault_server.reset()
    return fault_server


@pytest.fixture(scope="session")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """A certificate for 127.0.0.1 signed by a test CA (openssl CLI), as (certfile, keyfile); the CA's
    certificate is ``ca.pem`` beside them (:func:`tls_ca`). A CA and a leaf, as a private PKI has them:
    rustls refuses a self-signed CA certificate used as the server's own."""
    import shutil
    import subprocess

    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("openssl is not installed: cannot make a test certificate for the HTTPS tests")
    d = tmp_path_factory.mktemp("tls")
    ca, ca_key, cert, key, csr, ext = (str(d / n) for n in ("ca.pem", "ca.key", "cert.pem", "key.pem", "leaf.csr",
                                                             "leaf.ext"))
    (d / "leaf.ext").write_text("subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\n")
    for args in (
        ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", ca_key, "-out", ca, "-days", "2",
         "-subj", "/CN=gdsstore test CA"],
        ["req", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", csr, "-subj", "/CN=127.0.0.1"],
        ["x509", "-req", "-in", csr, "-CA", ca, "-CAkey", ca_key, "-CAcreateserial", "-out", cert, "-days", "2",
         "-extfile", ext],
    ):
        subprocess.run([openssl, *args], check=True, capture_output=True, timeout=60)
    return cert, key


@pytest.fixture(scope="session")
def tls_ca(tls_files: tuple[str, str]) -> str:
    """The CA certificate (PEM) that signed :func:`tls_files`' certificate: what ``verify=`` takes."""
    import os

    return os.path.join(os.path.dirname(tls_files[0]), "ca.pem")


@pytest.fixture(scope="session")
def tls_server(tls_files: tuple[str, str]) -> Iterator[FaultServer]:
    srv = FaultServer(tls=tls_files)
    try:
        yield srv
    finally:
        srv.close()


@pytest.fixture
def blackhole() -> Iterator[Blackhole]:
    bh = Blackhole()
    try:
        yield bh
    finally:
        bh.close()


@pytest.fixture(scope="session")
def moto_client(moto: MotoServer) -> Any:
    """A plain botocore client of the moto server, to arrange and check things behind gdsstore's back."""
    import botocore.session

    opts = moto.storage_options
    return botocore.session.get_session().create_client(
        "s3", region_name="us-east-1", endpoint_url=opts["endpoint_url"],
        aws_access_key_id=opts["key"], aws_secret_access_key=opts["secret"],
    )


@pytest.fixture
def s3(moto: MotoServer, moto_client: Any) -> dict[str, Any]:
    """A fresh, empty bucket ``test-bucket``; its storage options, plus ``client`` (a botocore client)."""
    moto.reset()
    moto_client.create_bucket(Bucket="test-bucket")
    return {**moto.storage_options, "client": moto_client}


@pytest.fixture(scope="module")
def moto_auth() -> Iterator[str]:
    """A moto server that checks signatures (``INITIAL_NO_AUTH_ACTION_COUNT=0``): unknown keys get 403."""
    port = free_port()
    env = {**os.environ, "INITIAL_NO_AUTH_ACTION_COUNT": "0"}
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    try:
        wait_port(port, timeout=30, proc=proc)
        yield f"http://127.0.0.1:{port}"
    finally:
        stop_process(proc)


@pytest.fixture(scope="session")
def webhdfs_server() -> Iterator[WebHDFSServer]:
    srv = WebHDFSServer(user=WEBHDFS_USER, token=WEBHDFS_TOKEN)
    try:
        yield srv
    finally:
        srv.close()


@pytest.fixture
def webhdfs(webhdfs_server: WebHDFSServer) -> WebHDFSServer:
    """The WebHDFS server with an empty file system and a fresh request log."""
    import shutil

    for name in os.listdir(webhdfs_server.root):
        p = os.path.join(webhdfs_server.root, name)
        shutil.rmtree(p) if os.path.isdir(p) else os.remove(p)
    webhdfs_server.log.clear()
    return webhdfs_server
