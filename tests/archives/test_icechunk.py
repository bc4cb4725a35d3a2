"""Icechunk repositories of virtual chunks (VirtualiZarr's ``to_icechunk`` over netCDF4/HDF5 files made here):
references gathered in batches, read through the archives' reader and compared with h5py and with xarray's
netCDF4 backend; a file changed before or after the open fails, never mixes."""

from __future__ import annotations

import os
import shutil
import warnings
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import gdsstore.archives as ga
from gdsstore import xarray_backend
from gdsstore.archives import ArchiveChangedError, open_icechunk
from gdsstore.archives.icechunk import from_icechunk, icechunk_store
from gdsstore.archives.refs import INLINED, from_manifest_store

from .cf_data import VARIABLES, write_cf
from .data import manifest_store, write_h5

icechunk = pytest.importorskip("icechunk", minversion="2.0.5")  # array_chunk_iterator
h5py = pytest.importorskip("h5py")
xr = pytest.importorskip("xarray")


def virtual_dataset(path: Path) -> Any:
    """VirtualiZarr's virtual dataset of a file (of ``a.h5``, ``t`` alone: its arrays' dimensions are HDF5's
    unnamed ones, of conflicting sizes)."""
    from obspec_utils.registry import ObjectStoreRegistry
    from obstore.store import LocalStore
    from virtualizarr import open_virtual_dataset
    from virtualizarr.manifests import ManifestGroup, ManifestStore
    from virtualizarr.parsers import HDFParser

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # VirtualiZarr's experimental-API warnings
        if path.suffix == ".h5":
            t = manifest_store(path)._group.arrays["t"]
            return ManifestStore(ManifestGroup(arrays={"t": t}, attributes={})).to_virtual_dataset()
        return open_virtual_dataset(path.as_uri(), registry=ObjectStoreRegistry({"file://": LocalStore()}),
                                    parser=HDFParser())


def create_repo(root: Path, *, inline_threshold: int | None = None) -> Any:
    """An empty repository under ``root/repo`` whose virtual chunks may point at files under ``root``."""
    from icechunk.credentials import LocalFileSystemAccess

    cfg = icechunk.RepositoryConfig.default()
    if inline_threshold is not None:
        cfg.inline_chunk_threshold_bytes = inline_threshold
    prefix = root.as_uri() + "/"
    cfg.set_virtual_chunk_container(icechunk.VirtualChunkContainer(prefix, icechunk.local_filesystem_store(str(root))))
    return icechunk.Repository.create(
        icechunk.local_filesystem_storage(str(root / "repo")), cfg,
        authorize_virtual_chunk_access=icechunk.containers_credentials({prefix: LocalFileSystemAccess}),
    )


def commit(repo: Any, files: dict[str, Path], message: str = "virtual") -> str:
    """Each file's virtual dataset written to the group named (``""``: the root), committed on ``main``."""
    session = repo.writable_session("main")
    for group, path in files.items():
        virtual_dataset(path).vz.to_icechunk(session.store, group=group or None, mode="w")
    snapshot: str = session.commit(message)
    return snapshot


@pytest.fixture
def archive(tmp_path: Path) -> tuple[Any, Path, Path, dict[str, np.ndarray]]:
    """A repository holding ``cf.nc`` at its root and ``a.h5``'s ``t`` (missing chunks, a fill value) in
    group ``h5``."""
    cf, h5 = tmp_path / "cf.nc", tmp_path / "a.h5"
    write_cf(cf)
    data = write_h5(h5)
    repo = create_repo(tmp_path)
    commit(repo, {"": cf, "h5": h5})
    return repo, cf, h5, data


def h5_arrays(path: Path) -> dict[str, np.ndarray]:
    with h5py.File(path) as f:
        return {k: f[k][()] for k in f if isinstance(f[k], h5py.Dataset)}


@pytest.mark.parametrize("kind", ["repository", "session", "store"])
def test_reads_match_h5py(archive: tuple[Any, Path, Path, dict[str, np.ndarray]], kind: str) -> None:
    repo, cf, _, data = archive
    session = repo.readonly_session("main")
    source = {"repository": repo, "session": session, "store": session.store}[kind]
    g = ga.open_virtual(source)
    want = h5_arrays(cf)
    assert set(want) <= set(g)
    for name, values in want.items():
        np.testing.assert_array_equal(g[name][...], values, err_msg=name)
    sels: list[Any] = [..., (1, slice(100, 250)), (slice(None, None, 2), 5, slice(3, 190, 4)), (4, 99, 99), (3,)]
    for sel in sels:
        np.testing.assert_array_equal(g["h5/t"][sel], data["t"][sel])  # edge chunks, chunks never written
    np.testing.assert_array_equal(g["t2m"][2, :, 31:33], want["t2m"][2, :, 31:33])


def test_references_match_the_manifest_store(archive: tuple[Any, Path, Path, dict[str, np.ndarray]]) -> None:
    """Gathered in batches of 7 chunks (many batches per array), the references are VirtualiZarr's own."""
    repo, cf, _, _ = archive
    got = from_icechunk(repo, batch_size=7)
    want = from_manifest_store(manifest_store(cf))
    for name in ("t2m", "precip", "u", "mask"):
        a, b = got[name], want[name]
        assert a.files == b.files == [str(cf)]
        assert (a.shape, a.chunks, a.dtype, [c.get_config() for c in a.codecs]) == (
            b.shape, b.chunks, b.dtype, [c.get_config() for c in b.codecs])
        np.testing.assert_array_equal(a.file_ids, b.file_ids)
        present = b.file_ids >= 0  # a missing chunk's offset and length mean nothing
        np.testing.assert_array_equal(a.offsets[present], b.offsets[present])
        np.testing.assert_array_equal(a.lengths[present], b.lengths[present])
        assert (a.file_ids == -1).any() == (name == "t2m")  # t2m's last time steps were never written


@pytest.mark.parametrize("inline_threshold", [0, 4096], ids=["native", "inline"])
def test_native_and_inline_chunks(tmp_path: Path, inline_threshold: int) -> None:
    """The coordinates VirtualiZarr loads are written into the repository: native chunks (read through
    icechunk when the references are gathered) or inline ones (in the batches)."""
    cf = tmp_path / "cf.nc"
    write_cf(cf)
    repo = create_repo(tmp_path, inline_threshold=inline_threshold)
    commit(repo, {"": cf})
    refs = from_icechunk(repo)
    for name in ("time", "lat", "lon"):
        assert refs[name].files == [] and (refs[name].file_ids == INLINED).all() and refs[name].inlined
    g = ga.open_virtual(repo)
    want = h5_arrays(cf)
    for name in ("time", "lat", "lon"):
        np.testing.assert_array_equal(g[name][...], want[name])


def test_versions(tmp_path: Path) -> None:
    """A snapshot, a tag and a branch each read the files their version references."""
    one, two = tmp_path / "one.nc", tmp_path / "two.nc"
    write_cf(one)
    write_cf(two, seed=9)
    repo = create_repo(tmp_path)
    first = commit(repo, {"": one})
    repo.create_tag("v1", first)
    commit(repo, {"": two}, "second file")
    want_one, want_two = h5_arrays(one)["u"], h5_arrays(two)["u"]
    np.testing.assert_array_equal(open_icechunk(repo, snapshot_id=first)["u"][...], want_one)
    np.testing.assert_array_equal(open_icechunk(repo, tag="v1")["u"][...], want_one)
    np.testing.assert_array_equal(open_icechunk(repo, branch="main")["u"][...], want_two)
    np.testing.assert_array_equal(ga.open_virtual(repo)["u"][...], want_two)


def test_file_changed_before_the_open_fails(archive: tuple[Any, Path, Path, dict[str, np.ndarray]]) -> None:
    """icechunk refuses a file modified after the stamp its references carry."""
    repo, cf, _, _ = archive
    later = datetime.now(UTC).timestamp() + 3600
    os.utime(cf, (later, later))  # modified after the references were written (as a rewrite would)
    with pytest.raises(ArchiveChangedError, match=r"cf\.nc"):
        ga.open_virtual(repo)
    g = open_icechunk(repo, check_stamps=False)  # asked not to: opens, and the reader's own checks go on
    np.testing.assert_array_equal(g["u"][...], h5_arrays(cf)["u"])


def test_file_changed_after_the_open_fails(archive: tuple[Any, Path, Path, dict[str, np.ndarray]]) -> None:
    repo, cf, _, _ = archive
    g = ga.open_virtual(repo)
    shutil.copy(cf, cf.with_suffix(".bak"))
    write_cf(cf, seed=4)  # the same layout, other values
    with pytest.raises(ArchiveChangedError, match=r"cf\.nc"):
        g["t2m"][0]


def test_unauthorized_container_names_the_fix(archive: tuple[Any, Path, Path, dict[str, np.ndarray]], tmp_path: Path) -> None:
    """A repository opened without access to its virtual chunk container: icechunk cannot check the stamps."""
    repo_plain = icechunk.Repository.open(icechunk.local_filesystem_storage(str(tmp_path / "repo")))
    with pytest.raises(OSError, match="authorize_virtual_chunk_access"):
        ga.open_virtual(repo_plain)
    _, cf, _, _ = archive
    np.testing.assert_array_equal(open_icechunk(repo_plain, check_stamps=False)["mask"][...], h5_arrays(cf)["mask"])


def test_bad_sources_name_the_problem(archive: tuple[Any, Path, Path, dict[str, np.ndarray]]) -> None:
    repo = archive[0]
    with pytest.raises(TypeError, match="Repository"):
        icechunk_store(object())
    with pytest.raises(TypeError, match="branch"):
        icechunk_store(repo.readonly_session("main"), branch="main")


def reference(path: Path) -> Any:
    with xr.open_dataset(path, engine="netcdf4") as ds:
        return ds.load()


@pytest.mark.parametrize("chunks", [None, {}], ids=["lazy", "dask"])
def test_xarray_engine_matches_netcdf4(archive: tuple[Any, Path, Path, dict[str, np.ndarray]], chunks: Any) -> None:
    repo, cf, _, _ = archive
    ds = xr.open_dataset(repo.readonly_session("main"), engine="gdsstore", device=False, chunks=chunks)
    want = reference(cf)
    xr.testing.assert_identical(ds.drop_dims([d for d in ds.dims if d not in want.dims]).compute(), want)
    sel = {"time": slice(1, 6), "lat": slice(60, 129), "lon": [69, 0, 40]}
    xr.testing.assert_identical(ds.isel(sel)[list(VARIABLES)].compute(), want.isel(sel)[list(VARIABLES)])
    inner = ds["t2m"].variable._data
    while not isinstance(inner, xarray_backend.VirtualBackendArray) and hasattr(inner, "array"):
        inner = inner.array
    assert chunks is not None or isinstance(inner, xarray_backend.VirtualBackendArray)


def test_xarray_engine_group(archive: tuple[Any, Path, Path, dict[str, np.ndarray]]) -> None:
    repo, _, _, data = archive
    ds = xr.open_dataset(repo, engine="gdsstore", group="h5", device=False, mask_and_scale=False)
    np.testing.assert_array_equal(ds["t"].values, data["t"])
    np.testing.assert_array_equal(ds["t"][1:4, 5:140].values, data["t"][1:4, 5:140])


# -- GPU ---------------------------------------------------------------------------------------------


@pytest.mark.gpu
def test_device_reads_match_h5py(archive: tuple[Any, Path, Path, dict[str, np.ndarray]]) -> None:
    cp = pytest.importorskip("cupy")
    repo, cf, _, data = archive
    g = ga.open_virtual(repo)
    got = g["h5/t"].read((slice(1, 5), slice(100, 250)), device=True)
    assert isinstance(got, cp.ndarray)
    np.testing.assert_array_equal(got.get(), data["t"][1:5, 100:250])
    ds = xr.open_dataset(repo, engine="gdsstore", device=True)
    assert isinstance(ds["u"].data, cp.ndarray)
    np.testing.assert_array_equal(ds["u"].data.get(), reference(cf)["u"].values)
