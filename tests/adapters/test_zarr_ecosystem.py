"""GDSStore under xarray and dask (a multi-process distributed cluster: the store must pickle)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import zarr

from gdsstore import GDSStore


def test_xarray_round_trip(tmp_path: Path) -> None:
    xr = pytest.importorskip("xarray")
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(0)
    ds = xr.Dataset(
        {
            "temperature": (("time", "y", "x"), rng.standard_normal((4, 6, 5)).astype("f4"), {"units": "K"}),
            "mask": (("y", "x"), rng.integers(0, 2, (6, 5)).astype(bool)),
        },
        coords={
            "time": pd.date_range("2024-01-01", periods=4, freq="D"),
            "y": np.linspace(-1, 1, 6),
            "x": np.arange(5, dtype="i4"),
            "label": ("x", ["a", "b", "c", "d", "e"]),
        },
        attrs={"title": "gdsstore round trip", "version": 3},
    )
    ds.to_zarr(GDSStore(str(tmp_path / "ds")), zarr_format=3, consolidated=False, mode="w")
    back = xr.open_zarr(GDSStore(str(tmp_path / "ds"), read_only=True), consolidated=False)
    xr.testing.assert_identical(back.load(), ds)
    assert back.attrs == {"title": "gdsstore round trip", "version": 3}
    assert back["temperature"].attrs["units"] == "K"
    assert (tmp_path / "ds" / "temperature" / "zarr.json").is_file()


def test_dask_distributed_processes(tmp_path: Path) -> None:
    da = pytest.importorskip("dask.array")
    distributed = pytest.importorskip("distributed")
    data = np.arange(60 * 40, dtype="f8").reshape(60, 40)
    src = GDSStore(str(tmp_path / "src"))
    zarr.create_array(src, shape=data.shape, chunks=(10, 8), dtype="f8")[...] = data

    with (
        distributed.LocalCluster(
            n_workers=2, processes=True, threads_per_worker=1, dashboard_address=None
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        x = da.from_zarr(zarr.open_array(GDSStore(str(tmp_path / "src"), read_only=True), mode="r"))
        assert x.chunks == ((10,) * 6, (8,) * 5)
        result = client.compute((x * 2 + 1).sum(axis=0)).result()
        np.testing.assert_array_equal(result, (data * 2 + 1).sum(axis=0))
        # Writes from the worker processes too.
        dst = GDSStore(str(tmp_path / "dst"))
        zarr.create_array(dst, shape=data.shape, chunks=(10, 8), dtype="f8")
        da.to_zarr(x - 1, zarr.open_array(dst, mode="r+"), compute=False).compute(scheduler=client)
        pids = client.run(lambda: __import__("os").getpid())
        assert len(set(pids.values())) == 2
    np.testing.assert_array_equal(zarr.open_array(dst, mode="r")[...], data - 1)
