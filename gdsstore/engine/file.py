"""The file base class that :func:`gdsstore.open` returns: local files, remote readers and remote writers.

As kvikio's ``cufile.py`` ``CuFile``: ``closed``, ``fileno`` (where there is a descriptor), ``size``,
``read``/``pread`` and ``write``/``pwrite`` into host or device buffers, a context manager. A
subclass implements ``size``, the ``pread`` and/or ``pwrite`` its mode allows, and ``_close``; the
blocking calls, the mode checks and the closed-file errors live here once.
"""

from __future__ import annotations

import abc
import io
from concurrent.futures import Future
from typing import Any, Self

__all__ = ["BaseFile"]


class BaseFile(abc.ABC):
    """A file object opened by :func:`gdsstore.open` for parallel reads/writes into host or device buffers.

    Examples:
        >>> import gdsstore, numpy as np, os, tempfile
        >>> p = os.path.join(tempfile.mkdtemp(), "x.bin")
        >>> with gdsstore.open(p, "wb") as f:
        ...     isinstance(f, BaseFile), f.write(np.arange(3, dtype="u1"))
        (True, 3)
        >>> f.closed
        True
    """

    #: ``"rb"``, ``"wb"``, ``"r+b"``...
    mode: str = "rb"
    _closed: bool = False

    @property
    @abc.abstractmethod
    def url(self) -> str:
        """The file's URL, without secrets (``file:///...`` for a local file)."""

    @property
    def name(self) -> str:
        """What error messages and ``repr`` call the file (its URL, or a local file's path)."""
        return self.url

    @property
    @abc.abstractmethod
    def size(self) -> int:
        """Size of the file in bytes."""

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def readable(self) -> bool:
        return self.mode != "wb"

    @property
    def writable(self) -> bool:
        return self.mode != "rb"

    def fileno(self) -> int:
        """The OS file descriptor, where the file has one (local files)."""
        raise io.UnsupportedOperation(f"{type(self).__name__}.fileno(): {self.name!r} has no file descriptor")

    def pread(self, buf: Any, size: int | None = None, offset: int = 0) -> Future[int]:
        """Start reading ``size`` bytes (default: the buffer's size) at ``offset`` into ``buf``.

        Returns a future of the number of bytes read: fewer than ``size`` only at the end of the file.
        """
        raise PermissionError(f"{type(self).__name__}.pread(): {self.name!r} is open write-only (mode {self.mode!r})")

    def pwrite(self, buf: Any, size: int | None = None, offset: int = 0) -> Future[int]:
        """Start writing ``size`` bytes (default: all) of ``buf`` at ``offset``; a future of bytes written."""
        raise PermissionError(f"{type(self).__name__}.pwrite(): {self.name!r} is open read-only (mode {self.mode!r})")

    def read(self, buf: Any, size: int | None = None, offset: int = 0) -> int:
        """Blocking :meth:`pread`; returns the number of bytes read."""
        return self.pread(buf, size, offset).result()

    def write(self, buf: Any, size: int | None = None, offset: int = 0) -> int:
        """Blocking :meth:`pwrite`; returns the number of bytes written."""
        return self.pwrite(buf, size, offset).result()

    def close(self) -> None:
        """Close the file (once; later calls do nothing)."""
        if self._closed:
            return
        self._closed = True
        self._close()

    def _close(self) -> None:  # noqa: B027 - nothing to release by default
        """Release what the file holds (called once, by :meth:`close`)."""

    def _check_open(self, method: str) -> None:
        if self._closed:
            raise ValueError(f"{type(self).__name__}.{method}(): I/O operation on closed file {self.name!r}")

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r}, mode={self.mode!r})"
