"""Read plans for the GPU pipeline: pure arithmetic on numpy arrays (no device, no I/O, no CuPy).

A selection of a zarr array becomes, before any byte moves:

- the chunk objects or shard byte ranges to read, coalesced per shard with the engine's one rule
  (:func:`gdsstore.engine.backend.coalesce_ranges`), grouped into windows of bounded size;
- the geometry of each piece: which part of a decoded chunk it takes (start, count, step per axis) and
  where that lands in the output (a byte offset and byte strides), so that a device output is
  assembled by one scatter launch per window.

The executor (:mod:`gdsstore.gpu.execute`) runs a plan; everything here is tested without a GPU.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from gdsstore.engine import native
from gdsstore.engine.ranges import coalesce_ranges
from gdsstore.gpu.nvcomp_capi import BOUND_SCRATCH

__all__ = [
    "DECODE_WINDOW_BYTES",
    "WINDOW_BYTES",
    "Blocks",
    "ChunkGeometry",
    "InnerChunks",
    "Layout",
    "ShardReadPlan",
    "c_order_layout",
    "chunk_blocks",
    "copies_2d",
    "inner_chunks_of_selection",
    "inner_chunks_of_slices",
    "is_slice_selection",
    "large_window",
    "plan_chunk_geometry",
    "plan_shard_reads",
    "select_strided",
    "shard_geometry",
    "slice_arrays",
    "split_windows",
]

#: Decoded bytes per window of host staging: bounds pinned staging, and sets the read/copy overlap.
WINDOW_BYTES = 128 << 20
#: Decoded bytes per window when nvCOMP decodes it: one nvCOMP call decodes each chunk on its own
#: thread block, so its time is nearly flat in the number of chunks (docs/performance.md): fewer, larger
#: windows decode several times faster.
DECODE_WINDOW_BYTES = 1 << 30

#: A strided view: ``(shape, byte strides)``.
Layout = tuple[tuple[int, ...], tuple[int, ...]]
#: Blocks for the scatter kernel, one row each: ``(src (0: the fill value), dst, shape, src byte
#: strides, dst byte strides)`` as ``int64`` arrays (``(n,)``, ``(n,)``, ``(n, nd)`` x 3).
Blocks = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]

_EMPTY_SHARD_ENTRY = np.uint64(2**64 - 1)  # the shard index's (offset, length) of an absent chunk


# -- windows ------------------------------------------------------------------------------------------


def large_window(
    free: int,
    budget: int,
    floor: int = WINDOW_BYTES,
    ceiling: int = DECODE_WINDOW_BYTES,
    scratch: float = BOUND_SCRATCH,
    alone: bool = False,
) -> int:
    """A window on the GPU: the share of ``budget`` (``gpu.memory_budget``) one window's raw bytes may
    take (:func:`gdsstore.gpu.memory.window_budget`, with ``scratch`` bytes of decode scratch per decoded
    byte; ``alone``: the read's only window), at most ``ceiling`` (reads: :data:`DECODE_WINDOW_BYTES`) and
    a quarter of the device's free memory, and at least ``floor`` (reads: :data:`WINDOW_BYTES`) where the
    budget allows it. GPU writes size their windows here too, with their own floor and ceiling.

    Examples:
        >>> large_window(100 << 30, 64 << 30) == DECODE_WINDOW_BYTES
        True
        >>> large_window(100 << 30, 1 << 30) >> 20, large_window(2 << 30, 8 << 30) >> 20, large_window(0, 1 << 30) >> 20
        (176, 512, 128)
        >>> large_window(100 << 30, 128 << 20) >> 20
        22
    """
    from gdsstore.gpu.memory import window_budget

    share = window_budget(budget, scratch, alone)
    return min(share, max(floor, min(ceiling, free // 4)))


def split_windows(sizes: Sequence[int], limit: int) -> list[range]:
    """Consecutive items grouped into as few windows of at most ``limit`` bytes as a greedy cut makes, of
    about equal bytes where the items allow it (the peak memory follows the largest window); an item larger
    than the limit is a window of its own.

    Examples:
        >>> split_windows([10, 10, 10, 10, 10], 25)
        [range(0, 2), range(2, 4), range(4, 5)]
        >>> split_windows([10] * 8, 70)
        [range(0, 4), range(4, 8)]
    """
    out = _greedy_windows(sizes, limit)
    if len(out) > 1:
        even = _greedy_windows(sizes, min(limit, -(-sum(sizes) // len(out))))
        if len(even) == len(out):
            return even
    return out


def _greedy_windows(sizes: Sequence[int], limit: int) -> list[range]:
    out: list[range] = []
    start = 0
    acc = 0
    for i, s in enumerate(sizes):
        if i > start and acc + s > limit:
            out.append(range(start, i))
            start, acc = i, 0
        acc += s
    if start < len(sizes):
        out.append(range(start, len(sizes)))
    return out


# -- strided layouts ------------------------------------------------------------------------------------


def c_order_layout(shape: Sequence[int], itemsize: int, transposes: Sequence[Sequence[int]] = ()) -> Layout:
    """Shape and byte strides of a chunk of ``shape`` decoded as a view of its stored bytes: stored in
    C order after the ``transpose`` codecs' ``order``s (encode order), decoded by transposing back.

    Examples:
        >>> c_order_layout((3, 5), 4)
        ((3, 5), (20, 4))
        >>> c_order_layout((3, 5), 4, [(1, 0)])  # stored as the (5, 3) transpose
        ((3, 5), (4, 12))
    """
    stored = tuple(int(n) for n in shape)
    for order in transposes:
        stored = tuple(stored[o] for o in order)
    strides: list[int] = []
    acc = itemsize
    for n in reversed(stored):
        strides.append(acc)
        acc *= n
    st = tuple(reversed(strides))
    for order in reversed(transposes):  # decoding transposes back: a view with permuted strides
        inverse = [int(i) for i in np.argsort(order)]
        stored = tuple(stored[i] for i in inverse)
        st = tuple(st[i] for i in inverse)
    return stored, st


def is_slice_selection(sel: Any) -> bool:
    """Whether ``sel`` is a tuple of slices (what the scatter kernel's geometry can express)."""
    return isinstance(sel, tuple) and all(isinstance(x, slice) for x in sel)


def select_strided(offset: int, layout: Layout, sel: Any) -> tuple[int, Layout] | None:
    """A tuple of slices applied to a strided view at ``offset``: the new offset and layout, or
    ``None`` for any other selector.

    Examples:
        >>> select_strided(0, ((4, 6), (24, 4)), (slice(1, 3), slice(0, 6, 2)))
        (24, ((2, 3), (24, 8)))
    """
    shape, strides = layout
    if not isinstance(sel, tuple) or len(sel) != len(shape):
        return None
    new_shape: list[int] = []
    new_strides: list[int] = []
    for n, st, sl in zip(shape, strides, sel):
        if not isinstance(sl, slice):
            return None
        start, stop, step = sl.start, sl.stop, sl.step
        if step == 1 and type(start) is int and type(stop) is int and 0 <= start <= stop <= n:
            count = stop - start  # what zarr's indexers produce: the cheap common case
        else:
            start, stop, step = sl.indices(n)
            count = len(range(start, stop, step))
        offset += start * st
        new_shape.append(count)
        new_strides.append(st * step)
    return offset, (tuple(new_shape), tuple(new_strides))


def slice_arrays(
    sels: Sequence[Any], shapes: Sequence[Sequence[int]], ndim: int | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(start, count, step)`` arrays (``n x ndim``) of tuples of slices, each over its shape
    (``ndim``: the number of axes when there may be no selection to tell).

    Raises:
        TypeError: a selector is not a tuple of slices (check :func:`is_slice_selection` first).

    Examples:
        >>> [a.tolist() for a in slice_arrays([(slice(1, 7, 2),)], [(10,)])]
        [[[1]], [[3]], [[2]]]
    """
    nd = ndim if ndim is not None else len(shapes[0]) if len(shapes) else 0
    core = native.load()
    if core is not None and len(shapes) and len(shapes[0]) == nd and list(shapes).count(shapes[0]) == len(shapes):
        # one shape for all (a regular grid's chunks, or the output): resolved in one native call
        t = np.frombuffer(core.slice_table(sels, list(shapes[0])), np.int64).reshape(len(sels), nd, 3)
        t = t.transpose(2, 0, 1).copy()  # three contiguous, writable arrays
        return t[0], t[1], t[2]
    flat: list[int] = []
    ext = flat.extend
    for sel, shape in zip(sels, shapes):
        for sl, n in zip(sel, shape):
            ext(sl.indices(n))
    a = np.array(flat, dtype=np.int64).reshape(len(sels), nd, 3)
    start, stop, step = a[:, :, 0], a[:, :, 1], a[:, :, 2]
    count = np.maximum(0, (stop - start + step - 1) // step)
    return start, count, step


# -- scatter blocks -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ChunkGeometry:
    """Per chunk (one row each): the part of the decoded chunk a selection takes (``start``,
    ``count``, ``step`` per axis, in elements) and where it lands in the output (``dst``: byte offset
    from the output's first byte; ``dst_strides``: byte strides)."""

    start: np.ndarray
    count: np.ndarray
    step: np.ndarray
    dst: np.ndarray
    dst_strides: np.ndarray

    def rows(self, ids: Any) -> ChunkGeometry:
        """The rows ``ids`` (an index array or a slice)."""
        return ChunkGeometry(
            self.start[ids], self.count[ids], self.step[ids], self.dst[ids], self.dst_strides[ids]
        )


def plan_chunk_geometry(
    chunk_sels: Sequence[Any],
    chunk_shapes: Sequence[Sequence[int]],
    out_sels: Sequence[Any],
    out_layout: Layout,
) -> ChunkGeometry:
    """Where each chunk's selection lands in a strided output (every selector a tuple of slices).

    Raises:
        ValueError: a chunk selection and its output selection differ in shape.
    """
    nd = len(out_layout[0])
    c_start, c_count, c_step = slice_arrays(chunk_sels, chunk_shapes, nd)
    o_start, o_count, o_step = slice_arrays(out_sels, [out_layout[0]] * len(out_sels), nd)
    if not np.array_equal(c_count, o_count):
        raise ValueError("GDSCodecPipeline.read(): chunk and output selections differ in shape")
    o_str = np.array(out_layout[1], dtype=np.int64)
    return ChunkGeometry(c_start, c_count, c_step, (o_start * o_str).sum(axis=1), o_str * o_step)


def chunk_blocks(src_ptrs: np.ndarray, src_layout: Layout, geometry: ChunkGeometry, out_ptr: int) -> Blocks:
    """Blocks copying each chunk's selection from its decoded bytes at ``src_ptrs`` (laid out as
    ``src_layout``) into the output at ``out_ptr``; a chunk whose pointer is 0 (missing) writes the
    fill value instead."""
    s_str = np.array(src_layout[1], dtype=np.int64)
    have = src_ptrs != 0
    src = np.where(have, src_ptrs + (geometry.start * s_str).sum(axis=1), 0)
    src_st = np.where(have[:, None], s_str * geometry.step, geometry.dst_strides)
    return src, out_ptr + geometry.dst, geometry.count, src_st, geometry.dst_strides


# -- shards: selection -> inner chunks -> byte ranges -> coalesced reads -------------------------------


@dataclass(frozen=True)
class InnerChunks:
    """The inner chunks one shard's selection touches, in C order of their coordinates.

    Slice selections carry arrays (``start``/``count``/``step``: the part of each inner chunk taken;
    ``out_start``: where it starts in the shard's selection, in elements); other selections carry
    zarr's selectors (``selectors``: ``(chunk_selection, out_selection)`` per inner chunk) and the
    shape of the shard's selection (``out_shape``, and ``sel_shape`` for selections zarr reshapes).
    """

    coords: np.ndarray
    start: np.ndarray | None = None
    count: np.ndarray | None = None
    step: np.ndarray | None = None
    out_start: np.ndarray | None = None
    selectors: list[tuple[Any, Any]] | None = None
    out_shape: tuple[int, ...] = ()
    sel_shape: tuple[int, ...] | None = None


def _chunks_along(start: int, count: int, step: int, chunk: int) -> tuple[np.ndarray, ...]:
    """Along one axis, the chunks that ``count`` elements from ``start`` by ``step`` touch:
    ``(chunk index, start in chunk, count, offset in the selection)`` (chunks a large step skips
    are left out)."""
    if count <= 0:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, empty, empty
    last = start + (count - 1) * step
    idx = np.arange(start // chunk, last // chunk + 1, dtype=np.int64)
    k_lo = np.maximum(0, -((start - idx * chunk) // step))  # ceil((idx * chunk - start) / step)
    k_hi = np.minimum(count, -((start - (idx + 1) * chunk) // step))
    keep = k_hi > k_lo
    idx, k_lo, k_hi = idx[keep], k_lo[keep], k_hi[keep]
    return idx, start + k_lo * step - idx * chunk, k_hi - k_lo, k_lo


def inner_chunks_of_slices(
    start: np.ndarray, count: np.ndarray, step: np.ndarray, inner_shape: Sequence[int]
) -> InnerChunks:
    """The inner chunks a slice selection of one shard touches (``start``/``count``/``step``: one
    row of :func:`slice_arrays`), vectorized: no Python object per inner chunk.

    Examples:
        >>> ic = inner_chunks_of_slices(np.array([3]), np.array([4]), np.array([1]), (4,))
        >>> ic.coords.ravel().tolist(), ic.start.ravel().tolist(), ic.count.ravel().tolist()
        ([0, 1], [3, 0], [1, 3])
    """
    nd = len(inner_shape)
    axes = [_chunks_along(int(start[d]), int(count[d]), int(step[d]), int(inner_shape[d])) for d in range(nd)]
    grids = [np.meshgrid(*[ax[k] for ax in axes], indexing="ij") for k in range(4)]
    coords, c_start, c_count, o_start = (
        np.stack([g.reshape(-1) for g in gk], axis=1).reshape(-1, nd) for gk in grids
    )
    c_step = np.broadcast_to(np.asarray(step, dtype=np.int64), c_start.shape)
    return InnerChunks(coords, c_start, c_count, c_step, o_start, out_shape=tuple(int(c) for c in count))


def inner_chunks_of_selection(
    sel: Any, shard_shape: Sequence[int], inner_shape: Sequence[int]
) -> InnerChunks:
    """The inner chunks any selection of one shard touches, through zarr's own indexer."""
    from zarr.core.chunk_grids import ChunkGrid
    from zarr.core.indexing import get_indexer

    indexer = get_indexer(
        sel, shape=tuple(shard_shape), chunk_grid=ChunkGrid.from_sizes(tuple(shard_shape), tuple(inner_shape))
    )
    parts = [(coords, csel, osel) for coords, csel, osel, _ in indexer]
    coords = np.array([p[0] for p in parts], dtype=np.int64).reshape(len(parts), len(shard_shape))
    sel_shape = getattr(indexer, "sel_shape", None)
    return InnerChunks(
        coords,
        selectors=[(p[1], p[2]) for p in parts],
        out_shape=tuple(indexer.shape),
        sel_shape=None if sel_shape is None else tuple(sel_shape),
    )


@dataclass(frozen=True)
class ShardReadPlan:
    """What a sharded selection reads, in read order.

    Reads (``R`` rows): batch item ``read_item``, bytes ``[read_start, read_stop)`` of that shard.
    Members, the inner chunks stored in the shards (``N`` rows, grouped by read, in file order within
    a read): batch item ``item``, row in that shard's :class:`InnerChunks` ``row``, ``read``, offset in
    the read ``offset`` and stored size ``nbytes``; ``bounds[r]:bounds[r + 1]`` are read ``r``'s members.
    ``member_of[i][row]``: the member holding an inner chunk of item ``i`` (``-1``: absent from its
    shard); ``None`` for a missing shard.
    """

    read_item: np.ndarray
    read_start: np.ndarray
    read_stop: np.ndarray
    item: np.ndarray
    row: np.ndarray
    read: np.ndarray
    offset: np.ndarray
    nbytes: np.ndarray
    bounds: np.ndarray
    member_of: list[np.ndarray | None]

    def window_nbytes(self, member_raw: int = 0) -> list[int]:
        """The sizes that windows are cut by: each read's stored bytes, or, when larger, the decoded bytes
        of its members (``member_raw``: one inner chunk's decoded size), which a window holds on the device
        (cut by stored bytes alone, a 1 GiB ``gpu.memory_budget`` peaked at 3.3 GiB on zstd shards).

        Examples:
            >>> p = ShardReadPlan(*(np.array(v) for v in ([0], [0], [100], [0, 0], [0, 1], [0, 0], [0, 50],
            ...                   [50, 50], [0, 2])), member_of=[None])
            >>> p.window_nbytes(), p.window_nbytes(member_raw=400)
            ([100], [800])
        """
        stored = self.read_stop - self.read_start
        if member_raw:
            stored = np.maximum(stored, np.diff(self.bounds) * member_raw)
        return stored.tolist()  # type: ignore[no-any-return]


def _cat(parts: list[np.ndarray]) -> np.ndarray:
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


def plan_shard_reads(
    shards: Sequence[InnerChunks | None],
    index_tables: Sequence[np.ndarray | None],
    max_gap: int,
    max_bytes: int,
) -> ShardReadPlan:
    """The coalesced reads of the inner chunks that ``shards`` touch (``None``: nothing to read for
    that batch item), located by each shard's index table (``offsets_and_lengths``: ``(*chunks per
    shard, 2)`` ``uint64``, ``None`` for a missing shard). Ranges of one shard closer than
    ``max_gap`` join one read of at most ``max_bytes`` (zarr's sharding coalescing settings)."""
    cols: dict[str, list[np.ndarray]] = {k: [] for k in ("item", "row", "read", "offset", "nbytes")}
    read_item: list[int] = []
    read_start: list[int] = []
    read_stop: list[int] = []
    member_of: list[np.ndarray | None] = []
    n_members = 0
    for i, (inner, table) in enumerate(zip(shards, index_tables)):
        if inner is None or table is None:
            member_of.append(None)
            continue
        entries = table[tuple(inner.coords.T)].reshape(-1, 2)
        have = ~((entries[:, 0] == _EMPTY_SHARD_ENTRY) & (entries[:, 1] == _EMPTY_SHARD_ENTRY))
        rows = np.flatnonzero(have)
        starts = entries[have, 0].astype(np.int64)
        lens = entries[have, 1].astype(np.int64)
        mine = np.full(len(inner.coords), -1, dtype=np.int64)
        groups = coalesce_ranges(list(zip(starts.tolist(), (starts + lens).tolist())), max_gap, max_bytes)
        # members in read order, and each one's read: numpy over the whole shard, not per read
        order = np.array([k for _, _, members in groups for k in members], dtype=np.int64)
        group = np.repeat(np.arange(len(groups), dtype=np.int64), [len(g[2]) for g in groups])
        group_start = np.array([g[0] for g in groups], dtype=np.int64)
        mine[rows[order]] = np.arange(n_members, n_members + len(order))
        n_members += len(order)
        cols["item"].append(np.full(len(order), i, dtype=np.int64))
        cols["row"].append(rows[order])
        cols["read"].append(group + len(read_item))
        cols["offset"].append(starts[order] - group_start[group] if len(order) else order)
        cols["nbytes"].append(lens[order])
        read_item.extend([i] * len(groups))
        read_start.extend(g[0] for g in groups)
        read_stop.extend(g[1] for g in groups)
        member_of.append(mine)
    read = _cat(cols["read"])
    return ShardReadPlan(
        np.array(read_item, dtype=np.int64),
        np.array(read_start, dtype=np.int64),
        np.array(read_stop, dtype=np.int64),
        _cat(cols["item"]),
        _cat(cols["row"]),
        read,
        _cat(cols["offset"]),
        _cat(cols["nbytes"]),
        np.searchsorted(read, np.arange(len(read_item) + 1)),
        member_of,
    )


def shard_geometry(
    shards: Sequence[InnerChunks | None],
    plan: ShardReadPlan,
    out_sels: Sequence[Any],
    out_layout: Layout,
) -> tuple[ChunkGeometry, Blocks | None]:
    """For slice selections (:func:`inner_chunks_of_slices`): where each member lands in the output
    (rows in member order), and the fill blocks of absent inner chunks and missing shards (``dst``
    relative to the output's first byte)."""
    nd = len(out_layout[0])
    o_start, o_count, o_step = slice_arrays(out_sels, [out_layout[0]] * len(out_sels), nd)
    o_str = np.array(out_layout[1], dtype=np.int64)
    shard_dst = (o_start * o_str).sum(axis=1)
    shard_st = o_str * o_step
    n = len(plan.item)
    start, count, step = (np.zeros((n, nd), dtype=np.int64) for _ in range(3))
    dst = np.zeros(n, dtype=np.int64)
    dst_st = np.zeros((n, nd), dtype=np.int64)
    fills: list[Blocks] = []
    for i, inner in enumerate(shards):
        mine = plan.member_of[i]
        st = np.broadcast_to(shard_st[i], (1, nd))
        if inner is None or mine is None:
            if inner is not None and (o_count[i] > 0).all():  # a missing shard: all fill value
                zero = np.zeros(1, dtype=np.int64)
                fills.append((zero, shard_dst[i : i + 1], o_count[i][None, :], st, st))
            continue
        assert inner.start is not None and inner.count is not None and inner.out_start is not None
        assert inner.step is not None
        row_dst = shard_dst[i] + (inner.out_start * shard_st[i]).sum(axis=1)
        gone = mine < 0
        if gone.any():
            k = int(gone.sum())
            sts = np.broadcast_to(shard_st[i], (k, nd))
            fills.append((np.zeros(k, dtype=np.int64), row_dst[gone], inner.count[gone], sts, sts))
        have = ~gone
        ids = mine[have]
        start[ids], count[ids], step[ids] = inner.start[have], inner.count[have], inner.step[have]
        dst[ids] = row_dst[have]
        dst_st[ids] = shard_st[i]
    blocks = tuple(np.concatenate(parts) for parts in zip(*fills)) if fills else None
    return ChunkGeometry(start, count, step, dst, dst_st), blocks  # type: ignore[return-value]


# -- few blocks: 2-D copies instead of a kernel -----------------------------------------------------------

#: Most blocks copied as ``cudaMemcpy2DAsync`` calls instead of one scatter kernel launch: a small read
#: then needs no kernel at all (none to compile on a machine whose CuPy kernel cache is empty).
MAX_COPIES = 64


def copies_2d(blocks: Blocks, itemsize: int, most: int = MAX_COPIES) -> np.ndarray | None:
    """The blocks as 2-D copies, one row each: ``(dst, dst pitch, src, src pitch, width, height)`` in
    bytes (``cudaMemcpy2DAsync``'s arguments), or ``None`` when they are more than ``most``, or one is
    the fill value, a strided selection (elements not adjacent) or more than 2-D after merging
    contiguous axes (then the scatter kernel runs). Empty blocks copy nothing and take no row.

    Examples:
        >>> b = (np.array([1000]), np.array([5000]), np.array([[2, 3]]), np.array([[12, 4]]), np.array([[40, 4]]))
        >>> copies_2d(b, 4).tolist()
        [[5000, 40, 1000, 12, 12, 2]]
    """
    src, dst, shape, s_st, d_st = blocks
    if len(src) > most or (src == 0).any():
        return None
    rows: list[tuple[int, int, int, int, int, int]] = []
    for i in range(len(src)):
        dims = [(int(n), int(a), int(b)) for n, a, b in zip(shape[i], s_st[i], d_st[i]) if n != 1]
        if any(n == 0 for n, _, _ in dims):
            continue
        width, ss, ds = itemsize, itemsize, itemsize  # bytes of one row so far, and its element strides
        while dims and dims[-1][1] == ss and dims[-1][2] == ds:  # contiguous in both: one longer row
            n, _, _ = dims.pop()
            width *= n
            ss = ds = width
        if len(dims) > 1 or (dims and width == itemsize):
            return None  # 3-D after merging, or rows of one element (a strided selection): the kernel
        if dims:
            height, spitch, dpitch = dims[0]
            if spitch < width or dpitch < width:
                return None  # overlapping or reversed rows: not a 2-D copy
        else:
            height, spitch, dpitch = 1, width, width
        rows.append((int(dst[i]), dpitch, int(src[i]), spitch, width, height))
    return np.array(rows, dtype=np.int64).reshape(len(rows), 6)
