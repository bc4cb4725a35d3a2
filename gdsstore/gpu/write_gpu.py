"""Batched GPU encode for the write path: one nvCOMP call, one crc32c kernel, one device-to-host copy.

Built only from GPU-tested pieces: :func:`gdsstore.gpu.codecs.gpu_encode_bytes` (nvCOMP zstd/lz4 in
numcodecs' framing), :func:`gdsstore.gpu.kernels.crc32c_device`, the pinned staging buffers of
:mod:`gdsstore.engine.landing` and :func:`gdsstore.engine.cuda.memcpy_dtoh`.

A chain runs here when its bytes-to-bytes stage is at most one compressor nvCOMP writes (``zstd``
without checksum, ``numcodecs.lz4``) followed by at most one ``crc32c``; :func:`gpu_encode_plan`
says which, or why not (the caller then encodes on the CPU and records that reason).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

import gdsstore.trace as _trace
from gdsstore.engine import cuda, landing
from gdsstore.engine.landing import Landed
from gdsstore.gpu import nvcomp, write_plan
from gdsstore.gpu.decode import bytes_swap_width, swap_bytes

if TYPE_CHECKING:
    from zarr.core.array_spec import ArraySpec


__all__ = ["encode_device", "encode_packed", "gpu_encode_plan", "pack_raw"]


def gpu_encode_plan(bb_codecs: Sequence[Any], raw_sizes: Sequence[int]) -> tuple[str | None, bool, str] | str:
    """``(compressor format or None, crc32c last?, reason)`` when the bytes-to-bytes codecs encode as
    one GPU batch, else the reason they do not (a ``str``)."""
    from zarr.codecs import Crc32cCodec

    from gdsstore.gpu.codecs import GPUBytesCodec, codec_format

    codecs = list(bb_codecs)
    crc = bool(codecs) and isinstance(codecs[-1], Crc32cCodec)
    if crc:
        codecs.pop()
    if len(codecs) > 1:
        return f"codec chain {[codec_format(c) for c in bb_codecs]} not batchable on the GPU"
    if not codecs:
        return None, crc, "crc32c GPU kernel" if crc else "no compressor"
    c = codecs[0]
    fmt = codec_format(c)
    d = nvcomp.route_codec(fmt or type(c).__name__, device=True, encode=True)
    if d.route != "gpu-encode":
        return d.reason
    if not isinstance(c, GPUBytesCodec) or not c._gpu_encodable():
        return f"{fmt} with checksum=True writes on the CPU"
    if nvcomp.encode_chunk_size(list(raw_sizes)) is None:
        return f"chunk larger than nvCOMP's {nvcomp.MAX_ENCODE_CHUNK >> 20} MiB limit"
    return fmt, crc, d.reason


def encode_device(transform: Any, arrays: Sequence[Any], specs: Sequence[ArraySpec]) -> Landed | str:
    """Encode device chunk arrays as one GPU batch into one pinned host buffer.

    Returns:
        the encoded objects (item ``i``: chunk ``i``'s), or why the chain cannot run here (the caller encodes on the CPU and
        records that reason with its ``cpu-codec`` row).
    """
    from zarr.abc.codec import BytesBytesCodec
    from zarr.core.chunk_utils import ChunkTransform

    from gdsstore.gpu.codecs import _as_device_bytes

    plan = _plan(transform, specs)
    if isinstance(plan, str):
        return plan
    t0 = time.perf_counter()
    array_part = ChunkTransform(codecs=tuple(c for c in transform.codecs if not isinstance(c, BytesBytesCodec)))
    raws = []
    for a, s in zip(arrays, specs):
        r = array_part.encode_chunk(a, s)
        assert r is not None  # array-to-bytes codecs always produce bytes
        raws.append(_as_device_bytes(r))
    return _encode_raws(raws, plan, t0)


def encode_packed(transform: Any, packed: Any, offsets: Sequence[int], sizes: Sequence[int],
                  specs: Sequence[ArraySpec]) -> Landed | str:
    """:func:`encode_device` for chunks whose raw bytes :func:`pack_raw` already laid out in one
    device buffer (``packed[offsets[i]:offsets[i] + sizes[i]]``)."""
    plan = _plan(transform, specs)
    if isinstance(plan, str):
        return plan
    t0 = time.perf_counter()
    return _encode_raws([packed[o : o + n] for o, n in zip(offsets, sizes)], plan, t0)


def pack_raw(transform: Any, arrays: Sequence[Any]) -> tuple[Any, list[int], list[int]] | None:
    """Every chunk's raw bytes, as zarr's ``BytesCodec`` makes them (C order, the codec's byte order),
    in one device buffer: one strided copy per chunk instead of zarr's per-chunk encode and its
    allocations (and one byte swap for the batch when the codec's byte order is not the arrays').
    ``None`` when the chain's array part is not a lone ``BytesCodec``, or the chunks are not all CuPy
    arrays of one dtype (then zarr's encode runs per chunk).
    """
    from zarr.codecs import BytesCodec

    cp = cuda.cupy_or_none()
    ab = getattr(transform, "_ab_codec", None)
    if cp is None or not arrays or getattr(transform, "_aa_codecs", True) or not isinstance(ab, BytesCodec):
        return None
    datas = [a.as_ndarray_like() for a in arrays]
    dt = datas[0].dtype
    if not all(isinstance(d, cp.ndarray) and d.dtype == dt for d in datas):
        return None
    sizes = [int(d.nbytes) for d in datas]
    offsets, total = write_plan.pack_offsets(sizes)
    packed = cp.empty(max(total, 1), dtype=cp.uint8)
    for d, o, n in zip(datas, offsets.tolist(), sizes):
        packed[o : o + n].view(dt).reshape(d.shape)[...] = d
    width = bytes_swap_width(ab, dt)
    if width and total:  # the codec's byte order is not the arrays': one swap for the batch
        packed[:total] = swap_bytes(packed[:total], width)
    return packed, offsets.tolist(), sizes


def _plan(transform: Any, specs: Sequence[ArraySpec]) -> tuple[str | None, bool, str, list[int]] | str:
    from zarr.abc.codec import BytesBytesCodec

    if cuda.cupy_or_none() is None or not cuda.gpu_available():
        return "no usable GPU"
    bb = [c for c in transform.codecs if isinstance(c, BytesBytesCodec)]
    sizes = [int(np.prod(s.shape, dtype=np.int64)) * s.dtype.to_native_dtype().itemsize for s in specs]
    plan = gpu_encode_plan(bb, sizes)
    if isinstance(plan, str):
        return plan
    return (*plan, sizes)


def _encode_raws(raws: list[Any], plan: tuple[str | None, bool, str, list[int]], t0: float) -> Landed:
    """nvCOMP (when the chain compresses), crc32c tails, one device-to-host copy, one trace row."""
    from gdsstore.gpu.codecs import gpu_encode_bytes

    cp = cuda.cupy_or_none()
    fmt, crc, reason, sizes = plan
    enc = gpu_encode_bytes(fmt, raws) if fmt is not None else raws
    crcs = None
    if crc:
        from gdsstore.gpu.kernels import crc32c_device

        crcs = crc32c_device(enc)
    tail = 4 if crc else 0
    lengths = [int(e.size) + tail for e in enc]
    offsets, total = write_plan.pack_offsets(lengths)
    host, pinned = _to_pinned(cp, enc, offsets.tolist(), total, tail)
    if crcs is not None:
        for k, (o, n) in enumerate(zip(offsets.tolist(), lengths)):
            host[o + n - 4 : o + n] = np.array([crcs[k]], dtype="<u4").view(np.uint8)
    _trace.record("encode", "gpu-encode", reason, sum(sizes), time.perf_counter() - t0, "", cuda_device(raws))
    return Landed(host, offsets, lengths, pinned)


def cuda_device(arrays: Sequence[Any]) -> int | None:
    return int(arrays[0].device.id) if arrays else None


def _to_pinned(
    cp: Any, chunks: Sequence[Any], offsets: Sequence[int], total: int, tail: int
) -> tuple[np.ndarray, Any]:
    """Pack device byte arrays at ``offsets`` (leaving ``tail`` bytes after each for its crc32c) into
    one device buffer, then one device-to-host copy into a pinned staging buffer."""
    dev = cp.empty(max(total, 1), dtype=cp.uint8)
    if not tail and chunks:
        cp.concatenate(chunks, out=dev[:total])  # one kernel for the batch, not one copy per chunk
    else:
        for c, o in zip(chunks, offsets):
            dev[o : o + int(c.size)] = c
    host, pinned = landing.alloc_host(total, True)
    cp.cuda.get_current_stream().synchronize()
    if total:
        if pinned is not None:
            cuda.memcpy_dtoh(int(dev.device.id), int(pinned.ptr), int(dev.data.ptr), total)
        else:
            host[:] = dev[:total].get()
    return host, pinned
