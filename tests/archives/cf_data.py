"""A netCDF4 file with the CF attributes xarray decodes (helpers of test_xarray_virtual.py and test_icechunk.py):
packed integers (``scale_factor``/``add_offset``/``_FillValue``), a float ``_FillValue``, time units and a
calendar, a timedelta, a scalar, edge chunks and chunks never written; and its references in every form
``engine="gdsstore"`` opens."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from .data import kerchunk_refs, manifest_store

netCDF4 = pytest.importorskip("netCDF4")

#: Variables of :func:`write_cf`, and their dimensions.
VARIABLES = {
    "t2m": ("time", "lat", "lon"), "precip": ("time", "lat", "lon"), "u": ("time", "lat", "lon"),
    "days": ("time",), "mask": ("lat", "lon"), "crs": (),
}


def write_cf(path: Path, *, seed: int = 0) -> None:
    """The file: ``t2m`` int16 packed (64 x 32 chunks over 130 x 70: edge chunks; time steps 5 and 6 never
    written: the fill value), ``precip`` float32 with a ``_FillValue`` in places, ``u`` float32 scaled
    without a fill value, coordinates ``time`` (days since, a calendar), ``lat``, ``lon``."""
    rng = np.random.default_rng(seed)
    with netCDF4.Dataset(path, "w") as ds:
        ds.title = "gdsstore CF test"
        ds.createDimension("time", 7)
        ds.createDimension("lat", 130)
        ds.createDimension("lon", 70)
        tm = ds.createVariable("time", "i4", ("time",))
        tm.units, tm.calendar = "days since 2000-01-01", "standard"
        tm[:] = np.arange(7) * 2
        lat = ds.createVariable("lat", "f4", ("lat",))
        lat.units = "degrees_north"
        lat[:] = np.linspace(-60, 60, 130)
        ds.createVariable("lon", "f8", ("lon",))[:] = np.linspace(0, 359, 70)
        t = ds.createVariable("t2m", "i2", ("time", "lat", "lon"), zlib=True, complevel=1, shuffle=True,
                              chunksizes=(2, 64, 32), fill_value=np.int16(-32767))
        t.scale_factor, t.add_offset, t.units = 0.01, 273.15, "K"
        t.set_auto_maskandscale(False)
        raw = rng.integers(-3000, 3000, (5, 130, 70)).astype("i2")
        raw[0, :5, :5] = -32767  # cells at the fill value: masked
        t[:5] = raw
        p = ds.createVariable("precip", "f4", ("time", "lat", "lon"), zlib=True, chunksizes=(1, 50, 50),
                              fill_value=np.float32(1e20))
        p.set_auto_maskandscale(False)
        pv = rng.random((7, 130, 70)).astype("f4")
        pv[1, 3:9, 2] = 1e20
        p[:] = pv
        u = ds.createVariable("u", "f4", ("time", "lat", "lon"), zlib=True, shuffle=True, chunksizes=(3, 64, 64),
                              fill_value=False)
        u.scale_factor, u.units = np.float32(0.5), "m s-1"
        u.set_auto_maskandscale(False)
        u[:] = rng.standard_normal((7, 130, 70)).astype("f4")
        d = ds.createVariable("days", "f8", ("time",))
        d.units = "hours"
        d[:] = np.arange(7) * 1.5
        ds.createVariable("mask", "u1", ("lat", "lon"), zlib=True, chunksizes=(64, 64))[:] = rng.random((130, 70)) > 0.5
        crs = ds.createVariable("crs", "i4", ())
        crs.grid_mapping_name = "latitude_longitude"
        crs.assignValue(1)


def sources(path: Path, tmp: Path) -> dict[str, Any]:
    """The file's references in every form ``engine="gdsstore"`` opens, by name."""
    import fsspec
    from fsspec.implementations.reference import LazyReferenceMapper

    import gdsstore.archives as ga

    refs = kerchunk_refs(path)
    json_path = tmp / "refs.json"
    json_path.write_text(json.dumps(refs))
    parquet = LazyReferenceMapper.create(root=str(tmp / "refs.parq"), fs=fsspec.filesystem("file"), engine="pyarrow")
    for key, value in sorted(refs["refs"].items()):
        parquet[key] = value
    parquet.flush()
    return {
        "manifest": lambda: manifest_store(path),
        "kerchunk-dict": lambda: refs,
        "kerchunk-json": lambda: str(json_path),
        "kerchunk-file-url": lambda: json_path.as_uri(),
        "parquet": lambda: str(tmp / "refs.parq"),
        "virtualstore": lambda: ga.VirtualStore(refs),
    }
