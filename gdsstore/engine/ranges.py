"""The one byte-range type, and the one rule that coalesces ranges of an object into fewer reads.

:class:`ByteRange` is zarr's three kinds of byte request (``"range"`` [start, end), ``"offset"``
[start, EOF), ``"suffix"`` the last ``start`` bytes), clamped to an object by :meth:`ByteRange.resolve`.
:class:`RangeRequest` is the same type built from ``(offset, nbytes)``: an exact range, as the remote
reader asks a server for it.

:func:`start_range_reads` reads many byte ranges of one open object with few engine reads: the one range
reader that both adapters use (``GDSStore.get_ranges``/``get_partial_values`` and the fsspec ``cat_ranges``).

Ranges closer than ``max_gap`` merge into one read (:func:`coalesce_ranges`);
every read starts at once (``pread``: the engine's threads locally, concurrent requests remotely),
and each range comes back as its place in its read's buffer. The adapter chooses the memory
(``alloc``) and what a range becomes (a zarr ``Buffer`` view, ``bytes``).

Examples:
    >>> ByteRange("suffix", 10).resolve(100)
    (90, 10)
    >>> r = RangeRequest(10, 5)
    >>> r == ByteRange("range", 10, 15), isinstance(r, ByteRange), r.header
    (True, True, 'bytes=10-14')
    >>> import os, tempfile, gdsstore
    >>> p = os.path.join(tempfile.mkdtemp(), "x.bin")
    >>> with open(p, "wb") as out:
    ...     _ = out.write(bytes(range(100)))
    >>> with gdsstore.open(p) as f:
    ...     reads = start_range_reads(f, [(10, 2), (14, 2), (90, 5)], bytearray, max_gap=8, max_bytes=1 << 20)
    ...     [(r.start, r.nbytes, r.members) for r in reads]
    [(10, 6, [(0, 10, 2), (1, 14, 2)]), (90, 5, [(2, 90, 5)])]
    >>> [bytes(r.result()[r.members[0][1] - r.start :][:2]) for r in reads]
    [b'\\n\\x0b', b'Z[']
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["ByteRange", "RangeRead", "RangeRequest", "coalesce_ranges", "start_range_reads"]


@dataclass(frozen=True, eq=False)
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

    @property
    def offset(self) -> int:
        """First byte of a ``"range"`` or ``"offset"`` selection."""
        if self.kind == "suffix":
            raise ValueError(f"{self!r}: a suffix has no offset until resolved against a size")
        return self.start

    @property
    def nbytes(self) -> int:
        """Length of a ``"range"`` selection."""
        if self.kind != "range" or self.end is None:
            raise ValueError(f"{self!r}: only a 'range' selection has a length before it is resolved")
        return self.end - self.start

    @property
    def header(self) -> str:
        """The HTTP ``Range`` header value: ``bytes=first-last`` (inclusive), ``bytes=first-``, ``bytes=-n``."""
        if self.kind == "offset":
            return f"bytes={self.start}-"
        if self.kind == "suffix":
            return f"bytes=-{self.start}"
        return f"bytes={self.start}-{self.nbytes + self.start - 1}"

    def _key(self) -> tuple[str, int, int | None]:
        return (self.kind, self.start, self.end)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ByteRange) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())


class RangeRequest(ByteRange):
    """Bytes ``[offset, offset + nbytes)`` of one object: a ``ByteRange("range", offset, offset + nbytes)``."""

    def __init__(self, offset: int, nbytes: int) -> None:
        super().__init__("range", offset, offset + nbytes)

    def __repr__(self) -> str:
        return f"RangeRequest(offset={self.start}, nbytes={self.nbytes})"


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


@dataclass
class RangeRead[T]:
    """One engine read covering one or more requested ranges.

    Attributes:
        start: offset of the read in the object.
        nbytes: its length.
        members: the ranges it serves, ``(request index, offset, nbytes)``, offsets in the object.
        buffer: what ``alloc(nbytes)`` returned (the read lands in ``target(buffer)``).
    """

    start: int
    nbytes: int
    members: list[tuple[int, int, int]]
    buffer: T
    _future: Any = field(default=None, repr=False)
    _where: str = field(default="read", repr=False)

    def result(self) -> T:
        """Wait for the read; returns :attr:`buffer`. Raises OSError on a short read."""
        got = self._future.result() if self._future is not None else 0
        if got != self.nbytes:
            raise OSError(f"{self._where}: short read: {got} of {self.nbytes} bytes at offset {self.start}")
        return self.buffer

    def slices(self) -> list[tuple[int, int, int]]:
        """``(request index, start, stop)`` of each member range within :attr:`buffer`."""
        return [(i, off - self.start, off - self.start + n) for i, off, n in self.members]


def _identity(buf: Any) -> Any:
    return buf


def start_range_reads[T](
    f: Any,
    spans: Sequence[tuple[int, int]],
    alloc: Callable[[int], T],
    *,
    max_gap: int,
    max_bytes: int,
    target: Callable[[T], Any] = _identity,
    where: str = "start_range_reads()",
) -> list[RangeRead[T]]:
    """Start the reads of ``spans`` (``(offset, nbytes)``, already clamped to the object) of ``f``.

    Args:
        f: an open engine file (``pread(buf, nbytes, offset)`` returning a future of the count).
        spans: the requested ranges, in request order.
        alloc: ``alloc(nbytes)``: the memory of one read (host or device, as the adapter wants).
        max_gap: ranges at most this many bytes apart join one read.
        max_bytes: a joined read stays at most this long (a single longer range is read alone).
        target: the writable buffer inside what ``alloc`` returned (default: the object itself).
        where: the caller and object, for error messages (``"GDSStore.get_ranges('c/0')"``).

    Returns:
        The reads, in offset order, already running; ``result()`` waits for one. Empty ranges cost
        no read.
    """
    reads: list[RangeRead[T]] = []
    for start, end, group in coalesce_ranges([(off, off + n) for off, n in spans], max_gap, max_bytes):
        nbytes = end - start
        buf = alloc(nbytes)
        fut = f.pread(target(buf), nbytes, start) if nbytes else None
        reads.append(RangeRead(start, nbytes, [(i, *spans[i]) for i in group], buf, fut, where))
    return reads
