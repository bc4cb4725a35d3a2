"""Page-cache helpers: how much of a file is resident (``mincore``) and dropping one file's pages
(``posix_fadvise(DONTNEED)``, no privileges needed), so cold-read benchmarks are honest.

:func:`resident_fraction` is what the policy asks before a large local read (cold reads are cut
differently): it maps the range without reading it and samples at most ``max_pages`` pages, so it
costs tens of microseconds whatever the size.

Examples:
    >>> import os, tempfile
    >>> p = os.path.join(tempfile.mkdtemp(), "f")
    >>> _ = open(p, "wb").write(b"x" * 10000)
    >>> resident(p).total_pages >= 3
    True
    >>> fd = os.open(p, os.O_RDONLY)
    >>> 0.0 <= resident_fraction(fd, 0, 10000) <= 1.0
    True
    >>> os.close(fd)
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import mmap
import os
from dataclasses import dataclass

import numpy as np

__all__ = ["Residency", "drop", "resident", "resident_fraction"]

_PAGE = mmap.PAGESIZE
#: Pages :func:`resident_fraction` looks at by default: 8 windows of 32 pages (128 KiB each with 4 KiB
#: pages), enough to tell a mostly cold range from a mostly cached one, at a small part of the cost of
#: every page of a large file (docs/performance.md).
_SAMPLE_WINDOWS = 8
_SAMPLE_PAGES = _SAMPLE_WINDOWS * 32


@dataclass(frozen=True)
class Residency:
    """Resident and total pages of a file."""

    resident_pages: int
    total_pages: int

    @property
    def fraction(self) -> float:
        return self.resident_pages / self.total_pages if self.total_pages else 1.0


@functools.cache
def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    return libc


def _count_resident(fd: int, offset: int, length: int, max_pages: int, where: str) -> tuple[int, int]:
    """(resident, examined) pages of ``fd``'s ``[offset, offset + length)``, sampling evenly spaced
    windows when the range has more than ``max_pages`` pages. Maps the range (nothing is read)."""
    libc = _libc()
    start = offset - offset % _PAGE  # mmap offsets are page-aligned
    span = offset + length - start
    pages = -(-span // _PAGE)
    addr = libc.mmap(None, span, mmap.PROT_READ, mmap.MAP_SHARED, fd, start)
    if addr in (None, ctypes.c_void_p(-1).value):
        err = ctypes.get_errno()
        raise OSError(err, f"{where}: mmap failed: {os.strerror(err)}")
    try:
        if pages <= max_pages:
            windows = [(0, pages)]
        else:
            count = min(_SAMPLE_WINDOWS, max_pages)
            width = max(1, max_pages // count)
            windows = [(i * (pages - width) // (count - 1) if count > 1 else 0, width) for i in range(count)]
        vec = np.zeros(sum(w for _, w in windows), dtype=np.uint8)
        pos = 0
        for first, width in windows:
            n_bytes = min(width * _PAGE, span - first * _PAGE)
            if libc.mincore(addr + first * _PAGE, n_bytes, vec.ctypes.data + pos) != 0:
                err = ctypes.get_errno()
                raise OSError(err, f"{where}: mincore failed: {os.strerror(err)}")
            pos += width
        return int(np.count_nonzero(vec & 1)), len(vec)
    finally:
        libc.munmap(addr, span)


def resident(path: str | os.PathLike[str]) -> Residency:
    """Pages of ``path`` currently in the page cache (via ``mmap`` + ``mincore``; nothing is read)."""
    size = os.stat(path).st_size
    pages = -(-size // _PAGE)
    if size == 0:
        return Residency(0, 0)
    fd = os.open(path, os.O_RDONLY)
    try:
        got, _ = _count_resident(fd, 0, size, pages, f"pagecache.resident({os.fspath(path)!r})")
        return Residency(got, pages)
    finally:
        os.close(fd)


def resident_fraction(fd: int, offset: int, length: int, *, max_pages: int = _SAMPLE_PAGES) -> float:
    """Fraction of ``[offset, offset + length)`` of open file ``fd`` that is in the page cache.

    Ranges longer than ``max_pages`` pages are sampled (evenly spaced windows), so the cost is
    bounded: one ``mmap``, at most 8 ``mincore`` calls, one ``munmap``.

    Args:
        fd: an open, readable file descriptor (regular file; the range must lie inside the file).
        offset: first byte of the range.
        length: bytes in the range; 0 gives 1.0 (nothing to read, nothing cold).
        max_pages: most pages examined.

    Returns:
        Resident pages over examined pages, from 0.0 (cold) to 1.0 (all cached).

    Raises:
        OSError: ``mmap`` or ``mincore`` failed (e.g. a file system that cannot be mapped).
    """
    if length <= 0:
        return 1.0
    got, examined = _count_resident(fd, offset, length, max(1, max_pages), "pagecache.resident_fraction()")
    return got / examined


def drop(path: str | os.PathLike[str]) -> Residency:
    """Ask the kernel to evict ``path``'s clean pages; returns the residency afterwards.

    Dirty pages are written back first (``fdatasync``), since DONTNEED skips them.
    """
    fd = os.open(path, os.O_RDONLY)
    try:
        try:
            os.fdatasync(fd)
        except OSError:
            pass
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)
    return resident(path)
