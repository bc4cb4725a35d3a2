"""The POSIX route's host I/O: whole reads and writes with ``preadv``/``pwritev``, looping over short ones.

Device memory reaches these calls through the pinned bounce ring (:mod:`gdsstore.engine.bounce`).
"""

from __future__ import annotations

import os

__all__ = ["pread_full", "pwrite_full"]


def pread_full(fd: int, dst: memoryview, offset: int) -> int:
    """Read into all of ``dst`` from ``offset``, looping over short reads; stops at EOF."""
    total = 0
    n = len(dst)
    while total < n:
        got = os.preadv(fd, [dst[total:]], offset + total)
        if got == 0:
            break
        total += got
    return total


def pwrite_full(fd: int, src: memoryview, offset: int) -> int:
    """Write all of ``src`` at ``offset``, looping over short writes."""
    total = 0
    n = len(src)
    while total < n:
        total += os.pwritev(fd, [src[total:]], offset + total)
    return total
