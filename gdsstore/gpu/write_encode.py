"""Encoding a write batch's chunks as one batch, the empty ones elided.

Device chunks whose bytes-to-bytes stage nvCOMP writes are encoded in one nvCOMP call
(:mod:`gdsstore.gpu.write_gpu`); everything else with the codecs' own synchronous encode, in parallel
on the engine's thread pool. A chunk that is all fill value with ``write_empty_chunks`` off is not
encoded (zarr's ``chunk_is_empty`` rule): its key is deleted instead.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

import gdsstore.trace as _trace
from gdsstore.engine.landing import Landed
from gdsstore.gpu.decode import raw_nbytes
from gdsstore.gpu.write_publish import map_on_pool

if TYPE_CHECKING:
    from zarr.core.array_spec import ArraySpec

__all__ = [
    "encode", "encode_device_or_elide", "encode_host", "encode_host_or_elide", "encode_or_elide", "host_bytes",
    "host_chunk_bytes", "is_empty", "zero_fill",
]


def zero_fill(spec: ArraySpec) -> bool:
    """Whether the fill value's bit pattern is all zero bytes for a plain numeric dtype."""
    from zarr.core.chunk_utils import fill_value_or_default

    dt = spec.dtype.to_native_dtype()
    if dt.kind not in "biuf" or dt.itemsize not in (1, 2, 4, 8):
        return False
    fill = np.asarray(fill_value_or_default(spec), dtype=dt)
    return not fill.view(f"u{dt.itemsize}").any()


def is_empty(array: Any, spec: ArraySpec) -> bool:
    """zarr's ``chunk_is_empty`` (all fill value and ``write_empty_chunks`` off), without its
    full-size temporaries when the fill value is all zero bits: then "empty" is "no non-zero word"."""
    from zarr.core.chunk_utils import chunk_is_empty

    if spec.config.write_empty_chunks:
        return False
    if zero_fill(spec):
        data = array.as_ndarray_like()
        return not bool(data.view(f"u{data.dtype.itemsize}").any())
    return chunk_is_empty(array, spec)


def _all_zero(buf: Any) -> bool:
    """Whether every byte of a host ``Buffer`` is zero (read as 8-byte words where aligned)."""
    data = host_bytes(buf)
    n8 = data.size // 8 * 8 if data.ctypes.data % 8 == 0 else 0
    return not (data[:n8].view(np.uint64).any() or data[n8:].any())


def encode_or_elide(transform: Any, array: Any, spec: ArraySpec) -> Any:
    """zarr's ``encode_or_elide_chunk`` for one host chunk: ``None`` when the chunk is empty (see
    :func:`is_empty`), else its encoded bytes. With an all-zero fill value and a ``bytes`` codec, the
    emptiness check runs on the contiguous bytes that codec made anyway, instead of on the strided view
    (other array-to-bytes codecs, such as a zarr v2 chunk's with its compressor, do not make raw bytes)."""
    from zarr.codecs import BytesCodec

    if spec.config.write_empty_chunks or not zero_fill(spec) or not isinstance(transform._ab_codec, BytesCodec):
        return None if is_empty(array, spec) else transform.encode_chunk(array, spec)
    aa_specs, ab_spec = transform._resolve_specs(spec)
    data = array
    for codec, aa_spec in zip(transform._aa_codecs, aa_specs, strict=True):
        data = codec._encode_sync(data, aa_spec)
        if data is None:
            return None
    raw = transform._ab_codec._encode_sync(data, ab_spec)
    if raw is None or _all_zero(raw):
        return None
    for codec in transform._bb_codecs:
        raw = codec._encode_sync(raw, ab_spec)
        if raw is None:
            return None
    return raw


def _empty_flags(arrays: Sequence[Any], specs: Sequence[ArraySpec]) -> list[bool]:
    """:func:`is_empty` of each chunk; device chunks are checked with one reduction each and a single
    device-to-host copy of all the answers (no sync per chunk)."""
    from gdsstore.gpu.codecs import is_device_buffer

    if not arrays or any(s.config.write_empty_chunks for s in specs):
        return [False] * len(arrays)
    if is_device_buffer(arrays[0]):
        from gdsstore.engine import cuda

        cp = cuda.cupy_or_none()
        assert cp is not None
        flags = cp.stack([_device_all_fill(cp, a.as_ndarray_like(), s) for a, s in zip(arrays, specs)])
        return [bool(x) for x in flags.get().tolist()]
    return [is_empty(a, s) for a, s in zip(arrays, specs)]


def _device_all_fill(cp: Any, data: Any, spec: ArraySpec) -> Any:
    """A device scalar: whether every element of ``data`` is the fill value (NaN matches NaN), zarr's
    ``chunk_is_empty`` without a host round trip (its ``all_equal`` does not take CuPy arrays)."""
    from zarr.core.chunk_utils import fill_value_or_default

    if zero_fill(spec):
        return ~data.view(f"u{data.dtype.itemsize}").any()
    fill = np.asarray(fill_value_or_default(spec), dtype=data.dtype)
    if data.dtype.kind in "fc" and np.isnan(fill):
        return cp.isnan(data).all()
    return (data == fill).all()


def encode_host(
    transform: Any, arrays: Sequence[Any], specs: Sequence[ArraySpec], reason: str = "host buffer"
) -> Landed:
    """Encode chunks with the codecs' own synchronous encode, in parallel; one trace row (``reason``:
    why the CPU encodes them)."""
    from gdsstore.gpu.codecs import quiet_records

    t0 = time.perf_counter()

    def one(i: int) -> np.ndarray | None:
        with quiet_records():
            buf = transform.encode_chunk(arrays[i], specs[i])
        return None if buf is None else host_bytes(buf)

    views = map_on_pool(one, len(arrays))
    if arrays:
        _trace.record("encode", "cpu-codec", reason, sum(raw_nbytes(s) for s in specs), time.perf_counter() - t0)
    return Landed.each(views)


def encode_host_or_elide(
    transform: Any, arrays: Sequence[Any], specs: Sequence[ArraySpec]
) -> tuple[list[np.ndarray | None], Landed]:
    """Host chunks: their encoded bytes (``None``: empty, to be deleted) by :func:`encode_or_elide`, in
    parallel; one ``encode`` trace row. The batch returned owns nothing (as :func:`encode_device_or_elide`'s
    does on the device)."""
    t0 = time.perf_counter()
    views = map_on_pool(lambda i: host_chunk_bytes(transform, arrays[i], specs[i]), len(arrays))
    _trace.record("encode", "cpu-codec", "host buffer", sum(raw_nbytes(s) for s in specs), time.perf_counter() - t0)
    return views, Landed.empty(0)


def host_chunk_bytes(transform: Any, array: Any, spec: ArraySpec) -> np.ndarray | None:
    """:func:`encode_or_elide` of one host chunk: its encoded bytes as a flat ``uint8`` array, ``None`` when
    it is empty (the codecs' own trace rows quiet: the batch records one)."""
    from gdsstore.gpu.codecs import quiet_records

    with quiet_records():
        buf = encode_or_elide(transform, array, spec)
    return None if buf is None else host_bytes(buf)


def host_bytes(buf: Any) -> np.ndarray:
    """The bytes of a host zarr ``Buffer`` as a flat ``uint8`` array (a view, no copy)."""
    return np.asarray(buf.as_numpy_array()).view(np.uint8).reshape(-1)


def encode(transform: Any, arrays: Sequence[Any], specs: Sequence[ArraySpec], device: bool) -> Landed:
    """Encode chunks as one batch: on the GPU where :func:`gdsstore.gpu.write_gpu.encode_device`
    can, else on the CPU (:func:`encode_host`, with the reason)."""
    if device and arrays:
        from gdsstore.gpu import write_gpu

        enc = write_gpu.encode_device(transform, arrays, specs)
        if not isinstance(enc, str):
            return enc
        return encode_host(transform, arrays, specs, enc)
    return encode_host(transform, arrays, specs)


def encode_device_or_elide(
    transform: Any, arrays: Sequence[Any], specs: Sequence[ArraySpec]
) -> tuple[list[np.ndarray | None], Landed]:
    """Device chunks: their encoded bytes (``None``: empty, to be deleted) and the batch that owns them.

    Where :func:`gdsstore.gpu.write_gpu.pack_raw` can lay the raw bytes out in one buffer, emptiness is
    one reduction over it and nvCOMP reads the packed slices; otherwise each chunk goes through zarr's
    encode (:func:`encode`) after :func:`_empty_flags`.
    """
    from gdsstore.gpu import write_gpu

    packed = write_gpu.pack_raw(transform, arrays)
    if packed is None:
        empty = _empty_flags(arrays, specs)
        keep = [i for i, e in enumerate(empty) if not e]
        enc = encode(transform, [arrays[i] for i in keep], [specs[i] for i in keep], True)
    else:
        buf, offsets, sizes = packed
        empty = _packed_empty(buf, offsets, sizes, arrays, specs)
        keep = [i for i, e in enumerate(empty) if not e]
        got = write_gpu.encode_packed(transform, buf, [offsets[i] for i in keep], [sizes[i] for i in keep],
                                      [specs[i] for i in keep])
        enc = got if not isinstance(got, str) else encode_host(
            transform, [arrays[i] for i in keep], [specs[i] for i in keep], got)
    views: list[np.ndarray | None] = [None] * len(arrays)
    for k, i in enumerate(keep):
        views[i] = enc.item(k)
    return views, enc


def _packed_empty(buf: Any, offsets: Sequence[int], sizes: Sequence[int], arrays: Sequence[Any],
                  specs: Sequence[ArraySpec]) -> list[bool]:
    """:func:`_empty_flags` from packed raw bytes: chunks of one size with an all-zero fill value are
    checked by one reduction over the buffer (one row per chunk) and one small copy back."""
    if not specs or any(s.config.write_empty_chunks for s in specs):
        return [False] * len(specs)
    n = sizes[0]
    regular = all(z == n for z in sizes) and all(o == k * n for k, o in enumerate(offsets))
    if not (regular and n and all(zero_fill(s) for s in specs)):
        return _empty_flags(arrays, specs)
    word = 8 if n % 8 == 0 else 1
    rows = buf[: n * len(sizes)].view(f"u{word}").reshape(len(sizes), n // word)
    return [not bool(x) for x in _row_max(rows).get().tolist()]


def _row_max(rows: Any) -> Any:
    """Each row's largest (unsigned) word: CUB's segmented reduction, compiled into CuPy's wheel, where
    it takes the rows; ``.max(axis=1)`` otherwise: CuPy's own reduction compiles a kernel where the kernel
    cache is empty, most of a fresh process's first GPU write (docs/performance.md)."""
    try:
        from cupy.cuda import cub

        got = cub.cub_reduction(rows, cub.CUPY_CUB_MAX, axis=1)
    except Exception:  # no CUB in this CuPy build, or rows it does not take
        got = None
    return rows.max(axis=1) if got is None else got
