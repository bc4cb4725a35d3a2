"""xarray ``engine="gdsstore"`` over virtual references (VirtualiZarr ``ManifestStore``, kerchunk dict / JSON
path / ``file://`` URL / parquet directory, ``VirtualStore``): every variable decoded exactly as
``engine="netcdf4"`` decodes the file itself (CF scale/offset, fill values, times), partial selections and
edge chunks included, data read through the archives' reader (one planned read per selection)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import gdsstore.archives as ga
from gdsstore import xarray_backend, xarray_variables
from gdsstore.archives import ArchiveChangedError
from gdsstore.archives.reader import VirtualArray

from .cf_data import VARIABLES, sources, write_cf
from .data import kerchunk_refs

xr = pytest.importorskip("xarray")

KINDS = ["manifest", "kerchunk-dict", "kerchunk-json", "kerchunk-file-url", "parquet", "virtualstore"]


@pytest.fixture(scope="module")
def cf_file(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("cf")
    path = tmp / "cf.nc"
    write_cf(path)
    return path, sources(path, tmp)


def reference(path: Path, **kwargs: Any) -> Any:
    """The file as xarray's netCDF4 backend decodes it, loaded and closed."""
    with xr.open_dataset(path, engine="netcdf4", **kwargs) as ds:
        return ds.load()


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, Any]]:
    """Every VirtualArray read (array name, selection), the reads themselves unchanged."""
    seen: list[tuple[str, Any]] = []
    real = VirtualArray.read

    def read(self: VirtualArray, selection: Any = ..., **kwargs: Any) -> Any:
        seen.append((self.refs.name, selection))
        return real(self, selection, **kwargs)

    monkeypatch.setattr(VirtualArray, "read", read)
    return seen


def backend_arrays(ds: Any) -> dict[str, Any]:
    """Each variable's innermost backend array (under xarray's lazy and CF wrappers)."""
    out = {}
    for name, var in ds.variables.items():
        node = var._data
        for _ in range(64):
            if isinstance(node, xarray_backend.VirtualBackendArray) or not hasattr(node, "array"):
                break
            node = node.array
        out[name] = node
    return out


@pytest.mark.parametrize("kind", KINDS)
def test_open_dataset_matches_netcdf4(cf_file: tuple[Path, dict[str, Any]], kind: str) -> None:
    path, src = cf_file
    ds = xr.open_dataset(src[kind](), engine="gdsstore", device=False)
    arrays = backend_arrays(ds)
    for name in VARIABLES:
        assert isinstance(arrays[name], xarray_backend.VirtualBackendArray), name  # not zarr's array
        assert ds[name].encoding["gdsstore_placement"] == "host"
    xr.testing.assert_identical(ds.load(), reference(path))
    assert ds["t2m"].isnull()[0, :5, :5].all() and ds["t2m"].isnull()[5:].all()  # fill cells and missing chunks
    assert ds["time"].dtype.kind == "M"


SELECTIONS: list[dict[str, Any]] = [
    {"time": 1},
    {"time": slice(1, 6), "lat": slice(60, 70)},
    {"lat": slice(None, None, -3), "lon": slice(65, None)},  # reversed, and the last (edge) chunks
    {"time": [0, 4, 6], "lon": [69, 0, 31, 32]},  # outer indexing across chunk borders
    {"lat": -1, "lon": -1},
]


@pytest.mark.parametrize("kind", ["manifest", "kerchunk-dict"])
@pytest.mark.parametrize("sel", SELECTIONS, ids=repr)
def test_partial_selections_match_netcdf4(cf_file: tuple[Path, dict[str, Any]], kind: str, sel: dict[str, Any]) -> None:
    path, src = cf_file
    want = reference(path)
    ds = xr.open_dataset(src[kind](), engine="gdsstore", device=False)
    xr.testing.assert_identical(ds.isel(sel).load(), want.isel(sel))


def test_label_selections_match_netcdf4(cf_file: tuple[Path, dict[str, Any]]) -> None:
    path, src = cf_file
    want = reference(path)
    ds = xr.open_dataset(src["manifest"](), engine="gdsstore", device=False)
    got = ds.sel(time=slice("2000-01-03", "2000-01-09"), lat=slice(-10, 10)).sel(lon=100, method="nearest")
    xr.testing.assert_identical(
        got.load(), want.sel(time=slice("2000-01-03", "2000-01-09"), lat=slice(-10, 10)).sel(lon=100, method="nearest")
    )


@pytest.mark.parametrize(
    "options", [{"mask_and_scale": False}, {"decode_times": False}, {"decode_timedelta": True}, {"decode_cf": False}],
    ids=repr,
)
def test_decoding_options_match_netcdf4(cf_file: tuple[Path, dict[str, Any]], options: dict[str, Any]) -> None:
    path, src = cf_file
    ds = xr.open_dataset(src["manifest"](), engine="gdsstore", device=False, **options)
    xr.testing.assert_identical(ds.load(), reference(path, **options))


def test_one_read_per_selection(cf_file: tuple[Path, dict[str, Any]], reads: list[tuple[str, Any]]) -> None:
    path, src = cf_file
    ds = xr.open_dataset(src["manifest"](), engine="gdsstore", device=False)
    data_reads = [r for r in reads if r[0] in VARIABLES]
    assert data_reads == []  # lazy: only the indexes (coordinates) were read
    values = ds["t2m"].isel(time=slice(0, 4)).values  # 2 x 3 x 3 chunks of the file
    assert [name for name, _ in reads if name == "t2m"] == ["t2m"]
    np.testing.assert_array_equal(values, reference(path)["t2m"].values[:4])


@pytest.mark.filterwarnings("ignore:The specified chunks separate")  # chunks cut other variables' stored chunks
@pytest.mark.parametrize("chunks", [{}, {"time": 4, "lat": 128, "lon": 64}, "auto"], ids=repr)
def test_dask_chunks_read_each_block_once(
    cf_file: tuple[Path, dict[str, Any]], reads: list[tuple[str, Any]], chunks: Any
) -> None:
    pytest.importorskip("dask")
    path, src = cf_file
    ds = xr.open_dataset(src["kerchunk-dict"](), engine="gdsstore", device=False, chunks=chunks)
    blocks = ds["t2m"].data.npartitions
    got = ds.isel(lat=slice(3, 129)).compute()
    xr.testing.assert_identical(got, reference(path).isel(lat=slice(3, 129)))
    assert len([r for r in reads if r[0] == "t2m"]) == blocks  # one planned read per dask block
    if chunks == {}:
        assert ds["t2m"].chunks == ((2, 2, 2, 1), (64, 64, 2), (32, 32, 6))  # the stored chunks


@pytest.mark.filterwarnings("ignore:The specified chunks separate")
def test_dask_graph_pickles(cf_file: tuple[Path, dict[str, Any]]) -> None:
    import pickle

    pytest.importorskip("dask")
    path, src = cf_file
    ds = xr.open_dataset(src["manifest"](), engine="gdsstore", device=False, chunks={"time": 3})
    again = pickle.loads(pickle.dumps(ds))  # what a distributed worker receives
    xr.testing.assert_identical(again.compute(), reference(path))


def test_groups_and_nested_arrays(tmp_path: Path) -> None:
    h5py = pytest.importorskip("h5py")
    p = tmp_path / "g.h5"
    data = np.arange(600, dtype="f4").reshape(20, 30)
    with h5py.File(p, "w") as f:
        f.create_group("grp").create_dataset("v", data=data, chunks=(8, 8), compression="gzip", shuffle=True)
    # mask_and_scale=False: HDF5's default fill value 0 is the zarr fill value, which xarray would mask
    ds = xr.open_dataset(kerchunk_refs(p), engine="gdsstore", group="grp", device=False, mask_and_scale=False)
    assert isinstance(backend_arrays(ds)["v"], xarray_backend.VirtualBackendArray)
    np.testing.assert_array_equal(ds["v"].values, data)
    np.testing.assert_array_equal(ds["v"][19:, 3:29:5].values, data[19:, 3:29:5])


def test_changed_file_fails(tmp_path: Path) -> None:
    path = tmp_path / "c.nc"
    write_cf(path)
    ds = xr.open_dataset(kerchunk_refs(path), engine="gdsstore", device=False)
    write_cf(path, seed=5)  # the same layout, other values: the references still fit, the bytes differ
    with pytest.raises(ArchiveChangedError, match=r"c\.nc"):
        ds["t2m"].load()


def test_remote_json_and_targets(archive_nginx: Any, tmp_path: Path) -> None:
    """kerchunk JSON by URL whose targets are URLs too: both read through nginx."""
    root = Path(archive_nginx.root) / "xr"
    root.mkdir(exist_ok=True)
    os.chmod(root, 0o755)
    path = root / "r.nc"
    write_cf(path)
    os.chmod(path, 0o644)
    refs = kerchunk_refs(path)
    url = archive_nginx.url("xr/r.nc")
    body = {k: [url, *v[1:]] if isinstance(v, list) else v for k, v in refs["refs"].items()}
    (root / "r.json").write_text(json.dumps({"version": 1, "refs": body}))
    os.chmod(root / "r.json", 0o644)
    ds = xr.open_dataset(archive_nginx.url("xr/r.json"), engine="gdsstore", device=False)
    xr.testing.assert_identical(ds.load(), reference(path))


def test_bad_sources_name_the_problem(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        xr.open_dataset(str(tmp_path / "missing.json"), engine="gdsstore", device=False)
    with pytest.raises(TypeError, match="storage_options"):
        xr.open_dataset(ga.VirtualStore({"version": 1, "refs": {".zgroup": '{"zarr_format": 2}'}}),
                        engine="gdsstore", storage_options={"anon": True})


# -- GPU: data variables in CuPy, decoded on the device --------------------------------------------------


@pytest.fixture
def cupy() -> Iterator[Any]:
    yield pytest.importorskip("cupy")


@pytest.mark.gpu
@pytest.mark.parametrize("kind", ["manifest", "kerchunk-dict"])
def test_device_placement_matches_netcdf4(cf_file: tuple[Path, dict[str, Any]], kind: str, cupy: Any) -> None:
    path, src = cf_file
    want = reference(path)
    ds = xr.open_dataset(src[kind](), engine="gdsstore", device=True)
    placements = {name: v.encoding["gdsstore_placement"] for name, v in ds.variables.items()}
    assert placements["u"] == "device" and placements["mask"] == "device"  # decodable on the device
    assert placements["t2m"] == "host" and "_FillValue" in ds["t2m"].encoding["gdsstore_placement_reason"]
    assert placements["time"] == placements["lat"] == "host"  # coordinates stay on the host
    for name in ("u", "mask"):
        got = ds[name].isel(lat=slice(5, 130)).data
        assert isinstance(got, cupy.ndarray)
        np.testing.assert_array_equal(got.get(), want[name].isel(lat=slice(5, 130)).values)
    np.testing.assert_array_equal(ds["t2m"].values, want["t2m"].values)
    raw = xr.open_dataset(src[kind](), engine="gdsstore", device=True, mask_and_scale=False)
    assert raw["t2m"].encoding["gdsstore_placement"] == "device"  # no mask decoded: its fill value is no bar
    assert isinstance(raw["t2m"].data, cupy.ndarray)
    np.testing.assert_array_equal(raw["t2m"].data.get(), reference(path, mask_and_scale=False)["t2m"].values)


@pytest.mark.gpu
def test_device_dask_blocks_are_cupy(cf_file: tuple[Path, dict[str, Any]], cupy: Any) -> None:
    pytest.importorskip("dask")
    path, src = cf_file
    ds = xr.open_dataset(src["manifest"](), engine="gdsstore", device=True, chunks={"time": 3},
                         chunked_array_type=xarray_backend.DeviceDaskManager())
    got = ds["u"].data.compute()
    assert isinstance(got, cupy.ndarray)
    np.testing.assert_array_equal(got.get(), reference(path)["u"].values)


@pytest.mark.parametrize("mask_and_scale", [True, False])
def test_fill_values_keep_a_variable_on_the_host_only_when_masked(mask_and_scale: bool) -> None:
    """xarray masks fill values with numpy: a variable that has one goes to the device only when xarray
    does not mask (mask_and_scale=False); time units keep it on the host either way."""
    var = xr.Variable(("x",), np.zeros(3, "i2"), attrs={"_FillValue": np.int16(-1), "scale_factor": 0.5})
    got = xarray_variables.settle_placement(var, "device", mask_and_scale)
    assert got == ("host" if mask_and_scale else "device")
    assert ("gdsstore_placement_reason" in var.encoding) == mask_and_scale
    times = xr.Variable(("x",), np.zeros(3, "i4"), attrs={"units": "days since 2000-01-01", "_FillValue": -1})
    assert xarray_variables.settle_placement(times, "device", mask_and_scale) == "host"
