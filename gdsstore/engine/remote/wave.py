"""One wave of concurrent requests: many objects (or byte ranges of them) of one remote backend,
read into one buffer.

Every request of a selection starts at once, at most ``remote.wave_concurrency`` in flight, with no
size lookup before it: a whole object is one GET whose answer tells its size
(:func:`~gdsstore.engine.remote.reader.get_object`, which also fetches the rest of a large object as
concurrent ranges); byte ranges of one object that touch or overlap (closer than ``max_gap``) become one
request (:func:`~gdsstore.engine.ranges.coalesce_ranges`) and are split back. Retries, the
``Range``/``Content-Range`` checks and the object-changed check (ETag, version id, modification
time) are the reader's, per request.

Who sends them: ranges and objects of unknown size of ``remote.native_min_size`` and more, and suffixes
(one GET, no size lookup), go to the native route (obstore, :mod:`.obstore_route`; kvikio for servers one trusts, :mod:`.native`); the rest,
and whatever the native route does not take, are pipelined on kept-alive connections over plain HTTP
(:func:`.rawhttp.pipeline`), and what is left goes through the reader, one request per piece.

Bodies land straight in one buffer from the caller's ``alloc`` (pinned host memory for the GPU
pipeline): ranges and objects of known size in slots laid out before the wave starts, objects of
unknown size in the room after them, taken in the order their answers arrive. Only when that room
runs out do the late objects land in their own buffers and the whole is copied once into a larger one.

A missing key is a ``-1`` size (zarr's "no such chunk"); any other failure fails its item with the
URL and the reason (``errors="raise"``: the first one is raised once every request has stopped;
``"return"``: each failed item gets its exception). One trace row per wave.
"""

from __future__ import annotations

import dataclasses
import functools
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

import gdsstore.trace as _trace
from gdsstore import policy
from gdsstore.engine.backend import Wave
from gdsstore.engine.pool import run_pieces
from gdsstore.engine.ranges import ByteRange, coalesce_ranges
from gdsstore.engine.remote import core, native, obstore_route, rawhttp
from gdsstore.engine.remote.reader import RangeRequest, RangeSource, check_first_response, get_object
from gdsstore.engine.remote.retry import RemoteIOError, RetryPolicy

__all__ = ["Wave", "WaveReads", "get_one", "read_wave"]

_ALIGN = 64  # slots start on a cache line (nvCOMP wants 8-16 bytes)
_MISSING = (FileNotFoundError, IsADirectoryError, NotADirectoryError)
# Room set aside per object of unknown size, and in all: host memory is only committed where bytes
# land, so generous room costs nothing; more than this costs one copy at the end.
_ROOM = 1 << 20
_ROOM_MAX = 1 << 30
_PIPE_BYTES = 128 << 20  # a pipelined connection's share of a wave's bytes
_LARGE = 1 << 20

Alloc = Callable[[int], tuple[np.ndarray, Any]]


def _pad(n: int) -> int:
    return (n + _ALIGN - 1) // _ALIGN * _ALIGN


@dataclass
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

    def __init__(self, fixed: int, room: int, alloc: Alloc) -> None:
        self.buf, self.owner = alloc(fixed + room)
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
    fixed = 0
    for r in reqs:
        n = r.expect if r.expect is not None else r.limit
        if n is not None:
            r.slot = fixed
            fixed += _pad(n)
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


class _Again(Exception):
    """A pipelined answer the wave does not take: the request goes the usual way."""


_Take = Callable[[int, Any, int], "memoryview | None"]  # (status, headers, length) -> where the body goes


def _answer(r: _Request, want: int, url: str, room: _Room, where: str) -> _Take:
    def handle(status: int, headers: Any, length: int) -> memoryview | None:
        if status == 404:
            r.got, r.base = -1, -1
            return None
        if status not in (200, 206):
            raise rawhttp.Stop  # an error or a redirect: the usual way follows, retries, maps it
        what = f"GET {url} bytes={r.offset}-{r.offset + want - 1}"
        n, total = check_first_response(status, headers, want, what, r.offset)
        end = total if r.limit is None else min(total, r.offset + r.limit)
        if r.offset + n != end or length != n:
            raise _Again  # more follows (larger than task_size): the usual way reads it in ranges
        return memoryview(_slot(r, room, url, where)(n))

    return handle


def _native(backend: Any, reqs: list[_Request], room: _Room, share: int, where: str) -> tuple[list[int], int]:
    """Requests through the native client (``remote.native``: obstore, :mod:`.obstore_route`; or kvikio,
    :mod:`.native`) where it runs; returns the indices of the requests still to ask (those it did not
    take or failed) and how many it landed. ``share``: the room set aside per object of unknown size,
    its expected size (requests expected under ``remote.native_min_size`` stay with the usual way)."""
    s = policy.settings()
    if not s.remote_native or not reqs:
        return list(range(len(reqs))), 0
    if s.remote_native_client == "kvikio":
        return _kvikio(backend, reqs, room, where)
    if not obstore_route.available():
        return list(range(len(reqs))), 0
    picked: list[int] = []
    asks: list[obstore_route.NativeRead] = []
    for k, r in enumerate(reqs):
        if not _for_obstore(r, share, s.remote_native_min_size):
            continue
        url = _plain_url(backend, r.key, where)
        if url is None or not obstore_route.takes(url):
            continue
        if r.suffix is not None:
            asks.append(obstore_route.NativeRead(url, 0, -1, functools.partial(room.take, r), suffix=r.suffix))
        else:
            n = int(r.limit if r.limit is not None else -1)
            dest = room.buf[r.slot : r.slot + n] if r.slot >= 0 else functools.partial(room.take, r)
            asks.append(obstore_route.NativeRead(url, r.offset, n, dest, whole=r.limit is None,
                                                 exact=r.expect is not None))
        picked.append(k)
    obstore_route.fetch(asks)
    return _landed(reqs, [(k, ask.got, ask.error) for k, ask in zip(picked, asks)])


def _first_route(backend: Any, reqs: list[_Request], room: _Room, share: int, open_sized: int, where: str,
                 s: policy.Settings, errs: dict[int, BaseException]) -> tuple[policy.Decision, list[int], int]:
    """The wave's transport, decided once (the native core, else the native clients); what it left to
    ask the usual way and how many it landed. Failures for good go into ``errs``."""
    transport = policy.decide_wave_transport(
        takes_core=hasattr(backend, "core_target"), requests=len(reqs),
        core_missing=None if s.remote_core == "off" or core.available() else core.unavailable_reason(), s=s)
    if transport.route == "core":
        todo, landed, core_errs = _core(backend, reqs, room, open_sized, where, s)
        errs.update(core_errs)
        return transport, todo, landed
    return (transport, *_native(backend, reqs, room, share, where))


def _core_piece(r: _Request, room: _Room, each: int) -> core.CorePiece | None:
    """``r`` as one piece of the core's wave: in its slot, or in room set aside (``each`` bytes)."""
    if r.suffix is not None:
        at = room.reserve(r, _pad(r.suffix))
        return None if at < 0 else core.CorePiece("", -r.suffix, None, None, at, r.suffix)
    end = None if r.limit is None else r.offset + r.limit
    if r.slot >= 0:
        n = int(r.expect if r.expect is not None else r.limit or 0)
        if n <= 0:
            return None  # an empty request: the usual way answers it without a body
        return core.CorePiece("", r.offset, end, r.expect, r.slot, n)
    at = room.reserve(r, each) if each > 0 else -1
    return None if at < 0 else core.CorePiece("", r.offset, end, r.expect, at, each)


def _core_done(reqs: list[_Request], ks: list[int], results: list[core.CoreResult],
               errs: dict[int, BaseException], where: str) -> set[int]:
    """Record what the core did; the requests it settled (landed, missing or failed for good)."""
    done: set[int] = set()
    etags: dict[str, set[str]] = {}
    for k, res in zip(ks, results, strict=True):
        r = reqs[k]
        if res.error is None:
            r.got = res.size
            if r.slot >= 0:
                r.base = r.slot
            if res.etag is not None:
                etags.setdefault(r.key, set()).add(res.etag)
            done.add(k)
        elif (res.kind in core.PASS_KINDS or res.kind == "range_ignored"
              or (res.kind == "status" and "HTTP 416" in str(res.error))):
            # The usual way asks again, with its own rules (room, an empty range; a 200 to a suffix of an
            # empty object, which it tells apart from a server that ignores Range and then refuses).
            r.base = -1
        else:
            r.got, r.base = -1, -1
            if res.kind == "length" and res.total >= 0:  # the same words as the usual way's check (_slot)
                n = res.total - r.offset if r.limit is None else min(r.limit, res.total - r.offset)
                what = "object" if r.limit is None else f"range at {r.offset}"
                res.error = RemoteIOError(f"{where}: {r.key!r}: the {what} is {n} bytes, not the {r.expect} expected")
            if not isinstance(res.error, _MISSING):
                errs[k] = res.error
            done.add(k)
    for k in list(done):  # the pieces of one object came from one version of it
        r = reqs[k]
        if k not in errs and len(etags.get(r.key, ())) > 1:
            errs[k] = RemoteIOError(f"{r.key!r}: the object changed during the wave (ETags differ)")
            r.got, r.base = -1, -1
    return done


def _core(backend: Any, reqs: list[_Request], room: _Room, open_sized: int, where: str,
          s: policy.Settings) -> tuple[list[int], int, dict[int, BaseException]]:
    """The wave through the native core (:mod:`.core`): one call per store; returns the requests still
    to ask the usual way, how many landed, and the failures for good."""
    each = (room.cap - room.used) // max(1, open_sized) // _ALIGN * _ALIGN
    groups: dict[int, tuple[Any, str, list[int], list[core.CorePiece]]] = {}
    left: list[int] = []
    for k, r in enumerate(reqs):
        try:
            target = backend.core_target(r.key, where)
        except (ValueError, OSError):
            target = None  # the usual way raises it, in its place
        piece = None if target is None else _core_piece(r, room, each)
        if target is None or piece is None:
            left.append(k)
            continue
        store, base, path = target
        g = groups.setdefault(id(store), (store, base, [], []))
        g[2].append(k)
        g[3].append(dataclasses.replace(piece, path=path))
    errs: dict[int, BaseException] = {}
    landed = 0
    retry = RetryPolicy.from_settings(s)
    for store, base, ks, pieces in groups.values():
        results = core.read_wave(store, base, pieces, room.buf, retry=retry,
                                 concurrency=s.remote_wave_concurrency, timeout=s.remote_timeout or 1e9)
        done = _core_done(reqs, ks, results, errs, where)
        landed += len(done)
        left += [k for k in ks if k not in done]
    return sorted(left), landed, errs


def _for_obstore(r: _Request, share: int, min_size: int) -> bool:
    """Whether obstore should ask ``r``: a suffix always (one GET instead of a size lookup and a GET);
    a range, or a whole object of unknown size (``share``: its expected size), of ``min_size`` or more;
    never a whole object of known size (a chunk without compression), which lands straight in its slot
    through the pipelined client, faster than obstore's body and one more copy (measured on the H200)."""
    if r.suffix is not None:
        return True
    if r.limit is None:
        return r.offset == 0 and r.expect is None and share >= min_size
    return r.limit > 0 and r.limit >= min_size


def _landed(reqs: list[_Request], outcomes: Sequence[tuple[int, int, BaseException | None]]) -> tuple[list[int], int]:
    """Record what a native client did, ``(request, bytes landed or -1 for missing, error)`` each; returns
    the indices of the requests still to ask the usual way and how many landed."""
    done = set()
    for k, got, err in outcomes:
        r = reqs[k]
        if err is None:
            r.base = -1 if got < 0 else (r.slot if r.slot >= 0 else r.base)
            r.got = got
            done.add(k)
        else:
            r.base = -1  # room it took stays unused; the usual way takes its own
    return [k for k in range(len(reqs)) if k not in done], len(done)


def _plain_url(backend: Any, key: str, where: str) -> str | None:
    """``key``'s URL where the backend has one to fetch as it is (HTTP(S)), without building a source;
    None for the others (S3 would presign every key, to no use: obstore takes no query)."""
    fast = getattr(backend, "native_url", None)
    try:
        return None if fast is None else fast(key, where)  # type: ignore[no-any-return]
    except (ValueError, OSError):
        return None  # the usual way raises it, in its place


def _native_url(backend: Any, key: str, where: str) -> str | None:
    """``key``'s URL for kvikio: a plain one, or a source's (S3: presigned)."""
    url = _plain_url(backend, key, where)
    if url is not None or getattr(backend, "native_url", None) is not None:
        return url
    try:
        return getattr(backend.source(key, where), "native_url", lambda: None)()  # type: ignore[no-any-return]
    except (ValueError, OSError):
        return None  # the usual way raises it, in its place


def _kvikio(backend: Any, reqs: list[_Request], room: _Room, where: str) -> tuple[list[int], int]:
    """Whole objects and exact ranges through kvikio's libcurl pool (:mod:`.native`) where it runs."""
    kv = native.native_reader()
    if kv is None:
        return list(range(len(reqs))), 0
    picked: list[int] = []
    asks: list[native.NativeRequest] = []
    for k, r in enumerate(reqs):
        sized = r.expect is not None and r.expect > 0 and r.slot >= 0
        whole = r.expect is None and r.limit is None and r.offset == 0  # its size comes with the answer
        if r.suffix is not None or not (sized or whole):
            continue
        url = _native_url(backend, r.key, where)
        if url is None:
            continue
        picked.append(k)
        if sized:
            n = int(r.expect or 0)
            asks.append(native.NativeRequest(url, r.offset, n, room.buf[r.slot : r.slot + n], whole=r.limit is None))
        else:
            asks.append(native.NativeRequest(url, 0, -1, functools.partial(room.take, r), whole=True))
    errs = native.read_native(kv, asks, policy.settings().remote_wave_concurrency) if asks else []
    return _landed(reqs, [(k, ask.got, err) for k, ask, err in zip(picked, asks, errs)])


def _pipelined(
    backend: Any, reqs: list[_Request], ks: Sequence[int], room: _Room, share: int, where: str, s: policy.Settings
) -> list[int]:
    """Send the requests ``ks`` that can go pipelined (plain HTTP) over as few connections as carry their
    bytes (128 MiB each, at least 2, at least 8 for answers of 1 MiB and more; ``remote.pipeline_depth``
    requests per batch on each); returns the
    indices of the requests still to ask the usual way. ``share``: the expected size of an object of
    unknown size."""
    plans: dict[tuple[str, int], list[tuple[int, bytes, _Take]]] = {}
    expected: dict[tuple[str, int], int] = {}
    left: list[int] = []
    for k in ks:
        r = reqs[k]
        want = s.task_size if r.limit is None else min(r.limit, s.task_size)
        try:
            src = backend.source(r.key, where) if r.suffix is None and want > 0 else None
        except (ValueError, OSError):
            src = None  # the usual way raises it, in its place
        ask = getattr(src, "pipeline_request", None)
        planned = ask(RangeRequest(r.offset, want)) if ask is not None else None
        if src is None or planned is None:
            left.append(k)
            continue
        plans.setdefault(planned[0], []).append((k, planned[1], _answer(r, want, src.url, room, where)))
        size = r.expect if r.expect is not None else (r.limit if r.limit is not None else share)
        expected[planned[0]] = expected.get(planned[0], 0) + min(size, want)
    groups: list[tuple[tuple[str, int], list[tuple[int, bytes, _Take]]]] = []
    for key, items in plans.items():
        # Few connections for small answers (each thread's Python work contends for the GIL), more as the
        # bytes and the answers grow. On the H200 machine 1,024 answers of 256 KiB came fastest over 2
        # connections (1.2-1.6 GB/s, against 1.0 over 32), 256 of 4 MiB over 8 (benchmarks/probe_transports.py).
        # Not more with the count: a connection sends its requests remote.pipeline_depth at a time, so
        # 10,000 small chunks cost per chunk what 1,000 do.
        large = expected[key] >= len(items) * _LARGE  # answers of 1 MiB and more: at least 8 connections
        wanted = max(-(-expected[key] // _PIPE_BYTES), 8 if large else 2)
        conns = max(1, min(s.remote_wave_concurrency, len(items), wanted))
        per = -(-len(items) // conns)
        groups += [(key, items[a : a + per]) for a in range(0, len(items), per)]
    again: list[int] = []

    def run(g: int) -> int:
        key, items = groups[g]

        def handle(i: int, status: int, headers: Any, length: int) -> memoryview | None:
            try:
                return items[i][2](status, headers, length)
            except _Again:  # a good answer with more to follow: the usual way reads it whole
                again.append(items[i][0])
                return None
            except Exception as exc:  # not the answer asked for: the usual way asks again and says why
                raise rawhttp.Stop from exc

        done = rawhttp.pipeline(key, [b for _, b, _ in items], handle, s.remote_pipeline_depth,
                                s.remote_connect_timeout, s.remote_timeout)
        again.extend(k for k, _, _ in items[done:])
        return 0

    run_pieces([_bind(run, g) for g in range(len(groups))], [0] * len(groups), s.remote_wave_concurrency).result()
    return sorted(set(left + again))  # a batch refused after its answers were read: once each


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
) -> Wave:
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
        room: bytes to set aside for whole objects of unknown size (default: 1 MiB per such object,
            1 GiB at most); more, if needed, costs one copy.
        max_gap: ranges of one object at most this far apart share a request (0: touching ones).
        max_bytes: a shared request stays within this (default ``remote.max_range_size``).
        errors: ``"raise"`` the first failure, or ``"return"`` each in :attr:`Wave.errors`.
        where: the caller, for messages.

    Returns:
        The :class:`Wave`.

    Raises:
        OSError: a request failed for good (``errors="raise"``), naming its URL and the reason.
    """
    s = policy.settings()
    items = list(ranges) if ranges is not None else [None] * len(keys)
    reqs, fixed = _plan(keys, items, expect, exact, max_gap, max_bytes or s.remote_max_range_size)
    open_sized = sum(1 for r in reqs if r.slot < 0)
    t0 = time.perf_counter()
    spare = room if room is not None else min(open_sized * _ROOM, _ROOM_MAX)
    buf = _Room(fixed, spare, alloc)
    failed = threading.Event()
    errs: dict[int, BaseException] = {}
    sources: dict[str, RangeSource] = {}

    def piece(k: int) -> int:
        r = reqs[k]
        if failed.is_set() and errors == "raise":
            return 0  # another request failed for good: the wave is lost, stop asking
        try:
            src = backend.source(r.key, where)
            sources.setdefault("route", src)
            _fetch(src, r, buf, where)
        except BaseException as exc:
            r.got = -1
            errs[k] = exc
            failed.set()
        return 0

    try:
        # The expected size of an object of unknown size: the room the caller set aside for it (the
        # GPU pipeline's learned average); without it, unknown (0).
        share = spare // max(1, open_sized) if room is not None else 0
        transport, todo, landed_natively = _first_route(backend, reqs, buf, share, open_sized, where, s, errs)
        if errs and errors == "raise":
            raise errs[min(errs)]
        if s.remote_pipeline_depth > 1:
            todo = _pipelined(backend, reqs, todo, buf, share or _ROOM, where, s)
        run_pieces([_bind(piece, k) for k in todo], [0] * len(todo), s.remote_wave_concurrency).result()
        if errs and errors == "raise":
            raise errs[min(errs)]
        buf.settle(reqs, alloc, free)
    except BaseException:
        free(buf.owner)
        raise
    offsets, sizes = _place(reqs, items, len(keys))
    item_errors: list[BaseException | None] | None = None
    if errors == "return":
        item_errors = [None] * len(keys)
        for k, exc in errs.items():
            for i in reqs[k].members:
                item_errors[i] = exc
    if _trace.active() and reqs:
        src = sources.get("route") or backend.source(reqs[0].key, where)
        reason = _reason(transport, bool(todo), landed_natively, s)
        _trace.record("read", src.route, reason, int(sizes.clip(0).sum()), time.perf_counter() - t0,
                      getattr(backend, "url", ""), None, requests=len(reqs))
    return Wave(buf.buf[: buf.used], offsets, sizes, buf.owner, item_errors, len(reqs))


def _reason(transport: policy.Decision, rest: bool, landed: int, s: policy.Settings) -> str:
    """The wave's trace reason: who sent it (the policy's decision) and whether the usual way helped."""
    if transport.route == "core":
        return f"wave: {transport.reason}" + (", the rest concurrent" if rest else "")
    if landed:
        return f"wave: {s.remote_native_client} (remote.native), the rest concurrent"
    return f"wave: concurrent requests, no size lookup (remote.wave_concurrency {s.remote_wave_concurrency})"


def _bind(fn: Callable[[int], int], k: int) -> Callable[[], int]:
    return lambda: fn(k)


class WaveReads:
    """The remote backends' :meth:`~gdsstore.engine.backend.Backend.get_many`: one :func:`read_wave`."""

    waves = True

    def source(self, key: str, where: str) -> RangeSource:
        raise NotImplementedError

    def get(self, key: str, alloc: Any, byte_range: ByteRange | None = None) -> Any:
        """Read ``key`` (or a range of it) into ``alloc(n)``: one request for a small object or range,
        no size lookup first (a suffix range looks the size up)."""
        return get_one(self.source(key, f"{type(self).__name__}.get()"), alloc, byte_range)

    def get_many(
        self,
        keys: Sequence[str],
        ranges: Sequence[ByteRange | None] | None,
        alloc: Alloc,
        free: Callable[[Any], None] = lambda owner: None,
        **options: Any,
    ) -> Wave:
        # docstring inherited
        return read_wave(self, keys, ranges, alloc, free, **options)
