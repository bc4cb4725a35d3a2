"""Where each zstd frame of a chunk sits, from the frame headers and block headers alone (RFC 8878, 3.1).

zarr-python (numcodecs) and zarrs read a chunk that holds several concatenated zstd frames (what ``pzstd`` and
streaming writers produce); nvCOMP decodes one frame per item of a batch. :func:`split_frames` walks a chunk's
frames on the host, without decoding anything, so that each frame becomes one item of an nvCOMP batch, decoded
into its place of the chunk's output. gdsstore itself writes one frame per chunk (tensorstore refuses several).

A frame is a 4-byte magic, a header (descriptor, window, dictionary id, content size), blocks of a 3-byte
header each (last-block bit, type, size: raw and compressed blocks hold ``size`` bytes, an RLE block one) and,
when the descriptor says so, a 4-byte checksum. Skippable frames (magic ``0x184D2A5?``) hold no data and are
stepped over.

Example:
    >>> import numcodecs
    >>> z = numcodecs.Zstd(level=1)
    >>> chunk = z.encode(b"a" * 1000) + z.encode(b"b" * 24)
    >>> t = split_frames(chunk)
    >>> t.offsets.tolist(), t.decoded.tolist(), t.decoded_offsets.tolist()
    ([0, 19], [1000, 24], [0, 1000])
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["FrameTable", "split_frames"]

_MAGIC = 0xFD2FB528
_SKIPPABLE = 0x184D2A50  # ... to 0x184D2A5F
_FCS_BYTES = (0, 2, 4, 8)  # by the content-size flag (flag 0: one byte when single-segment, else none)
_DICT_BYTES = (0, 1, 2, 4)
_RESERVED_BLOCK = 3
_RLE_BLOCK = 1


@dataclass(frozen=True)
class FrameTable:
    """The zstd frames of one chunk: frame ``k`` is ``sizes[k]`` bytes at ``offsets[k]`` of the chunk and
    decodes to ``decoded[k]`` bytes at ``decoded_offsets[k]`` of the chunk's output (``int64`` arrays)."""

    offsets: np.ndarray
    sizes: np.ndarray
    decoded: np.ndarray

    @property
    def decoded_offsets(self) -> np.ndarray:
        """Where each frame's bytes start in the decoded chunk."""
        out: np.ndarray = np.cumsum(self.decoded) - self.decoded
        return out

    @property
    def total(self) -> int:
        """The decoded chunk's size: the sum of the frames' content sizes."""
        return int(self.decoded.sum())


def split_frames(data: Any) -> FrameTable | None:
    """The frames of a chunk of concatenated zstd (and skippable) frames, or ``None`` when a frame declares
    no content size (its place in the output is only known by decoding it: the caller decodes the chunk whole).

    Args:
        data: the chunk's bytes (bytes-like or numpy ``uint8``).

    Raises:
        ValueError: not zstd, a reserved bit or block type, or a frame that runs past the chunk's end
            (naming the offset).
    """
    buf = memoryview(np.ascontiguousarray(np.frombuffer(data, dtype=np.uint8))).cast("B")
    n = len(buf)
    offsets: list[int] = []
    sizes: list[int] = []
    decoded: list[int] = []
    pos = 0
    while pos < n:
        if n - pos < 5:  # a magic and a frame header descriptor at least
            raise ValueError(f"zstd: {n - pos} trailing bytes at offset {pos} are no frame")
        magic = int.from_bytes(buf[pos : pos + 4], "little")
        if magic & 0xFFFFFFF0 == _SKIPPABLE:
            pos = _skip(buf, pos)
            continue
        if magic != _MAGIC:
            raise ValueError(f"zstd: no frame magic at offset {pos} (found {magic:#010x})")
        size, end = _frame_at(buf, pos)
        if size is None:
            return None
        offsets.append(pos)
        sizes.append(end - pos)
        decoded.append(size)
        pos = end
    if not offsets:
        raise ValueError("zstd: no frame in the chunk")
    return FrameTable(np.array(offsets, np.int64), np.array(sizes, np.int64), np.array(decoded, np.int64))


def _skip(buf: memoryview, pos: int) -> int:
    """The end of the skippable frame at ``pos``."""
    if len(buf) < pos + 8:
        raise ValueError(f"zstd: skippable frame at offset {pos} truncated")
    end = pos + 8 + int.from_bytes(buf[pos + 4 : pos + 8], "little")
    if end > len(buf):
        raise ValueError(f"zstd: skippable frame at offset {pos} runs past the chunk's end")
    return end


def _frame_at(buf: memoryview, pos: int) -> tuple[int | None, int]:
    """``(content size or None, end)`` of the zstd frame at ``pos``: its header, then its blocks."""
    n = len(buf)
    desc = buf[pos + 4]
    if desc & 0x08:
        raise ValueError(f"zstd: reserved bit set in the frame header at offset {pos}")
    fcs_flag, single, checksum, dict_flag = desc >> 6, (desc >> 5) & 1, (desc >> 2) & 1, desc & 3
    head = pos + 5 + (1 - single) + _DICT_BYTES[dict_flag]
    fcs = _FCS_BYTES[fcs_flag] or single
    if head + fcs > n:
        raise ValueError(f"zstd: frame header at offset {pos} truncated")
    size: int | None = None
    if fcs:
        size = int.from_bytes(buf[head : head + fcs], "little") + (256 if fcs == 2 else 0)
    at = head + fcs
    while True:
        if at + 3 > n:
            raise ValueError(f"zstd: frame at offset {pos} runs past the chunk's end (block header at {at})")
        bh = int.from_bytes(buf[at : at + 3], "little")
        kind, bsize = (bh >> 1) & 3, bh >> 3
        if kind == _RESERVED_BLOCK:
            raise ValueError(f"zstd: reserved block type at offset {at}")
        at += 3 + (1 if kind == _RLE_BLOCK else bsize)
        if bh & 1:
            break
    end = at + 4 * checksum
    if end > n:
        raise ValueError(f"zstd: frame at offset {pos} runs past the chunk's end")
    return size, end
