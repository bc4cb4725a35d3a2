"""zarr's byte requests as the engine's :class:`~gdsstore.engine.ranges.ByteRange`.

Shared by the stores that speak zarr over the engine: :class:`gdsstore.GDSStore` and the archives'
``VirtualStore``. It sits below both (the engine itself never imports zarr).
"""

from __future__ import annotations

import numpy as np
from zarr.abc.store import ByteRequest, OffsetByteRequest, RangeByteRequest, SuffixByteRequest

from gdsstore.engine.ranges import ByteRange

__all__ = ["to_byte_range"]


def _check_int(where: str, name: str, v: object) -> int:
    if isinstance(v, bool) or not isinstance(v, int | np.integer):
        raise TypeError(f"{where}: byte range `{name}` must be an int, got {v!r}")
    if v < 0:
        raise ValueError(f"{where}: byte range `{name}` must be >= 0, got {v}")
    return int(v)


def to_byte_range(byte_range: ByteRequest | None, where: str) -> ByteRange | None:
    """zarr's ByteRequest -> the engine's ByteRange (validated)."""
    if byte_range is None:
        return None
    if isinstance(byte_range, RangeByteRequest):
        start = _check_int(where, "start", byte_range.start)
        end = _check_int(where, "end", byte_range.end)
        if end < start:
            raise ValueError(f"{where}: byte range end {end} < start {start} in {byte_range!r}")
        return ByteRange("range", start, end)
    if isinstance(byte_range, OffsetByteRequest):
        return ByteRange("offset", _check_int(where, "offset", byte_range.offset))
    if isinstance(byte_range, SuffixByteRequest):
        return ByteRange("suffix", _check_int(where, "suffix", byte_range.suffix))
    raise TypeError(
        f"{where}: Unexpected byte_range, got {byte_range!r}; "
        "use RangeByteRequest, OffsetByteRequest, SuffixByteRequest or None"
    )
