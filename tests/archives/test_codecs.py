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
    check_fletcher32_batch,
    decode_zlib_batch,
    fletcher32,
    gather_rows,
    inflater,
    shuffle,
    unshuffle,
    unshuffle_rows,
    zlib_decode,
    zlib_frame,
    zlib_trailers,
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
    assert unshuffle_rows(rows, 4).tolist() == [unshuffle(r, 4).tolist() for r in rows]
    odd = rows[:, :62]
    assert unshuffle_rows(odd, 4).tolist() == [unshuffle(r, 4).tolist() for r in odd]


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


@settings(max_examples=50, deadline=None)
@given(st.lists(st.binary(min_size=0, max_size=3000), min_size=1, max_size=6), st.integers(0, 9))
def test_zlib_batch_on_numpy(chunks: list[bytes], level: int) -> None:
    """The GPU path's batch inflate with numpy buffers: headers vectorised, rows, adler32 rows."""
    raw = max(len(c) for c in chunks)
    chunks = [c.ljust(raw, b"\0") for c in chunks]  # an archive's chunks all decode to one size
    streams = [zlib.compress(c, level) for c in chunks]
    offsets = np.cumsum([0] + [len(s) + 3 for s in streams])[:-1]  # unaligned on purpose
    buf = np.zeros(int(offsets[-1]) + len(streams[-1]), dtype=np.uint8)
    for o, s in zip(offsets, streams):
        buf[o : o + len(s)] = np.frombuffer(s, np.uint8)
    lengths = np.array([len(s) for s in streams])
    heads = np.stack([np.frombuffer(s[:2] + s[-4:], np.uint8) for s in streams])
    assert zlib_trailers(heads, str).tolist() == [zlib.adler32(c) for c in chunks]
    rows = decode_zlib_batch(buf, offsets, lengths, raw, heads, str)
    assert [r.tobytes() for r in rows] == chunks
    assert gather_rows(buf, offsets[:1], 2).tolist() == [list(streams[0][:2])]


def test_batch_errors_name_the_chunk() -> None:
    data = [b"a" * 100, b"b" * 100]
    streams = [zlib.compress(d) for d in data]
    buf = np.frombuffer(b"".join(streams), np.uint8).copy()
    offsets, lengths = np.array([0, len(streams[0])]), np.array([len(s) for s in streams])
    heads = np.stack([np.frombuffer(s[:2] + s[-4:], np.uint8) for s in streams])
    bad = heads.copy()
    bad[1, 5] ^= 1
    with pytest.raises(ChunkDecodeError, match="chunk 1: adler32 mismatch"):
        decode_zlib_batch(buf, offsets, lengths, 100, bad, lambda i: f"chunk {i}")
    bad = heads.copy()
    bad[1, 1] ^= 1
    with pytest.raises(ChunkDecodeError, match="chunk 1: zlib header check"):
        decode_zlib_batch(buf, offsets, lengths, 100, bad, lambda i: f"chunk {i}")
    stored = np.frombuffer(b"".join(numcodecs.Fletcher32().encode(d) for d in data), np.uint8).copy()
    check_fletcher32_batch(stored, np.array([0, 104]), np.array([104, 104]), str)
    stored[110] ^= 1
    with pytest.raises(ChunkDecodeError, match="chunk 1: fletcher32 checksum mismatch"):
        check_fletcher32_batch(stored, np.array([0, 104]), np.array([104, 104]), lambda i: f"chunk {i}")


def test_codec_entry_points_load_light() -> None:
    """zarr imports gdsstore.archives.codecs for every archive array it opens (its codec entry points):
    neither the engine, the settings, the policy nor the readers may come with it."""
    import json
    import subprocess
    import sys

    code = (
        "import json, sys, gdsstore.archives.codecs, gdsstore.archives\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('gdsstore'))))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    loaded = set(json.loads(out))
    assert loaded <= {"gdsstore", "gdsstore.errors", "gdsstore.archives", "gdsstore.archives.codecs"}, loaded


def test_row_groups_bound_the_temporaries(monkeypatch: pytest.MonkeyPatch) -> None:
    """Rows summed (and gathered) a few at a time give the same answers as all at once."""
    from gdsstore.archives import codecs

    rows = np.random.default_rng(0).integers(0, 256, (37, 301), dtype=np.uint8)
    whole = (adler32_rows(rows).tolist(), fletcher32(rows).tolist())
    buf = np.random.default_rng(1).integers(0, 256, 20_000, dtype=np.uint8)
    offsets = np.array([0, 17, 4000, 33, 19_000])
    monkeypatch.setattr(codecs, "_GROUP_BYTES", 1000)
    assert (adler32_rows(rows).tolist(), fletcher32(rows).tolist()) == whole
    assert whole[0] == [zlib.adler32(r.tobytes()) for r in rows]
    assert all((g == buf[o : o + 301]).all() for g, o in zip(gather_rows(buf, offsets, 301), offsets))
    assert fletcher32(rows[:0]).size == adler32_rows(rows[:0]).size == 0


def test_batch_truncated_stream_says_so() -> None:
    buf = np.frombuffer(zlib.compress(b"x" * 100), np.uint8).copy()
    heads = np.stack([buf[[0, 1, -4, -3, -2, -1]]] * 2)
    with pytest.raises(ChunkDecodeError, match="chunk 1: zlib stream of 3 bytes is truncated"):
        decode_zlib_batch(buf, np.array([0, 0]), np.array([buf.size, 3]), 100, heads, lambda i: f"chunk {i}")
