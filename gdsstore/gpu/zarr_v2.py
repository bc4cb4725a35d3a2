"""zarr v2 arrays in the batched pipeline: zarr's ``V2Codec`` split into a bytes-to-bytes stage (its
compressor and filters) and the rest (a view of the raw bytes in the chunk's dtype and order).

zarr 3 reads a v2 array through one array-to-bytes codec, ``V2Codec(filters, compressor)``, that
decodes with numcodecs on the host. Split, the compressor becomes a stage the pipeline batches like a
v3 compressor: numcodecs' ``Blosc`` on the GPU through :mod:`gdsstore.gpu.blosc`, ``Zstd``, ``LZ4``
and ``GZip`` through nvCOMP, any other compressor (or any filter) on the CPU with numcodecs.

Examples:
    >>> from numcodecs import Blosc
    >>> from zarr.codecs._v2 import V2Codec
    >>> bb, rest = split([V2Codec(filters=None, compressor=Blosc(cname="lz4"))])
    >>> bb[0].chunk_format, rest[0].compressor is None
    ('blosc', True)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from zarr.abc.codec import BytesBytesCodec

if TYPE_CHECKING:
    from collections.abc import Sequence

    from zarr.core.array_spec import ArraySpec
    from zarr.core.buffer import Buffer

__all__ = ["V2Compressor", "split"]

# numcodecs codec_id -> the chunk format of gdsstore.gpu.nvcomp / gdsstore.gpu.blosc
_FORMATS = {"blosc": "blosc", "zstd": "zstd", "lz4": "lz4", "gzip": "gzip"}


@dataclass(frozen=True)
class V2Compressor(BytesBytesCodec):
    """A v2 array's compressor (and filters) as one bytes-to-bytes stage: stored bytes to the chunk's
    raw bytes, with numcodecs on the host; ``chunk_format`` names the GPU decoder that batches it
    (``None``: filters, or a compressor without one)."""

    compressor: Any
    filters: tuple[Any, ...] = ()

    is_fixed_size = False

    @property
    def chunk_format(self) -> str | None:
        return None if self.filters else _FORMATS.get(getattr(self.compressor, "codec_id", ""))

    def _decode_sync(self, chunk_bytes: Buffer, chunk_spec: ArraySpec) -> Buffer:
        from numcodecs.compat import ensure_contiguous_ndarray

        chunk: Any = self.compressor.decode(chunk_bytes.as_numpy_array())
        for f in reversed(self.filters):
            chunk = f.decode(chunk)
        raw = np.ascontiguousarray(ensure_contiguous_ndarray(chunk)).view(np.uint8).reshape(-1)
        return chunk_spec.prototype.buffer.from_array_like(raw)

    async def _decode_single(self, chunk_bytes: Buffer, chunk_spec: ArraySpec) -> Buffer:
        return self._decode_sync(chunk_bytes, chunk_spec)

    async def _encode_single(self, chunk_bytes: Buffer, chunk_spec: ArraySpec) -> Buffer | None:
        raise NotImplementedError("V2Compressor decodes only: v2 writes go through zarr's V2Codec")

    def compute_encoded_size(self, input_byte_length: int, chunk_spec: ArraySpec) -> int:
        raise NotImplementedError


def split(codecs: Sequence[Any]) -> tuple[list[Any], list[Any]] | None:
    """``(bytes-to-bytes stage, rest)`` of a v2 array's codecs (a lone ``V2Codec`` with a compressor and
    no filters), else ``None``: the codecs stay as they are (filters may make objects of the bytes)."""
    from zarr.codecs._v2 import V2Codec  # private: zarr's v2 codec has no public name

    if len(codecs) != 1 or not isinstance(codecs[0], V2Codec):
        return None
    v2 = codecs[0]
    if v2.compressor is None or v2.filters:
        return None
    return [V2Compressor(v2.compressor)], [V2Codec(filters=None, compressor=None)]
