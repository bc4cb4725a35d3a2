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
from servers.nginx import NginxServer, nginx_binary
from servers.webhdfs import WebHDFSServer

import gdsstore

WEBHDFS_USER = "alice"
WEBHDFS_TOKEN = "HDFSdelegationTOKEN-gdsstore-DoNotLeak-0123456789"


def payload(n: int, seed: int = 0) -> bytes:
    """``n`` reproducible random bytes."""
    return np.random.default_rng(seed).integers(0, 256, n, dtype=np.uint8).tobytes()


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
    """A self-signed certificate for 127.0.0.1 (openssl CLI), as (certfile, keyfile)."""
    import shutil
    import subprocess

    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("openssl is not installed: cannot make a test certificate for the HTTPS tests")
    d = tmp_path_factory.mktemp("tls")
    cert, key = str(d / "cert.pem"), str(d / "key.pem")
    subprocess.run(
        [openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert, "-days", "2",
         "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True, capture_output=True, timeout=60,
    )
    return cert, key


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
def nginx_root(tmp_path_factory: pytest.TempPathFactory) -> str:
    root = tmp_path_factory.mktemp("www")
    os.chmod(root, 0o755)
    return str(root)


@pytest.fixture(scope="session")
def nginx(nginx_root: str) -> Iterator[NginxServer]:
    if nginx_binary() is None:
        pytest.skip("nginx is not installed here (apt-get install nginx-light); the HTTP tests against it skip")
    srv = NginxServer(nginx_root)
    try:
        yield srv
    finally:
        srv.close()


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
