"""Page-cache helpers: how much of a file is resident (``mincore``) and dropping one file's pages
(``posix_fadvise(DONTNEED)``, no privileges needed), so cold-read benchmarks are honest.

Examples:
    >>> import os, tempfile
    >>> p = os.path.join(tempfile.mkdtemp(), "f")
    >>> _ = open(p, "wb").write(b"x" * 10000)
    >>> resident(p).total_pages >= 3
    True
"""

from __future__ import annotations

import ctypes
import ctypes.util
import mmap
import os
from dataclasses import dataclass

__all__ = ["Residency", "drop", "resident"]

_PAGE = mmap.PAGESIZE


@dataclass(frozen=True)
class Residency:
    """Resident and total pages of a file."""

    resident_pages: int
    total_pages: int

    @property
    def fraction(self) -> float:
        return self.resident_pages / self.total_pages if self.total_pages else 1.0


def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    return libc


def resident(path: str | os.PathLike[str]) -> Residency:
    """Pages of ``path`` currently in the page cache (via ``mmap`` + ``mincore``; nothing is read)."""
    size = os.stat(path).st_size
    pages = -(-size // _PAGE)
    if size == 0:
        return Residency(0, 0)
    libc = _libc()
    fd = os.open(path, os.O_RDONLY)
    try:
        addr = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        if addr in (None, ctypes.c_void_p(-1).value):
            err = ctypes.get_errno()
            raise OSError(err, f"mmap failed for {os.fspath(path)!r}: {os.strerror(err)}")
        try:
            vec = (ctypes.c_ubyte * pages)()
            if libc.mincore(addr, size, vec) != 0:
                err = ctypes.get_errno()
                raise OSError(err, f"mincore failed for {os.fspath(path)!r}: {os.strerror(err)}")
            return Residency(sum(b & 1 for b in vec), pages)
        finally:
            libc.munmap(addr, size)
    finally:
        os.close(fd)


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
