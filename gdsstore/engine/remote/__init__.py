"""The remote engine: the range reader (:mod:`~gdsstore.engine.remote.reader`), waves
(:mod:`~gdsstore.engine.remote.wave`) through the native core (:mod:`~gdsstore.engine.remote.core`), and the
S3, HTTP(S) and WebHDFS transports (reached through :mod:`gdsstore.engine.registry`); map: docs/design.md."""

from __future__ import annotations

from gdsstore.engine.remote.reader import RemoteFile
from gdsstore.engine.remote.retry import RetryPolicy
from gdsstore.engine.remote.writer import RemoteWriteFile
from gdsstore.errors import RangeMismatchError, RangeNotSupportedError, RemoteIOError

__all__ = [
    "RangeMismatchError", "RangeNotSupportedError", "RemoteFile", "RemoteIOError", "RemoteWriteFile", "RetryPolicy",
]
