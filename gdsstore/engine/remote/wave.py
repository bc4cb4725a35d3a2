"""One wave of concurrent requests: many objects (or byte ranges of them) of one remote backend, read into
one buffer in one call of :func:`~gdsstore.engine.remote.core.read_wave` (the native core for HTTP(S) and S3,
the GIL released; WebHDFS's own pieces reader), one more for objects larger than their room.

No size lookup comes first: a whole object is one GET whose answer tells its size; byte ranges of one object
closer than ``max_gap`` share one request (:func:`~gdsstore.engine.ranges.coalesce_ranges`) and are split
back. Bodies land in one buffer from the caller's ``alloc`` (pinned host memory for the GPU pipeline): ranges
and objects of known size in slots laid out before the wave, objects of unknown size in an equal share of the
room after them; an object larger than its share is asked again, into room of the size its first answer told.

A missing key is a ``-1`` size (zarr's "no such chunk"); any other failure fails its item with the URL and
the reason (``errors="raise"``: the first one, once every request has stopped; ``"return"``: each failed
item gets its exception). One trace row per wave.
"""

from __future__ import annotations

import abc
import ctypes
import ctypes.util
import dataclasses
import functools
import mmap
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

import gdsstore.trace as _trace
from gdsstore import policy
from gdsstore.engine import native
from gdsstore.engine.backend import Backend
from gdsstore.engine.buffers import as_io_buffer
from gdsstore.engine.landing import ALIGN as _ALIGN
from gdsstore.engine.landing import MISSING_KEY as _MISSING
from gdsstore.engine.landing import AddressTable, Alloc, Free, Landed, slot_layout
from gdsstore.engine.ranges import ByteRange, coalesce_ranges
from gdsstore.engine.remote import core
from gdsstore.engine.remote.core import CoreRoot, CoreSource
from gdsstore.engine.remote.reader import RemoteFile, copy_h2d_async
from gdsstore.engine.remote.retry import RemoteIOError, RetryPolicy

__all__ = ["WaveReads", "read_wave"]

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


@dataclass(slots=True)
class _Request:
    """One request: ``key`` from ``offset`` (``limit`` bytes at most, None: to the end)."""

    key: str
    offset: int
    limit: int | None
    members: list[int]
    slot: int = -1  # offset of a slot laid out before the wave; -1: in the room
    expect: int | None = None  # the size the answer must have (a chunk of known size, an exact range)
    suffix: int | None = None  # the last ``suffix`` bytes
    base: int = -1  # where its bytes landed in the wave's buffer
    got: int = -1  # how many landed; -1: missing


def _request(key: str, br: ByteRange | None, i: int = 0, expect: int | None = None) -> _Request:
    """The request of one item: the whole object, from an offset, or a suffix (ranges are planned apart)."""
    if br is None:
        return _Request(key, 0, None, [i], expect=expect)
    if br.kind == "offset":
        return _Request(key, br.start, None, [i])
    if br.kind == "suffix":
        return _Request(key, 0, None, [i], suffix=br.start)
    return _Request(key, br.start, br.nbytes, [i])


def _span(r: _Request) -> tuple[int, int | None] | None:
    """The core's ``(start, end)`` of ``r``; None: nothing to ask (the last 0 bytes: "-0" would be the whole)."""
    if r.suffix is not None:
        return (-r.suffix, None) if r.suffix else None
    return r.offset, None if r.limit is None else r.offset + r.limit


def _landed(res: core.CoreResult) -> int | None:
    """The bytes a piece landed (0: a range past the object's end, a 416: zarr's clamp); None: it failed."""
    if res.error is None:
        return res.size
    return 0 if res.kind == "status" and res.status == 416 else None


def _failure(res: core.CoreResult, r: _Request, where: str) -> BaseException:
    """Why a piece of ``r`` failed, in the words every read uses."""
    if res.kind == "length" and res.total >= 0:
        n = res.total - r.offset if r.limit is None else min(r.limit, res.total - r.offset)
        what = "object" if r.limit is None else f"range at {r.offset}"
        return RemoteIOError(f"{where}: {r.key!r}: the {what} is {n} bytes, not the {r.expect} expected")
    return res.error or RemoteIOError(f"{where}: {r.key!r}: no answer")


def _suffix_is_whole(src: CoreSource, r: _Request, res: core.CoreResult) -> bool:
    """A suffix read answered with the whole object (moto does where the suffix is longer than the object,
    as RFC 9110 allows): the object is read whole where it is no longer than the suffix."""
    return res.kind == "range_ignored" and r.suffix is not None and src.stat() <= r.suffix


class _WaveBuffer:
    """The wave's buffer: fixed slots first, then room set aside for objects of unknown size."""

    def __init__(self, fixed: int, room: int, alloc: Alloc, *, sparse: bool = False) -> None:
        self.buf, self.owner = alloc(fixed + room)
        if sparse:  # room set aside in equal shares, mostly left untouched
            _small_pages(self.buf, fixed, room)
        self.fixed, self.used, self.cap = fixed, fixed, fixed + room

    def reserve(self, r: _Request, n: int) -> int:
        """Set ``n`` bytes of room aside for ``r`` (planning only: no request is writing); -1: they do not fit."""
        if self.used + n > self.cap:
            return -1
        r.base = self.used
        self.used += n
        return r.base

    def grow(self, reqs: list[_Request], extra: int, alloc: Alloc, free: Free) -> None:
        """Move to a buffer with ``extra`` bytes of room free: the fixed slots are copied, and of the room
        only the bytes that landed (packed). Call it only between the core's calls (no request writing)."""
        landed = [r for r in reqs if r.slot < 0 and r.base >= 0 and r.got >= 0]
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


def _plan(keys: Sequence[str], ranges: Sequence[ByteRange | None], expect: np.ndarray | None, exact: bool,
          max_gap: int, max_bytes: int) -> tuple[list[_Request], int]:
    """The requests of a wave and the bytes of its fixed slots."""
    if all(br is None for br in ranges):
        return _plan_whole(keys, expect)
    reqs: list[_Request] = []
    by_key: dict[str, list[int]] = {}
    for i, (key, br) in enumerate(zip(keys, ranges)):
        if br is not None and br.kind == "range":
            by_key.setdefault(key, []).append(i)
        else:
            reqs.append(_request(key, br, i, None if expect is None or br is not None else int(expect[i])))
    for key, idxs in by_key.items():
        spans = [(ranges[i].start, max(ranges[i].start, ranges[i].end or 0)) for i in idxs]  # type: ignore[union-attr]
        for a, b, group in coalesce_ranges(spans, max_gap, max_bytes):
            reqs.append(_Request(key, a, b - a, [idxs[k] for k in group], expect=(b - a) if exact else None))
    sized = [r for r in reqs if r.expect is not None or r.limit is not None]
    slots, fixed = slot_layout(np.array([r.expect if r.expect is not None else r.limit for r in sized], np.int64))
    for r, slot in zip(sized, slots.tolist()):
        r.slot = slot
    return reqs, fixed


def _plan_whole(keys: Sequence[str], expect: np.ndarray | None) -> tuple[list[_Request], int]:
    """:func:`_plan` of whole objects (a wave of chunks): one request each, in slots where their sizes are
    known (``expect``), else in the room."""
    if expect is None:
        return [_Request(key, 0, None, [i]) for i, key in enumerate(keys)], 0
    sizes = np.asarray(expect, dtype=np.int64)
    slots, fixed = slot_layout(sizes)
    return [_Request(key, 0, None, [i], slot, n)
            for i, (key, slot, n) in enumerate(zip(keys, slots.tolist(), sizes.tolist()))], fixed


def _asks(paths: Mapping[str, str | BaseException], reqs: list[_Request], room: _WaveBuffer, each: int,
          errs: dict[int, BaseException]) -> list[tuple[int, core.CorePiece]]:
    """The core's pieces of ``reqs``, each with its request's index: in its slot, or in room set aside (``each``
    bytes). A key refused in ``paths`` fails its request in ``errs``; a request with nothing to ask (an empty
    range, the last 0 bytes) is done at once."""
    asks: list[tuple[int, core.CorePiece]] = []
    for k, r in enumerate(reqs):
        path = paths[r.key]
        if isinstance(path, BaseException):
            r.got, errs[k] = -1, path
            continue
        if r.slot >= 0:  # known size (most of a wave of chunks): in its slot
            n = r.expect if r.expect is not None else r.limit or 0
            if n > 0:
                end = None if r.limit is None else r.offset + r.limit
                asks.append((k, core.CorePiece(path, r.offset, end, r.expect, r.slot, n)))
            else:
                r.got, r.base = 0, r.slot
            continue
        if r.suffix == 0:  # "-0" would be the whole object
            r.got, r.base = 0, 0
            continue
        # A suffix: all of it where the room has it; else (and any other object) its share of the room.
        at, cap = (room.reserve(r, _pad(r.suffix)), r.suffix) if r.suffix else (-1, 0)
        if at < 0:
            at, cap = room.reserve(r, each), each
        if at < 0:  # no room left: asked with none, it tells its size and lands in the second call
            r.base, at, cap = 0, 0, 0
        asks.append((k, core.CorePiece(path, -r.suffix if r.suffix else r.offset, None, r.expect, at, cap)))
    return asks


def _core_done(reqs: list[_Request], ks: list[int], results: list[core.CoreResult],
               errs: dict[int, BaseException], where: str) -> None:
    """Record what the core did. An object larger than its room is left for a second call."""
    for k, res in zip(ks, results, strict=True):
        r = reqs[k]
        n = _landed(res)
        if n is not None:
            r.got = n
            r.base = r.slot if r.slot >= 0 else r.base
        elif res.kind == "too_large" and res.total >= 0:
            r.base = -1
        else:
            r.got, r.base = -1, -1
            res.error = _failure(res, r, where)
            if not isinstance(res.error, _MISSING):
                errs[k] = res.error


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


def _regrow(reqs: list[_Request], big: list[tuple[int, core.CorePiece, int]], room: _WaveBuffer, alloc: Alloc,
            free: Free) -> list[tuple[int, core.CorePiece]]:
    """The pieces of the objects that did not fit their room again, each into room of the size its first
    answer told (``total``): in the wave's buffer, moved to a larger one first where the room is short."""
    sizes = [min(reqs[k].suffix or 0, total) if reqs[k].suffix is not None else max(0, total - reqs[k].offset)
             for k, _, total in big]
    need = sum(_pad(n) for n in sizes)
    if room.cap - room.used < need:
        room.grow(reqs, need, alloc, free)
    return [(k, dataclasses.replace(p, slot=room.reserve(reqs[k], _pad(n)), cap=n)) for (k, p, _), n in zip(big, sizes)]


def _core(backend: WaveReads, objects: Objects, reqs: list[_Request], room: _WaveBuffer, open_sized: int, where: str,
          s: policy.Settings, errs: dict[int, BaseException], alloc: Alloc, free: Free) -> dict[str, str]:
    """The wave: one call, and one more for objects larger than their room. Failures for good go into
    ``errs``; returns the ETag of each object whose landed answers all carried one."""
    root, store = backend.core, objects.store
    each = (room.cap - room.used) // max(1, open_sized) // _ALIGN * _ALIGN
    asks = _asks(objects.paths, reqs, room, each, errs)
    retry = RetryPolicy.from_settings(s)
    landed: list[tuple[int, core.CoreResult]] = []

    def call(asks: list[tuple[int, core.CorePiece]]) -> list[core.CoreResult]:
        ks = [k for k, _ in asks]
        results = core.read_wave(store, root.base, [p for _, p in asks], room.buf, retry=retry,
                                 concurrency=s.remote_wave_concurrency, timeout=s.remote_timeout or 1e9)
        _core_done(reqs, ks, results, errs, where)
        landed.extend(zip(ks, results))
        return results

    results = call(asks)
    big = [(k, p, res.total) for (k, p), res in zip(asks, results) if res.kind == "too_large" and res.total >= 0]
    if big:
        call(_regrow(reqs, big, room, alloc, free))
        for k, _, _ in big:
            if reqs[k].base < 0 and k not in errs:  # still too large: the object grew between the two calls
                reqs[k].got = -1
                errs[k] = RemoteIOError(f"{where}: {root.base}{reqs[k].key}: the object changed during the wave")
    _suffixes_of_small_objects(backend, reqs, landed, room, errs, alloc, free, where)
    return _one_version(reqs, landed, errs)


def _suffixes_of_small_objects(backend: WaveReads, reqs: list[_Request], landed: list[tuple[int, core.CoreResult]],
                               room: _WaveBuffer, errs: dict[int, BaseException], alloc: Alloc, free: Free,
                               where: str) -> None:
    """Suffix reads answered with the whole object (:func:`_suffix_is_whole`): read whole, into the room."""
    for k, res in landed:
        r = reqs[k]
        if k not in errs or not _suffix_is_whole(backend.source(r.key, where), r, res):
            continue
        data = backend.get(r.key, lambda n: np.empty(n, np.uint8))
        n = int(data.nbytes)
        if room.reserve(r, _pad(n)) < 0:
            room.grow(reqs, _pad(n), alloc, free)
            room.reserve(r, _pad(n))
        room.buf[r.base : r.base + n] = data
        r.got = n
        del errs[k]


def _place(reqs: list[_Request], ranges: Sequence[ByteRange | None], n: int) -> tuple[np.ndarray, np.ndarray]:
    """Each item's place in the buffer: its request's, moved by where it starts in it (clamped)."""
    offsets = np.zeros(n, dtype=np.int64)
    sizes = np.full(n, -1, dtype=np.int64)
    done = [r for r in reqs if r.got >= 0]
    whole = [r for r in done if r.limit is None]  # one item each: an object, from an offset, or a suffix
    if whole:
        at = [r.members[0] for r in whole]
        offsets[at] = [r.base for r in whole]
        sizes[at] = [r.got for r in whole]
    shared = [(r, i) for r in done if r.limit is not None for i in r.members]  # ranges sharing a request
    if shared:
        at = [i for _, i in shared]
        start = np.array([ranges[i].start for i in at], dtype=np.int64)  # type: ignore[union-attr]
        end = np.array([ranges[i].end or 0 for i in at], dtype=np.int64)  # type: ignore[union-attr]
        base, offset, got = (np.array(v, dtype=np.int64) for v in zip(*((r.base, r.offset, r.got) for r, _ in shared)))
        into = start - offset
        offsets[at] = base + into
        sizes[at] = np.where(into <= got, np.maximum(0, np.minimum(end, offset + got) - start), 0)
    return offsets, sizes


def _wave_buffer(backend: WaveReads, fixed: int, open_sized: int, room: int | None, alloc: Alloc) -> _WaveBuffer:
    """The wave's buffer. Room for objects of unknown size: the caller's (the GPU pipeline's learned average,
    pinned: left as it is), else the largest such object of this backend's last wave (objects of one dataset
    tend to be of one size: slots packed, huge pages welcome), else a generous guess in small pages."""
    last_largest = backend.room_hint if room is None else 0
    per_object = min(_pad(last_largest) if last_largest else _ROOM, _ROOM_MAX // max(1, open_sized))
    return _WaveBuffer(fixed, room if room is not None else open_sized * per_object, alloc,
                       sparse=room is None and not last_largest)


#: Who a wave's messages name where its caller does not say.
_WHERE = "read_wave()"


@dataclass(frozen=True, slots=True)
class Objects:
    """A wave's objects as their backend resolved them before the wave (:meth:`WaveReads.objects`): the core's
    store of this moment and each key's object path, or the exception that refused the key."""

    store: Any
    paths: dict[str, str | BaseException]


def read_wave(
    backend: WaveReads,
    objects: Objects,
    keys: Sequence[str],
    ranges: Sequence[ByteRange | None] | None,
    alloc: Alloc,
    free: Free = lambda owner: None,
    *,
    expect: np.ndarray | None = None,
    exact: bool = False,
    room: int | None = None,
    max_gap: int = 0,
    max_bytes: int | None = None,
    errors: Literal["raise", "return"] = "raise",
    where: str = _WHERE,
) -> Landed:
    """Read ``keys`` (whole, or ``ranges[i]`` of each) of a remote ``backend`` in one wave.

    Args:
        backend: the remote backend the objects are of (its messages' base URL, trace route and room hint;
            its :meth:`~WaveReads.get` for the rare server that answers a suffix with the whole object).
        objects: the store and paths of ``keys`` (:meth:`WaveReads.objects`).
        keys: the objects, one per item (a key may repeat).
        ranges: per item, a byte range (zarr's clamping) or None for the whole object; None: all whole.
        alloc: ``alloc(nbytes) -> (uint8 array, owner)``: the wave's buffer.
        free: gives an owner back (when the buffer had to grow and was replaced).
        expect: whole objects' sizes when known (chunks without compression): no room to guess, and
            an object of another size is an error.
        exact: the ranges lie inside their objects (shard index entries): a shorter answer is an error.
        room: bytes to set aside for whole objects of unknown size (default: per such object, the
            largest of the backend's last wave, else 1 MiB; 1 GiB in all at most).
        max_gap: ranges of one object at most this far apart share a request (0: touching ones).
        max_bytes: a shared request stays within this (default ``remote.max_range_size``).
        errors: ``"raise"`` the first failure, or ``"return"`` each in
            :attr:`Landed.errors <gdsstore.engine.landing.Landed.errors>`.
        where: the caller, for messages.

    Raises:
        OSError: a request failed for good (``errors="raise"``), naming its URL and the reason.
    """
    s = policy.settings()
    items = list(ranges) if ranges is not None else [None] * len(keys)
    reqs, fixed = _plan(keys, items, expect, exact, max_gap, max_bytes or s.remote_max_range_size)
    open_sized = sum(1 for r in reqs if r.slot < 0)
    t0 = time.perf_counter()
    buf = _wave_buffer(backend, fixed, open_sized, room, alloc)
    errs: dict[int, BaseException] = {}
    try:
        etags = _core(backend, objects, reqs, buf, open_sized, where, s, errs, alloc, free) if reqs else {}
        if errs and errors == "raise":
            raise errs[min(errs)]
    except BaseException:
        free(buf.owner)
        raise
    offsets, sizes = _place(reqs, items, len(keys))
    if _trace.active() and reqs:
        _trace.record("read", backend.route, f"wave: {core.wave_reason(s, objects.store)}", int(sizes.clip(0).sum()),
                      time.perf_counter() - t0, str(backend.url), None, requests=len(reqs))
    if room is None and open_sized:
        backend.room_hint = max([0, *(r.got for r in reqs if r.slot < 0)])
    split = core.split_bytes if native.load() else None  # else Landed.all_bytes copies one by one
    return Landed(buf.buf[: buf.used], offsets, sizes, buf.owner, requests=len(reqs), split=split, etags=etags,
                  errors=_item_errors(reqs, errs, len(keys)) if errors == "return" else None)


def _item_errors(reqs: list[_Request], errs: dict[int, BaseException], n: int) -> list[BaseException | None]:
    """Each item's failure (None: it landed or is missing), from its request's."""
    out: list[BaseException | None] = [None] * n
    for k, exc in errs.items():
        for i in reqs[k].members:
            out[i] = exc
    return out


def _copy_into(buf: Any, data: np.ndarray, where: str) -> Any:
    """``data`` into ``buf`` (host or device memory); returns ``buf``."""
    b = as_io_buffer(buf, writable=True, where=where)
    if b.host is not None:
        b.host_slice(0, data.nbytes)[:] = data
    elif data.nbytes:
        assert b.device is not None
        copy_h2d_async(b.device, b.ptr, data.ctypes.data, data.nbytes).synchronize()
    return buf


class WaveReads(Backend):
    """A remote backend: :meth:`get` of one object, :meth:`get_many` and :meth:`land` as one :func:`read_wave`."""

    waves = True
    #: Where the backend's objects are (the native core's store, or WebHDFS's pieces reader), set once.
    core: CoreRoot
    #: The trace's route of the backend's reads (``"http"``, ``"s3"``, ``"webhdfs"``).
    route: str = ""

    @abc.abstractmethod
    def core_path(self, key: str, where: str) -> str:
        """The object path of ``key`` for the core (raises ``ValueError`` for a refused key)."""

    def object_paths(self, keys: Sequence[str], where: str) -> list[str | BaseException]:
        """:meth:`core_path` of each key, or the exception that refused it (``TypeError``, ``ValueError``,
        ``FileNotFoundError``): a wave asks for thousands at once."""
        out: list[str | BaseException] = []
        for key in keys:
            try:
                out.append(self.core_path(key, where))
            except (TypeError, ValueError, FileNotFoundError) as exc:
                out.append(exc)
        return out

    @abc.abstractmethod
    def source(self, key: str, where: str) -> CoreSource:
        """The source of one object (:class:`~gdsstore.engine.remote.reader.RemoteFile` reads it)."""

    def get(self, key: str, alloc: Any, byte_range: ByteRange | None = None) -> Any:
        """Read ``key`` (or a range of it, zarr's clamping) into ``alloc(n)``: one request into a scratch of
        ``task_size``, copied, no size lookup first; a larger one is read again as concurrent ranges straight
        into ``alloc(n)`` (:class:`~gdsstore.engine.remote.reader.RemoteFile`, each range of the first
        answer's version)."""
        where = f"{type(self).__name__}.get()"
        s = policy.settings()
        t0 = time.perf_counter()
        src = self.source(key, where)
        r = _request(key, byte_range)
        span = _span(r)
        if span is None:
            return alloc(0)
        scratch = np.empty(s.task_size, np.uint8)
        store = src.core.store()
        res = core.read_one(store, src.core.base, core.CorePiece(src.path, *span, None, 0, s.task_size), scratch, s)
        n = _landed(res)
        if n is not None:
            buf = _copy_into(alloc(n), scratch[:n], where)
        elif res.kind == "too_large" and res.total >= 0:
            offset, n = byte_range.resolve(res.total) if byte_range is not None else (0, res.total)
            src.etag = res.etag
            buf = alloc(n)
            if n:
                with RemoteFile(src, size=res.total) as f:
                    f.read(buf, n, offset)
        elif _suffix_is_whole(src, r, res):
            return self.get(key, alloc)
        else:
            raise _failure(res, r, where)
        if _trace.active():
            _trace.record("read", src.route, f"{core.wave_reason(s, store)}; one object", n,
                          time.perf_counter() - t0, src.url)
        return buf

    def objects(self, keys: Sequence[str], where: str) -> Objects:
        """The core's store of this moment (S3: of the credentials in force) and the object path of each of
        ``keys``, resolved once before a wave."""
        if len(keys) == 0:
            return Objects(None, {})
        distinct = list(dict.fromkeys(keys))  # a shard's ranges repeat its key
        return Objects(self.core.store(), dict(zip(distinct, self.object_paths(distinct, where), strict=True)))

    def get_many(self, keys: Sequence[str], *args: Any, **options: Any) -> Landed:
        # docstring inherited (the options: read_wave's)
        return read_wave(self, self.objects(keys, options.get("where", _WHERE)), keys, *args, **options)

    def land(
        self, table: AddressTable, alloc: Alloc, free: Free, *, device: int | None = None, room: int | None = None,
        where: str = "land()",
    ) -> Landed:
        """The table in one wave (:func:`read_wave`); ``device`` is not taken (waves land in host memory)."""
        return read_wave(self, self.objects(table.keys, where), table.keys, table.byte_ranges(), alloc, free,
                         expect=table.expect, exact=table.exact, room=room, max_bytes=table.max_request, where=where)
