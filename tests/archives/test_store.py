"""VirtualStore: the references as a zarr store (chunk gets of a tick in one batched read), read by zarr
and xarray, compared with h5py and netCDF4 reads."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import zarr
from zarr.abc.store import RangeByteRequest
from zarr.core.buffer import default_buffer_prototype

import gdsstore
import gdsstore.archives as ga
from gdsstore.archives import ArchiveChangedError

from .data import kerchunk_refs, manifest_store, write_h5


@pytest.fixture(params=["manifest", "kerchunk"])
def store_and_data(request: pytest.FixtureRequest, h5file: tuple[Path, dict[str, np.ndarray]]) -> tuple[ga.VirtualStore, int, dict[str, np.ndarray]]:
    path, data = h5file
    if request.param == "manifest":
        return ga.VirtualStore(manifest_store(path)), 3, data
    return ga.VirtualStore(kerchunk_refs(path)), 2, data


@pytest.mark.parametrize("sel", [..., (1, slice(100, 250)), (slice(None, None, 2), 5, slice(3, 190, 4)), (4, 99, 99)], ids=repr)
def test_zarr_reads_match_h5py(store_and_data: tuple[ga.VirtualStore, int, dict[str, np.ndarray]], sel: Any) -> None:
    store, fmt, data = store_and_data
    g = zarr.open_group(store, mode="r", zarr_format=fmt)  # type: ignore[arg-type]
    np.testing.assert_array_equal(g["t"][sel], data["t"][sel])
    np.testing.assert_array_equal(g["q"][:], data["q"])
    assert sorted(g.array_keys()) == ["q", "t", "x"]


def test_under_gdsstores_pipeline(store_and_data: tuple[ga.VirtualStore, int, dict[str, np.ndarray]]) -> None:
    store, fmt, data = store_and_data
    with gdsstore.enable_pipeline():
        got = zarr.open_group(store, mode="r", zarr_format=fmt)["t"][:]  # type: ignore[arg-type]
    np.testing.assert_array_equal(got, data["t"])


def test_store_contract(store_and_data: tuple[ga.VirtualStore, int, dict[str, np.ndarray]]) -> None:
    store, fmt, _ = store_and_data
    proto = default_buffer_prototype()
    meta_key = "t/zarr.json" if fmt == 3 else "t/.zarray"
    chunk = "t/c/0/0/0" if fmt == 3 else "t/0.0.0"

    async def run() -> None:
        assert await store.exists(meta_key) and await store.exists(chunk)
        assert not await store.exists("t/c/3/0/0" if fmt == 3 else "t/3.0.0")  # never written
        assert await store.get("t/c/9/9/9" if fmt == 3 else "t/9.9.9", proto) is None  # outside the grid
        whole = await store.get(chunk, proto)
        part = await store.get(chunk, proto, RangeByteRequest(2, 10))
        assert whole is not None and part is not None and part.to_bytes() == whole.to_bytes()[2:10]
        missing = await store.get("t/c/3/0/0" if fmt == 3 else "t/3.0.0", proto)
        assert missing is None  # zarr reads the fill value
        listed = [k async for k in store.list_dir("")]
        assert {"t", "q", "x"} <= set(listed)
        assert chunk in [k async for k in store.list_prefix("t/")]
        with pytest.raises(NotImplementedError):
            await store.set(chunk, whole)

    asyncio.run(run())
    assert not store.supports_writes and store.supports_listing and "t" in repr(store)


def test_changed_file_fails(tmp_path: Path) -> None:
    p = tmp_path / "m.h5"
    write_h5(p)
    store = ga.VirtualStore(kerchunk_refs(p))
    write_h5(p, seed=2)
    with pytest.raises(ArchiveChangedError):
        zarr.open_group(store, mode="r", zarr_format=2)["t"][0]  # type: ignore[arg-type]


def test_xarray_over_netcdf4(tmp_path: Path) -> None:
    netCDF4 = pytest.importorskip("netCDF4")
    xr = pytest.importorskip("xarray")
    p = tmp_path / "n.nc"
    rng = np.random.default_rng(4)
    with netCDF4.Dataset(p, "w") as ds:
        ds.createDimension("time", None)
        ds.createDimension("y", 100)
        ds.createDimension("x", 150)
        v = ds.createVariable("temp", "f4", ("time", "y", "x"), zlib=True, complevel=1, shuffle=True,
                              chunksizes=(1, 64, 64), fill_value=np.float32(1e20))
        v[:4] = rng.random((4, 100, 150))
        v.units = "K"
        ds.createVariable("x", "i4", ("x",))[:] = np.arange(150)
    want = xr.open_dataset(p, engine="netcdf4").load()
    for source, fmt in ((manifest_store(p), 3), (kerchunk_refs(p), 2)):
        ds = xr.open_zarr(ga.VirtualStore(source), consolidated=False, zarr_format=fmt)
        assert ds.temp.dims == ("time", "y", "x") and ds.temp.attrs["units"] == "K"
        np.testing.assert_array_equal(ds.temp.values, want.temp.values)
        np.testing.assert_array_equal(ds.x.values, want.x.values)
