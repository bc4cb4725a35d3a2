"""The I/O engine: :func:`open` for local paths and URLs, landing bytes in host or device buffers."""

from __future__ import annotations

import os
from typing import Any, Protocol
from urllib.parse import unquote, urlsplit

from gdsstore.engine.local import LocalFile, check_mode

__all__ = ["REMOTE_SCHEMES", "EngineFile", "LocalFile", "open", "split_url"]

REMOTE_SCHEMES = ("s3", "http", "https", "webhdfs", "swebhdfs")


class EngineFile(Protocol):
    """What :func:`open` returns, local or remote."""

    @property
    def size(self) -> int: ...
    def read(self, buf: Any, size: int | None = None, offset: int = 0) -> int: ...
    def pread(self, buf: Any, size: int | None = None, offset: int = 0) -> Any: ...
    def write(self, buf: Any, size: int | None = None, offset: int = 0) -> int: ...
    def pwrite(self, buf: Any, size: int | None = None, offset: int = 0) -> Any: ...
    def close(self) -> None: ...
    def __enter__(self) -> Any: ...
    def __exit__(self, *exc: object) -> None: ...


def split_url(path_or_url: str | os.PathLike[str]) -> tuple[str, str]:
    """``(scheme, rest)``: ``("file", "/abs/path")`` for local paths and ``file://`` URLs."""
    if isinstance(path_or_url, os.PathLike):
        return "file", os.fspath(path_or_url)
    if not isinstance(path_or_url, str):
        raise TypeError(f"gdsstore.open(): path must be a str or os.PathLike, got {type(path_or_url).__name__}")
    if "://" not in path_or_url:
        return "file", path_or_url
    parts = urlsplit(path_or_url)
    scheme = parts.scheme.lower()
    if scheme == "file":
        if parts.netloc not in ("", "localhost"):
            raise ValueError(f"gdsstore.open(): file URL with a host is not local: {path_or_url!r}")
        return "file", unquote(parts.path)
    if scheme in REMOTE_SCHEMES:
        return scheme, path_or_url
    raise ValueError(
        f"gdsstore.open(): unsupported URL scheme {scheme!r} in {path_or_url!r}; "
        f"use a local path, file://, {', '.join(s + '://' for s in REMOTE_SCHEMES)}"
    )


def open(path_or_url: str | os.PathLike[str], mode: str = "rb", **storage_options: Any) -> Any:
    """Open a local path or URL for reads/writes into host or device buffers.

    Args:
        path_or_url: a local path, ``file://``, ``s3://``, ``http(s)://`` or ``webhdfs://`` URL.
        mode: ``"rb"``, ``"wb"``, ``"r+b"`` (local also ``"xb"``: exclusive create).
        **storage_options: transport options for URLs (credentials, ``endpoint_url``, headers...).

    Returns:
        A file object with ``size``, ``read``/``pread``, ``write``/``pwrite``, ``close``.

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
    scheme, rest = split_url(path_or_url)
    if scheme == "file":
        if storage_options:
            raise TypeError(f"gdsstore.open(): local files take no storage options, got {sorted(storage_options)}")
        return LocalFile(rest, check_mode(mode, "gdsstore.open()"))
    from gdsstore.engine.remote import open_remote

    return open_remote(rest, mode, **storage_options)
