"""nvCOMP access: which chunk formats decode on the GPU, the reason when they do not, and batched calls.

nvCOMP (optional extra ``gdsstore[nvcomp]``, module ``nvidia.nvcomp``) is imported on first use only.
Formats and their compatibility with numcodecs (what plain zarr writes and reads):

- ``zstd``: numcodecs writes standard zstd frames; nvCOMP's RAW zstd reads them and writes frames that
  numcodecs reads (mutually readable, measured).
- ``gzip``: a gzip member is a 10+ byte header, a raw deflate stream and an 8-byte trailer (CRC-32,
  size). The GPU decodes the deflate stream with nvCOMP's RAW Deflate after the header is parsed on
  the host; writing stays on the CPU (the trailer needs a CRC-32 of the data, and numcodecs' gzip is
  what other readers expect byte for byte).
- ``lz4`` (numcodecs): a 4-byte little-endian size, then one raw LZ4 block: nvCOMP's RAW LZ4 both ways.
- ``blosc``: its frames are parsed on the host (:mod:`gdsstore.gpu.blosc`) and their lz4/zstd streams
  decoded here, batched as ``lz4`` and ``zstd`` payloads.

Example:
    >>> from gdsstore.gpu import nvcomp
    >>> nvcomp.route_codec("zstd", device=False).route
    'cpu-codec'
"""

from __future__ import annotations

import functools
import struct
import threading
from dataclasses import dataclass, replace
from typing import Any

from gdsstore import policy
from gdsstore.engine import cuda
from gdsstore.engine.landing import slot_layout
from gdsstore.gpu import nvcomp_capi
from gdsstore.policy import Decision

__all__ = [
    "GPU_DECODABLE",
    "GPU_ENCODABLE",
    "OUT_ALIGN",
    "Frame",
    "decode_batch",
    "decode_batch_into",
    "encode_batch",
    "frame_of",
    "nvcomp_or_none",
    "nvcomp_reason",
    "route_codec",
    "zstd_content_size",
]

#: Chunk formats that nvCOMP can decode bit-compatibly with numcodecs (defined by the policy).
GPU_DECODABLE = policy.GPU_DECODABLE
#: Formats that the GPU also writes (gzip writes on the CPU: see the module docstring).
GPU_ENCODABLE = policy.GPU_ENCODABLE

# nvCOMP's algorithm name for each chunk format.
_ALGORITHM = {"zstd": "zstd", "gzip": "deflate", "lz4": "lz4"}


@functools.cache
def _import_nvcomp() -> tuple[Any, str]:
    try:
        from nvidia import nvcomp
    except Exception as exc:  # ImportError, or the shared library failing to load
        # A trace reason: a short phrase (the install command is in docs/install.md and gdsstore doctor).
        return None, f"nvCOMP not available ({'not installed' if isinstance(exc, ImportError) else 'failed to load'})"
    return nvcomp, f"nvCOMP {getattr(nvcomp, '__version__', '?')}"


def nvcomp_or_none() -> Any:
    """The ``nvidia.nvcomp`` module, or ``None`` when it is not installed or cannot load."""
    return _import_nvcomp()[0]


def nvcomp_reason() -> str:
    """Why nvCOMP is (not) usable, in words for the trace."""
    return _import_nvcomp()[1]


def route_codec(fmt: str, *, device: bool, encode: bool = False) -> Decision:
    """The route of a codec on this machine: :func:`gdsstore.policy.decide_codec` given its facts
    (GPU present? nvCOMP loads?).

    Returns:
        ``Decision("gpu-decode" | "gpu-encode" | "cpu-codec", reason)``.
    """
    gpu = cuda.gpu_available() if device else False
    err = None if not (device and gpu) or nvcomp_or_none() is not None else nvcomp_reason()
    return policy.decide_codec(fmt, device=device, encode=encode, gpu=gpu, nvcomp_error=err)


# -- framing: where the nvCOMP payload sits inside a numcodecs chunk -------------------------------


@dataclass(frozen=True)
class Frame:
    """The nvCOMP payload of one stored chunk: ``data[start:stop]`` decodes to ``size`` bytes (``-1``: unknown)."""

    start: int
    stop: int
    size: int


_GZ_FTEXT, _GZ_FHCRC, _GZ_FEXTRA, _GZ_FNAME, _GZ_FCOMMENT = 1, 2, 4, 8, 16


def frame_of(fmt: str, head: Any, total: int) -> Frame:
    """Locate the nvCOMP payload of a chunk in format ``fmt`` from its first bytes.

    Args:
        fmt: chunk format.
        head: the chunk's first bytes (bytes-like or numpy ``uint8``; the whole chunk or its header).
        total: the chunk's length in bytes.

    Raises:
        ValueError: the header is not valid for ``fmt`` (then the CPU codec must decode it).
    """
    if fmt == "zstd":
        return Frame(0, total, -1)
    if fmt == "lz4":
        if total < 4:
            raise ValueError(f"frame_of(): lz4 chunk of {total} bytes has no size header")
        (size,) = struct.unpack_from("<I", head, 0)
        return Frame(4, total, size)
    if fmt == "gzip":
        return _gzip_frame(bytes(head[: min(len(head), total)]), total)
    raise ValueError(f"frame_of(): no nvCOMP framing for format {fmt!r}")


def zstd_content_size(head: Any) -> int | None:
    """The decoded size a zstd frame's header declares (RFC 8878, 3.1.1.1), or ``None``: not a zstd frame, or
    no size declared. ``head``: the frame's first bytes (at least 18 hold any header).

    Examples:
        >>> zstd_content_size(bytes.fromhex("28b52ffd2000"))  # single segment, one size byte
        0
        >>> zstd_content_size(b"not zstd") is None
        True
    """
    h = bytes(head[:18])
    if len(h) < 5 or h[:4] != b"\x28\xb5\x2f\xfd":
        return None
    fcs_flag, single, did_flag = h[4] >> 6, (h[4] >> 5) & 1, h[4] & 3
    pos = 5 + (1 - single) + (0, 1, 2, 4)[did_flag]  # window descriptor, dictionary id
    n = (single, 2, 4, 8)[fcs_flag]
    if not n or len(h) < pos + n:
        return None
    size = int.from_bytes(h[pos : pos + n], "little")
    return size + 256 if n == 2 else size


def _gzip_frame(h: bytes, total: int) -> Frame:
    """The raw deflate stream of a gzip member: after its header (``h``: the header bytes), before
    its 8-byte trailer."""
    if len(h) < 10 or h[0] != 0x1F or h[1] != 0x8B or h[2] != 8:
        raise ValueError("frame_of(): not a gzip member (bad magic or method)")
    flg = h[3]
    pos = 10
    if flg & _GZ_FEXTRA:
        if len(h) < pos + 2:
            raise ValueError("frame_of(): gzip FEXTRA header truncated")
        (xlen,) = struct.unpack_from("<H", h, pos)
        pos += 2 + xlen
    for flag in (_GZ_FNAME, _GZ_FCOMMENT):
        if flg & flag:
            end = h.find(b"\x00", pos)
            if end < 0:
                raise ValueError("frame_of(): gzip name/comment not terminated in the header bytes given")
            pos = end + 1
    if flg & _GZ_FHCRC:
        pos += 2
    if total < pos + 8:
        raise ValueError(f"frame_of(): gzip member of {total} bytes too short")
    # ISIZE: size mod 2**32; the caller checks it against the expected chunk size.
    return Frame(pos, total - 8, -1)


def gzip_isize(tail: Any) -> int:
    """The uncompressed size (mod 2**32) from a gzip member's last 4 bytes."""
    return int(struct.unpack_from("<I", bytes(tail[-4:]), 0)[0])


# -- batched GPU calls ------------------------------------------------------------------------------

_tls = threading.local()
_ALIGN = 16  # input alignment given to nvCOMP (its strictest format asks for 4 or 8)
#: Where the decoded outputs of one batch start (:func:`~gdsstore.engine.landing.slot_layout`'s alignment):
#: on 256 bytes, as ``cudaMalloc`` gives, so every format's output alignment holds.
OUT_ALIGN = 256


#: Largest chunk nvCOMP compresses as one RAW stream (its zstd/LZ4 batched limit); larger: CPU.
MAX_ENCODE_CHUNK = 16 << 20


def forget_codecs() -> None:
    """Drop this thread's cached codecs, and with them the scratch memory nvCOMP keeps in each."""
    _tls.codecs = {}


def _codec(fmt: str, chunk: int | None = None) -> Any:
    # nvCOMP Codec objects are thread-local by contract (mutable scratch state). Encoders are keyed
    # by chunk size: a RAW stream must be one compressed chunk, or numcodecs would see several frames.
    codecs: dict[tuple[str, int | None], Any] | None = getattr(_tls, "codecs", None)
    if codecs is None:
        codecs = _tls.codecs = {}
    c = codecs.get((fmt, chunk))
    if c is None:
        nv = nvcomp_or_none()
        assert nv is not None
        kw: dict[str, Any] = {"algorithm": _ALGORITHM[fmt], "bitstream_kind": nv.BitstreamKind.RAW}
        if chunk is not None:
            kw["uncomp_chunk_size"] = chunk
        c = codecs[(fmt, chunk)] = nv.Codec(**kw)
    return c


def encode_chunk_size(sizes: list[int]) -> int | None:
    """The nvCOMP chunk size that keeps each input one RAW stream; ``None`` when one is too large."""
    most = max(sizes, default=1)
    if most > MAX_ENCODE_CHUNK:
        return None
    return max(1 << 16, 1 << (max(most, 1) - 1).bit_length())


def _as_batch(nv: Any, arrays: list[Any]) -> Any:
    return nv.as_arrays(arrays)


def decode_batch(fmt: str, srcs: list[Any], sizes: list[int]) -> list[Any]:
    """Decode device byte arrays (cupy ``uint8``) of one format on the GPU, in one nvCOMP call.

    Args:
        fmt: ``"zstd"``, ``"gzip"`` (raw deflate payloads) or ``"lz4"`` (raw blocks).
        srcs: the compressed payloads (already stripped of numcodecs framing).
        sizes: the expected decoded size of each (``-1``: unknown, take what nvCOMP reports).

    Returns:
        cupy ``uint8`` arrays (owned copies), one per source.

    Raises:
        ValueError: a payload decoded to a size other than the expected one.
    """
    cp = cuda.cupy_or_none()
    nv = nvcomp_or_none()
    assert cp is not None and nv is not None
    if not srcs:
        return []
    codec = _codec(fmt)
    # nvCOMP wants aligned inputs (Deflate: 4 bytes); gzip/lz4 framing shifts payloads off alignment.
    srcs = [s.reshape(-1) if int(s.data.ptr) % _ALIGN == 0 else s.reshape(-1).copy() for s in srcs]
    decoded = codec.decode(_as_batch(nv, srcs), data_type="|u1")
    out = [cp.array(cp.asarray(decoded[i]), dtype=cp.uint8).reshape(-1) for i in range(len(srcs))]
    for i, (o, want) in enumerate(zip(out, sizes)):
        if want >= 0 and o.size != want:
            raise ValueError(
                f"nvcomp.decode_batch(): {fmt} chunk {i} decoded to {o.size} bytes, expected {want}"
            )
    return out


def decode_batch_into(
    fmt: str,
    src: Any,
    src_offsets: list[int],
    src_sizes: list[int],
    out: Any,
    out_offsets: list[int],
    out_sizes: list[int],
    exact_scratch: bool = False,
) -> None:
    """Decode payloads carved from one device buffer into slots of another, in one nvCOMP call (the
    arguments are the fields of :class:`gdsstore.gpu.nvcomp_capi.DecodeTable`; ``exact_scratch``: the
    scratch the frames need, whatever the call's size, :func:`gdsstore.gpu.nvcomp_capi.wants_exact_scratch`).

    Misaligned payloads (gzip/lz4 framing shifts them by a few bytes) are first packed into an
    aligned buffer when nvCOMP refuses them.

    Raises:
        ValueError: the offset and size lists differ in length, or a payload decoded to a size other than
            its slot's.
    """
    table = nvcomp_capi.DecodeTable(
        src, list(src_offsets), list(src_sizes), out, list(out_offsets), list(out_sizes)
    )
    nv = nvcomp_or_none()
    assert cuda.cupy_or_none() is not None and nv is not None
    if not table.src_offsets:
        return
    capi = nvcomp_capi.library() is not None
    in_align, out_align, _ = nvcomp_capi.alignments(fmt) if capi else (_ALIGN, 1, 1)
    # the Python API (misaligned outputs) asks for _ALIGN
    table = _aligned_sources(table, max(in_align, _ALIGN))
    out_base = int(out.data.ptr)
    if capi and not any((out_base + b) % out_align for b in table.out_offsets):
        # The C API: the GIL released while the GPU decodes, scratch from CuPy's allocator.
        try:
            got = nvcomp_capi.decode_into(fmt, table, exact_scratch).tolist()
        except nvcomp_capi.CapiError as exc:
            raise ValueError(f"nvcomp.decode_batch_into(): {exc}") from exc
    else:
        outs = nv.as_arrays(out, table.out_offsets, table.out_sizes)
        srcs = nv.as_arrays(table.src, table.src_offsets, table.src_sizes)
        got = list(_codec(fmt).decode(srcs, out=outs).buffer_sizes)
    for i, (g, want) in enumerate(zip(got, table.out_sizes)):
        if int(g) != want:
            raise ValueError(
                f"nvcomp.decode_batch_into(): {fmt} chunk {i} decoded to {g} bytes, expected {want}"
            )


def _aligned_sources(table: nvcomp_capi.DecodeTable, align: int) -> nvcomp_capi.DecodeTable:
    """``table`` itself when every payload starts ``align``-aligned, else its payloads packed into aligned
    slots of a new buffer with one gather kernel (nvCOMP refuses unaligned inputs, Deflate: 4 bytes)."""
    base = int(table.src.data.ptr)
    if not any((base + a) % align for a in table.src_offsets):
        return table
    from gdsstore.gpu.kernels import scatter_blocks

    cp = cuda.cupy_or_none()
    slots, total = slot_layout(table.src_sizes)
    packed_offsets = slots.tolist()
    packed = cp.empty(max(total, 1), dtype=cp.uint8)
    p0 = int(packed.data.ptr)
    spans = zip(table.src_offsets, packed_offsets, table.src_sizes)
    scatter_blocks([(base + a, p0 + b, (n,), (1,), (1,)) for a, b, n in spans], 1, b"\0")
    cp.cuda.get_current_stream().synchronize()
    return replace(table, src=packed, src_offsets=packed_offsets)


def encode_batch(fmt: str, srcs: list[Any]) -> list[Any]:
    """Encode device byte arrays on the GPU (``zstd`` frames or raw ``lz4`` blocks), one nvCOMP call."""
    cp = cuda.cupy_or_none()
    nv = nvcomp_or_none()
    assert cp is not None and nv is not None
    if not srcs:
        return []
    chunk = encode_chunk_size([int(x.size) for x in srcs])
    if chunk is None:
        raise ValueError(f"nvcomp.encode_batch(): a chunk is larger than {MAX_ENCODE_CHUNK} bytes")
    codec = _codec(fmt, chunk)
    encoded = codec.encode(_as_batch(nv, [s.reshape(-1) for s in srcs]))
    return [cp.array(cp.asarray(encoded[i]), dtype=cp.uint8).reshape(-1) for i in range(len(srcs))]
