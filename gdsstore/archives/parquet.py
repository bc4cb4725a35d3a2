"""kerchunk references stored as parquet (fsspec's ``LazyReferenceMapper`` layout), read as arrays.

A parquet reference set is a directory: ``.zmetadata`` holds the zarr v2 metadata of every array and
``record_size``; each array's chunk references sit in ``<array>/refs.<k>.parq``, one row per chunk in
C order over the chunk grid (record ``k`` holds chunks ``k * record_size`` onwards), with the columns
``path``, ``offset``, ``size`` and ``raw`` (inlined bytes). The columns are the arrays the reader plans
from: no per-chunk Python except for inlined chunks. Needs pyarrow.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from gdsstore.archives.refs import INLINED, MISSING, ArrayRefs, file_sizes, file_table, v2_array

__all__ = ["from_parquet", "parquet_metadata"]


def parquet_metadata(root: str | os.PathLike[str]) -> tuple[dict[str, str], int]:
    """The metadata documents of a parquet reference set by key (JSON text) and its record size."""
    with open(os.path.join(root, ".zmetadata")) as f:
        met = json.load(f)
    docs = {k: v if isinstance(v, str) else json.dumps(v) for k, v in met["metadata"].items()}
    return docs, int(met["record_size"])


def _columns(path: str, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[tuple[int, bytes]]]:
    """One record's ``path`` (``""`` where null), ``offset`` and ``size`` columns, first ``n`` rows, and
    its inlined chunks as ``(row, bytes)``."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    t = pq.read_table(path)
    names = set(t.column_names)
    if "path" in names:
        paths = pc.fill_null(t.column("path").cast(pa.string()), "").to_numpy(zero_copy_only=False)[:n]
    else:
        paths = np.full(min(n, t.num_rows), "", dtype=object)
    zeros = np.zeros(len(paths), dtype=np.int64)
    offs = t.column("offset").to_numpy()[:n].astype(np.int64) if "offset" in names else zeros
    sizes = t.column("size").to_numpy()[:n].astype(np.int64) if "size" in names else zeros
    inlined: list[tuple[int, bytes]] = []
    if "raw" in names:
        raw = t.column("raw")
        for i in np.flatnonzero(~pc.is_null(raw).to_numpy(zero_copy_only=False)[:n]).tolist():
            inlined.append((i, raw[i].as_py()))
    return paths, offs, sizes, inlined


def _parquet_array(
    root: str, name: str, docs: dict[str, str], record_size: int, size_of: Callable[[str], int]
) -> ArrayRefs:
    where = f"from_kerchunk(): parquet array {name!r}"
    out = v2_array(name, docs, where)
    n = math.prod(out.file_ids.shape) if out.shape else 1
    paths = np.full(n, "", dtype=object)
    offs = np.zeros(n, dtype=np.int64)
    sizes = np.zeros(n, dtype=np.int64)
    raws: list[tuple[int, bytes]] = []
    for k in range(math.ceil(n / record_size)):
        f = os.path.join(root, name, f"refs.{k}.parq")
        if not os.path.exists(f):
            continue  # a record never written: its chunks are missing
        lo = k * record_size
        p, o, s, r = _columns(f, min(record_size, n - lo))
        paths[lo : lo + len(p)], offs[lo : lo + len(o)], sizes[lo : lo + len(s)] = p, o, s
        raws.extend((lo + i, b) for i, b in r)
    files, ids = file_table(paths, where)
    if files:
        # [url] alone (offset and size 0): the whole file.
        whole = (ids >= 0) & (offs == 0) & (sizes == 0)
        used = set(ids[whole].tolist())  # only files referenced whole are looked up
        whole_sizes = np.array([size_of(p) if k in used else 0 for k, p in enumerate(files)], dtype=np.int64)
        sizes = np.where(whole, whole_sizes[ids.clip(0)], sizes)
    grid = out.file_ids.shape
    for i, b in raws:
        ids[i] = INLINED
        out.inlined[tuple(int(x) for x in np.unravel_index(i, grid))] = b
    out.files = files
    out.file_ids = ids.reshape(grid)
    out.offsets = offs.reshape(grid)
    out.lengths = np.where(ids == MISSING, 0, sizes).reshape(grid)
    return out


def from_parquet(
    root: str | os.PathLike[str], storage_options: Mapping[str, Any] | None = None
) -> dict[str, ArrayRefs]:
    """Every array of a parquet reference set (see the module docstring; ``storage_options`` as for
    :func:`~gdsstore.archives.refs.from_kerchunk`, used for remote ``[url]`` whole-file references)."""
    root = os.fspath(root)
    docs, record_size = parquet_metadata(root)
    arrays = [k[: -len("/.zarray")] if k != ".zarray" else "" for k in docs if k.endswith(".zarray")]
    size_of = file_sizes(storage_options)
    return {a: _parquet_array(root, a, docs, record_size, size_of) for a in arrays}
