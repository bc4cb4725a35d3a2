"""The read planner (gdsstore.gpu.plan), without a GPU: every plan is checked against numpy indexing of a
reference array, with zarr's own indexers giving the chunk grid's projections.

The scatter kernels' tables run on host memory over the same pointers and byte strides they would get on the
device (tests/scatter_twin.py), so a wrong offset, stride, count or fill block shows up as wrong elements.
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scatter_twin import scatter_on_host, strided_view
from zarr.core.chunk_grids import ChunkGrid
from zarr.core.indexing import get_indexer

from gdsstore.gpu import plan
from gdsstore.gpu.memory import WINDOW_SHARE

FILL = -7


def _emulate_scatter(blocks: plan.Blocks, dtype: Any, fill: Any) -> None:
    """What the scatter kernels do with ``blocks``, on host memory (tests/scatter_twin.py)."""
    scatter_on_host(blocks, np.dtype(dtype).itemsize, np.asarray(fill, dtype).tobytes())


@st.composite
def _grid_and_selection(
    draw: st.DrawFn, max_dims: int = 3
) -> tuple[tuple[int, ...], tuple[int, ...], tuple[slice, ...]]:
    nd = draw(st.integers(1, max_dims))
    shape = tuple(draw(st.integers(1, 13)) for _ in range(nd))
    chunks = tuple(draw(st.integers(1, n)) for n in shape)
    sel = []
    for n in shape:
        a = draw(st.integers(0, n))
        b = draw(st.integers(a, n))
        sel.append(slice(a, b, draw(st.integers(1, 5))))
    return shape, chunks, tuple(sel)


def _projections(sel: Any, shape: tuple[int, ...], chunks: tuple[int, ...]) -> list[Any]:
    return list(get_indexer(sel, shape=shape, chunk_grid=ChunkGrid.from_sizes(shape, chunks)))


# -- windows and layouts --------------------------------------------------------------------------------


@given(sizes=st.lists(st.integers(0, 100), max_size=30), limit=st.integers(1, 300))
def test_split_windows_covers_every_item_once_within_the_limit(sizes: list[int], limit: int) -> None:
    windows = plan.split_windows(sizes, limit)
    assert [i for w in windows for i in w] == list(range(len(sizes)))
    for w in windows:
        assert len(w) == 1 or sum(sizes[i] for i in w) <= limit


def test_large_window_bounds() -> None:
    big = 64 << 30  # a budget that bounds nothing
    assert plan.large_window(100 << 30, big) == plan.DECODE_WINDOW_BYTES
    assert plan.large_window(0, big) == plan.WINDOW_BYTES
    assert plan.large_window(2 << 30, big) == 512 << 20
    # gpu.memory_budget bounds every window, below WINDOW_BYTES too
    for budget in (16 << 20, 256 << 20, 1 << 30, 4 << 30):
        assert plan.large_window(100 << 30, budget) <= budget // WINDOW_SHARE
    # GPU writes' windows (their floor 256 MiB, ceiling 1 GiB): the budget's share, the ceiling and a quarter
    # of free memory bound them, the floor holds where the budget allows
    for free in (0, 512 << 20, 2 << 30, 100 << 30):
        for budget in (16 << 20, 1 << 30, 4 << 30, 64 << 30):
            got = plan.large_window(free, budget, floor=256 << 20, ceiling=1 << 30)
            assert got == min(budget // WINDOW_SHARE, 1 << 30, max(256 << 20, free // 4))


@settings(max_examples=60, deadline=None)
@given(shape=st.lists(st.integers(1, 5), min_size=1, max_size=4), data=st.data())
def test_c_order_layout_of_transposes_views_the_stored_bytes(shape: list[int], data: st.DataObject) -> None:
    orders = data.draw(st.lists(st.permutations(range(len(shape))), max_size=2))
    chunk = np.arange(int(np.prod(shape)), dtype="i4").reshape(shape)
    stored = chunk
    for order in orders:  # what the transpose codecs write, in encode order
        stored = np.ascontiguousarray(stored.transpose(order))
    layout = plan.c_order_layout(shape, 4, orders)
    np.testing.assert_array_equal(strided_view(stored.ctypes.data, *layout, "i4"), chunk)


@settings(max_examples=80, deadline=None)
@given(case=_grid_and_selection(max_dims=3), transpose=st.booleans())
def test_select_strided_equals_numpy_slicing(case: Any, transpose: bool) -> None:
    shape, _, sel = case
    base = np.arange(int(np.prod(shape)), dtype="i8").reshape(shape)
    arr = base.T if transpose else base
    sel = sel[::-1] if transpose else sel
    got = plan.select_strided(arr.ctypes.data, (arr.shape, arr.strides), sel)
    assert got is not None
    ptr, (new_shape, new_strides) = got
    ref = arr[sel]
    assert new_shape == ref.shape
    if ref.size:
        np.testing.assert_array_equal(strided_view(ptr, new_shape, new_strides, "i8"), ref)


def test_select_strided_refuses_other_selectors() -> None:
    layout = ((4, 4), (32, 8))
    assert plan.select_strided(0, layout, (1, slice(0, 4))) is None
    assert plan.select_strided(0, layout, (slice(0, 4),)) is None
    assert not plan.is_slice_selection((np.arange(2), slice(None)))


# -- whole chunks: geometry against zarr's projections and numpy ------------------------------------------


@settings(max_examples=80, deadline=None)
@given(case=_grid_and_selection(), transpose=st.booleans())
def test_chunk_geometry_assembles_the_selection(case: Any, transpose: bool) -> None:
    shape, chunks, sel = case
    ref = np.arange(int(np.prod(shape)), dtype="i4").reshape(shape) * 3 + 1
    proj = _projections(sel, shape, chunks)
    expected = ref[sel]
    out = np.full(expected.shape, FILL, dtype="i4")
    if not proj:
        assert expected.size == 0
        return
    orders = [tuple(reversed(range(len(shape))))] if transpose else []
    layout = plan.c_order_layout(chunks, 4, orders)
    stored = []
    for p in proj:  # each chunk's bytes as stored (padded to the full chunk shape, as zarr does)
        region = tuple(slice(c * n, (c + 1) * n) for c, n in zip(p.chunk_coords, chunks))
        full = np.zeros(chunks, dtype="i4")
        part = ref[region]
        full[tuple(slice(0, k) for k in part.shape)] = part
        stored.append(np.ascontiguousarray(full.transpose(orders[0]) if transpose else full))
    geometry = plan.plan_chunk_geometry(
        [p.chunk_selection for p in proj],
        [chunks] * len(proj),
        [p.out_selection for p in proj],
        (out.shape, out.strides),
    )
    ptrs = np.array([a.ctypes.data for a in stored], dtype=np.int64)
    ptrs[::3] = 0  # every third chunk missing: the fill value
    _emulate_scatter(plan.chunk_blocks(ptrs, layout, geometry, out.ctypes.data), "i4", FILL)
    for k, p in enumerate(proj):
        if k % 3 == 0:
            expected[p.out_selection] = FILL
    np.testing.assert_array_equal(out, expected)


def _emulate_copies(rows: np.ndarray) -> None:
    """What ``cudaMemcpy2DAsync`` does for each row, on host memory."""
    for dst, dpitch, src, spitch, width, height in rows.tolist():
        for r in range(height):
            ctypes.memmove(dst + r * dpitch, src + r * spitch, width)


@settings(max_examples=80, deadline=None)
@given(case=_grid_and_selection(), transpose=st.booleans())
def test_two_d_copies_assemble_what_the_kernel_would(case: Any, transpose: bool) -> None:
    shape, chunks, sel = case
    ref = np.arange(int(np.prod(shape)), dtype="i4").reshape(shape) * 3 + 1
    proj = _projections(sel, shape, chunks)
    expected = ref[sel]
    if not proj:
        return
    orders = [tuple(reversed(range(len(shape))))] if transpose else []
    layout = plan.c_order_layout(chunks, 4, orders)
    stored = []
    for p in proj:
        region = tuple(slice(c * n, (c + 1) * n) for c, n in zip(p.chunk_coords, chunks))
        full = np.zeros(chunks, dtype="i4")
        part = ref[region]
        full[tuple(slice(0, k) for k in part.shape)] = part
        stored.append(np.ascontiguousarray(full.transpose(orders[0]) if transpose else full))
    out = np.full(expected.shape, FILL, dtype="i4")
    geometry = plan.plan_chunk_geometry(
        [p.chunk_selection for p in proj], [chunks] * len(proj), [p.out_selection for p in proj],
        (out.shape, out.strides),
    )  # fmt: skip
    ptrs = np.array([a.ctypes.data for a in stored], dtype=np.int64)
    blocks = plan.chunk_blocks(ptrs, layout, geometry, out.ctypes.data)
    rows = plan.copies_2d(blocks, 4)
    if rows is None:  # strided, 3-D or too many blocks: the kernel's case
        return
    _emulate_copies(rows)
    np.testing.assert_array_equal(out, expected)


def test_two_d_copies_are_for_few_whole_row_blocks() -> None:
    one = (np.array([4096]), np.array([8192]), np.array([[4, 8]]), np.array([[32, 4]]), np.array([[400, 4]]))
    rows = plan.copies_2d(one, 4)
    assert rows is not None and rows.tolist() == [[8192, 400, 4096, 32, 32, 4]]
    fill = (np.array([0]), *one[1:])
    assert plan.copies_2d(fill, 4) is None  # the fill value: the kernel
    strided = (one[0], one[1], one[2], np.array([[32, 8]]), one[4])
    assert plan.copies_2d(strided, 4) is None  # every other element: the kernel
    many = tuple(np.repeat(a, 65, axis=0) for a in one)
    assert plan.copies_2d(many, 4) is None and plan.copies_2d(many, 4, most=65) is not None  # type: ignore[arg-type]
    contiguous = (one[0], one[1], one[2], np.array([[32, 4]]), np.array([[32, 4]]))
    rows = plan.copies_2d(contiguous, 4)
    assert rows is not None and rows.tolist() == [[8192, 128, 4096, 128, 128, 1]]  # one row


def test_chunk_geometry_rejects_mismatched_selections() -> None:
    with pytest.raises(ValueError, match="differ in shape"):
        plan.plan_chunk_geometry([(slice(0, 2),)], [(4,)], [(slice(0, 3),)], ((4,), (4,)))


# -- shards: inner chunks, byte ranges, coalescing, geometry --------------------------------------------


@settings(max_examples=100, deadline=None)
@given(case=_grid_and_selection())
def test_inner_chunks_of_slices_equal_zarrs_indexer(case: Any) -> None:
    shape, chunks, sel = case
    start, count, step = plan.slice_arrays([sel], [shape])
    ic = plan.inner_chunks_of_slices(start[0], count[0], step[0], chunks)
    proj = _projections(sel, shape, chunks)
    assert [tuple(c) for c in ic.coords.tolist()] == [tuple(p.chunk_coords) for p in proj]
    assert ic.out_shape == np.empty(shape)[sel].shape
    for k, p in enumerate(proj):
        assert (
            ic.start is not None and ic.count is not None and ic.step is not None and ic.out_start is not None
        )
        for d in range(len(shape)):
            cs, os_ = p.chunk_selection[d], p.out_selection[d]
            n = chunks[d]
            assert range(*cs.indices(n)) == range(
                int(ic.start[k, d]), int(ic.start[k, d] + ic.count[k, d] * ic.step[k, d]), int(ic.step[k, d])
            )
            assert os_.indices(10**6)[0] == ic.out_start[k, d]


def _index_table(
    rng: np.random.Generator, per_shard: tuple[int, ...], inner_nbytes: int
) -> tuple[np.ndarray, dict[tuple[int, ...], int]]:
    """A shard's index: its inner chunks at shuffled places with gaps, about a fifth absent."""
    n = int(np.prod(per_shard))
    table = np.full((*per_shard, 2), 2**64 - 1, dtype=np.uint64)
    at: dict[tuple[int, ...], int] = {}
    pos = int(rng.integers(0, 64))
    for flat in rng.permutation(n).tolist():
        coords = tuple(int(c) for c in np.unravel_index(flat, per_shard))
        if rng.random() < 0.2:
            continue
        table[coords] = (pos, inner_nbytes)
        at[coords] = pos
        pos += inner_nbytes + int(rng.choice([0, 0, 3, 100]))
    return table, at


@settings(max_examples=40, deadline=None)
@given(
    case=_grid_and_selection(),
    seed=st.integers(0, 2**16),
    gap=st.sampled_from([0, 8, 1 << 20]),
    max_bytes=st.sampled_from([64, 300, 1 << 20]),
)
def test_shard_plan_assembles_the_selection(case: Any, seed: int, gap: int, max_bytes: int) -> None:
    """A sharded array end to end on the plan alone: shards of 2x2 inner chunks (one shard missing),
    inner chunks stored at shuffled offsets, some absent; reads sliced out of each shard's bytes."""
    inner_shape, _, sel = case
    inner_shape = tuple(max(1, n // 2) for n in inner_shape)
    shard_shape = tuple(2 * n for n in inner_shape)
    shape = tuple(3 * n for n in shard_shape)
    sel = tuple(slice(s.start * 3, s.stop * 3, s.step) for s in sel)
    rng = np.random.default_rng(seed)
    ref = (np.arange(int(np.prod(shape)), dtype="i4").reshape(shape) % 1009) + 1
    proj = _projections(sel, shape, shard_shape)
    expected = ref[sel].copy()
    out = np.full(expected.shape, 0, dtype="i4")
    inner_nbytes = int(np.prod(inner_shape)) * 4
    files: list[np.ndarray] = []
    tables: list[np.ndarray | None] = []
    for k, p in enumerate(proj):
        table, at = _index_table(rng, (2, 2, 2)[: len(shape)], inner_nbytes)
        blob = np.zeros(max(at.values(), default=0) + inner_nbytes + 8, dtype=np.uint8)
        for coords, pos in at.items():
            region = tuple(
                slice(s * ns + c * ni, s * ns + (c + 1) * ni)
                for s, c, ns, ni in zip(p.chunk_coords, coords, shard_shape, inner_shape)
            )
            blob[pos : pos + inner_nbytes] = np.ascontiguousarray(ref[region]).view(np.uint8).ravel()
        missing_shard = k == 1
        files.append(blob)
        tables.append(None if missing_shard else table)
        for local, region_out in _inner_out_regions(p, inner_shape):
            if missing_shard or local not in at:
                expected[region_out] = FILL
    out_sels = [p.out_selection for p in proj]
    start, count, step = plan.slice_arrays([p.chunk_selection for p in proj], [shard_shape] * len(proj))
    shards = [plan.inner_chunks_of_slices(start[i], count[i], step[i], inner_shape) for i in range(len(proj))]
    reads = plan.plan_shard_reads(shards, tables, gap, max_bytes)
    _check_reads(reads, shards, tables, gap, max_bytes)
    geometry, fills = plan.shard_geometry(shards, reads, out_sels, (out.shape, out.strides))
    if fills is not None:
        _emulate_scatter((fills[0], fills[1] + out.ctypes.data, *fills[2:]), "i4", FILL)
    keep = []
    ptrs = np.zeros(len(reads.item), dtype=np.int64)
    for r, (item, a, b) in enumerate(zip(reads.read_item, reads.read_start, reads.read_stop)):
        body = files[int(item)][int(a) : int(b)].copy()  # what one ranged read returns
        keep.append(body)
        lo, hi = int(reads.bounds[r]), int(reads.bounds[r + 1])
        ptrs[lo:hi] = body.ctypes.data + reads.offset[lo:hi]
    layout = plan.c_order_layout(inner_shape, 4)
    _emulate_scatter(plan.chunk_blocks(ptrs, layout, geometry, out.ctypes.data), "i4", FILL)
    np.testing.assert_array_equal(out, expected)


def _inner_out_regions(p: Any, inner_shape: tuple[int, ...]) -> list[tuple[tuple[int, ...], Any]]:
    """Per inner chunk a shard's selection touches: its coordinates in the shard and where it lands."""
    shard_shape = tuple(2 * n for n in inner_shape)
    inner = _projections(p.chunk_selection, shard_shape, inner_shape)
    base = [s.start for s in p.out_selection]
    regions = []
    for q in inner:
        region = tuple(slice(b + o.start, b + o.stop) for b, o in zip(base, (s for s in q.out_selection)))
        regions.append((tuple(q.chunk_coords), region))
    return regions


def _reference_reads(ranges: list[tuple[int, int]], gap: int, max_bytes: int) -> list[tuple[int, int]]:
    """The reads a shard's ranges need, as the sharding settings define them: in offset order, a range joins
    the read before it when it starts at most ``gap`` bytes after that read's end and the joined read spans
    at most ``max_bytes``; otherwise it starts a read of its own."""
    reads: list[list[int]] = []
    for a, b in sorted(ranges):
        if reads and a - reads[-1][1] <= gap and max(b, reads[-1][1]) - reads[-1][0] <= max_bytes:
            reads[-1][1] = max(reads[-1][1], b)
        else:
            reads.append([a, b])
    return [(a, b) for a, b in reads]


def _check_reads(
    reads: plan.ShardReadPlan, shards: list[Any], tables: list[np.ndarray | None], gap: int, max_bytes: int
) -> None:
    """Per shard, the reads are the reference's for the present inner chunks' ranges, no joined read spans
    more than ``max_bytes``, and each member points at its own index entry inside its read."""
    for i, (ic, table) in enumerate(zip(shards, tables)):
        mine = reads.member_of[i]
        if table is None:
            assert mine is None
            continue
        assert mine is not None
        ranges = []
        for row, coords in enumerate(ic.coords.tolist()):
            a, n = (int(x) for x in table[tuple(coords)])
            if n == 2**64 - 1:
                assert mine[row] == -1
                continue
            ranges.append((a, a + n))
            m = int(mine[row])
            r = int(reads.read[m])
            assert reads.read_item[r] == i and reads.row[m] == row
            assert int(reads.read_start[r] + reads.offset[m]) == a and int(reads.nbytes[m]) == n
            assert a + n <= int(reads.read_stop[r])
        got = sorted(
            (int(a), int(b))
            for a, b, it in zip(reads.read_start, reads.read_stop, reads.read_item)
            if it == i
        )
        assert got == _reference_reads(ranges, gap, max_bytes)
        for a, b in got:  # a read longer than the bound is one range alone
            assert b - a <= max_bytes or sum(1 for x, y in ranges if a <= x and y <= b) == 1
    assert np.all(np.diff(reads.read) >= 0)  # members grouped by read
    assert reads.bounds[-1] == len(reads.item)


def _fewest_windows(sizes: list[int], limit: int) -> int:
    """The fewest consecutive windows of at most ``limit`` bytes (an item larger than it alone), by dynamic
    programming over every cut: ``best[j]`` windows cover the first ``j`` items."""
    best = [0] + [len(sizes) + 1] * len(sizes)
    for j in range(1, len(sizes) + 1):
        for i in range(j):
            if j - i == 1 or sum(sizes[i:j]) <= limit:
                best[j] = min(best[j], best[i] + 1)
    return best[len(sizes)]


def _greedy_largest(sizes: list[int], limit: int) -> int:
    """The largest window of a greedy cut: fill each window until the next item would overflow it."""
    largest, acc, count = 0, 0, 0
    for s in sizes:
        if count and acc + s > limit:
            largest, acc, count = max(largest, acc), 0, 0
        acc, count = acc + s, count + 1
    return max(largest, acc)


@given(sizes=st.lists(st.integers(0, 100), max_size=30), limit=st.integers(1, 300))
def test_split_windows_are_as_few_as_possible_and_no_larger_than_greedy(sizes: list[int], limit: int) -> None:
    """The windows are of about equal bytes: as few as any cut within the limit allows, never a larger one
    than a greedy cut makes."""
    windows = plan.split_windows(sizes, limit)
    assert len(windows) == _fewest_windows(sizes, limit)
    assert max((sum(sizes[i] for i in w) for w in windows), default=0) <= _greedy_largest(sizes, limit)


def test_split_windows_even_out_where_greedy_would_not() -> None:
    """Six items of 10 bytes under a limit of 50: a greedy cut makes 50 + 10, the windows here 30 + 30."""
    assert plan.split_windows([10] * 6, 50) == [range(0, 3), range(3, 6)]


def test_a_read_that_fits_alone_is_one_window() -> None:
    """Where the whole read fits the budget with no next window staged beside it, it is one window: 4 MiB
    zstd chunks decode in about the same time whatever their number, so a second window doubles the read."""
    from gdsstore.gpu import memory

    budget = 4 << 30
    many = memory.window_budget(budget, scratch=1.72)
    alone = memory.window_budget(budget, scratch=1.72, alone=True)
    assert many < 1 << 30 <= alone
    assert memory.window_budget(budget) < many  # the bound's scratch: smaller windows
