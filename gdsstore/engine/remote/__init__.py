"""The remote engine: one range reader over the S3, HTTP(S) and WebHDFS transports."""

from __future__ import annotations

from typing import Any

__all__ = ["open_remote"]


def open_remote(url: str, mode: str = "rb", **storage_options: Any) -> Any:
    """Open ``url`` (s3://, http(s)://, webhdfs://) through its transport."""
    raise NotImplementedError(f"gdsstore.open(): remote URLs are not implemented yet: {url!r}")
