"""Backends: one object per storage root (a local directory, an S3 prefix, a web server, a WebHDFS
path) with the whole-object and listing operations that the adapters need.

Adapters (the zarr store, the fsspec filesystem) talk to a :class:`Backend`; they never see
transports. Keys are ``/``-separated paths relative to the backend's root, validated by
:func:`check_key` before any I/O, so nothing outside the root is ever read, written or deleted.

All methods block; async adapters run them through ``asyncio.to_thread``.
"""

from __future__ import annotations

import abc
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from gdsstore.engine import registry
from gdsstore.engine.file import BaseFile
from gdsstore.engine.pool import map_all
from gdsstore.engine.ranges import ByteRange, coalesce_ranges

__all__ = [
    "Backend", "BatchResult", "ByteRange", "ObjectInfo", "Wave", "backend_for", "check_key", "coalesce_ranges",
    "host_alloc", "host_buffer",
]


@dataclass(frozen=True)
class ObjectInfo:
    """What a backend knows about one key."""

    key: str
    size: int
    type: Literal["file", "directory"] = "file"
    mtime: float | None = None
    #: The object's version token where the server gives one (its ETag, else its Last-Modified header):
    #: a same-size rewrite changes it.
    etag: str | None = None


#: A backslash, a NUL byte, or an empty, ``.`` or ``..`` segment: one search instead of a split per key (a
#: read of 4,096 chunks checks 4,096 keys).
_BAD_KEY = re.compile(r"[\\\x00]|(?:^|/)\.{0,2}(?:/|$)")


def check_key(key: str, where: str) -> str:
    """Validate a relative key: no absolute paths, ``..``, ``.``, empty segments or NUL bytes.

    Raises:
        ValueError: naming ``where`` and the key.
    """
    if not isinstance(key, str):
        raise TypeError(f"{where}: key must be a str, got {type(key).__name__}")
    if key == "":
        return key
    if key.startswith("/") or _BAD_KEY.search(key.rstrip("/")):
        raise ValueError(f"{where}: invalid key {key!r}: keys are relative paths without '.', '..' or empty segments")
    return key


Alloc = Callable[[int], Any]


def host_alloc(n: int) -> tuple[np.ndarray, None]:
    """A wave buffer in plain host memory (``alloc`` of :meth:`Backend.get_many`)."""
    return np.empty(n, dtype=np.uint8), None


def host_buffer(n: int) -> np.ndarray:
    """``n`` uninitialised bytes of host memory (``alloc`` of :meth:`Backend.get`)."""
    return np.empty(n, dtype=np.uint8)


@dataclass
class Wave:
    """Many objects or byte ranges read together into one buffer (:meth:`Backend.get_many`).

    Attributes:
        host: ``uint8`` numpy array holding every item.
        offsets: ``int64`` array: where item ``i`` starts in ``host``.
        sizes: ``int64`` array: its length; ``-1``: missing (or failed, with ``errors="return"``).
        owner: what the caller's ``alloc`` returned beside the array (a pinned buffer to give back).
        errors: per item, the exception that failed it (``errors="return"`` only), else None.
        requests: how many requests the wave sent (retries not counted).
        split: makes :meth:`all_bytes` (``(host, offsets, sizes)`` → list); None: one copy after the other.
        etags: per key, the ETag every answer for it carried, where the transport saw them all (the native
            core: an object whose answers disagree fails the wave); a key absent: not known.
    """

    host: Any
    offsets: Any
    sizes: Any
    owner: Any = None
    errors: list[BaseException | None] | None = None
    requests: int = 0
    split: Callable[[Any, Any, Any], list[bytes | None]] | None = None
    etags: dict[str, str] = field(default_factory=dict)

    def view(self, i: int) -> Any:
        """Item ``i`` as a view of :attr:`host`, or None when missing or failed."""
        n = int(self.sizes[i])
        if n < 0:
            return None
        a = int(self.offsets[i])
        return self.host[a : a + n]

    def all_bytes(self) -> list[bytes | None]:
        """Every item as ``bytes`` (None: missing or failed): through :attr:`split` where the wave's
        transport gave one (the native core's copies on several threads), else one copy after the other."""
        if self.split is not None:
            return self.split(self.host, self.offsets, self.sizes)
        return [None if v is None else v.tobytes() for v in map(self.view, range(len(self.sizes)))]


class BatchResult:
    """Per item of a batch (:meth:`Backend.get_batch`, :meth:`Backend.put_batch`): its buffer (None:
    missing, or a write) and, where it failed, its error; one item's failure fails it alone."""

    __slots__ = ("bufs", "errors")

    def __init__(self, n: int) -> None:
        self.bufs: list[Any] = [None] * n
        #: item -> the exception that failed it.
        self.errors: dict[int, BaseException] = {}


class Backend(abc.ABC):
    """Storage under one root. Subclasses implement the abstract methods; the rest has defaults."""

    #: Can ``put``/``delete`` (a web server backend cannot).
    writable: bool = True
    #: Can ``list`` (a plain web server cannot).
    listable: bool = True
    #: Reads many keys in one wave of concurrent requests (:meth:`get_many`): the remote backends.
    waves: bool = False

    @property
    @abc.abstractmethod
    def url(self) -> str:
        """The root as a URL (``file:///...``, ``s3://bucket/prefix``); never holds secrets."""

    @abc.abstractmethod
    def open(self, key: str, mode: str = "rb") -> BaseFile:
        """An engine file object (``size``, ``read``/``pread``, ``write``/``pwrite``) for ``key``."""

    @abc.abstractmethod
    def info(self, key: str) -> ObjectInfo:
        """Size/type of ``key``. Raises FileNotFoundError."""

    def size(self, key: str) -> int:
        return self.info(key).size

    def exists(self, key: str) -> bool:
        try:
            self.info(key)
        except FileNotFoundError:
            return False
        return True

    def get(self, key: str, alloc: Alloc, byte_range: ByteRange | None = None) -> Any:
        """Read ``key`` (or a range of it) into a buffer from ``alloc(nbytes)``; returns the buffer.

        ``alloc`` decides host or device memory. Raises FileNotFoundError for a missing key.
        """
        with self.open(key, "rb") as f:
            size = f.size
            offset, nbytes = byte_range.resolve(size) if byte_range else (0, size)
            buf = alloc(nbytes)
            if nbytes:
                got = f.read(buf, nbytes, offset)
                if got != nbytes:
                    raise OSError(f"{type(self).__name__}.get(): short read of {key!r}: {got} of {nbytes} bytes")
            return buf

    def get_many(
        self,
        keys: Sequence[str],
        ranges: Sequence[ByteRange | None] | None,
        alloc: Callable[[int], tuple[Any, Any]],
        free: Callable[[Any], None] = lambda owner: None,
        **options: Any,
    ) -> Wave:
        """Read ``keys`` (whole, or ``ranges[i]`` of each, zarr's clamping) into one buffer from
        ``alloc(nbytes) -> (uint8 array, owner)``, in one wave of concurrent requests with no size
        lookup (backends with :attr:`waves`; see ``gdsstore.engine.remote.wave.read_wave`` for
        ``options``: ``expect``, ``exact``, ``max_gap``, ``errors``...).

        Raises:
            NotImplementedError: a backend without waves (local files use the batched ``preadv``).
        """
        raise NotImplementedError(f"{type(self).__name__}.get_many(): no waves here (waves=False)")

    def get_batch(self, keys: Sequence[str], ranges: Sequence[ByteRange | None]) -> BatchResult:
        """Read many keys (whole, or ``ranges[i]`` of each, zarr's clamping) into host memory as one
        batch: the chunk reads of one zarr selection. Backends with :attr:`waves` send one wave
        (items are views of its one buffer); the local backend reads the files on the engine's
        threads (``gdsstore.engine.batch.read_objects``); others read one key after another.
        """
        out = BatchResult(len(keys))
        if self.waves:
            w = self.get_many(keys, ranges, host_alloc, errors="return", where=f"{type(self).__name__}.get_batch()")
            for i in range(len(keys)):
                exc = w.errors[i] if w.errors is not None else None
                if exc is not None:
                    out.errors[i] = exc
                else:
                    out.bufs[i] = w.view(i)
            return out
        for i, (key, br) in enumerate(zip(keys, ranges, strict=True)):
            try:
                out.bufs[i] = self.get(key, host_buffer, br)
            except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
                pass
            except Exception as exc:
                out.errors[i] = exc
        return out

    def put_batch(self, keys: Sequence[str], bufs: Sequence[Any], exclusive: Sequence[bool]) -> BatchResult:
        """:meth:`put` of many keys at once (each atomic on its own), on the engine pool; the
        result holds each failed item's error."""
        out = BatchResult(len(keys))

        def put(i: int) -> None:
            try:
                self.put(keys[i], bufs[i], exclusive=exclusive[i])
            except Exception as exc:
                out.errors[i] = exc

        map_all(put, range(len(keys)))
        return out

    @abc.abstractmethod
    def put(self, key: str, buf: Any, *, exclusive: bool = False) -> None:
        """Write the whole object atomically (readers see old or new, never a mix).

        ``exclusive``: fail with FileExistsError if ``key`` exists (and write nothing).
        """

    @abc.abstractmethod
    def delete(self, key: str) -> None:
        """Delete ``key``; a missing key is not an error."""

    def delete_prefix(self, prefix: str) -> None:
        """Delete every key under ``prefix`` (a directory-like prefix)."""
        for k in list(self.list(prefix)):
            self.delete(k)

    @abc.abstractmethod
    def list(self, prefix: str = "") -> Iterator[str]:
        """Every key starting with ``prefix`` (recursively), relative to the root."""

    @abc.abstractmethod
    def list_dir(self, prefix: str = "") -> Iterator[str]:
        """Names of the immediate children (keys and "directories") of ``prefix``."""

    def list_info(self, prefix: str = "") -> Iterator[ObjectInfo]:
        """:meth:`list` with sizes (every key under ``prefix``); object stores take them from the listing."""
        for key in self.list(prefix):
            try:
                yield self.info(key)
            except FileNotFoundError:  # removed since the listing
                continue

    def list_dir_info(self, prefix: str = "") -> Iterator[ObjectInfo]:
        """:meth:`list_dir` with sizes and types (keys relative to the root). Object stores override
        it to take them from the listing itself instead of one size lookup per entry."""
        base = prefix.rstrip("/")
        for name in self.list_dir(prefix):
            key = f"{base}/{name.rstrip('/')}" if base else name.rstrip("/")
            try:
                yield self.info(key)
            except FileNotFoundError:  # a prefix on an object store, or removed meanwhile
                yield ObjectInfo(key, 0, "directory")

    def mkdir(self, key: str) -> None:  # noqa: B027 - object stores have no directories
        """Create a directory (no-op where directories are implicit)."""

    def close(self) -> None:  # noqa: B027
        """Release pooled connections."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.url!r})"


def backend_for(root: str, storage_options: dict[str, Any] | None = None, *, read_only: bool = False) -> Backend:
    """The backend for a local path or URL root, found by its scheme (:mod:`gdsstore.engine.registry`).

    Raises:
        ValueError: an unknown scheme. TypeError: options the backend does not take.
    """
    scheme, rest = registry.split_url(root, "backend_for()")
    return registry.get_backend_factory(scheme)(rest, dict(storage_options or {}))
