"""Backends and file openers found by URL scheme: one table of strings, resolved on first use.

As fsspec's ``fsspec/registry.py`` (``known_implementations``): each scheme names, as
``"module:attribute"`` strings, the :class:`~gdsstore.engine.backend.Backend` class that serves a root
of that scheme and the function that opens one object of it. Nothing is imported until a scheme is
used, so no module imports its siblings back (no import cycle), and ``import gdsstore`` loads no
transport.

Examples:
    >>> split_url("s3://bucket/key")
    ('s3', 's3://bucket/key')
    >>> split_url("file:///tmp/x.bin")
    ('file', '/tmp/x.bin')
    >>> known_implementations["https"].route
    'http'
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit

if TYPE_CHECKING:
    from gdsstore.engine.backend import Backend
    from gdsstore.engine.file import BaseFile

__all__ = ["REMOTE_SCHEMES", "Implementation", "get_backend_factory", "get_opener", "known_implementations", "split_url"]


@dataclass(frozen=True)
class Implementation:
    """What serves one URL scheme: ``"module:attribute"`` strings, and the route name in the trace."""

    backend: str  # a function (root, storage_options) -> Backend
    opener: str  # a function (path_or_url, mode, storage_options) -> BaseFile
    route: str


_LOCAL = Implementation("gdsstore.engine.schemes:local_backend", "gdsstore.engine.schemes:open_local", "posix")
_S3 = Implementation("gdsstore.engine.schemes:s3_backend", "gdsstore.engine.schemes:open_s3", "s3")
_HTTP = Implementation("gdsstore.engine.schemes:http_backend", "gdsstore.engine.schemes:open_http", "http")
_WEBHDFS = Implementation(
    "gdsstore.engine.schemes:webhdfs_backend", "gdsstore.engine.schemes:open_webhdfs", "webhdfs"
)

#: The one scheme table (every scheme gdsstore serves).
known_implementations: dict[str, Implementation] = {
    "file": _LOCAL,
    "s3": _S3,
    "http": _HTTP,
    "https": _HTTP,
    "webhdfs": _WEBHDFS,
    "swebhdfs": _WEBHDFS,
}

#: The schemes served by a remote transport.
REMOTE_SCHEMES: tuple[str, ...] = tuple(s for s in known_implementations if s != "file")


def _resolve(target: str) -> Any:
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module), attr)


def _implementation(scheme: str, where: str) -> Implementation:
    impl = known_implementations.get(scheme.lower())
    if impl is None:
        raise ValueError(
            f"{where}: unsupported URL scheme {scheme!r}; "
            f"use a local path, {', '.join(s + '://' for s in known_implementations)}"
        )
    return impl


def get_backend_factory(scheme: str, where: str = "backend_for()") -> Callable[[str, dict[str, Any]], Backend]:
    """The function that builds the :class:`~gdsstore.engine.backend.Backend` of a root of ``scheme``:
    ``factory(root, storage_options)`` (imported now)."""
    factory: Callable[[str, dict[str, Any]], Backend] = _resolve(_implementation(scheme, where).backend)
    return factory


def get_opener(scheme: str, where: str = "gdsstore.open()") -> Any:
    """The function that opens one object of ``scheme``: ``opener(path_or_url, mode, storage_options)``."""
    return _resolve(_implementation(scheme, where).opener)


def split_url(path_or_url: str | os.PathLike[str], where: str = "gdsstore.open()") -> tuple[str, str]:
    """``(scheme, rest)``: ``("file", "/abs/path")`` for local paths and ``file://`` URLs, else the URL.

    Raises:
        TypeError: not a str or path. ValueError: an unknown scheme, or a ``file://`` URL with a host.
    """
    if isinstance(path_or_url, os.PathLike):
        return "file", os.fspath(path_or_url)
    if not isinstance(path_or_url, str):
        raise TypeError(f"{where}: path must be a str or os.PathLike, got {type(path_or_url).__name__}")
    if "://" not in path_or_url:
        return "file", path_or_url
    parts = urlsplit(path_or_url)
    scheme = parts.scheme.lower()
    if scheme == "file":
        if parts.netloc not in ("", "localhost"):
            raise ValueError(f"{where}: file URL with a host is not local: {path_or_url!r}")
        return "file", unquote(parts.path)
    _implementation(scheme, f"{where} ({path_or_url!r})")
    return scheme, path_or_url


def open_file(path_or_url: str | os.PathLike[str], mode: str, storage_options: dict[str, Any]) -> BaseFile:
    """Open one object through its scheme's opener (see :func:`gdsstore.open`)."""
    scheme, rest = split_url(path_or_url)
    opened: BaseFile = get_opener(scheme)(rest, mode, storage_options)
    return opened
