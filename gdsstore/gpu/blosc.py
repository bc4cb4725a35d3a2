"""blosc1 frames decoded in batches: parsed on the host, streams decoded by nvCOMP, shuffles undone on the GPU.

A blosc1 frame (c-blosc 1.x: what numcodecs' ``Blosc`` and zarr's ``blosc`` codec write) is a 16-byte
header (format version 2, the compressor's format version 1, flags, typesize, nbytes, blocksize,
cbytes), then either the raw bytes (a *memcpyed* frame) or one int32 start offset per block and the
blocks. A block is one stream, or ``typesize`` streams (one per byte plane) when it is *split*; a
stream is its int32 compressed size and its bytes, stored raw when that size equals its raw size.
Once its streams are decompressed, a block is byte-unshuffled (a transpose of its planes) or
bit-unshuffled, as the flags say.

Three parts, as in :mod:`gdsstore.archives.codecs`:

- parsing (:func:`read_headers`, :func:`plan_streams`): numpy, vectorised over frames and blocks, every
  length checked, so that a corrupt or truncated frame raises :class:`~gdsstore.errors.ChunkDecodeError`
  naming the chunk, never decodes to wrong bytes;
- the batch (:func:`decode_frames`): the same code on numpy and CuPy buffers. On the GPU every
  compressed stream of every frame of a window is decoded by one nvCOMP call per compressor, stored
  streams and memcpyed frames are copied by one kernel, and the unshuffles are array operations; on
  numpy (tested on any machine) the host decoders take the streams;
- zarr's ``blosc`` codec on device buffers (:class:`gdsstore.gpu.codecs.BloscCodec`) and the pipeline's
  windows (:mod:`gdsstore.gpu.decode`) call the batch.

Compressors: ``lz4`` and ``lz4hc`` (one block format) and ``zstd`` decode with nvCOMP. Frames
compressed with ``blosclz`` or ``snappy`` (no nvCOMP decoder) and ``zlib`` (its adler32 trailers are
checked by the CPU decoder only) decode on the CPU with numcodecs; the trace says why.

Examples:
    >>> import numpy as np
    >>> from numcodecs import Blosc
    >>> raw = np.arange(1000, dtype="<u4")
    >>> frame = np.frombuffer(Blosc(cname="lz4", shuffle=Blosc.SHUFFLE).encode(raw), np.uint8)
    >>> h = read_headers(frame[None, :16], np.array([frame.size]), np.array([raw.nbytes]))
    >>> COMPRESSORS[int(h.codes[0])], int(h.typesize[0]), bool(h.shuffle[0])
    ('lz4', 4, True)
    >>> out = decode_frames(frame, np.array([0]), np.array([frame.size]), np.array([raw.nbytes]))
    >>> bool((out.item(0).view("<u4") == raw).all())
    True
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from gdsstore.engine.landing import Landed, slot_layout
from gdsstore.errors import ChunkDecodeError
from gdsstore.gpu.nvcomp import OUT_ALIGN

__all__ = [
    "COMPRESSORS",
    "GPU_COMPRESSORS",
    "HEADER_BYTES",
    "Headers",
    "Streams",
    "bitunshuffle_rows",
    "decode_frames",
    "find_corrupt",
    "plan_streams",
    "read_headers",
    "unshuffle_rows",
]

HEADER_BYTES = 16
_VERSION = 2  # blosc1's format version: c-blosc 1.x reads no other
_SHUFFLE, _MEMCPYED, _BITSHUFFLE, _FUTURE, _NOSPLIT = 0x1, 0x2, 0x4, 0x8, 0x10
_MAX_SPLITS, _MIN_BUFFERSIZE = 16, 128  # c-blosc's split rule (blosc.c: MAX_SPLITS, MIN_BUFFERSIZE)
_MAX_BLOCKSIZE = (2**31 - 1 - 255 * 4) // 3  # BLOSC_MAX_BLOCKSIZE
#: Compressor names by the code in a frame's flags (its top 3 bits); lz4hc writes lz4 blocks.
COMPRESSORS = ("blosclz", "lz4", "snappy", "zlib", "zstd")
#: Compressors whose streams nvCOMP decodes, and the :mod:`gdsstore.gpu.nvcomp` format of each.
GPU_COMPRESSORS = {"lz4": "lz4", "zstd": "zstd"}
_CPU_WHY = {
    "blosclz": "blosc frames compressed with blosclz: no nvCOMP decoder",
    "snappy": "blosc frames compressed with snappy: no nvCOMP decoder",
    "zlib": "blosc frames compressed with zlib decode on the CPU (their adler32 is checked there)",
}
_ALIGN = 16  # nvCOMP's strictest output alignment; stream outputs off it decode into a scratch first


def _where_default(i: int) -> str:
    return f"blosc chunk {i}"


# -- parsing ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Headers:
    """The header fields of ``n`` frames (``int64`` arrays, ``flags`` as read)."""

    flags: np.ndarray
    typesize: np.ndarray
    nbytes: np.ndarray
    blocksize: np.ndarray
    cbytes: np.ndarray

    @property
    def codes(self) -> np.ndarray:
        """Each frame's compressor code (an index of :data:`COMPRESSORS`)."""
        codes: np.ndarray = self.flags >> 5
        return codes

    @property
    def memcpyed(self) -> np.ndarray:
        return np.asarray((self.flags & _MEMCPYED) != 0)

    @property
    def shuffle(self) -> np.ndarray:
        """Byte shuffle in force (c-blosc ignores the flag for a typesize of 1)."""
        return np.asarray(((self.flags & _SHUFFLE) != 0) & (self.typesize > 1) & ~self.memcpyed)

    @property
    def bitshuffle(self) -> np.ndarray:
        """Bit shuffle in force (byte shuffle wins where both flags are set)."""
        return np.asarray(((self.flags & _BITSHUFFLE) != 0) & ~self.shuffle & ~self.memcpyed)


def _le_i32(rows: np.ndarray) -> np.ndarray:
    """Little-endian int32 of each row of an ``(n, 4)`` ``uint8`` array, as ``int64``."""
    return np.ascontiguousarray(rows).view("<i4").reshape(-1).astype(np.int64)


def _gather(host: np.ndarray, starts: np.ndarray, n: int) -> np.ndarray:
    """``n`` bytes at each start of ``host`` as the rows of an ``(len(starts), n)`` array."""
    return host[np.asarray(starts, dtype=np.int64)[:, None] + np.arange(n, dtype=np.int64)]


def _first_bad(bad: np.ndarray, where: Callable[[int], str], what: Callable[[int], str]) -> None:
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ChunkDecodeError(f"{where(i)}: {what(i)}")


def read_headers(
    heads: np.ndarray, lengths: np.ndarray, nbytes: np.ndarray | None = None,
    where: Callable[[int], str] = _where_default,
) -> Headers:
    """Parse and check the headers of many frames at once (c-blosc's checks before it decodes).

    Args:
        heads: ``(n, 16)`` ``uint8``: each frame's first 16 bytes (rows of shorter frames are ignored).
        lengths: each stored frame's size in bytes.
        nbytes: the size each frame must decode to (a zarr chunk's raw bytes); ``None``: any.
        where: frame number -> what to call it in an error (the chunk).

    Raises:
        ChunkDecodeError: naming the first frame that is truncated, of another format version, with
            flags from the future, impossible sizes, or of another decoded size than ``nbytes``.
    """
    lengths = np.asarray(lengths, dtype=np.int64)
    _first_bad(lengths < HEADER_BYTES, where, lambda i: f"blosc frame of {lengths[i]} bytes is truncated (header: 16)")
    heads = np.asarray(heads, dtype=np.uint8).reshape(-1, HEADER_BYTES)
    sizes = _le_i32(heads[:, 4:16].reshape(-1, 4)).reshape(-1, 3)
    h = Headers(heads[:, 2].astype(np.int64), heads[:, 3].astype(np.int64), sizes[:, 0], sizes[:, 1], sizes[:, 2])
    version, versionlz = heads[:, 0].astype(np.int64), heads[:, 1].astype(np.int64)
    empty = h.nbytes == 0  # c-blosc returns an empty buffer before any other check
    _first_bad(~empty & (version != _VERSION), where, lambda i: f"blosc format version {version[i]} (blosc1 reads {_VERSION})")
    _first_bad(~empty & ((h.flags & _FUTURE) != 0), where, lambda i: f"blosc flags {h.flags[i]:#04x} from a later format")
    if nbytes is not None:
        want = np.asarray(nbytes, dtype=np.int64)
        _first_bad(h.nbytes != want, where, lambda i: f"blosc frame decodes to {h.nbytes[i]} bytes, expected {want[i]}")
    _first_bad(h.nbytes < 0, where, lambda i: f"blosc frame of negative size {h.nbytes[i]}")
    _first_bad(
        ~empty & ((h.blocksize <= 0) | (h.blocksize > h.nbytes) | (h.blocksize > _MAX_BLOCKSIZE) | (h.typesize < 1)),
        where, lambda i: f"blosc block size {h.blocksize[i]} or typesize {h.typesize[i]} impossible for {h.nbytes[i]} bytes",
    )
    _first_bad(
        (h.cbytes < HEADER_BYTES) | (h.cbytes > lengths), where,
        lambda i: f"blosc frame says {h.cbytes[i]} bytes but {lengths[i]} are stored (truncated or corrupt)",
    )
    mem = ~empty & h.memcpyed
    _first_bad(mem & (h.cbytes != h.nbytes + HEADER_BYTES), where,
               lambda i: f"memcpyed blosc frame of {h.cbytes[i]} bytes for {h.nbytes[i]} raw bytes")
    packed = ~empty & ~mem
    _first_bad(packed & (versionlz != 1), where, lambda i: f"blosc compressor format version {versionlz[i]} (1 expected)")
    _first_bad(packed & (h.codes >= len(COMPRESSORS)), where, lambda i: f"unknown blosc compressor code {h.codes[i]}")
    nblocks = -(-h.nbytes // np.maximum(h.blocksize, 1))
    _first_bad(packed & (nblocks > (h.cbytes - HEADER_BYTES) // 4), where,
               lambda i: f"blosc frame of {h.cbytes[i]} bytes cannot hold its {nblocks[i]} block offsets")
    return h


@dataclass(frozen=True)
class Streams:
    """Every stream of a batch of frames: frame ``frame[k]``'s stream is ``csize[k]`` bytes at
    ``src[k]`` of the source buffer, decoding to ``size[k]`` bytes at ``dst[k]`` of the frame's
    (still shuffled) raw bytes; ``csize == size`` is a stored stream (and a memcpyed frame is one)."""

    frame: np.ndarray
    src: np.ndarray
    csize: np.ndarray
    dst: np.ndarray
    size: np.ndarray

    @property
    def stored(self) -> np.ndarray:
        return np.asarray(self.csize == self.size)


def _blocks(h: Headers, frames: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The blocks of packed ``frames``: ``(frame, index in its frame, size)``."""
    nblocks = -(-h.nbytes[frames] // h.blocksize[frames])
    frame = np.repeat(frames, nblocks)
    first = np.cumsum(nblocks) - nblocks
    b = np.arange(int(nblocks.sum()), dtype=np.int64) - np.repeat(first, nblocks)
    bsize = np.minimum(h.blocksize[frame], h.nbytes[frame] - b * h.blocksize[frame])
    return frame, b, bsize


def _check_streams(f: np.ndarray, p: np.ndarray, end: np.ndarray, cs: np.ndarray, where: Callable[[int], str]) -> None:
    """Each stream's size prefix at ``p`` and its ``cs`` bytes after it inside its frame's ``end`` bytes."""
    bad = (p < HEADER_BYTES) | (p > end - 4) | (cs < 0) | (cs > end - p - 4)
    if bad.any():
        k = int(np.flatnonzero(bad)[0])
        what = "offset" if p[k] < HEADER_BYTES or p[k] > end[k] - 4 else f"of {cs[k]} bytes"
        raise ChunkDecodeError(f"{where(int(f[k]))}: blosc stream {what} at {p[k]} overruns the frame's {end[k]} bytes")


def plan_streams(
    host: np.ndarray, offsets: np.ndarray, h: Headers, where: Callable[[int], str] = _where_default
) -> Streams:
    """Locate every stream of the frames at ``offsets`` of ``host`` (headers ``h``), checking each
    block offset and stream size against the frame's ``cbytes``: one vectorised pass per split.

    Raises:
        ChunkDecodeError: naming the first frame whose offsets or sizes point outside it.
    """
    offsets = np.asarray(offsets, dtype=np.int64)
    live = np.flatnonzero(h.nbytes > 0)
    mem = live[h.memcpyed[live]]
    packed = live[~h.memcpyed[live]]
    frame, b, bsize = _blocks(h, packed)
    cb = h.cbytes[frame]
    start = _le_i32(_gather(host, offsets[frame] + HEADER_BYTES + 4 * b, 4)) if frame.size else b
    ts = h.typesize[frame]
    split = ((h.flags[frame] & _NOSPLIT) == 0) & (ts <= _MAX_SPLITS) & (bsize // ts >= _MIN_BUFFERSIZE)
    split &= bsize == h.blocksize[frame]  # a leftover block is never split
    nsplits = np.where(split, ts, 1)
    neblock = bsize // nsplits
    base = b * h.blocksize[frame]
    parts: list[tuple[np.ndarray, ...]] = [
        (mem, offsets[mem] + HEADER_BYTES, h.nbytes[mem], np.zeros(mem.size, np.int64), h.nbytes[mem])
    ]
    pos = start
    for j in range(int(nsplits.max(initial=0))):
        act = np.flatnonzero(nsplits > j)
        f, p, end = frame[act], pos[act], cb[act]
        _check_streams(f, p, end, np.zeros_like(p), where)
        cs = _le_i32(_gather(host, offsets[f] + p, 4))
        _check_streams(f, p, end, cs, where)
        parts.append((f, offsets[f] + p + 4, cs, base[act] + j * neblock[act], neblock[act]))
        pos = pos.copy()
        pos[act] = p + 4 + cs
    f_, s_, c_, d_, z_ = (np.concatenate(x).astype(np.int64) for x in zip(*parts))
    return Streams(f_, s_, c_, d_, z_)


# -- unshuffles (numpy or CuPy: the same array operations) ------------------------------------------


def _xp(a: Any) -> Any:
    if isinstance(a, np.ndarray):
        return np
    import cupy

    return cupy


def _planes(a: Any, rows: int, cols: int) -> Any:
    """A view of ``a[..., :rows * cols]`` (last axis contiguous) as ``(..., rows, cols)``."""
    xp = _xp(a)
    s = a.strides[-1]
    return xp.lib.stride_tricks.as_strided(a, (*a.shape[:-1], rows, cols), (*a.strides[:-1], cols * s, s))


def unshuffle_rows(rows: Any, typesize: int, out: Any = None) -> Any:
    """c-blosc's byte unshuffle of each block along the last axis of a ``uint8`` array (numpy or
    CuPy, views welcome): its first ``size // typesize * typesize`` bytes are ``typesize`` planes,
    transposed; the rest stay as they are. Written into ``out`` (same shape) when given.

    Examples:
        >>> import numpy as np
        >>> unshuffle_rows(np.array([[0, 1, 2, 10, 11, 12, 99]], np.uint8), 2).tolist()
        [[0, 10, 1, 11, 2, 12, 99]]
    """
    xp = _xp(rows)
    out = xp.empty(rows.shape, dtype=xp.uint8) if out is None else out
    size = int(rows.shape[-1])
    q = size // typesize
    # one strided copy: plane j of the block is byte j of every element
    _planes(out, q, typesize)[...] = _planes(rows, typesize, q).swapaxes(-1, -2)
    out[..., q * typesize :] = rows[..., q * typesize :]
    return out


def bitunshuffle_rows(rows: Any, typesize: int, out: Any = None) -> Any:
    """c-blosc's bit unshuffle of each block along the last axis of a ``uint8`` array (numpy or CuPy).

    A block of ``n`` elements (``n`` a multiple of 8; else c-blosc leaves the block as it is) holds,
    for byte ``j`` of the elements and bit ``k``, the bits of all elements packed least significant
    first: bit ``i % 8`` of byte ``((j * 8 + k) * n + i) // 8`` is bit ``k`` of byte ``j`` of element ``i``.
    """
    xp = _xp(rows)
    out = xp.empty(rows.shape, dtype=xp.uint8) if out is None else out
    size = int(rows.shape[-1])
    n = size // typesize
    if size < typesize or n % 8:
        out[...] = rows
        return out
    lead = tuple(int(d) for d in rows.shape[:-1])
    planes = _planes(rows, typesize * 8, n // 8).reshape((*lead, typesize, 8, n // 8))
    shifts = xp.arange(8, dtype=xp.uint8)
    acc = xp.zeros((*lead, typesize, n // 8, 8), dtype=xp.uint8)
    for k in range(8):  # bit k of every byte of every element: one pass
        acc |= ((planes[..., k, :, None] >> shifts) & 1) << k
    nd = len(lead)
    order = (*range(nd), nd + 1, nd + 2, nd)  # (..., octet, element in octet, byte j)
    _planes(out, n, typesize)[...] = acc.transpose(order).reshape((*lead, n, typesize))
    out[..., n * typesize :] = rows[..., n * typesize :]
    return out


_UINT = {2: np.uint16, 4: np.uint32, 8: np.uint64}


def _unshuffle_words(planes: Any, words: Any) -> None:
    """Byte unshuffle of whole elements into ``words`` (``(..., q)`` unsigned integers of ``ts`` bytes)
    from ``planes`` (``(..., ts, q)`` bytes): Horner over the planes, most significant byte first
    (little-endian: byte ``j`` of an element is plane ``j``)."""
    xp = _xp(words)
    ts = int(planes.shape[-2])
    words[...] = planes[..., ts - 1, :]
    for k in range(ts - 2, -1, -1):
        xp.left_shift(words, 8, out=words)
        xp.bitwise_or(words, planes[..., k, :], out=words)


def _unshuffle_group(tmp: Any, h: Headers, frames: np.ndarray, bases: np.ndarray) -> Any:
    """The raw bytes of ``frames`` (one row each), all of one ``(nbytes, blocksize, typesize,
    shuffle)``, from their decoded streams at ``bases`` of ``tmp`` (at equal strides: one view)."""
    xp = _xp(tmp)
    f0 = int(frames[0])
    n, bs, ts = int(h.nbytes[f0]), int(h.blocksize[f0]), int(h.typesize[f0])
    g = len(frames)
    stride = int(bases[1] - bases[0]) if g > 1 else n
    fn = unshuffle_rows if bool(h.shuffle[f0]) else bitunshuffle_rows
    out = xp.empty((g, n), dtype=xp.uint8)
    src = tmp[int(bases[0]) :]
    nb, full = n // bs, n // bs * bs
    strided = xp.lib.stride_tricks.as_strided
    if nb and fn is unshuffle_rows and ts in _UINT and not n % ts and not bs % ts and np.little_endian:
        # whole elements: built from their planes as integers (coalesced passes, not a byte transpose)
        words = out.view(_UINT[ts])
        q = bs // ts
        _unshuffle_words(strided(src, (g, nb, ts, q), (stride, bs, q, 1)), strided(words, (g, nb, q), (n, bs, ts)))
    elif nb:
        fn(strided(src, (g, nb, bs), (stride, bs, 1)), ts, strided(out, (g, nb, bs), (n, bs, 1)))
    if full < n:
        fn(strided(src[full:], (g, n - full), (stride, 1)), ts, out[:, full:])
    return out


# -- the batch --------------------------------------------------------------------------------------


def _copy_segments(src: Any, s_off: np.ndarray, dst: Any, d_off: np.ndarray, n: np.ndarray) -> None:
    """``dst[d_off[k]:][:n[k]] = src[s_off[k]:][:n[k]]`` for every ``k``: one kernel on the GPU."""
    if not len(n):
        return
    if isinstance(src, np.ndarray):
        for a, b, k in zip(s_off.tolist(), d_off.tolist(), n.tolist()):
            dst[b : b + k] = src[a : a + k]
        return
    from gdsstore.gpu.kernels import scatter_arrays

    ones = np.ones((len(n), 1), dtype=np.int64)
    scatter_arrays(
        int(src.data.ptr) + s_off, int(dst.data.ptr) + d_off, n.reshape(-1, 1).astype(np.int64), ones, ones,
        itemsize=1, fill=b"\0",
    )


def _host_decode(cname: str, data: bytes, size: int) -> bytes:
    """One stream decoded on the host (the numpy batch, and the check of a failed nvCOMP batch)."""
    if cname == "lz4":
        from numcodecs.lz4 import LZ4

        # numcodecs' LZ4 frames a raw block behind its decoded size (little-endian uint32)
        return bytes(LZ4().decode(size.to_bytes(4, "little") + data))
    if cname == "zstd":
        from numcodecs.zstd import Zstd

        return bytes(Zstd().decode(data))
    if cname == "zlib":
        return zlib.decompress(data, bufsize=max(size, 1))
    raise ValueError(f"no host decoder for blosc compressor {cname!r}")


def _decode_streams_host(
    cname: str, src: np.ndarray, st: Streams, sel: np.ndarray, tmp: np.ndarray, where: Callable[[int], str]
) -> None:
    for k in sel.tolist():
        a, c, d, n = int(st.src[k]), int(st.csize[k]), int(st.dst[k]), int(st.size[k])
        try:
            out = _host_decode(cname, src[a : a + c].tobytes(), n)
        except Exception as exc:  # each library raises its own
            raise ChunkDecodeError(f"{where(int(st.frame[k]))}: corrupt {cname} stream ({exc})") from exc
        if len(out) != n:
            raise ChunkDecodeError(f"{where(int(st.frame[k]))}: {cname} stream decoded to {len(out)} bytes, expected {n}")
        tmp[d : d + n] = np.frombuffer(out, np.uint8)


def _decode_streams_gpu(fmt: str, src: Any, st: Streams, sel: np.ndarray, tmp: Any) -> None:
    """The streams ``sel`` in one nvCOMP call, straight into ``tmp`` where their places are aligned,
    else into aligned slots of a scratch buffer copied into place by one kernel."""
    from gdsstore.gpu import nvcomp

    d_off, size = st.dst[sel], st.size[sel]
    if not (d_off % _ALIGN).any():
        nvcomp.decode_batch_into(fmt, src, st.src[sel].tolist(), st.csize[sel].tolist(), tmp, d_off.tolist(), size.tolist())
        return
    xp = _xp(tmp)
    slots, total = slot_layout(size, OUT_ALIGN)
    scratch = xp.empty(max(total, 1), dtype=xp.uint8)
    nvcomp.decode_batch_into(fmt, src, st.src[sel].tolist(), st.csize[sel].tolist(), scratch, slots.tolist(), size.tolist())
    _copy_segments(scratch, slots, tmp, d_off, size)


def _layout(h: Headers, frames: np.ndarray) -> tuple[list[np.ndarray], np.ndarray, int]:
    """Frames grouped by what their unshuffle needs, and each frame's place in one buffer of decoded
    streams (groups 256-byte aligned, frames at a stride of their size rounded up to 16 bytes)."""
    mode = np.where(h.shuffle, 1, np.where(h.bitshuffle, 2, 0))
    keys = np.stack([h.nbytes, h.blocksize, h.typesize, mode], axis=1)[frames]
    _, inverse = np.unique(keys, axis=0, return_inverse=True)
    groups = [frames[inverse.reshape(-1) == g] for g in range(int(inverse.max(initial=-1)) + 1)]
    strides = [-(-int(h.nbytes[grp[0]]) // _ALIGN) * _ALIGN for grp in groups]
    starts, total = slot_layout([s * len(grp) for s, grp in zip(strides, groups)], OUT_ALIGN)
    bases = np.zeros(h.nbytes.size, dtype=np.int64)
    for grp, start, stride in zip(groups, starts.tolist(), strides):
        bases[grp] = start + stride * np.arange(len(grp), dtype=np.int64)
    return groups, bases, total


def decode_frames(
    src: Any,
    offsets: np.ndarray,
    lengths: np.ndarray,
    nbytes: np.ndarray,
    *,
    host: np.ndarray | None = None,
    where: Callable[[int], str] = _where_default,
    compressors: Iterable[str] = tuple(GPU_COMPRESSORS),
) -> Landed:
    """Decode many blosc frames of one ``uint8`` buffer (CuPy on the GPU, or numpy): frame ``i``'s raw bytes
    are item ``i`` of the ``Landed`` returned (in the buffers of ``Landed.empty``: blosc's groups).

    Args:
        src: the buffer holding the frames.
        offsets, lengths: each frame's place in ``src``.
        nbytes: the size each frame decodes to (a zarr chunk's raw bytes).
        host: ``src``'s bytes on the host, where the frames are parsed (``src`` itself when numpy).
        where: frame number -> the chunk's name, for errors.
        compressors: compressors decoded in the batch; frames of others are left for the CPU
            (absent items of the result, the reason in its ``absent_reason``).

    Raises:
        ChunkDecodeError: a truncated or corrupt frame, naming it.
    """
    offsets = np.asarray(offsets, dtype=np.int64)
    lengths = np.asarray(lengths, dtype=np.int64)
    hb = src if host is None else host
    n = len(offsets)
    heads = _gather(hb, np.where(lengths >= HEADER_BYTES, offsets, 0), HEADER_BYTES) if n else np.zeros((0, 16), np.uint8)
    h = read_headers(heads, lengths, nbytes, where)
    out = Landed.empty(n)
    names = np.array(COMPRESSORS, dtype=object)[np.minimum(h.codes, len(COMPRESSORS) - 1)]
    gpu = h.memcpyed | (h.nbytes == 0) | np.isin(names, list(compressors))
    frames = np.flatnonzero(gpu)
    if (~gpu).any():
        out.absent_reason = _CPU_WHY.get(str(names[~gpu][0]), "blosc compressor without an nvCOMP decoder")
    if not frames.size:
        return out
    sub = Headers(*(np.where(gpu, a, 0) for a in (h.flags, h.typesize, h.nbytes, h.blocksize, h.cbytes)))
    st = plan_streams(hb, offsets, sub, where)
    groups, bases, total = _layout(sub, frames)
    xp = _xp(src)
    tmp = xp.empty(max(total, 1), dtype=xp.uint8)
    dst = bases[st.frame] + st.dst
    stored = st.stored
    _copy_segments(src, st.src[stored], tmp, dst[stored], st.size[stored])
    placed = Streams(st.frame, st.src, st.csize, dst, st.size)
    for cname in sorted(set(names[frames].tolist())):
        sel = np.flatnonzero(~stored & (names[st.frame] == cname))
        if not sel.size:
            continue
        if xp is np:
            _decode_streams_host(cname, src, placed, sel, tmp, where)
            continue
        try:
            _decode_streams_gpu(GPU_COMPRESSORS[cname], src, placed, sel, tmp)
        except Exception as exc:  # nvCOMP names no chunk: numcodecs finds a corrupt one, else the CPU decodes
            find_corrupt(hb, offsets, lengths, np.unique(st.frame[sel]).tolist(), where)
            out.absent_reason = f"nvCOMP failed ({type(exc).__name__})"  # no message: one trace row per cause
            return out
    for grp in groups:
        g_frames = grp[sub.nbytes[grp] > 0]
        if not g_frames.size:
            out.add(tmp, grp, np.zeros(len(grp), np.int64), np.zeros(len(grp), np.int64))
        elif bool(sub.shuffle[grp[0]] | sub.bitshuffle[grp[0]]):
            out.add(_unshuffle_group(tmp, sub, grp, bases[grp]).reshape(-1), grp,
                    np.arange(len(grp), dtype=np.int64) * int(sub.nbytes[grp[0]]), sub.nbytes[grp])
        else:
            out.add(tmp, grp, bases[grp], sub.nbytes[grp])
    return out


def find_corrupt(host: np.ndarray, offsets: np.ndarray, lengths: np.ndarray, frames: Sequence[int],
                 where: Callable[[int], str] = _where_default) -> None:
    """After nvCOMP failed a batch (it names no chunk): decode ``frames`` with numcodecs on the host
    and raise for the first one that fails there.

    Raises:
        ChunkDecodeError: naming the first frame numcodecs cannot decode.
    """
    from numcodecs import blosc as _nc_blosc

    for i in frames:
        a, m = int(offsets[i]), int(lengths[i])
        try:
            _nc_blosc.decompress(host[a : a + m].tobytes())
        except Exception as exc:  # numcodecs raises RuntimeError (or ValueError) with c-blosc's code
            raise ChunkDecodeError(f"{where(int(i))}: corrupt blosc frame ({exc})") from exc
