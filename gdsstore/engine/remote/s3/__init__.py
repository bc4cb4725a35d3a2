"""The S3 transport: botocore resolves the configuration and credentials (:mod:`.client`); the native core
sends every request (:mod:`.source`, :mod:`.upload`, and HEAD, LIST and DELETE of :mod:`.backend`, the backend
over ``s3://bucket/prefix``)."""

from __future__ import annotations

from gdsstore.engine.remote.s3.backend import S3Backend
from gdsstore.engine.remote.s3.client import S3Client, S3Target, get_s3_client, parse_s3_url
from gdsstore.engine.remote.s3.source import S3Source
from gdsstore.engine.remote.s3.upload import s3_upload, s3_upload_many

__all__ = [
    "S3Backend", "S3Client", "S3Source", "S3Target", "get_s3_client", "parse_s3_url", "s3_upload", "s3_upload_many",
]
