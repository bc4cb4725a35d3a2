"""The I/O engine: :func:`open` for local paths and URLs, landing bytes in host or device buffers.

Importing it loads only the scheme table (:mod:`gdsstore.engine.registry`) and the file base class:
the local and remote engines are imported when a path or URL of their scheme is first opened.
"""

from __future__ import annotations

import os
from typing import Any

from gdsstore.engine.file import BaseFile
from gdsstore.engine.registry import REMOTE_SCHEMES, open_file, split_url

__all__ = ["REMOTE_SCHEMES", "BaseFile", "open", "split_url"]


def open(path_or_url: str | os.PathLike[str], mode: str = "rb", **storage_options: Any) -> BaseFile:
    """Open a local path or URL for reads/writes into host or device buffers.

    Args:
        path_or_url: a local path, ``file://``, ``s3://``, ``http(s)://`` or ``(s)webhdfs://`` URL.
        mode: ``"rb"``, ``"wb"``, ``"r+b"`` (local also ``"xb"``: exclusive create, and ``"ab"``:
            append, every write at the end, ``offset`` 0); remote objects ``"rb"`` or ``"wb"`` (S3 and
            WebHDFS: buffered, uploaded on close). Writers publish on a clean close only: an exception
            or an interrupt discards their bytes (docs: "Writing: one contract").
        **storage_options: transport options for URLs (credentials, ``endpoint_url``, headers...).

    Returns:
        A :class:`~gdsstore.engine.file.BaseFile`: ``size``, ``read``/``pread``, ``write``/``pwrite``,
        ``close``, a context manager.

    Raises:
        ValueError: an unknown URL scheme or mode. FileNotFoundError / PermissionError: as the storage says.
        TypeError: storage options the transport does not take.

    Examples:
        >>> import numpy as np, gdsstore, tempfile, os
        >>> p = os.path.join(tempfile.mkdtemp(), "x.bin")
        >>> with gdsstore.open(p, "wb") as f:
        ...     f.write(np.arange(4, dtype="u1"))
        4
        >>> buf = bytearray(4)
        >>> with gdsstore.open(p) as f:
        ...     f.read(buf), bytes(buf)
        (4, b'\\x00\\x01\\x02\\x03')
    """
    return open_file(path_or_url, mode, storage_options)
