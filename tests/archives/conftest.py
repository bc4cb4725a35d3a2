"""Fixtures of the archive tests: an HDF5 file made with h5py (tests/archives/data.py makes the data)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from .data import write_h5


@pytest.fixture
def h5file(tmp_path: Path) -> tuple[Path, dict[str, np.ndarray]]:
    p = tmp_path / "a.h5"
    return p, write_h5(p)
