"""The zstd frame split (``gdsstore.gpu.zstd_frames``) against numcodecs: random data cut into random parts,
each part compressed alone, the frames concatenated into one chunk (what ``pzstd`` writes). The split must
find each frame where its compression put it, with the size numcodecs gave it, and decoding each piece
alone must give back the original."""

from __future__ import annotations

import itertools

import numcodecs
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gdsstore.gpu.zstd_frames import split_frames

_MAGIC = bytes.fromhex("28b52ffd")


def _skippable(payload: bytes, nibble: int = 0) -> bytes:
    return (0x184D2A50 + nibble).to_bytes(4, "little") + len(payload).to_bytes(4, "little") + payload


def _raw_frame(data: bytes, *, content_size: bool, rle: bool = False) -> bytes:
    """A frame written by hand (numcodecs always declares the size): a window descriptor, optionally an
    8-byte content size, then one raw block (or one RLE block of ``data[0]`` repeated)."""
    desc = 0xC0 if content_size else 0x00
    head = _MAGIC + bytes([desc, 0x58])  # window descriptor: 2**21 bytes
    if content_size:
        head += len(data).to_bytes(8, "little")
    if rle:
        assert data == data[:1] * len(data)
        return head + ((len(data) << 3) | (1 << 1) | 1).to_bytes(3, "little") + data[:1]
    return head + ((len(data) << 3) | 1).to_bytes(3, "little") + data


@st.composite
def _parts(draw: st.DrawFn) -> tuple[bytes, list[int], int, bool]:
    size = draw(st.integers(1, 300_000))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    kind = draw(st.sampled_from(["random", "runs", "small-alphabet"]))
    if kind == "random":
        data = rng.integers(0, 256, size, dtype=np.uint8).tobytes()
    elif kind == "runs":
        data = np.repeat(rng.integers(0, 4, size // 1000 + 1, dtype=np.uint8), 1000)[:size].tobytes()
    else:
        data = rng.integers(0, 3, size, dtype=np.uint8).tobytes()
    # numcodecs refuses to decode a frame of no content: every part holds a byte at least
    cuts = sorted(set(draw(st.lists(st.integers(1, size - 1), max_size=7)))) if size > 1 else []
    return data, cuts, draw(st.sampled_from([-1, 1, 5])), draw(st.booleans())


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_parts())
def test_split_finds_each_frame_numcodecs_wrote(case: tuple[bytes, list[int], int, bool]) -> None:
    data, cuts, level, checksum = case
    codec = numcodecs.Zstd(level=level, checksum=checksum)
    bounds = [0, *cuts, len(data)]
    parts = [data[a:b] for a, b in itertools.pairwise(bounds)]
    frames = [bytes(codec.encode(p)) for p in parts]
    chunk = b"".join(frames)
    t = split_frames(chunk)
    assert t is not None
    assert t.sizes.tolist() == [len(f) for f in frames]
    assert t.offsets.tolist() == np.cumsum([0] + [len(f) for f in frames])[:-1].tolist()
    assert t.decoded.tolist() == [len(p) for p in parts]
    assert t.total == len(data)
    pieces = [bytes(codec.decode(chunk[a : a + m])) for a, m in zip(t.offsets.tolist(), t.sizes.tolist())]
    assert b"".join(pieces) == data == bytes(codec.decode(chunk))  # numcodecs reads the whole chunk too
    for k, (start, n) in enumerate(zip(t.decoded_offsets.tolist(), t.decoded.tolist())):
        assert pieces[k] == data[start : start + n]


def test_skippable_frames_are_stepped_over() -> None:
    codec = numcodecs.Zstd(level=1)
    a, b = bytes(codec.encode(b"x" * 5000)), bytes(codec.encode(bytes(range(256)) * 3))
    chunk = _skippable(b"meta") + a + _skippable(b"", 0xF) + b
    t = split_frames(chunk)
    assert t is not None
    assert t.offsets.tolist() == [12, 12 + len(a) + 8]
    assert t.decoded.tolist() == [5000, 768]
    assert bytes(codec.decode(chunk)) == b"x" * 5000 + bytes(range(256)) * 3


def test_raw_and_rle_blocks_by_hand() -> None:
    """Block sizes of raw and RLE blocks (numcodecs decodes the hand-written frames: they are valid)."""
    f1, f2 = _raw_frame(b"hello", content_size=True), _raw_frame(b"z" * 70_000, content_size=True, rle=True)
    chunk = f1 + f2
    t = split_frames(chunk)
    assert t is not None
    assert t.sizes.tolist() == [len(f1), len(f2)] and t.decoded.tolist() == [5, 70_000]
    assert bytes(numcodecs.Zstd().decode(chunk)) == b"hello" + b"z" * 70_000


def test_a_frame_without_content_size_gives_none() -> None:
    """Its place in the output is only known by decoding it: the caller decodes the chunk whole."""
    codec = numcodecs.Zstd(level=1)
    chunk = bytes(codec.encode(b"abc" * 100)) + _raw_frame(b"tail", content_size=False)
    assert bytes(codec.decode(chunk)) == b"abc" * 100 + b"tail"
    assert split_frames(chunk) is None


@pytest.mark.parametrize(
    ("chunk", "words"),
    [
        (b"not zstd at all", "no frame magic at offset 0"),
        (b"", "no frame in the chunk"),
        (_raw_frame(b"hello", content_size=True)[:-2], "runs past the chunk's end"),
        (_raw_frame(b"hello", content_size=True) + b"\x00\x01", "trailing bytes at offset"),
        (_skippable(b"abc")[:-1], "runs past the chunk's end"),
        (_MAGIC + bytes([0x08, 0x58]) + b"\x01\x00\x00", "reserved bit"),
        (_MAGIC + bytes([0x00, 0x58]) + (3 << 1 | 1).to_bytes(3, "little"), "reserved block type"),
    ],
)
def test_bad_chunks_are_named(chunk: bytes, words: str) -> None:
    with pytest.raises(ValueError, match=words):
        split_frames(chunk)
