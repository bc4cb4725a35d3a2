"""The file base class that :func:`gdsstore.open` returns: local files, remote readers and remote writers.

As kvikio's ``cufile.py`` ``CuFile``: ``closed``, ``fileno`` (where there is a descriptor), ``size``,
``read``/``pread`` and ``write``/``pwrite`` into host or device buffers, a context manager. A
subclass implements ``size``, the ``pread`` and/or ``pwrite`` its mode allows, and ``_close``; the
blocking calls, the mode checks and the closed-file errors live here once.

The writer contract lives here too, once for every writer (local temporary files, S3 and WebHDFS
uploads, the fsspec ``gds`` file): a writer publishes its bytes on a clean :meth:`BaseFile.close`
only; an exception or an interrupt (``KeyboardInterrupt``) discards them and leaves the old value
whole; a writer collected unclosed is discarded with a ``ResourceWarning`` naming it.
"""

from __future__ import annotations

import abc
import io
import sys
import warnings
from concurrent.futures import Future
from typing import Any, Self

__all__ = ["BaseFile", "WriteGuard"]


class WriteGuard:
    """When a writer may publish: the exception in flight when it was opened, compared at close.

    ``close()`` is often reached with no word of an error: fsspec's ``OpenFile.__exit__`` and
    pandas' ``try``/``finally`` both call a plain ``close()`` while the error that stopped the
    writing propagates. Python still knows it: :func:`sys.exception` is that error, in an
    ``except``, a ``finally`` or an ``__exit__``. An error raised after the open means the writing
    did not finish; one that was already being handled at the open (a writer opened inside an
    ``except`` block) does not count.

    Examples:
        >>> g = WriteGuard()
        >>> g.interrupted()
        False
        >>> try:
        ...     raise KeyboardInterrupt
        ... except KeyboardInterrupt:
        ...     g.interrupted()
        True
    """

    __slots__ = ("_at_open",)

    def __init__(self) -> None:
        self._at_open = sys.exception()

    def interrupted(self) -> bool:
        """Whether an exception raised since the open is being handled or propagating now."""
        now = sys.exception()
        return now is not None and now is not self._at_open


def warn_unclosed(kind: str, name: str) -> None:
    """The ``ResourceWarning`` of a writer collected unclosed (its bytes are discarded)."""
    warnings.warn(
        f"{kind}: {name!r} was opened for writing and never closed: its bytes are discarded, nothing "
        "was published (close it, or write inside a `with` block)",
        ResourceWarning,
        stacklevel=3,
    )


class BaseFile(abc.ABC):
    """A file object opened by :func:`gdsstore.open` for parallel reads/writes into host or device buffers.

    Writers (``"wb"``, ``"xb"``, ``"ab"``) publish on a clean :meth:`close` only: an exception
    inside the ``with`` block, or a ``close()`` reached while an exception raised since the open
    propagates (``try``/``finally``, fsspec, pandas), calls :meth:`discard` instead; a writer
    garbage-collected unclosed is discarded with a ``ResourceWarning``.

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
    #: Set by a writer once it is open (the last step of its ``__init__``): a clean close publishes its
    #: bytes, anything else discards them. Unset, a half-built file is never published or discarded.
    _guard: WriteGuard | None = None

    # -- what each file says of itself -----------------------------------------------------------------

    @property
    @abc.abstractmethod
    def url(self) -> str:
        """The file's URL, without secrets (``file:///...`` for a local file)."""

    @property
    @abc.abstractmethod
    def size(self) -> int:
        """Size of the file in bytes."""

    # -- from those and the mode -----------------------------------------------------------------------

    @property
    def name(self) -> str:
        """What error messages and ``repr`` call the file (its URL, or a local file's path)."""
        return self.url

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` has run (reads and writes then raise)."""
        return self._closed

    @property
    def readable(self) -> bool:
        """Whether the mode reads (every mode but a writer's ``"wb"``, ``"xb"`` and ``"ab"``)."""
        return self.mode not in ("wb", "xb", "ab")

    @property
    def writable(self) -> bool:
        """Whether the mode writes (every mode but ``"rb"``)."""
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
        """Close the file (once; later calls do nothing). A writer publishes what it wrote, unless an
        exception raised since it was opened is in flight: then it discards (:meth:`discard`)."""
        if self._closed:
            return
        if self._guard is not None and self._guard.interrupted():
            self.discard()
            return
        self._publish()

    def discard(self) -> None:
        """Close without publishing: a writer's bytes are dropped and the old value stays whole
        (a reader just closes). Once; later calls, and ``close()`` afterwards, do nothing."""
        if self._closed:
            return
        self._closed = True
        self._discard()

    def _publish(self) -> None:
        self._closed = True
        self._close()

    def _close(self) -> None:  # noqa: B027 - nothing to release by default
        """Release what the file holds and, for a writer, publish its bytes (called once, by :meth:`close`)."""

    def _discard(self) -> None:
        """Drop a writer's bytes and release what the file holds (called once, by :meth:`discard`)."""
        self._close()

    def _check_open(self, method: str) -> None:
        if self._closed:
            raise ValueError(f"{type(self).__name__}.{method}(): I/O operation on closed file {self.name!r}")

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        if exc_type is not None:  # the block did not finish: publish nothing
            self.discard()
        elif not self._closed:
            self._publish()  # the block finished: an exception handled around it is not ours

    def __del__(self) -> None:
        if self._guard is not None and not self._closed:
            warn_unclosed(type(self).__name__, self.name)
            self.discard()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r}, mode={self.mode!r})"
