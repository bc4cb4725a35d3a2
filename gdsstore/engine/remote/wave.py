"""One wave of concurrent requests: many objects (or byte ranges of them) of one remote backend,
read into one buffer.

Every request of a selection starts at once, at most ``remote.wave_concurrency`` in flight, with no
size lookup before it: a whole object is one GET whose answer tells its size
(:func:`~gdsstore.engine.remote.reader.get_object`, which also fetches the rest of a large object as
concurrent ranges); byte ranges of one object that touch or overlap (closer than ``max_gap``) become one
request (:func:`~gdsstore.engine.ranges.coalesce_ranges`) and are split back. Retries, the
``Range``/``Content-Range`` checks and the object-changed check (ETag, version id, modification
time) are the reader's, per request.

Who sends them is the backend's: HTTP(S) and S3 backends hold their native core root (:attr:`WaveReads.core`,
set once), and the wave is one call into the core (:mod:`.core`: the GIL released, every answer checked), one
more for objects larger than their room; WebHDFS (no core route: object_store has none) sends one request
per piece through the reader, ``remote.wave_concurrency`` (at most 64) at a time.

Bodies land straight in one buffer from the caller's ``alloc`` (pinned host memory for the GPU
pipeline): ranges and objects of known size in slots laid out before the wave starts, objects of
unknown size in the room after them: through the core, an equal share set aside for each before the
wave starts (an object larger than its share is asked again in a second call, into room of the size
its first answer told); WebHDFS's, taken in the order their answers arrive. Only when that
room runs out do the late objects land in their own buffers and the whole is copied once into a larger one.

A missing key is a ``-1`` size (zarr's "no such chunk"); any other failure fails its item with the
URL and the reason (``errors="raise"``: the first one is raised once every request has stopped;
``"return"``: each failed item gets its exception). One trace row per wave.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import dataclasses
import functools
import mmap
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

import gdsstore.trace as _trace
from gdsstore import policy
from gdsstore.engine.landing import ALIGN as _ALIGN
from gdsstore.engine.landing import MISSING_KEY as _MISSING
from gdsstore.engine.landing import AddressTable, Alloc, Free, Landed, slot_layout
from gdsstore.engine.pool import run_pieces
from gdsstore.engine.ranges import ByteRange, coalesce_ranges
from gdsstore.engine.remote import core, core_object
from gdsstore.engine.remote.core import CoreRoot, CoreSource
from gdsstore.engine.remote.reader import RangeSource, Source, get_object, with_range_fix
from gdsstore.engine.remote.retry import RemoteIOError, RetryPolicy
from gdsstore.errors import RangeNotSupportedError

__all__ = ["WaveReads", "get_one", "read_wave"]

# Room set aside per object of unknown size, and in all: host memory is only committed where bytes
# land, so generous room costs nothing; more than this costs one copy at the end.
_ROOM = 1 << 20
_ROOM_MAX = 1 << 30
_NO_HUGE = getattr(mmap, "MADV_NOHUGEPAGE", None)  # Linux only
_HUGE = 4 << 20  # numpy asks huge pages for arrays from 4 MiB


def _pad(n: int) -> int:
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
    """Back ``buf[start:start + n]`` with 4 KiB pages, not transparent huge pages. numpy asks huge pages
    for large arrays; the room's slots are far apart and mostly untouched, so each body's first byte would
    fault in (and zero) 2 MiB: 4,096 objects of 16 KiB in 256 KiB slots zeroed the whole 1 GiB, 0.1-0.6 s
    of a 0.15 s wave. Advice only: where it cannot be given nothing changes."""
    advise = _madvise() if _NO_HUGE is not None and n >= _HUGE else None
    if advise is None:
        return
    page = mmap.PAGESIZE
    a = (buf.ctypes.data + start + page - 1) // page * page
    b = (buf.ctypes.data + start + n) // page * page
    if b > a:
        advise(a, b - a, _NO_HUGE)


@dataclass(slots=True)
class _Request:
    """One request: ``key`` from ``offset`` (``limit`` bytes at most, None: to the end)."""

    key: str
    offset: int
    limit: int | None
    members: list[int]
    slot: int = -1  # offset of a slot laid out before the wave; -1: room taken when the size is known
    expect: int | None = None  # the size the answer must have (a chunk of known size, an exact range)
    suffix: int | None = None  # the last ``suffix`` bytes (the size is looked up first)
    base: int = -1  # where its bytes landed in the wave's buffer
    got: int = -1  # how many landed; -1: missing
    side: np.ndarray | None = field(default=None, repr=False)  # landed outside the buffer (no room)


class _Room:
    """The wave's buffer: fixed slots first, then room handed out as answers tell sizes."""

    def __init__(self, fixed: int, room: int, alloc: Alloc, *, sparse: bool = False) -> None:
        self.buf, self.owner = alloc(fixed + room)
        if sparse:  # room set aside in equal shares, mostly left untouched
            _small_pages(self.buf, fixed, room)
        self.fixed = fixed
        self.used = fixed
        self.cap = fixed + room
        self.overflow = False
        self._lock = threading.Lock()

    def take(self, r: _Request, n: int) -> np.ndarray:
        if r.slot >= 0:
            r.base = r.slot
            return self.buf[r.slot : r.slot + n]
        with self._lock:
            if self.used + n <= self.cap:
                r.base = self.used
                self.used = min(self.cap, self.used + _pad(n))  # the padding may not fit after the last one
                return self.buf[r.base : r.base + n]
            self.overflow = True
        r.side = np.empty(n, dtype=np.uint8)
        return r.side

    def reserve(self, r: _Request, n: int) -> int:
        """Set ``n`` bytes of room aside for ``r`` before its size is known (the native core writes in
        place); -1 when they do not fit."""
        with self._lock:
            if self.used + n > self.cap:
                return -1
            r.base = self.used
            self.used += n
            return r.base

    def grow(self, reqs: list[_Request], extra: int, alloc: Alloc, free: Callable[[Any], None]) -> None:
        """Move to a buffer with ``extra`` bytes of room free: the fixed slots are copied, and of the room
        only the bytes that landed (packed); the rest of the old room, set aside and unused, is given up.
        Call it only between the core's calls (no request writing)."""
        landed = [r for r in reqs if r.slot < 0 and r.base >= 0 and r.got >= 0 and r.side is None]
        keep = self.fixed + sum(_pad(r.got) for r in landed)
        buf, owner = alloc(keep + extra)
        buf[: self.fixed] = self.buf[: self.fixed]
        at = self.fixed
        for r in landed:
            buf[at : at + r.got] = self.buf[r.base : r.base + r.got]
            r.base = at
            at += _pad(r.got)
        free(self.owner)
        self.buf, self.owner, self.used, self.cap = buf, owner, at, keep + extra

    def settle(self, reqs: list[_Request], alloc: Alloc, free: Callable[[Any], None]) -> None:
        """Copy items that landed outside the buffer (no room was left) and the buffer into one."""
        if not self.overflow:
            return
        total = self.used + sum(_pad(r.side.nbytes) for r in reqs if r.side is not None)
        buf, owner = alloc(total)
        buf[: self.used] = self.buf[: self.used]
        at = self.used
        for r in reqs:
            if r.side is not None:
                n = r.side.nbytes
                buf[at : at + n] = r.side
                r.base, r.side = at, None
                at += _pad(n)
        free(self.owner)
        self.buf, self.owner, self.used = buf, owner, total


def _plan(
    keys: Sequence[str],
    ranges: Sequence[ByteRange | None],
    expect: np.ndarray | None,
    exact: bool,
    max_gap: int,
    max_bytes: int,
) -> tuple[list[_Request], int]:
    """The requests of a wave and the bytes of its fixed slots."""
    reqs: list[_Request] = []
    by_key: dict[str, list[int]] = {}
    for i, (key, br) in enumerate(zip(keys, ranges)):
        if br is None:
            want = None if expect is None else int(expect[i])
            reqs.append(_Request(key, 0, None, [i], expect=want))
        elif br.kind == "range":
            by_key.setdefault(key, []).append(i)
        elif br.kind == "offset":
            reqs.append(_Request(key, br.start, None, [i]))
        else:
            reqs.append(_Request(key, 0, None, [i], suffix=br.start))
    for key, idxs in by_key.items():
        spans = [(ranges[i].start, max(ranges[i].start, ranges[i].end or 0)) for i in idxs]  # type: ignore[union-attr]
        for a, b, group in coalesce_ranges(spans, max_gap, max_bytes):
            reqs.append(_Request(key, a, b - a, [idxs[k] for k in group], expect=(b - a) if exact else None))
    sized = [r for r in reqs if r.expect is not None or r.limit is not None]
    slots, fixed = slot_layout(np.array([r.expect if r.expect is not None else r.limit for r in sized], np.int64))
    for r, slot in zip(sized, slots.tolist()):
        r.slot = slot
    return reqs, fixed


def _slot(r: _Request, room: _Room, url: str, where: str) -> Callable[[int], np.ndarray]:
    """Where the ``n`` bytes of ``r`` land (an object or range not of its expected size is an error)."""

    def alloc(n: int) -> np.ndarray:
        if r.expect is not None and n != r.expect:
            what = "object" if r.limit is None else f"range at {r.offset}"
            raise RemoteIOError(f"{where}: {url}: the {what} is {n} bytes, not the {r.expect} expected")
        r.got = n
        return room.take(r, n)

    return alloc


def _fetch(source: RangeSource, r: _Request, room: _Room, where: str) -> None:
    """One request of the wave: its bytes land in ``room``; a missing key leaves ``r.got`` at -1."""
    alloc = _slot(r, room, source.url, where)
    try:
        if r.suffix is not None:
            size = RetryPolicy.from_settings().call(source.stat, f"stat {source.url}")
            a, n = ByteRange("suffix", r.suffix).resolve(size)
            get_object(source, alloc, offset=a, limit=n, traced=False)
        else:
            get_object(source, alloc, offset=r.offset, limit=r.limit, traced=False)
    except _MISSING:
        r.got, r.base = -1, -1


def _core_piece(r: _Request, path: str, room: _Room, each: int) -> core.CorePiece | None:
    """``r`` as one piece of the core's wave: in its slot, or in room set aside (``each`` bytes)."""
    if r.suffix is not None:
        if r.suffix == 0:
            return None  # the last 0 bytes: nothing to ask ("-0" would be the whole object)
        cap = r.suffix  # all of it where the room has it, else the share of an object of unknown size
        at = room.reserve(r, _pad(cap))
        if at < 0:
            cap = each
            at = room.reserve(r, each)
        return core.CorePiece(path, -r.suffix, None, None, at, cap) if at >= 0 else _sized_first(r, path, -r.suffix, None)
    end = None if r.limit is None else r.offset + r.limit
    if r.slot >= 0:
        n = int(r.expect if r.expect is not None else r.limit or 0)
        if n <= 0:
            return None  # an empty request: nothing to ask
        return core.CorePiece(path, r.offset, end, r.expect, r.slot, n)
    at = room.reserve(r, each)
    return core.CorePiece(path, r.offset, end, r.expect, at, each) if at >= 0 else _sized_first(r, path, r.offset, end)


def _sized_first(r: _Request, path: str, start: int, end: int | None) -> core.CorePiece:
    """``r`` with no room left: asked with none (an empty answer lands as it is; any other is too large for
    it and tells its size, and the second call lands it in room of that size)."""
    r.base = 0
    return core.CorePiece(path, start, end, r.expect, 0, 0)


def _core_done(reqs: list[_Request], ks: list[int], results: list[core.CoreResult],
               errs: dict[int, BaseException], where: str) -> set[int]:
    """Record what the core did; the requests it settled (landed, missing or failed for good). An object
    larger than its room is left for a second call."""
    done: set[int] = set()
    for k, res in zip(ks, results, strict=True):
        r = reqs[k]
        if res.error is None or (res.kind == "status" and "HTTP 416" in str(res.error)):
            r.got = res.size if res.error is None else 0  # 416: a range past the end holds nothing (zarr's clamp)
            r.base = r.slot if r.slot >= 0 else r.base
            done.add(k)
            continue
        if res.kind == "too_large" and res.total >= 0:
            r.base = -1
            continue
        r.got, r.base = -1, -1
        if res.kind == "length" and res.total >= 0:  # the same words as the reader's check (_slot)
            n = res.total - r.offset if r.limit is None else min(r.limit, res.total - r.offset)
            what = "object" if r.limit is None else f"range at {r.offset}"
            res.error = RemoteIOError(f"{where}: {r.key!r}: the {what} is {n} bytes, not the {r.expect} expected")
        elif res.kind == "range_ignored":
            res.error = with_range_fix(RangeNotSupportedError(str(res.error)))
        if not isinstance(res.error, _MISSING):
            errs[k] = res.error or RemoteIOError(f"{where}: {r.key!r}: no answer")
        done.add(k)
    return done


def _one_version(
    reqs: list[_Request], landed: list[tuple[int, core.CoreResult]], errs: dict[int, BaseException]
) -> dict[str, str]:
    """The pieces of one object came from one version of it (their ETags agree), else each fails; returns
    each object's ETag where every one of its landed answers carried it."""
    first: dict[str, str] = {}
    changed: set[str] = set()
    untagged: set[str] = set()
    for k, res in landed:
        if res.error is not None:
            continue
        if res.etag is None:
            untagged.add(reqs[k].key)
        elif first.setdefault(reqs[k].key, res.etag) != res.etag:
            changed.add(reqs[k].key)
    for k, res in landed if changed else ():
        r = reqs[k]
        if res.error is None and k not in errs and r.key in changed:
            errs[k] = RemoteIOError(f"{r.key!r}: the object changed during the wave (ETags differ)")
            r.got, r.base = -1, -1
    return {key: tag for key, tag in first.items() if key not in changed and key not in untagged}


def _regrow(reqs: list[_Request], big: list[tuple[int, core.CorePiece, int]], room: _Room, alloc: Alloc,
            free: Callable[[Any], None]) -> list[tuple[int, core.CorePiece]]:
    """The pieces of the objects that did not fit their room again, each into room of the size its first
    answer told (``total``): in the wave's buffer, moved to a larger one first where the room is short."""
    sizes = [min(reqs[k].suffix or 0, total) if reqs[k].suffix is not None else max(0, total - reqs[k].offset)
             for k, _, total in big]
    need = sum(_pad(n) for n in sizes)
    if room.cap - room.used < need:
        room.grow(reqs, need, alloc, free)
    return [(k, dataclasses.replace(p, slot=room.reserve(reqs[k], _pad(n)), cap=n)) for (k, p, _), n in zip(big, sizes)]


def _core(root: core.CoreRoot, backend: Any, reqs: list[_Request], room: _Room, open_sized: int, where: str,
          s: policy.Settings, errs: dict[int, BaseException], alloc: Alloc, free: Callable[[Any], None],
          etags: dict[str, str]) -> None:
    """The wave through the native core (:mod:`.core`): one call, and one more for objects larger than
    their room. Failures for good go into ``errs``, the ETag of each object whose landed answers all
    carried one into ``etags``."""
    each = (room.cap - room.used) // max(1, open_sized) // _ALIGN * _ALIGN
    asks: list[tuple[int, core.CorePiece]] = []
    for k, r in enumerate(reqs):
        try:
            path = backend.core_path(r.key, where)
        except (TypeError, ValueError, FileNotFoundError) as exc:
            r.got, errs[k] = -1, exc
            continue
        piece = _core_piece(r, path, room, each)
        if piece is None:  # nothing to ask: an empty range
            r.got, r.base = 0, max(r.slot, 0)
        else:
            asks.append((k, piece))
    retry = RetryPolicy.from_settings(s)
    store = root.store()
    landed: list[tuple[int, core.CoreResult]] = []

    def call(asks: list[tuple[int, core.CorePiece]]) -> list[core.CoreResult]:
        ks = [k for k, _ in asks]
        results = core.read_wave(store, root.base, [p for _, p in asks], room.buf, retry=retry,
                                 concurrency=s.remote_wave_concurrency, timeout=s.remote_timeout or 1e9)
        _core_done(reqs, ks, results, errs, where)
        landed.extend(zip(ks, results))
        return results

    results = call(asks)
    # Objects larger than their room: asked again, into room of the size their first answer told.
    big = [(k, p, res.total) for (k, p), res in zip(asks, results) if res.kind == "too_large" and res.total >= 0]
    if big:
        call(_regrow(reqs, big, room, alloc, free))
        for k, _, _ in big:
            if reqs[k].base < 0 and k not in errs:  # still too large: the object grew between the two calls
                reqs[k].got = -1
                errs[k] = RemoteIOError(f"{where}: {root.base}{reqs[k].key}: the object changed during the wave")
    etags.update(_one_version(reqs, landed, errs))


def _suffixes_of_small_objects(backend: Any, reqs: list[_Request], room: _Room, errs: dict[int, BaseException],
                               where: str) -> None:
    """Suffix reads a server answered with the whole object (moto does where the suffix is longer than
    the object, as RFC 9110 allows): such an object is read whole once its size says it is no longer than
    the suffix, its bytes landing beside the buffer; a longer one keeps its error."""
    for k, exc in list(errs.items()):
        r = reqs[k]
        if r.suffix is None or not isinstance(exc, RangeNotSupportedError):
            continue
        src = backend.source(r.key, where)
        if src.stat() > r.suffix:
            continue
        data = core_object.get_object(src, lambda n: np.empty(n, np.uint8), None, where)
        r.side, r.got, r.base = data, int(data.nbytes), 0
        room.overflow = True
        del errs[k]


def get_one(source: RangeSource, alloc: Callable[[int], Any], byte_range: ByteRange | None) -> Any:
    """One object, or a range of it (zarr's clamping), into ``alloc(n)``: one request (more for a
    large object), no size lookup first except for a suffix. Returns the buffer."""
    if byte_range is None:
        return get_object(source, alloc)
    if byte_range.kind == "suffix":
        size = RetryPolicy.from_settings().call(source.stat, f"stat {source.url}")
        a, n = byte_range.resolve(size)
        return get_object(source, alloc, offset=a, limit=n)
    limit = None if byte_range.kind == "offset" else byte_range.nbytes
    return get_object(source, alloc, offset=byte_range.start, limit=limit)


def _place(reqs: list[_Request], ranges: Sequence[ByteRange | None], n: int) -> tuple[np.ndarray, np.ndarray]:
    """Each item's place in the buffer: its request's, moved by where it starts in it (clamped)."""
    offsets = np.zeros(n, dtype=np.int64)
    sizes = np.full(n, -1, dtype=np.int64)
    for r in reqs:
        if r.got < 0:
            continue
        for i in r.members:
            br = ranges[i]
            if br is None or br.kind != "range":
                offsets[i], sizes[i] = r.base, r.got
            else:
                a = br.start - r.offset
                offsets[i] = r.base + a
                sizes[i] = max(0, min(br.end or 0, r.offset + r.got) - br.start) if a <= r.got else 0
    return offsets, sizes


def read_wave(
    backend: Any,
    keys: Sequence[str],
    ranges: Sequence[ByteRange | None] | None,
    alloc: Alloc,
    free: Callable[[Any], None] = lambda owner: None,
    *,
    expect: np.ndarray | None = None,
    exact: bool = False,
    room: int | None = None,
    max_gap: int = 0,
    max_bytes: int | None = None,
    errors: Literal["raise", "return"] = "raise",
    where: str = "read_wave()",
) -> Landed:
    """Read ``keys`` (whole, or ``ranges[i]`` of each) of a remote ``backend`` in one wave.

    Args:
        backend: a remote backend (``backend.source(key, where)`` gives a key's range source).
        keys: the objects, one per item (a key may repeat).
        ranges: per item, a byte range (zarr's clamping) or None for the whole object; None: all whole.
        alloc: ``alloc(nbytes) -> (uint8 array, owner)``: the wave's buffer.
        free: gives an owner back (when the buffer had to grow and was replaced).
        expect: whole objects' sizes when known (chunks without compression): no room to guess, and
            an object of another size is an error.
        exact: the ranges lie inside their objects (shard index entries): a shorter answer is an error.
        room: bytes to set aside for whole objects of unknown size (default: per such object, the
            largest of the backend's last wave, else 1 MiB; 1 GiB in all at most); an object larger than
            its share is asked again (through the core) or costs one copy (the pure-Python way).
        max_gap: ranges of one object at most this far apart share a request (0: touching ones).
        max_bytes: a shared request stays within this (default ``remote.max_range_size``).
        errors: ``"raise"`` the first failure, or ``"return"`` each in
            :attr:`Landed.errors <gdsstore.engine.landing.Landed.errors>`.
        where: the caller, for messages.

    Returns:
        The :class:`~gdsstore.engine.landing.Landed` items.

    Raises:
        OSError: a request failed for good (``errors="raise"``), naming its URL and the reason.
    """
    s = policy.settings()
    items = list(ranges) if ranges is not None else [None] * len(keys)
    reqs, fixed = _plan(keys, items, expect, exact, max_gap, max_bytes or s.remote_max_range_size)
    open_sized = sum(1 for r in reqs if r.slot < 0)
    t0 = time.perf_counter()
    # Room for objects of unknown size: the caller's (the GPU pipeline's learned average, pinned: left as it
    # is), else the largest such object of this backend's last wave (objects of one dataset tend to be of
    # one size: slots packed, huge pages welcome), else a generous guess in mostly untouched, small pages.
    hint = backend.room_hint if room is None else 0
    share = min(_pad(hint) if hint else _ROOM, _ROOM_MAX // max(1, open_sized))
    spare = room if room is not None else open_sized * share
    buf = _Room(fixed, spare, alloc, sparse=room is None and not hint)
    errs: dict[int, BaseException] = {}
    root: core.CoreRoot | None = backend.core
    seen: dict[str, str] = {}  # the ETags the core's answers carried
    try:
        if root is not None:
            if reqs:
                _core(root, backend, reqs, buf, open_sized, where, s, errs, alloc, free, seen)
                _suffixes_of_small_objects(backend, reqs, buf, errs, where)
        else:
            _python(backend, reqs, buf, errs, errors == "raise", where, s)
        if errs and errors == "raise":
            raise errs[min(errs)]
        buf.settle(reqs, alloc, free)
    except BaseException:
        free(buf.owner)
        raise
    offsets, sizes = _place(reqs, items, len(keys))
    item_errors = _item_errors(reqs, errs, len(keys)) if errors == "return" else None
    if _trace.active() and reqs:
        reason = f"wave: {core.wave_reason(s)}" if root is not None else \
            f"wave: {policy.python_wave_concurrency(s)} concurrent requests (remote.wave_concurrency)"
        _trace.record("read", backend.route, reason, int(sizes.clip(0).sum()), time.perf_counter() - t0,
                      str(backend.url), None, requests=len(reqs))
    if room is None and open_sized:
        backend.room_hint = max([0, *(r.got for r in reqs if r.slot < 0)])
    split = core.split_bytes if core.available() else None  # else Wave.all_bytes copies one by one
    return Landed(buf.buf[: buf.used], offsets, sizes, buf.owner, errors=item_errors, requests=len(reqs),
                  split=split, etags=seen)


def _item_errors(reqs: list[_Request], errs: dict[int, BaseException], n: int) -> list[BaseException | None]:
    """Each item's failure (None: it landed or is missing), from its request's."""
    out: list[BaseException | None] = [None] * n
    for k, exc in errs.items():
        for i in reqs[k].members:
            out[i] = exc
    return out


def _python(backend: Any, reqs: list[_Request], room: _Room, errs: dict[int, BaseException], stop_on_error: bool,
            where: str, s: policy.Settings) -> None:
    """The wave of a backend without a core root (WebHDFS): one request per piece through the reader,
    ``remote.wave_concurrency`` (at most 64) at a time; failures for good go into ``errs``."""
    failed = threading.Event()

    def piece(k: int) -> int:
        r = reqs[k]
        if failed.is_set() and stop_on_error:
            return 0  # another request failed for good: the wave is lost, stop asking
        try:
            src = backend.source(r.key, where)
            assert not isinstance(src, core.CoreSource)
            _fetch(src, r, room, where)
        except BaseException as exc:
            r.got = -1
            errs[k] = exc
            failed.set()
        return 0

    run_pieces([functools.partial(piece, k) for k in range(len(reqs))], [0] * len(reqs),
               policy.python_wave_concurrency(s)).result()


class WaveReads:
    """The remote backends' :meth:`~gdsstore.engine.backend.Backend.get_many`: one :func:`read_wave`."""

    waves = True
    #: Where the backend's objects are for the native core (HTTP(S), S3), set once by the backend; None:
    #: the wave goes through :meth:`source` (WebHDFS).
    core: CoreRoot | None = None
    #: The trace's route of the backend's reads (``"http"``, ``"s3"``, ``"webhdfs"``).
    route: str = ""

    def core_path(self, key: str, where: str) -> str:
        """The object path of ``key`` for the core (raises ``ValueError`` for a refused key)."""
        raise NotImplementedError

    def source(self, key: str, where: str) -> Source:
        raise NotImplementedError

    def get(self, key: str, alloc: Any, byte_range: ByteRange | None = None) -> Any:
        """Read ``key`` (or a range of it) into ``alloc(n)``: one request for a small object or range,
        no size lookup first (through the core: a suffix range too)."""
        where = f"{type(self).__name__}.get()"
        if self.core is None:
            src = self.source(key, where)
            assert not isinstance(src, core.CoreSource)
            return get_one(src, alloc, byte_range)
        src = self.source(key, where)
        assert isinstance(src, CoreSource)
        return core_object.get_object(src, alloc, byte_range, where)

    def get_many(
        self,
        keys: Sequence[str],
        ranges: Sequence[ByteRange | None] | None,
        alloc: Alloc,
        free: Callable[[Any], None] = lambda owner: None,
        **options: Any,
    ) -> Landed:
        # docstring inherited
        return read_wave(self, keys, ranges, alloc, free, **options)

    def land(
        self, table: AddressTable, alloc: Alloc, free: Free, *, device: int | None = None, room: int | None = None,
        where: str = "land()",
    ) -> Landed:
        """The table in one wave (:func:`read_wave`); ``device`` is not taken (waves land in host memory)."""
        return read_wave(self, table.keys, table.byte_ranges(), alloc, free, expect=table.expect, exact=table.exact,
                         room=room, max_bytes=table.max_request, where=where)
