"""What ``zarr.open_array("gds://…")`` does (issue 17), as docs/zarr.md documents it.

zarr 3.4 has no hook that maps a URL scheme to a store class: every URL with a scheme other than
``file``/``memory`` becomes zarr's ``FsspecStore``. A ``gds://`` URL therefore reads through the
``gds`` fsspec filesystem — gdsstore's engine, into host ``bytes`` — and zarr copies those to the
GPU under ``enable_gpu()``. ``zarr.open_array(gdsstore.GDSStore(url))`` is the direct path.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import zarr
from zarr.storage import FsspecStore

import gdsstore
from gdsstore.adapters.fsspec import GDSFileSystem


@pytest.fixture
def root(tmp_path: Path) -> str:
    path = str(tmp_path / "a.zarr")
    z = zarr.create_array(gdsstore.GDSStore(path), shape=(64,), chunks=(16,), dtype="i4", compressors=None)
    z[:] = np.arange(64)
    return path


@pytest.mark.parametrize("url", ["gds://{root}", "gds::file://{root}"])
def test_gds_url_goes_through_fsspecstore_and_the_engine(root: str, url: str) -> None:
    with gdsstore.trace() as t:
        z = zarr.open_array(url.format(root=root), mode="r")
        assert z[:].tolist() == list(range(64))
    assert type(z.store) is FsspecStore and isinstance(z.store.fs, GDSFileSystem)
    reads = [e for e in t.events if e.op == "read"]
    assert len(reads) >= 5  # metadata + 4 chunks, each through gdsstore's engine
    assert all(e.device is None for e in reads)  # into host bytes: fsspec's cat_file returns bytes


def test_gdsstore_is_the_direct_path(root: str) -> None:
    z = zarr.open_array(gdsstore.GDSStore(f"file://{root}", read_only=True), mode="r")
    assert type(z.store) is gdsstore.GDSStore and z[:].tolist() == list(range(64))


@pytest.mark.gpu
def test_only_gdsstore_reads_straight_into_the_gpu(root: str, cp: Any) -> None:
    with gdsstore.enable_gpu():
        with gdsstore.trace() as via_url:
            a = zarr.open_array(f"gds://{root}", mode="r")[:]
        with gdsstore.trace() as direct:
            b = zarr.open_array(gdsstore.GDSStore(root, read_only=True), mode="r")[:]
    assert isinstance(a, cp.ndarray) and isinstance(b, cp.ndarray) and cp.array_equal(a, b)
    via_reads = [e for e in via_url.events if e.op == "read"]
    direct_reads = [e for e in direct.events if e.op == "read"]
    # Through the URL: one host read per object (fsspec's cat_file returns bytes), copied by zarr.
    assert via_reads and all(e.device is None and not e.reason.startswith("batch") for e in via_reads)
    # Through GDSStore: gdsstore's pipeline reads the chunks as a batch into device memory.
    assert any(e.device is not None or e.reason.startswith("batch") for e in direct_reads), direct
