"""What the registry's strings name: for each scheme, the function that opens one object and the one that
builds a backend for a root (:mod:`gdsstore.engine.registry`).

Transports are imported inside the functions: opening a local file loads no HTTP or S3 code.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from gdsstore.engine.backend import Backend
    from gdsstore.engine.file import BaseFile
    from gdsstore.engine.local import LocalWriteFile

__all__ = [
    "http_backend",
    "local_backend",
    "open_http",
    "open_local",
    "open_local_writer",
    "open_s3",
    "open_webhdfs",
    "s3_backend",
    "webhdfs_backend",
]

_HTTP_OPTIONS = frozenset({"headers", "verify"})


def redact_url(url: str) -> str:
    """The URL without secrets, for messages (:func:`gdsstore.engine.remote.redact.redact_url`)."""
    from gdsstore.engine.remote import redact

    return redact.redact_url(url)


def _no_options(opts: dict[str, Any], where: str) -> None:
    if opts:
        raise TypeError(f"{where}: local files take no storage options, got {sorted(opts)}")


def _http_options(url: str, opts: dict[str, Any], where: str) -> dict[str, Any]:
    if not urlsplit(url).netloc:
        raise ValueError(f"{where}: not a remote URL (no host): {redact_url(url)!r}")
    if "cert" in opts:
        raise TypeError(f"{where}: client certificates (cert=) are not supported for http(s): its requests go "
                        "through gdsstore's native core (object_store), which sends no client certificate; drop cert=")
    unknown = sorted(set(opts) - _HTTP_OPTIONS)
    if unknown:
        raise TypeError(f"{where}: unknown storage options for http(s) {unknown}; known: {sorted(_HTTP_OPTIONS)}")
    return opts


def _check_remote(url: str, mode: str, where: str) -> None:
    from gdsstore.engine.remote.writer import check_remote_mode

    if not urlsplit(url).netloc:
        raise ValueError(f"{where}: not a remote URL (s3://, http(s)://, webhdfs://): {redact_url(url)!r}")
    check_remote_mode(mode, where)


def open_local(path: str, mode: str, storage_options: dict[str, Any]) -> BaseFile:
    """A local file: ``"rb"`` and ``"r+b"`` in place, ``"wb"``, ``"xb"`` and ``"ab"`` through a temporary
    file published on close (:func:`open_local_writer`)."""
    from gdsstore.engine.local import LocalFile, check_mode

    where = "gdsstore.open()"
    _no_options(storage_options, where)
    if check_mode(mode, where) in ("rb", "r+b"):
        return LocalFile(path, mode)
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise FileNotFoundError(f"{where}: cannot create {path!r}: no such directory {parent!r}")
    return open_local_writer(path, mode, where)


def open_local_writer(path: str, mode: str, where: str) -> LocalWriteFile:
    """The writer of a local file (``"wb"``, ``"xb"``, ``"ab"``): a temporary file beside ``path``,
    published on a clean close (:class:`~gdsstore.engine.local.LocalWriteFile`); missing parent
    directories are created."""
    from gdsstore.engine.atomic import AtomicWriter
    from gdsstore.engine.local import LocalWriteFile

    if os.path.isdir(path):
        raise IsADirectoryError(f"{where}: {path!r} is a directory, not a file")
    return LocalWriteFile(AtomicWriter(path, exclusive=mode == "xb", where=where), mode)


def local_backend(root: str, storage_options: dict[str, Any]) -> Backend:
    from gdsstore.engine.localfs import LocalBackend

    return LocalBackend.from_storage_options(root, storage_options)


def open_s3(url: str, mode: str, storage_options: dict[str, Any]) -> BaseFile:
    """An S3 object: ``"rb"`` (concurrent range reads) or ``"wb"`` (buffered, uploaded on close)."""
    from gdsstore.engine.remote.reader import RemoteFile
    from gdsstore.engine.remote.s3 import S3Source, get_s3_client, parse_s3_url, s3_upload
    from gdsstore.engine.remote.writer import RemoteWriteFile

    _check_remote(url, mode, "gdsstore.open()")
    bucket, key = parse_s3_url(url)
    client = get_s3_client(storage_options)
    if mode == "wb":
        return RemoteWriteFile(f"s3://{bucket}/{key}", lambda data, dev: s3_upload(client, bucket, key, data, device=dev))
    return RemoteFile(S3Source(client, bucket, key))


def s3_backend(root: str, storage_options: dict[str, Any]) -> Backend:
    from gdsstore.engine.remote.s3 import S3Backend

    _check_remote(root, "rb", "backend_for()")
    return S3Backend(root, storage_options)


def open_webhdfs(url: str, mode: str, storage_options: dict[str, Any]) -> BaseFile:
    """A WebHDFS file: ``"rb"`` or ``"wb"`` (CREATE on close)."""
    from gdsstore.engine.remote.reader import RemoteFile
    from gdsstore.engine.remote.webhdfs import WebHDFSClient, WebHDFSSource, webhdfs_upload
    from gdsstore.engine.remote.writer import RemoteWriteFile

    _check_remote(url, mode, "gdsstore.open()")
    wc = WebHDFSClient(url, storage_options)
    path = urlsplit(url).path or "/"
    if mode == "wb":
        return RemoteWriteFile(wc.display(path), lambda data, dev: webhdfs_upload(wc, path, data, device=dev))
    return RemoteFile(WebHDFSSource(wc, path))


def webhdfs_backend(root: str, storage_options: dict[str, Any]) -> Backend:
    from gdsstore.engine.remote.webhdfs import WebHDFSBackend

    _check_remote(root, "rb", "backend_for()")
    return WebHDFSBackend(root, storage_options)


def open_http(url: str, mode: str, storage_options: dict[str, Any]) -> BaseFile:
    """An object on a web server: ``"rb"`` only."""
    from gdsstore.engine.remote.http_transport import HTTPSource
    from gdsstore.engine.remote.reader import RemoteFile

    where = "gdsstore.open()"
    _check_remote(url, mode, where)
    o = _http_options(url, storage_options, where)
    if mode == "wb":
        raise PermissionError(f"{where}: http(s) URLs are read-only; {redact_url(url)!r} cannot be opened 'wb'")
    return RemoteFile(HTTPSource(url, o.get("headers"), o.get("verify", True)))


def http_backend(root: str, storage_options: dict[str, Any]) -> Backend:
    from gdsstore.engine.remote.http_transport import HTTPBackend

    return HTTPBackend(root, **_http_options(root, storage_options, "backend_for()"))
