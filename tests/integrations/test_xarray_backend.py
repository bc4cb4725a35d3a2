"""``engine="gdsstore"``: datasets round-trip and match plain xarray + zarr; coordinates on the host,
data variables on the device prototype (asserted without a GPU by the prototype chosen, and on the GPU
machine by the array types)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

xr = pytest.importorskip("xarray")
pd = pytest.importorskip("pandas")
import zarr  # noqa: E402
from servers.nginx import NginxServer  # noqa: E402
from servers.webhdfs import WebHDFSServer  # noqa: E402

import gdsstore  # noqa: E402
from gdsstore import xarray_backend, xarray_variables  # noqa: E402
from gdsstore._optional import MissingOptionalDependencyError  # noqa: E402
from gdsstore.engine import cuda  # noqa: E402

from .conftest import WEBHDFS_USER  # noqa: E402

GPU = cuda.gpu_available()


def make_dataset(seed: int = 0, start: str = "2024-01-01") -> Any:
    """Coordinates (a time index, an integer index, a 2-D non-index coordinate), attributes, and variables
    of three dtypes."""
    rng = np.random.default_rng(seed)
    time = pd.date_range(start, periods=24, freq="h")
    y, x = np.arange(16), np.arange(20) * 0.5
    return xr.Dataset(
        {
            "temperature": (("time", "y", "x"), rng.normal(280, 5, (24, 16, 20)).astype("f4"),
                            {"units": "K", "long_name": "air temperature"}),
            "count": (("time", "y"), rng.integers(0, 1000, (24, 16)).astype("i2")),
            "pressure": (("time",), rng.normal(1000, 10, 24)),
        },
        coords={"time": time, "y": y, "x": x, "lat": (("y", "x"), rng.uniform(-90, 90, (16, 20)))},
        attrs={"title": "gdsstore xarray round trip", "version": 3},
    )


# zstd + chunks on one variable, gzip + shards on another, defaults on the third.
ENCODING = {
    "temperature": {"chunks": (6, 8, 10), "compressors": [zarr.codecs.ZstdCodec(level=3)]},
    "count": {"chunks": (4, 4), "shards": (12, 8), "compressors": [zarr.codecs.GzipCodec()]},
}


def write_reference(path: Path | str, ds: Any | None = None) -> Any:
    """Write with plain xarray + zarr (no gdsstore anywhere); return the dataset written."""
    ds = make_dataset() if ds is None else ds
    ds.to_zarr(str(path), mode="w", consolidated=False, encoding=ENCODING, zarr_format=3)
    return ds


def host(obj: Any) -> Any:
    """Loaded into host memory (numpy), whatever the placement: compares with plain xarray on a GPU too."""
    return obj.compute().as_numpy()


def placements(ds: Any) -> dict[str, str]:
    return {name: v.encoding["gdsstore_placement"] for name, v in ds.variables.items()}


def test_placement_coordinates_host_data_device_when_a_gpu_is_present() -> None:
    variables = {name: (tuple(v.dims), v.attrs) for name, v in make_dataset().variables.items()}
    variables["temperature"] = (("time", "y", "x"), {"coordinates": "lat"})  # as xarray writes it
    on_gpu = xarray_backend.choose_placement(variables, device=True)
    assert on_gpu == {"temperature": "device", "count": "device", "pressure": "device",
                      "time": "host", "y": "host", "x": "host", "lat": "host"}
    assert set(xarray_backend.choose_placement(variables, device=False).values()) == {"host"}
    # the group attribute names coordinates too (CF)
    assert xarray_backend.choose_placement({"a": (("n",), {}), "b": (("n",), {})}, {"coordinates": "b"},
                                           device=True) == {"a": "device", "b": "host"}


def test_cf_attributes_xarray_decodes_with_numpy_keep_a_variable_on_the_host() -> None:
    decodable = xarray_backend.device_decodable
    assert decodable({"units": "K", "_FillValue": np.float32("nan"), "scale_factor": 0.5}, np.dtype("f4")) is None
    assert decodable({"_FillValue": -1}, np.dtype("i2")) == "CF attribute _FillValue=-1 is decoded by xarray with numpy"
    assert decodable({"missing_value": 1e20}, np.dtype("f8")) is not None  # a real mask, not NaN
    assert decodable({"_Unsigned": "true"}, np.dtype("i1")) is not None
    assert "time units" in str(decodable({"units": "hours since 2024-01-01"}, np.dtype("i8")))


def test_nan_fill_of_a_device_variable_moves_to_its_encoding() -> None:
    var = xr.Variable(("x",), np.arange(3.0), {"_FillValue": np.nan, "units": "K"})
    xarray_variables._drop_nan_fill(var)
    assert var.attrs == {"units": "K"} and np.isnan(var.encoding["_FillValue"])


def test_prototype_for_placement() -> None:
    from zarr.core.buffer import cpu, gpu

    assert xarray_backend.prototype_for("device") is gpu.buffer_prototype
    assert xarray_backend.prototype_for("host") is cpu.buffer_prototype
    with zarr.config.set({"buffer": "zarr.buffer.gpu.Buffer", "ndbuffer": "zarr.buffer.gpu.NDBuffer"}):
        assert xarray_backend.prototype_for("host") is cpu.buffer_prototype  # whatever the global config


def test_store_wires_each_variable_to_its_placements_prototype(tmp_path: Path) -> None:
    """The wiring the GPU machine relies on, checked without a GPU: nothing is read here (lazy)."""
    from zarr.core.buffer import cpu, gpu

    ds = make_dataset()
    ds["flagged"] = ds["count"].astype("i4").assign_attrs(_FillValue=-1)  # a real CF mask: stays on the host
    ds.to_zarr(str(tmp_path / "d.zarr"), mode="w", consolidated=False, zarr_format=3)
    store = xarray_backend._placed_zarr_store_class().open_group(
        gdsstore.GDSStore(str(tmp_path / "d.zarr"), read_only=True), consolidated=False)
    store.device = True  # as on a GPU machine
    variables = store.get_variables()
    prototypes = {name: var._data.array.prototype for name, var in variables.items()}
    assert {n for n, p in prototypes.items() if p is gpu.buffer_prototype} == {"temperature", "count", "pressure"}
    assert {n for n, p in prototypes.items() if p is cpu.buffer_prototype} == {"time", "y", "x", "lat", "flagged"}
    assert "_FillValue=-1" in variables["flagged"].encoding["gdsstore_placement_reason"]
    assert "_FillValue" not in variables["temperature"].attrs  # NaN fill: moved to the encoding
    assert np.isnan(variables["temperature"].encoding["_FillValue"])


def test_open_dataset_matches_plain_xarray_zarr(tmp_path: Path, xarray_engine: str) -> None:
    written = write_reference(tmp_path / "d.zarr")
    with gdsstore.trace() as t:
        ours = xr.open_dataset(tmp_path / "d.zarr", engine=xarray_engine, consolidated=False).load()
    plain = xr.open_dataset(tmp_path / "d.zarr", engine="zarr", consolidated=False).load()
    xr.testing.assert_identical(host(ours), plain)
    xr.testing.assert_identical(host(ours), written)
    assert ours["temperature"].encoding["shards"] is None and ours["count"].encoding["shards"] == (12, 8)
    assert t.totals, "the reads went through gdsstore's engine"
    expected = "device" if GPU else "host"
    assert placements(ours) == {"temperature": expected, "count": expected, "pressure": expected,
                                "time": "host", "y": "host", "x": "host", "lat": "host"}
    assert all(isinstance(ours[c].values, np.ndarray) for c in ours.coords)
    assert isinstance(ours.indexes["time"], pd.DatetimeIndex)


def test_open_dataset_with_chunks_is_dask_and_reads_per_chunk(tmp_path: Path, xarray_engine: str) -> None:
    written = write_reference(tmp_path / "d.zarr")
    ds = xr.open_dataset(tmp_path / "d.zarr", engine=xarray_engine, consolidated=False, chunks={})
    assert ds["temperature"].chunks == ((6,) * 4, (8, 8), (10, 10))  # the zarr chunks (preferred)
    assert ds["count"].chunks == ((4,) * 6, (4,) * 4)  # sharded: xarray prefers the inner chunks
    assert isinstance(ds["time"].data, np.ndarray)  # an index: loaded on the host at open
    sub = ds["temperature"].isel(time=slice(5, 13), x=slice(3, 17)).mean("y")
    xr.testing.assert_allclose(host(sub), written["temperature"].isel(time=slice(5, 13), x=slice(3, 17))
                               .mean("y"))
    xr.testing.assert_identical(host(ds), written)


def test_device_dask_manager_blocks_come_from_read_block(tmp_path: Path, xarray_engine: str) -> None:
    """The mechanism that keeps device blocks CuPy, run on host data: every block of the dask graph is
    produced by ``read_block`` as a concrete array (no xarray adapter left for ``np.asarray``)."""
    from xarray.core.indexing import ImplicitToExplicitIndexingAdapter

    written = write_reference(tmp_path / "d.zarr")
    manager = xarray_backend.DeviceDaskManager()
    ds = xr.open_dataset(tmp_path / "d.zarr", engine=xarray_engine, consolidated=False, chunks={},
                         chunked_array_type=manager, device=False)  # host data, on any machine
    data = ds["temperature"].data
    assert data.chunks == ((6,) * 4, (8, 8), (10, 10)) and type(data._meta) is np.ndarray
    layer = dict(data.dask.layers[data.name])
    assert len(layer) == 16 and {task.func for task in layer.values()} == {xarray_backend.read_block}
    adapter = dict(data.dask)[f"original-{data.name}"]
    assert isinstance(adapter, ImplicitToExplicitIndexingAdapter)
    assert xarray_backend.placement_of(adapter) == "host"
    for index in [(0, 0, 0), (3, 1, 1)]:
        block = data.blocks[index].compute()
        assert type(block) is np.ndarray
        t, y, x = (slice(i * c, (i + 1) * c) for i, c in zip(index, (6, 8, 10), strict=True))
        np.testing.assert_array_equal(block, written["temperature"].values[t, y, x])
    xr.testing.assert_identical(host(ds), written)  # the other variables and the coordinates too
    assert isinstance(ds["time"].data, np.ndarray)  # an index: loaded on the host at open, not chunked


def test_device_dask_manager_keeps_isel_lazy(tmp_path: Path, xarray_engine: str) -> None:
    """A selection made before chunking reads only its chunks: the manager chunks xarray's lazy array."""
    written = write_reference(tmp_path / "d.zarr")
    lazy = xr.open_dataset(tmp_path / "d.zarr", engine=xarray_engine, consolidated=False)
    sub = lazy["temperature"].drop_vars("lat").isel(time=slice(0, 6), x=slice(0, 10))  # zarr chunks (0, *, 0)
    chunked = sub.chunk({"y": 8}, chunked_array_type=xarray_backend.DeviceDaskManager())
    with gdsstore.trace() as t:
        got = chunked.compute()
    xr.testing.assert_identical(host(got), written["temperature"].drop_vars("lat").isel(time=slice(0, 6),
                                                                                        x=slice(0, 10)))
    chunk_files = tmp_path / "d.zarr" / "temperature" / "c"
    needed = sum((chunk_files / "0" / y / "0").stat().st_size for y in "01")
    assert needed < sum(f.stat().st_size for f in chunk_files.rglob("*") if f.is_file()) / 4
    assert sum(e.nbytes for e in t.events if e.op == "read") == needed  # those two chunks, nothing else


@pytest.mark.skipif(cuda.cupy_or_none() is not None, reason="CuPy is installed: the device meta is made")
def test_device_dask_manager_finds_device_placement_without_a_gpu(tmp_path: Path) -> None:
    """Device-placed variables are recognised through xarray's wrappers; the CuPy meta then needs CuPy."""
    from xarray.backends.store import StoreBackendEntrypoint
    from xarray.core.indexing import CopyOnWriteArray, ImplicitToExplicitIndexingAdapter, OuterIndexer

    write_reference(tmp_path / "d.zarr")
    store = xarray_backend._placed_zarr_store_class().open_group(
        gdsstore.GDSStore(str(tmp_path / "d.zarr"), read_only=True), consolidated=False)
    store.device = True  # as on a GPU machine; nothing is read
    ds = StoreBackendEntrypoint().open_dataset(store)
    adapters = {name: ImplicitToExplicitIndexingAdapter(CopyOnWriteArray(v._data), OuterIndexer)
                for name, v in ds.variables.items()}
    assert {n: xarray_backend.placement_of(a) for n, a in adapters.items()} == {
        "temperature": "device", "count": "device", "pressure": "device",
        "time": "host", "y": "host", "x": "host", "lat": "host"}
    with pytest.raises(MissingOptionalDependencyError, match=r"pip install '\.\[cuda13\]'"):
        xarray_backend.DeviceDaskManager().from_array(adapters["temperature"], (6, 8, 10))


def test_open_dataset_from_a_gdsstore_object_and_indexing_kinds(tmp_path: Path, xarray_engine: str) -> None:
    written = write_reference(tmp_path / "d.zarr")
    ds = xr.open_dataset(gdsstore.GDSStore(str(tmp_path / "d.zarr"), read_only=True), engine=xarray_engine,
                         consolidated=False)
    t = written["temperature"]
    # basic, orthogonal (outer) and vectorized selections each read through the chosen prototype
    xr.testing.assert_identical(host(ds["temperature"][2:9, ::3, 4]), t[2:9, ::3, 4])
    xr.testing.assert_identical(host(ds["temperature"].isel(y=[1, 5, 7], x=[0, 19])), t.isel(y=[1, 5, 7], x=[0, 19]))
    pts = {"y": xr.DataArray([0, 3, 15], dims="p"), "x": xr.DataArray([2, 2, 19], dims="p")}
    xr.testing.assert_identical(host(ds["temperature"].isel(pts)), t.isel(pts))


async def test_load_async(tmp_path: Path, xarray_engine: str) -> None:
    written = write_reference(tmp_path / "d.zarr")
    ds = xr.open_dataset(tmp_path / "d.zarr", engine=xarray_engine, consolidated=False)
    loaded = await ds.load_async()  # xarray's async path: zarr's async selections, same prototype
    xr.testing.assert_identical(host(loaded), written)
    sub = await ds["temperature"].isel(y=[1, 4], x=slice(2, 9)).load_async()
    xr.testing.assert_identical(host(sub), written["temperature"].isel(y=[1, 4], x=slice(2, 9)))


def test_open_mfdataset(tmp_path: Path, xarray_engine: str) -> None:
    parts = [make_dataset(seed=i, start=f"2024-01-0{i + 1}") for i in range(3)]
    for i, part in enumerate(parts):
        write_reference(tmp_path / f"p{i}.zarr", part)
    paths = [tmp_path / f"p{i}.zarr" for i in range(3)]
    with xr.set_options(use_new_combine_kwarg_defaults=True):
        ours = xr.open_mfdataset(paths, engine=xarray_engine, consolidated=False, combine="by_coords")
        plain = xr.open_mfdataset(paths, engine="zarr", consolidated=False, combine="by_coords")
    assert ours.sizes["time"] == 72
    xr.testing.assert_identical(host(ours), plain.compute())


def test_to_zarr_round_trip_through_gdsstore(tmp_path: Path, xarray_engine: str) -> None:
    written = write_reference(tmp_path / "src.zarr")
    ds = xr.open_dataset(tmp_path / "src.zarr", engine=xarray_engine, consolidated=False, chunks={})
    with gdsstore.trace() as t:  # align_chunks: dask chunks of one shard are written together
        xarray_backend.to_zarr(ds, str(tmp_path / "out.zarr"), consolidated=False, mode="w", zarr_format=3,
                               align_chunks=True)
    assert t.totals, "the write went through gdsstore's engine"
    # plain xarray + zarr read what gdsstore wrote: same data, same codecs, chunks and shards
    plain = xr.open_dataset(tmp_path / "out.zarr", engine="zarr", consolidated=False)
    xr.testing.assert_identical(plain.load(), written)
    arr = zarr.open_array(str(tmp_path / "out.zarr"), path="count", mode="r")
    assert arr.shards == (12, 8) and arr.chunks == (4, 4)
    assert [c.to_dict()["name"] for c in arr.compressors] == ["gzip"]
    # and Dataset.to_zarr given a GDSStore works too (host data: zarr's CPU buffers)
    host(ds).to_zarr(gdsstore.GDSStore(str(tmp_path / "out2.zarr")), consolidated=False, mode="w")
    xr.testing.assert_identical(host(xr.open_dataset(tmp_path / "out2.zarr", engine=xarray_engine,
                                                     consolidated=False)), written)


def test_s3_round_trip(s3_options: dict[str, Any], xarray_engine: str) -> None:
    written = make_dataset()
    xarray_backend.to_zarr(written, "s3://xr-bucket/d.zarr", storage_options=s3_options, consolidated=False,
                           mode="w", encoding=ENCODING)
    with gdsstore.trace() as t:
        ds = xr.open_dataset("s3://xr-bucket/d.zarr", engine=xarray_engine, consolidated=False,
                             storage_options=s3_options, chunks={})
        xr.testing.assert_identical(host(ds), written)
    assert "s3" in t.routes


@pytest.mark.filterwarnings("ignore:Consolidated metadata is currently not part")
def test_http_and_webhdfs(tmp_path: Path, nginx: NginxServer, webhdfs: WebHDFSServer,
                          xarray_engine: str) -> None:
    # HTTP cannot list: the group's members come from consolidated metadata there
    written = make_dataset()
    written.to_zarr(Path(nginx.root) / "xr" / "d.zarr", mode="w", consolidated=True, encoding=ENCODING)
    xarray_backend.to_zarr(written, webhdfs.url("/d.zarr"), storage_options={"user": WEBHDFS_USER},
                           consolidated=False, mode="w", encoding=ENCODING)
    with gdsstore.trace() as t:
        over_http = xr.open_dataset(nginx.url("xr/d.zarr"), engine=xarray_engine, consolidated=True).load()
        over_hdfs = xr.open_dataset(webhdfs.url("/d.zarr"), engine=xarray_engine, consolidated=False,
                                    storage_options={"user": WEBHDFS_USER}).load()
    xr.testing.assert_identical(host(over_http), written)
    xr.testing.assert_identical(host(over_hdfs), written)
    assert {"http", "webhdfs"} <= t.routes


def test_storage_options_with_a_store_object_is_an_error(tmp_path: Path, xarray_engine: str) -> None:
    write_reference(tmp_path / "d.zarr")
    with pytest.raises(TypeError, match=r"storage_options=\['key'\] given with a store object"):
        xr.open_dataset(gdsstore.GDSStore(str(tmp_path / "d.zarr")), engine=xarray_engine,
                        storage_options={"key": "k"}, consolidated=False)


@pytest.mark.skipif(cuda.cupy_or_none() is not None, reason="CuPy is installed: device=True would not fail")
def test_device_true_without_cupy_names_the_extra(tmp_path: Path, xarray_engine: str) -> None:
    write_reference(tmp_path / "d.zarr")
    with pytest.raises(MissingOptionalDependencyError, match=r"pip install '\.\[cuda13\]'"):
        xr.open_dataset(tmp_path / "d.zarr", engine=xarray_engine, device=True, consolidated=False)


@pytest.mark.gpu
def test_gpu_data_variables_are_cupy_and_coordinates_numpy(tmp_path: Path, xarray_engine: str, cp: Any) -> None:
    written = write_reference(tmp_path / "d.zarr")
    ds = xr.open_dataset(tmp_path / "d.zarr", engine=xarray_engine, consolidated=False)
    for name in ("temperature", "count", "pressure"):
        data = ds[name].data
        assert isinstance(data, cp.ndarray), (name, type(data))
        np.testing.assert_array_equal(data.get(), written[name].values)
    for name in ("time", "y", "x", "lat"):
        assert isinstance(ds[name].data, np.ndarray), (name, type(ds[name].data))
    assert placements(ds)["temperature"] == "device" and np.isnan(ds["temperature"].encoding["_FillValue"])
    pytest.importorskip("dask.array", reason="lazy loading needs dask")
    lazy = xr.open_dataset(tmp_path / "d.zarr", engine=xarray_engine, consolidated=False, chunks={},
                           chunked_array_type=xarray_backend.DeviceDaskManager())
    data = lazy["temperature"].data
    assert isinstance(data._meta, cp.ndarray), type(data._meta)
    assert isinstance(data.blocks[1, 0, 1].compute(), cp.ndarray)
    for name in ("time", "y", "x"):
        assert isinstance(lazy[name].data, np.ndarray), (name, type(lazy[name].data))
    assert type(lazy["lat"].data._meta) is np.ndarray and isinstance(lazy["lat"].data.compute(), np.ndarray)
    got = lazy["temperature"].isel(time=slice(0, 12)).mean("time").compute()
    assert isinstance(got.data, cp.ndarray), type(got.data)
    np.testing.assert_allclose(got.data.get(), written["temperature"][:12].mean("time").values, rtol=1e-6)
    # align_chunks: dask chunks follow the inner chunks, the shards span several (engine="zarr" refuses the same)
    xarray_backend.to_zarr(lazy, str(tmp_path / "out.zarr"), consolidated=False, mode="w", align_chunks=True)
    xr.testing.assert_identical(xr.open_dataset(tmp_path / "out.zarr", engine="zarr", consolidated=False).load(),
                                written)
    # xarray's own dask manager (no chunked_array_type) copies each block to the host, as docs/xarray.md says
    default = xr.open_dataset(tmp_path / "d.zarr", engine=xarray_engine, consolidated=False, chunks={})
    assert type(default["temperature"].data.blocks[0, 0, 0].compute()) is np.ndarray, "xarray changed: fix the docs"
