"""Archives through virtual references: netCDF4/HDF5 chunks read by (file, offset, length).

VirtualiZarr ``ManifestStore`` objects and kerchunk reference sets name every chunk of an archive
as a byte range of a file. :func:`open_virtual` reads selections of them through gdsstore's engine:
the chunks' triples planned with numpy (:mod:`.plan`), grouped by file and coalesced, read in one
batch into one buffer, decoded on threads (or on the GPU: nvCOMP Deflate, CuPy shuffle, checksums on
the device; :mod:`.codecs`) and copied into the output. :class:`VirtualStore` serves the same
references to zarr (and xarray) as a store whose chunk gets of one event-loop tick are one batched read.
See ``docs/archives.md``.
"""

from __future__ import annotations

from gdsstore.archives.errors import ArchiveChangedError, ChunkDecodeError
from gdsstore.archives.reader import VirtualArray, VirtualGroup, open_virtual
from gdsstore.archives.refs import ArrayRefs, from_kerchunk, from_manifest_store
from gdsstore.archives.store import VirtualStore

__all__ = [
    "ArchiveChangedError",
    "ArrayRefs",
    "ChunkDecodeError",
    "VirtualArray",
    "VirtualGroup",
    "VirtualStore",
    "from_kerchunk",
    "from_manifest_store",
    "open_virtual",
]
