"""A chunk whose crc32c does not match, read through gdsstore's pipeline: an error, never bytes.

A zarr v3 array with the ``crc32c`` codec (alone, after zstd, inside shards, and the shard index's own
checksum) has one byte flipped on disk; reads under ``gdsstore.enable_pipeline()`` that touch the chunk
fail with the checksum error, reads that do not touch it still return the right values. (The device
read's crc32c kernel is checked in test_host_twins.py.)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import zarr
from zarr.codecs import Crc32cCodec, ZstdCodec
from zarr.storage import LocalStore

import gdsstore

SHAPE, CHUNKS, SHARDS = (16, 16), (4, 4), (8, 8)
REF = np.arange(SHAPE[0] * SHAPE[1], dtype="f4").reshape(SHAPE) + 0.25

# layout -> (create_array keywords, the file holding the corrupted chunk, its region of the array)
LAYOUTS: dict[str, tuple[dict[str, Any], str, Any]] = {
    "crc32c": ({"compressors": [Crc32cCodec()]}, "c/1/2", np.s_[4:8, 8:12]),
    "zstd+crc32c": ({"compressors": [ZstdCodec(level=1), Crc32cCodec()]}, "c/1/2", np.s_[4:8, 8:12]),
    # the shard's first inner chunk (stored first), and the shard index (at the end: all its chunks)
    "shard-inner": ({"shards": SHARDS, "compressors": [Crc32cCodec()]}, "c/1/1", np.s_[8:12, 8:12]),
    "shard-index": ({"shards": SHARDS, "compressors": None}, "c/1/1", np.s_[8:16, 8:16]),
}


def _store(kind: str, root: Path) -> Any:
    return gdsstore.GDSStore(str(root)) if kind == "gdsstore" else LocalStore(str(root))


def _flip(path: Path, where: str, layout: str) -> None:
    data = bytearray(path.read_bytes())
    if layout == "shard-index":
        at = len(data) - 6 if where == "payload" else len(data) - 1  # an index entry, or the index's checksum
    else:
        at = 5 if where == "payload" else (len(data) - 1 if layout != "shard-inner" else 4 * 4 * 4 + 1)
    data[at] ^= 0x20
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("store_kind", ["gdsstore", "local"])
@pytest.mark.parametrize("where", ["payload", "checksum"])
@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_a_corrupt_chunk_is_an_error_never_bytes(tmp_path: Path, store_kind: str, where: str, layout: str) -> None:
    kw, key, region = LAYOUTS[layout]
    root = tmp_path / "a.zarr"
    zarr.create_array(_store(store_kind, root), shape=SHAPE, chunks=CHUNKS, dtype="f4", **kw)[:] = REF
    _flip(root / key, where, layout)
    with gdsstore.enable_pipeline():
        z = zarr.open_array(_store(store_kind, root), mode="r")
        for sel in (np.s_[:], region, np.s_[region[0].start + 1, region[1]]):
            with pytest.raises(ValueError, match="checksum"):
                z[sel]
        # the rest of the array reads as it was written
        np.testing.assert_array_equal(z[0:4, 0:8], REF[0:4, 0:8])


def test_the_pipeline_reads_the_intact_array(tmp_path: Path) -> None:
    """The same arrays unharmed: every layout reads back exactly (the errors above are the corruption's)."""
    for layout, (kw, _, _) in LAYOUTS.items():
        root = tmp_path / f"{layout}.zarr"
        zarr.create_array(gdsstore.GDSStore(str(root)), shape=SHAPE, chunks=CHUNKS, dtype="f4", **kw)[:] = REF
        with gdsstore.enable_pipeline():
            np.testing.assert_array_equal(zarr.open_array(gdsstore.GDSStore(str(root)), mode="r")[:], REF)
