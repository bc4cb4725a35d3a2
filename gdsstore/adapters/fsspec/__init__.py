"""The fsspec filesystem ``gds`` over the gdsstore engine (entry point ``fsspec.specs``).

- :mod:`~gdsstore.adapters.fsspec.paths`: path dialects of the local and chained protocols;
- :mod:`~gdsstore.adapters.fsspec.filesystem`: :class:`GDSFileSystem`, :class:`GDSLocalFileSystem`;
- :mod:`~gdsstore.adapters.fsspec.file`: :class:`GDSFile`, and reads that end as ``bytes``.

Importing this package imports fsspec, never zarr.
"""

from __future__ import annotations

from gdsstore.adapters.fsspec.file import GDSFile
from gdsstore.adapters.fsspec.filesystem import GDSFileSystem, GDSLocalFileSystem
from gdsstore.adapters.fsspec.paths import REMOTE_PROTOCOLS

__all__ = ["REMOTE_PROTOCOLS", "GDSFile", "GDSFileSystem", "GDSLocalFileSystem"]
