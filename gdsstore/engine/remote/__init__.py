"""The remote engine: one range reader over the S3, HTTP(S) and WebHDFS transports.

- :mod:`~gdsstore.engine.remote.reader`: range splitting, response verification, :class:`RemoteFile`.
- :mod:`~gdsstore.engine.remote.retry`: the one retry policy (attempts, backoff with jitter).
- :mod:`~gdsstore.engine.remote.http_transport`, :mod:`~gdsstore.engine.remote.s3`,
  :mod:`~gdsstore.engine.remote.webhdfs`: transports and their backends.
- :mod:`~gdsstore.engine.remote.writer`: buffered whole-object writes, uploaded on close.

Examples:
    >>> import gdsstore, numpy as np                                        # doctest: +SKIP
    >>> with gdsstore.open("https://example.org/x.bin") as f:               # doctest: +SKIP
    ...     buf = np.empty(f.size, "u1"); f.read(buf)
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from gdsstore.engine.backend import Backend
from gdsstore.engine.remote.reader import RangeMismatchError, RangeNotSupportedError, RemoteFile
from gdsstore.engine.remote.redact import redact_url
from gdsstore.engine.remote.retry import RemoteIOError, RetryPolicy
from gdsstore.engine.remote.writer import RemoteWriteFile, check_remote_mode

__all__ = [
    "RangeMismatchError",
    "RangeNotSupportedError",
    "RemoteFile",
    "RemoteIOError",
    "RemoteWriteFile",
    "RetryPolicy",
    "open_remote",
    "remote_backend",
]

_HTTP_OPTIONS = frozenset({"headers", "verify", "cert"})


def _scheme(url: str, where: str) -> str:
    if not isinstance(url, str):
        raise TypeError(f"{where}: url must be a str, got {type(url).__name__}")
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in ("s3", "http", "https", "webhdfs", "swebhdfs") or not parts.netloc:
        raise ValueError(f"{where}: not a remote URL (s3://, http(s)://, webhdfs://): {redact_url(url)!r}")
    return scheme


def _http_options(opts: dict[str, Any], where: str) -> dict[str, Any]:
    unknown = sorted(set(opts) - _HTTP_OPTIONS)
    if unknown:
        raise TypeError(f"{where}: unknown storage options for http(s) {unknown}; known: {sorted(_HTTP_OPTIONS)}")
    return opts


def open_remote(url: str, mode: str = "rb", **storage_options: Any) -> Any:
    """Open ``url`` (s3://, http(s)://, webhdfs://, swebhdfs://) through its transport.

    Args:
        url: the object's URL.
        mode: ``"rb"`` (concurrent range reads) or ``"wb"`` (buffered, uploaded on close; S3 and WebHDFS).
        **storage_options: transport options (see each transport module).

    Returns:
        A :class:`RemoteFile` (``"rb"``) or :class:`RemoteWriteFile` (``"wb"``).

    Raises:
        ValueError: a bad URL or mode. FileNotFoundError / PermissionError: as the server says.
    """
    where = "gdsstore.open()"
    scheme = _scheme(url, where)
    check_remote_mode(mode, where)
    if scheme == "s3":
        from gdsstore.engine.remote.s3 import S3Source, get_s3_client, parse_s3_url, s3_upload

        bucket, key = parse_s3_url(url)
        client = get_s3_client(storage_options)
        if mode == "wb":
            return RemoteWriteFile(f"s3://{bucket}/{key}", lambda data, dev: s3_upload(client, bucket, key, data, device=dev))
        return RemoteFile(S3Source(client, bucket, key))
    if scheme in ("webhdfs", "swebhdfs"):
        from gdsstore.engine.remote.webhdfs import WebHDFSClient, WebHDFSSource, webhdfs_upload

        wc = WebHDFSClient(url, storage_options)
        path = urlsplit(url).path or "/"
        if mode == "wb":
            return RemoteWriteFile(wc.display(path), lambda data, dev: webhdfs_upload(wc, path, data, device=dev))
        return RemoteFile(WebHDFSSource(wc, path))
    from gdsstore.engine.remote.http_transport import HTTPSource, get_client

    o = _http_options(storage_options, where)
    if mode == "wb":
        raise PermissionError(f"{where}: http(s) URLs are read-only; {redact_url(url)!r} cannot be opened 'wb'")
    return RemoteFile(HTTPSource(url, get_client(o.get("verify", True), o.get("cert")), o.get("headers")))


def remote_backend(url: str, opts: dict[str, Any] | None = None) -> Backend:
    """The :class:`~gdsstore.engine.backend.Backend` for a remote root URL."""
    where = "backend_for()"
    scheme = _scheme(url, where)
    opts = dict(opts or {})
    if scheme == "s3":
        from gdsstore.engine.remote.s3 import S3Backend

        return S3Backend(url, opts)
    if scheme in ("webhdfs", "swebhdfs"):
        from gdsstore.engine.remote.webhdfs import WebHDFSBackend

        return WebHDFSBackend(url, opts)
    from gdsstore.engine.remote.http_transport import HTTPBackend

    return HTTPBackend(url, **_http_options(opts, where))
