"""The pure half of the pipeline's write path: geometry and layout with numpy only, no I/O, no GPU.

:mod:`gdsstore.gpu.write` (the executor) asks this module

- which items of a write batch need their old contents read first (read-modify-write), and where
  each old chunk lands in one stacked read buffer (:func:`partial_items`, :func:`stacked_selection`);
- how a shard is laid out once its inner chunks are encoded: their order, byte offsets and the
  index zarr writes (:func:`shard_layout`), exactly as zarr's ``ShardingCodec`` lays them out;
- where each encoded object goes in one packed staging buffer (:func:`pack_offsets`).

Example:
    >>> import numpy as np
    >>> lay = shard_layout(np.array([[0], [1]]), np.array([7, 0]), index_nbytes=36, index_at_start=False)
    >>> lay.offsets_and_lengths.tolist(), lay.data_order.tolist(), lay.total
    ([[0, 7], [18446744073709551615, 18446744073709551615]], [0], 43)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from gdsstore.engine.landing import slot_layout

__all__ = [
    "EMPTY",
    "ShardLayout",
    "pack_offsets",
    "partial_items",
    "shard_layout",
    "stacked_selection",
]

#: The shard index entry of an absent inner chunk (offset and length both 2**64 - 1).
EMPTY = np.uint64(2**64 - 1)


def partial_items(is_complete: Sequence[bool], shapes: Sequence[tuple[int, ...]]) -> dict[tuple[int, ...], list[int]]:
    """The items whose old contents must be read before writing (``is_complete`` false), grouped by
    chunk (or shard) shape, so that each group reads into one stacked buffer.

    Examples:
        >>> partial_items([True, False, False, False], [(4,), (4,), (4,), (2,)])
        {(4,): [1, 2], (2,): [3]}
    """
    groups: dict[tuple[int, ...], list[int]] = {}
    for i, (complete, shape) in enumerate(zip(is_complete, shapes, strict=True)):
        if not complete:
            groups.setdefault(tuple(shape), []).append(i)
    return groups


def stacked_selection(k: int, shape: tuple[int, ...]) -> tuple[slice, ...]:
    """Where the ``k``-th chunk of ``shape`` lies in a buffer of ``n`` such chunks stacked along the
    first axis (shape ``(n * shape[0], *shape[1:])``).

    Examples:
        >>> stacked_selection(2, (4, 3))
        (slice(8, 12, None), slice(0, 3, None))
    """
    if not shape:
        raise ValueError("stacked_selection(): 0-d chunks cannot be stacked; read them one by one")
    return (slice(k * shape[0], (k + 1) * shape[0]), *(slice(0, n) for n in shape[1:]))


@dataclass(frozen=True)
class ShardLayout:
    """Where the encoded inner chunks of one shard go.

    ``offsets_and_lengths``: the shard index (``chunks_per_shard + (2,)``, ``<u8``) as zarr stores it,
    absolute offsets, :data:`EMPTY` for absent chunks. ``data_order``: the present inner chunks (their
    positions in the ``order`` given) in the order their bytes follow each other. ``data_offsets``:
    the byte offset of each of them in the shard. ``index_offset``: where the encoded index goes.
    ``total``: the shard's size in bytes.
    """

    offsets_and_lengths: np.ndarray
    data_order: np.ndarray
    data_offsets: np.ndarray
    index_offset: int
    total: int


def shard_layout(
    order: np.ndarray, lengths: np.ndarray, *, index_nbytes: int, index_at_start: bool
) -> ShardLayout:
    """Lay out one shard from its encoded inner chunk sizes (zarr's ``_build_shard_layout``).

    Args:
        order: ``n x ndim`` coordinates of the inner chunks in the codec's write order (zarr:
            ``subchunk_write_order``, morton by default); every inner chunk of the shard once.
        lengths: encoded size of the chunk at each row of ``order``; ``0`` (or less): absent.
        index_nbytes: size of the encoded index (fixed by the index codecs).
        index_at_start: ``index_location == "start"``: the index precedes the data.

    Returns:
        The layout; ``total == 0`` when no chunk is present (zarr deletes such a shard).
    """
    order = np.asarray(order, dtype=np.int64)
    lengths = np.asarray(lengths, dtype=np.int64)
    if order.ndim != 2 or len(order) != len(lengths):
        raise ValueError(f"shard_layout(): {len(order)} coordinates for {len(lengths)} lengths")
    per = tuple((order.max(axis=0) + 1).tolist()) if len(order) else ()
    index = np.full((*per, 2), EMPTY, dtype="<u8")
    present = np.flatnonzero(lengths > 0)
    if not len(present):
        return ShardLayout(index, present, present, 0, 0)
    sizes = lengths[present]
    start = index_nbytes if index_at_start else 0
    offsets = start + np.concatenate(([0], np.cumsum(sizes)[:-1]))
    where = tuple(order[present].T)
    index[(*where, 0)] = offsets.astype(np.uint64)
    index[(*where, 1)] = sizes.astype(np.uint64)
    data_end = start + int(sizes.sum())
    index_offset = 0 if index_at_start else data_end
    return ShardLayout(index, present, offsets, index_offset, data_end + (0 if index_at_start else index_nbytes))


def pack_offsets(sizes: Sequence[int] | np.ndarray, align: int = 1) -> tuple[np.ndarray, int]:
    """Offsets of objects of ``sizes`` packed one after another (each start a multiple of ``align``)
    in one staging buffer, and the buffer's size.

    Examples:
        >>> o, n = pack_offsets([5, 3, 8], align=4)
        >>> o.tolist(), n
        ([0, 8, 12], 20)
    """
    s = np.asarray(sizes, dtype=np.int64).clip(0)
    offsets = slot_layout(s, align)[0]
    return offsets, int(offsets[-1] + s[-1]) if len(s) else 0


def as_coords(order: Any) -> np.ndarray:
    """Coordinates from an iterable of tuples (zarr's order iterators) as an ``n x ndim`` array."""
    rows = [tuple(c) for c in order]
    if not rows:
        return np.zeros((0, 0), dtype=np.int64)
    return np.array(rows, dtype=np.int64).reshape(len(rows), -1)
