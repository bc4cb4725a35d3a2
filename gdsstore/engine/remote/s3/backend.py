"""S3 objects under ``s3://bucket/prefix`` as a backend: every request (reads, writes, HEAD, LIST, DELETE)
through the native core, on the store of the bucket built from botocore's resolution."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from gdsstore.engine.backend import BatchResult, ObjectInfo, check_key
from gdsstore.engine.remote import core
from gdsstore.engine.remote.keys import check_remote_key
from gdsstore.engine.remote.s3.client import get_s3_client, parse_s3_url
from gdsstore.engine.remote.s3.source import S3Source
from gdsstore.engine.remote.s3.upload import s3_upload, s3_upload_many
from gdsstore.engine.remote.wave import WaveReads

__all__ = ["S3Backend"]


class S3Backend(WaveReads):
    """Objects under ``s3://bucket/prefix``: keys are relative to the prefix."""

    route = "s3"

    def __init__(self, root: str, storage_options: dict[str, Any] | None = None) -> None:
        self.bucket, prefix = parse_s3_url(root)
        self.prefix = prefix.strip("/")
        self._head = f"{self.prefix}/" if self.prefix else ""  # what every object key under the root starts with
        self.client = get_s3_client(dict(storage_options or {}))
        self.core = self.client.core_root(self.bucket)

    @property
    def url(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}".rstrip("/")

    def _full(self, rel: str, where: str | None = None) -> str:
        """The object key of ``rel`` (checked as a key where ``where`` names the caller)."""
        if where is not None:
            check_remote_key(rel, where)
        return self._head + rel

    def source(self, key: str, where: str) -> S3Source:
        # docstring inherited
        return S3Source(self.client, self.bucket, self.core_path(key, where))

    def core_path(self, key: str, where: str) -> str:
        """The object key of ``key`` (``FileNotFoundError``: it names no object)."""
        full = self._full(key, where)
        if not full or full.endswith("/"):
            raise FileNotFoundError(f"{where}: {key!r} is not an object key")
        return full

    def plain_object_paths(self, keys: Sequence[str]) -> list[str] | None:
        # docstring inherited
        if not all(key and key[-1] != "/" for key in keys):  # core_path refuses these: no object key
            return None
        head = self._head
        return [head + key for key in keys]

    def open(self, key: str, mode: str = "rb") -> Any:
        from gdsstore.engine.remote.reader import RemoteFile
        from gdsstore.engine.remote.writer import RemoteWriteFile, check_remote_mode

        where = "S3Backend.open()"
        full = self._full(key, where)
        if check_remote_mode(mode, where) == "rb":
            return RemoteFile(S3Source(self.client, self.bucket, full))
        return RemoteWriteFile(f"s3://{self.bucket}/{full}", lambda data, dev: s3_upload(self.client, self.bucket, full, data, device=dev))

    def info(self, key: str) -> ObjectInfo:
        full = self.core_path(key, "S3Backend.info()")
        _, size, mtime_ns, etag, _ = core.head(self.core, full)
        return ObjectInfo(key, size, "file", mtime_ns / 1e9 if mtime_ns else None, etag)

    def put(self, key: str, buf: Any, *, exclusive: bool = False) -> None:
        s3_upload(self.client, self.bucket, self._full(key, "S3Backend.put()"), buf, exclusive=exclusive)

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
        errs = s3_upload_many(self.client, self.bucket, fulls, [bufs[i] for i in ok], [exclusive[i] for i in ok])
        for i, err in zip(ok, errs, strict=True):
            if err is not None:
                out.errors[i] = err
        return out

    def delete(self, key: str) -> None:
        core.delete_objects(self.core, [self._full(key, "S3Backend.delete()")])

    def delete_prefix(self, prefix: str) -> None:
        full = self._full(prefix, "S3Backend.delete_prefix()")
        if full and not full.endswith("/"):
            full += "/"
        objects, _ = core.list_objects(self.core, full)
        core.delete_objects(self.core, [row[0] for row in objects])

    def _listed(self, prefix: str, where: str, children: bool = False) -> Iterator[ObjectInfo]:
        """The objects under ``prefix`` (sizes, mtimes and ETags from the listing: no HEAD per object) and, for
        its immediate ``children``, the common prefixes (type ``"directory"``); keys relative to the root."""
        if prefix:
            check_key(prefix, where)
        rel = prefix if not children else prefix.rstrip("/") + "/" if prefix.rstrip("/") else ""
        full = self._full(rel) if rel else self._head
        cut = len(self._head)
        objects, prefixes = core.list_objects(self.core, full, "/" if children else None)
        for key, size, mtime_ns, etag, _ in objects:
            yield ObjectInfo(key[cut:], size, "file", mtime_ns / 1e9 if mtime_ns else None, etag)
        for p in prefixes:
            yield ObjectInfo(p[cut:], 0, "directory")

    def list(self, prefix: str = "") -> Iterator[str]:
        for info in self._listed(prefix, "S3Backend.list()"):
            yield info.key

    def list_info(self, prefix: str = "") -> Iterator[ObjectInfo]:
        return self._listed(prefix, "S3Backend.list_info()")

    def list_dir_info(self, prefix: str = "") -> Iterator[ObjectInfo]:
        rel = prefix.rstrip("/")
        seen: set[str] = set()
        for info in self._listed(prefix, "S3Backend.list_dir_info()", children=True):
            key = info.key.rstrip("/")
            if key and key != rel and key not in seen:
                seen.add(key)
                yield ObjectInfo(key, info.size, info.type, info.mtime, info.etag)

    def list_dir(self, prefix: str = "") -> Iterator[str]:
        cut = len(prefix.rstrip("/")) + 1 if prefix.rstrip("/") else 0
        for info in self.list_dir_info(prefix):
            yield info.key[cut:]
