"""S3 objects under ``s3://bucket/prefix`` as a backend: every request (reads, writes, HEAD, LIST, DELETE)
through the native core, on the store of the bucket built from botocore's resolution."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from gdsstore.engine.backend import Backend, BatchResult, ObjectInfo, check_key
from gdsstore.engine.remote import core
from gdsstore.engine.remote.keys import check_remote_key
from gdsstore.engine.remote.s3.client import S3Client, get_s3_client, parse_s3_url
from gdsstore.engine.remote.s3.source import S3Source
from gdsstore.engine.remote.s3.upload import s3_upload, s3_upload_many
from gdsstore.engine.remote.wave import WaveReads

__all__ = ["S3Backend"]


class S3Backend(WaveReads, Backend):
    """Objects under ``s3://bucket/prefix``: keys are relative to the prefix."""

    def __init__(self, root: str, storage_options: dict[str, Any] | None = None) -> None:
        self.bucket, prefix = parse_s3_url(root)
        self.prefix = prefix.strip("/")
        self._client = get_s3_client(dict(storage_options or {}))
        self.core = self._client.core_root(self.bucket)
        self.route = "s3"

    @property
    def url(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}".rstrip("/")

    @property
    def client(self) -> S3Client:
        return self._client

    def _full(self, key: str, where: str) -> str:
        check_remote_key(key, where)
        return f"{self.prefix}/{key}" if self.prefix else key

    def source(self, key: str, where: str) -> S3Source:
        """The range source of ``key`` (one object)."""
        return S3Source(self._client, self.bucket, self.core_path(key, where))

    def core_path(self, key: str, where: str) -> str:
        """The object key of ``key`` (``FileNotFoundError``: it names no object)."""
        full = self._full(key, where)
        if not full or full.endswith("/"):
            raise FileNotFoundError(f"{where}: {key!r} is not an object key")
        return full

    def open(self, key: str, mode: str = "rb") -> Any:
        from gdsstore.engine.remote.reader import RemoteFile
        from gdsstore.engine.remote.writer import RemoteWriteFile, check_remote_mode

        where = "S3Backend.open()"
        full = self._full(key, where)
        if check_remote_mode(mode, where) == "rb":
            return RemoteFile(S3Source(self._client, self.bucket, full))
        return RemoteWriteFile(f"s3://{self.bucket}/{full}", lambda data, dev: s3_upload(self._client, self.bucket, full, data, device=dev))

    def info(self, key: str) -> ObjectInfo:
        full = self._full(key, "S3Backend.info()")
        if full == "" or key.endswith("/"):
            raise FileNotFoundError(f"S3Backend.info(): {key!r} is not an object key")
        _, size, mtime_ns, etag, _ = core.head(self.core.store(), f"HEAD {self.core.base}{full}", full)
        return ObjectInfo(key, size, "file", mtime_ns / 1e9 if mtime_ns else None, etag)

    def put(self, key: str, buf: Any, *, exclusive: bool = False) -> None:
        full = self._full(key, "S3Backend.put()")
        s3_upload(self._client, self.bucket, full, buf, exclusive=exclusive)

    def put_batch(self, keys: Sequence[str], bufs: Sequence[Any], exclusive: Sequence[bool]) -> BatchResult:
        """:meth:`put` of many keys at once (each atomic on its own): one call of the native core
        (:func:`~gdsstore.engine.remote.s3.upload.s3_upload_many`)."""
        out = BatchResult(len(keys))
        fulls: list[str] = []
        ok: list[int] = []
        for i, key in enumerate(keys):
            try:
                fulls.append(self._full(key, "S3Backend.put_batch()"))
                ok.append(i)
            except (TypeError, ValueError) as exc:
                out.errors[i] = exc
        errs = s3_upload_many(self._client, self.bucket, fulls, [bufs[i] for i in ok], [exclusive[i] for i in ok])
        for i, err in zip(ok, errs, strict=True):
            if err is not None:
                out.errors[i] = err
        return out

    def delete(self, key: str) -> None:
        full = self._full(key, "S3Backend.delete()")
        core.delete_objects(self.core.store(), self.core.base, [full])

    def delete_prefix(self, prefix: str) -> None:
        full = self._full(prefix, "S3Backend.delete_prefix()")
        if full and not full.endswith("/"):
            full += "/"
        objects, _ = core.list_objects(self.core.store(), f"LIST {self.core.base}{full}", full)
        core.delete_objects(self.core.store(), self.core.base, [row[0] for row in objects])

    def _abs(self, rel: str) -> str:
        return f"{self.prefix}/{rel}" if self.prefix else rel

    def _listing(self, prefix: str, where: str, children: bool = False) -> str:
        """The full prefix of a listing of the keys under ``prefix`` (``children``: of its immediate children)."""
        if prefix:
            check_key(prefix, where)
        rel = prefix if not children else prefix.rstrip("/") + "/" if prefix.rstrip("/") else ""
        return self._abs(rel) if rel else (self.prefix + "/" if self.prefix else "")

    def _listed(self, full_prefix: str, delimiter: str | None) -> Iterator[ObjectInfo]:
        """The objects (sizes, mtimes and ETags from the listing) and, with ``delimiter``, the common prefixes
        (type ``"directory"``, ending with it) under ``full_prefix``; keys relative to the root."""
        cut = len(f"{self.prefix}/") if self.prefix else 0
        objects, prefixes = core.list_objects(self.core.store(), f"LIST {self.core.base}{full_prefix}", full_prefix,
                                              delimiter)
        for key, size, mtime_ns, etag, _ in objects:
            yield ObjectInfo(key[cut:], size, "file", mtime_ns / 1e9 if mtime_ns else None, etag)
        for p in prefixes:
            yield ObjectInfo(p[cut:], 0, "directory")

    def list(self, prefix: str = "") -> Iterator[str]:
        for info in self._listed(self._listing(prefix, "S3Backend.list()"), delimiter=None):
            yield info.key

    def list_info(self, prefix: str = "") -> Iterator[ObjectInfo]:
        # Sizes come with the listing: no HEAD per object.
        return self._listed(self._listing(prefix, "S3Backend.list_info()"), delimiter=None)

    def list_dir_info(self, prefix: str = "") -> Iterator[ObjectInfo]:
        # Sizes come with the listing: no HEAD per entry.
        rel = prefix.rstrip("/")
        seen: set[str] = set()
        for info in self._listed(self._listing(prefix, "S3Backend.list_dir_info()", children=True), "/"):
            key = info.key.rstrip("/")
            if key and key != rel and key not in seen:
                seen.add(key)
                yield ObjectInfo(key, info.size, info.type, info.mtime, info.etag)

    def list_dir(self, prefix: str = "") -> Iterator[str]:
        cut = len(prefix.rstrip("/")) + 1 if prefix.rstrip("/") else 0
        for info in self.list_dir_info(prefix):
            yield info.key[cut:]
