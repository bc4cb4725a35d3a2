"""The remote engine: one range reader over the S3, HTTP(S) and WebHDFS transports.

:mod:`~gdsstore.engine.remote.reader` splits a read into ranges and verifies every answer; waves of many
objects are :mod:`~gdsstore.engine.remote.wave`'s, sent by the native core (:mod:`~gdsstore.engine.remote.core`);
:mod:`~gdsstore.engine.remote.retry` is the one retry policy; :mod:`~gdsstore.engine.remote.writer` buffers
whole-object writes, uploaded on close. URLs reach their transport (:mod:`~gdsstore.engine.remote.http_transport`,
:mod:`~gdsstore.engine.remote.s3`, :mod:`~gdsstore.engine.remote.webhdfs`) through :mod:`gdsstore.engine.registry`.
"""

from __future__ import annotations

from gdsstore.engine.remote.reader import RemoteFile
from gdsstore.engine.remote.retry import RetryPolicy
from gdsstore.engine.remote.writer import RemoteWriteFile
from gdsstore.errors import RangeMismatchError, RangeNotSupportedError, RemoteIOError

__all__ = [
    "RangeMismatchError", "RangeNotSupportedError", "RemoteFile", "RemoteIOError", "RemoteWriteFile", "RetryPolicy",
]
