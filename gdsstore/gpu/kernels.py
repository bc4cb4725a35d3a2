"""GPU kernels for the byte-level codecs: CRC-32C and adler32 of many chunks at once, and the scatter.

CRC-32C (the zarr ``crc32c`` codec) is a linear function of its state, which lets one chunk be split
into fixed blocks hashed in parallel (one GPU thread each, state 0) and then joined by one thread per
chunk: ``state = shift_B(state) ^ crc(block)``, where ``shift_B`` (feeding ``B`` zero bytes) is a
32x32 bit matrix computed once on the host. :func:`crc32c_blocked` is the same algorithm in numpy;
CI checks it against ``google_crc32c`` so that the kernel's arithmetic is tested without a GPU.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from gdsstore.engine import cuda

__all__ = [
    "ADLER_MAX_ROW",
    "BLOCK",
    "MAX_DIMS",
    "adler32_device",
    "crc32c_blocked",
    "crc32c_device",
    "scatter_arrays",
    "scatter_blocks",
    "shift_matrix",
]

#: Bytes hashed by one GPU thread.
BLOCK = 1024
_POLY = 0x82F63B78  # CRC-32C (Castagnoli), reflected


@functools.cache
def _table() -> np.ndarray:
    t = np.zeros(256, dtype=np.uint32)
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ _POLY if c & 1 else c >> 1
        t[i] = c
    return t


def _update(state: int, data: np.ndarray | bytes) -> int:
    t = _table()
    s = state
    for b in bytes(data):
        s = int(t[(s ^ b) & 0xFF]) ^ (s >> 8)
    return s


@functools.cache
def shift_matrix(nbytes: int) -> np.ndarray:
    """Columns of the linear map "feed ``nbytes`` zero bytes into the CRC state" (``uint32[32]``)."""
    zeros = bytes(nbytes)
    return np.array([_update(1 << j, zeros) for j in range(32)], dtype=np.uint32)


def _apply(mat: np.ndarray, s: int) -> int:
    r = 0
    for j in range(32):
        if (s >> j) & 1:
            r ^= int(mat[j])
    return r


def crc32c_blocked(data: bytes | np.ndarray, block: int = BLOCK) -> int:
    """CRC-32C computed the way the GPU kernel does (per-block CRCs joined by ``shift_matrix``)."""
    buf = np.frombuffer(bytes(data), dtype=np.uint8)
    nfull = buf.size // block
    mat = shift_matrix(block)
    s = 0xFFFFFFFF
    for i in range(nfull):
        s = _apply(mat, s) ^ _update(0, buf[i * block : (i + 1) * block])
    s = _update(s, buf[nfull * block :])
    return s ^ 0xFFFFFFFF


_KERNELS = r"""
#define MAXD 8
#define META (3 + 3 * MAXD)
// One grid row (blockIdx.y) per block of elements to move: a strided source view (a decoded chunk,
// or none: the fill value) into a strided destination view (the output array), any rank <= MAXD.
extern "C" __global__ void scatter_blocks(const long long* meta, int ndim, int itemsize,
                                          unsigned long long fill) {
    const long long* m = meta + (long long)blockIdx.y * META;
    const long long n = m[2];
    const char* src = (const char*)m[0];
    char* dst = (char*)m[1];
    for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < n;
         e += (long long)gridDim.x * blockDim.x) {
        long long rem = e, so = 0, dof = 0;
        for (int d = ndim - 1; d >= 0; --d) {
            long long ext = m[3 + d];
            long long i = rem % ext;
            rem /= ext;
            so += i * m[3 + MAXD + d];
            dof += i * m[3 + 2 * MAXD + d];
        }
        char* o = dst + dof;
        if (src == 0) {
            switch (itemsize) {
                case 1: *(unsigned char*)o = (unsigned char)fill; break;
                case 2: *(unsigned short*)o = (unsigned short)fill; break;
                case 4: *(unsigned int*)o = (unsigned int)fill; break;
                default: *(unsigned long long*)o = fill; break;
            }
        } else {
            const char* i_ = src + so;
            switch (itemsize) {
                case 1: *(unsigned char*)o = *(const unsigned char*)i_; break;
                case 2: *(unsigned short*)o = *(const unsigned short*)i_; break;
                case 4: *(unsigned int*)o = *(const unsigned int*)i_; break;
                default: *(unsigned long long*)o = *(const unsigned long long*)i_; break;
            }
        }
    }
}

extern "C" __global__ void crc32c_blocks(const unsigned long long* block_ptr, const unsigned int* table,
                                         unsigned int* out, long long nblocks, int block) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= nblocks) return;
    const unsigned char* p = (const unsigned char*)block_ptr[i];
    unsigned int s = 0;
    for (int k = 0; k < block; ++k) s = table[(s ^ p[k]) & 0xFFu] ^ (s >> 8);
    out[i] = s;
}

extern "C" __global__ void crc32c_join(const unsigned long long* chunk_ptr, const long long* chunk_len,
                                       const long long* first_block, const unsigned int* block_crc,
                                       const unsigned int* table, const unsigned int* mat,
                                       unsigned int* out, int nchunks, int block) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= nchunks) return;
    long long n = chunk_len[c];
    long long nfull = n / block;
    const unsigned int* crc = block_crc + first_block[c];
    unsigned int s = 0xFFFFFFFFu;
    for (long long i = 0; i < nfull; ++i) {
        unsigned int r = 0;
        for (int j = 0; j < 32; ++j) if ((s >> j) & 1u) r ^= mat[j];
        s = r ^ crc[i];
    }
    const unsigned char* p = (const unsigned char*)chunk_ptr[c];
    for (long long k = nfull * block; k < n; ++k) s = table[(s ^ p[k]) & 0xFFu] ^ (s >> 8);
    out[c] = s ^ 0xFFFFFFFFu;
}

// adler32 (RFC 1950) of each row of a byte matrix, one thread block per row: thread t sums the bytes
// i = t, t + blockDim, ... as a = sum(d[i]) and w = sum((n - i) * d[i]); then a = 1 + sum(a),
// b = n + sum(w), both mod 65521. Rows of at most 2^24 bytes keep w below 2^64.
extern "C" __global__ void adler32_rows(const unsigned char* rows, long long n, long long stride,
                                        unsigned int* out) {
    const unsigned long long M = 65521ULL;
    __shared__ unsigned long long sa[256], sw[256];
    const unsigned char* r = rows + (long long)blockIdx.x * stride;
    unsigned long long a = 0, w = 0;
    for (long long i = threadIdx.x; i < n; i += blockDim.x) {
        unsigned long long d = r[i];
        a += d;
        w += (unsigned long long)(n - i) * d;
    }
    sa[threadIdx.x] = a % M;
    sw[threadIdx.x] = w % M;
    __syncthreads();
    for (int k = blockDim.x / 2; k > 0; k >>= 1) {
        if (threadIdx.x < k) {
            sa[threadIdx.x] += sa[threadIdx.x + k];
            sw[threadIdx.x] += sw[threadIdx.x + k];
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        unsigned long long fa = (1 + sa[0]) % M, fb = ((unsigned long long)n % M + sw[0]) % M;
        out[blockIdx.x] = (unsigned int)((fb << 16) | fa);
    }
}
"""


@functools.cache
def _module() -> Any:
    cp = cuda.cupy_or_none()
    assert cp is not None
    return cp.RawModule(code=_KERNELS)


def crc32c_device(chunks: list[Any]) -> np.ndarray:
    """CRC-32C of each device byte array (cupy ``uint8``, contiguous), computed on the GPU.

    Returns:
        ``uint32`` host array, one value per chunk.
    """
    cp = cuda.cupy_or_none()
    assert cp is not None
    if not chunks:
        return np.zeros(0, dtype=np.uint32)
    mod = _module()
    lens = np.array([int(c.size) for c in chunks], dtype=np.int64)
    ptrs = np.array([int(c.data.ptr) for c in chunks], dtype=np.uint64)
    nfull = lens // BLOCK
    first = np.concatenate([[0], np.cumsum(nfull)[:-1]]).astype(np.int64)
    total_blocks = int(nfull.sum())
    block_ptrs = (
        np.concatenate([p + np.arange(n, dtype=np.uint64) * np.uint64(BLOCK) for p, n in zip(ptrs, nfull)])
        if total_blocks
        else np.zeros(1, dtype=np.uint64)
    )
    table = cp.asarray(_table())
    d_block_crc = cp.zeros(max(1, total_blocks), dtype=cp.uint32)
    threads = 256
    if total_blocks:
        mod.get_function("crc32c_blocks")(
            ((total_blocks + threads - 1) // threads,),
            (threads,),
            (cp.asarray(block_ptrs), table, d_block_crc, np.int64(total_blocks), np.int32(BLOCK)),
        )
    d_out = cp.zeros(len(chunks), dtype=cp.uint32)
    mod.get_function("crc32c_join")(
        ((len(chunks) + threads - 1) // threads,),
        (threads,),
        (
            cp.asarray(ptrs),
            cp.asarray(lens),
            cp.asarray(first),
            d_block_crc,
            table,
            cp.asarray(shift_matrix(BLOCK)),
            d_out,
            np.int32(len(chunks)),
            np.int32(BLOCK),
        ),
    )
    return np.asarray(d_out.get(), dtype=np.uint32)


#: Longest row :func:`adler32_device` sums (its per-thread weighted sums stay below 2**64).
ADLER_MAX_ROW = 1 << 24


def adler32_device(rows: Any) -> Any:
    """adler32 of each row of a 2-D CuPy ``uint8`` array (rows of at most :data:`ADLER_MAX_ROW` bytes,
    each row contiguous), one thread block per row; a CuPy ``uint32`` array. The same sums as
    :func:`gdsstore.archives.codecs.adler32_rows`, in one pass over the bytes (CuPy's integer matrix
    product there takes 8 bytes of temporaries per byte)."""
    cp = cuda.cupy_or_none()
    assert cp is not None
    m, n = int(rows.shape[0]), int(rows.shape[1])
    if n > ADLER_MAX_ROW or (n > 1 and rows.strides[1] != 1):
        raise ValueError(f"adler32_device(): rows of {n} bytes with strides {rows.strides} (at most {ADLER_MAX_ROW}, contiguous)")
    out = cp.empty(m, dtype=cp.uint32)
    if m:
        stride = np.int64(rows.strides[0])
        _module().get_function("adler32_rows")((m,), (256,), (rows, np.int64(n), stride, out))
    return out


#: Highest array rank :func:`scatter_blocks` takes.
MAX_DIMS = 8
_META = 3 + 3 * MAX_DIMS

#: ``(src_ptr or 0 for the fill value, dst_ptr, shape, src_strides, dst_strides)``; strides in bytes.
Block = tuple[int, int, tuple[int, ...], tuple[int, ...], tuple[int, ...]]


def scatter_blocks(blocks: list[Block], itemsize: int, fill: bytes) -> None:
    """Copy many strided views into strided destinations in one kernel launch per 65535 blocks.

    Args:
        blocks: what to copy; every shape has the same rank (at most :data:`MAX_DIMS`).
        itemsize: 1, 2, 4 or 8 bytes.
        fill: the fill value's bytes (``itemsize`` long), written where ``src_ptr`` is 0.
    """
    if not blocks:
        return
    srcs, dsts, shapes, ssts, dsts_st = zip(*blocks)
    n, nd = len(blocks), len(blocks[0][2])
    scatter_arrays(
        np.array(srcs, dtype=np.int64),
        np.array(dsts, dtype=np.int64),
        np.array(shapes, dtype=np.int64).reshape(n, nd),
        np.array(ssts, dtype=np.int64).reshape(n, nd),
        np.array(dsts_st, dtype=np.int64).reshape(n, nd),
        itemsize=itemsize,
        fill=fill,
    )


def scatter_arrays(
    src: np.ndarray,
    dst: np.ndarray,
    shape: np.ndarray,
    src_strides: np.ndarray,
    dst_strides: np.ndarray,
    *,
    itemsize: int,
    fill: bytes,
) -> None:
    """:func:`scatter_blocks` with the blocks given as arrays (one row per block; ``shape`` and the
    strides are ``n x ndim``), so that callers build them vectorized."""
    cp = cuda.cupy_or_none()
    assert cp is not None
    n = len(src)
    if not n:
        return
    if itemsize not in (1, 2, 4, 8):
        raise ValueError(f"scatter_arrays(): itemsize must be 1, 2, 4 or 8, got {itemsize}")
    ndim = int(shape.shape[1])
    if ndim > MAX_DIMS:
        raise ValueError(f"scatter_arrays(): rank {ndim} > {MAX_DIMS}")
    meta = np.zeros((n, _META), dtype=np.int64)
    meta[:, 0] = src  # device pointers fit in 63 bits
    meta[:, 1] = dst
    meta[:, 2] = shape.prod(axis=1)
    meta[:, 3 : 3 + ndim] = shape
    meta[:, 3 + MAX_DIMS : 3 + MAX_DIMS + ndim] = src_strides
    meta[:, 3 + 2 * MAX_DIMS : 3 + 2 * MAX_DIMS + ndim] = dst_strides
    most = int(meta[:, 2].max())
    fill_u64 = np.uint64(int.from_bytes(fill[:itemsize].ljust(8, b"\0"), "little"))
    fn = _module().get_function("scatter_blocks")
    threads = 256
    gx = max(1, min((most + threads - 1) // threads, 1024))
    for start in range(0, n, 65535):
        part = cp.asarray(meta[start : start + 65535])
        fn((gx, part.shape[0]), (threads,), (part, np.int32(ndim), np.int32(itemsize), fill_u64))
