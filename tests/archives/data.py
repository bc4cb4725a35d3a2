"""Archives made by the tests (helpers; the fixtures are in conftest.py): netCDF4/HDF5 files written with h5py and netCDF4, and their references
(VirtualiZarr ``ManifestStore`` through ``HDFParser``; kerchunk's ``SingleHdf5ToZarr``)."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

h5py = pytest.importorskip("h5py")


def write_h5(path: Path, *, seed: int = 0, fletcher32: bool = False, partial: bool = True) -> dict[str, np.ndarray]:
    """One HDF5 file: ``t`` float32 (64 KiB zlib+shuffle chunks, edge chunks, a fill value and chunks
    never written), ``q`` int16 (fletcher32 when asked), ``x`` a small contiguous-free coordinate."""
    rng = np.random.default_rng(seed)
    t = rng.standard_normal((5, 300, 200)).astype("f4")
    q = rng.integers(-1000, 1000, (70, 90)).astype("i2")
    with h5py.File(path, "w") as f:
        d = f.create_dataset(
            "t", shape=t.shape, chunks=(1, 128, 128), dtype="f4", compression="gzip", compression_opts=1,
            shuffle=True, fillvalue=-9.5, fletcher32=fletcher32,
        )
        if partial:
            d[:3] = t[:3]  # time steps 3 and 4 are never written: their chunks are missing
            d[4, :100, :100] = t[4, :100, :100]  # one chunk of the last step written
        else:
            d[:] = t
        f.create_dataset("q", data=q, chunks=(32, 32), compression="gzip", shuffle=True, fletcher32=fletcher32)
        f.create_dataset("x", data=np.arange(200, dtype="f8"), chunks=(64,), compression="gzip")
    with h5py.File(path, "r") as f:
        return {k: f[k][...] for k in ("t", "q", "x")}


def manifest_store(path: Path) -> Any:
    """VirtualiZarr's ManifestStore over one local file (obstore registry of the local filesystem)."""
    from obspec_utils.registry import ObjectStoreRegistry
    from obstore.store import LocalStore
    from virtualizarr.parsers import HDFParser

    registry = ObjectStoreRegistry({"file://": LocalStore()})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return HDFParser()(f"file://{path}", registry=registry)


def kerchunk_refs(path: Path) -> dict[str, Any]:
    import kerchunk.hdf

    refs: dict[str, Any] = kerchunk.hdf.SingleHdf5ToZarr(str(path), inline_threshold=0).translate()
    return refs
