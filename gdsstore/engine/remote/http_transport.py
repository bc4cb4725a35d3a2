"""HTTP(S) objects: read-only backends and files over any web server, every request through the native core.

Storage options (``headers``, ``verify``) and proxies: docs/remote.md. Keys under a root become URL paths by one
rule (:func:`~gdsstore.engine.remote.keys.key_to_url_path`).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import unquote, urlsplit

from gdsstore import policy
from gdsstore.engine.backend import ObjectInfo
from gdsstore.engine.remote import core
from gdsstore.engine.remote.keys import (
    check_header_values,
    check_remote_key,
    key_to_url_path,
)
from gdsstore.engine.remote.redact import redact_url
from gdsstore.engine.remote.wave import WaveReads

__all__ = ["HTTPBackend", "HTTPSource", "http_root"]


@functools.lru_cache(maxsize=256)
def _split_root(root: str, where: str) -> tuple[str, str]:
    """The base URL (``scheme://host[:port]/``) and the path prefix (decoded, with its trailing ``/``) of keys
    under ``root``."""
    parts = urlsplit(root)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"{where}: not an http(s) URL: {redact_url(root)!r}")
    if "@" in parts.netloc:
        raise ValueError(f"{where}: credentials in the URL are not accepted; pass headers={{'Authorization': ...}}")
    if parts.query or parts.fragment:
        raise ValueError(f"{where}: a query or fragment in {redact_url(root)!r} cannot be kept for the keys under "
                         "it (a presigned URL signs one object: open it with gdsstore.open)")
    prefix = unquote(parts.path).strip("/")
    return f"{parts.scheme}://{parts.netloc}/", f"{prefix}/" if prefix else ""


def http_root(root: str, headers: Mapping[str, str] | None, verify: bool | str, where: str, *,
              presigned: bool = False) -> core.CoreRoot:
    """The native core's root of the objects under ``root``, with these headers and TLS settings.
    ``presigned``: ``root`` is one object's URL with its query, sent as it is (path ``""``), a store of its
    own, not kept (one per presigned URL would grow the cache without bound)."""
    check_header_values(headers or {}, where)
    base, prefix = (root, "") if presigned else _split_root(root, where)
    hdrs = dict(headers or {})

    def store() -> Any:
        s = policy.settings()
        return core.http_store(base, connect_timeout=s.remote_connect_timeout, headers=hdrs, verify=verify,
                               pool_idle=4 if presigned else s.remote_wave_concurrency, cached=not presigned)

    first = store()  # a bad option (a CA bundle that is no PEM file) fails here, once
    return core.CoreRoot((lambda: first) if presigned else store, redact_url(base), prefix)


class HTTPSource(core.CoreSource):
    """One object behind an HTTP(S) URL, read through the native core. A URL with a query (a presigned URL)
    is a store of its own, sent as it is (its signature is masked wherever it is shown)."""

    def __init__(self, url: str, headers: Mapping[str, str] | None = None, verify: bool | str = True) -> None:
        where = "gdsstore.open()"
        parts = urlsplit(url)
        if parts.fragment or parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError(f"{where}: not an http(s) URL of an object: {redact_url(url)!r}")
        if parts.query:
            root, path = http_root(url, headers, verify, where, presigned=True), ""
        else:
            root = http_root(parts._replace(path="/").geturl(), headers, verify, where)
            path = unquote(parts.path).lstrip("/")
        super().__init__(root, path, redact_url(url), route="http", scheme=parts.scheme)


class HTTPBackend(WaveReads):
    """Read-only objects under an HTTP(S) root (a web server: no listing, no writes)."""

    writable = False
    listable = False
    route = "http"

    def __init__(self, root: str, *, headers: Mapping[str, str] | None = None, verify: bool | str = True) -> None:
        self._root = root.rstrip("/")
        self.core = http_root(self._root, headers, verify, "HTTPBackend()")

    @property
    def url(self) -> str:
        return redact_url(self._root)

    def core_path(self, key: str, where: str) -> str:
        return self.core.prefix + check_remote_key(key, where)

    def plain_object_paths(self, keys: Sequence[str]) -> list[str]:
        # docstring inherited
        return [self.core.prefix + key for key in keys]

    def source(self, key: str, where: str) -> core.CoreSource:
        return core.CoreSource(self.core, self.core_path(key, where), f"{self.url}/{key_to_url_path(key, where)}",
                               route="http", scheme=urlsplit(self._root).scheme)

    def open(self, key: str, mode: str = "rb") -> Any:
        from gdsstore.engine.remote.reader import RemoteFile

        if mode != "rb":
            raise PermissionError(f"HTTPBackend.open(): {self.url} is read-only; mode {mode!r} needs a writable backend")
        return RemoteFile(self.source(key, "HTTPBackend.open()"))

    def info(self, key: str) -> ObjectInfo:
        src = self.source(key, "HTTPBackend.info()")
        return ObjectInfo(key, src.stat(), etag=src.etag)

    def put(self, key: str, buf: Any, *, exclusive: bool = False) -> None:
        raise PermissionError(f"HTTPBackend.put(): {self.url} is read-only (key {key!r})")

    def delete(self, key: str) -> None:
        raise PermissionError(f"HTTPBackend.delete(): {self.url} is read-only (key {key!r})")

    def list(self, prefix: str = "") -> Any:
        raise NotImplementedError(f"HTTPBackend.list(): a web server cannot list {self.url} (listable=False)")

    def list_dir(self, prefix: str = "") -> Any:
        raise NotImplementedError(f"HTTPBackend.list_dir(): a web server cannot list {self.url} (listable=False)")
