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
    "MIN_RUN",
    "SEG",
    "adler32_device",
    "contiguous_runs",
    "crc32c_blocked",
    "crc32c_device",
    "fill_pattern",
    "launch_scatter",
    "scatter_arrays",
    "scatter_blocks",
    "scatter_meta",
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
#define RUN_META (4 + 3 * MAXD)
#define SEG 4096

// n bytes from s (none: the pattern) to d, one lane of a warp every 32nd T.
template <typename T>
__device__ void copy_run(char* d, const char* s, long long n, int lane, T pattern) {
    T* dv = (T*)d;
    const long long nv = n / (long long)sizeof(T);
    if (s) {
        const T* sv = (const T*)s;
        for (long long i = lane; i < nv; i += 32) dv[i] = sv[i];
    } else {
        for (long long i = lane; i < nv; i += 32) dv[i] = pattern;
    }
}

// One grid row (blockIdx.y) per block made of runs: `rows` runs of `run` contiguous bytes in both views,
// the runs placed by the outer axes (extent 1 where folded into the run). Each warp copies one run's
// segment of up to SEG bytes at a time, 16 bytes a lane where the addresses allow: the index arithmetic
// is per run, not per element.
extern "C" __global__ void scatter_runs(const long long* meta, int ndim, unsigned long long pattern) {
    const long long* m = meta + (long long)blockIdx.y * RUN_META;
    const char* src = (const char*)m[0];
    char* dst = (char*)m[1];
    const long long rows = m[2], run = m[3];
    const long long nseg = (run + SEG - 1) / SEG;
    const long long items = rows * nseg;
    const int lane = threadIdx.x & 31;
    const long long warps = (long long)gridDim.x * (blockDim.x >> 5);
    const unsigned lo32 = (unsigned)pattern, hi32 = (unsigned)(pattern >> 32);
    for (long long w = (long long)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5); w < items; w += warps) {
        long long r = w / nseg;
        const long long lo = (w - r * nseg) * SEG;
        long long so = 0, dof = 0;
        for (int d = ndim - 1; d >= 0 && r; --d) {
            const long long ext = m[4 + d];
            if (ext == 1) continue;
            const long long i = r % ext;
            r /= ext;
            so += i * m[4 + MAXD + d];
            dof += i * m[4 + 2 * MAXD + d];
        }
        const long long n = run - lo < SEG ? run - lo : SEG;
        char* d_ = dst + dof + lo;
        const char* s_ = src ? src + so + lo : 0;
        const unsigned long long a = (unsigned long long)d_ | (unsigned long long)s_ | (unsigned long long)n;
        if ((a & 15) == 0) copy_run<uint4>(d_, s_, n, lane, make_uint4(lo32, hi32, lo32, hi32));
        else if ((a & 7) == 0) copy_run<unsigned long long>(d_, s_, n, lane, pattern);
        else if ((a & 3) == 0) copy_run<unsigned int>(d_, s_, n, lane, lo32);
        else if ((a & 1) == 0) copy_run<unsigned short>(d_, s_, n, lane, (unsigned short)lo32);
        else copy_run<unsigned char>(d_, s_, n, lane, (unsigned char)lo32);
    }
}

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
#: Bytes one warp of ``scatter_runs`` copies at a time (``SEG`` in the kernel).
SEG = 4096
#: Blocks whose contiguous runs are at least this long go to ``scatter_runs`` (a warp a run); shorter runs
#: (narrow chunks, strided selections: runs of one element) to ``scatter_blocks`` (a thread an element).
MIN_RUN = 128

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
    strides are ``n x ndim``), so that callers build them vectorized. Blocks made of long contiguous runs
    (:func:`contiguous_runs`, at least :data:`MIN_RUN` bytes) are copied a run per warp, the others an
    element per thread: two launches at most."""
    if not len(src):
        return
    if itemsize not in (1, 2, 4, 8):
        raise ValueError(f"scatter_arrays(): itemsize must be 1, 2, 4 or 8, got {itemsize}")
    ndim = int(shape.shape[1])
    if ndim > MAX_DIMS:
        raise ValueError(f"scatter_arrays(): rank {ndim} > {MAX_DIMS}")
    launch_scatter(*scatter_meta(src, dst, shape, src_strides, dst_strides, itemsize), ndim, itemsize, fill)


def launch_scatter(runs: np.ndarray, elements: np.ndarray, ndim: int, itemsize: int, fill: bytes) -> None:
    """Launch ``scatter_runs`` and ``scatter_blocks`` over the tables of :func:`scatter_meta` on the current
    stream."""
    # scatter_blocks writes the pattern's low itemsize bytes: the fill value either way
    pattern = np.uint64(int.from_bytes(fill_pattern(fill, itemsize), "little"))
    if len(runs):
        most = int((runs[:, 2] * -(-runs[:, 3] // SEG)).max())  # warps' items (run segments) of the largest block
        _launch("scatter_runs", runs, max(1, min(-(-most // 8), 1024)), (np.int32(ndim), pattern))  # 8 warps a block
    if len(elements):
        most = int(elements[:, 2].max())
        _launch("scatter_blocks", elements, max(1, min(-(-most // 256), 1024)),
                (np.int32(ndim), np.int32(itemsize), pattern))


def fill_pattern(fill: bytes, itemsize: int) -> bytes:
    """The fill value's 8 bytes as ``scatter_runs`` writes them: one element repeated (any 8-byte aligned
    part of a run starts an element).

    Examples:
        >>> fill_pattern(b"\\x01\\x02", 2).hex()
        '0102010201020102'
    """
    return fill[:itemsize] * (8 // itemsize)


def scatter_meta(
    src: np.ndarray, dst: np.ndarray, shape: np.ndarray, src_strides: np.ndarray, dst_strides: np.ndarray,
    itemsize: int,
) -> tuple[np.ndarray, np.ndarray]:
    """The two kernels' tables (int64, a row per block): blocks of runs of at least :data:`MIN_RUN` bytes
    for ``scatter_runs`` (``src, dst, runs, run bytes``, then the outer extents, source and destination
    strides, :data:`MAX_DIMS` each), the others for ``scatter_blocks`` (``src, dst, elements``, then the
    extents and strides)."""
    ndim = shape.shape[1]
    run, outer = contiguous_runs(src, shape, src_strides, dst_strides, itemsize)
    by_run = run >= MIN_RUN
    tables = []
    for rows, head, ext in ((by_run, [run], outer), (~by_run, [], shape)):
        t = np.zeros((int(rows.sum()), 3 + len(head) + 3 * MAX_DIMS), dtype=np.int64)
        t[:, 0] = src[rows]  # device pointers fit in 63 bits
        t[:, 1] = dst[rows]
        t[:, 2] = ext[rows].prod(axis=1)
        for k, col in enumerate(head):
            t[:, 3 + k] = col[rows]
        at = 3 + len(head)
        for k, a in enumerate((ext, src_strides, dst_strides)):
            t[:, at + k * MAX_DIMS : at + k * MAX_DIMS + ndim] = a[rows]
        tables.append(t)
    return tables[0], tables[1]


def _launch(name: str, meta: np.ndarray, gx: int, args: tuple[Any, ...]) -> None:
    """``name`` over the blocks of ``meta`` (one grid row each, 65535 a launch) on the current stream, 256
    threads a block."""
    cp = cuda.cupy_or_none()
    assert cp is not None
    fn = _module().get_function(name)
    for start in range(0, len(meta), 65535):
        part = cp.asarray(meta[start : start + 65535])
        fn((gx, part.shape[0]), (256,), (part, *args))


def contiguous_runs(
    src: np.ndarray, shape: np.ndarray, src_strides: np.ndarray, dst_strides: np.ndarray, itemsize: int
) -> tuple[np.ndarray, np.ndarray]:
    """Each block as runs of contiguous bytes in both views (a fill block, ``src`` 0, in its destination
    alone): the bytes of one run, and the outer extents that place the runs (``shape`` with the axes folded
    into the run set to 1). The innermost axes fold while each one's strides are the run so far; axes of
    extent 1 always fold. A block of no contiguous axis has runs of ``itemsize`` bytes.

    Examples:
        >>> run, outer = contiguous_runs(np.array([1]), np.array([[4, 8]]), np.array([[32, 4]]),
        ...                              np.array([[400, 4]]), 4)
        >>> run.tolist(), outer.tolist()  # a 4 x 8 float32 chunk into rows of 100 floats: 4 runs of 32 bytes
        ([32], [[4, 1]])
    """
    run = np.full(len(shape), itemsize, dtype=np.int64)
    outer = shape.copy()
    folding = np.ones(len(shape), dtype=bool)
    fill = src == 0
    for d in range(shape.shape[1] - 1, -1, -1):
        ext = shape[:, d]
        fits = (ext == 1) | ((fill | (src_strides[:, d] == run)) & (dst_strides[:, d] == run))
        folding &= fits
        run = np.where(folding, run * ext, run)
        outer[:, d] = np.where(folding, 1, ext)
    return run, outer
