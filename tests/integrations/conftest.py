"""Fixtures for the integrations (xarray, dask, zarr entry points, packaging, icechunk): this checkout's
entry points (see :mod:`.entry_points`) and real servers on loopback."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest
from servers.moto_s3 import MotoServer
from servers.webhdfs import WebHDFSServer

from .entry_points import REPO, declared_entry_points, expose_missing_entry_points

__all__ = ["REPO", "WEBHDFS_USER", "declared_entry_points", "subprocess_env"]

WEBHDFS_USER = "alice"


@pytest.fixture(scope="session")
def entry_points_dir(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The folder with this checkout's entry points that the environment lacks (``tests/conftest.py``
    exposed it at start-up; an empty folder of pytest's own when gdsstore is installed from this pyproject.toml)."""
    return expose_missing_entry_points() or str(tmp_path_factory.mktemp("no-entry-points"))


@pytest.fixture(scope="session")
def xarray_engine(entry_points_dir: str) -> str:
    """``"gdsstore"``: xarray finds the engine through its entry point."""
    pytest.importorskip("xarray")
    from xarray.backends import plugins

    plugins.list_engines.cache_clear()  # in case xarray listed its engines before the folder was exposed
    assert "gdsstore" in plugins.list_engines()
    return "gdsstore"


def subprocess_env(entry_points_dir: str) -> dict[str, str]:
    """Environment for a child Python that sees this checkout and its entry points."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), str(REPO / "tests"), entry_points_dir,
                                         env.get("PYTHONPATH", "")])
    return env


@pytest.fixture
def s3_options(moto: MotoServer) -> dict[str, Any]:
    """Storage options of a fresh, empty moto bucket ``xr-bucket``."""
    import botocore.session

    moto.reset()
    opts = moto.storage_options
    client = botocore.session.get_session().create_client(
        "s3", region_name="us-east-1", endpoint_url=opts["endpoint_url"],
        aws_access_key_id=opts["key"], aws_secret_access_key=opts["secret"],
    )
    client.create_bucket(Bucket="xr-bucket")
    return dict(opts)


@pytest.fixture
def webhdfs() -> Iterator[WebHDFSServer]:
    srv = WebHDFSServer(user=WEBHDFS_USER)
    try:
        yield srv
    finally:
        srv.close()
