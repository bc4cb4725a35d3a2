"""The filters' pure parts against zlib and numcodecs (property tests), on the CPU."""

from __future__ import annotations

import zlib

import numcodecs
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gdsstore.archives import ChunkDecodeError
from gdsstore.archives.codecs import (
    adler32_rows,
    check_fletcher32,
    fletcher32,
    inflater,
    shuffle,
    unshuffle,
    unshuffle_device,
    zlib_decode,
    zlib_frame,
)

data_st = st.binary(min_size=0, max_size=4096)


@settings(max_examples=200, deadline=None)
@given(data_st)
def test_adler32_matches_zlib(data: bytes) -> None:
    assert int(adler32_rows(np.frombuffer(data, np.uint8)[None])[0]) == zlib.adler32(data)


def test_adler32_rows_and_long_rows() -> None:
    rng = np.random.default_rng(0)
    rows = rng.integers(0, 256, (3, 100_000), dtype=np.uint8)
    rows[1] = 255  # the largest sums
    assert adler32_rows(rows).tolist() == [zlib.adler32(r.tobytes()) for r in rows]


@settings(max_examples=200, deadline=None)
@given(st.binary(min_size=1, max_size=4096))
def test_fletcher32_matches_numcodecs(data: bytes) -> None:
    stored = numcodecs.Fletcher32().encode(data)
    assert int(fletcher32(np.frombuffer(data, np.uint8)[None])[0]) == int.from_bytes(stored[-4:], "little")
    payload = check_fletcher32(np.frombuffer(stored, np.uint8))
    assert payload.tobytes() == data


@pytest.mark.parametrize("value", [0, 255])
def test_fletcher32_extremes(value: int) -> None:
    # All zeros and all ones: the end-around-carry fold's two edge cases.
    for n in (2, 719, 720, 721, 5000):
        data = bytes([value]) * n
        stored = numcodecs.Fletcher32().encode(data)
        assert int(fletcher32(np.frombuffer(data, np.uint8)[None])[0]) == int.from_bytes(stored[-4:], "little")


def test_fletcher32_mismatch_names_the_chunk() -> None:
    stored = bytearray(numcodecs.Fletcher32().encode(b"hello world"))
    stored[0] ^= 1
    with pytest.raises(ChunkDecodeError, match=r"f\.h5 at 8: fletcher32 checksum mismatch"):
        check_fletcher32(np.frombuffer(bytes(stored), np.uint8), "f.h5 at 8")
    with pytest.raises(ChunkDecodeError, match="truncated"):
        check_fletcher32(np.zeros(3, np.uint8))


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 16), st.integers(0, 500))
def test_shuffle_matches_numcodecs(elementsize: int, count: int) -> None:
    raw = np.random.default_rng(count).integers(0, 256, elementsize * count, dtype=np.uint8)
    enc = np.frombuffer(numcodecs.Shuffle(elementsize=elementsize).encode(raw), np.uint8)
    assert shuffle(raw, elementsize).tobytes() == enc.tobytes()
    assert unshuffle(enc, elementsize).tobytes() == raw.tobytes()


def test_shuffle_keeps_trailing_bytes_in_place() -> None:
    raw = np.arange(10, dtype=np.uint8)  # two 4-byte elements and 2 trailing bytes, as HDF5 leaves them
    assert unshuffle(shuffle(raw, 4), 4).tolist() == raw.tolist()
    assert shuffle(raw, 4)[-2:].tolist() == [8, 9]


def test_unshuffle_rows() -> None:
    rows = np.random.default_rng(1).integers(0, 256, (5, 64), dtype=np.uint8)
    assert unshuffle_device(rows, 4).tolist() == [unshuffle(r, 4).tolist() for r in rows]
    odd = rows[:, :62]
    assert unshuffle_device(odd, 4).tolist() == [unshuffle(r, 4).tolist() for r in odd]


@settings(max_examples=100, deadline=None)
@given(data_st, st.integers(0, 9))
def test_zlib_frame_and_decode(data: bytes, level: int) -> None:
    stream = zlib.compress(data, level)
    frame = zlib_frame(np.frombuffer(stream, np.uint8))
    assert zlib.decompress(stream[frame.start : frame.stop], -15) == data  # the raw deflate stream
    assert frame.adler32 == zlib.adler32(data)
    assert zlib_decode(stream, len(data)) == bytes(numcodecs.Zlib(level).decode(stream)) == data


@pytest.mark.parametrize(
    ("stream", "match"),
    [
        (b"\x78", "truncated"),
        (b"\x79\x01" + b"\0" * 8, "not a zlib deflate stream"),
        (b"\x78\x02" + b"\0" * 8, "header check"),
        (b"\x78\xbb" + b"\0" * 8, "preset dictionary"),
    ],
)
def test_zlib_frame_rejects(stream: bytes, match: str) -> None:
    with pytest.raises(ChunkDecodeError, match=match):
        zlib_frame(np.frombuffer(stream, np.uint8), "x.h5 at 0")


def test_zlib_decode_errors_name_the_chunk() -> None:
    stream = bytearray(zlib.compress(b"abc" * 100))
    stream[-1] ^= 0xFF  # adler32 trailer
    with pytest.raises(ChunkDecodeError, match=r"x\.h5 at 64: corrupt \("):
        zlib_decode(bytes(stream), -1, "x.h5 at 64")
    with pytest.raises(ChunkDecodeError, match="expected 5"):
        zlib_decode(zlib.compress(b"abc"), 5)


def test_both_inflaters_give_zlibs_bytes() -> None:
    name, decompress, _ = inflater()
    data = np.random.default_rng(5).integers(0, 4, 70_000, dtype=np.uint8).tobytes()
    stream = zlib.compress(data, 1)
    assert decompress(stream) == zlib.decompress(stream) == data
    assert name in ("zlib", "zlib-ng")
