"""Many byte ranges of one open object, read with few engine reads: the one range reader that
both adapters use (``GDSStore.get_ranges``/``get_partial_values`` and the fsspec ``cat_ranges``).

Ranges closer than ``max_gap`` merge into one read (:func:`~gdsstore.engine.backend.coalesce_ranges`);
every read starts at once (``pread``: the engine's threads locally, concurrent requests remotely),
and each range comes back as its place in its read's buffer. The adapter chooses the memory
(``alloc``) and what a range becomes (a zarr ``Buffer`` view, ``bytes``).

Examples:
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
from typing import Any

from gdsstore.engine.backend import coalesce_ranges

__all__ = ["RangeRead", "start_range_reads"]

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
