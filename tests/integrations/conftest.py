"""Fixtures for the integrations (xarray, dask, zarr entry points, packaging, icechunk).

A checkout used without ``pip install`` (the GPU machine runs from PYTHONPATH), or a venv installed from
an older pyproject, lacks gdsstore's entry points: :func:`entry_points_dir` writes those of this
checkout's pyproject.toml into a ``*.dist-info`` folder that the tests put on ``sys.path`` (in process
and in subprocesses), so ``engine="gdsstore"`` and the ``zarr.codecs`` names resolve as installed.
"""

from __future__ import annotations

import os
import sys
import tomllib
from collections.abc import Iterator
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

import pytest
from servers.moto_s3 import MotoServer
from servers.nginx import NginxServer, nginx_binary
from servers.webhdfs import WebHDFSServer

REPO = Path(__file__).resolve().parents[2]
WEBHDFS_USER = "alice"


def declared_entry_points() -> dict[str, dict[str, str]]:
    """The entry points pyproject.toml declares: group → name → ``module:attr``."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    return {group: dict(eps) for group, eps in project["entry-points"].items()}


def _missing_entry_points() -> dict[str, dict[str, str]]:
    installed = entry_points()
    missing: dict[str, dict[str, str]] = {}
    for group, eps in declared_entry_points().items():
        have = {(e.name, e.value) for e in installed.select(group=group)}
        left = {n: v for n, v in eps.items() if (n, v) not in have}
        if left:
            missing[group] = left
    return missing


@pytest.fixture(scope="session")
def entry_points_dir(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A folder holding a dist-info with the declared entry points the environment lacks (maybe none)."""
    root = tmp_path_factory.mktemp("entry_points")
    missing = _missing_entry_points()
    if missing:
        info = root / "gdsstore_checkout_entry_points-0.0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text("Metadata-Version: 2.1\nName: gdsstore-checkout-entry-points\nVersion: 0.0\n")
        text = "".join(
            f"[{group}]\n" + "".join(f"{name} = {value}\n" for name, value in eps.items()) + "\n"
            for group, eps in missing.items()
        )
        (info / "entry_points.txt").write_text(text)
    return str(root)


@pytest.fixture(scope="session")
def xarray_engine(entry_points_dir: str) -> Iterator[str]:
    """``"gdsstore"``, registered with xarray through its entry point (this checkout's, when not installed)."""
    pytest.importorskip("xarray")
    from xarray.backends import plugins

    sys.path.append(entry_points_dir)
    plugins.list_engines.cache_clear()
    try:
        yield "gdsstore"
    finally:
        sys.path.remove(entry_points_dir)
        plugins.list_engines.cache_clear()


def subprocess_env(entry_points_dir: str) -> dict[str, str]:
    """Environment for a child Python that sees this checkout and its entry points."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), str(REPO / "tests"), entry_points_dir,
                                         env.get("PYTHONPATH", "")])
    return env


@pytest.fixture(scope="session")
def moto() -> Iterator[MotoServer]:
    pytest.importorskip("moto.server")
    srv = MotoServer()
    try:
        yield srv
    finally:
        srv.close()


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


@pytest.fixture(scope="session")
def nginx(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NginxServer]:
    if nginx_binary() is None:
        pytest.skip("nginx is not installed here (apt-get install nginx-light); the HTTP tests against it skip")
    root = tmp_path_factory.mktemp("www")
    os.chmod(root, 0o755)
    srv = NginxServer(str(root))
    try:
        yield srv
    finally:
        srv.close()


@pytest.fixture
def webhdfs() -> Iterator[WebHDFSServer]:
    srv = WebHDFSServer(user=WEBHDFS_USER)
    try:
        yield srv
    finally:
        srv.close()
