"""S3 objects under ``s3://bucket/prefix`` as a backend: reads and writes through the native core,
listing, HEAD and DELETE through botocore (its resolved client, one retry policy)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from gdsstore.engine.backend import Backend, BatchResult, ObjectInfo, check_key
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
        head = self._client.call("head_object", f"HEAD s3://{self.bucket}/{full}", Bucket=self.bucket, Key=full)
        mtime = head.get("LastModified")
        return ObjectInfo(key, int(head["ContentLength"]), "file", mtime.timestamp() if mtime else None, head.get("ETag"))

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
        self._client.call("delete_object", f"DELETE s3://{self.bucket}/{full}", Bucket=self.bucket, Key=full)

    def delete_prefix(self, prefix: str) -> None:
        full = self._full(prefix, "S3Backend.delete_prefix()")
        if full and not full.endswith("/"):
            full += "/"
        keys = [self._abs(k) for k, _ in self._listed(full, delimiter=None)]
        for i in range(0, len(keys), 1000):  # DeleteObjects takes at most 1000 keys
            batch = [{"Key": k} for k in keys[i : i + 1000]]
            self._client.call(
                "delete_objects", f"DELETE s3://{self.bucket}/{full}*", Bucket=self.bucket,
                Delete={"Objects": batch, "Quiet": True},
            )

    def _abs(self, rel: str) -> str:
        return f"{self.prefix}/{rel}" if self.prefix else rel

    def _listing(self, prefix: str, where: str, children: bool = False) -> str:
        """The full prefix of a listing of the keys under ``prefix`` (``children``: of its immediate children)."""
        if prefix:
            check_key(prefix, where)
        rel = prefix if not children else prefix.rstrip("/") + "/" if prefix.rstrip("/") else ""
        return self._abs(rel) if rel else (self.prefix + "/" if self.prefix else "")

    def _listed(self, full_prefix: str, delimiter: str | None) -> Iterator[tuple[str, int | None]]:
        """``(key, size)`` for objects and ``(prefix/, None)`` for common prefixes (with ``delimiter``) under
        ``full_prefix``, relative to the root."""
        base = f"{self.prefix}/" if self.prefix else ""
        token: str | None = None
        while True:
            params: dict[str, Any] = {"Bucket": self.bucket, "Prefix": full_prefix}
            if delimiter:
                params["Delimiter"] = delimiter
            if token:
                params["ContinuationToken"] = token
            page = self._client.call("list_objects_v2", f"LIST s3://{self.bucket}/{full_prefix}", **params)
            for obj in page.get("Contents", []):
                yield obj["Key"][len(base) :], int(obj.get("Size", 0))
            for cp in page.get("CommonPrefixes", []):
                yield cp["Prefix"][len(base) :], None
            if not page.get("IsTruncated"):
                return
            token = page.get("NextContinuationToken")

    def list(self, prefix: str = "") -> Iterator[str]:
        for key, _ in self._listed(self._listing(prefix, "S3Backend.list()"), delimiter=None):
            yield key

    def list_info(self, prefix: str = "") -> Iterator[ObjectInfo]:
        # Sizes come with the listing: no HEAD per object.
        for key, size in self._listed(self._listing(prefix, "S3Backend.list_info()"), delimiter=None):
            yield ObjectInfo(key, size or 0, "file")

    def list_dir_info(self, prefix: str = "") -> Iterator[ObjectInfo]:
        # Sizes come with the listing: no HEAD per entry.
        rel = prefix.rstrip("/")
        seen: set[str] = set()
        for k, size in self._listed(self._listing(prefix, "S3Backend.list_dir_info()", children=True), "/"):
            key = k.rstrip("/")
            if key and key != rel and key not in seen:
                seen.add(key)
                yield ObjectInfo(key, size or 0, "file" if size is not None else "directory")

    def list_dir(self, prefix: str = "") -> Iterator[str]:
        cut = len(prefix.rstrip("/")) + 1 if prefix.rstrip("/") else 0
        for info in self.list_dir_info(prefix):
            yield info.key[cut:]
