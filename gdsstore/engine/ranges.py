"""The one byte-range type, and the one rule that coalesces ranges of an object into fewer reads.

:class:`ByteRange` is zarr's three kinds of byte request (``"range"`` [start, end), ``"offset"``
[start, EOF), ``"suffix"`` the last ``start`` bytes), clamped to an object by :meth:`ByteRange.resolve`.
:class:`RangeRequest` is the same type built from ``(offset, nbytes)``: an exact range, as the remote
reader asks a server for it.

Examples:
    >>> ByteRange("suffix", 10).resolve(100)
    (90, 10)
    >>> r = RangeRequest(10, 5)
    >>> r == ByteRange("range", 10, 15), isinstance(r, ByteRange), r.header
    (True, True, 'bytes=10-14')
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

__all__ = ["ByteRange", "RangeRequest", "coalesce_ranges"]


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
