"""The remote engine: one range reader over the S3, HTTP(S) and WebHDFS transports.

- :mod:`~gdsstore.engine.remote.reader`: range splitting, response verification, :class:`RemoteFile`.
- :mod:`~gdsstore.engine.remote.retry`: the one retry policy (attempts, backoff with jitter).
- :mod:`~gdsstore.engine.remote.http_transport`, :mod:`~gdsstore.engine.remote.s3`,
  :mod:`~gdsstore.engine.remote.webhdfs`: transports and their backends.
- :mod:`~gdsstore.engine.remote.writer`: buffered whole-object writes, uploaded on close.

URLs reach their transport through :mod:`gdsstore.engine.registry` (:func:`gdsstore.open`,
:func:`~gdsstore.engine.backend.backend_for`).

Examples:
    >>> import gdsstore, numpy as np                                        # doctest: +SKIP
    >>> with gdsstore.open("https://example.org/x.bin") as f:               # doctest: +SKIP
    ...     buf = np.empty(f.size, "u1"); f.read(buf)
"""

from __future__ import annotations

from gdsstore.engine.remote.reader import RemoteFile
from gdsstore.engine.remote.retry import RetryPolicy
from gdsstore.engine.remote.writer import RemoteWriteFile
from gdsstore.errors import RangeMismatchError, RangeNotSupportedError, RemoteIOError

__all__ = [
    "RangeMismatchError",
    "RangeNotSupportedError",
    "RemoteFile",
    "RemoteIOError",
    "RemoteWriteFile",
    "RetryPolicy",
]
