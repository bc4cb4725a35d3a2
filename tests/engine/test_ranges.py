"""The engine's range reader (gdsstore/engine/ranges.py), which both adapters read ranges through."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import gdsstore
from gdsstore.engine.ranges import start_range_reads

DATA = bytes(range(256)) * 40  # 10 KiB


@pytest.fixture(scope="module")
def blob(tmp_path_factory: pytest.TempPathFactory) -> str:
    p = tmp_path_factory.mktemp("ranges") / "blob.bin"
    p.write_bytes(DATA)
    return str(p)


def test_nearby_ranges_share_one_read(blob: str) -> None:
    spans = [(1000, 10), (0, 10), (12, 4), (5000, 0)]
    with gdsstore.open(blob) as f, gdsstore.trace() as t:
        reads = start_range_reads(f, spans, bytearray, max_gap=8, max_bytes=1 << 20)
        got = {i: bytes(r.result()[a:b]) for r in reads for i, a, b in r.slices()}
    assert got == {i: DATA[o : o + n] for i, (o, n) in enumerate(spans)}
    assert [(r.start, r.nbytes) for r in reads] == [(0, 16), (1000, 10), (5000, 0)]
    assert len([e for e in t.events if e.op == "read"]) == 2  # the empty range costs no read


def test_short_read_names_the_caller(blob: str) -> None:
    with gdsstore.open(blob) as f:
        (read,) = start_range_reads(f, [(len(DATA) - 4, 8)], bytearray, max_gap=0, max_bytes=64, where="me('k')")
        with pytest.raises(OSError, match=r"me\('k'\): short read: 4 of 8 bytes"):
            read.result()


def test_target_is_where_bytes_land(blob: str) -> None:
    holders: list[dict[str, np.ndarray]] = []

    def alloc(n: int) -> dict[str, np.ndarray]:
        holders.append({"arr": np.zeros(n, "u1")})
        return holders[-1]

    with gdsstore.open(blob) as f:
        (read,) = start_range_reads(f, [(3, 5)], alloc, max_gap=0, max_bytes=64, target=lambda h: h["arr"])
        assert read.result()["arr"].tobytes() == DATA[3:8]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, len(DATA)), st.integers(0, 3000)), min_size=1, max_size=12),
    st.integers(0, 4096),
    st.integers(1, 8192),
)
def test_any_ranges_match_a_bytes_reference(blob: str, raw: list[tuple[int, int]], gap: int, most: int) -> None:
    spans = [(o, min(n, len(DATA) - o)) for o, n in raw]
    with gdsstore.open(blob) as f:
        reads = start_range_reads(f, spans, bytearray, max_gap=gap, max_bytes=most)
        got = {i: bytes(r.result()[a:b]) for r in reads for i, a, b in r.slices()}
    assert got == {i: DATA[o : o + n] for i, (o, n) in enumerate(spans)}
