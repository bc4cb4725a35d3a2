"""Shared fixtures. GPU tests carry the ``gpu`` marker and skip, with the reason, where no GPU is."""

from __future__ import annotations

import os
from collections.abc import Iterator

import fsspec
import pytest
from servers.moto_s3 import MotoServer
from servers.nginx import NginxServer, nginx_binary

from gdsstore._optional import install_hint
from gdsstore.engine import cuda

# A checkout used without `pip install` (the GPU machine runs from PYTHONPATH) has no entry points,
# and an installed one may be stale: register the protocol as pyproject's entry point names it.
fsspec.register_implementation("gds", "gdsstore.adapters.fsspec.GDSFileSystem", clobber=True)


def pytest_configure(config: pytest.Config) -> None:
    # ... and xarray's engine "gdsstore" and zarr's codec names: this checkout's entry points, where the
    # environment lacks them (subprocesses and notebook kernels included), as an installed gdsstore has.
    from integrations.entry_points import expose_missing_entry_points

    expose_missing_entry_points()


def pytest_unconfigure(config: pytest.Config) -> None:
    from integrations.entry_points import remove_exposed_entry_points

    remove_exposed_entry_points()


def _gpu_skip_reason() -> str | None:
    if cuda.cupy_or_none() is None:
        return f"needs a CUDA GPU: cupy is not installed ({install_hint('cuda13')}); run `pytest -m gpu` on the GPU machine"
    if cuda.device_count() == 0:
        return "needs a CUDA GPU: cupy found no CUDA device / driver on this machine"
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    reason = _gpu_skip_reason()
    if reason is None:
        return
    skip = pytest.mark.skip(reason=reason)
    for item in items:
        if item.get_closest_marker("gpu") is not None:  # the marker, not a path part (gdsstore/gpu doctests run)
            item.add_marker(skip)


@pytest.fixture
def cp():  # type: ignore[no-untyped-def]
    """The cupy module (GPU tests only)."""
    import cupy

    return cupy


@pytest.fixture(scope="session")
def moto() -> Iterator[MotoServer]:
    """One moto S3 server on loopback for the whole session (tests/servers/moto_s3.py)."""
    pytest.importorskip("moto.server")
    srv = MotoServer()
    try:
        yield srv
    finally:
        srv.close()


@pytest.fixture(scope="session")
def nginx_root(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The directory :func:`nginx` serves (readable by nginx's workers)."""
    root = tmp_path_factory.mktemp("www")
    os.chmod(root, 0o755)
    return str(root)


@pytest.fixture(scope="session")
def nginx(nginx_root: str) -> Iterator[NginxServer]:
    """nginx on loopback serving :func:`nginx_root`, one for the session."""
    if nginx_binary() is None:
        pytest.skip("nginx is not installed here (apt-get install nginx-light); the HTTP tests against it skip")
    srv = NginxServer(nginx_root)
    try:
        yield srv
    finally:
        srv.close()
