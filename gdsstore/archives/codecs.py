"""The HDF5/netCDF4 filters of archive chunks: ``zlib``, ``shuffle`` and ``fletcher32``, in batches.

Each filter has three parts:

- the pure math on numpy (:func:`zlib_frame`, :func:`adler32_rows`, :func:`fletcher32`,
  :func:`unshuffle`), tested on the CPU against :mod:`zlib` and numcodecs, and reused by the GPU code;
- a host decoder giving numcodecs' bytes exactly (``zlib`` through zlib-ng's ``decompress`` where the
  ``zlib-ng`` package is installed, faster than :func:`zlib.decompress` (docs/performance.md), else the
  standard library's; both release the GIL, so a thread pool decodes chunks in parallel);
- a batch decoder over one buffer of many chunks, the same code on numpy and CuPy buffers
  (:func:`decode_zlib_batch`: on the GPU nvCOMP's raw Deflate on the stream behind each 2-byte zlib
  header, adler32 checked on the GPU; :func:`unshuffle_rows`: a transpose;
  :func:`check_fletcher32_batch`), so that all but the nvCOMP call is tested on any machine.

The zarr codec classes at the end (:class:`Zlib`, :class:`Shuffle`, :class:`Fletcher32`) are zarr's
``numcodecs.*`` classes of the same names, so array metadata round-trips; device buffers decode on the
GPU, host buffers through numcodecs. They are selectable by name like those of :mod:`gdsstore.gpu.codecs`
(the name holds a dot, so the ``codecs`` entry is set as a dict:
``zarr.config.set({"codecs": {**zarr.config.get("codecs"), "numcodecs.zlib": "gdsstore.archives.codecs.Zlib"}})``).

Examples:
    >>> import zlib, numpy as np
    >>> raw = np.arange(64, dtype="<u4").view(np.uint8)
    >>> stream = np.frombuffer(zlib.compress(shuffle(raw, 4).tobytes(), 1), np.uint8)
    >>> frame = zlib_frame(stream)
    >>> frame.start, frame.stop == stream.size - 4
    (2, True)
    >>> unshuffle(np.frombuffer(zlib.decompress(stream.tobytes()), np.uint8), 4).view("<u4")[:4].tolist()
    [0, 1, 2, 3]
"""

from __future__ import annotations

import functools
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from zarr.codecs.numcodecs import Fletcher32 as _ZarrFletcher32
from zarr.codecs.numcodecs import Shuffle as _ZarrShuffle
from zarr.codecs.numcodecs import Zlib as _ZarrZlib

from gdsstore.errors import ChunkDecodeError

if TYPE_CHECKING:
    from collections.abc import Iterable

    from zarr.core.array_spec import ArraySpec
    from zarr.core.buffer import Buffer

__all__ = [
    "ADLER_MOD",
    "Fletcher32",
    "Shuffle",
    "Zlib",
    "ZlibFrame",
    "adler32_rows",
    "check_fletcher32",
    "check_fletcher32_batch",
    "decode_zlib_batch",
    "fletcher32",
    "gather_rows",
    "inflater",
    "shuffle",
    "unshuffle",
    "unshuffle_into",
    "unshuffle_rows",
    "zlib_decode",
    "zlib_frame",
    "zlib_trailers",
]

#: adler32's modulus (RFC 1950).
ADLER_MOD = 65521
# Rows of at most this many bytes keep adler32's weighted sums inside int64 (n * n * 255 < 2**63).
_ADLER_BLOCK = 1 << 24
# Bytes of rows summed at once: their int64 temporaries take 8 bytes per byte (bounded GPU memory).
_GROUP_BYTES = 64 << 20


def _by_row_groups(fn: Callable[[Any], Any], rows: Any) -> Any:
    """``fn`` over groups of at most :data:`_GROUP_BYTES` of rows, results joined (one array per row)."""
    m, n = int(rows.shape[0]), int(rows.shape[1])
    step = max(1, _GROUP_BYTES // max(n, 1))
    if m <= step:
        return fn(rows)
    xp = _array_module(rows)
    return xp.concatenate([fn(rows[i : i + step]) for i in range(0, m, step)])


# -- zlib ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ZlibFrame:
    """The raw deflate stream of a zlib chunk, ``data[start:stop]``, and its adler32 trailer."""

    start: int
    stop: int
    adler32: int


def zlib_frame(head_and_tail: np.ndarray, where: str = "zlib chunk") -> ZlibFrame:
    """Parse a zlib stream's 2-byte header and 4-byte adler32 trailer (RFC 1950).

    Args:
        head_and_tail: the whole stream as ``uint8`` (only its first 2 and last 4 bytes are read).
        where: what the stream is, for the error (file and offset).

    Raises:
        ChunkDecodeError: not a zlib stream nvCOMP can take (too short, not deflate, a bad header
            check, or a preset dictionary).
    """
    n = int(head_and_tail.size)
    if n < 6:
        raise ChunkDecodeError(f"{where}: zlib stream of {n} bytes is truncated (at least 6 expected)")
    cmf, flg = int(head_and_tail[0]), int(head_and_tail[1])
    if cmf & 0x0F != 8 or cmf >> 4 > 7:
        raise ChunkDecodeError(f"{where}: not a zlib deflate stream (CMF byte 0x{cmf:02x})")
    if (cmf << 8 | flg) % 31:
        raise ChunkDecodeError(f"{where}: zlib header check failed (0x{cmf:02x}{flg:02x})")
    if flg & 0x20:
        raise ChunkDecodeError(f"{where}: zlib stream with a preset dictionary is not supported")
    adler = int.from_bytes(head_and_tail[n - 4 : n].tobytes(), "big")
    return ZlibFrame(2, n - 4, adler)


@functools.cache
def inflater() -> tuple[str, Callable[..., bytes], tuple[type[Exception], ...]]:
    """The host's zlib decompressor: ``(name, decompress, errors)``; zlib-ng's where it is installed
    (the same bytes: inflating is deterministic, and both check the adler32 trailer)."""
    try:
        from zlib_ng import zlib_ng
    except ImportError:
        return "zlib", zlib.decompress, (zlib.error,)
    ng_error: type[Exception] = getattr(zlib_ng, "error", zlib.error)  # its stub types it as an instance
    return "zlib-ng", zlib_ng.decompress, (ng_error, zlib.error)


def zlib_decode(data: Any, nbytes: int, where: str = "zlib chunk") -> bytes:
    """Inflate one zlib chunk on the host (numcodecs' ``Zlib.decode`` bytes; adler32 checked).

    Raises:
        ChunkDecodeError: corrupt or truncated, or not ``nbytes`` long once decoded (``-1``: any size).
    """
    _, decompress, errors = inflater()
    try:
        # Sized to the chunk: zlib's default 16 KiB output buffer would grow (and copy) 3 times.
        out = decompress(data, bufsize=nbytes if nbytes > 0 else zlib.DEF_BUF_SIZE)
    except errors as exc:
        raise ChunkDecodeError(f"{where}: corrupt ({exc})") from exc
    if nbytes >= 0 and len(out) != nbytes:
        raise ChunkDecodeError(f"{where}: zlib chunk decoded to {len(out)} bytes, expected {nbytes}")
    return out


def adler32_rows(rows: Any) -> Any:
    """adler32 of each row of a 2-D ``uint8`` array (numpy or CuPy: the math is the same), as uint32.

    Vectorised form of RFC 1950: ``a = 1 + sum(d)``, ``b = n + sum((n - i) * d[i])``, both mod 65521;
    rows longer than 16 MiB are summed in blocks so the weighted sum stays in int64.

    Examples:
        >>> import zlib
        >>> rows = np.frombuffer(b"hello world!", np.uint8).reshape(2, 6)
        >>> adler32_rows(rows).tolist() == [zlib.adler32(b"hello "), zlib.adler32(b"world!")]
        True
    """
    xp = _array_module(rows)
    if xp is not np and rows.ndim == 2 and rows.shape[1] and rows.strides[1] == 1:
        from gdsstore.gpu import kernels

        if rows.shape[1] <= kernels.ADLER_MAX_ROW:
            return kernels.adler32_device(rows)  # one pass, no int64 temporaries
    return _by_row_groups(_adler32, rows)


def _adler32(rows: Any) -> Any:
    xp = _array_module(rows)
    m, n = int(rows.shape[0]), int(rows.shape[1])
    a = xp.ones(m, dtype=xp.int64)
    b = xp.zeros(m, dtype=xp.int64)
    for lo in range(0, max(n, 1), _ADLER_BLOCK):
        block = rows[:, lo : lo + _ADLER_BLOCK].astype(xp.int64)
        k = int(block.shape[1])
        # Over a block of k bytes: b gains k * a_before + sum((k - i) * d[i]); a gains sum(d).
        weights = xp.arange(k, 0, -1, dtype=xp.int64)
        b = (b + k * a + block @ weights) % ADLER_MOD
        a = (a + block.sum(axis=1)) % ADLER_MOD
    return ((b << 16) | a).astype(xp.uint32)


def _array_module(a: Any) -> Any:
    if isinstance(a, np.ndarray):
        return np
    from gdsstore.engine import cuda

    cp = cuda.cupy_or_none()
    return cp if cp is not None else np


# -- fletcher32 (HDF5's, as numcodecs writes it) ---------------------------------------------------


def _fold(s: Any, xp: Any) -> Any:
    """HDF5's end-around-carry folds: ``0`` for ``0``, else the residue mod 65535 in ``[1, 65535]``."""
    return xp.where(s == 0, 0, (s - 1) % 65535 + 1)


def fletcher32(rows: Any) -> Any:
    """HDF5's Fletcher-32 of each row of a 2-D ``uint8`` array (numpy or CuPy), as uint32.

    HDF5 sums big-endian 16-bit words (an odd last byte is the high byte of a last word) with
    end-around carries: ``sum1 = fold(sum(w))``, ``sum2 = fold(sum((n - i) * w[i]))``.

    Examples:
        >>> import numcodecs
        >>> data = bytes(range(7))
        >>> stored = numcodecs.Fletcher32().encode(data)[-4:]
        >>> int(fletcher32(np.frombuffer(data, np.uint8)[None])[0]) == int.from_bytes(stored, "little")
        True
    """
    return _by_row_groups(_fletcher32, rows)


def _fletcher32(rows: Any) -> Any:
    xp = _array_module(rows)
    m, n = int(rows.shape[0]), int(rows.shape[1])
    if m == 0:
        return xp.zeros(0, dtype=xp.uint32)
    if n % 2:
        rows = xp.concatenate([rows, xp.zeros((m, 1), dtype=xp.uint8)], axis=1)
    words = rows.reshape(m, -1, 2).astype(xp.int64)
    w = (words[:, :, 0] << 8) | words[:, :, 1]
    k = int(w.shape[1])
    s1 = w.sum(axis=1)
    # Residues mod 65535 keep the weighted sum in int64 for any row length below 2**31 words.
    # sum2 is zero exactly when every word is (all weights are >= 1), so s1 says which rows fold to 0.
    s2 = (w % 65535) @ (xp.arange(k, 0, -1, dtype=xp.int64) % 65535) if k else xp.zeros(m, dtype=xp.int64)
    sum2 = xp.where(s1 == 0, 0, (s2 - 1) % 65535 + 1)
    return ((sum2 << 16) | _fold(s1, xp)).astype(xp.uint32)


def check_fletcher32(chunk: np.ndarray, where: str = "fletcher32 chunk") -> np.ndarray:
    """Check one chunk's trailing Fletcher-32 (numcodecs layout: 4 bytes, little-endian) and return
    the payload before it (a view).

    Raises:
        ChunkDecodeError: too short, or the checksum does not match.
    """
    n = int(chunk.size)
    if n < 4:
        raise ChunkDecodeError(f"{where}: fletcher32 chunk of {n} bytes is truncated")
    payload = chunk[: n - 4]
    want = int.from_bytes(chunk[n - 4 :].tobytes(), "little")
    got = int(fletcher32(payload[None])[0])
    if got != want:
        raise ChunkDecodeError(f"{where}: fletcher32 checksum mismatch (stored {want:#010x}, computed {got:#010x})")
    return payload


# -- shuffle ---------------------------------------------------------------------------------------


def shuffle(raw: Any, elementsize: int) -> Any:
    """HDF5/numcodecs byte shuffle of a 1-D ``uint8`` array (numpy or CuPy): byte ``j`` of every element
    first; trailing bytes that make no whole element stay at the end, as HDF5 leaves them."""
    xp = _array_module(raw)
    n = int(raw.size) // elementsize * elementsize
    if elementsize <= 1 or n == 0:
        return raw.copy()
    body = raw[:n].reshape(-1, elementsize).T.reshape(-1)
    return xp.concatenate([body, raw[n:]]) if n < raw.size else body


def unshuffle(data: Any, elementsize: int) -> Any:
    """Inverse of :func:`shuffle` (numcodecs' ``Shuffle.decode`` bytes), numpy or CuPy.

    Examples:
        >>> import numcodecs
        >>> raw = np.arange(24, dtype=np.uint8)
        >>> enc = np.frombuffer(numcodecs.Shuffle(elementsize=4).encode(raw), np.uint8)
        >>> bool((unshuffle(enc, 4) == raw).all())
        True
    """
    xp = _array_module(data)
    n = int(data.size) // elementsize * elementsize
    if elementsize <= 1 or n == 0:
        return data.copy()
    body = xp.ascontiguousarray(data[:n].reshape(elementsize, -1).T).reshape(-1)
    return xp.concatenate([body, data[n:]]) if n < data.size else body


_UINT = {2: np.uint16, 4: np.uint32, 8: np.uint64}


def unshuffle_into(data: np.ndarray, target: np.ndarray) -> None:
    """Unshuffle ``data`` (one chunk's shuffled bytes, ``uint8``) straight into ``target``, an array
    (or a strided view) of the chunk's shape whose itemsize is the shuffle's element size.

    Rebuilds each element from its byte planes with shifts on whole planes (Horner: byte ``k`` of an
    element is plane ``k``), a few vectorised passes instead of a byte-strided transpose (several times
    faster, and faster than numcodecs: docs/performance.md).

    Examples:
        >>> import numcodecs
        >>> raw = np.arange(12, dtype="<f4").reshape(3, 4)
        >>> out = np.empty((3, 4), "<f4")
        >>> unshuffle_into(np.frombuffer(numcodecs.Shuffle(elementsize=4).encode(raw), np.uint8), out)
        >>> bool((out == raw).all())
        True
    """
    e = target.dtype.itemsize
    u = _UINT.get(e)
    if u is None or np.little_endian is False:
        target.view(np.uint8).reshape(-1)[...] = unshuffle(data, e)  # contiguous targets only
        return
    t = target.view(u)
    planes = data[: e * t.size].reshape(e, *t.shape)
    np.copyto(t, planes[e - 1], casting="unsafe")
    for k in range(e - 2, -1, -1):
        np.left_shift(t, 8, out=t)
        np.bitwise_or(t, planes[k], out=t, casting="unsafe")


def unshuffle_rows(rows: Any, elementsize: int) -> Any:
    """Unshuffle every row of a 2-D device (or host) ``uint8`` array of equal-length chunks at once:
    one transposed copy for the whole batch."""
    xp = _array_module(rows)
    m, n = int(rows.shape[0]), int(rows.shape[1])
    if elementsize <= 1 or n % elementsize:
        return xp.stack([unshuffle(r, elementsize) for r in rows]) if m else rows
    return xp.ascontiguousarray(rows.reshape(m, elementsize, n // elementsize).transpose(0, 2, 1)).reshape(m, n)


# -- batches of chunks in one buffer (numpy on the host, CuPy on the GPU: the same code) ------------


def _host(a: Any) -> np.ndarray:
    """A device array's values on the host (numpy arrays as they are)."""
    return a.get() if hasattr(a, "get") else np.asarray(a)


def gather_rows(src: Any, offsets: np.ndarray, n: int) -> Any:
    """``n`` bytes at each offset of a 1-D ``uint8`` buffer as the rows of one 2-D array: on the GPU
    one copy kernel (``gdsstore.gpu.kernels.scatter_arrays``), not one slice per chunk."""
    offsets = np.asarray(offsets, dtype=np.int64)
    m = len(offsets)
    if isinstance(src, np.ndarray):
        out = np.empty((m, n), dtype=np.uint8)
        step = max(1, _GROUP_BYTES // max(n, 1))  # the index array takes 8 bytes per byte
        for i in range(0, m, step):
            out[i : i + step] = src[offsets[i : i + step, None] + np.arange(n, dtype=np.int64)]
        return out
    import cupy as cp

    from gdsstore.gpu.kernels import scatter_arrays

    dev = cp.empty((m, n), dtype=cp.uint8)
    if m and n:
        ones = np.ones((m, 1), dtype=np.int64)
        scatter_arrays(
            int(src.data.ptr) + offsets, int(dev.data.ptr) + np.arange(m, dtype=np.int64) * n,
            np.full((m, 1), n, dtype=np.int64), ones, ones, itemsize=1, fill=b"\0",
        )
    return dev


def check_fletcher32_batch(src: Any, offsets: np.ndarray, lengths: np.ndarray, where: Callable[[int], str]) -> None:
    """Check the trailing Fletcher-32 of many chunks of one ``uint8`` buffer (numpy or CuPy): the
    chunks of each length are checked together, as the rows of one 2-D array.

    Raises:
        ChunkDecodeError: naming the first chunk whose checksum does not match (``where(i)``).
    """
    for n in np.unique(lengths).tolist():
        idx = np.flatnonzero(lengths == n)
        if n < 4:
            raise ChunkDecodeError(f"{where(int(idx[0]))}: fletcher32 chunk of {n} bytes is truncated")
        rows = gather_rows(src, offsets[idx], n)
        got = _host(fletcher32(rows[:, : n - 4]))
        want = _host(rows[:, n - 4 :]).astype(np.uint32) @ np.array([1, 1 << 8, 1 << 16, 1 << 24], np.uint32)
        bad = np.flatnonzero(got != want)
        if bad.size:
            i = int(idx[bad[0]])
            raise ChunkDecodeError(
                f"{where(i)}: fletcher32 checksum mismatch (stored {int(want[bad[0]]):#010x}, computed {int(got[bad[0]]):#010x})"
            )


def zlib_trailers(heads: np.ndarray, where: Callable[[int], str]) -> np.ndarray:
    """Check many zlib headers at once (:func:`zlib_frame`'s rules, vectorised) and return their
    adler32 trailers (``uint32``).

    Args:
        heads: ``(n, 6)`` ``uint8``: each stream's first 2 and last 4 bytes.

    Raises:
        ChunkDecodeError: naming the first stream whose header is not one nvCOMP can take.
    """
    cmf, flg = heads[:, 0].astype(np.int64), heads[:, 1].astype(np.int64)
    bad = (cmf & 0x0F != 8) | (cmf >> 4 > 7) | (((cmf << 8) | flg) % 31 != 0) | (flg & 0x20 != 0)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        zlib_frame(np.concatenate([heads[i], np.zeros(1, np.uint8)]), where(i))  # raises, saying why
    t = heads[:, 2:].astype(np.uint32)
    return (t[:, 0] << 24) | (t[:, 1] << 16) | (t[:, 2] << 8) | t[:, 3]


def _inflate_rows(
    src: Any, starts: np.ndarray, sizes: np.ndarray, out: Any, where: Callable[[int], str], host: np.ndarray | None
) -> None:
    """Raw deflate streams of ``src`` into the rows of ``out``: one nvCOMP call on the GPU; on the host
    (numpy buffers: the same batch code, tested on any machine) :func:`zlib.decompress` per stream.
    When nvCOMP fails a batch, the host copy (``host``) finds the chunk that fails."""
    n, raw = int(out.shape[0]), int(out.shape[1])
    if isinstance(src, np.ndarray):
        for i, (a, k) in enumerate(zip(starts.tolist(), sizes.tolist())):
            try:
                row = zlib.decompress(src[a : a + k], -15, raw)
            except zlib.error as exc:
                raise ChunkDecodeError(f"{where(i)}: corrupt ({exc})") from exc
            if len(row) != raw:
                raise ChunkDecodeError(f"{where(i)}: zlib chunk decoded to {len(row)} bytes, expected {raw}")
            out[i] = np.frombuffer(row, np.uint8)
        return
    import cupy as cp

    from gdsstore.gpu import nvcomp

    # nvCOMP's outputs start 256-byte aligned, as the GPU pipeline gives them: rows of another size
    # decode into padded rows first, then one copy packs them.
    stride = -(-raw // 256) * 256
    dst = out if stride == raw else cp.empty((n, stride), dtype=cp.uint8)
    try:
        nvcomp.decode_batch_into(
            "gzip", src, starts.tolist(), sizes.tolist(), dst.reshape(-1), [i * stride for i in range(n)], [raw] * n
        )
    except Exception as exc:  # nvCOMP names no chunk: the host copy finds it, else the batch is named
        if host is not None:
            _inflate_rows(host, starts, sizes, np.empty((n, raw), dtype=np.uint8), where, None)
        raise ChunkDecodeError(
            f"{where(0)} (or a later chunk of its batch): nvCOMP failed ({type(exc).__name__}: {exc})"
        ) from exc
    if dst is not out:
        out[...] = dst[:, :raw]


def decode_zlib_batch(
    src: Any,
    offsets: np.ndarray,
    lengths: np.ndarray,
    raw_nbytes: int,
    heads: np.ndarray,
    where: Callable[[int], str],
    host: np.ndarray | None = None,
) -> Any:
    """Inflate many zlib chunks of one buffer into the rows of one ``(n, raw_nbytes)`` array, then
    check every row's adler32 with :func:`adler32_rows`. On CuPy buffers, one nvCOMP Deflate call
    decodes the stream behind each 2-byte header, and the checksums are computed on the GPU.

    Args:
        src: ``uint8`` buffer holding the chunks (CuPy, or numpy).
        offsets, lengths: each chunk's place in ``src``.
        raw_nbytes: every chunk's decoded size (an archive's chunks all decode to the chunk's bytes).
        heads: ``(n, 6)`` host ``uint8``: each chunk's first 2 and last 4 bytes (read on the host,
            where the chunk landed first: no device round trip per chunk).
        where: chunk number -> its file and offset, for errors.
        host: the host copy of ``src``, where a chunk that fails nvCOMP's batch is found.

    Raises:
        ChunkDecodeError: a bad header, a size or an adler32 mismatch, naming the chunk.
    """
    xp = _array_module(src)
    if (lengths < 6).any():
        i = int(np.flatnonzero(lengths < 6)[0])
        raise ChunkDecodeError(f"{where(i)}: zlib stream of {int(lengths[i])} bytes is truncated")
    want = zlib_trailers(heads, where)
    n = len(offsets)
    out = xp.empty((n, raw_nbytes), dtype=xp.uint8)
    _inflate_rows(src, offsets + 2, lengths - 6, out, where, host)
    got = _host(adler32_rows(out))
    bad = np.flatnonzero(got != want)
    if bad.size:
        i = int(bad[0])
        raise ChunkDecodeError(f"{where(i)}: adler32 mismatch (stored {int(want[i]):#010x}, decoded {int(got[i]):#010x})")
    return out


# -- zarr codec classes (numcodecs names; device buffers decode on the GPU) ------------------------


def _device_bytes(buf: Buffer) -> Any | None:
    arr = buf.as_array_like()
    if not hasattr(arr, "__cuda_array_interface__"):
        return None
    import cupy as cp

    return cp.asarray(arr).view(cp.uint8).reshape(-1)


class _DeviceBytesCodec:
    """Decode device buffers with :meth:`_decode_device`; host buffers through zarr's numcodecs class."""

    def _decode_device(self, data: Any) -> Any:
        raise NotImplementedError

    def _decode_sync(self, chunk_bytes: Buffer, chunk_spec: ArraySpec) -> Buffer:
        dev = _device_bytes(chunk_bytes)
        if dev is None:
            out: Buffer = super()._decode_sync(chunk_bytes, chunk_spec)  # type: ignore[misc]
            return out
        return chunk_spec.prototype.buffer.from_array_like(self._decode_device(dev))

    async def _decode_single(self, chunk_bytes: Buffer, chunk_spec: ArraySpec) -> Buffer:
        return self._decode_sync(chunk_bytes, chunk_spec)

    async def decode(self, chunks_and_specs: Iterable[tuple[Buffer | None, ArraySpec]]) -> list[Buffer | None]:
        return [None if b is None else self._decode_sync(b, s) for b, s in chunks_and_specs]


class Zlib(_DeviceBytesCodec, _ZarrZlib):  # type: ignore[misc]
    """zarr's ``numcodecs.zlib``: nvCOMP Deflate behind the zlib header on device buffers, adler32 checked."""

    def _decode_device(self, data: Any) -> Any:
        import cupy as cp

        n = int(data.size)
        head = np.concatenate([data[:2].get(), data[-4:].get()]) if n >= 6 else data.get()
        frame = zlib_frame(head)  # parsed from 6 bytes: its stop is that of a 6-byte stream
        from gdsstore.gpu import nvcomp

        (out,) = nvcomp.decode_batch("gzip", [data[frame.start : n - 4]], [-1])
        if int(adler32_rows(out[None])[0]) != frame.adler32:
            raise ChunkDecodeError("zlib chunk: adler32 mismatch")
        return cp.ascontiguousarray(out)


class Shuffle(_DeviceBytesCodec, _ZarrShuffle):  # type: ignore[misc]
    """zarr's ``numcodecs.shuffle``: a CuPy transpose on device buffers."""

    def _decode_device(self, data: Any) -> Any:
        size = self.codec_config.get("elementsize", 4)
        return unshuffle(data, size if isinstance(size, int) else 4)


class Fletcher32(_DeviceBytesCodec, _ZarrFletcher32):  # type: ignore[misc]
    """zarr's ``numcodecs.fletcher32``: the checksum computed on the GPU for device buffers."""

    def _decode_device(self, data: Any) -> Any:
        n = int(data.size)
        if n < 4:
            raise ChunkDecodeError(f"fletcher32 chunk of {n} bytes is truncated")
        got = int(fletcher32(data[None, : n - 4])[0])
        want = int.from_bytes(data[n - 4 :].get().tobytes(), "little")
        if got != want:
            raise ChunkDecodeError(f"fletcher32 checksum mismatch (stored {want:#010x}, computed {got:#010x})")
        return data[: n - 4]
