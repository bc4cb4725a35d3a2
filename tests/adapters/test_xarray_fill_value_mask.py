"""``engine="gdsstore"`` takes xarray's ``use_zarr_fill_value_as_mask`` and honours it.

``None`` masks a zarr format 2 array's fill value and not a format 3 one's (xarray's default); ``True``
and ``False`` force it either way.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

xr = pytest.importorskip("xarray")
zarr = pytest.importorskip("zarr")

STORED = [1.0, -1.0, 3.0, -1.0]  # -1 is the array's zarr fill_value
MASKED = [1.0, np.nan, 3.0, np.nan]


def _write(path: Path, zarr_format: int) -> str:
    group = zarr.open_group(str(path), mode="w", zarr_format=zarr_format)
    kwargs = {"dimension_names": ["x"]} if zarr_format == 3 else {"attributes": {"_ARRAY_DIMENSIONS": ["x"]}}
    a = group.create_array("v", shape=(4,), chunks=(2,), dtype="f4", fill_value=-1.0, **kwargs)
    a[:] = np.array(STORED, dtype="f4")
    return str(path)


@pytest.mark.parametrize(
    ("zarr_format", "flag", "expected"),
    [(2, None, MASKED), (2, True, MASKED), (2, False, STORED),
     (3, None, STORED), (3, True, MASKED), (3, False, STORED)],
)
def test_use_zarr_fill_value_as_mask(tmp_path: Path, zarr_format: int, flag: bool | None,
                                     expected: list[float]) -> None:
    path = _write(tmp_path / "d.zarr", zarr_format)
    ds = xr.open_dataset(path, engine="gdsstore", consolidated=False, device=False, pipeline=False,
                         use_zarr_fill_value_as_mask=flag)
    np.testing.assert_array_equal(ds["v"].values, np.array(expected, dtype="f4"))
    assert ds["v"].encoding["gdsstore_placement"] == "host"
