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

__all__ = ["Backend", "ByteRange", "ObjectInfo", "backend_for", "check_key", "coalesce_ranges"]


@dataclass(frozen=True)
class ObjectInfo:
    """What a backend knows about one key."""

    key: str
    size: int
    type: Literal["file", "directory"] = "file"
    mtime: float | None = None


@dataclass(frozen=True)
class ByteRange:
    """A byte selection: ``kind`` "range" → [start, end); "offset" → [start, EOF); "suffix" → last ``start`` bytes."""

    kind: Literal["range", "offset", "suffix"]
    start: int
    end: int | None = None

    def resolve(self, size: int) -> tuple[int, int]:
        """Clamp to an object of ``size`` bytes: returns ``(offset, nbytes)`` (zarr's clamping contract)."""
        if self.kind == "range":
            assert self.end is not None
            a = min(self.start, size)
            return a, max(0, min(self.end, size) - a)
        if self.kind == "offset":
            a = min(self.start, size)
            return a, size - a
        n = min(self.start, size)
        return size - n, n


def coalesce_ranges(
    ranges: Sequence[tuple[int, int]], max_gap: int, max_bytes: int
) -> list[tuple[int, int, list[int]]]:
    """Group ``(start, end)`` byte ranges of one object into reads: ``[(start, end, member indices)]``.

    Ranges closer than ``max_gap`` bytes join one read while it stays within ``max_bytes``; the one
    rule behind GDSStore.get_ranges, the fsspec filesystem's cat_ranges and the pipeline's shard reads.

    Examples:
        >>> coalesce_ranges([(100, 110), (0, 10), (12, 20)], max_gap=4, max_bytes=1 << 20)
        [(0, 20, [1, 2]), (100, 110, [0])]
    """
    groups: list[tuple[int, int, list[int]]] = []
    for k in sorted(range(len(ranges)), key=lambda k: ranges[k][0]):
        a, b = ranges[k]
        if groups:
            ga, gb, members = groups[-1]
            if a - gb <= max_gap and max(b, gb) - ga <= max_bytes:
                members.append(k)
                groups[-1] = (ga, max(gb, b), members)
                continue
        groups.append((a, b, [k]))
    return groups


def check_key(key: str, where: str) -> str:
    """Validate a relative key: no absolute paths, ``..``, ``.``, empty segments or NUL bytes.

    Raises:
        ValueError: naming ``where`` and the key.
    """
    if not isinstance(key, str):
        raise TypeError(f"{where}: key must be a str, got {type(key).__name__}")
    if key == "":
        return key
    bad = (
        key.startswith("/")
        or "\\" in key
        or "\x00" in key
        or any(seg in ("", ".", "..") for seg in key.rstrip("/").split("/"))
    )
    if bad:
        raise ValueError(f"{where}: invalid key {key!r}: keys are relative paths without '.', '..' or empty segments")
    return key


Alloc = Callable[[int], Any]


class Backend(abc.ABC):
    """Storage under one root. Subclasses implement the abstract methods; the rest has defaults."""

    #: Can ``put``/``delete`` (a web server backend cannot).
    writable: bool = True
    #: Can ``list`` (a plain web server cannot).
    listable: bool = True

    @property
    @abc.abstractmethod
    def url(self) -> str:
        """The root as a URL (``file:///...``, ``s3://bucket/prefix``); never holds secrets."""

    @abc.abstractmethod
    def open(self, key: str, mode: str = "rb") -> Any:
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
    """The backend for a local path or URL root."""
    from gdsstore.engine import split_url

    scheme, rest = split_url(root)
    opts = dict(storage_options or {})
    if scheme == "file":
        from gdsstore.engine.localfs import LocalBackend

        return LocalBackend.from_storage_options(rest, opts)
    from gdsstore.engine import remote

    backend: Backend = remote.remote_backend(rest, opts)  # type: ignore[attr-defined,unused-ignore]
    return backend
