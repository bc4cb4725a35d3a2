"""The store's root as zarr's ``LocalStore`` treats it: deleting the root node, moving the store, and a
root that is not there (a missing directory or S3 bucket is named as such, not "No array found")."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import zarr
from zarr.core.buffer import cpu, default_buffer_prototype
from zarr.storage import LocalStore, StorePath

from gdsstore import GDSStore

PROTO = default_buffer_prototype()


async def _keys(store: object) -> list[str]:
    return sorted([k async for k in store.list()])  # type: ignore[attr-defined]


# -- delete("") -----------------------------------------------------------------------------------


@pytest.mark.parametrize("cls", [LocalStore, GDSStore])
async def test_storepath_delete_of_the_root_node_removes_every_key(tmp_path: Path, cls: type) -> None:
    store = cls(str(tmp_path / "r"))
    zarr.create_array(store, shape=(4,), chunks=(2,), dtype="i4")[:] = np.arange(4)
    assert await _keys(store)
    await StorePath(store, "").delete()
    assert await _keys(store) == []
    assert await store.get("zarr.json", PROTO) is None
    # The store stays usable: a new array at the root.
    zarr.create_array(store, shape=(2,), chunks=(2,), dtype="i4")[:] = [7, 8]
    assert zarr.open_array(store, mode="r")[:].tolist() == [7, 8]


def test_delete_sync_of_the_root(tmp_path: Path) -> None:
    store = GDSStore(str(tmp_path / "r"))
    store.set_sync("a/b", cpu.Buffer.from_bytes(b"x"))
    store.delete_sync("")
    assert not any((tmp_path / "r").iterdir())


async def test_delete_of_the_root_refused_read_only(tmp_path: Path) -> None:
    GDSStore(str(tmp_path)).set_sync("k", cpu.Buffer.from_bytes(b"x"))
    with pytest.raises(ValueError, match="read-only"):
        await GDSStore(str(tmp_path), read_only=True).delete("")
    assert (tmp_path / "k").read_bytes() == b"x"


# -- move() ---------------------------------------------------------------------------------------


async def test_move_as_localstore_does(tmp_path: Path) -> None:
    src, dest = tmp_path / "src.zarr", tmp_path / "sub" / "dest.zarr"
    store = GDSStore(str(src))
    zarr.create_array(store, shape=(4,), chunks=(2,), dtype="i4")[:] = np.arange(4)
    await store.move(str(dest))
    assert not src.exists()
    assert (dest / "zarr.json").is_file()
    assert store.root == str(dest)
    assert zarr.open_array(store, mode="r")[:].tolist() == [0, 1, 2, 3]
    assert zarr.open_array(GDSStore(str(dest)), mode="r")[:].tolist() == [0, 1, 2, 3]
    store.set_sync("new", cpu.Buffer.from_bytes(b"n"))  # writes go to the new root
    assert (dest / "new").read_bytes() == b"n"


async def test_move_onto_an_existing_path_refused(tmp_path: Path) -> None:
    src, dest = tmp_path / "src", tmp_path / "dest"
    dest.mkdir()
    (dest / "keep").write_bytes(b"keep")
    store = GDSStore(str(src))
    store.set_sync("k", cpu.Buffer.from_bytes(b"x"))
    with pytest.raises(FileExistsError, match="already exists"):
        await store.move(str(dest))
    assert (src / "k").read_bytes() == b"x" and (dest / "keep").read_bytes() == b"keep"


# -- a missing root -------------------------------------------------------------------------------


@pytest.mark.parametrize("cls", [LocalStore, GDSStore])
def test_missing_local_root_read_only_names_the_path(tmp_path: Path, cls: type) -> None:
    missing = tmp_path / "no-such.zarr"
    with pytest.raises(FileNotFoundError, match="does not exist") as info:
        zarr.open_array(cls(str(missing), read_only=True), mode="r")
    assert "no-such.zarr" in str(info.value)
    assert not missing.exists()  # a read-only open creates nothing


def _messages(exc: BaseException | None) -> str:
    """The messages of ``exc`` and its causes (zarr wraps a store's FileNotFoundError in its own)."""
    out = []
    while exc is not None:
        out.append(str(exc))
        exc = exc.__cause__
    return " <- ".join(out)


def test_missing_local_root_mode_r(tmp_path: Path) -> None:
    missing = tmp_path / "no-such.zarr"
    with pytest.raises(FileNotFoundError, match="does not exist"):
        zarr.open_group(GDSStore(str(missing)), mode="r")  # zarr's read-only copy of a writable store
    assert not missing.exists()
    # A StorePath is not opened before zarr looks for the array: zarr's error carries the store's (as
    # with LocalStore).
    with pytest.raises(FileNotFoundError) as info:
        zarr.open_array(StorePath(GDSStore(str(missing), read_only=True)), mode="r")
    assert f"the root directory {str(missing)!r} does not exist" in _messages(info.value)


def test_local_root_that_is_a_file(tmp_path: Path) -> None:
    (tmp_path / "f").write_bytes(b"x")
    with pytest.raises(NotADirectoryError, match="not a directory"):
        zarr.open_array(GDSStore(str(tmp_path / "f"), read_only=True), mode="r")


def test_existing_empty_root_still_says_no_array(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="No array found"):  # zarr's own error: the root is there
        zarr.open_array(GDSStore(str(tmp_path), read_only=True), mode="r")


@pytest.mark.parametrize("read_only", [True, False])
def test_missing_s3_bucket_names_the_bucket(moto, read_only: bool) -> None:  # type: ignore[no-untyped-def]
    store = GDSStore("s3://gdsstore-no-such-bucket/a.zarr", read_only=read_only,
                     storage_options=moto.storage_options)
    with pytest.raises(FileNotFoundError) as info:
        zarr.open_array(store, mode="r")
    assert "s3://gdsstore-no-such-bucket/a.zarr does not exist (no such bucket" in _messages(info.value)


def test_missing_s3_prefix_in_an_existing_bucket_is_zarrs_error(moto) -> None:  # type: ignore[no-untyped-def]
    import botocore.session

    s3 = botocore.session.get_session().create_client(
        "s3", endpoint_url=moto.endpoint_url, region_name="us-east-1",
        aws_access_key_id=moto.storage_options["key"], aws_secret_access_key=moto.storage_options["secret"])
    s3.create_bucket(Bucket="gdsstore-root-bucket")
    store = GDSStore("s3://gdsstore-root-bucket/none.zarr", read_only=True, storage_options=moto.storage_options)
    with pytest.raises(FileNotFoundError, match="No array found"):
        zarr.open_array(store, mode="r")
