"""Fixtures of the archive tests: an HDF5 file made with h5py (tests/archives/data.py makes the data),
and the servers the remote tests read through (nginx, the fault server; moto's S3 is the session's
``moto`` fixture of tests/conftest.py), started once per session and stopped after."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from servers.faults import FaultServer
from servers.nginx import NginxServer, nginx_binary

from .data import write_h5


@pytest.fixture
def h5file(tmp_path: Path) -> tuple[Path, dict[str, np.ndarray]]:
    p = tmp_path / "a.h5"
    return p, write_h5(p)


@pytest.fixture(scope="session")
def archive_nginx(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NginxServer]:
    """nginx serving a fresh directory (``.root``), its requests logged (``.requests()``)."""
    if nginx_binary() is None:
        pytest.skip("nginx is not installed here (apt-get install nginx-light); the archive HTTP tests skip")
    root = tmp_path_factory.mktemp("archive-www")
    os.chmod(root, 0o755)
    srv = NginxServer(str(root), access_log=True)
    try:
        yield srv
    finally:
        srv.close()


@pytest.fixture(scope="session")
def archive_faults() -> Iterator[FaultServer]:
    srv = FaultServer()
    try:
        yield srv
    finally:
        srv.close()
