"""Path dialects of the ``gds`` filesystem: one function per question, one table of protocols.

A ``gds`` filesystem is either local (``gds:///data/x.bin``) or chained onto one remote protocol
(``gds::s3://bucket/key``, ``gds::https://host/x``, ``gds::webhdfs://namenode:9870/x``). Each
protocol writes its paths its own way; this module turns a path into the engine's terms, as obstore's
``fsspec`` module does with ``_split_path`` and ``_construct_store``:

- :func:`strip_path`: a user's path or URL as the filesystem writes it (fsspec's ``_strip_protocol``);
- :func:`split_path`: a stripped path as ``(backend root, key)`` (the root names one engine backend);
- :func:`unstrip_path`, :func:`parent_path`: the way back to a URL, and a path's parent;
- :func:`chain_target`: the protocol and options a filesystem is made for (checked);
- :func:`transport_options`: the filesystem's options as the engine's transport spells them.

Examples:
    >>> split_path("s3", strip_path("s3", "gds::s3://bucket/a/b.bin"), {})
    ('s3://bucket', 'a/b.bin')
    >>> split_path("http", strip_path("http", "gds::http://host:8080/d/x.bin"), {})
    ('http://host:8080', 'd/x.bin')
    >>> split_path("webhdfs", strip_path("webhdfs", "webhdfs://nn:9870/d/x"), {"host": "nn", "port": 9870})
    ('webhdfs://nn:9870', 'd/x')
    >>> split_path("file", strip_path("file", "gds:///data/x.bin"), {})
    ('/', 'data/x.bin')
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Callable, Mapping
from itertools import repeat
from typing import Any

from fsspec.core import has_magic
from fsspec.implementations.local import make_path_posix

from gdsstore.engine.registry import REMOTE_SCHEMES

__all__ = [
    "LOCAL_PROTOCOLS",
    "REMOTE_PROTOCOLS",
    "chain_target",
    "literal_paths",
    "locate_many",
    "parent_path",
    "split_path",
    "split_paths",
    "strip_path",
    "strip_paths",
    "transport_options",
    "unstrip_path",
]

#: Target protocols of chained URLs (``gds::s3://...``) and the engine scheme each maps to.
REMOTE_PROTOCOLS: dict[str, str] = {**{s: s for s in REMOTE_SCHEMES}, "s3a": "s3"}
#: ``target_protocol`` values that mean local files.
LOCAL_PROTOCOLS: tuple[str | None, ...] = (None, "", "file", "local", "gds")

_LOCAL_PREFIXES = ("gds://", "file://", "local://", "gds:", "file:", "local:")
#: The target protocols of each one's engine scheme (``s3``: ``s3``, ``s3a``), found once, not per path.
_ALIASES: dict[str, tuple[str, ...]] = {
    protocol: tuple(p for p, s in REMOTE_PROTOCOLS.items() if s == scheme) for protocol, scheme in REMOTE_PROTOCOLS.items()
}
_WEBHDFS = ("webhdfs", "swebhdfs")


def _text(path: Any) -> str:
    return os.fspath(path) if isinstance(path, os.PathLike) else str(path)


def _normalize_local(path: str) -> str:
    """An absolute local path without ``.``, ``..`` or empty segments, as ``os.path.abspath`` writes it
    (``/data/./a//b/../x`` -> ``/data/a/x``): fsspec's ``file://`` hands such paths to the OS, which
    resolves them; the engine takes keys without them. ``..`` stops at ``/``."""
    return "/" + posixpath.normpath(path).lstrip("/") if path.startswith("/") else posixpath.normpath(path)


def strip_path(protocol: str, path_like: Any) -> str:
    """``path`` as a ``gds`` filesystem of ``protocol`` writes it (no ``gds``/target prefix).

    Local (``protocol="file"``): absolute posix paths, normalized (no ``.``, ``..`` or ``//``: ``..`` stops
    at ``/``); ``"gds://"`` alone is ``""`` (a chain's head).
    ``s3``: ``bucket/key``. ``http(s)``: the whole URL. ``webhdfs``: ``/path`` (host and port are options).
    """
    path = _text(path_like)
    if protocol == "file":
        if path.startswith("gds::"):
            path = path[len("gds::") :]
        for prefix in _LOCAL_PREFIXES:
            if path.startswith(prefix):
                path = path[len(prefix) :]
                break
        if path == "":
            return ""
        return _normalize_local(make_path_posix(path))
    for prefix in ("gds::", "gds://"):
        if path.startswith(prefix):
            path = path[len(prefix) :]
    if protocol in ("http", "https"):
        return path if "://" in path else f"{protocol}://{path.lstrip('/')}"
    # s3 and s3a (or webhdfs and swebhdfs) are one engine scheme: either prefix goes.
    for p in (protocol, *_ALIASES[protocol]):
        if path.startswith(p + "://"):
            path = path[len(p) + 3 :]
            if protocol in _WEBHDFS:
                path = "/" + path.partition("/")[2]  # drop host:port (they are options)
            break
    if protocol in _WEBHDFS:
        return "/" + path.strip("/")
    return path.strip("/")


def _plain_urls(protocol: str, paths: list[Any]) -> bool:
    """``paths`` are ``str`` of a remote ``protocol`` (not WebHDFS: its host and port are options) and none
    carries a ``gds`` prefix: string methods over the whole list strip and split them as the functions of
    one path do."""
    return (protocol in REMOTE_PROTOCOLS and protocol not in _WEBHDFS and set(map(type, paths)) <= {str}
            and not any(map(str.startswith, paths, repeat("gds:"))))


def strip_paths(protocol: str, paths: list[Any]) -> list[str] | None:
    """:func:`strip_path` of each of ``paths``, remote URLs of one spelling, in one pass of string methods (a
    ``cat`` strips thousands); None where they need :func:`strip_path` one at a time.

    Examples:
        >>> strip_paths("s3", ["s3://bucket/a/", "s3://bucket/b"]), strip_paths("https", ["https://h/x"])
        (['bucket/a', 'bucket/b'], ['https://h/x'])
    """
    if _plain_urls(protocol, paths):
        if protocol in ("http", "https"):
            if all(map(str.__contains__, paths, repeat("://"))):
                return list(paths)
        elif all(map(str.startswith, paths, repeat(f"{protocol}://"))):
            n = len(protocol) + 3
            return [p[n:].strip("/") for p in paths]
    return None


def split_paths(protocol: str, paths: list[str]) -> tuple[list[str], list[str]] | None:
    """:func:`split_path` of each of the stripped ``paths`` of S3 or HTTP(S), in one pass of string methods:
    ``(roots, keys)``; None where they need :func:`split_path` one at a time (WebHDFS, a bucket missing).

    Examples:
        >>> split_paths("http", ["http://h:1/a/b", "http://g/c"])
        (['http://h:1', 'http://g'], ['a/b', 'c'])
    """
    if not _plain_urls(protocol, paths):
        return None
    http = protocol in ("http", "https")
    first = paths[0] if paths else ""
    head = first.partition("://")[0] + "://" + first.partition("://")[2].partition("/")[0] if http else \
        first.partition("/")[0]
    if head.strip(":/") and all(map(str.startswith, paths, repeat(f"{head}/"))):  # one root (one server's files)
        n = len(head) + 1
        return [head if http else f"s3://{head}"] * len(paths), [p[n:] for p in paths]
    if http:
        parts = [(s, *rest.partition("/")) for s, _, rest in map(str.partition, paths, repeat("://"))]
        return [f"{s}://{h}" for s, h, _, _ in parts], [k for _, _, _, k in parts]
    buckets = [path.partition("/") for path in paths]
    if any(not b for b, _, _ in buckets):
        return None
    return [f"s3://{b}" for b, _, _ in buckets], [k for _, _, k in buckets]


def split_path(protocol: str, path: str, options: Mapping[str, Any]) -> tuple[str, str]:
    """The engine backend root and the key in it for the stripped ``path`` of ``protocol``.

    Args:
        protocol: ``"file"`` or a key of :data:`REMOTE_PROTOCOLS`.
        path: a path as :func:`strip_path` returns it.
        options: the filesystem's ``target_options`` (WebHDFS: ``host``, ``port``, ``use_https``).

    Returns:
        ``(root, key)``: ``("/", "data/x")`` locally, ``("s3://bucket", "key")``,
        ``("https://host:port", "path")``, ``("webhdfs://host:port", "path")``.

    Raises:
        ValueError: an S3 path with no bucket, or WebHDFS without a ``host`` option.
    """
    if protocol == "file":
        return "/", path.lstrip("/")
    if protocol in ("http", "https"):
        scheme, _, rest = path.partition("://")
        host, _, key = rest.partition("/")
        return f"{scheme}://{host}", key
    if protocol in _WEBHDFS:
        hdfs_host = options.get("host")
        if not hdfs_host:
            raise ValueError(
                f"GDSFileSystem: {protocol} needs a host: gds::{protocol}://host:port/path, "
                f"or target_options={{'host': ..., 'port': ...}}"
            )
        port = options.get("port")
        netloc = f"{hdfs_host}:{port}" if port else str(hdfs_host)
        scheme = "swebhdfs" if options.get("use_https") else protocol
        return f"{scheme}://{netloc}", path.lstrip("/")
    bucket, _, key = path.partition("/")
    if not bucket:
        raise ValueError(f"GDSFileSystem: s3 path {path!r} names no bucket; use gds::s3://bucket/key")
    return f"s3://{bucket}", key


def unstrip_path(protocol: str, path: str, options: Mapping[str, Any] | None = None) -> str:
    """The ``gds`` URL of the stripped ``path``: ``gds:///p``, ``gds::s3://b/k``, ``gds::https://h/p``,
    ``gds::webhdfs://host:port/p`` (host and port from ``options``, the filesystem's target options)."""
    if protocol == "file":
        return f"gds://{path}"
    if protocol in ("http", "https"):
        return f"gds::{path}"
    if protocol in _WEBHDFS and options and options.get("host"):
        root, key = split_path(protocol, path, options)
        return f"gds::{protocol}://{root.partition('://')[2]}/{key}"
    return f"gds::{protocol}://{path.lstrip('/')}"


def parent_path(protocol: str, path: str) -> str:
    """The parent of a stripped remote ``path`` (``""`` above a bucket, ``"/"`` on WebHDFS)."""
    parent = path.rsplit("/", 1)[0] if "/" in path.strip("/") else ""
    return parent or ("/" if protocol in _WEBHDFS else "")


def transport_options(protocol: str, options: Mapping[str, Any]) -> dict[str, Any]:
    """``options`` as the engine's transport takes them (S3 takes s3fs's spellings as they are).

    WebHDFS: ``host``/``port``/``use_https`` are part of the root URL, and fsspec's ``token`` is
    the engine's ``delegation``.
    """
    opts = dict(options)
    if protocol in _WEBHDFS:
        for k in ("host", "port", "use_https"):
            opts.pop(k, None)
        if "token" in opts:
            opts.setdefault("delegation", opts.pop("token"))
    return opts


def chain_target(
    target_protocol: str | None, target_options: Mapping[str, Any] | None, options: Mapping[str, Any]
) -> tuple[str, dict[str, Any]]:
    """The protocol a ``gds`` filesystem reads (``"file"``, or a key of :data:`REMOTE_PROTOCOLS`) and
    its transport options: ``target_options`` and the ``options`` given to ``gds`` itself (``gds::s3``
    with ``storage_options={...}``). Local files take no options.

    Examples:
        >>> chain_target(None, None, {}), chain_target("s3", {"anon": True}, {"endpoint_url": "http://h"})
        (('file', {}), ('s3', {'anon': True, 'endpoint_url': 'http://h'}))
    """
    opts = dict(target_options or {})
    if target_protocol in LOCAL_PROTOCOLS:
        if opts or options:
            raise TypeError(
                f"GDSFileSystem(): local files take no storage options, got {sorted({**opts, **options})}"
            )
        return "file", {}
    if target_protocol not in REMOTE_PROTOCOLS:
        raise ValueError(
            f"GDSFileSystem(): unsupported target_protocol {target_protocol!r}; use one of "
            f"file, {', '.join(REMOTE_PROTOCOLS)}"
        )
    opts.update(options)
    return target_protocol, opts


def literal_paths(paths: list[Any]) -> bool:
    """Every path a ``str`` without glob characters: fsspec's ``_expand_path`` gives them back stripped,
    each once, sorted (one search of all of them, not one per path)."""
    try:
        return not has_magic("".join(paths))
    except TypeError:  # a path that is not a str: _expand_path's way
        return False


def locate_many(
    paths: list[str], protocol: str, options: Mapping[str, Any], backend_of: Callable[[str], Any], *, one_pass: bool
) -> tuple[list[Any | None], list[str], dict[int, Exception]]:
    """Each path's backend (None: refused) and key, and the exception of each refused one; each root's backend
    looked up once (``backend_of(root)``: a ``cat`` locates thousands). ``one_pass``: paths split at once
    (:func:`split_paths`) where they can be (remote paths)."""
    split = split_paths(protocol, paths) if one_pass else None
    if split is not None:
        try:
            known = {root: backend_of(root) for root in set(split[0])}
        except Exception:  # a root refused: which paths it refuses, found one at a time below
            pass
        else:
            return list(map(known.__getitem__, split[0])), split[1], {}
    backends: list[Any | None] = []
    keys: list[str] = []
    refused: dict[int, Exception] = {}
    found: dict[str, Any] = {}
    for i, path in enumerate(paths):
        try:
            root, key = split_path(protocol, path, options)
            backend = found.get(root) or found.setdefault(root, backend_of(root))
        except Exception as exc:
            refused[i] = exc
            backend, key = None, ""
        backends.append(backend)
        keys.append(key)
    return backends, keys, refused
