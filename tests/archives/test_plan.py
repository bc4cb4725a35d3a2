"""Read planning (pure numpy): chunk selection and coalesced reads, against numpy indexing."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from gdsstore.archives.plan import chunk_index, plan_reads, scatter_host, scatter_plan, select_chunks
from gdsstore.engine.landing import ALIGN


@st.composite
def array_and_selection(draw: st.DrawFn) -> tuple[tuple[int, ...], tuple[int, ...], tuple[object, ...]]:
    ndim = draw(st.integers(1, 3))
    shape = tuple(draw(st.integers(1, 12)) for _ in range(ndim))
    chunks = tuple(draw(st.integers(1, 5)) for _ in range(ndim))
    sel: list[object] = []
    for n in shape:
        if draw(st.booleans()):
            sel.append(draw(st.integers(-n, n - 1)))
        else:
            a = draw(st.integers(0, n))
            sel.append(slice(a, draw(st.integers(a, n)), draw(st.integers(1, 3))))
    return shape, chunks, tuple(sel)


@settings(max_examples=300, deadline=None)
@given(array_and_selection())
def test_chunk_boxes_reassemble_the_selection(case: tuple[tuple[int, ...], tuple[int, ...], tuple[object, ...]]) -> None:
    shape, chunks, sel = case
    full = np.arange(int(np.prod(shape))).reshape(shape)
    cs = select_chunks(shape, chunks, sel)
    out = np.full(cs.out_shape, -1)
    for c, s, d, n in zip(cs.coords, cs.src_start, cs.dst_start, cs.count):
        base = c * np.array(chunks)
        src = tuple(slice(b + a, b + a + k) for b, a, k in zip(base, s, n))
        out[tuple(slice(a, a + k) for a, k in zip(d, n))] = full[src]
    out = out[tuple(slice(None, None, s) for s in cs.step)]
    out = out.reshape(tuple(n for i, n in enumerate(out.shape) if i not in cs.squeeze))
    np.testing.assert_array_equal(out, full[sel])


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(st.integers(-2, 3), st.integers(0, 10_000), st.integers(1, 3000)), max_size=40),
    st.integers(0, 2000),
)
def test_plan_reads_covers_every_chunk(chunks: list[tuple[int, int, int]], max_gap: int) -> None:
    fids = np.array([c[0] for c in chunks], dtype=np.int64)
    offs = np.array([c[1] for c in chunks], dtype=np.int64)
    lens = np.array([c[2] for c in chunks], dtype=np.int64)
    p = plan_reads(fids, offs, lens, max_gap=max_gap)
    # Simulate: file k's byte at offset o is (k * 7 + o) % 251.
    buf = np.zeros(p.nbytes, dtype=np.int64)
    for f, o, n, d in zip(p.read_file, p.read_offset, p.read_nbytes, p.read_dest):
        buf[d : d + n] = (f * 7 + np.arange(o, o + n)) % 251
        assert d % ALIGN == 0
    for i, (f, o, n) in enumerate(chunks):
        if f < 0:
            assert p.chunk_pos[i] == -1
            continue
        got = buf[p.chunk_pos[i] : p.chunk_pos[i] + n]
        np.testing.assert_array_equal(got, (f * 7 + np.arange(o, o + n)) % 251)
    # Reads of one file never overlap, and are at least max_gap apart.
    for f in set(p.read_file.tolist()):
        k = p.read_file == f
        a, e = p.read_offset[k], p.read_offset[k] + p.read_nbytes[k]
        assert (a[1:] > e[:-1] + max_gap).all()


def test_plan_reads_empty_and_chunk_index() -> None:
    p = plan_reads(np.array([-1]), np.array([0]), np.array([5]), max_gap=0)
    assert p.nbytes == 0 and p.chunk_pos.tolist() == [-1]
    assert chunk_index((2, 3), np.array([[1, 2], [0, 1]])).tolist() == [5, 1]


@settings(max_examples=200, deadline=None)
@given(array_and_selection(), st.sampled_from(["u1", "<i2", "<f4", "<f8"]))
def test_scatter_plan_places_every_box(case: tuple[tuple[int, ...], tuple[int, ...], tuple[object, ...]], dtype: str) -> None:
    """The GPU kernel's copies, run with numpy: the decoded rows land where numpy indexing puts them."""
    shape, chunks, sel = case
    full = (np.arange(int(np.prod(shape))) % 251).astype(dtype).reshape(shape)
    cs = select_chunks(shape, chunks, sel)
    grid = tuple(-(-s // c) for s, c in zip(shape, chunks))
    padded = np.zeros(tuple(g * c for g, c in zip(grid, chunks)), dtype=dtype)
    padded[tuple(slice(0, s) for s in shape)] = full
    rows = np.stack([
        padded[tuple(slice(k * c, (k + 1) * c) for k, c in zip(coord, chunks))].reshape(-1) for coord in cs.coords
    ]) if len(cs.coords) else np.zeros((0, int(np.prod(chunks))), dtype=dtype)
    out = np.zeros(cs.out_shape, dtype=dtype)
    present = np.arange(len(cs.coords))
    scatter_host(scatter_plan(cs, present, chunks, out.dtype.itemsize, out.strides), rows, out)
    out = out[tuple(slice(None, None, s) for s in cs.step)]
    np.testing.assert_array_equal(out.reshape(full[sel].shape), full[sel])
