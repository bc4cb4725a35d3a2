"""The native core's zstd decode (``_core.zstd_decompress``): what it decodes, what it refuses per payload, and
the arguments it refuses with a ValueError that names the problem, writing nothing."""

from __future__ import annotations

import numcodecs.zstd
import numpy as np
import pytest

from gdsstore.engine import native

core = native.load()
pytestmark = pytest.mark.skipif(core is None, reason=f"native core: {native.unavailable_reason()}")


def _table(src_spans: list[tuple[int, int]], slots: list[tuple[int, int]]) -> np.ndarray:
    return np.array([[a for a, _ in src_spans], [n for _, n in src_spans], [a for a, _ in slots], [n for _, n in slots]],
                    dtype=np.int64)


def test_each_payload_decodes_into_its_slot_or_is_refused_alone() -> None:
    raw = [bytes(range(256)) * 40, b"", b"zstd" * 1000]
    frames = [bytes(numcodecs.zstd.compress(r, 1)) for r in raw] + [b"not zstd at all"]
    src = np.frombuffer(b"".join(frames), np.uint8)
    starts = np.concatenate([[0], np.cumsum([len(f) for f in frames])[:-1]]).tolist()
    caps = [len(raw[0]), 0, len(raw[2]) - 1, 64]  # the third's slot is a byte short: refused, not truncated
    slots = np.concatenate([[0], np.cumsum(caps)[:-1]]).tolist()
    dst = np.full(sum(caps), 7, np.uint8)
    got = np.zeros(4, np.int64)
    core.zstd_decompress(src, dst, _table(list(zip(starts, map(len, frames))), list(zip(slots, caps))), got, threads=3)
    assert got.tolist() == [len(raw[0]), 0, -1, -1]
    assert dst[: len(raw[0])].tobytes() == raw[0]


@pytest.mark.parametrize(
    ("src_spans", "slots", "message"),
    [
        ([(0, 100)], [(0, 8)], "payload 0 .* outside `src`"),
        ([(0, 4), (0, 4)], [(0, 8), (4, 8)], "overlaps"),
        ([(0, 4)], [(60, 8)], "outside the buffer"),
        ([(0, -4)], [(0, 8)], "negative"),
    ],
)
def test_bad_tables_are_refused_naming_the_problem(
    src_spans: list[tuple[int, int]], slots: list[tuple[int, int]], message: str
) -> None:
    src = np.zeros(16, np.uint8)
    dst = np.full(64, 7, np.uint8)
    got = np.full(len(src_spans), 5, np.int64)
    with pytest.raises(ValueError, match=message):
        core.zstd_decompress(src, dst, _table(src_spans, slots), got)
    assert (dst == 7).all() and (got == 5).all()


def test_a_table_that_is_not_four_rows_and_a_short_got_are_refused() -> None:
    src, dst = np.zeros(16, np.uint8), np.zeros(16, np.uint8)
    with pytest.raises(ValueError, match="4 rows"):
        core.zstd_decompress(src, dst, np.zeros(6, np.int64), np.zeros(1, np.int64))
    with pytest.raises(ValueError, match="got"):
        core.zstd_decompress(src, dst, np.zeros((4, 2), np.int64), np.zeros(1, np.int64))
