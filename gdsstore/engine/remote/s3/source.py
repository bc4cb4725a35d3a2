"""One S3 object as :class:`~gdsstore.engine.remote.reader.RemoteFile` reads it: through the native core."""

from __future__ import annotations

from gdsstore.engine.remote import core
from gdsstore.engine.remote.s3.client import S3Client

__all__ = ["S3Source"]


class S3Source(core.CoreSource):
    """One S3 object: its size, ETag (and version) from a first answer of the core, then its ranges, each
    asked with ``If-Match`` on that ETag, or of that version (``versionId``) where the client is
    ``version_aware``: an object replaced meanwhile is still read whole, as it was opened."""

    def __init__(self, client: S3Client, bucket: str, key: str) -> None:
        if not key or key.endswith("/"):
            raise ValueError(f"S3: no object key in s3://{bucket}/{key}")
        super().__init__(client.core_root(bucket), key, f"s3://{bucket}/{key}", route="s3", scheme="s3")
        self.bucket = bucket
        self.key = key
        self.pin_version = client.version_aware
