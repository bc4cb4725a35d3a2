"""One wave of concurrent requests: many objects (or byte ranges of them) of one remote backend, read into
one buffer in one call of :func:`~gdsstore.engine.remote.core.read_table` (the native core for HTTP(S) and S3,
the GIL released; WebHDFS's own pieces reader), one more for objects larger than their room. The wave is
planned, handed over and answered as columns (numpy arrays, one entry per request): no Python object or call
per chunk, only per failed request.

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
import dataclasses
import itertools
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import numpy as np

import gdsstore.trace as _trace
from gdsstore import policy
from gdsstore.engine import native
from gdsstore.engine.backend import Backend
from gdsstore.engine.bounce import DeviceCopy
from gdsstore.engine.buffers import as_io_buffer
from gdsstore.engine.landing import ALIGN as _ALIGN
from gdsstore.engine.landing import MISSING_KEY as _MISSING
from gdsstore.engine.landing import AddressTable, Alloc, Free, Landed, slot_layout
from gdsstore.engine.ranges import ByteRange, coalesce_ranges
from gdsstore.engine.remote import core
from gdsstore.engine.remote.core import CoreRoot, CoreSource
from gdsstore.engine.remote.keys import plain_remote_keys
from gdsstore.engine.remote.reader import RemoteFile
from gdsstore.engine.remote.retry import RemoteIOError, RetryPolicy
from gdsstore.engine.remote.room import WaveBuffer, pad, wave_buffer

__all__ = ["WaveCopy", "WaveReads", "read_wave"]

_NONE = -1  # in the request columns: no value (no limit, no expected size, not a suffix, no slot)


@dataclass(slots=True)
class _Requests:
    """A wave's requests as columns, one entry per request (int64, :data:`_NONE` for none): ``key`` from
    ``offset`` (``limit`` bytes at most), or its last ``suffix`` bytes; ``expect``: the size the answer must
    have; ``slot``: a slot laid out before the wave (else room set aside); ``base`` and ``got``: where its
    bytes landed and how many (-1: missing or failed). ``of_item``: each item's request; ``item_start`` and
    ``item_end``: each item's range, for items of ranges that share a request."""

    keys: list[str]
    offset: np.ndarray
    limit: np.ndarray
    expect: np.ndarray
    suffix: np.ndarray
    slot: np.ndarray
    of_item: np.ndarray
    item_start: np.ndarray
    item_end: np.ndarray
    base: np.ndarray = dataclasses.field(init=False)
    got: np.ndarray = dataclasses.field(init=False)

    def __post_init__(self) -> None:
        self.base = np.full(len(self.keys), -1, np.int64)
        self.got = np.full(len(self.keys), -1, np.int64)

    def __len__(self) -> int:
        return len(self.keys)


def _column(values: Sequence[int | None]) -> np.ndarray:
    """``values`` as an int64 column, None as :data:`_NONE`."""
    return np.array([_NONE if v is None else v for v in values], np.int64)


def _span(br: ByteRange | None) -> tuple[int, int | None] | None:
    """The core's ``(start, end)`` of one item; None: nothing to ask (the last 0 bytes: "-0" would be the whole)."""
    if br is None:
        return 0, None
    if br.kind == "suffix":
        return (-br.start, None) if br.start else None
    return br.start, None if br.kind == "offset" else br.start + br.nbytes


def _landed(res: core.CoreResult) -> int | None:
    """The bytes a piece landed (0: a range past the object's end, a 416: zarr's clamp); None: it failed."""
    if res.error is None:
        return res.size
    return 0 if res.kind == "status" and res.status == 416 else None


def _failure(res: core.CoreResult, key: str, offset: int, limit: int | None, expect: int | None,
             where: str) -> BaseException:
    """Why a request of ``key`` (from ``offset``, ``limit`` bytes at most) failed, in the words every read uses."""
    if res.kind == "length" and res.total >= 0:
        n = res.total - offset if limit is None else min(limit, res.total - offset)
        what = "object" if limit is None else f"range at {offset}"
        return RemoteIOError(f"{where}: {key!r}: the {what} is {n} bytes, not the {expect} expected")
    return res.error or RemoteIOError(f"{where}: {key!r}: no answer")


def _suffix_is_whole(src: CoreSource, suffix: int | None, res: core.CoreResult) -> bool:
    """A suffix read answered with the whole object (moto does where the suffix is longer than the object,
    as RFC 9110 allows): the object is read whole where it is no longer than the suffix."""
    return res.kind == "range_ignored" and suffix is not None and src.stat() <= suffix


def _plan(keys: Sequence[str], ranges: Sequence[ByteRange | None], expect: np.ndarray | None, exact: bool,
          max_gap: int, max_bytes: int) -> tuple[_Requests, int]:
    """The requests of a wave and the bytes of its fixed slots."""
    if ranges.count(None) == len(ranges):
        return _plan_whole(keys, expect)
    n = len(keys)
    rkeys: list[str] = []
    cols: list[tuple[int, int | None, int | None, int | None]] = []  # offset, limit, expect, suffix
    of_item = np.zeros(n, np.int64)
    start, end = np.zeros(n, np.int64), np.zeros(n, np.int64)
    by_key: dict[str, list[int]] = {}
    for i, (key, br) in enumerate(zip(keys, ranges)):
        if br is not None and br.kind == "range":
            by_key.setdefault(key, []).append(i)
            continue
        of_item[i] = len(rkeys)
        rkeys.append(key)
        if br is None:
            cols.append((0, None, None if expect is None else int(expect[i]), None))
        else:
            cols.append((br.start, None, None, None) if br.kind == "offset" else (0, None, None, br.start))
    for key, idxs in by_key.items():
        spans = [(ranges[i].start, max(ranges[i].start, ranges[i].end or 0)) for i in idxs]  # type: ignore[union-attr]
        for a, b, group in coalesce_ranges(spans, max_gap, max_bytes):
            members = [idxs[k] for k in group]
            of_item[members] = len(rkeys)
            start[members] = [ranges[i].start for i in members]  # type: ignore[union-attr]
            end[members] = [ranges[i].end or 0 for i in members]  # type: ignore[union-attr]
            rkeys.append(key)
            cols.append((a, b - a, (b - a) if exact else None, None))
    offset, limit, sizes, suffix = (_column(c) for c in zip(*cols)) if cols else [np.zeros(0, np.int64)] * 4
    reqs = _Requests(rkeys, offset, limit, sizes, suffix, np.full(len(rkeys), _NONE, np.int64), of_item, start, end)
    sized = (sizes >= 0) | (limit >= 0)
    slots, fixed = slot_layout(np.where(sizes >= 0, sizes, limit)[sized])
    reqs.slot[sized] = slots
    return reqs, fixed


def _plan_whole(keys: Sequence[str], expect: np.ndarray | None) -> tuple[_Requests, int]:
    """:func:`_plan` of whole objects (a wave of chunks): one request each, in slots where their sizes are
    known (``expect``), else in the room."""
    n = len(keys)
    none = np.full(n, _NONE, np.int64)
    zeros = np.zeros(n, np.int64)
    if expect is None:
        sizes, slots, fixed = none, none.copy(), 0
    else:
        sizes = np.array(expect, dtype=np.int64)
        slots, fixed = slot_layout(sizes)
    return _Requests(list(keys), zeros, none, sizes, none, slots, np.arange(n), zeros, zeros), fixed


def _asks(objects: Objects, reqs: _Requests, room: WaveBuffer, each: int,
          errs: dict[int, BaseException]) -> tuple[core.PieceTable, np.ndarray]:
    """The core's pieces of ``reqs`` and each one's request: in its slot, or in room set aside (``each`` bytes).
    A key refused in ``objects`` fails its request in ``errs``; a request with nothing to ask (an empty range,
    the last 0 bytes) is done at once."""
    ask = np.ones(len(reqs), bool)
    if objects.refused:
        for k, key in enumerate(reqs.keys):
            path = objects.paths[key]
            if isinstance(path, BaseException):
                errs[k], ask[k] = path, False
    slotted = reqs.slot >= 0
    size = np.where(reqs.expect >= 0, reqs.expect, np.maximum(reqs.limit, 0))
    empty = ask & ((slotted & (size <= 0)) | (~slotted & (reqs.suffix == 0)))  # "-0" would be the whole object
    reqs.got[empty] = 0
    reqs.base[empty] = np.maximum(reqs.slot[empty], 0)
    ask &= ~empty
    start = np.where(reqs.suffix > 0, -reqs.suffix, reqs.offset)
    end = np.where(reqs.limit >= 0, reqs.offset + reqs.limit, _NONE)
    slot, cap = reqs.slot.copy(), np.where(slotted, size, 0)
    _reserve(reqs, np.flatnonzero(ask & ~slotted), room, each, slot, cap)
    ks = np.flatnonzero(ask)
    paths = objects.paths
    if len(ks) == len(reqs):
        names = list(map(paths.__getitem__, reqs.keys))
    else:
        names = [paths[reqs.keys[k]] for k in ks.tolist()]
    return core.PieceTable(names, start[ks], end[ks], reqs.expect[ks], slot[ks], cap[ks]), ks  # type: ignore[arg-type]


def _reserve(reqs: _Requests, open_sized: np.ndarray, room: WaveBuffer, each: int, slot: np.ndarray,
             cap: np.ndarray) -> None:
    """Room for the requests ``open_sized`` (of unknown size), in turn: a suffix all of it where the room has
    it, else (and any other) an equal share ``each``; where none is left, none (asked with no room, it tells
    its size and lands in the second call)."""
    if not (reqs.suffix[open_sized] > 0).any():  # shares alike: as many as fit, at once
        fit = len(open_sized) if each == 0 else min(len(open_sized), (room.cap - room.used) // each)
        at = room.used + each * np.arange(fit, dtype=np.int64)
        room.used += each * fit
        slot[open_sized[:fit]] = reqs.base[open_sized[:fit]] = at
        cap[open_sized[:fit]] = each
        slot[open_sized[fit:]] = reqs.base[open_sized[fit:]] = cap[open_sized[fit:]] = 0
        return
    for k in open_sized.tolist():
        n = int(reqs.suffix[k])
        offset, c = (room.reserve(pad(n)), n) if n > 0 else (-1, 0)
        if offset < 0:
            offset, c = room.reserve(each), each
        if offset < 0:
            offset, c = 0, 0
        slot[k] = reqs.base[k] = offset
        cap[k] = c


def _core_done(reqs: _Requests, ks: np.ndarray, res: core.TableResult, errs: dict[int, BaseException],
               where: str) -> None:
    """Record what the core did. An object larger than its room is left for a second call."""
    ok = res.answered()
    reqs.got[ks[res.missing]] = reqs.base[ks[res.missing]] = -1
    done = ks[ok]
    reqs.got[done] = res.size[ok]
    reqs.base[done] = np.where(reqs.slot[done] >= 0, reqs.slot[done], reqs.base[done])
    for j, r in res.failed.items():
        k = int(ks[j])
        n = _landed(r)
        if n is not None:
            reqs.got[k] = n
            if reqs.slot[k] >= 0:
                reqs.base[k] = reqs.slot[k]
        elif r.kind == "too_large" and r.total >= 0:
            reqs.base[k] = -1
        else:
            reqs.got[k], reqs.base[k] = -1, -1
            limit, expect = int(reqs.limit[k]), int(reqs.expect[k])
            r.error = _failure(r, reqs.keys[k], int(reqs.offset[k]), None if limit < 0 else limit,
                               None if expect < 0 else expect, where)
            if not isinstance(r.error, _MISSING):
                errs[k] = r.error


#: One call of the core in a wave: each piece's request, and what the pieces got.
_Call = tuple[np.ndarray, core.TableResult]


def _answers(calls: list[_Call]) -> list[tuple[int, str | None]]:
    """Each landed answer of the wave's calls: its request and the ETag it carried."""
    out: list[tuple[int, str | None]] = []
    for ks, res in calls:
        out.extend(itertools.compress(zip(ks.tolist(), res.etags, strict=True), res.answered().tolist()))
    return out


def _one_version(reqs: _Requests, calls: list[_Call], errs: dict[int, BaseException]) -> dict[str, str]:
    """The pieces of one object came from one version of it (their ETags agree), else each fails; returns
    each object's ETag where every one of its landed answers carried it."""
    landed = _answers(calls)
    keys = reqs.keys
    if len(set(keys)) == len(keys):  # one request per object (a wave of chunks): one answer each
        return {keys[k]: tag for k, tag in landed if tag is not None}
    first: dict[str, str] = {}
    changed: set[str] = set()
    untagged: set[str] = set()
    for k, tag in landed:
        if tag is None:
            untagged.add(keys[k])
        elif first.setdefault(keys[k], tag) != tag:
            changed.add(keys[k])
    for k, _ in landed if changed else ():
        if k not in errs and keys[k] in changed:
            errs[k] = RemoteIOError(f"{keys[k]!r}: the object changed during the wave (ETags differ)")
            reqs.got[k], reqs.base[k] = -1, -1
    return {key: tag for key, tag in first.items() if key not in changed and key not in untagged}


def _regrow(reqs: _Requests, table: core.PieceTable, ks: np.ndarray, big: list[tuple[int, int]], room: WaveBuffer,
            alloc: Alloc, free: Free) -> tuple[core.PieceTable, np.ndarray]:
    """The pieces (``big``: ``(piece, total)`` of ``table``) of the objects that did not fit their room again,
    each into room of the size its first answer told (``total``): in the wave's buffer, moved to a larger one
    first where the room is short."""
    sizes = []
    for j, total in big:
        k = int(ks[j])
        suffix = int(reqs.suffix[k])
        sizes.append(min(suffix, total) if suffix >= 0 else max(0, total - int(reqs.offset[k])))
    need = sum(pad(n) for n in sizes)
    if room.cap - room.used < need:
        room.grow(reqs, need, alloc, free)
    at = np.array([room.reserve(pad(n)) for n in sizes], np.int64)
    js = np.array([j for j, _ in big], np.int64)
    reqs.base[ks[js]] = at
    again = table.take(js)
    again.slots, again.caps = at, np.array(sizes, np.int64)
    return again, ks[js]


class WaveCopy(Protocol):
    """Where a wave's bytes are copied while the wave runs (a GPU's memory:
    :class:`~gdsstore.engine.bounce.DeviceCopy`): each part of about :attr:`part` bytes once all its requests
    landed, the rest after the wave (:class:`_Parts`). The copies land at the bytes' offsets in the buffer."""

    #: bytes of one part
    part: int

    def copy(self, buf: np.ndarray, lo: int, hi: int) -> None:
        """Copy ``buf[lo:hi]`` to the same offsets of the target (a larger ``buf`` than before: a new target)."""

    def result(self, nbytes: int, parts: int) -> Any:
        """The target's first ``nbytes`` once every copy is done (``parts``: copied while the wave ran)."""

    def abandon(self) -> None:
        """The wave failed: wait for the copies in flight (nothing writes into the target after this)."""


class _Parts:
    """A wave's pieces (the rows of its first call's table) in runs of about ``copy.part`` bytes of slots, each
    copied to ``copy`` once every piece of it landed (:meth:`told`); :meth:`finish` copies the rest: the runs
    where a piece failed or came later (retries, a second call, an object that did not fit its room), and
    bytes of the buffer no run holds. Every byte's last copy is made after it landed."""

    def __init__(self, copy: WaveCopy, table: core.PieceTable, room: WaveBuffer) -> None:
        self.copy, self.room, self.buf = copy, room, room.buf
        caps = np.asarray(table.caps, np.int64)
        slots = np.asarray(table.slots, np.int64)
        n = len(caps)
        if n == 0:
            self.ends = self.lo = self.hi = np.zeros(0, np.int64)
        else:
            held = np.cumsum(caps)
            cuts = np.searchsorted(held, np.arange(copy.part, int(held[-1]), max(1, copy.part)), "left") + 1
            self.ends = np.unique(np.append(cuts[cuts < n], n))
            starts = np.append(0, self.ends[:-1])
            has = caps > 0  # a piece with no room lands later, elsewhere
            self.lo = np.minimum.reduceat(np.where(has, slots, np.iinfo(np.int64).max), starts)
            self.hi = np.maximum.reduceat(np.where(has, slots + caps, 0), starts)
        self.copied = np.zeros(len(self.ends), bool)
        self.failed: Exception | None = None

    def told(self, k: int, ok: bool) -> None:
        """Run ``k`` is over: copied where every piece landed."""
        if ok and self.failed is None and self.room.buf is self.buf and self.lo[k] < self.hi[k]:
            try:
                self.copy.copy(self.buf, int(self.lo[k]), int(self.hi[k]))
            except Exception as exc:  # the wave goes on; its bytes stay in the buffer (:meth:`finish`)
                self.failed = exc
                return
            self.copied[k] = True

    def finish(self) -> Any:
        """Copy what no run copied; the target's bytes (:meth:`WaveCopy.result`), or None where a copy failed:
        the bytes are then the buffer's alone, and the caller copies them as it would without parts (traced)."""
        if self.failed is None:
            try:
                return self._rest()
            except Exception as exc:
                self.failed = exc
        self.copy.abandon()
        _trace.record("h2d", "parts-off", f"a copy during the wave failed ({type(self.failed).__name__}: "
                      f"{self.failed}): the window is copied after it", 0, 0.0)
        return None

    def _rest(self) -> Any:
        """:meth:`finish` while every copy goes through."""
        buf, used = self.room.buf, self.room.used
        if buf is not self.buf:  # moved to a larger buffer: its offsets are new
            self.copy.copy(buf, 0, used)
            return self.copy.result(used, 0)
        spans = self.lo < self.hi
        for k in np.flatnonzero(spans & ~self.copied).tolist():
            self.copy.copy(buf, int(self.lo[k]), min(int(self.hi[k]), used))
        at = 0  # bytes no run holds: room the second call used (a slot's padding is nobody's)
        for lo, hi in sorted(zip(self.lo[spans].tolist(), self.hi[spans].tolist())):
            if min(lo, used) - at >= _ALIGN:
                self.copy.copy(buf, at, min(lo, used))
            at = max(at, hi)
        if at < used:
            self.copy.copy(buf, at, used)
        return self.copy.result(used, int(self.copied.sum()))


def _core(backend: WaveReads, objects: Objects, reqs: _Requests, room: WaveBuffer, open_sized: int, where: str,
          s: policy.Settings, errs: dict[int, BaseException], alloc: Alloc, free: Free,
          copy: WaveCopy | None = None) -> tuple[dict[str, str], _Parts | None]:
    """The wave: one call, and one more for objects larger than their room. Failures for good go into
    ``errs``; returns the ETag of each object whose landed answers all carried one, and the parts copied to
    ``copy`` while it ran."""
    root, store = backend.core, objects.store
    each = (room.cap - room.used) // max(1, open_sized) // _ALIGN * _ALIGN
    table, ks = _asks(objects, reqs, room, each, errs)
    retry = RetryPolicy.from_settings(s)
    calls: list[_Call] = []
    parts = None if copy is None else _Parts(copy, table, room)

    def call(table: core.PieceTable, ks: np.ndarray, told: _Parts | None = None) -> core.TableResult:
        res = core.read_table(store, root.base, table, room.buf, retry=retry, concurrency=s.remote_wave_concurrency,
                              timeout=core.request_timeout(s), segments=None if told is None else told.ends,
                              on_segment=None if told is None else told.told)
        _core_done(reqs, ks, res, errs, where)
        calls.append((ks, res))
        return res

    res = call(table, ks, parts)
    big = [(j, r.total) for j, r in res.failed.items() if r.kind == "too_large" and r.total >= 0]
    if big:
        again, big_ks = _regrow(reqs, table, ks, big, room, alloc, free)
        call(again, big_ks)
        for k in big_ks.tolist():
            if reqs.base[k] < 0 and k not in errs:  # still too large: the object grew between the two calls
                reqs.got[k] = -1
                errs[k] = RemoteIOError(f"{where}: {root.base}{reqs.keys[k]}: the object changed during the wave")
    _suffixes_of_small_objects(backend, reqs, calls, room, errs, alloc, free, where)
    return _one_version(reqs, calls, errs), parts


def _suffixes_of_small_objects(backend: WaveReads, reqs: _Requests, calls: list[_Call], room: WaveBuffer,
                               errs: dict[int, BaseException], alloc: Alloc, free: Free, where: str) -> None:
    """Suffix reads answered with the whole object (:func:`_suffix_is_whole`): read whole, into the room."""
    for ks, res in calls:
        for j, r in res.failed.items():
            k = int(ks[j])
            suffix = int(reqs.suffix[k])
            if k not in errs or not _suffix_is_whole(backend.source(reqs.keys[k], where), suffix if suffix >= 0
                                                     else None, r):
                continue
            data = backend.get(reqs.keys[k], lambda n: np.empty(n, np.uint8))
            n = int(data.nbytes)
            if room.cap - room.used < pad(n):
                room.grow(reqs, pad(n), alloc, free)
            at = reqs.base[k] = room.reserve(pad(n))
            room.buf[at : at + n] = data
            reqs.got[k] = n
            del errs[k]


def _place(reqs: _Requests, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Each item's place in the buffer: its request's, moved by where it starts in it (clamped)."""
    if n == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    r = reqs.of_item
    got, base = reqs.got[r], reqs.base[r]
    done = got >= 0
    offsets = np.where(done, base, 0)
    sizes = np.where(done, got, -1)
    shared = done & (reqs.limit[r] >= 0)  # ranges sharing a request
    if shared.any():
        start, end, offset, got = reqs.item_start[shared], reqs.item_end[shared], reqs.offset[r[shared]], got[shared]
        into = start - offset
        offsets[shared] = base[shared] + into
        sizes[shared] = np.where(into <= got, np.maximum(0, np.minimum(end, offset + got) - start), 0)
    return offsets, sizes


#: Who a wave's messages name where its caller does not say.
_WHERE = "read_wave()"


@dataclass(frozen=True, slots=True)
class Objects:
    """A wave's objects as their backend resolved them before the wave (:meth:`WaveReads.objects`): the core's
    store of this moment and each key's object path, or the exception that refused the key (``refused``: some
    key was)."""

    store: Any
    paths: dict[str, str | BaseException]
    refused: bool = False


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
    copy: WaveCopy | None = None,
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
        copy: where the bytes are copied while the wave runs, in parts (:class:`WaveCopy`, a GPU's memory):
            the result's :attr:`Landed.dev <gdsstore.engine.landing.Landed.dev>`.

    Raises:
        OSError: a request failed for good (``errors="raise"``), naming its URL and the reason.
    """
    s = policy.settings()
    items = list(ranges) if ranges is not None else [None] * len(keys)
    reqs, fixed = _plan(keys, items, expect, exact, max_gap, max_bytes or s.remote_max_range_size)
    open_sized = int((reqs.slot < 0).sum())
    t0 = time.perf_counter()
    buf = wave_buffer(backend.room_hint, fixed, open_sized, room, alloc)
    errs: dict[int, BaseException] = {}
    dev = None
    try:
        etags, parts = _core(backend, objects, reqs, buf, open_sized, where, s, errs, alloc, free, copy) if len(
            reqs) else ({}, None)
        if errs and errors == "raise":
            raise errs[min(errs)]
        if copy is not None:
            dev = parts.finish() if parts is not None else copy.result(0, 0)
    except BaseException:
        if copy is not None:
            copy.abandon()
        free(buf.owner)
        raise
    offsets, sizes = _place(reqs, len(keys))
    if _trace.active() and len(reqs):
        _trace.record("read", backend.route, f"wave: {core.wave_reason(s, objects.store)}", int(sizes.clip(0).sum()),
                      time.perf_counter() - t0, str(backend.url), None, requests=len(reqs))
    if room is None and open_sized:
        backend.room_hint = int(reqs.got[reqs.slot < 0].max(initial=0))
    split = core.split_bytes if native.load() else None  # else Landed.all_bytes copies one by one
    return Landed(buf.buf[: buf.used], offsets, sizes, buf.owner, dev, requests=len(reqs), split=split, etags=etags,
                  errors=_item_errors(reqs, errs, len(keys)) if errors == "return" else None)


def _item_errors(reqs: _Requests, errs: dict[int, BaseException], n: int) -> list[BaseException | None]:
    """Each item's failure (None: it landed or is missing), from its request's."""
    out: list[BaseException | None] = [None] * n
    if errs:
        for i in np.flatnonzero(np.isin(reqs.of_item, list(errs))).tolist():
            out[i] = errs[int(reqs.of_item[i])]
    return out


def _copy_into(buf: Any, data: np.ndarray, where: str) -> Any:
    """``data`` into ``buf`` (host or device memory); returns ``buf``."""
    b = as_io_buffer(buf, writable=True, where=where)
    if b.host is not None:
        b.host_slice(0, data.nbytes)[:] = data
    elif data.nbytes:
        from gdsstore.engine import cuda

        assert b.device is not None
        cuda.memcpy_htod(b.device, b.ptr, data.ctypes.data, data.nbytes)
    return buf


class WaveReads(Backend):
    """A remote backend: :meth:`get` of one object, :meth:`get_many` and :meth:`land` as one :func:`read_wave`."""

    waves = True
    lands_on_device = True
    #: Where the backend's objects are (the native core's store, or WebHDFS's pieces reader), set once.
    core: CoreRoot
    #: The trace's route of the backend's reads (``"http"``, ``"s3"``, ``"webhdfs"``).
    route: str = ""

    @abc.abstractmethod
    def core_path(self, key: str, where: str) -> str:
        """The object path of ``key`` for the core (raises ``ValueError`` for a refused key)."""

    def plain_object_paths(self, keys: Sequence[str]) -> list[str] | None:
        """:meth:`core_path` of each key, for keys that :func:`~gdsstore.engine.remote.keys.plain_remote_keys`
        passes, without a check each; None where some key needs :meth:`core_path` (the default)."""
        return None

    def object_paths(self, keys: Sequence[str], where: str) -> list[str | BaseException]:
        """:meth:`core_path` of each key, or the exception that refused it (``TypeError``, ``ValueError``,
        ``FileNotFoundError``): a wave asks for thousands at once, so plain keys take one scan of them all."""
        if plain_remote_keys(keys) and (paths := self.plain_object_paths(keys)) is not None:
            return paths  # type: ignore[return-value]  # (lists are invariant; nothing appends to it)
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
        span = _span(byte_range)
        if span is None:
            return alloc(0)
        scratch = np.empty(s.task_size, np.uint8)
        store = src.core.store()
        res = core.read_one(store, src.core.base, (src.path, *span, None, 0, s.task_size), scratch, s)
        n = _landed(res)
        suffix = byte_range.start if byte_range is not None and byte_range.kind == "suffix" else None
        if n is not None:
            buf = _copy_into(alloc(n), scratch[:n], where)
        elif res.kind == "too_large" and res.total >= 0:
            offset, n = byte_range.resolve(res.total) if byte_range is not None else (0, res.total)
            src.etag = res.etag
            buf = alloc(n)
            if n:
                with RemoteFile(src, size=res.total) as f:
                    f.read(buf, n, offset)
        elif _suffix_is_whole(src, suffix, res):
            return self.get(key, alloc)
        else:
            start, end = span
            raise _failure(res, key, max(start, 0), None if end is None else end - start, None, where)
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
        paths = self.object_paths(distinct, where)
        refused = not set(map(type, paths)) <= {str}
        return Objects(self.core.store(), dict(zip(distinct, paths, strict=True)), refused)

    def get_many(self, keys: Sequence[str], *args: Any, **options: Any) -> Landed:
        # docstring inherited (the options: read_wave's)
        return read_wave(self, self.objects(keys, options.get("where", _WHERE)), keys, *args, **options)

    def land(
        self, table: AddressTable, alloc: Alloc, free: Free, *, device: int | None = None, room: int | None = None,
        where: str = "land()",
    ) -> Landed:
        """The table in one wave (:func:`read_wave`); on ``device`` (``gpu.wave_copy_bytes``): copied there in
        parts as they land (:class:`~gdsstore.engine.bounce.DeviceCopy`), the ``Landed``'s ``dev``."""
        part = policy.settings().gpu_wave_copy_bytes
        copy = None
        if device is not None and part:
            copy = DeviceCopy(device, part)
        return read_wave(self, self.objects(table.keys, where), table.keys, table.byte_ranges(), alloc, free,
                         expect=table.expect, exact=table.exact, room=room, max_bytes=table.max_request, where=where,
                         copy=copy)
