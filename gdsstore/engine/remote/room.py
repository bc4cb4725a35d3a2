"""A wave's buffer: fixed slots first, then room set aside for objects of unknown size, in small pages where
it is spread thin (docs/remote.md, "Remote data")."""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import mmap
from typing import TYPE_CHECKING, Any

import numpy as np

from gdsstore.engine.landing import ALIGN as _ALIGN
from gdsstore.engine.landing import Alloc, Free

if TYPE_CHECKING:
    from gdsstore.engine.remote.wave import _Requests

__all__ = ["WaveBuffer", "pad", "wave_buffer"]

# Room set aside per object of unknown size, and in all: host memory is only committed where bytes
# land, so generous room costs nothing; more than this costs one copy at the end.
_ROOM = 1 << 20
_ROOM_MAX = 1 << 30
_NO_HUGE = getattr(mmap, "MADV_NOHUGEPAGE", None)  # Linux only
_HUGE = 4 << 20  # numpy asks huge pages for arrays from 4 MiB


def pad(n: int) -> int:
    """``n`` rounded up to the slots' alignment."""
    return (n + _ALIGN - 1) // _ALIGN * _ALIGN


@functools.cache
def _madvise() -> Any:
    """libc's ``madvise`` (None where there is none to call)."""
    try:
        fn = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True).madvise
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    return fn


def _small_pages(buf: np.ndarray, start: int, n: int) -> None:
    """Back ``buf[start:start + n]`` with 4 KiB pages, not transparent huge pages: the room's slots are far
    apart and mostly untouched, and each body's first byte would fault in (and zero) 2 MiB. Advice only:
    where it cannot be given nothing changes."""
    advise = _madvise() if _NO_HUGE is not None and n >= _HUGE else None
    if advise is None:
        return
    page = mmap.PAGESIZE
    a = (buf.ctypes.data + start + page - 1) // page * page
    b = (buf.ctypes.data + start + n) // page * page
    if b > a:
        advise(a, b - a, _NO_HUGE)


class WaveBuffer:
    """The wave's buffer: fixed slots first, then room set aside for objects of unknown size."""

    def __init__(self, fixed: int, room: int, alloc: Alloc, *, sparse: bool = False) -> None:
        self.buf, self.owner = alloc(fixed + room)
        if sparse:  # room set aside in equal shares, mostly left untouched
            _small_pages(self.buf, fixed, room)
        self.fixed, self.used, self.cap = fixed, fixed, fixed + room

    def reserve(self, n: int) -> int:
        """Set ``n`` bytes of room aside (planning only: no request is writing); -1: they do not fit."""
        if self.used + n > self.cap:
            return -1
        self.used += n
        return self.used - n

    def grow(self, reqs: _Requests, extra: int, alloc: Alloc, free: Free) -> None:
        """Move to a buffer with ``extra`` bytes of room free: the fixed slots are copied, and of the room
        only the bytes that landed (packed). Call it only between the core's calls (no request writing)."""
        landed = np.flatnonzero((reqs.slot < 0) & (reqs.base >= 0) & (reqs.got >= 0)).tolist()
        keep = self.fixed + sum(pad(int(reqs.got[k])) for k in landed)
        buf, owner = alloc(keep + extra)
        buf[: self.fixed] = self.buf[: self.fixed]
        at = self.fixed
        for k in landed:
            n, base = int(reqs.got[k]), int(reqs.base[k])
            buf[at : at + n] = self.buf[base : base + n]
            reqs.base[k] = at
            at += pad(n)
        free(self.owner)
        self.buf, self.owner, self.used, self.cap = buf, owner, at, keep + extra


def wave_buffer(room_hint: int, fixed: int, open_sized: int, room: int | None, alloc: Alloc) -> WaveBuffer:
    """The wave's buffer. Room for objects of unknown size: the caller's (the GPU pipeline's learned average,
    pinned: left as it is), else the largest such object of this backend's last wave (objects of one dataset
    tend to be of one size: slots packed, huge pages welcome), else a generous guess in small pages."""
    last_largest = room_hint if room is None else 0
    per_object = min(pad(last_largest) if last_largest else _ROOM, _ROOM_MAX // max(1, open_sized))
    return WaveBuffer(fixed, room if room is not None else open_sized * per_object, alloc,
                       sparse=room is None and not last_largest)
