"""``gds://`` local paths with ``.``, ``..`` or ``//`` segments read what ``file://`` reads there (fsspec's
local filesystem hands them to the OS); ``..`` above ``/`` stays at ``/``."""

from __future__ import annotations

import os
from pathlib import Path

import fsspec
import numpy as np
import pytest
import zarr

SPELLINGS = ["{d}/a/../b.bin", "{d}/./b.bin", "{d}//b.bin", "{d}/a/./../b.bin", "/../..{d}/b.bin"]


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    (tmp_path / "a").mkdir()
    (tmp_path / "b.bin").write_bytes(os.urandom(1000))
    return tmp_path


@pytest.mark.parametrize("spelling", SPELLINGS)
def test_dot_segments_read_as_file_urls_do(tree: Path, spelling: str) -> None:
    path = spelling.format(d=tree)
    expected = fsspec.open(f"file://{path}", "rb").open().read()  # fsspec's local filesystem: the reference
    assert expected == (tree / "b.bin").read_bytes()
    with fsspec.open(f"gds://{path}", "rb") as f:
        assert f.read() == expected
    fs = fsspec.filesystem("gds")
    assert fs.cat_file(path) == expected
    assert fs.info(path)["size"] == 1000
    assert fs._strip_protocol(f"gds://{path}") == str(tree / "b.bin")


def test_dot_segments_in_listing_and_writes(tree: Path) -> None:
    fs = fsspec.filesystem("gds")
    assert sorted(fs.ls(f"{tree}/a/..", detail=False)) == [str(tree / "a"), str(tree / "b.bin")]
    fs.pipe_file(f"{tree}/a/./../c.bin", b"new")
    assert (tree / "c.bin").read_bytes() == b"new"
    assert not (tree / "a" / "c.bin").exists()


def test_parent_of_root_is_root() -> None:
    fs = fsspec.filesystem("gds")
    assert fs._strip_protocol("gds:///..") == "/"
    assert fs._strip_protocol("gds:///../../etc/..") == "/"


def test_zarr_url_with_dot_segments(tree: Path) -> None:
    zarr.create_array(str(tree / "x.zarr"), shape=(4,), chunks=(2,), dtype="i4")[:] = np.arange(4)
    z = zarr.open_array(f"gds://{tree}/a/../x.zarr", mode="r")
    assert z[:].tolist() == [0, 1, 2, 3]
