"""Backends: one object per storage root (a local directory, an S3 prefix, a web server, a WebHDFS
path) with the whole-object and listing operations that the adapters need.

Adapters (the zarr store, the fsspec filesystem) talk to a :class:`Backend`; they never see
transports. Keys are ``/``-separated paths relative to the backend's root, validated by
:func:`check_key` before any I/O, so nothing outside the root is ever read, written or deleted.

All methods block; async adapters run them through ``asyncio.to_thread``.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from gdsstore.engine import registry
from gdsstore.engine.file import BaseFile
from gdsstore.engine.keys import check_key
from gdsstore.engine.landing import MISSING_KEY, AddressTable, Alloc, BatchResult, Free, Landed, land_objects
from gdsstore.engine.pool import map_all
from gdsstore.engine.ranges import ByteRange, coalesce_ranges

__all__ = [
    "Backend", "BatchResult", "ByteRange", "ObjectInfo", "backend_for", "check_key", "coalesce_ranges",
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


def host_alloc(n: int) -> tuple[np.ndarray, None]:
    """A wave buffer in plain host memory (``alloc`` of :meth:`Backend.get_many`)."""
    return np.empty(n, dtype=np.uint8), None


def host_buffer(n: int) -> np.ndarray:
    """``n`` uninitialised bytes of host memory (``alloc`` of :meth:`Backend.get`)."""
    return np.empty(n, dtype=np.uint8)


class Backend(abc.ABC):
    """Storage under one root. Subclasses implement the abstract methods; the rest has defaults."""

    #: Can ``put``/``delete`` (a web server backend cannot).
    writable: bool = True
    #: Can ``list`` (a plain web server cannot).
    listable: bool = True
    #: Reads many keys in one wave of concurrent requests (:meth:`get_many`): the remote backends.
    waves: bool = False
    #: :meth:`land` can land on a GPU: local files through the bounce ring, remote waves copied in parts as
    #: they land (``gpu.wave_copy_bytes``).
    lands_on_device: bool = False
    #: The largest object of unknown size in the last wave, 0 before any; the next wave's room per object.
    room_hint: int = 0

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

    def get(self, key: str, alloc: Callable[[int], Any], byte_range: ByteRange | None = None) -> Any:
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

    def land(
        self, table: AddressTable, alloc: Alloc, free: Free, *, device: int | None = None, room: int | None = None,
        where: str = "land()",
    ) -> Landed:
        """Land ``table`` in one buffer from ``alloc`` (``free`` gives it back when the landing fails); callers
        use ``gdsstore.engine.landing.land``, which picks the memory. Here: one size lookup and one read
        per item (``land_objects``); local files and remote waves do better.

        Args:
            table: the items.
            alloc: ``alloc(nbytes) -> (uint8 array, owner)``.
            free: gives an owner back.
            device: land on that GPU (backends with :attr:`lands_on_device` only).
            room: bytes a wave sets aside for whole objects of unknown size.
            where: the caller, for messages.
        """
        return land_objects(self, table, alloc, free, where)

    def get_many(
        self,
        keys: Sequence[str],
        ranges: Sequence[ByteRange | None] | None,
        alloc: Alloc,
        free: Free = lambda owner: None,
        **options: Any,
    ) -> Landed:
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
            except MISSING_KEY:
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

    def list_dir_of_keys(self, prefix: str = "") -> Iterator[str]:
        """:meth:`list_dir` as a key-value store sees it: keys and prefixes of keys only. Object stores
        have no empty prefixes; a file system drops directories that hold no file (zarr's ``list_dir``)."""
        return self.list_dir(prefix)

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
