"""Archives through virtual references: netCDF4/HDF5 chunks read by (file, offset, length).

VirtualiZarr ``ManifestStore`` objects, kerchunk reference sets and Icechunk repositories of virtual
chunks (:func:`open_icechunk`: references gathered in batches, the files' ETag / last-modified stamps
checked by icechunk) name every chunk of an archive as a byte range of a file. :func:`open_virtual`
reads selections of them through gdsstore's engine: the chunks' triples planned with numpy
(:mod:`.plan`), grouped by file and coalesced, read in one batch into one buffer (``http(s)://`` and
``s3://`` targets: one wave per backend, :mod:`.fetch`), decoded on threads (or on the GPU: nvCOMP
Deflate, CuPy shuffle, checksums on the device; :mod:`.codecs`) and copied into the output.
:class:`VirtualStore` serves the same references to zarr as a store whose chunk gets of one event-loop
tick are one batched read; ``xr.open_dataset(source, engine="gdsstore")`` reads them into xarray
(:mod:`gdsstore.xarray_backend`).
Remote targets take ``storage_options`` as :class:`gdsstore.GDSStore` does. The errors
(:class:`~gdsstore.errors.ChunkDecodeError`, :class:`~gdsstore.errors.ArchiveChangedError`) live in
:mod:`gdsstore.errors` and are re-exported here. See ``docs/archives.md``.

The names load on first use: zarr imports :mod:`.codecs` through its codec entry points
(``numcodecs.zlib`` and friends) for every archive array it opens, and that must not pull in the
engine, the settings or the readers.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "ArchiveChangedError",
    "ArrayRefs",
    "ChunkDecodeError",
    "VirtualArray",
    "VirtualGroup",
    "VirtualStore",
    "from_icechunk",
    "from_kerchunk",
    "from_manifest_store",
    "open_icechunk",
    "open_virtual",
]

_LAZY = {
    # The archive errors live in the one exception tree; re-exported here where archive users look.
    "ArchiveChangedError": "gdsstore.errors",
    "ChunkDecodeError": "gdsstore.errors",
    "ArrayRefs": "gdsstore.archives.refs",
    "from_kerchunk": "gdsstore.archives.refs",
    "from_manifest_store": "gdsstore.archives.refs",
    "VirtualArray": "gdsstore.archives.reader",
    "VirtualGroup": "gdsstore.archives.reader",
    "open_virtual": "gdsstore.archives.reader",
    "VirtualStore": "gdsstore.archives.store",
    "from_icechunk": "gdsstore.archives.icechunk",
    "open_icechunk": "gdsstore.archives.reader",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'gdsstore.archives' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
