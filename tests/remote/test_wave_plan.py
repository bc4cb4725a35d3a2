"""Property: the wave's planning of whole objects and its batched key check give what the rules one item at a
time give (the rules as they were, kept here as references), on random selections and keys."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from gdsstore.engine.keys import check_key, plain_keys
from gdsstore.engine.landing import slot_layout
from gdsstore.engine.ranges import ByteRange, coalesce_ranges
from gdsstore.engine.remote import room as wave_room
from gdsstore.engine.remote import wave
from gdsstore.engine.remote.core import Piece
from gdsstore.engine.remote.http_transport import HTTPBackend
from gdsstore.engine.remote.keys import check_remote_key, plain_remote_keys


@dataclass(slots=True)
class _Request:
    """One request as the wave planned it one at a time: ``key`` from ``offset`` (``limit`` bytes at most)."""

    key: str
    offset: int
    limit: int | None
    members: list[int]
    slot: int = -1
    expect: int | None = None
    suffix: int | None = None
    base: int = -1
    got: int = -1


def _request(key: str, br: ByteRange | None, i: int, expect: int | None) -> _Request:
    if br is None:
        return _Request(key, 0, None, [i], expect=expect)
    if br.kind == "offset":
        return _Request(key, br.start, None, [i])
    return _Request(key, 0, None, [i], suffix=br.start)


def _reference_plan(keys: Sequence[str], ranges: Sequence[ByteRange | None], expect: np.ndarray | None, exact: bool,
                    max_gap: int, max_bytes: int) -> tuple[list[_Request], int]:
    """``wave._plan`` as it was: one request per item, built one at a time."""
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


class _Room:
    """The wave's room as it was: a request's ``base`` set where its bytes go."""

    def __init__(self, used: int, cap: int) -> None:
        self.used, self.cap = used, cap

    def reserve(self, r: _Request, n: int) -> int:
        if self.used + n > self.cap:
            return -1
        r.base = self.used
        self.used += n
        return r.base


def _reference_piece(r: _Request, path: str, room: _Room, each: int) -> Piece | None:
    """``r`` as one piece of the core's wave, as ``wave._core_piece`` gave it; None: nothing to ask."""
    if r.suffix is not None:
        if not r.suffix:
            return None
        start, end = -r.suffix, None
    else:
        start, end = r.offset, None if r.limit is None else r.offset + r.limit
    if r.slot >= 0:
        n = int(r.expect if r.expect is not None else r.limit or 0)
        return (path, start, end, r.expect, r.slot, n) if n > 0 else None
    cap = each
    at = room.reserve(r, wave_room.pad(r.suffix)) if r.suffix else -1  # a suffix: all of it where the room has it
    if at >= 0:
        cap = r.suffix or 0
    else:
        at = room.reserve(r, each)
    if at < 0:
        r.base, at, cap = 0, 0, 0
    return (path, start, end, r.expect, at, cap)


def _reference_asks(reqs: list[_Request], paths: list[str], room: _Room, each: int) -> tuple[list[Any], list[Any]]:
    """The pieces ``wave._core`` asked for one request at a time (:func:`_reference_piece`), and each request's
    ``(got, base)`` after planning."""
    asks = []
    for k, (r, path) in enumerate(zip(reqs, paths)):
        piece = _reference_piece(r, path, room, each)
        if piece is None:
            r.got, r.base = 0, max(r.slot, 0)
        else:
            asks.append((k, piece))
    return asks, [(r.got, r.base) for r in reqs]


def _reference_place(reqs: list[_Request], ranges: Sequence[ByteRange | None], n: int) -> tuple[Any, Any]:
    """``wave._place`` as it was: each item's place, one member of one request at a time."""
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


_KEY = st.text(st.sampled_from("ab./%\\\x00"), max_size=8)
_RANGE = st.one_of(
    st.none(),
    st.builds(lambda a, n: ByteRange("range", a, a + n), st.integers(0, 300), st.integers(0, 300)),
    st.builds(lambda a: ByteRange("offset", a), st.integers(0, 300)),
    st.builds(lambda n: ByteRange("suffix", n), st.integers(0, 300)),
)


def _none(v: int) -> int | None:
    return None if v < 0 else v


def _fields(reqs: list[_Request]) -> list[tuple[Any, ...]]:
    return [(r.key, r.offset, r.limit, sorted(r.members), r.slot, r.expect, r.suffix) for r in reqs]


def _columns(reqs: wave._Requests) -> list[tuple[Any, ...]]:
    """The array plan's requests as the reference's fields."""
    members = [np.flatnonzero(reqs.of_item == k).tolist() for k in range(len(reqs))]
    return [(key, int(reqs.offset[k]), _none(int(reqs.limit[k])), members[k], int(reqs.slot[k]),
             _none(int(reqs.expect[k])), _none(int(reqs.suffix[k]))) for k, key in enumerate(reqs.keys)]


@settings(max_examples=300, deadline=None)
@given(
    keys=st.lists(st.sampled_from(["c/0", "c/1", "c/2"]), min_size=0, max_size=40),
    sizes=st.lists(st.integers(0, 5000), min_size=40, max_size=40),
    known=st.booleans(),
    ranged=st.lists(_RANGE, min_size=40, max_size=40),
    whole=st.booleans(),
    exact=st.booleans(),
    max_gap=st.integers(0, 100),
)
def test_plan_matches_the_rule_one_item_at_a_time(keys: list[str], sizes: list[int], known: bool,
                                                   ranged: list[ByteRange | None], whole: bool, exact: bool,
                                                   max_gap: int) -> None:
    expect = np.array(sizes[: len(keys)], dtype=np.int64) if known else None
    ranges = [None] * len(keys) if whole else ranged[: len(keys)]
    got, fixed = wave._plan(keys, ranges, expect, exact, max_gap, 1000)
    want, want_fixed = _reference_plan(keys, ranges, expect, exact, max_gap, 1000)
    assert (_columns(got), fixed) == (_fields(want), want_fixed)


@settings(max_examples=300, deadline=None)
@given(
    n=st.integers(0, 40),
    sizes=st.lists(st.integers(0, 5000), min_size=40, max_size=40),
    known=st.booleans(),
    ranged=st.lists(_RANGE, min_size=40, max_size=40),
    whole=st.booleans(),
    room=st.integers(0, 20_000),
)
def test_pieces_match_the_rule_one_request_at_a_time(n: int, sizes: list[int], known: bool,
                                                      ranged: list[ByteRange | None], whole: bool, room: int) -> None:
    keys = [f"c/{i % 7}" for i in range(n)]
    expect = np.array(sizes[:n], dtype=np.int64) if known else None
    ranges = [None] * n if whole else ranged[:n]
    backend = HTTPBackend("http://127.0.0.1:9")  # nothing is sent: planning only
    reqs, fixed = wave._plan(keys, ranges, expect, False, 0, 1000)
    want_reqs, _ = _reference_plan(keys, ranges, expect, False, 0, 1000)
    open_sized = int((reqs.slot < 0).sum())
    buf = wave_room.WaveBuffer(fixed, room, lambda size: (np.empty(size, np.uint8), None))
    ref_room = _Room(fixed, fixed + room)
    each = room // max(1, open_sized) // 64 * 64
    errs: dict[int, BaseException] = {}
    table, ks = wave._asks(backend.objects(keys, "test"), reqs, buf, each, errs)
    paths = [backend.core_path(r.key, "test") for r in want_reqs]
    want, want_done = _reference_asks(want_reqs, paths, ref_room, each)
    assert not errs
    assert list(zip(ks.tolist(), [table.row(j) for j in range(len(ks))])) == want
    assert list(zip(reqs.got.tolist(), reqs.base.tolist())) == want_done
    assert buf.used == ref_room.used


@settings(max_examples=300, deadline=None)
@given(
    keys=st.lists(st.sampled_from(["c/0", "c/1", "c/2"]), min_size=0, max_size=40),
    ranged=st.lists(_RANGE, min_size=40, max_size=40),
    landed=st.lists(st.tuples(st.integers(-1, 700), st.integers(0, 10_000)), min_size=80, max_size=80),
    max_gap=st.integers(0, 100),
)
def test_places_match_the_rule_one_item_at_a_time(keys: list[str], ranged: list[ByteRange | None],
                                                  landed: list[tuple[int, int]], max_gap: int) -> None:
    ranges = ranged[: len(keys)]
    reqs, _ = wave._plan(keys, ranges, None, False, max_gap, 1000)
    want_reqs, _ = _reference_plan(keys, ranges, None, False, max_gap, 1000)
    for k, (r, (got, base)) in enumerate(zip(want_reqs, landed)):  # what the wave got: -1 missing, else bytes at base
        r.got, r.base = reqs.got[k], reqs.base[k] = got, base
    got_offsets, got_sizes = wave._place(reqs, len(keys))
    want_offsets, want_sizes = _reference_place(want_reqs, ranges, len(keys))
    assert got_sizes.tolist() == want_sizes.tolist()
    assert got_offsets.tolist() == want_offsets.tolist()


def _verdict(check: Any, key: Any) -> Any:
    try:
        return check(key, "test")
    except (TypeError, ValueError, FileNotFoundError) as exc:
        return type(exc)


@settings(max_examples=500, deadline=None)
@given(keys=st.lists(_KEY, max_size=12))
def test_plain_keys_are_keys_the_check_accepts(keys: list[str]) -> None:
    if plain_keys(keys):
        assert all(_verdict(check_key, k) == k for k in keys)
    if plain_remote_keys(keys):
        assert all(_verdict(check_remote_key, k) == k for k in keys)


def _backends() -> list[Any]:
    from gdsstore.engine.remote.s3 import S3Backend
    from gdsstore.engine.remote.webhdfs import WebHDFSBackend

    s3 = {"endpoint_url": "http://127.0.0.1:9", "key": "k", "secret": "s", "client_kwargs": {"region_name": "us-east-1"}}
    return [HTTPBackend("http://127.0.0.1:9/root"), S3Backend("s3://b/root", s3), S3Backend("s3://b", s3),
            WebHDFSBackend("webhdfs://127.0.0.1:9/root", {"user": "u"}), WebHDFSBackend("webhdfs://127.0.0.1:9", {"user": "u"})]


@pytest.mark.parametrize("which", range(5), ids=["http", "s3-prefix", "s3-bucket", "webhdfs-dir", "webhdfs-root"])
@settings(max_examples=300, deadline=None)
@given(keys=st.lists(_KEY, max_size=12))
@example(keys=["c/0", "a/"]).via("plain, but no object key")
@example(keys=["c/0", ""]).via("plain, but no object key")
def test_object_paths_of_a_wave_are_each_keys_path(which: int, keys: list[str]) -> None:
    """One scan of plain keys gives each key's :meth:`core_path`, as the check of each does (nothing is sent:
    port 9 answers nothing)."""
    backend = _backends()[which]
    got = [p if isinstance(p, str) else type(p) for p in backend.object_paths(keys, "test")]
    assert got == [_verdict(backend.core_path, k) for k in keys]


@pytest.mark.parametrize("keys", [["a.zarr/c/0/1", "x/y.bin", ""], [f"d/{i}" for i in range(100)]])
def test_keys_of_chunks_are_plain(keys: list[str]) -> None:
    assert plain_remote_keys(keys)


@pytest.mark.parametrize("key", ["/abs", "./x", "a/../x", "a//b", ".zattrs", "a\\b", "a\x00b", "%2e%2e/x", 3])
def test_keys_that_need_the_check_are_not_plain(key: Any) -> None:
    assert not plain_remote_keys(["c/0", key])
