"""Planning a read of archive chunks: pure functions over numpy arrays, no I/O, no GPU.

1. :func:`select_chunks`: a basic selection (ints, slices, ``...``) -> the chunks it touches and, for
   each, the box it takes from the chunk and where that box lands in the output (one row per chunk,
   built with ``meshgrid``, never a loop over chunks).
2. :func:`plan_reads`: those chunks' (file, offset, length) triples -> reads grouped by file and
   coalesced (chunks closer than ``max_gap`` bytes share one read), each landing at its place in one
   buffer; every chunk's place in that buffer.

Examples:
    >>> sel = select_chunks((10, 10), (4, 4), (slice(2, 7), 3))
    >>> sel.coords.tolist(), sel.src_start.tolist(), sel.dst_start.tolist(), sel.count.tolist()
    ([[0, 0], [1, 0]], [[2, 3], [0, 3]], [[0, 0], [2, 0]], [[2, 1], [3, 1]])
    >>> sel.out_shape, sel.squeeze
    ((5, 1), (1,))
    >>> p = plan_reads(np.array([0, 0, 1]), np.array([100, 0, 0]), np.array([50, 90, 10]), max_gap=16)
    >>> p.read_file.tolist(), p.read_offset.tolist(), p.read_nbytes.tolist(), p.chunk_pos.tolist()
    ([0, 1], [0, 0], [150, 10], [100, 0, 192])
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from gdsstore.engine.landing import slot_layout

__all__ = [
    "ChunkSelection", "ReadPlan", "ScatterPlan", "chunk_index", "normalize_selection", "plan_reads", "scatter_host",
    "scatter_plan", "select_chunks", "subset",
]

@dataclass(frozen=True)
class ChunkSelection:
    """The chunks a selection touches, one row each (``int64`` arrays of shape ``(n, ndim)``).

    Attributes:
        coords: the chunk's index in the chunk grid.
        src_start: first element taken, inside the chunk.
        dst_start: where it lands, inside the (unsqueezed) output.
        count: elements taken along each dimension.
        out_shape: the output's shape before integer-indexed axes are dropped.
        squeeze: axes indexed by an integer (dropped from the result).
        step: per dimension, the step of its slice (the read covers the slice's span; the result
            takes every ``step``-th element).
    """

    coords: np.ndarray
    src_start: np.ndarray
    dst_start: np.ndarray
    count: np.ndarray
    out_shape: tuple[int, ...]
    squeeze: tuple[int, ...]
    step: tuple[int, ...]


def subset(sel: ChunkSelection, rows: np.ndarray) -> ChunkSelection:
    """The chunks ``rows`` of a selection (a window of it), with the same output."""
    return ChunkSelection(
        sel.coords[rows], sel.src_start[rows], sel.dst_start[rows], sel.count[rows], sel.out_shape, sel.squeeze,
        sel.step,
    )


def normalize_selection(shape: tuple[int, ...], selection: Any) -> tuple[list[tuple[int, int, int]], tuple[int, ...]]:
    """``(start, stop, step)`` per dimension and the integer-indexed axes of a basic selection.

    Raises:
        IndexError: an integer out of bounds, too many indices, or a negative step.
        TypeError: an index that is not an int, a slice or ``...``.
    """
    sel = selection if isinstance(selection, tuple) else (selection,)
    if any(s is Ellipsis for s in sel):
        i = next(k for k, s in enumerate(sel) if s is Ellipsis)
        sel = sel[:i] + (slice(None),) * (len(shape) - len(sel) + 1) + sel[i + 1 :]
    if len(sel) > len(shape):
        raise IndexError(f"too many indices for an array of {len(shape)} dimensions: {selection!r}")
    sel = sel + (slice(None),) * (len(shape) - len(sel))
    spans: list[tuple[int, int, int]] = []
    squeeze: list[int] = []
    for d, (s, n) in enumerate(zip(sel, shape)):
        if isinstance(s, int | np.integer) and not isinstance(s, bool):
            k = int(s) + n if s < 0 else int(s)
            if not 0 <= k < n:
                raise IndexError(f"index {int(s)} is out of bounds for axis {d} with size {n}")
            spans.append((k, k + 1, 1))
            squeeze.append(d)
        elif isinstance(s, slice):
            a, b, st = s.indices(n)
            if st < 1:
                raise IndexError(f"axis {d}: only positive slice steps are supported, got {st}")
            spans.append((a, max(a, b), st))
        else:
            raise TypeError(f"unsupported index {s!r} for axis {d}: use ints, slices or ...")
    return spans, tuple(squeeze)


def select_chunks(shape: tuple[int, ...], chunks: tuple[int, ...], selection: Any) -> ChunkSelection:
    """The chunks of a regular grid that a basic selection touches (see the module's example).

    A slice with a step reads the span from its start to its last element; the caller takes every
    ``step``-th element of the result.
    """
    spans, squeeze = normalize_selection(shape, selection)
    per_dim: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
    out_shape: list[int] = []
    for (a, b, st), c in zip(spans, chunks):
        last = a + ((b - a - 1) // st) * st + 1 if b > a else a  # end of the span actually read
        out_shape.append(last - a)
        if last <= a:
            per_dim.append(tuple(np.zeros(0, dtype=np.int64) for _ in range(4)))  # type: ignore[arg-type]
            continue
        idx = np.arange(a // c, (last - 1) // c + 1, dtype=np.int64)
        lo = np.maximum(a, idx * c)
        hi = np.minimum(last, (idx + 1) * c)
        per_dim.append((idx, lo - idx * c, lo - a, hi - lo))
    if not shape:
        one = np.zeros((1, 0), dtype=np.int64)
        return ChunkSelection(one, one, one, one, (), squeeze, ())
    grids = [np.meshgrid(*(p[k] for p in per_dim), indexing="ij") for k in range(4)]
    coords, src, dst, count = (np.stack([g.reshape(-1) for g in gs], axis=1) for gs in grids)
    return ChunkSelection(coords, src, dst, count, tuple(out_shape), squeeze, tuple(st for _, _, st in spans))


@dataclass(frozen=True)
class ReadPlan:
    """Coalesced reads into one buffer, and where each chunk sits in it.

    Attributes:
        read_file, read_offset, read_nbytes: one row per read (``int64``), grouped by file, in offset
            order within a file.
        read_dest: where each read lands in the buffer (its slot: :func:`~gdsstore.engine.landing.slot_layout`).
        chunk_pos: per input chunk, its first byte in the buffer (``-1``: not read: missing/inlined).
        nbytes: the buffer's size.
    """

    read_file: np.ndarray
    read_offset: np.ndarray
    read_nbytes: np.ndarray
    read_dest: np.ndarray
    chunk_pos: np.ndarray
    nbytes: int


def plan_reads(file_ids: np.ndarray, offsets: np.ndarray, lengths: np.ndarray, *, max_gap: int) -> ReadPlan:
    """Group chunk triples by file and coalesce the ones closer than ``max_gap`` bytes.

    Args:
        file_ids: per chunk, its file (``< 0``: nothing to read).
        offsets, lengths: per chunk, its bytes in the file.
        max_gap: chunks at most this many bytes apart (after the end of everything before them in
            the file) share one read; the gap's bytes are read too.
    """
    file_ids = np.asarray(file_ids, dtype=np.int64)
    offsets = np.asarray(offsets, dtype=np.int64)
    lengths = np.asarray(lengths, dtype=np.int64)
    present = np.flatnonzero(file_ids >= 0)
    order = present[np.lexsort((offsets[present], file_ids[present]))]
    f, o = file_ids[order], offsets[order]
    e = o + lengths[order]
    if len(order):
        # The running end of everything before a chunk in its file: a running max that restarts at
        # each file (files are few, so one accumulate per file).
        bounds = [*np.flatnonzero(np.diff(f, prepend=-1)).tolist(), len(order)]
        run_end = np.concatenate([np.maximum.accumulate(e[a:b]) for a, b in itertools.pairwise(bounds)])
        new = np.ones(len(order), dtype=bool)
        new[1:] = (f[1:] != f[:-1]) | (o[1:] > run_end[:-1] + max_gap)
    else:
        new = np.zeros(0, dtype=bool)
    group = np.cumsum(new) - 1
    starts = np.flatnonzero(new)
    read_offset = o[starts]
    read_end = np.maximum.reduceat(e, starts) if len(starts) else np.zeros(0, dtype=np.int64)
    read_nbytes = read_end - read_offset
    read_dest, total = slot_layout(read_nbytes)
    chunk_pos = np.full(len(file_ids), -1, dtype=np.int64)
    chunk_pos[order] = read_dest[group] + (o - read_offset[group])
    return ReadPlan(f[starts], read_offset, read_nbytes, read_dest, chunk_pos, total)


def chunk_index(grid: tuple[int, ...], coords: np.ndarray) -> np.ndarray:
    """Flat (C-order) index into the chunk grid of each row of ``coords``."""
    if not grid:
        return np.zeros(len(coords), dtype=np.int64)
    return np.ravel_multi_index(tuple(coords.T), grid) if math.prod(grid) else np.zeros(0, dtype=np.int64)


@dataclass(frozen=True)
class ScatterPlan:
    """Byte-level copies of decoded chunks (rows of one ``(n, chunk_nbytes)`` buffer) into an output:
    one row per chunk, in the layout of ``gdsstore.gpu.kernels.scatter_arrays`` (offsets and strides
    in bytes, added to the two buffers' base addresses on the GPU).

    Attributes:
        src, dst: byte offset of each copy's first element in the rows buffer and in the output.
        shape: elements copied along each dimension (``(n, ndim)``).
        src_strides, dst_strides: byte strides (``(n, ndim)``).
    """

    src: np.ndarray
    dst: np.ndarray
    shape: np.ndarray
    src_strides: np.ndarray
    dst_strides: np.ndarray


def scatter_plan(
    sel: ChunkSelection, present: np.ndarray, chunks: tuple[int, ...], itemsize: int, out_strides: tuple[int, ...]
) -> ScatterPlan:
    """The copies that put each present chunk's box into the output: chunk ``present[k]`` of ``sel`` is
    row ``k`` of the decoded rows (C order, ``prod(chunks) * itemsize`` bytes each)."""
    n = len(present)
    chunk_strides = itemsize * np.array(
        [int(np.prod(chunks[d + 1 :], dtype=np.int64)) for d in range(len(chunks))], dtype=np.int64
    )
    row = int(np.prod(chunks, dtype=np.int64)) * itemsize
    dst_st = np.array(out_strides, dtype=np.int64)
    src = np.arange(n, dtype=np.int64) * row + sel.src_start[present] @ chunk_strides
    dst = sel.dst_start[present] @ dst_st
    return ScatterPlan(src, dst, sel.count[present], np.tile(chunk_strides, (n, 1)), np.tile(dst_st, (n, 1)))


def scatter_host(plan: ScatterPlan, rows: np.ndarray, out: np.ndarray) -> None:
    """Run a :class:`ScatterPlan` with numpy (what the GPU kernel does, one copy per row): the host's
    check of the plan, used by the tests."""
    from numpy.lib.stride_tricks import as_strided

    src_bytes, dst_bytes = rows.reshape(-1).view(np.uint8), out.reshape(-1).view(np.uint8)
    item = out.dtype.itemsize
    for k in range(len(plan.src)):
        shape = (*plan.shape[k].tolist(), item)
        s = as_strided(src_bytes[int(plan.src[k]) :], shape, (*plan.src_strides[k].tolist(), 1))
        d = as_strided(dst_bytes[int(plan.dst[k]) :], shape, (*plan.dst_strides[k].tolist(), 1))
        d[...] = s
